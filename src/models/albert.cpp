// ALBERT (Hugging Face AlbertModel): factorised embedding (vocab × E, then E → d) and one shared layer applied
// num_hidden_layers times. Per application, with x [B, n, d]:
//   a = LN_attn(dense(P V) [+ x])                        attention.{query,key,value,dense,LayerNorm}
//   y = LN_full(ffn_output(act(ffn a)) + a)              ffn, ffn_output, full_layer_layer_norm
// Surgery: remove_attention_skip drops "+ x"; remove_mlp makes y = a. With official_compat, "no MLP" keeps the
// official code's defect: y = LN_full(act(a) + a).
#include <cmath>

#include "models/common.hpp"
#include "rankscope/error.hpp"

namespace rankscope::models {
namespace {

using torch::nn::LayerNormOptions;

struct AlbertAttentionImpl : torch::nn::Module {
    AlbertAttentionImpl(int d, double eps)
        : query(register_module("query", Linear(d, d))), key(register_module("key", Linear(d, d))),
          value(register_module("value", Linear(d, d))), dense(register_module("dense", Linear(d, d))),
          LayerNorm(register_module("LayerNorm", torch::nn::LayerNorm(LayerNormOptions({d}).eps(eps)))) {}
    Linear query, key, value, dense;
    torch::nn::LayerNorm LayerNorm;
};
TORCH_MODULE(AlbertAttention);

struct AlbertLayerImpl : torch::nn::Module {
    explicit AlbertLayerImpl(const HfConfig& c)
        : attention(register_module("attention", AlbertAttention(c.hidden_size, c.layer_norm_eps))),
          ffn(register_module("ffn", Linear(c.hidden_size, c.intermediate_size))),
          ffn_output(register_module("ffn_output", Linear(c.intermediate_size, c.hidden_size))),
          full_layer_layer_norm(register_module(
              "full_layer_layer_norm", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))) {}
    AlbertAttention attention;
    Linear ffn, ffn_output;
    torch::nn::LayerNorm full_layer_layer_norm;
};
TORCH_MODULE(AlbertLayer);

struct AlbertLayerGroupImpl : torch::nn::Module {
    explicit AlbertLayerGroupImpl(const HfConfig& c) : albert_layers(register_module("albert_layers", torch::nn::ModuleList())) {
        albert_layers->push_back(AlbertLayer(c));
    }
    torch::nn::ModuleList albert_layers;
};
TORCH_MODULE(AlbertLayerGroup);

struct AlbertTransformerImpl : torch::nn::Module {
    explicit AlbertTransformerImpl(const HfConfig& c)
        : embedding_hidden_mapping_in(register_module("embedding_hidden_mapping_in", Linear(c.embedding_size, c.hidden_size))),
          albert_layer_groups(register_module("albert_layer_groups", torch::nn::ModuleList())) {
        albert_layer_groups->push_back(AlbertLayerGroup(c));
    }
    Linear embedding_hidden_mapping_in;
    torch::nn::ModuleList albert_layer_groups;
};
TORCH_MODULE(AlbertTransformer);

struct AlbertEmbeddingsImpl : torch::nn::Module {
    explicit AlbertEmbeddingsImpl(const HfConfig& c)
        : word_embeddings(register_module("word_embeddings", Embedding(c.vocab_size, c.embedding_size))),
          position_embeddings(register_module("position_embeddings", Embedding(c.max_position_embeddings, c.embedding_size))),
          token_type_embeddings(register_module("token_type_embeddings", Embedding(c.type_vocab_size, c.embedding_size))),
          LayerNorm(register_module("LayerNorm", torch::nn::LayerNorm(LayerNormOptions({c.embedding_size}).eps(c.layer_norm_eps)))) {}
    Embedding word_embeddings, position_embeddings, token_type_embeddings;
    torch::nn::LayerNorm LayerNorm;
};
TORCH_MODULE(AlbertEmbeddings);

struct AlbertModelImpl : torch::nn::Module {
    explicit AlbertModelImpl(const HfConfig& c)
        : embeddings(register_module("embeddings", AlbertEmbeddings(c))),
          encoder(register_module("encoder", AlbertTransformer(c))),
          pooler(register_module("pooler", Linear(c.hidden_size, c.hidden_size))) {}
    AlbertEmbeddings embeddings;
    AlbertTransformer encoder;
    Linear pooler;
};
TORCH_MODULE(AlbertModel);


at::Tensor albert_forward(AlbertModelImpl& model, const HfConfig& c, const ModelBatch& batch, const Surgery& surgery,
                          Recorder* recorder, Linears& linear) {
    const auto n = batch.input_ids.size(1);
    const at::Tensor positions = torch::arange(n, batch.input_ids.options().dtype(torch::kLong)).unsqueeze(0);
    auto& e = *model.embeddings;
    const at::Tensor embedded = e.LayerNorm(e.word_embeddings(batch.input_ids) + e.position_embeddings(positions) +
                                            e.token_type_embeddings(batch.token_type_ids));
    at::Tensor h = record(recorder, "hook_embed", linear(model.encoder->embedding_hidden_mapping_in, embedded));
    const at::Tensor mask = additive_key_mask(batch.attention_mask, h.scalar_type());
    auto group = model.encoder->albert_layer_groups->ptr<AlbertLayerGroupImpl>(0);
    auto& layer = *group->albert_layers->ptr<AlbertLayerImpl>(0);
    auto& attention = *layer.attention;
    // One shared layer, applied c.layers times.
    const PostLnLayer shared{attention.query, attention.key, attention.value, attention.dense, attention.LayerNorm,
                             layer.ffn, layer.ffn_output, layer.full_layer_layer_norm};
    for (int l = 0; l < c.layers; ++l)
        h = post_ln_layer(shared, h, mask, l, c, surgery, surgery.official_compat, recorder, linear);
    return h;
}

}  // namespace

std::unique_ptr<EncoderModel> make_albert(const HfConfig& config, Draw draw) {
    if (config.hidden_groups != 1) throw Error("ALBERT with num_hidden_groups != 1 is not supported", config.path);
    AlbertModel module(config);
    if (draw == Draw::Yes)
        init_like_from_config(*module, config.initializer_range, {"embeddings.word_embeddings.weight"}, config.pad_token_id);
    return std::make_unique<ModuleModel<AlbertModel, decltype(&albert_forward)>>(config, module, &albert_forward);
}

}  // namespace rankscope::models
