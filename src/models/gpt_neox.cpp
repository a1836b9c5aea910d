// GPT-NeoX (Hugging Face GPTNeoXModel: the Pythia suite, GPT-NeoX-20B), pre-LN decoder with partial rotary positions
// and, by default, a parallel block. With x the layer input [B, n, d], H heads of k = d/H features:
//   [q_h | k_h | v_h] = (LN_1(x) W_qkvᵀ + b_qkv) per head h      layers.{l}.attention.query_key_value  [3d, d]
//                    (the 3d outputs are laid out head by head: [H, 3, k], not [3, H, k] as GPT-2's c_attn)
//   q, k ← rotary on their first r = int(k′ · rotary_pct) features per head (k′ = config.json's head_dim if it has one,
//          else k; rotary_emb_base), at the real-token positions
//   P = softmax(q kᵀ/√k + causal mask)                           [B, H, n, n]
//   a = (P v) W_denseᵀ + b_dense                                 layers.{l}.attention.dense
//   parallel (use_parallel_residual, the default):
//     y = x + a + m,  m = W_4h→h act(W_h→4h LN_2(x) + b) + b     layers.{l}.mlp.dense_h_to_4h, dense_4h_to_h
//     remove_attention_skip drops x, remove_mlp drops m (SAN: y = a; SAN+skip: x + a; SAN+MLP: a + m)
//   sequential (use_parallel_residual false), as GPT-2:
//     h = x + a (remove_attention_skip: h = a);  y = h + mlp(LN_2(h)) (remove_mlp: y = h)
// LN_1 = input_layernorm, LN_2 = post_attention_layernorm; embed_in (no position table), final_layer_norm. attention_bias
// false drops b_qkv and b_dense. The LM head (embed_out) is not used by any measurement and not loaded; older
// checkpoints' buffers attention.bias / attention.masked_bias / attention.rotary_emb.inv_freq are ignored, as
// transformers ignores them.
#include "models/decoder.hpp"

namespace rankscope::models {
namespace {

using torch::nn::LayerNorm;
using torch::nn::LayerNormOptions;

LayerNorm make_layer_norm(const HfConfig& c) { return LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)); }

struct GPTNeoXAttentionImpl : torch::nn::Module {
    explicit GPTNeoXAttentionImpl(const HfConfig& c)
        : query_key_value(register_module("query_key_value", Linear(c.hidden_size, 3 * c.hidden_size, c.qkv_bias))),
          dense(register_module("dense", Linear(c.hidden_size, c.hidden_size, c.output_bias))) {}
    Linear query_key_value, dense;
};
TORCH_MODULE(GPTNeoXAttention);

struct GPTNeoXMLPImpl : torch::nn::Module {
    explicit GPTNeoXMLPImpl(const HfConfig& c)
        : dense_h_to_4h(register_module("dense_h_to_4h", Linear(c.hidden_size, c.intermediate_size))),
          dense_4h_to_h(register_module("dense_4h_to_h", Linear(c.intermediate_size, c.hidden_size))) {}
    Linear dense_h_to_4h, dense_4h_to_h;
};
TORCH_MODULE(GPTNeoXMLP);

struct GPTNeoXLayerImpl : torch::nn::Module {
    explicit GPTNeoXLayerImpl(const HfConfig& c)
        : input_layernorm(register_module("input_layernorm", make_layer_norm(c))),
          post_attention_layernorm(register_module("post_attention_layernorm", make_layer_norm(c))),
          attention(register_module("attention", GPTNeoXAttention(c))), mlp(register_module("mlp", GPTNeoXMLP(c))) {}
    LayerNorm input_layernorm, post_attention_layernorm;
    GPTNeoXAttention attention;
    GPTNeoXMLP mlp;
};
TORCH_MODULE(GPTNeoXLayer);

struct GPTNeoXModelImpl : torch::nn::Module {
    explicit GPTNeoXModelImpl(const HfConfig& c)
        : embed_in(register_module("embed_in", Embedding(c.vocab_size, c.hidden_size))),
          layers(register_module("layers", torch::nn::ModuleList())),
          final_layer_norm(register_module("final_layer_norm", make_layer_norm(c))) {
        for (int l = 0; l < c.layers; ++l) layers->push_back(GPTNeoXLayer(c));
    }
    Embedding embed_in;
    torch::nn::ModuleList layers;
    LayerNorm final_layer_norm;
};
TORCH_MODULE(GPTNeoXModel);

std::vector<at::Tensor> gpt_neox_forward(torch::nn::Module& top, const HfConfig& c, const ModelBatch& batch,
                                         const std::vector<Surgery>& surgeries, const std::vector<Recorder*>& recorders,
                                         Linears& linear, LayerSource& source) {
    auto& model = dynamic_cast<GPTNeoXModelImpl&>(top);
    const at::Tensor& mask = batch.attention_mask;  // [B, n], 1 = real token
    const std::size_t S = surgeries.size();
    auto norm = [&](const LayerNorm& ln, const at::Tensor& x, const Surgery& surgery) {
        return decoder_layer_norm(x, ln->weight, ln->bias, ln->options.eps(), surgery, mask);
    };
    const at::Tensor embedded = source.token_embedding(batch.input_ids);  // [B, n, d]
    const RotaryTables rotary = rotary_tables(real_token_positions(mask), c, embedded.options());
    const auto B = embedded.size(0), n = embedded.size(1);
    std::vector<at::Tensor> x(S, embedded), allowed(S);
    for (std::size_t s = 0; s < S; ++s) {
        record(recorders[s], "hook_embed", embedded);
        allowed[s] = attention_allowed(mask, surgeries[s].bidirectional, 0);  // [B, 1, n, n]
    }
    for (int l = 0; l < c.layers; ++l) {
        const auto fetched = source.layer(l);
        auto& layer = dynamic_cast<GPTNeoXLayerImpl&>(*fetched);
        auto& attn = *layer.attention;
        auto& mlp = *layer.mlp;
        auto feed_forward = [&](const at::Tensor& input, const Surgery& surgery) {
            const at::Tensor u = norm(layer.post_attention_layernorm, input, surgery);
            return linear(mlp.dense_4h_to_h, activation_in_place(c.activation, linear(mlp.dense_h_to_4h, u)));
        };
        for (std::size_t s = 0; s < S; ++s) {
            const Surgery& surgery = surgeries[s];
            Recorder* recorder = recorders[s];
            record(recorder, block_hook(l, "hook_resid_pre"), x[s]);
            // [B, n, H, 3, k]: head h's query, key and value are adjacent.
            const at::Tensor qkv = linear(attn.query_key_value, norm(layer.input_layernorm, x[s], surgery))
                                       .view({B, n, c.heads, 3, c.head_size});
            auto part = [&](int i) { return qkv.select(3, i).reshape({B, n, c.heads * c.head_size}); };  // [B, n, H·k]
            const auto attention = grouped_query_attention(apply_rotary(part(0), c.heads, rotary),
                                                           apply_rotary(part(1), c.heads, rotary), part(2), c.heads,
                                                           c.heads, allowed[s]);
            record(recorder, block_hook(l, "attn.hook_pattern"), attention.pattern);
            const at::Tensor a = record(recorder, block_hook(l, "hook_attn_out"), linear(attn.dense, attention.context));
            if (c.parallel_residual) {
                at::Tensor y = surgery.remove_attention_skip ? a : x[s] + a;
                if (!surgery.remove_mlp) y = y + feed_forward(x[s], surgery);  // the MLP reads the layer input
                x[s] = y;
            } else {
                const at::Tensor h = surgery.remove_attention_skip ? a : x[s] + a;
                x[s] = surgery.remove_mlp ? h : h + feed_forward(h, surgery);
            }
            record(recorder, block_hook(l, "hook_resid_post"), x[s]);
        }
    }
    std::vector<at::Tensor> outputs;
    for (std::size_t s = 0; s < S; ++s)
        outputs.push_back(record(recorders[s], "ln_final.hook_normalized", norm(model.final_layer_norm, x[s], surgeries[s])));
    return outputs;
}

}  // namespace

const DecoderLayout& gpt_neox_layout() {
    static const DecoderLayout layout{
        "embed_in.weight", [](const HfConfig& c) { return GPTNeoXLayer(c).ptr(); },
        [](const HfConfig& c) { return GPTNeoXModel(c).ptr(); }, &gpt_neox_forward};
    return layout;
}

std::unique_ptr<EncoderModel> make_gpt_neox(const HfConfig& config, Draw draw) {
    GPTNeoXModel module(config);
    // GPTNeoXPreTrainedModel's init: every matrix and the embedding normal(0, initializer_range), biases 0, LayerNorms
    // 1 and 0; no scaled projection, no padding row.
    if (draw == Draw::Yes)
        init_decoder(*module, config.initializer_range, {"layernorm", "layer_norm"}, "", config.layers, "", -1);
    return std::make_unique<DecoderModel>(config, module.ptr(), module->layers, module->embed_in, &gpt_neox_forward);
}

}  // namespace rankscope::models
