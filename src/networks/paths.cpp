#include "rankscope/paths.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "rankscope/array.hpp"
#include "rankscope/attention_rows.hpp"
#include "rankscope/blas_threads.hpp"
#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/models.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/tensor_file.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope {

PathCheck check_path_decomposition(San& network, const at::Tensor& x, double max_paths) {
    torch::NoGradGuard no_grad;
    const auto& config = network->config;
    const int L = config.layers, H = config.heads;
    bool any_skip = false;
    for (int l = 0; l < L; ++l) {
        const BlockConfig block = config.block_at(l);
        if (block.mlp || block.layer_norm != LayerNormKind::None)
            throw Error("the path decomposition needs a network without MLP and LayerNorm (layer " + std::to_string(l) + ")");
        if (block.attention_skip && block.residual_scale != 1.0)
            throw Error("the path decomposition needs unscaled skips (residual_scale 1; layer " + std::to_string(l) + ")");
        any_skip = any_skip || block.attention_skip;
    }
    PathCheck check;
    check.paths = 1;
    for (int l = 0; l < L; ++l) check.paths *= H + (config.block_at(l).attention_skip ? 1 : 0);
    if (check.paths > max_paths)
        throw Error(fmt::format("{:.4g} paths ((H + 1)^L with skips, else H^L) are more than the {:.0f} that are enumerated",
                                check.paths, max_paths));

    Recorder recorder;
    const at::Tensor output = network->forward(x, &recorder);  // [B, n, d]
    const std::int64_t B = x.size(0), n = x.size(1), d = x.size(2);
    Progress progress("paths check", static_cast<long>(check.paths));  // up to a million leaves: minutes
    std::vector<at::Tensor> patterns, head_weights;  // [B, H, n, n], [H, d, d]
    at::Tensor bias = torch::zeros({d}, x.options());  // b^l: 1 bᵀ part of X^l
    for (int l = 0; l < L; ++l) {
        auto attention = network->block(l)->attn;
        patterns.push_back(recorder.get(block_hook(l, "attn.hook_pattern")));
        const at::Tensor w = attention->value_output_product();
        head_weights.push_back(w);
        // P_h (1 bᵀ) W_h = 1 bᵀ W_h since P_h 1 = 1; the value bias b_V,h enters through W_O,h.
        at::Tensor next = attention->b_O.clone();
        for (int h = 0; h < H; ++h) next = next + torch::matmul(bias, w[h]) + torch::matmul(attention->b_V[h], attention->W_O[h]);
        if (config.block_at(l).attention_skip) next = next + bias;
        bias = next;
    }
    at::Tensor total = torch::zeros_like(output) + bias;
    const at::Tensor identity_n = torch::eye(n, x.options()).expand({B, n, n});
    const at::Tensor identity_d = torch::eye(d, x.options());
    std::function<void(int, const at::Tensor&, const at::Tensor&)> walk = [&](int l, const at::Tensor& p, const at::Tensor& w) {
        if (l == L) {
            total = total + torch::matmul(torch::matmul(p, x), w);
            progress.advance();
            return;
        }
        for (int h = 0; h < H; ++h) walk(l + 1, torch::matmul(patterns[l].select(1, h), p), torch::matmul(w, head_weights[l][h]));
        if (config.block_at(l).attention_skip) walk(l + 1, p, w);
    };
    walk(0, identity_n, identity_d);
    check.max_abs_error = (total - output).abs().max().item<double>();
    check.max_abs_output = output.abs().max().item<double>();
    return check;
}

std::vector<PathLengthRow> path_length_distribution(int layers, int heads, const std::vector<double>& alpha) {
    if (layers < 1 || heads < 1) throw Error("path counts need layers >= 1 and heads >= 1");
    if (!alpha.empty() && static_cast<int>(alpha.size()) != layers)
        throw Error(fmt::format("{} values for {} layers (one per layer)", alpha.size(), layers), "alpha");
    for (double a : alpha)
        if (!(a >= 0 && a <= 1)) throw Error(fmt::format("{} is outside [0, 1]: every alpha must lie there", a), "alpha");
    std::vector<PathLengthRow> rows(static_cast<std::size_t>(layers + 1));
    // Poisson-binomial over layers: probability that k layers take a head, layer l taking one with 1 − α_l.
    std::vector<double> weighted(static_cast<std::size_t>(layers + 1), 0.0);
    weighted[0] = 1.0;
    for (int l = 0; l < static_cast<int>(alpha.size()); ++l)
        for (int k = l + 1; k >= 0; --k)
            weighted[k] = weighted[k] * alpha[l] + (k > 0 ? weighted[k - 1] * (1 - alpha[l]) : 0.0);
    const double log_total = layers * std::log(heads + 1.0);
    // N(k) exactly while it fits 128 bits (C(L, k+1) = C(L, k)·(L − k)/(k + 1) divides exactly), so every count below
    // 2^53 is the exact integer (exp of lgamma was off by 1 to 31 at 1e14–3e15: BERT-large k = 7 read
    // 92906585063423); beyond 128 bits, from logarithms (relative error ~1e-13, printed in scientific notation).
    using Exact = unsigned __int128;
    constexpr Exact kMaxExact = ~Exact(0);
    Exact choose = 1, power = 1;  // C(L, k) and H^k while exact
    bool choose_exact = true, power_exact = true;
    for (int k = 0; k <= layers; ++k) {
        const double log_count = std::lgamma(layers + 1.0) - std::lgamma(k + 1.0) - std::lgamma(layers - k + 1.0) +
                                 k * std::log(static_cast<double>(heads));
        auto& row = rows[static_cast<std::size_t>(k)];
        row.length = k;
        const bool exact = choose_exact && power_exact && choose <= kMaxExact / power;
        row.count = exact ? static_cast<double>(choose * power) : std::exp(log_count);
        // Next k: C(L, k+1) and H^(k+1); once either overflows, the remaining counts come from the logarithms.
        if (choose_exact) {
            const Exact factor = static_cast<Exact>(layers - k);
            if (factor != 0 && choose > kMaxExact / factor) choose_exact = false;
            else choose = choose * factor / static_cast<Exact>(k + 1);
        }
        if (power_exact) {
            if (power > kMaxExact / static_cast<Exact>(heads)) power_exact = false;
            else power *= static_cast<Exact>(heads);
        }
        row.share = std::exp(log_count - log_total);
        row.alpha_share = alpha.empty() ? -1 : weighted[static_cast<std::size_t>(k)];
    }
    return rows;
}

double mean_path_length(const std::vector<PathLengthRow>& rows, bool alpha_weighted) {
    double mean = 0;
    for (const auto& row : rows) mean += row.length * (alpha_weighted ? row.alpha_share : row.share);
    return mean;
}

const std::vector<NamedArchitecture>& known_architectures() {
    static const std::vector<NamedArchitecture> table = {
        {"BERT-base", 12, 12}, {"DistilBERT", 6, 12}, {"MobileBERT", 12, 4}, {"BERT-large", 24, 16},
        {"ViT-H", 32, 16},     {"T5-3B", 24, 32},     {"T5-11B", 24, 128},  {"GPT-3", 96, 96},
        {"DeiT-T", 12, 3}};
    return table;
}

void check_pattern_shapes(const std::vector<at::Tensor>& patterns, const std::function<std::string(std::size_t)>& where_of) {
    if (patterns.empty()) throw Error("no attention patterns to sample paths from", where_of(0));
    const auto shape = patterns[0].sizes();
    for (std::size_t l = 0; l < patterns.size(); ++l) {
        const at::Tensor& p = patterns[l];
        if (p.dim() != 4 || p.size(2) != p.size(3) || !at::isFloatingType(p.scalar_type()))
            throw Error("expected a float [batch, heads, n, n] tensor", where_of(l));
        if (p.sizes() != shape)
            throw Error(fmt::format("shape [{}] differs from the first layer's [{}]", fmt::join(p.sizes(), ", "),
                                    fmt::join(shape, ", ")),
                        where_of(l));
    }
}

void check_attention_patterns(const std::vector<at::Tensor>& patterns, const at::Tensor& attention_mask,
                              const std::function<std::string(std::size_t)>& where_of, const std::string& mask_where,
                              const std::vector<double>& stored_epsilons) {
    if (!stored_epsilons.empty() && stored_epsilons.size() != patterns.size())
        throw Error(fmt::format("{} stored epsilons for {} layers", stored_epsilons.size(), patterns.size()));
    check_pattern_shapes(patterns, where_of);
    const auto shape = patterns[0].sizes();
    if (attention_mask.defined()) {
        if (attention_mask.dim() != 2 || attention_mask.size(0) != shape[0] || attention_mask.size(1) != shape[2])
            throw Error(fmt::format("shape [{}] is not the patterns' [batch, n] = [{}, {}]",
                                    fmt::join(attention_mask.sizes(), ", "), shape[0], shape[2]),
                        mask_where);
        check_attention_mask(attention_mask, mask_where, mask_where);
    }
    // Each real token's row is a softmax row: ≥ 0, summing to 1 within the rounding of n terms in the stored dtype.
    const at::Tensor real = attention_mask.defined() ? attention_mask.ne(0).unsqueeze(1).expand({shape[0], shape[1], shape[2]})
                                                     : at::Tensor();  // [B, H, n]: which rows are checked
    double most_on_padding = 0;  // the largest weight a real row puts on padded tokens (above round-off), and where
    std::size_t layer_most_on_padding = 0;
    for (std::size_t l = 0; l < patterns.size(); ++l) {
        const at::Tensor& p = patterns[l];
        if (!torch::isfinite(p).all().item<bool>()) throw Error("has NaN or Inf entries", where_of(l));
        const double eps = stored_epsilons.empty() ? dtype_epsilon(stored_dtype(p.scalar_type(), where_of(l)))
                                                   : std::max(stored_epsilons[l], dtype_epsilon(stored_dtype(p.scalar_type(), where_of(l))));
        const double tolerance = std::max(1e-4, static_cast<double>(p.size(-1)) * eps);
        if (const auto row = first_non_attention_row(p, tolerance, real))
            throw Error(fmt::format("row {} of head {} of sample {} is not an attention row {}", row->index[2],
                                    row->index[1], row->index[0], non_attention_row_detail(*row, tolerance)),
                        where_of(l));
        // The products keep the real tokens' rows and columns. A recording whose real rows attend to padding (no
        // mask applied when it was made) leaves rows summing to less than 1 there: said once, after every check,
        // with the largest share (up to 40% of a row was dropped without a word).
        if (attention_mask.defined()) {
            const at::Tensor padded_columns = attention_mask.eq(0).to(p.scalar_type()).unsqueeze(1).unsqueeze(1);  // [B, 1, 1, n]
            const at::Tensor on_padding = (p * padded_columns).sum(-1).masked_fill(real.logical_not(), 0);  // [B, H, n]
            if (const double most = on_padding.max().item<double>(); most > tolerance && most > most_on_padding)
                most_on_padding = most, layer_most_on_padding = l;
        }
    }
    if (most_on_padding > 0)
        warn(fmt::format("{}: real tokens' attention rows put up to {} of their weight on padded tokens; the products "
                         "over the real tokens use those rows without it (rows summing to less than 1)",
                         where_of(layer_most_on_padding), quote_number(most_on_padding)));
}

std::vector<PathProductSample> sample_path_products(const std::vector<at::Tensor>& patterns, int draws,
                                                    std::uint64_t seed, const at::Tensor& attention_mask) {
    if (patterns.empty()) throw Error("no attention patterns to sample paths from");
    const int L = static_cast<int>(patterns.size());
    const std::int64_t B = patterns[0].size(0), H = patterns[0].size(1);
    // 1. The draws, in one fixed order from one generator (the samples do not depend on the thread count).
    std::mt19937_64 generator(seed);
    std::vector<PathProductSample> samples;
    std::vector<int> order(static_cast<std::size_t>(L));
    for (int k = 1; k <= L; ++k)
        for (int draw = 0; draw < draws; ++draw) {
            PathProductSample s;
            s.length = k;
            s.draw = draw;
            s.sample = static_cast<int>(std::uniform_int_distribution<std::int64_t>(0, B - 1)(generator));
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), generator);
            s.layers.assign(order.begin(), order.begin() + k);
            std::sort(s.layers.begin(), s.layers.end());
            for (std::size_t i = 0; i < s.layers.size(); ++i)
                s.heads.push_back(static_cast<int>(std::uniform_int_distribution<std::int64_t>(0, H - 1)(generator)));
            samples.push_back(std::move(s));
        }
    // Each sample's real token positions (undefined when it has no padding).
    std::vector<at::Tensor> real_tokens(static_cast<std::size_t>(B));
    if (attention_mask.defined())
        for (std::int64_t b = 0; b < B; ++b)
            if (!attention_mask[b].all().item<bool>()) real_tokens[static_cast<std::size_t>(b)] = attention_mask[b].nonzero().squeeze(1);
    // 2. The products and their rank-1 residuals, independent of each other: in parallel, one product per task, each
    // product on the calling thread (ATen runs ops inside a parallel region serially; OpenBLAS's own thread pool is
    // held at one thread meanwhile, else its workers and ours wait on each other).
    const SingleThreadedBlas single_threaded_blas;
    at::parallel_for(0, static_cast<std::int64_t>(samples.size()), 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
            PathProductSample& s = samples[static_cast<std::size_t>(i)];
            const at::Tensor& real = real_tokens[static_cast<std::size_t>(s.sample)];
            at::Tensor product;
            for (std::size_t j = 0; j < s.layers.size(); ++j) {
                at::Tensor a = patterns[static_cast<std::size_t>(s.layers[j])][s.sample][s.heads[j]].to(at::kDouble);
                if (real.defined()) a = a.index_select(0, real).index_select(1, real);
                product = product.defined() ? at::mm(a, product) : a;  // later layer on the left
            }
            const Matrix matrix = to_matrix(product);
            const double composite = matrix_norm(matrix, Norm::Composite), frobenius = matrix_norm(matrix, Norm::Frobenius);
            if (!std::isfinite(frobenius)) {  // maps of an overflowing model (--allow-nonfinite): NaN, not the 0 it read
                s.relative_residual = s.relative_residual_frobenius = std::numeric_limits<double>::quiet_NaN();
                continue;
            }
            // The rank-1 residual does not depend on the norm: one eigen-solve for both norms.
            const Matrix rest = residual(matrix, Norm::Frobenius, Center::Rank1);
            s.relative_residual = ratio_or_zero(matrix_norm(rest, Norm::Composite), composite);
            s.relative_residual_frobenius = ratio_or_zero(matrix_norm(rest, Norm::Frobenius), frobenius);
        }
    });
    return samples;
}

std::string join_indices(const std::vector<int>& indices) {
    std::string out;
    for (std::size_t i = 0; i < indices.size(); ++i) out += (i ? " " : "") + std::to_string(indices[i]);
    return out;
}

Table path_samples_table(const std::vector<PathProductSample>& samples) {
    Table table({{"length", Table::Integer}, {"draw", Table::Integer}, {"sample", Table::Integer}, {"layers", Table::Text},
                 {"heads", Table::Text}, {"relative_residual", Table::Real}, {"relative_residual_frobenius", Table::Real}});
    for (const auto& s : samples)
        table.add({s.length, s.draw, s.sample, join_indices(s.layers), join_indices(s.heads), s.relative_residual,
                   s.relative_residual_frobenius});
    return table;
}

}  // namespace rankscope
