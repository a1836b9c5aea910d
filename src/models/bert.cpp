// BERT (Hugging Face BertModel) and RoBERTa (RobertaModel: the same modules and names; only the positions differ),
// post-LN. Per layer, with x the input [B, n, d]:
//   P = softmax(Q Kᵀ/√(d/H) + mask), Q = x W_qᵀ + b_q ...            attention.self.{query,key,value}
//   a = LN(dense(P V) [+ x])                                          attention.output.{dense,LayerNorm}
//   y = LN(dense_2(act(dense_1 a)) + a)                               intermediate.dense, output.{dense,LayerNorm}
// Surgery: remove_attention_skip drops "+ x"; remove_mlp makes y = a.
#include <cmath>

#include "models/common.hpp"

namespace rankscope::models {
namespace {

using torch::nn::LayerNorm;
using torch::nn::LayerNormOptions;

struct BertSelfAttentionImpl : torch::nn::Module {
    BertSelfAttentionImpl(int d)
        : query(register_module("query", Linear(d, d))), key(register_module("key", Linear(d, d))),
          value(register_module("value", Linear(d, d))) {}
    Linear query, key, value;
};
TORCH_MODULE(BertSelfAttention);

struct BertSelfOutputImpl : torch::nn::Module {
    BertSelfOutputImpl(int d, double eps)
        : dense(register_module("dense", Linear(d, d))),
          LayerNorm(register_module("LayerNorm", torch::nn::LayerNorm(LayerNormOptions({d}).eps(eps)))) {}
    Linear dense;
    torch::nn::LayerNorm LayerNorm;
};
TORCH_MODULE(BertSelfOutput);

struct BertAttentionImpl : torch::nn::Module {
    BertAttentionImpl(int d, double eps)
        : self(register_module("self", BertSelfAttention(d))), output(register_module("output", BertSelfOutput(d, eps))) {}
    BertSelfAttention self;
    BertSelfOutput output;
};
TORCH_MODULE(BertAttention);

struct BertIntermediateImpl : torch::nn::Module {
    BertIntermediateImpl(int d, int m) : dense(register_module("dense", Linear(d, m))) {}
    Linear dense;
};
TORCH_MODULE(BertIntermediate);

struct BertOutputImpl : torch::nn::Module {
    BertOutputImpl(int m, int d, double eps)
        : dense(register_module("dense", Linear(m, d))),
          LayerNorm(register_module("LayerNorm", torch::nn::LayerNorm(LayerNormOptions({d}).eps(eps)))) {}
    Linear dense;
    torch::nn::LayerNorm LayerNorm;
};
TORCH_MODULE(BertOutput);

struct BertLayerImpl : torch::nn::Module {
    BertLayerImpl(const HfConfig& c)
        : attention(register_module("attention", BertAttention(c.hidden_size, c.layer_norm_eps))),
          intermediate(register_module("intermediate", BertIntermediate(c.hidden_size, c.intermediate_size))),
          output(register_module("output", BertOutput(c.intermediate_size, c.hidden_size, c.layer_norm_eps))) {}
    BertAttention attention;
    BertIntermediate intermediate;
    BertOutput output;
};
TORCH_MODULE(BertLayer);

struct BertEncoderImpl : torch::nn::Module {
    explicit BertEncoderImpl(const HfConfig& c) : layer(register_module("layer", torch::nn::ModuleList())) {
        for (int l = 0; l < c.layers; ++l) layer->push_back(BertLayer(c));
    }
    torch::nn::ModuleList layer;
};
TORCH_MODULE(BertEncoder);

struct BertEmbeddingsImpl : torch::nn::Module {
    explicit BertEmbeddingsImpl(const HfConfig& c)
        : word_embeddings(register_module("word_embeddings", Embedding(c.vocab_size, c.hidden_size))),
          position_embeddings(register_module("position_embeddings", Embedding(c.max_position_embeddings, c.hidden_size))),
          token_type_embeddings(register_module("token_type_embeddings", Embedding(c.type_vocab_size, c.hidden_size))),
          LayerNorm(register_module("LayerNorm", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))) {}
    Embedding word_embeddings, position_embeddings, token_type_embeddings;
    torch::nn::LayerNorm LayerNorm;
};
TORCH_MODULE(BertEmbeddings);

struct BertPoolerImpl : torch::nn::Module {
    explicit BertPoolerImpl(int d) : dense(register_module("dense", Linear(d, d))) {}
    Linear dense;
};
TORCH_MODULE(BertPooler);

struct BertModelImpl : torch::nn::Module {
    explicit BertModelImpl(const HfConfig& c)
        : embeddings(register_module("embeddings", BertEmbeddings(c))),
          encoder(register_module("encoder", BertEncoder(c))), pooler(register_module("pooler", BertPooler(c.hidden_size))) {}
    BertEmbeddings embeddings;
    BertEncoder encoder;
    BertPooler pooler;
};
TORCH_MODULE(BertModel);


at::Tensor bert_forward(BertModelImpl& model, const HfConfig& c, const ModelBatch& batch, const Surgery& surgery,
                        Recorder* recorder, Linears& linear) {
    const auto n = batch.input_ids.size(1);
    // BERT: 0..n-1. RoBERTa: the tokens that are not pad_token_id count from pad_token_id + 1, padding sits at
    // pad_token_id (create_position_ids_from_input_ids: cumsum(ids != pad) * (ids != pad) + pad).
    at::Tensor positions;
    if (c.position_offset > 0) {
        const at::Tensor not_pad = batch.input_ids.ne(c.pad_token_id).to(torch::kLong);
        positions = not_pad.cumsum(1) * not_pad + c.pad_token_id;
    } else {
        positions = torch::arange(n, batch.input_ids.options().dtype(torch::kLong)).unsqueeze(0);
    }
    auto& e = *model.embeddings;
    at::Tensor h = e.LayerNorm(e.word_embeddings(batch.input_ids) + e.position_embeddings(positions) +
                               e.token_type_embeddings(batch.token_type_ids));
    record(recorder, "hook_embed", h);
    const at::Tensor mask = additive_key_mask(batch.attention_mask, h.scalar_type());
    for (int l = 0; l < c.layers; ++l) {
        auto& layer = *model.encoder->layer->ptr<BertLayerImpl>(static_cast<std::size_t>(l));
        auto& self = *layer.attention->self;
        h = post_ln_layer({self.query, self.key, self.value, layer.attention->output->dense, layer.attention->output->LayerNorm,
                           layer.intermediate->dense, layer.output->dense, layer.output->LayerNorm},
                          h, mask, l, c, surgery, false, recorder, linear);
    }
    return h;
}

}  // namespace

std::unique_ptr<EncoderModel> make_bert(const HfConfig& config, Draw draw) {
    BertModel module(config);
    if (draw == Draw::Yes)
        // RoBERTa's position embedding has padding_idx too (the row padding sits at).
        init_like_from_config(*module, config.initializer_range,
                              config.position_offset > 0
                                  ? std::vector<std::string>{"embeddings.word_embeddings.weight",
                                                             "embeddings.position_embeddings.weight"}
                                  : std::vector<std::string>{"embeddings.word_embeddings.weight"},
                              config.pad_token_id);
    return std::make_unique<ModuleModel<BertModel, decltype(&bert_forward)>>(config, module, &bert_forward);
}

}  // namespace rankscope::models
