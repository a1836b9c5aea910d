#include "rankscope/san.hpp"

#include <fmt/format.h>

#include <torch/torch.h>

#include <cmath>

#include "rankscope/error.hpp"

namespace rankscope {

std::string to_string(LayerNormKind kind) {
    switch (kind) {
        case LayerNormKind::None: return "none";
        case LayerNormKind::Post: return "post";
        case LayerNormKind::Pre: return "pre";
        case LayerNormKind::Affine: return "affine";
    }
    return "?";
}
LayerNormKind parse_layer_norm(const std::string& text) {
    for (auto kind : {LayerNormKind::None, LayerNormKind::Post, LayerNormKind::Pre, LayerNormKind::Affine})
        if (to_string(kind) == text) return kind;
    throw Error("unknown LayerNorm kind '" + text + "' (expected none, post, pre or affine)", "layer_norm");
}

BlockConfig SanConfig::block_at(int layer) const {
    return per_layer.empty() ? block : per_layer.at(static_cast<std::size_t>(layer));
}

void SanConfig::validate() const {
    if (layers < 1 || heads < 1 || d_model < 1 || tokens < 1)
        throw Error(fmt::format("network sizes must be positive: layers {}, heads {}, d_model {}, tokens {}", layers, heads,
                                d_model, tokens),
                    "layers, heads, d_model, tokens");
    if (d_qk < 0 || d_v < 0)  // (a negative width was read as 0, d_model / heads, and kept in the config)
        throw Error(fmt::format("per-head widths must be 0 (d_model / heads) or positive: d_qk {}, d_v {}", d_qk, d_v),
                    "d_qk, d_v");
    if ((d_qk <= 0 || d_v <= 0) && d_model % heads != 0)
        throw Error("d_model (" + std::to_string(d_model) + ") is not divisible by heads (" + std::to_string(heads) +
                    ") and the per-head widths d_qk and d_v are not both given",
                    "d_model, heads");
    if (!(init_scale >= 0 && std::isfinite(init_scale)) || !(query_key_scale >= 0 && std::isfinite(query_key_scale)))
        throw Error("init_scale and query_key_scale must be finite and non-negative", "init_scale, query_key_scale");
    for (const BlockConfig& b : per_layer.empty() ? std::vector<BlockConfig>{block} : per_layer) {
        if (!std::isfinite(b.residual_scale)) throw Error("residual_scale must be finite", "residual_scale");
        if (b.mlp_width < 0)  // (it was read as 0, the 4 · d_model default)
            throw Error(fmt::format("mlp_width must be 0 (4 · d_model) or positive, got {}", b.mlp_width), "mlp_width");
    }
    if (!per_layer.empty() && static_cast<int>(per_layer.size()) != layers)
        throw Error("per-layer settings list " + std::to_string(per_layer.size()) + " layers, network has " +
                    std::to_string(layers),
                    "per_layer");
}

namespace {
at::Tensor normal(std::vector<std::int64_t> shape, double std) { return torch::randn(shape) * std; }
at::Tensor bias(std::vector<std::int64_t> shape, bool on) { return on ? torch::randn(shape) * 0.1 : torch::zeros(shape); }
}  // namespace

AttentionImpl::AttentionImpl(const SanConfig& c) : heads(c.heads), d_qk(c.qk_dim()) {
    const std::int64_t H = c.heads, d = c.d_model, k = c.qk_dim(), v = c.v_dim();
    const double s = c.init_scale;
    const double qk = s * c.query_key_scale;
    W_Q = register_parameter("W_Q", normal({H, d, k}, qk / std::sqrt(double(d))));
    W_K = register_parameter("W_K", normal({H, d, k}, qk / std::sqrt(double(d))));
    W_V = register_parameter("W_V", normal({H, d, v}, s / std::sqrt(double(d))));
    W_O = register_parameter("W_O", normal({H, v, d}, s / std::sqrt(double(H * v))));
    b_Q = register_parameter("b_Q", bias({H, k}, c.biases));
    b_K = register_parameter("b_K", bias({H, k}, c.biases));
    b_V = register_parameter("b_V", bias({H, v}, c.biases));
    b_O = register_parameter("b_O", bias({d}, c.biases));
}

at::Tensor AttentionImpl::pattern(const at::Tensor& x, const at::Tensor& key_bias) {
    // q, k: [B, H, n, k]
    const at::Tensor q = torch::einsum("bnd,hdk->bhnk", {x, W_Q}) + b_Q.unsqueeze(1);
    const at::Tensor key = torch::einsum("bnd,hdk->bhnk", {x, W_K}) + b_K.unsqueeze(1);
    at::Tensor scores = torch::matmul(q, key.transpose(-1, -2)) / std::sqrt(double(d_qk));
    if (key_bias.defined()) scores = scores + key_bias;
    return torch::softmax(scores, -1);
}

at::Tensor AttentionImpl::forward_head(const at::Tensor& x, int head, const at::Tensor& key_bias) {
    const at::Tensor q = torch::matmul(x, W_Q[head]) + b_Q[head];    // [B, n, k]
    const at::Tensor key = torch::matmul(x, W_K[head]) + b_K[head];  // [B, n, k]
    at::Tensor scores = torch::matmul(q, key.transpose(-1, -2)) / std::sqrt(double(d_qk));
    if (key_bias.defined()) scores = scores + key_bias.squeeze(1);   // [B, 1, n]
    const at::Tensor p = torch::softmax(scores, -1);                 // [B, n, n]
    const at::Tensor value = torch::matmul(x, W_V[head]) + b_V[head];  // [B, n, v]
    return torch::matmul(torch::matmul(p, value), W_O[head]) + b_O;    // [B, n, d]
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, Recorder* recorder, int layer, const at::Tensor& key_bias) {
    // Packed: q | k | v of every head from one product, [B·n, d] × [d, H·(2k + v)] (the same numbers as pattern()'s
    // and the per-head einsums; fewer operators per step, which is what limits training speed at these sizes).
    const auto B = x.size(0), n = x.size(1), d = x.size(2), H = W_Q.size(0), k = W_Q.size(2), v = W_V.size(2);
    const at::Tensor weight = torch::cat({W_Q, W_K, W_V}, -1).permute({1, 0, 2}).reshape({d, H * (2 * k + v)});
    const at::Tensor bias = torch::cat({b_Q, b_K, b_V}, -1).reshape({H * (2 * k + v)});
    const at::Tensor qkv = torch::addmm(bias, x.reshape({B * n, d}), weight).view({B, n, H, 2 * k + v}).permute({0, 2, 1, 3});
    at::Tensor scores = torch::matmul(qkv.narrow(-1, 0, k), qkv.narrow(-1, k, k).transpose(-1, -2)) / std::sqrt(double(d_qk));
    if (key_bias.defined()) scores = scores + key_bias;
    const at::Tensor p = record(recorder, block_hook(layer, "attn.hook_pattern"), torch::softmax(scores, -1));  // [B, H, n, n]
    const at::Tensor z = torch::matmul(p, qkv.narrow(-1, 2 * k, v));                                   // [B, H, n, v]
    return torch::addmm(b_O, z.permute({0, 2, 1, 3}).reshape({B * n, H * v}), W_O.reshape({H * v, d})).view({B, n, d});
}

at::Tensor AttentionImpl::value_output_product() { return torch::matmul(W_V, W_O); }
at::Tensor AttentionImpl::query_key_product() { return torch::matmul(W_Q, W_K.transpose(-1, -2)); }

MlpImpl::MlpImpl(const SanConfig& c, const BlockConfig& block) : activation(block.activation) {
    const std::int64_t d = c.d_model, m = block.mlp_width > 0 ? block.mlp_width : 4 * c.d_model;
    W_in = register_parameter("W_in", normal({d, m}, c.init_scale / std::sqrt(double(d))));
    b_in = register_parameter("b_in", bias({m}, c.biases));
    W_out = register_parameter("W_out", normal({m, d}, c.init_scale / std::sqrt(double(m))));
    b_out = register_parameter("b_out", bias({d}, c.biases));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
    const at::Tensor hidden = torch::matmul(x, W_in) + b_in;
    const at::Tensor activated = activation == Activation::ReLU ? torch::relu(hidden) : torch::gelu(hidden);
    return torch::matmul(activated, W_out) + b_out;
}

at::Tensor plain_layer_norm(const at::Tensor& x, double eps) {
    const at::Tensor mean = x.mean(-1, true);
    const at::Tensor var = (x - mean).pow(2).mean(-1, true);
    return (x - mean) / torch::sqrt(var + eps);
}

NormLayerImpl::NormLayerImpl(int d_model, LayerNormKind kind_) : kind(kind_) {
    w = register_parameter("w", torch::ones({d_model}));
    b = register_parameter("b", torch::zeros({d_model}));
}

at::Tensor NormLayerImpl::forward(const at::Tensor& x) {
    constexpr double eps = 1e-5;
    if (kind == LayerNormKind::Affine) {
        // One mean and one std per sample matrix: a feature-wise affine map of the sample, no per-token division.
        const at::Tensor mean = x.mean({-2, -1}, true);
        const at::Tensor var = (x - mean).pow(2).mean({-2, -1}, true);
        return (x - mean) / torch::sqrt(var + eps) * w + b;
    }
    // ATen's fused layer_norm (one operator forward, one backward: training's per-step operator count is what limits
    // its speed, docs/performance.md); plain_layer_norm(x) * w + b is the reference it is tested against.
    return at::layer_norm(x, {x.size(-1)}, w, b, eps);
}

BlockImpl::BlockImpl(const SanConfig& c, const BlockConfig& block) : config(block) {
    attn = register_module("attn", Attention(c));
    if (block.mlp) mlp = register_module("mlp", Mlp(c, block));
    if (block.layer_norm != LayerNormKind::None) {
        ln1 = register_module("ln1", NormLayer(c.d_model, block.layer_norm));
        if (block.mlp) ln2 = register_module("ln2", NormLayer(c.d_model, block.layer_norm));
    }
}

at::Tensor BlockImpl::skip_add(const at::Tensor& x, const at::Tensor& branch) const {
    return config.residual_scale == 1.0 ? x + branch : x + config.residual_scale * branch;
}

at::Tensor BlockImpl::mlp_block(const at::Tensor& mid, Recorder* recorder, int layer) {
    if (!config.mlp) return mid;
    const bool pre = config.layer_norm == LayerNormKind::Pre;
    const bool post = config.layer_norm == LayerNormKind::Post || config.layer_norm == LayerNormKind::Affine;
    const at::Tensor mlp_out = record(recorder, block_hook(layer, "hook_mlp_out"), mlp->forward(pre ? ln2->forward(mid) : mid));
    const at::Tensor out = config.mlp_skip ? skip_add(mid, mlp_out) : mlp_out;
    return post ? ln2->forward(out) : out;
}

at::Tensor BlockImpl::forward(const at::Tensor& x, Recorder* recorder, int layer, const at::Tensor& key_bias) {
    const bool pre = config.layer_norm == LayerNormKind::Pre;
    const bool post = config.layer_norm == LayerNormKind::Post || config.layer_norm == LayerNormKind::Affine;
    record(recorder, block_hook(layer, "hook_resid_pre"), x);
    const at::Tensor attention_out = record(recorder, block_hook(layer, "hook_attn_out"),
                                            attn->forward(pre ? ln1->forward(x) : x, recorder, layer, key_bias));
    at::Tensor mid = config.attention_skip ? skip_add(x, attention_out) : attention_out;
    if (post) mid = ln1->forward(mid);
    record(recorder, block_hook(layer, "hook_resid_mid"), mid);
    return record(recorder, block_hook(layer, "hook_resid_post"), mlp_block(mid, recorder, layer));
}

at::Tensor BlockImpl::forward_head(const at::Tensor& x, int head, bool sub_path, const at::Tensor& key_bias) {
    const bool pre = config.layer_norm == LayerNormKind::Pre;
    const bool post = config.layer_norm == LayerNormKind::Post || config.layer_norm == LayerNormKind::Affine;
    const at::Tensor head_out = attn->forward_head(pre ? ln1->forward(x) : x, head, key_bias);
    at::Tensor mid;
    if (sub_path) {
        mid = config.attention_skip ? skip_add(x, head_out) : head_out;
        if (post) mid = ln1->forward(mid);
    } else {
        mid = config.layer_norm == LayerNormKind::None ? head_out : plain_layer_norm(head_out);
    }
    return mlp_block(mid, nullptr, 0);
}

SanImpl::SanImpl(SanConfig c) : config(std::move(c)) {
    config.validate();
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int l = 0; l < config.layers; ++l) blocks->push_back(Block(config, config.block_at(l)));
}

at::Tensor SanImpl::forward(const at::Tensor& x, Recorder* recorder, const at::Tensor& key_bias) {
    at::Tensor h = record(recorder, "hook_embed", x);
    for (int l = 0; l < config.layers; ++l) h = block(l)->forward(h, recorder, l, key_bias);
    return h;
}

at::Tensor random_input(const SanConfig& config, int batch, at::ScalarType dtype) {
    return torch::randn({batch, config.tokens, config.d_model}).to(dtype);
}

}  // namespace rankscope
