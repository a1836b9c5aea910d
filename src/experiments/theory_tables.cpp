// `rankscope theory`'s input checks, limits and tables, shared by the command line and the Python module.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>

#include "rankscope/error.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/theory.hpp"

namespace rankscope {

at::Tensor theory_input(const ArrayView& array, const std::string& where, TheorySettings& settings) {
    if (array.shape.size() != 2) throw Error("the input must be one n x d matrix", where);
    const auto values = to_double_vector(array);
    for (double v : values)
        if (!std::isfinite(v)) throw Error("the input has NaN or Inf entries", where);
    // The same limits as --tokens and --d-model.
    check_size_limit("the input's rows (tokens)", static_cast<double>(array.shape[0]), 512, where);
    check_size_limit("the input's columns (d_model)", static_cast<double>(array.shape[1]), 512, where);
    if (array.shape[0] < 2) throw Error("the input needs at least 2 rows (tokens)", where);
    settings.network.tokens = static_cast<int>(array.shape[0]);
    settings.network.d_model = static_cast<int>(array.shape[1]);
    settings.input_label = where;
    return at::tensor(values, at::kDouble).view({array.shape[0], array.shape[1]});
}

void check_theory_settings(const TheorySettings& settings) {
    const SanConfig& network = settings.network;
    check_size_limit("heads x tokens^2 x layers",
                     double(settings.heads) * network.tokens * network.tokens * network.layers, double(1 << 26),
                     "--heads, --tokens, --layers");
    // Every layer's residual is measured at its exact composite centre (the theorems' r): a linear program whose cost
    // grows steeply with tokens x d_model (128 x 128 ran for over 10 minutes without finishing a layer).
    check_size_limit("tokens x d_model", double(network.tokens) * network.d_model, double(kMaxExactCenterEntries),
                     settings.input_label.rfind("random", 0) == 0 ? std::string("--tokens, --d-model") : settings.input_label);
    network.validate();
}

void check_theory_finite(const TheoryResult& result, bool allow_nonfinite) {
    for (const auto& r : result.rows) {
        const std::string where = fmt::format("variant {}, seed {}, layer {}", r.variant, r.seed, r.layer);
        check_finite_result(r.residual, "the residual", where, allow_nonfinite);
        check_finite_result(r.relative_residual, "the relative residual", where, allow_nonfinite);
    }
}

const char* theory_bound_definition() {
    return "per layer: r_l <= c_l r_(l-1)^3, c_l = 4*gamma*beta*H*lambda/sqrt(d_qk); r = ||X - 1x*^T||_(1,inf) at the "
           "exact centre x*; gamma = sqrt(d_qk)*||P - 1p^T|| / (4*||R W_QK R^T||) with p the attention row of a query "
           "at x* (softmax sensitivity at this layer's attention entries); beta = ||W_QK||*||W_V W_O|| (composite norm "
           "of head-wise maxima); lambda = MLP Lipschitz bound (activation constant * ||W_in||*||W_out||) times "
           "1/sigma for affine LN";
}

namespace {

// The bound's columns do not exist for a variant without a bound (skips, plain LN) or at the input (layer 0): empty
// cells there, where a nan is a bound computed and undefined.
bool has_bound_columns(const TheoryResult& result, const std::string& variant, int layer) {
    for (const auto& v : result.variants)
        if (v.variant == variant) return v.has_bound && layer > 0;
    return false;
}
Table::Cell cell_if(bool present, double value) { return present ? Table::Cell(value) : Table::Cell(); }

}  // namespace

Table theory_table(const TheoryResult& result) {
    Table table({{"variant", Table::Text}, {"heads", Table::Integer}, {"seed", Table::Unsigned},
                 {"layer", Table::Integer}, {"residual", Table::Real}, {"relative_residual", Table::Real},
                 {"gamma", Table::Real}, {"beta", Table::Real}, {"lambda", Table::Real}, {"c", Table::Real},
                 {"bound_step", Table::Real}, {"bound_cumulative", Table::Real}, {"bound_theorem", Table::Real},
                 {"at_round_off", Table::Integer}});
    for (const auto& r : result.rows) {
        const bool bound = has_bound_columns(result, r.variant, r.layer);
        table.add({r.variant, r.heads, r.seed, r.layer, r.residual, r.relative_residual, cell_if(bound, r.gamma),
                   cell_if(bound, r.beta), cell_if(bound, r.lambda), cell_if(bound, r.c), cell_if(bound, r.bound_step),
                   cell_if(bound, r.bound_cumulative), cell_if(bound, r.bound_theorem), r.at_round_off ? 1 : 0});
    }
    return table;
}

Table theory_summary_table(const TheoryResult& result) {
    // Bounds are averaged over the seeds whose residual is above round-off (nan when none is; empty where no bound is).
    Table table({{"variant", Table::Text}, {"heads", Table::Integer}, {"layer", Table::Integer},
                 {"relative_residual_mean", Table::Real}, {"residual_mean", Table::Real}, {"bound_step_mean", Table::Real},
                 {"bound_cumulative_mean", Table::Real}});
    for (const auto& s : result.layers) {
        const bool bound = has_bound_columns(result, s.variant, s.layer);
        table.add({s.variant, s.heads, s.layer, s.relative_residual_mean, s.residual_mean, cell_if(bound, s.bound_step_mean),
                   cell_if(bound, s.bound_cumulative_mean)});
    }
    return table;
}

Table theory_variants_table(const TheoryResult& result) {
    Table table({{"variant", Table::Text}, {"heads", Table::Integer}, {"has_bound", Table::Integer},
                 {"fitted_slope_log_neg_log_r", Table::Real}, {"fitted_base", Table::Real},
                 {"fitted_exponent", Table::Real}, {"final_relative_residual", Table::Real},
                 {"bound_over_measured_log10_mean", Table::Real}, {"fitted_exponent_min", Table::Real},
                 {"fitted_exponent_max", Table::Real}, {"exponent_seeds_fitted", Table::Integer},
                 {"final_relative_residual_min", Table::Real}, {"final_relative_residual_max", Table::Real},
                 {"fitted_exponent_rms_max", Table::Real}, {"exponent_steps_min", Table::Integer},
                 {"exponent_steps_max", Table::Integer}});
    // fitted_exponent: the median over seeds of each seed's own fit (fitted_collapse_exponent); its rms_max the
    // largest root mean square misfit in ln r of a seed's fit; exponent_steps_min/max the fewest and most steps a fitted
    // seed's line rests on (0: no seed fitted).
    for (const auto& v : result.variants)
        table.add({v.variant, v.heads, v.has_bound ? 1 : 0, v.fitted_slope, v.fitted_base, v.exponent.median,
                   v.final_relative_residual, v.bound_over_measured_log10_mean, v.exponent.min, v.exponent.max,
                   v.exponent.seeds_fitted, v.final_relative_residual_min, v.final_relative_residual_max,
                   v.exponent.rms_max, v.exponent.steps_min, v.exponent.steps_max});
    return table;
}

}  // namespace rankscope
