#include "models/common.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "rankscope/error.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope::models {

at::Tensor activation(const std::string& name, const at::Tensor& x) {
    if (name == "gelu") return torch::gelu(x);
    // gelu_fast (transformers' FastGELUActivation, GPT-NeoX-20B) is the same tanh approximation written as
    // 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x²))): 0.7978845608 is √(2/π) to 10 digits.
    if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
        return 0.5 * x * (1.0 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * torch::pow(x, 3.0))));
    if (name == "relu") return torch::relu(x);
    if (name == "silu") return torch::silu(x);  // x σ(x), the Llama family's SwiGLU gate
    throw Error("unsupported activation '" + name + "' (expected " + kSupportedActivations + ")");
}

at::Tensor activation_in_place(const std::string& name, at::Tensor x) {
    if (at::GradMode::is_enabled() && x.requires_grad()) return activation(name, x);  // backward needs the input
    if (name == "gelu") return at::gelu_(x);
    if (name == "relu") return at::relu_(x);
    if (name == "silu") return at::silu_(x);
    return activation(name, x);  // gelu_new: a chain of operators, computed out of place
}

at::Tensor additive_key_mask(const at::Tensor& attention_mask, at::ScalarType dtype) {
    const double lowest = dtype == at::kDouble ? std::numeric_limits<double>::lowest() : std::numeric_limits<float>::lowest();
    return ((1.0 - attention_mask.to(dtype)) * lowest).unsqueeze(1).unsqueeze(2);
}

HeadProducts head_products(const at::Tensor& a, const at::Tensor& b) {
    const bool autograd = at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
    return a.device().is_cpu() && !autograd ? HeadProducts::BySample : HeadProducts::Batched;
}

namespace {
// x [..., n, G·k] (one sample, or a batch) as heads [..., H, n, k], a view when G = H: key/value head g serves query
// heads g·r .. g·r + r − 1 (r = H / G).
at::Tensor heads_of(const at::Tensor& x, int heads, int kv_heads) {
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = kv_heads;
    shape.push_back(x.size(-1) / kv_heads);
    const at::Tensor split = x.view(shape).transpose(-3, -2);  // [..., G, n, k]
    return kv_heads == heads ? split : split.repeat_interleave(heads / kv_heads, -3);
}
}  // namespace

at::Tensor head_scores(const at::Tensor& query, const at::Tensor& key, int heads, int kv_heads, HeadProducts how) {
    const auto B = query.size(0), n = query.size(1);
    if (how == HeadProducts::Batched)
        return torch::matmul(heads_of(query, heads, heads), heads_of(key, heads, kv_heads).transpose(-1, -2));
    at::Tensor scores = at::empty({B, heads, n, n}, query.options());
    for (std::int64_t b = 0; b < B; ++b) {
        at::Tensor sample = scores[b];  // [H, n, n], contiguous
        at::bmm_out(sample, heads_of(query[b], heads, heads), heads_of(key[b], heads, kv_heads).transpose(-1, -2));
    }
    return scores;
}

at::Tensor head_context(const at::Tensor& pattern, const at::Tensor& value, int heads, int kv_heads, HeadProducts how) {
    const auto B = value.size(0), n = value.size(1), k = value.size(2) / kv_heads;
    if (how == HeadProducts::Batched)
        return torch::matmul(pattern, heads_of(value, heads, kv_heads)).transpose(1, 2).reshape({B, n, heads * k});
    at::Tensor context = at::empty({B, n, heads * k}, value.options());
    at::Tensor sample = at::empty({heads, n, k}, value.options());  // one sample's P V, then merged into its rows
    for (std::int64_t b = 0; b < B; ++b) {
        at::bmm_out(sample, pattern[b], heads_of(value[b], heads, kv_heads));
        context[b].view({n, heads, k}).copy_(sample.transpose(0, 1));
    }
    return context;
}

at::Tensor post_ln_layer(const PostLnLayer& layer, const at::Tensor& h, const at::Tensor& additive_mask, int index,
                         const HfConfig& c, const Surgery& surgery, bool official_compat, Recorder* recorder,
                         Linears& linear) {
    const auto attention = multi_head_attention(linear(layer.query, h), linear(layer.key, h), linear(layer.value, h),
                                                c.heads, additive_mask);
    record(recorder, block_hook(index, "attn.hook_pattern"), attention.pattern);
    record(recorder, block_hook(index, "hook_resid_pre"), h);
    const at::Tensor projected = record(recorder, block_hook(index, "hook_attn_out"), linear(layer.output, attention.context));
    const at::Tensor a = layer_norm(layer.attention_norm, surgery.remove_attention_skip ? projected : projected + h, surgery);
    at::Tensor y;
    if (!surgery.remove_mlp)
        y = layer_norm(layer.mlp_norm, linear(layer.mlp_out, activation_in_place(c.activation, linear(layer.mlp_in, a))) + a,
                       surgery);
    else if (official_compat)
        y = layer_norm(layer.mlp_norm, activation(c.activation, a) + a, surgery);
    else
        y = a;
    record(recorder, block_hook(index, "hook_resid_post"), y);
    return y;
}

AttentionResult multi_head_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int heads,
                                     const at::Tensor& additive_mask) {
    const auto head_size = query.size(2) / heads;
    // In place on the fresh score tensor (the same values as out of place; one [B, H, n, n] buffer instead of three).
    at::Tensor scores = head_scores(query, key, heads, heads, head_products(query, key));
    scores.div_(std::sqrt(double(head_size))).add_(additive_mask);
    AttentionResult result;
    result.pattern = torch::softmax(scores, -1);
    scores.reset();  // freed before the context product, the attention's widest point
    result.context = head_context(result.pattern, value, heads, heads, head_products(result.pattern, value));
    return result;
}

LinearImpl::LinearImpl(std::int64_t in, std::int64_t out, bool with_bias)
    : weight(register_parameter("weight", torch::empty({out, in}))) {
    if (with_bias) bias = register_parameter("bias", torch::empty({out}));
}

EmbeddingImpl::EmbeddingImpl(std::int64_t count, std::int64_t dim)
    : weight(register_parameter("weight", torch::empty({count, dim}))) {}

void init_like_from_config(torch::nn::Module& module, double range, const std::vector<std::string>& padding_embeddings,
                           int padding_index) {
    torch::NoGradGuard no_grad;
    for (auto& item : module.named_parameters()) {
        const std::string& name = item.key();
        at::Tensor parameter = item.value();
        const bool norm = name.find("LayerNorm") != std::string::npos || name.find("layer_norm") != std::string::npos;
        const bool ends_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
        if (norm && !ends_bias) parameter.fill_(1.0);
        else if (ends_bias) parameter.zero_();
        else parameter.normal_(0.0, range);
    }
    for (auto& item : module.named_parameters())
        for (const auto& embedding : padding_embeddings)
            if (item.key() == embedding && padding_index >= 0 && padding_index < item.value().size(0))
                item.value()[padding_index].zero_();
}

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps, const Surgery& surgery) {
    switch (surgery.layer_norm) {
        case LayerNormSurgery::Keep: return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
        case LayerNormSurgery::Remove: return x;
        case LayerNormSurgery::Freeze: {
            const at::Tensor mean = x.mean({-2, -1}, true);
            const at::Tensor var = (x - mean).pow(2).mean({-2, -1}, true);
            return (x - mean) / torch::sqrt(var + eps) * weight + bias;
        }
    }
    return x;
}

}  // namespace rankscope::models

namespace rankscope {

LayerNormSurgery parse_layer_norm_surgery(const std::string& text) {
    if (text == "keep") return LayerNormSurgery::Keep;
    if (text == "remove") return LayerNormSurgery::Remove;
    if (text == "freeze") return LayerNormSurgery::Freeze;
    throw Error("unknown LayerNorm surgery '" + text + "' (expected keep, remove or freeze)", "layer_norm");
}

std::string to_string(LayerNormSurgery surgery) {
    return surgery == LayerNormSurgery::Keep ? "keep" : surgery == LayerNormSurgery::Remove ? "remove" : "freeze";
}

}  // namespace rankscope

namespace rankscope {
namespace {
// oneDNN's GEMM only where it beats libtorch's own BLAS: a libtorch without MKL (Debian's 1.13, OpenBLAS: the E1 grid
// 14.3 s with oneDNN, 23.4 s without); with MKL (PyPI's 2.x wheels) at::linear is the faster (medians of 2: 27.6 s
// against 32.3 s at 1 thread, 15.9 against 18.9 s at 2; 2026-12-05, docs/performance.md). RANKSCOPE_LINEAR_FAST_PATH=0
// or 1 in the environment forces either; another value is named on stderr and ignored.
bool linear_fast_path = [] {
    const bool default_path = !at::hasMKL();
    const char* value = std::getenv("RANKSCOPE_LINEAR_FAST_PATH");
    if (!value) return default_path;
    if (std::string(value) == "0") return false;
    if (std::string(value) == "1") return true;
    warn(std::string("RANKSCOPE_LINEAR_FAST_PATH=") + value + " ignored (expected 0 or 1)");
    return default_path;
}();
}  // namespace

void set_linear_fast_path(bool enabled) { linear_fast_path = enabled; }
bool linear_fast_path_enabled() { return linear_fast_path; }

namespace models {

at::Tensor Linears::operator()(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    const bool autograd = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
    const bool fast = linear_fast_path && at::hasMKLDNN() && x.scalar_type() == at::kFloat &&
                      weight.scalar_type() == at::kFloat && x.device().is_cpu() && !autograd;
    if (!fast) return at::linear(x, weight, bias);
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = weight.size(0);
    const at::Tensor rows = x.reshape({-1, x.size(-1)}).contiguous();
    return at::mkldnn_linear(rows.to_mkldnn(), weight.contiguous().to_mkldnn(), bias).to_dense().view(shape);
}

}  // namespace models
}  // namespace rankscope
