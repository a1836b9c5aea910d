// GPT-2 (Hugging Face GPT2Model), pre-LN decoder. With x the layer input [B, n, d]:
//   [q | k | v] = LN_1(x) W_attn + b_attn          h.{l}.attn.c_attn   (Conv1D: weight stored [d, 3d], y = x W + b)
//   P = softmax(q kᵀ/√(d/H) + causal mask)          [B, H, n, n]
//   a = (P v) W_proj + b_proj                        h.{l}.attn.c_proj  (Conv1D [d, d])
//   h = x + a                                        (remove_attention_skip: h = a)
//   y = h + c_proj(gelu_new(c_fc(LN_2(h))))         h.{l}.mlp.c_fc [d, 4d], h.{l}.mlp.c_proj [4d, d]; remove_mlp: y = h
// Embeddings wte(ids) + wpe(positions); final ln_f. The LM head is tied to wte and not used. The checkpoint's legacy
// buffers h.{l}.attn.bias / h.{l}.attn.masked_bias (the causal mask as a tensor) are not parameters and are ignored.
#include "models/decoder.hpp"

namespace rankscope::models {
namespace {

using torch::nn::LayerNorm;
using torch::nn::LayerNormOptions;

// Hugging Face's Conv1D: a linear layer whose weight is stored [in, out]; y = x W + b.
struct Conv1DImpl : torch::nn::Module {
    Conv1DImpl(int in, int out)
        : weight(register_parameter("weight", torch::empty({in, out}))), bias(register_parameter("bias", torch::empty({out}))) {}
    at::Tensor forward(const at::Tensor& x) const {
        std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
        shape.back() = weight.size(1);
        return torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(shape);
    }
    at::Tensor weight, bias;
};
TORCH_MODULE(Conv1D);

struct GPT2AttentionImpl : torch::nn::Module {
    explicit GPT2AttentionImpl(int d)
        : c_attn(register_module("c_attn", Conv1D(d, 3 * d))), c_proj(register_module("c_proj", Conv1D(d, d))) {}
    Conv1D c_attn, c_proj;
};
TORCH_MODULE(GPT2Attention);

struct GPT2MLPImpl : torch::nn::Module {
    GPT2MLPImpl(int d, int m) : c_fc(register_module("c_fc", Conv1D(d, m))), c_proj(register_module("c_proj", Conv1D(m, d))) {}
    Conv1D c_fc, c_proj;
};
TORCH_MODULE(GPT2MLP);

struct GPT2BlockImpl : torch::nn::Module {
    explicit GPT2BlockImpl(const HfConfig& c)
        : ln_1(register_module("ln_1", LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))),
          attn(register_module("attn", GPT2Attention(c.hidden_size))),
          ln_2(register_module("ln_2", LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))),
          mlp(register_module("mlp", GPT2MLP(c.hidden_size, c.intermediate_size))) {}
    LayerNorm ln_1;
    GPT2Attention attn;
    LayerNorm ln_2;
    GPT2MLP mlp;
};
TORCH_MODULE(GPT2Block);

struct GPT2ModelImpl : torch::nn::Module {
    explicit GPT2ModelImpl(const HfConfig& c)
        : wte(register_module("wte", Embedding(c.vocab_size, c.hidden_size))),
          wpe(register_module("wpe", Embedding(c.max_position_embeddings, c.hidden_size))),
          h(register_module("h", torch::nn::ModuleList())),
          ln_f(register_module("ln_f", LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))) {
        for (int l = 0; l < c.layers; ++l) h->push_back(GPT2Block(c));
    }
    Embedding wte, wpe;
    torch::nn::ModuleList h;
    LayerNorm ln_f;
};
TORCH_MODULE(GPT2Model);

std::vector<at::Tensor> gpt2_forward(torch::nn::Module& top, const HfConfig& c, const ModelBatch& batch,
                                     const std::vector<Surgery>& surgeries, const std::vector<Recorder*>& recorders,
                                     Linears& linear, LayerSource& source) {
    auto& model = dynamic_cast<GPT2ModelImpl&>(top);
    const at::Tensor& mask = batch.attention_mask;  // [B, n], 1 = real token
    const std::size_t S = surgeries.size();
    auto norm = [&](const LayerNorm& ln, const at::Tensor& x, const Surgery& surgery) {
        return decoder_layer_norm(x, ln->weight, ln->bias, ln->options.eps(), surgery, mask);
    };
    at::Tensor embedded = source.token_embedding(batch.input_ids) + model.wpe(real_token_positions(mask));  // [B, n, d]
    // Given token types are embedded with the token embedding and added, as transformers' GPT2Model does.
    if (batch.token_types_given) embedded = embedded + source.token_embedding(batch.token_type_ids);
    std::vector<at::Tensor> x(S, embedded), allowed(S);
    for (std::size_t s = 0; s < S; ++s) {
        record(recorders[s], "hook_embed", embedded);
        allowed[s] = attention_allowed(mask, surgeries[s].bidirectional, 0);  // [B, 1, n, n]
    }
    for (int l = 0; l < c.layers; ++l) {
        const auto layer = source.layer(l);  // (GPT-2's Conv1D layers do not use `linear`)
        auto& block = dynamic_cast<GPT2BlockImpl&>(*layer);
        for (std::size_t s = 0; s < S; ++s) {
            const Surgery& surgery = surgeries[s];
            Recorder* recorder = recorders[s];
            record(recorder, block_hook(l, "hook_resid_pre"), x[s]);
            const std::vector<at::Tensor> qkv = block.attn->c_attn(norm(block.ln_1, x[s], surgery)).chunk(3, -1);  // 3 × [B, n, d]
            const auto attention = grouped_query_attention(qkv[0], qkv[1], qkv[2], c.heads, c.heads, allowed[s]);
            record(recorder, block_hook(l, "attn.hook_pattern"), attention.pattern);
            const at::Tensor a = record(recorder, block_hook(l, "hook_attn_out"), block.attn->c_proj(attention.context));
            const at::Tensor h = surgery.remove_attention_skip ? a : x[s] + a;
            x[s] = surgery.remove_mlp
                       ? h
                       : h + block.mlp->c_proj(activation(c.activation, block.mlp->c_fc(norm(block.ln_2, h, surgery))));
            record(recorder, block_hook(l, "hook_resid_post"), x[s]);
        }
    }
    std::vector<at::Tensor> outputs;
    for (std::size_t s = 0; s < S; ++s)
        outputs.push_back(record(recorders[s], "ln_final.hook_normalized", norm(model.ln_f, x[s], surgeries[s])));
    return outputs;
}

}  // namespace

const DecoderLayout& gpt2_layout() {
    static const DecoderLayout layout{
        "wte.weight", [](const HfConfig& c) { return GPT2Block(c).ptr(); },
        [](const HfConfig& c) { return GPT2Model(c).ptr(); }, &gpt2_forward};
    return layout;
}

std::unique_ptr<EncoderModel> make_gpt2(const HfConfig& config, Draw draw) {
    GPT2Model module(config);
    if (draw == Draw::Yes)
        init_decoder(*module, config.initializer_range, {"ln_"}, "c_proj.weight", config.layers, "", -1);
    return std::make_unique<DecoderModel>(config, module.ptr(), module->h, module->wte, &gpt2_forward);
}

}  // namespace rankscope::models
