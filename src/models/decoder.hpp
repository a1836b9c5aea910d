#pragma once
// Pieces shared by the decoder files (gpt2.cpp, llama.cpp): the causal / sliding-window / padding mask, position ids
// that count real tokens, grouped-query attention, rotary positions, RMSNorm and the pre-norm LayerNorm under the
// surgery. Every tensor made here takes its device and dtype from an input (`.options()`), never the CPU default.
//
// Dimension legend: B batch, n tokens, d hidden size, H query heads, G key/value heads (H = G·r), k head size.
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

// Rotary positions as Hugging Face's Llama ("rotate_half" convention, float32 tables):
//   inv_freq_i = θ^(−2i/k), i = 0..k/2−1; angle = position · inv_freq; cos, sin = [cos(angle), cos(angle)] ...
//   x' = x cos + rotate_half(x) sin, rotate_half([x1, x2]) = [−x2, x1] (halves of each head's k features).
struct RotaryTables {
    at::Tensor cos, sin;  // [B, 1, n, k] in the inputs' dtype
};
// The config's rope_theta, head_size and rope_scaling ("linear": inv_freq / factor; "llama3": Llama 3.1's per-frequency
// rule, see HfConfig) decide inv_freq.
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

}  // namespace rankscope::models
