// The Llama family (Hugging Face LlamaModel, MistralModel, Qwen2Model: one module, told apart by the config), pre-norm
// decoder with RMSNorm, rotary positions and SwiGLU. With x the layer input [B, n, d], H query heads, G key/value
// heads, k = head_dim:
//   q = RMS_1(x) W_qᵀ [+ b_q]  [B, n, H·k];  k, v likewise [B, n, G·k]    layers.{l}.self_attn.{q,k,v}_proj
//   q, k ← rotary(q), rotary(k) at the real-token positions (rope_theta, rope_scaling default/linear/llama3)
//   P = softmax(q kᵀ/√k + mask), query head h reading key/value head ⌊h H/G⌋ ... (grouped-query attention)
//   a = (P v) W_oᵀ [+ b_o]                                               layers.{l}.self_attn.o_proj
//   h = x + a                                                            (remove_attention_skip: h = a)
//   y = h + W_down(silu(W_gate m) ⊙ (W_up m)), m = RMS_2(h)            layers.{l}.mlp.{gate,up,down}_proj; remove_mlp: y = h
// RMS_1 = input_layernorm, RMS_2 = post_attention_layernorm; embed_tokens, final norm. Biases: Llama attention_bias
// (q, k, v, o) and mlp_bias; Qwen2 q/k/v only. The mask is causal (Mistral/Qwen2: within the sliding window where the
// config sets one, which changes the result only for sequences longer than the window). The LM head (lm_head, or
// embed_tokens when tie_word_embeddings) is not used by any measurement and not loaded.
#include "models/decoder.hpp"

namespace rankscope::models {
namespace {

// The weight γ of an RMSNorm.
struct LlamaRMSNormImpl : torch::nn::Module {
    explicit LlamaRMSNormImpl(int d) : weight(register_parameter("weight", torch::ones({d}))) {}
    at::Tensor weight;
};
TORCH_MODULE(LlamaRMSNorm);

struct LlamaAttentionImpl : torch::nn::Module {
    explicit LlamaAttentionImpl(const HfConfig& c)
        : q_proj(register_module("q_proj", Linear(c.hidden_size, c.heads * c.head_size, c.qkv_bias))),
          k_proj(register_module("k_proj", Linear(c.hidden_size, c.kv_heads * c.head_size, c.qkv_bias))),
          v_proj(register_module("v_proj", Linear(c.hidden_size, c.kv_heads * c.head_size, c.qkv_bias))),
          o_proj(register_module("o_proj", Linear(c.heads * c.head_size, c.hidden_size, c.output_bias))) {}
    Linear q_proj, k_proj, v_proj, o_proj;
};
TORCH_MODULE(LlamaAttention);

struct LlamaMLPImpl : torch::nn::Module {
    explicit LlamaMLPImpl(const HfConfig& c)
        : gate_proj(register_module("gate_proj", Linear(c.hidden_size, c.intermediate_size, c.mlp_bias))),
          up_proj(register_module("up_proj", Linear(c.hidden_size, c.intermediate_size, c.mlp_bias))),
          down_proj(register_module("down_proj", Linear(c.intermediate_size, c.hidden_size, c.mlp_bias))) {}
    Linear gate_proj, up_proj, down_proj;
};
TORCH_MODULE(LlamaMLP);

struct LlamaDecoderLayerImpl : torch::nn::Module {
    explicit LlamaDecoderLayerImpl(const HfConfig& c)
        : self_attn(register_module("self_attn", LlamaAttention(c))), mlp(register_module("mlp", LlamaMLP(c))),
          input_layernorm(register_module("input_layernorm", LlamaRMSNorm(c.hidden_size))),
          post_attention_layernorm(register_module("post_attention_layernorm", LlamaRMSNorm(c.hidden_size))) {}
    LlamaAttention self_attn;
    LlamaMLP mlp;
    LlamaRMSNorm input_layernorm, post_attention_layernorm;
};
TORCH_MODULE(LlamaDecoderLayer);

struct LlamaModelImpl : torch::nn::Module {
    explicit LlamaModelImpl(const HfConfig& c)
        : embed_tokens(register_module("embed_tokens", Embedding(c.vocab_size, c.hidden_size))),
          layers(register_module("layers", torch::nn::ModuleList())), norm(register_module("norm", LlamaRMSNorm(c.hidden_size))) {
        for (int l = 0; l < c.layers; ++l) layers->push_back(LlamaDecoderLayer(c));
    }
    Embedding embed_tokens;
    torch::nn::ModuleList layers;
    LlamaRMSNorm norm;
};
TORCH_MODULE(LlamaModel);

std::vector<at::Tensor> llama_forward(torch::nn::Module& top, const HfConfig& c, const ModelBatch& batch,
                                      const std::vector<Surgery>& surgeries, const std::vector<Recorder*>& recorders,
                                      Linears& linear, LayerSource& source) {
    auto& model = dynamic_cast<LlamaModelImpl&>(top);
    const at::Tensor& mask = batch.attention_mask;  // [B, n], 1 = real token
    const std::size_t S = surgeries.size();
    auto norm = [&](const LlamaRMSNorm& rms, const at::Tensor& x, const Surgery& surgery) {
        return rms_norm(x, rms->weight, c.layer_norm_eps, surgery, mask);
    };
    const at::Tensor embedded = source.token_embedding(batch.input_ids);  // [B, n, d]
    const RotaryTables rotary = rotary_tables(real_token_positions(mask), c, embedded.options());
    // The sliding window changes the mask only when a query can see more than `window` keys.
    std::vector<at::Tensor> x(S, embedded), full_causal(S), in_window(S);
    for (std::size_t s = 0; s < S; ++s) {
        record(recorders[s], "hook_embed", embedded);
        full_causal[s] = attention_allowed(mask, surgeries[s].bidirectional, 0);  // [B, 1, n, n]
        const bool windowed = c.sliding_window > 0 && mask.size(1) > c.sliding_window && !surgeries[s].bidirectional;
        in_window[s] = windowed ? attention_allowed(mask, false, c.sliding_window) : full_causal[s];
    }
    for (int l = 0; l < c.layers; ++l) {
        const auto fetched = source.layer(l);
        auto& layer = dynamic_cast<LlamaDecoderLayerImpl&>(*fetched);
        auto& attn = *layer.self_attn;
        auto& mlp = *layer.mlp;
        for (std::size_t s = 0; s < S; ++s) {
            const Surgery& surgery = surgeries[s];
            Recorder* recorder = recorders[s];
            record(recorder, block_hook(l, "hook_resid_pre"), x[s]);
            const at::Tensor m = norm(layer.input_layernorm, x[s], surgery);
            const at::Tensor q = apply_rotary(linear(attn.q_proj, m), c.heads, rotary);     // [B, n, H·k]
            const at::Tensor k = apply_rotary(linear(attn.k_proj, m), c.kv_heads, rotary);  // [B, n, G·k]
            const at::Tensor& allowed = c.sliding_at(l) ? in_window[s] : full_causal[s];
            const auto attention = grouped_query_attention(q, k, linear(attn.v_proj, m), c.heads, c.kv_heads, allowed);
            record(recorder, block_hook(l, "attn.hook_pattern"), attention.pattern);
            const at::Tensor a = record(recorder, block_hook(l, "hook_attn_out"), linear(attn.o_proj, attention.context));
            const at::Tensor h = surgery.remove_attention_skip ? a : x[s] + a;
            if (surgery.remove_mlp) {
                x[s] = h;
            } else {
                const at::Tensor u = norm(layer.post_attention_layernorm, h, surgery);
                x[s] = h + linear(mlp.down_proj, activation_in_place(c.activation, linear(mlp.gate_proj, u)).mul_(linear(mlp.up_proj, u)));
            }
            record(recorder, block_hook(l, "hook_resid_post"), x[s]);
        }
    }
    std::vector<at::Tensor> outputs;
    for (std::size_t s = 0; s < S; ++s)
        outputs.push_back(record(recorders[s], "ln_final.hook_normalized", norm(model.norm, x[s], surgeries[s])));
    return outputs;
}

}  // namespace

const DecoderLayout& llama_layout() {
    static const DecoderLayout layout{
        "embed_tokens.weight", [](const HfConfig& c) { return LlamaDecoderLayer(c).ptr(); },
        [](const HfConfig& c) { return LlamaModel(c).ptr(); }, &llama_forward};
    return layout;
}

std::unique_ptr<EncoderModel> make_llama(const HfConfig& config, Draw draw) {
    LlamaModel module(config);
    if (draw == Draw::Yes)
        init_decoder(*module, config.initializer_range, {"layernorm", "norm.weight"}, "", config.layers,
                     "embed_tokens.weight", config.pad_token_id);
    return std::make_unique<DecoderModel>(config, module.ptr(), module->layers, module->embed_tokens, &llama_forward);
}

}  // namespace rankscope::models
