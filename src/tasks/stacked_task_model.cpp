// S task models as one: TaskModel's forward (src/tasks/task_model.cpp, src/networks/san.cpp) with a leading model
// dimension on every parameter, matrix products as batched products over the models.
#include "stacked_task_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "rankscope/error.hpp"

namespace rankscope {
namespace {

// Short sequences: how many sequences of one model and head share one attention product. At the sort task's sizes
// (B = 30, n = 8, k = 24) at::bmm over S·B·H products of 8 × 24 × 8 runs them as that many separate mm calls, each
// a few microseconds of dispatch; G sequences as one product of G·n rows, with −inf outside the diagonal blocks
// (exactly 0 after the softmax: the same numbers), cost G times the attention's arithmetic and 1/G of the calls.
// Measured with python3-torch on 1 thread (300 heads × sequences, forward + backward of softmax(q kᵀ) v): 4.3 ms as
// bmm, 1.5 / 1.3 / 1.1 / 1.1 / 1.3 / 1.9 ms for G = 2 / 3 / 4 / 5–6 / 10 / 15; training 5 sort seeds together,
// medians of 3 interleaved runs: 196 / 227 / 237 / 202 model-steps/s for G = 2 / 3 / 5 / 6 (±15% run to run).
// G = the largest divisor of B with G·n ≤ 40; 1 (one product per sequence) for long sequences. A NaN in one
// sequence would reach the others of its group (0 · NaN); training stops at a NaN loss unless told otherwise.
std::int64_t sequences_per_product(std::int64_t B, std::int64_t n) {
    for (std::int64_t group = std::min<std::int64_t>(B, 40 / std::max<std::int64_t>(n, 1)); group > 1; --group)
        if (B % group == 0) return group;
    return 1;
}

// LayerNorm over features with each model's own γ and β: x [S, T, d], w and b [S, d]. NormLayer's eps.
at::Tensor stacked_layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return torch::addcmul(b.unsqueeze(1), at::layer_norm(x, {x.size(-1)}, {}, {}, 1e-5), w.unsqueeze(1));
}

// x [S, T, a] · W [S, a, b] + bias [S, b] → [S, T, b]
at::Tensor stacked_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    return torch::baddbmm(bias.unsqueeze(1), x, weight);
}

}  // namespace

StackedTaskModel StackedTaskModel::stack(const std::vector<TaskModel>& models, const at::Device& device) {
    if (models.empty()) throw Error("stacked task model: no models");
    StackedTaskModel stacked;
    stacked.config = models.front()->config;
    const std::string config = stacked.config.to_json().dump();
    for (const auto& model : models)
        if (model->config.to_json().dump() != config) throw Error("stacked task model: the models' configurations differ");
    for (int l = 0; l < stacked.config.encoder.layers; ++l) {
        const LayerNormKind kind = stacked.config.encoder.block_at(l).layer_norm;
        if (kind != LayerNormKind::None && kind != LayerNormKind::Post)
            throw Error("stacked task model: LayerNorm '" + to_string(kind) + "' is not supported (post or none)");
    }
    torch::NoGradGuard no_grad;
    for (const auto& item : models.front()->named_parameters()) {
        std::vector<at::Tensor> slices;
        for (const auto& model : models) slices.push_back(model->named_parameters()[item.key()].detach());
        stacked.names.push_back(item.key());
        stacked.parameters.push_back(torch::stack(slices).to(device).requires_grad_(true));
    }
    return stacked;
}

const at::Tensor& StackedTaskModel::get(const std::string& name) const {
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return parameters[i];
    throw Error("stacked task model: no parameter '" + name + "'");
}

void StackedTaskModel::copy_into(std::int64_t s, TaskModel& model) const {
    torch::NoGradGuard no_grad;
    auto target = model->named_parameters();
    for (std::size_t i = 0; i < names.size(); ++i) target[names[i]].copy_(parameters[i][s]);
}

at::Tensor StackedTaskModel::forward(const at::Tensor& inputs, const at::Tensor& key_bias) const {
    const std::int64_t S = models(), B = inputs.size(1), n = inputs.size(2), d = config.encoder.d_model;
    if (inputs.size(0) != S) throw Error("stacked task model: a batch for " + std::to_string(inputs.size(0)) +
                                         " models given to " + std::to_string(S));
    // Embedding → h [S, B·n, d]
    at::Tensor h;
    if (config.input == "tokens") {
        const at::Tensor& W_E = get("embed.W_E");  // [S, V, d]
        const std::int64_t V = W_E.size(1);
        // Model s's ids index rows s·V .. s·V + V − 1 of the models' tables laid end to end.
        const at::Tensor offsets = torch::arange(S, inputs.options()).mul_(V).view({S, 1, 1});
        h = W_E.reshape({S * V, d}).index_select(0, (inputs + offsets).reshape(-1)).view({S, B, n, d});
        if (config.positions > 0) {
            if (n > config.positions)
                throw Error("sequence longer than the model's learned positions (" + std::to_string(config.positions) + ")");
            h = h + get("pos_embed.W_pos").narrow(1, 0, n).unsqueeze(1);  // [S, 1, n, d]
        }
        h = h.reshape({S, B * n, d});
    } else {
        h = stacked_linear(inputs.reshape({S, B * n, inputs.size(3)}), get("embed.W_in"), get("embed.b_in"));
        if (config.two_layer_embedding) h = stacked_linear(torch::gelu(h), get("embed.W_hidden"), get("embed.b_hidden"));
    }
    if (config.embedding_layer_norm) h = stacked_layer_norm(h, get("ln_embed.w"), get("ln_embed.b"));
    const at::Tensor bias = key_bias.defined() ? key_bias.reshape({S * B, 1, 1, n}) : at::Tensor();  // [S·B, 1, 1, n]
    const std::int64_t group = sequences_per_product(B, n);
    at::Tensor group_bias;  // [G·n, G·n] or, with padding, [S·H·B/G, G·n, G·n]: −inf off the diagonal blocks
    if (group > 1) {
        const at::Tensor sequence = torch::arange(group * n, inputs.options().dtype(torch::kLong)).div(n, "floor");
        group_bias = torch::zeros({group * n, group * n}, h.options())
                         .masked_fill_(sequence.unsqueeze(1).ne(sequence.unsqueeze(0)), -std::numeric_limits<float>::infinity());
        if (bias.defined()) {
            const std::int64_t H = get("blocks.0.attn.W_Q").size(1);
            const at::Tensor keys = key_bias.reshape({S, 1, B / group, 1, group * n}).expand({S, H, B / group, 1, group * n});
            group_bias = (group_bias + keys).reshape({S * H * (B / group), group * n, group * n});
        }
    }

    for (int l = 0; l < config.encoder.layers; ++l) {
        const BlockConfig block = config.encoder.block_at(l);
        const std::string p = "blocks." + std::to_string(l) + ".";
        // Attention, packed as AttentionImpl::forward: q | k | v of every head from one product per model.
        const at::Tensor &W_Q = get(p + "attn.W_Q"), &W_K = get(p + "attn.W_K"), &W_V = get(p + "attn.W_V"),
                         &W_O = get(p + "attn.W_O");  // [S, H, d, k], [S, H, d, k], [S, H, d, v], [S, H, v, d]
        const std::int64_t H = W_Q.size(1), k = W_Q.size(3), v = W_V.size(3);
        const at::Tensor weight = torch::cat({W_Q, W_K, W_V}, -1).permute({0, 2, 1, 3}).reshape({S, d, H * (2 * k + v)});
        const at::Tensor qkv_bias = torch::cat({get(p + "attn.b_Q"), get(p + "attn.b_K"), get(p + "attn.b_V")}, -1)
                                        .reshape({S, H * (2 * k + v)});
        const at::Tensor qkv = stacked_linear(h, weight, qkv_bias);  // [S, B·n, H·(2k + v)]
        at::Tensor z;                                                  // [S, B·n, H·v]
        if (group > 1) {
            // G sequences of one model and head as one product of G·n rows with a block-diagonal mask (see
            // sequences_per_product): [S·H·B/G, G·n, 2k + v].
            const at::Tensor grouped = qkv.view({S, B / group, group * n, H, 2 * k + v}).permute({0, 3, 1, 2, 4})
                                           .reshape({S * H * (B / group), group * n, 2 * k + v});
            const auto parts = grouped.split_with_sizes({k, k, v}, -1);
            const at::Tensor scores = torch::baddbmm(group_bias, parts[0], parts[1].transpose(1, 2), 1.0,
                                                     1.0 / std::sqrt(static_cast<double>(k)));  // [S·H·B/G, G·n, G·n]
            z = torch::bmm(torch::softmax(scores, -1), parts[2])
                    .view({S, H, B / group, group * n, v})
                    .permute({0, 2, 3, 1, 4})
                    .reshape({S, B * n, H * v});
        } else {
            const auto parts = qkv.view({S * B, n, H, 2 * k + v}).permute({0, 2, 1, 3}).split_with_sizes({k, k, v}, -1);
            at::Tensor scores = torch::matmul(parts[0], parts[1].transpose(-1, -2)) / std::sqrt(static_cast<double>(k));
            if (bias.defined()) scores = scores + bias;  // [S·B, H, n, n]
            z = torch::matmul(torch::softmax(scores, -1), parts[2]).permute({0, 2, 1, 3}).reshape({S, B * n, H * v});
        }
        const at::Tensor attention_out = stacked_linear(z, W_O.reshape({S, H * v, d}), get(p + "attn.b_O"));
        const bool post = block.layer_norm == LayerNormKind::Post;
        at::Tensor mid = block.attention_skip ? h + attention_out : attention_out;
        if (post) mid = stacked_layer_norm(mid, get(p + "ln1.w"), get(p + "ln1.b"));
        if (block.mlp) {
            const at::Tensor hidden = stacked_linear(mid, get(p + "mlp.W_in"), get(p + "mlp.b_in"));
            const at::Tensor activated = block.activation == Activation::ReLU ? torch::relu(hidden) : torch::gelu(hidden);
            const at::Tensor mlp_out = stacked_linear(activated, get(p + "mlp.W_out"), get(p + "mlp.b_out"));
            mid = block.mlp_skip ? mid + mlp_out : mlp_out;
            if (post) mid = stacked_layer_norm(mid, get(p + "ln2.w"), get(p + "ln2.b"));
        }
        h = mid;
    }
    const at::Tensor logits = stacked_linear(h, get("unembed.W_U"), get("unembed.b_U"));
    return logits.view({S, B, n, logits.size(-1)});
}

}  // namespace rankscope
