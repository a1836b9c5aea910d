// XLNet (Hugging Face XLNetModel), content stream only, no memory, attn_type "bi". Layout here is [B, n, ...]
// (Hugging Face works in [n, B, ...]). Per layer, with h [B, n, d], heads H of size k:
//   q, kc, v = h·q, h·k, h·v                         [B, n, H, k]      rel_attn.{q,k,v} are [d, H, k]
//   kr = R·r, R = [sin(p ω), cos(p ω)], p = n, n−1, ..., −n+1      [2n, H, k]
//   ac = (q + r_w_bias)·kc      bd = shift((q + r_r_bias)·kr)      ef = seg_ij · ((q + r_s_bias)·seg_embed)
//   P = softmax((ac + bd + ef)/√k − 1e30·[key j is padding and j ≠ i])
//   a = LN(o(P v) [+ h]);  y = LN(layer_2(act(layer_1 a)) + a)
// hook_embed is the raw word embedding (Hugging Face's hidden_states[0]).
#include <cmath>

#include "models/common.hpp"

namespace rankscope::models {
namespace {

using torch::nn::LayerNormOptions;

struct XLNetRelativeAttentionImpl : torch::nn::Module {
    explicit XLNetRelativeAttentionImpl(const HfConfig& c) {
        const std::int64_t d = c.hidden_size, H = c.heads, k = c.head_size;
        q = register_parameter("q", torch::empty({d, H, k}));
        this->k = register_parameter("k", torch::empty({d, H, k}));
        v = register_parameter("v", torch::empty({d, H, k}));
        o = register_parameter("o", torch::empty({d, H, k}));
        r = register_parameter("r", torch::empty({d, H, k}));
        r_r_bias = register_parameter("r_r_bias", torch::empty({H, k}));
        r_s_bias = register_parameter("r_s_bias", torch::empty({H, k}));
        r_w_bias = register_parameter("r_w_bias", torch::empty({H, k}));
        seg_embed = register_parameter("seg_embed", torch::empty({2, H, k}));
        layer_norm = register_module("layer_norm", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
    }
    at::Tensor q, k, v, o, r, r_r_bias, r_s_bias, r_w_bias, seg_embed;
    torch::nn::LayerNorm layer_norm{nullptr};
};
TORCH_MODULE(XLNetRelativeAttention);

struct XLNetFeedForwardImpl : torch::nn::Module {
    explicit XLNetFeedForwardImpl(const HfConfig& c)
        : layer_norm(register_module("layer_norm", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)))),
          layer_1(register_module("layer_1", Linear(c.hidden_size, c.intermediate_size))),
          layer_2(register_module("layer_2", Linear(c.intermediate_size, c.hidden_size))) {}
    torch::nn::LayerNorm layer_norm;
    Linear layer_1, layer_2;
};
TORCH_MODULE(XLNetFeedForward);

struct XLNetLayerImpl : torch::nn::Module {
    explicit XLNetLayerImpl(const HfConfig& c)
        : rel_attn(register_module("rel_attn", XLNetRelativeAttention(c))), ff(register_module("ff", XLNetFeedForward(c))) {}
    XLNetRelativeAttention rel_attn;
    XLNetFeedForward ff;
};
TORCH_MODULE(XLNetLayer);

struct XLNetModelImpl : torch::nn::Module {
    explicit XLNetModelImpl(const HfConfig& c)
        : word_embedding(register_module("word_embedding", Embedding(c.vocab_size, c.hidden_size))),
          layer(register_module("layer", torch::nn::ModuleList())) {
        mask_emb = register_parameter("mask_emb", torch::empty({1, 1, c.hidden_size}));
        for (int l = 0; l < c.layers; ++l) layer->push_back(XLNetLayer(c));
    }
    Embedding word_embedding;
    torch::nn::ModuleList layer;
    at::Tensor mask_emb;
};
TORCH_MODULE(XLNetModel);

// Sinusoidal relative positions p = n, n−1, ..., −n+1 (2n rows): [sin(p ω_i), cos(p ω_i)], ω_i = 10000^(−2i/d).
at::Tensor relative_positions(std::int64_t n, const HfConfig& c, const at::TensorOptions& options) {
    const at::Tensor frequencies = torch::arange(0, c.hidden_size, 2, options.dtype(torch::kLong)).to(torch::kFloat);
    const at::Tensor inverse = 1.0 / torch::pow(10000.0, frequencies / c.hidden_size);
    at::Tensor positions = torch::arange(static_cast<double>(n), static_cast<double>(-n), -1.0, options.dtype(torch::kFloat));
    if (c.clamp_len > 0) positions = positions.clamp(-c.clamp_len, c.clamp_len);
    const at::Tensor angles = torch::outer(positions, inverse);
    return torch::cat({torch::sin(angles), torch::cos(angles)}, -1).to(options.dtype().toScalarType());  // [2n, d]
}

// [B, H, n, 2n] → [B, H, n, n]: entry (i, j) takes relative position i − j.
at::Tensor relative_shift(const at::Tensor& x, std::int64_t klen) {
    const auto B = x.size(0), H = x.size(1), i = x.size(2), j = x.size(3);
    return x.reshape({B, H, j, i}).narrow(2, 1, j - 1).reshape({B, H, i, j - 1}).narrow(3, 0, klen);
}

at::Tensor xlnet_forward(XLNetModelImpl& model, const HfConfig& c, const ModelBatch& batch, const Surgery& surgery,
                         Recorder* recorder, Linears& linear) {
    const auto n = batch.input_ids.size(1);
    at::Tensor h = record(recorder, "hook_embed", model.word_embedding(batch.input_ids));
    const auto dtype = h.scalar_type();
    const at::Tensor relative = relative_positions(n, c, h.options());
    // Padding keys are masked except on the diagonal (a padded query still sees itself).
    const at::Tensor padding = (1 - batch.attention_mask).to(dtype).unsqueeze(1);                    // [B, 1, n]
    const at::Tensor masked = ((padding - torch::eye(n, h.options()).unsqueeze(0)) > 0).to(dtype);   // [B, n, n]
    const at::Tensor other_segment = (batch.token_type_ids.unsqueeze(2) != batch.token_type_ids.unsqueeze(1)).to(torch::kLong);
    const at::Tensor segment = torch::one_hot(other_segment, 2).to(dtype);                          // [B, n, n, 2]
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_size));
    for (int l = 0; l < c.layers; ++l) {
        auto& layer = *model.layer->ptr<XLNetLayerImpl>(static_cast<std::size_t>(l));
        auto& a = *layer.rel_attn;
        const at::Tensor q = torch::einsum("bih,hnd->bind", {h, a.q});
        const at::Tensor key = torch::einsum("bih,hnd->bind", {h, a.k});
        const at::Tensor value = torch::einsum("bih,hnd->bind", {h, a.v});
        const at::Tensor key_r = torch::einsum("jh,hnd->jnd", {relative, a.r});
        const at::Tensor ac = torch::einsum("bind,bjnd->bnij", {q + a.r_w_bias, key});
        const at::Tensor bd = relative_shift(torch::einsum("bind,jnd->bnij", {q + a.r_r_bias, key_r}), n);
        const at::Tensor ef_segment = torch::einsum("bind,snd->bins", {q + a.r_s_bias, a.seg_embed});
        const at::Tensor ef = torch::einsum("bijs,bins->bnij", {segment, ef_segment});
        const at::Tensor score = (ac + bd + ef) * scale - 1e30 * masked.unsqueeze(1);
        const at::Tensor p = torch::softmax(score, -1);  // [B, H, n, n]
        record(recorder, block_hook(l, "attn.hook_pattern"), p);
        const at::Tensor attended = torch::einsum("bnij,bjnd->bind", {p, value});
        record(recorder, block_hook(l, "hook_resid_pre"), h);
        const at::Tensor out = record(recorder, block_hook(l, "hook_attn_out"), torch::einsum("bind,hnd->bih", {attended, a.o}));
        const at::Tensor after_attention = models::layer_norm(a.layer_norm, surgery.remove_attention_skip ? out : out + h, surgery);
        if (surgery.remove_mlp) {
            h = after_attention;
        } else {
            auto& ff = *layer.ff;
            h = models::layer_norm(ff.layer_norm, linear(ff.layer_2, activation_in_place(c.activation, linear(ff.layer_1, after_attention))) + after_attention, surgery);
        }
        record(recorder, block_hook(l, "hook_resid_post"), h);
    }
    return h;
}

}  // namespace

std::unique_ptr<EncoderModel> make_xlnet(const HfConfig& config, Draw draw) {
    XLNetModel module(config);
    if (draw == Draw::Yes)
        init_like_from_config(*module, config.initializer_range, {}, -1);
    return std::make_unique<ModuleModel<XLNetModel, decltype(&xlnet_forward)>>(config, module, &xlnet_forward);
}

}  // namespace rankscope::models
