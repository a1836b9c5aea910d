#pragma once
// Pieces shared by the decoder files (gpt2.cpp, gpt_neox.cpp, llama.cpp): the causal / sliding-window / padding mask, position ids
// that count real tokens, grouped-query attention, rotary positions, RMSNorm and the pre-norm LayerNorm under the
// surgery. Every tensor made here takes its device and dtype from an input (`.options()`), never the CPU default.
//
// Dimension legend: B batch, n tokens, d hidden size, H query heads, G key/value heads (H = G·r), k head size.
#include <functional>

#include "models/common.hpp"

namespace rankscope::models {

// Position of each token [B, n] int64: the number of real tokens before it (cumsum(mask) − 1, padding clamped at 0),
// so left padding does not shift the real tokens' positions (Hugging Face generate()'s position ids).
at::Tensor real_token_positions(const at::Tensor& attention_mask);

// Which keys each query may attend to, [B, 1, n, n] bool: key j is a real token, and unless `bidirectional`, j <= i
// and (window > 0) i − j < window. A query row with no allowed key (a left pad) attends uniformly to all keys
// (every score is the dtype's lowest value): its output is padding and never read by a real token.
at::Tensor attention_allowed(const at::Tensor& attention_mask, bool bidirectional, int window);

// P = softmax(q kᵀ/√k + mask) with grouped-query sharing: query head h reads key/value head ⌊h / r⌋, r = H / G.
// query [B, n, H·k], key and value [B, n, G·k] (rotary positions already applied).
// Returns P [B, H, n, n] and the merged context P V [B, n, H·k].
AttentionResult grouped_query_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int heads,
                                        int kv_heads, const at::Tensor& allowed);

// Rotary positions as Hugging Face's Llama and GPT-NeoX ("rotate_half" convention, float32 tables), on the first r
// features of each head (r = k, or GPT-NeoX's int(k × rotary_pct)):
//   inv_freq_i = θ^(−2i/r), i = 0..r/2−1; angle = position · inv_freq; cos, sin = [cos(angle), cos(angle)] ...
//   x'[:r] = x[:r] cos + rotate_half(x[:r]) sin, rotate_half([x1, x2]) = [−x2, x1] (halves of the r features);
//   x'[r:] = x[r:].
struct RotaryTables {
    at::Tensor cos, sin;  // [B, 1, n, r] in the inputs' dtype
};
// The config's rope_theta, rotated width (rotary_dims, or head_size) and rope_scaling ("linear": inv_freq / factor;
// "llama3": Llama 3.1's per-frequency rule, see HfConfig) decide inv_freq.
RotaryTables rotary_tables(const at::Tensor& positions, const HfConfig& config, const at::TensorOptions& options);
// x [B, n, heads·k] → rotated, same shape.
at::Tensor apply_rotary(const at::Tensor& x, int heads, const RotaryTables& tables);

// RMSNorm y = x / √(mean_features(x²) + eps) · γ (computed in float32 as Hugging Face's LlamaRMSNorm), under the
// surgery: Remove = identity; Freeze = one root mean square per sample over all its real tokens and features.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, const Surgery& surgery,
                    const at::Tensor& attention_mask);
// LayerNorm under the surgery, with Freeze over each sample's real tokens only (one mean and std over its real tokens
// and features).
at::Tensor decoder_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                              const Surgery& surgery, const at::Tensor& attention_mask);

// Hugging Face's _init_weights for decoders: every parameter normal(0, range) except norms (weight 1, bias 0) and
// biases (0); names in `scaled` get normal(0, range / √(2 L)) (GPT-2's c_proj); the `padding_index` row of
// `embedding` is zeroed when >= 0.
void init_decoder(torch::nn::Module& module, double range, const std::vector<std::string>& norm_markers,
                  const std::string& scaled_suffix, int layers, const std::string& embedding, int padding_index);

// ---- where a decoder's forward finds its weights --------------------------------------------------------------------
// A decoder runs layer-major: every surgery passes layer l before layer l + 1 is fetched, so a streamed model reads
// each layer from the checkpoint once per run (not once per surgery). The forward is the same code either way.
class LayerSource {
public:
    virtual ~LayerSource() = default;
    // The token embedding's rows for `ids` [B, n] → [B, n, d] float32 on the model's device.
    virtual at::Tensor token_embedding(const at::Tensor& ids) = 0;
    // Layer l ready to run (streamed: read from the checkpoint; the caller drops it when every surgery has passed).
    virtual std::shared_ptr<torch::nn::Module> layer(int l) = 0;
    // Where layers and rows are to be put from now on.
    virtual void to(const at::Device&) {}
};

// The whole model in memory: its own layer list and token embedding.
class ModuleLayers : public LayerSource {
public:
    ModuleLayers(torch::nn::ModuleList layers, Embedding embedding)
        : layers_(std::move(layers)), embedding_(std::move(embedding)) {}
    at::Tensor token_embedding(const at::Tensor& ids) override { return embedding_(ids); }
    std::shared_ptr<torch::nn::Module> layer(int l) override { return layers_[static_cast<std::size_t>(l)]; }

private:
    torch::nn::ModuleList layers_;
    Embedding embedding_;
};

// One decoder architecture's forward over several surgeries: outputs[i] and recorders[i] are surgery i's (as one
// forward(batch, surgeries[i], recorders[i])). `top` is the model module (its embeddings other than the token
// embedding, and its final norm); the layers and token rows come from `source`.
using DecoderForward = std::function<std::vector<at::Tensor>(torch::nn::Module& top, const HfConfig& config,
                                                             const ModelBatch& batch, const std::vector<Surgery>& surgeries,
                                                             const std::vector<Recorder*>& recorders, Linears& linear,
                                                             LayerSource& source)>;

// Where each piece of an architecture sits in its checkpoint (names without the checkpoint's prefix); the layer list's
// name ("h.", "layers.") is its row in hf_model.cpp's table of architectures.
struct DecoderLayout {
    std::string token_embedding;  // "wte.weight", "embed_in.weight", "embed_tokens.weight"
    std::function<std::shared_ptr<torch::nn::Module>(const HfConfig&)> make_layer;  // one layer, weights unset
    std::function<std::shared_ptr<torch::nn::Module>(const HfConfig&)> make_top;    // the model without layers
    DecoderForward forward;
};

// A decoder model: the module in memory, or (streamed) only its top with the layers read one at a time.
class DecoderModel : public EncoderModel {
public:
    // Whole model in memory: `module` holds every parameter; `layers`/`embedding` are its layer list and token embedding.
    DecoderModel(HfConfig config, std::shared_ptr<torch::nn::Module> module, torch::nn::ModuleList layers,
                 Embedding embedding, DecoderForward forward);
    // Streamed: `top` holds the non-layer parameters (token embedding excepted); `source` fetches the rest.
    DecoderModel(HfConfig config, std::shared_ptr<torch::nn::Module> top, std::unique_ptr<LayerSource> source,
                 DecoderForward forward);
    const HfConfig& config() const override { return config_; }
    at::Tensor forward(const ModelBatch& batch, const Surgery& surgery, Recorder* recorder) override;
    std::vector<at::Tensor> forward_all(const ModelBatch& batch, const std::vector<Surgery>& surgeries,
                                        const std::vector<Recorder*>& recorders) override;
    std::vector<std::pair<std::string, at::Tensor>> parameters() override;
    void to(const at::Device& device) override;
    at::Device device() const override { return device_; }
    bool streamed() const override { return streamed_; }

private:
    HfConfig config_;
    std::shared_ptr<torch::nn::Module> module_;
    std::unique_ptr<LayerSource> source_;
    DecoderForward forward_;
    Linears linears_;
    at::Device device_ = at::kCPU;
    bool streamed_ = false;
};

// The architecture tables (gpt2.cpp, gpt_neox.cpp, llama.cpp).
const DecoderLayout& gpt2_layout();
const DecoderLayout& gpt_neox_layout();
const DecoderLayout& llama_layout();

}  // namespace rankscope::models
