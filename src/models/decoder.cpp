#include "models/decoder.hpp"

#include <cmath>
#include <limits>

namespace rankscope::models {

at::Tensor real_token_positions(const at::Tensor& attention_mask) {
    return (attention_mask.to(torch::kLong).cumsum(1) - 1).clamp_min(0);  // [B, n]
}

at::Tensor attention_allowed(const at::Tensor& attention_mask, bool bidirectional, int window) {
    const auto n = attention_mask.size(1);
    const at::Tensor key_real = attention_mask.to(torch::kBool).unsqueeze(1).unsqueeze(2);  // [B, 1, 1, n]
    if (bidirectional) return key_real.expand({attention_mask.size(0), 1, n, n});
    const at::Tensor index = torch::arange(n, attention_mask.options().dtype(torch::kLong));
    const at::Tensor distance = index.unsqueeze(1) - index.unsqueeze(0);  // [n, n]: i − j
    at::Tensor allowed = distance >= 0;
    if (window > 0) allowed = allowed & (distance < window);
    return key_real & allowed.unsqueeze(0).unsqueeze(0);  // [B, 1, n, n]
}

AttentionResult grouped_query_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int heads,
                                        int kv_heads, const at::Tensor& allowed) {
    const auto k = query.size(2) / heads;
    const at::Tensor scores = head_scores(query, key, heads, kv_heads, head_products(query, key)) / std::sqrt(double(k));
    const double lowest = scores.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                             : std::numeric_limits<float>::lowest();
    AttentionResult result;
    result.pattern = torch::softmax(scores.masked_fill(allowed.logical_not(), lowest), -1);  // [B, H, n, n]
    result.context = head_context(result.pattern, value, heads, kv_heads, head_products(result.pattern, value));
    return result;
}

RotaryTables rotary_tables(const at::Tensor& positions, const HfConfig& c, const at::TensorOptions& options) {
    // As Hugging Face: inv_freq from int64 exponents in float32, angles in float32; r = the rotated features per head.
    const int rotated = c.rotary_dims < 0 ? c.head_size : c.rotary_dims;
    const at::TensorOptions f32 = options.dtype(torch::kFloat);
    const at::Tensor exponents = torch::arange(0, rotated, 2, options.dtype(torch::kLong)).to(torch::kFloat) / rotated;
    at::Tensor inv_freq = 1.0 / torch::pow(torch::scalar_tensor(c.rope_theta, f32), exponents);  // [r/2]
    if (c.rope_type == "linear") inv_freq = inv_freq / c.rope_factor;
    if (c.rope_type == "llama3") {
        // wavelength λ = 2π / inv_freq: λ > old/low → inv_freq / factor; λ < old/high → unchanged; between: mix with
        // s = (old/λ − low) / (high − low): (1 − s) inv_freq / factor + s inv_freq.
        const double old_context = c.rope_original_max_positions, low = c.rope_low_freq_factor, high = c.rope_high_freq_factor;
        const at::Tensor wavelength = 2.0 * M_PI / inv_freq;
        const at::Tensor scaled = torch::where(wavelength > old_context / low, inv_freq / c.rope_factor, inv_freq);
        const at::Tensor s = (old_context / wavelength - low) / (high - low);
        const at::Tensor smoothed = (1.0 - s) * scaled / c.rope_factor + s * scaled;
        const at::Tensor medium = (wavelength >= old_context / high) & (wavelength <= old_context / low);
        inv_freq = torch::where(medium, smoothed, scaled);
    }
    const at::Tensor angles = positions.to(torch::kFloat).unsqueeze(-1) * inv_freq;               // [B, n, r/2]
    const at::Tensor both = torch::cat({angles, angles}, -1).unsqueeze(1);                        // [B, 1, n, r]
    return {both.cos().to(options.dtype()), both.sin().to(options.dtype())};
}

at::Tensor apply_rotary(const at::Tensor& x, int heads, const RotaryTables& tables) {
    const auto B = x.size(0), n = x.size(1), k = x.size(2) / heads, r = tables.cos.size(-1);
    if (r == 0) return x;  // rotary_pct 0: no positions at all
    const at::Tensor h = x.view({B, n, heads, k}).transpose(1, 2);  // [B, H, n, k]
    const at::Tensor turned = r < k ? h.slice(-1, 0, r) : h;        // [B, H, n, r]
    const at::Tensor rotated_half = torch::cat({-turned.slice(-1, r / 2), turned.slice(-1, 0, r / 2)}, -1);
    at::Tensor out = turned * tables.cos + rotated_half * tables.sin;
    if (r < k) out = torch::cat({out, h.slice(-1, r)}, -1);  // the unrotated features after the rotated ones
    return out.transpose(1, 2).reshape({B, n, heads * k});
}

namespace {
// Each sample's real tokens as a [B, n, 1] 0/1 float tensor and their count × features [B, 1, 1].
at::Tensor real_rows(const at::Tensor& x, const at::Tensor& attention_mask) {
    return attention_mask.to(x.scalar_type()).unsqueeze(-1);
}
}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, const Surgery& surgery,
                    const at::Tensor& attention_mask) {
    switch (surgery.layer_norm) {
        case LayerNormSurgery::Keep: {
            const at::Tensor x32 = x.to(torch::kFloat);
            return weight * (x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
        }
        case LayerNormSurgery::Remove: return x;
        case LayerNormSurgery::Freeze: {
            // mean of x² over the sample's real tokens and all features: [B, 1, 1]
            const at::Tensor rows = real_rows(x, attention_mask);
            const at::Tensor mean_square = (x.pow(2) * rows).sum({-2, -1}, true) / (rows.sum({-2, -1}, true) * x.size(-1));
            return weight * (x * torch::rsqrt(mean_square + eps));
        }
    }
    return x;
}

at::Tensor decoder_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                              const Surgery& surgery, const at::Tensor& attention_mask) {
    if (surgery.layer_norm != LayerNormSurgery::Freeze) return layer_norm(x, weight, bias, eps, surgery);
    // One mean and variance per sample over its real tokens and features: [B, 1, 1]
    const at::Tensor rows = real_rows(x, attention_mask);
    const at::Tensor count = rows.sum({-2, -1}, true) * x.size(-1);
    const at::Tensor mean = (x * rows).sum({-2, -1}, true) / count;
    const at::Tensor var = ((x - mean).pow(2) * rows).sum({-2, -1}, true) / count;
    return (x - mean) / torch::sqrt(var + eps) * weight + bias;
}

void init_decoder(torch::nn::Module& module, double range, const std::vector<std::string>& norm_markers,
                  const std::string& scaled_suffix, int layers, const std::string& embedding, int padding_index) {
    torch::NoGradGuard no_grad;
    auto ends_with = [](const std::string& name, const std::string& suffix) {
        return !suffix.empty() && name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    for (auto& item : module.named_parameters()) {
        const std::string& name = item.key();
        at::Tensor parameter = item.value();
        bool norm = false;
        for (const auto& marker : norm_markers) norm = norm || name.find(marker) != std::string::npos;
        if (ends_with(name, ".bias")) parameter.zero_();
        else if (norm) parameter.fill_(1.0);
        else if (ends_with(name, scaled_suffix)) parameter.normal_(0.0, range / std::sqrt(2.0 * layers));
        else parameter.normal_(0.0, range);
        if (name == embedding && padding_index >= 0 && padding_index < parameter.size(0)) parameter[padding_index].zero_();
    }
}

}  // namespace rankscope::models
