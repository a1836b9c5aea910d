#pragma once
// Pieces shared by the architecture files: activations by config name, the attention mask, and initialisation.
#include <torch/torch.h>


#include "rankscope/models.hpp"

namespace rankscope::models {

// "gelu" = x Φ(x) (erf), "gelu_new" = "gelu_fast" = "gelu_pytorch_tanh" = tanh approximation, "relu", "silu" = x σ(x).
at::Tensor activation(const std::string& name, const at::Tensor& x);
// The same on a temporary the caller no longer needs, in place where one operator does it (gelu, relu, silu): the
// same values, one buffer fewer at the MLP's widest point. Out of place when autograd records `x` (training).
at::Tensor activation_in_place(const std::string& name, at::Tensor x);

// Additive mask [B, 1, 1, n]: 0 for real tokens, the dtype's lowest value for padding (Hugging Face's extended mask).
at::Tensor additive_key_mask(const at::Tensor& attention_mask, at::ScalarType dtype);

// The attention's two products per head, G = kv_heads key/value heads shared by H = heads query heads (G = H: plain
// multi-head; query head h reads key/value head h / (H / G)), k = head size:
//   head_scores:  S[b, h] = Q[b, :, h·k .. h·k + k] K[b, :, g·k .. g·k + k]ᵀ    query [B, n, H·k], key [B, n, G·k] → [B, H, n, n]
//   head_context: C[b, :, h·k .. h·k + k] = P[b, h] V[b, :, g·k .. g·k + k]      pattern [B, H, n, n], value [B, n, G·k] → [B, n, H·k]
// Batched: torch::matmul on [B, H, n, k] heads (the reference; it copies Q, K and V into those blocks first). BySample:
// one bmm per sample, reading the heads straight from the projections' [n, G·k] rows (writes into its outputs, so not
// under autograd). The two agree to round-off (tests/unit/test_models.cpp: the same bits on the Intel VMs, 1 unit in
// the last place apart for float64 on an AMD EPYC VM). head_products picks BySample on the CPU
// outside autograd (BERT-base at 32 × 128, 1 thread: both products and the softmax 20 ms against 24–31 ms batched,
// whose copies were ~3% of the E1 grid's perf samples; 2026-12-05; measured at 1 and 2 threads only), Batched elsewhere
// (the GPU keeps the form it was measured with).
enum class HeadProducts { Batched, BySample };
HeadProducts head_products(const at::Tensor& a, const at::Tensor& b);
at::Tensor head_scores(const at::Tensor& query, const at::Tensor& key, int heads, int kv_heads, HeadProducts how);
at::Tensor head_context(const at::Tensor& pattern, const at::Tensor& value, int heads, int kv_heads, HeadProducts how);

// Scaled dot-product attention of BERT-style layers. query/key/value: [B, n, d] projections; d = heads · head_size.
// Returns the pattern P [B, H, n, n] and the merged context P V [B, n, d].
struct AttentionResult {
    at::Tensor pattern, context;
};
AttentionResult multi_head_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int heads,
                                     const at::Tensor& additive_mask);

// from_config init by checkpoint name: LayerNorm weights 1, biases 0, everything else normal(0, range); the rows of
// `padding_embeddings` at `padding_index` are zeroed as nn.Embedding(padding_idx) does.
void init_like_from_config(torch::nn::Module& module, double range, const std::vector<std::string>& padding_embeddings,
                           int padding_index);

// A layer's LayerNorm under the surgery's LayerNorm setting (see Surgery). weight/bias: γ, β [d].
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps, const Surgery& surgery);
inline at::Tensor layer_norm(const torch::nn::LayerNorm& module, const at::Tensor& x, const Surgery& surgery) {
    return layer_norm(x, module->weight, module->bias, module->options.eps(), surgery);
}

// nn.Linear's and nn.Embedding's parameters under their checkpoint names, allocated and not drawn. The models used
// torch::nn::Linear and torch::nn::Embedding until 2026-12-05, whose constructors draw a default reset (Kaiming
// uniform, normal) from the global generator, which init_like_from_config, init_decoder or the checkpoint then
// overwrote: on BERT-base that discarded draw took ~0.3 s (`rankscope model --weights init` on 1 × 8 tokens: 1.2 s
// against 1.5 s). Whoever makes one writes every value.
struct LinearImpl : torch::nn::Module {
    LinearImpl(std::int64_t in, std::int64_t out, bool with_bias = true);
    at::Tensor weight;  // [out, in]
    at::Tensor bias;    // [out]; undefined (and not a parameter) without a bias
};
TORCH_MODULE(Linear);

struct EmbeddingImpl : torch::nn::Module {
    EmbeddingImpl(std::int64_t count, std::int64_t dim);
    at::Tensor forward(const at::Tensor& ids) { return at::embedding(weight, ids); }  // [..] → [.., dim]
    at::Tensor weight;  // [count, dim]
};
TORCH_MODULE(Embedding);

// y = x Wᵀ + b for the layers of one model. Fast path (LIBTORCH.md: ~1.6× on BERT-base's GEMMs): oneDNN, the weight
// converted to oneDNN's layout at each call. Nothing is cached: a cache of every converted weight cost ~240 MB of peak
// memory on the BERT-base E1 grid and saved no measurable time (the conversion is a copy, the product it feeds is
// ~100× more work; docs/performance.md). Taken for float32 CPU tensors outside autograd when libtorch has oneDNN and
// set_linear_fast_path(true) (the default when libtorch has no MKL; RANKSCOPE_LINEAR_FAST_PATH=0/1 forces it); otherwise
// the reference, at::linear. The two agree to ~4e-6 relative (tests/unit/test_models.cpp).
class Linears {
public:
    at::Tensor operator()(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
    at::Tensor operator()(const Linear& layer, const at::Tensor& x) { return (*this)(x, layer->weight, layer->bias); }
};

// One post-LN encoder layer (BERT, RoBERTa, DistilBERT, ALBERT: the same equations under each checkpoint's names),
// with the paper's surgery, recording blocks.{l}.attn.hook_pattern, hook_resid_pre, hook_attn_out, hook_resid_post:
//   a = LN_attention(W_O · attention(h) [+ h])                     remove_attention_skip drops "+ h"
//   y = LN_mlp(W_out act(W_in a) + a)                              remove_mlp: y = a, or with `official_compat`
//                                                                  (ALBERT's official code) LN_mlp(act(a) + a)
struct PostLnLayer {
    const Linear &query, &key, &value, &output;
    const torch::nn::LayerNorm& attention_norm;
    const Linear &mlp_in, &mlp_out;
    const torch::nn::LayerNorm& mlp_norm;
};
at::Tensor post_ln_layer(const PostLnLayer& layer, const at::Tensor& h, const at::Tensor& additive_mask, int index,
                         const HfConfig& c, const Surgery& surgery, bool official_compat, Recorder* recorder,
                         Linears& linear);

// Wraps a torch module as an EncoderModel.
template <typename Holder, typename ForwardFunction>
class ModuleModel : public EncoderModel {
public:
    ModuleModel(HfConfig config, Holder module, ForwardFunction forward)
        : config_(std::move(config)), module_(std::move(module)), forward_(forward) {}
    const HfConfig& config() const override { return config_; }
    at::Tensor forward(const ModelBatch& batch, const Surgery& surgery, Recorder* recorder) override {
        torch::NoGradGuard no_grad;
        return forward_(*module_, config_, batch, surgery, recorder, linears_);
    }
    at::Tensor forward_for_training(const ModelBatch& batch) override {
        return forward_(*module_, config_, batch, Surgery{}, nullptr, linears_);
    }
    std::vector<std::pair<std::string, at::Tensor>> parameters() override {
        std::vector<std::pair<std::string, at::Tensor>> out;
        for (const auto& item : module_->named_parameters()) out.emplace_back(item.key(), item.value());
        return out;
    }
    void to(const at::Device& device) override {
        module_->to(device);
        device_ = device;
    }
    at::Device device() const override { return device_; }

private:
    HfConfig config_;
    Holder module_;
    ForwardFunction forward_;
    Linears linears_;
    at::Device device_ = at::kCPU;
};

// One architecture's model. Draw::Yes: the from_config init from the global generator (make_hf_model seeds it);
// Draw::No: the weights are allocated and left unset (LayerNorm and RMSNorm start at 1 and 0, as their modules make
// them), for a caller that writes every one (load_hf_model).
enum class Draw { Yes, No };
std::unique_ptr<EncoderModel> make_bert(const HfConfig& config, Draw draw);  // bert, roberta
std::unique_ptr<EncoderModel> make_distilbert(const HfConfig& config, Draw draw);
// DistilBERT's sinusoidal_pos_embds table [positions, dim], float32: even columns sin(p / 10000^(2⌊j/2⌋/dim)), odd cos.
at::Tensor sinusoidal_position_table(std::int64_t positions, std::int64_t dim);
std::unique_ptr<EncoderModel> make_albert(const HfConfig& config, Draw draw);
std::unique_ptr<EncoderModel> make_xlnet(const HfConfig& config, Draw draw);
std::unique_ptr<EncoderModel> make_gpt2(const HfConfig& config, Draw draw);
std::unique_ptr<EncoderModel> make_gpt_neox(const HfConfig& config, Draw draw);
std::unique_ptr<EncoderModel> make_llama(const HfConfig& config, Draw draw);  // llama, mistral, qwen2

}  // namespace rankscope::models
