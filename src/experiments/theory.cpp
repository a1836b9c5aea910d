#include "rankscope/theory.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "rankscope/measures.hpp"
#include "rankscope/summary.hpp"

namespace rankscope {
namespace {

// ||·||_1 and ||·||_inf of every [.., a, b] matrix in a stack, as two tensors.
std::pair<double, double> max_induced(const at::Tensor& stack) {
    const at::Tensor a = stack.abs();
    return {a.sum(-2).amax(-1).max().item<double>(), a.sum(-1).amax(-1).max().item<double>()};
}
double composite_of(const std::pair<double, double>& p) { return std::sqrt(p.first * p.second); }

// Lipschitz constant of the activation: ReLU 1; GELU max_x d/dx[x Φ(x)] ≈ 1.1289.
double activation_lipschitz(Activation a) { return a == Activation::ReLU ? 1.0 : 1.1289; }

}  // namespace

bool TheoryVariant::has_bound() const {
    for (int l = 0; l < config.layers; ++l) {
        const auto b = config.block_at(l);
        if (b.attention_skip || b.layer_norm == LayerNormKind::Post || b.layer_norm == LayerNormKind::Pre) return false;
    }
    return true;
}

std::vector<TheoryVariant> theory_variants(const SanConfig& base, int heads) {
    std::vector<TheoryVariant> variants;
    for (int h : {1, heads}) {
        if (h == heads && heads == 1 && !variants.empty()) break;
        auto add = [&](const std::string& name, auto modify) {
            TheoryVariant v{name + (h > 1 ? "/H=" + std::to_string(h) : ""), base};
            v.config.heads = h;
            v.config.block = BlockConfig{};
            v.config.per_layer.clear();
            modify(v.config.block);
            variants.push_back(v);
        };
        add("SAN", [](BlockConfig&) {});
        add("SAN+skip", [](BlockConfig& b) { b.attention_skip = true; });
        add("SAN+MLP", [](BlockConfig& b) { b.mlp = true; });
        add("SAN+skip+MLP", [](BlockConfig& b) { b.attention_skip = b.mlp = b.mlp_skip = true; });
        add("SAN+LN", [](BlockConfig& b) { b.layer_norm = LayerNormKind::Post; });
        add("SAN+affine-LN", [](BlockConfig& b) { b.layer_norm = LayerNormKind::Affine; });
    }
    return variants;
}

std::vector<TheoryRow> run_theory(const TheoryVariant& variant, std::uint64_t seed, const at::Tensor* input,
                                  const at::Device& device) {
    torch::NoGradGuard no_grad;
    // The network and its input come from torch's global generator: draw them under a lock so that runs on several
    // threads are each exactly what a serial run with this seed gives. The input first, then the blocks in order: a
    // seed gives every variant of one width the same input, and a deeper network the same first blocks (the first
    // layers of --layers 12 are those of --layers 4).
    static std::mutex generator_mutex;
    San network(nullptr);
    at::Tensor x;
    {
        std::lock_guard<std::mutex> lock(generator_mutex);
        torch::manual_seed(seed);
        x = input ? input->to(torch::kDouble).reshape({1, input->size(-2), input->size(-1)})
                  : random_input(variant.config, 1, torch::kFloat).to(torch::kDouble);
        network = San(variant.config);
    }
    network->to(torch::kDouble);
    // The forward on `device` (network and input moved once, explicitly); then everything is read back: the measures
    // and the bound's matrices are computed on the CPU, in float64.
    Recorder recorder;
    {
        network->to(device);
        Recorder on_device;
        network->forward(x.to(device), &on_device);
        network->to(at::kCPU);
        for (const auto& [name, value] : on_device.all()) recorder.put(name, value.to(at::kCPU));
    }

    const auto& config = variant.config;
    const bool bounded = variant.has_bound();
    const double sqrt_k = std::sqrt(static_cast<double>(config.qk_dim()));
    std::vector<TheoryRow> rows;
    ExactCenter previous_centre;  // exact centre of the latest measured hidden state (the next layer's input)
    auto measure_row = [&](int layer, const at::Tensor& h) {
        TheoryRow row;
        row.variant = variant.name;
        row.heads = config.heads;
        row.seed = seed;
        row.layer = layer;
        const Matrix m = to_matrix(h[0]);
        previous_centre = exact_center(m, Norm::Composite);
        row.residual = previous_centre.residual;
        row.relative_residual = relative_residual(m, Norm::Composite, Center::Mean);
        row.at_round_off = row.relative_residual < kRoundOff;
        return row;
    };
    rows.push_back(measure_row(0, x));
    double cumulative = rows[0].residual, c_max = 0;
    for (int l = 0; l < config.layers; ++l) {
        const at::Tensor before = recorder.get(block_hook(l, "hook_resid_pre"));
        const ExactCenter centre = previous_centre;  // of `before`, measured as the previous row
        TheoryRow row = measure_row(l + 1, recorder.get(block_hook(l, "hook_resid_post")));
        if (bounded) {
            auto block = network->block(l);
            auto attention = block->attn;
            const double r = rows.back().residual;
            const at::Tensor centre_row = torch::from_blob(const_cast<double*>(centre.center.data()),
                                                           {1, centre.center.size()}, torch::kDouble).clone();
            const at::Tensor residual = before[0] - centre_row;                           // R: [n, d]
            const at::Tensor w_qk = attention->query_key_product();                       // [H, d, d]
            const at::Tensor w_vo = attention->value_output_product();                    // [H, d, d]
            const at::Tensor e = torch::matmul(torch::matmul(residual, w_qk), residual.t());  // [H, n, n]
            // p_h: attention row of a query at x*, over the actual keys.
            const at::Tensor q = torch::einsum("od,hdk->hok", {centre_row, attention->W_Q}) + attention->b_Q.unsqueeze(1);
            const at::Tensor k = torch::einsum("nd,hdk->hnk", {before[0], attention->W_K}) + attention->b_K.unsqueeze(1);
            const at::Tensor p = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / sqrt_k, -1);  // [H, 1, n]
            const at::Tensor delta = recorder.get(block_hook(l, "attn.hook_pattern"))[0] - p;       // [H, n, n]
            const double delta_norm = composite_of(max_induced(delta));
            const double e_norm = composite_of(max_induced(e));
            row.gamma = ratio_or_zero(sqrt_k * delta_norm, 4 * e_norm);
            row.beta = composite_of(max_induced(w_qk)) * composite_of(max_induced(w_vo));
            const BlockConfig b = config.block_at(l);
            double lambda = 1.0;
            if (b.layer_norm == LayerNormKind::Affine) {
                const at::Tensor mid = recorder.get(block_hook(l, "hook_attn_out"))[0];
                lambda /= std::sqrt((mid - mid.mean()).pow(2).mean().item<double>() + 1e-5);
            }
            if (b.mlp) {
                const double lip = activation_lipschitz(b.activation);
                const auto w_in = max_induced(block->mlp->W_in), w_out = max_induced(block->mlp->W_out);
                const double l1 = lip * w_in.first * w_out.first, linf = lip * w_in.second * w_out.second;
                lambda *= b.mlp_skip ? std::sqrt((1 + l1) * (1 + linf)) : std::sqrt(l1 * linf);
                if (b.layer_norm == LayerNormKind::Affine) {
                    const at::Tensor pre_norm = recorder.get(block_hook(l, "hook_mlp_out"))[0];
                    lambda /= std::sqrt((pre_norm - pre_norm.mean()).pow(2).mean().item<double>() + 1e-5);
                }
            }
            row.lambda = lambda;
            row.c = 4 * row.gamma * row.beta * config.heads * lambda / sqrt_k;
            row.bound_step = row.c * r * r * r;
            cumulative = row.c * cumulative * cumulative * cumulative;
            row.bound_cumulative = cumulative;
            c_max = std::max(c_max, row.c);
            const double exponent = std::pow(3.0, l + 1);
            row.bound_theorem = std::exp((exponent - 1) / 2 * std::log(c_max) + exponent * std::log(rows[0].residual));
        }
        rows.push_back(row);
    }
    return rows;
}

double fitted_collapse_rate(const std::vector<TheoryRow>& rows) {
    std::vector<double> layers, log_minus_log;
    for (const auto& row : rows) {
        // Layer 0 is the input: its r_0 ≈ 1 makes log(−log r_0) arbitrary (seed 0's 1.0043 was left out, seed 1's
        // 0.9698 was in at −3.4), so the fit starts at the first layer's output.
        if (row.layer == 0 || row.at_round_off || !(row.relative_residual < 1)) continue;
        layers.push_back(row.layer);
        log_minus_log.push_back(std::log(-std::log(row.relative_residual)));
    }
    return least_squares_slope(layers, log_minus_log);
}

}  // namespace rankscope

namespace rankscope {

// Seeds are never pooled into one regression: with one step per seed (reproduce --quick's theory cell under the
// earlier rule) a pooled slope compares seeds, whose constants c differ, not layers; it read 23.7.
StepExponentFit fitted_collapse_exponent(const std::vector<TheoryRow>& rows) {
    std::map<std::pair<std::string, std::uint64_t>, std::vector<const TheoryRow*>> by_seed;
    for (const auto& row : rows) by_seed[{row.variant, row.seed}].push_back(&row);
    StepExponentFit fit;
    std::vector<double> exponents;
    for (auto& [key, seed_rows] : by_seed) {
        ++fit.seeds;
        std::sort(seed_rows.begin(), seed_rows.end(),
                  [](const TheoryRow* a, const TheoryRow* b) { return a->layer < b->layer; });
        std::vector<std::pair<double, double>> steps;  // (ln r_(l−1), ln r_l) of the collapsing steps
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (std::size_t i = 1; i < seed_rows.size(); ++i) {
            const TheoryRow& before = *seed_rows[i - 1];
            const TheoryRow& after = *seed_rows[i];
            if (after.layer != before.layer + 1 || before.at_round_off || after.at_round_off) continue;
            if (!(after.residual < before.residual)) continue;  // the fitted quantity falls: a collapsing step
            const double x = std::log(before.residual), y = std::log(after.residual);
            steps.emplace_back(x, y);
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        const double count = static_cast<double>(steps.size());
        const double denominator = count * sxx - sx * sx;
        if (static_cast<int>(steps.size()) < kStepsToFit || !(denominator > 1e-12)) continue;
        const double exponent = (count * sxy - sx * sy) / denominator;
        const double intercept = (sy - exponent * sx) / count;
        double squares = 0;
        for (const auto& [x, y] : steps) squares += (y - exponent * x - intercept) * (y - exponent * x - intercept);
        exponents.push_back(exponent);
        fit.per_seed.push_back({key.second, exponent, intercept, static_cast<int>(steps.size())});
        fit.steps_min = fit.steps_min == 0 ? int(steps.size()) : std::min(fit.steps_min, int(steps.size()));
        fit.steps_max = std::max(fit.steps_max, int(steps.size()));
        fit.rms_max = std::isnan(fit.rms_max) ? std::sqrt(squares / count) : std::max(fit.rms_max, std::sqrt(squares / count));
    }
    fit.seeds_fitted = int(exponents.size());
    if (exponents.empty()) return fit;
    std::sort(exponents.begin(), exponents.end());
    const std::size_t middle = exponents.size() / 2;
    fit.median = exponents.size() % 2 ? exponents[middle] : (exponents[middle - 1] + exponents[middle]) / 2;
    fit.min = exponents.front();
    fit.max = exponents.back();
    return fit;
}

}  // namespace rankscope
