// DistilBERT (Hugging Face DistilBertModel): BERT's post-LN layer under other names, no token types, no pooler.
// With x the input [B, n, d]:
//   h₀ = LN(word_embeddings(ids) + position_embeddings(0..n-1))            embeddings.{word,position}_embeddings, LayerNorm
//   P = softmax(Q Kᵀ/√(d/H) + mask), Q = x W_qᵀ + b_q ...                 transformer.layer.{l}.attention.{q,k,v}_lin
//   a = LN(out_lin(P V) [+ x])                                            attention.out_lin, sa_layer_norm
//   y = LN(lin2(act(lin1 a)) + a)                                         ffn.lin1, ffn.lin2, output_layer_norm
// Surgery: remove_attention_skip drops "+ x"; remove_mlp makes y = a. LayerNorm eps is 1e-12 (not in the config).
// sinusoidal_pos_embds: the position table is the fixed sinusoid (checkpoints store it; a random init computes it).
#include <cmath>

#include "models/common.hpp"

namespace rankscope::models {
namespace {

using torch::nn::LayerNormOptions;

struct DistilBertAttentionImpl : torch::nn::Module {
    explicit DistilBertAttentionImpl(int d)
        : q_lin(register_module("q_lin", Linear(d, d))), k_lin(register_module("k_lin", Linear(d, d))),
          v_lin(register_module("v_lin", Linear(d, d))), out_lin(register_module("out_lin", Linear(d, d))) {}
    Linear q_lin, k_lin, v_lin, out_lin;
};
TORCH_MODULE(DistilBertAttention);

struct DistilBertFfnImpl : torch::nn::Module {
    DistilBertFfnImpl(int d, int m) : lin1(register_module("lin1", Linear(d, m))), lin2(register_module("lin2", Linear(m, d))) {}
    Linear lin1, lin2;
};
TORCH_MODULE(DistilBertFfn);

struct DistilBertBlockImpl : torch::nn::Module {
    explicit DistilBertBlockImpl(const HfConfig& c)
        : attention(register_module("attention", DistilBertAttention(c.hidden_size))),
          sa_layer_norm(register_module("sa_layer_norm", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))),
          ffn(register_module("ffn", DistilBertFfn(c.hidden_size, c.intermediate_size))),
          output_layer_norm(register_module("output_layer_norm",
                                            torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))) {}
    DistilBertAttention attention;
    torch::nn::LayerNorm sa_layer_norm;
    DistilBertFfn ffn;
    torch::nn::LayerNorm output_layer_norm;
};
TORCH_MODULE(DistilBertBlock);

struct DistilBertTransformerImpl : torch::nn::Module {
    explicit DistilBertTransformerImpl(const HfConfig& c) : layer(register_module("layer", torch::nn::ModuleList())) {
        for (int l = 0; l < c.layers; ++l) layer->push_back(DistilBertBlock(c));
    }
    torch::nn::ModuleList layer;
};
TORCH_MODULE(DistilBertTransformer);

struct DistilBertEmbeddingsImpl : torch::nn::Module {
    explicit DistilBertEmbeddingsImpl(const HfConfig& c)
        : word_embeddings(register_module("word_embeddings", Embedding(c.vocab_size, c.hidden_size))),
          position_embeddings(register_module("position_embeddings", Embedding(c.max_position_embeddings, c.hidden_size))),
          LayerNorm(register_module("LayerNorm", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))) {}
    Embedding word_embeddings, position_embeddings;
    torch::nn::LayerNorm LayerNorm;
};
TORCH_MODULE(DistilBertEmbeddings);

struct DistilBertModelImpl : torch::nn::Module {
    explicit DistilBertModelImpl(const HfConfig& c)
        : embeddings(register_module("embeddings", DistilBertEmbeddings(c))),
          transformer(register_module("transformer", DistilBertTransformer(c))) {}
    DistilBertEmbeddings embeddings;
    DistilBertTransformer transformer;
};
TORCH_MODULE(DistilBertModel);

at::Tensor distilbert_forward(DistilBertModelImpl& model, const HfConfig& c, const ModelBatch& batch,
                              const Surgery& surgery, Recorder* recorder, Linears& linear) {
    const auto n = batch.input_ids.size(1);
    const at::Tensor positions = torch::arange(n, batch.input_ids.options().dtype(torch::kLong)).unsqueeze(0);
    auto& e = *model.embeddings;
    at::Tensor h = e.LayerNorm(e.word_embeddings(batch.input_ids) + e.position_embeddings(positions));
    record(recorder, "hook_embed", h);
    const at::Tensor mask = additive_key_mask(batch.attention_mask, h.scalar_type());
    for (int l = 0; l < c.layers; ++l) {
        auto& layer = *model.transformer->layer->ptr<DistilBertBlockImpl>(static_cast<std::size_t>(l));
        auto& attention = *layer.attention;
        h = post_ln_layer({attention.q_lin, attention.k_lin, attention.v_lin, attention.out_lin, layer.sa_layer_norm,
                           layer.ffn->lin1, layer.ffn->lin2, layer.output_layer_norm},
                          h, mask, l, c, surgery, false, recorder, linear);
    }
    return h;
}

}  // namespace

at::Tensor sinusoidal_position_table(std::int64_t positions, std::int64_t dim) {
    // Hugging Face's create_sinusoidal_embeddings: angle(p, j) = p / 10000^(2⌊j/2⌋ / dim); even columns sin, odd cos.
    const at::Tensor p = torch::arange(positions, torch::kDouble).unsqueeze(1);                   // [P, 1]
    const at::Tensor pair = torch::arange(dim, torch::kLong).div(2, "floor").to(torch::kDouble);  // ⌊j/2⌋
    const at::Tensor angle = p / torch::pow(10000.0, 2.0 * pair / static_cast<double>(dim)).unsqueeze(0);
    const at::Tensor even = torch::arange(dim, torch::kLong).remainder(2).eq(0).unsqueeze(0);
    return torch::where(even, angle.sin(), angle.cos()).to(torch::kFloat);
}

std::unique_ptr<EncoderModel> make_distilbert(const HfConfig& config, Draw draw) {
    DistilBertModel module(config);
    if (draw == Draw::Yes) {
        init_like_from_config(*module, config.initializer_range, {"embeddings.word_embeddings.weight"}, config.pad_token_id);
        if (config.sinusoidal_positions) {
            torch::NoGradGuard no_grad;
            module->embeddings->position_embeddings->weight.copy_(
                sinusoidal_position_table(config.max_position_embeddings, config.hidden_size));
        }
    }
    return std::make_unique<ModuleModel<DistilBertModel, decltype(&distilbert_forward)>>(config, module, &distilbert_forward);
}

}  // namespace rankscope::models
