// Beyond the paper: rank collapse and trainability at initialisation (Noci et al. 2022); see trainability.hpp.
#include "rankscope/trainability.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "rankscope/error.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/summary.hpp"

namespace rankscope {

std::string to_string(ResidualScaling scaling) {
    return scaling == ResidualScaling::Plain ? "plain" : "inverse-sqrt-depth";
}

ResidualScaling parse_residual_scaling(const std::string& text) {
    for (auto scaling : {ResidualScaling::Plain, ResidualScaling::InverseSqrtDepth})
        if (to_string(scaling) == text) return scaling;
    throw Error("unknown residual scaling '" + text + "' (expected plain or inverse-sqrt-depth)", "scalings");
}

double residual_scale(ResidualScaling scaling, int depth) {
    return scaling == ResidualScaling::Plain ? 1.0 : 1.0 / std::sqrt(static_cast<double>(depth));
}

void TrainabilitySettings::validate() const {
    auto positive = [](int value, int high, const char* what) {
        if (value < 1 || value > high) throw Error(fmt::format("{} is outside [1, {}]", value, high), what);
    };
    if (depths.empty() || layer_norms.empty() || scalings.empty())
        throw Error("depths, LayerNorm placements and residual scalings must each list at least one value");
    for (int depth : depths) positive(depth, 256, "depths");
    if (std::set<int>(depths.begin(), depths.end()).size() != depths.size()) throw Error("a depth is listed twice", "depths");
    if (std::set<LayerNormKind>(layer_norms.begin(), layer_norms.end()).size() != layer_norms.size() ||
        std::set<ResidualScaling>(scalings.begin(), scalings.end()).size() != scalings.size())
        throw Error("a LayerNorm placement or residual scaling is listed twice");
    for (auto kind : layer_norms)
        if (kind != LayerNormKind::Post && kind != LayerNormKind::Pre)
            throw Error("the trainability experiment compares post-LN and pre-LN blocks, not '" + to_string(kind) + "'",
                        "layer_norms");
    positive(heads, 64, "heads");
    positive(d_model, 1024, "d_model");
    if (d_model % heads != 0) throw Error(fmt::format("d_model {} is not divisible by heads {}", d_model, heads), "d_model");
    if (tokens < 2 || tokens > 1024) throw Error(fmt::format("{} is outside [2, 1024]", tokens), "tokens");
    positive(samples, 1024, "samples");
    positive(seeds, 1000, "seeds");
    check_consecutive_seeds(seed, seeds, "--seeds");  // (Python: seeds)
}

SanConfig trainability_network(const TrainabilitySettings& settings, int depth, LayerNormKind layer_norm,
                               ResidualScaling scaling) {
    SanConfig config;
    config.layers = depth;
    config.heads = settings.heads;
    config.d_model = settings.d_model;
    config.tokens = settings.tokens;
    config.block.attention_skip = true;
    config.block.mlp = true;
    config.block.mlp_skip = true;
    config.block.layer_norm = layer_norm;
    config.block.residual_scale = residual_scale(scaling, depth);
    return config;
}

namespace {
// Mean over samples of the mean pairwise token cosine of x [B, n, d].
double mean_cosine(const at::Tensor& x) { return batched_mean_pairwise_cosine(x).mean().item<double>(); }
}  // namespace

TrainabilityProbe probe_trainability(SanImpl& network, const at::Tensor& input, const at::Tensor& readout) {
    if (input.scalar_type() != at::kDouble || readout.sizes() != input.sizes())
        throw Error("probe_trainability: a float64 input and a read-out of the same shape are needed");
    network.zero_grad();
    Recorder recorder;
    const at::Tensor output = network.forward(input, &recorder);
    const at::Tensor loss = (output * readout).sum() / std::sqrt(static_cast<double>(output.numel()));
    loss.backward();
    TrainabilityProbe probe;
    const at::Tensor last = output.detach();
    probe.last_cosine = mean_cosine(last);
    probe.last_relative_residual = batched_relative_residual(last, Norm::Composite, Center::Mean).mean().item<double>();
    for (int l = 0; l < network.config.layers; ++l) {
        auto attention = network.block(l)->attn;
        TrainabilityLayer layer;
        layer.layer = l;
        layer.input_cosine = mean_cosine(recorder.get(block_hook(l, "hook_resid_pre")).detach());
        layer.grad_query = attention->W_Q.grad().norm().item<double>();
        layer.grad_key = attention->W_K.grad().norm().item<double>();
        layer.grad_value = attention->W_V.grad().norm().item<double>();
        probe.layers.push_back(layer);
    }
    network.zero_grad();
    return probe;
}

TrainabilityResult run_trainability_experiment(const TrainabilitySettings& settings, const InterruptPoll& interrupt) {
    settings.validate();
    TrainabilityResult result;
    const long jobs = static_cast<long>(settings.layer_norms.size() * settings.scalings.size() * settings.depths.size()) *
                      settings.seeds;
    Progress progress("trainability", jobs);
    for (auto layer_norm : settings.layer_norms)
        for (auto scaling : settings.scalings)
            for (int depth : settings.depths)
                for (int s = 0; s < settings.seeds; ++s) {
                    interrupt.poll();
                    TrainabilityRun run;
                    run.depth = depth, run.layer_norm = layer_norm, run.scaling = scaling;
                    run.seed = settings.seed + static_cast<std::uint64_t>(s);
                    // The same seed draws the same input and read-out for every configuration (drawn first), then the
                    // network; float32 draws widened to float64, as the theory experiment does.
                    torch::manual_seed(run.seed);
                    const at::Tensor input = torch::randn({settings.samples, settings.tokens, settings.d_model}).to(at::kDouble);
                    const at::Tensor readout = torch::randn(input.sizes()).to(at::kDouble);
                    San network(trainability_network(settings, depth, layer_norm, scaling));
                    network->to(at::kDouble);
                    run.probe = probe_trainability(*network, input, readout);
                    result.runs.push_back(std::move(run));
                    progress.advance();
                }
    return result;
}

Table trainability_layers_table(const TrainabilityResult& result) {
    Table table({{"layer_norm", Table::Text}, {"scaling", Table::Text}, {"depth", Table::Integer},
                 {"residual_scale", Table::Real}, {"seed", Table::Unsigned}, {"layer", Table::Integer},
                 {"input_cosine", Table::Real}, {"grad_W_Q", Table::Real}, {"grad_W_K", Table::Real},
                 {"grad_W_V", Table::Real}, {"query_over_value", Table::Real}, {"key_over_value", Table::Real}});
    for (const auto& run : result.runs)
        for (const auto& l : run.probe.layers)
            table.add({to_string(run.layer_norm), to_string(run.scaling), run.depth, residual_scale(run.scaling, run.depth),
                       static_cast<unsigned long long>(run.seed), l.layer, l.input_cosine, l.grad_query, l.grad_key,
                       l.grad_value, l.grad_query / l.grad_value, l.grad_key / l.grad_value});
    return table;
}

namespace {
// Median over the layers of one run of ‖∂ℒ/∂W_Q‖ / ‖∂ℒ/∂W_V‖.
double median_query_over_value(const TrainabilityRun& run) {
    std::vector<double> ratios;
    for (const auto& l : run.probe.layers) ratios.push_back(l.grad_query / l.grad_value);
    return median(ratios);
}
}  // namespace

Table trainability_runs_table(const TrainabilityResult& result) {
    Table table({{"layer_norm", Table::Text}, {"scaling", Table::Text}, {"depth", Table::Integer},
                 {"residual_scale", Table::Real}, {"seed", Table::Unsigned}, {"last_cosine", Table::Real},
                 {"last_relative_residual", Table::Real}, {"median_query_over_value", Table::Real},
                 {"last_layer_query_over_value", Table::Real}});
    for (const auto& run : result.runs) {
        const auto& last = run.probe.layers.back();
        table.add({to_string(run.layer_norm), to_string(run.scaling), run.depth, residual_scale(run.scaling, run.depth),
                   static_cast<unsigned long long>(run.seed), run.probe.last_cosine, run.probe.last_relative_residual,
                   median_query_over_value(run), last.grad_query / last.grad_value});
    }
    return table;
}

namespace {

struct Configuration {
    LayerNormKind layer_norm;
    ResidualScaling scaling;
    int depth;
    bool operator<(const Configuration& o) const {
        return std::tie(layer_norm, scaling, depth) < std::tie(o.layer_norm, o.scaling, o.depth);
    }
};

// The runs grouped by configuration, groups in the order of their first run, runs in seed order.
std::vector<std::vector<const TrainabilityRun*>> group_runs(const TrainabilityResult& result) {
    std::vector<std::vector<const TrainabilityRun*>> groups;
    std::map<Configuration, std::size_t> index;
    for (const auto& run : result.runs) {
        const Configuration c{run.layer_norm, run.scaling, run.depth};
        auto [it, added] = index.emplace(c, groups.size());
        if (added) groups.emplace_back();
        groups[it->second].push_back(&run);
    }
    return groups;
}

std::string label(LayerNormKind layer_norm, ResidualScaling scaling) {
    return fmt::format("{}-LN, {}", to_string(layer_norm), scaling == ResidualScaling::Plain ? "α = 1" : "α = 1/√L");
}

}  // namespace

Table trainability_summary_table(const TrainabilityResult& result) {
    Table table({{"layer_norm", Table::Text}, {"scaling", Table::Text}, {"depth", Table::Integer},
                 {"residual_scale", Table::Real}, {"seeds", Table::Integer}, {"last_cosine_mean", Table::Real},
                 {"last_cosine_std", Table::Real}, {"last_cosine_min", Table::Real}, {"last_cosine_max", Table::Real},
                 {"last_relative_residual_mean", Table::Real}, {"median_query_over_value_mean", Table::Real}});
    for (const auto& group : group_runs(result)) {
        std::vector<double> cosines, residuals, ratios;
        for (const auto* run : group) {
            cosines.push_back(run->probe.last_cosine);
            residuals.push_back(run->probe.last_relative_residual);
            ratios.push_back(median_query_over_value(*run));
        }
        const Summary cosine = summarize(cosines);
        const auto& first = *group.front();
        table.add({to_string(first.layer_norm), to_string(first.scaling), first.depth,
                   residual_scale(first.scaling, first.depth), static_cast<int>(group.size()), cosine.mean, cosine.std,
                   cosine.min, cosine.max, summarize(residuals).mean, summarize(ratios).mean});
    }
    return table;
}

Findings trainability_findings(const TrainabilityResult& result, const TrainabilitySettings& settings) {
    Findings f;
    f.experiment = "Noci 2022";
    f.subject = fmt::format("rank collapse and trainability at init: depths {}, d = {}, {} heads, n = {}, {} samples × {} seeds",
                            fmt::join(settings.depths, ", "), settings.d_model, settings.heads, settings.tokens,
                            settings.samples, settings.seeds);
    const std::string setting = fmt::format("attention + ReLU MLP blocks with both skips, float64, linear read-out loss, "
                                            "d = {}, H = {}, n = {}, {} samples × {} seeds",
                                            settings.d_model, settings.heads, settings.tokens, settings.samples, settings.seeds);
    // Runs of each configuration, in seed order.
    std::map<Configuration, std::vector<const TrainabilityRun*>> runs;
    for (const auto& run : result.runs) runs[{run.layer_norm, run.scaling, run.depth}].push_back(&run);
    const int shallow = *std::min_element(settings.depths.begin(), settings.depths.end());
    const int deep = *std::max_element(settings.depths.begin(), settings.depths.end());
    auto has = [&](ResidualScaling s) {
        return std::find(settings.scalings.begin(), settings.scalings.end(), s) != settings.scalings.end();
    };
    auto mean_of = [](const std::vector<const TrainabilityRun*>& rs, auto value) {
        double sum = 0;
        for (const auto* r : rs) sum += value(*r);
        return rs.empty() ? NAN : sum / static_cast<double>(rs.size());
    };
    auto last_cosine = [](const TrainabilityRun& r) { return r.probe.last_cosine; };

    for (auto layer_norm : settings.layer_norms)
        for (auto scaling : settings.scalings) {
            std::vector<std::string> parts;
            for (int depth : settings.depths)
                parts.push_back(fmt::format("L = {}: {}", depth, quote_number(mean_of(runs[{layer_norm, scaling, depth}], last_cosine))));
            f.key(fmt::format("mean token cosine at the last layer, {}", label(layer_norm, scaling)), fmt::format("{}", fmt::join(parts, "; ")));
        }

    // 1. Without scaling, tokens align with depth (Noci et al. Fig. 1, post-LN): in every seed the deepest network's
    // last-layer cosine exceeds the shallowest's.
    if (has(ResidualScaling::Plain))
        for (auto layer_norm : settings.layer_norms) {
            const auto& low = runs[{layer_norm, ResidualScaling::Plain, shallow}];
            const auto& high = runs[{layer_norm, ResidualScaling::Plain, deep}];
            bool every_seed = low.size() == high.size();
            for (std::size_t i = 0; every_seed && i < low.size(); ++i)
                every_seed = high[i]->probe.last_cosine > low[i]->probe.last_cosine;
            f.check({"Noci 2022", fmt::format("Without residual scaling, tokens align with depth at initialisation ({}-LN)", to_string(layer_norm)),
                     layer_norm == LayerNormKind::Post
                         ? "Fig. 1 caption (post-LN): unless residual scaling is used, more depth means more token alignment at init"
                         : "Fig. 1 shows post-LN only; the same measurement on pre-LN blocks",
                     fmt::format("last-layer cosine {} at L = {}, {} at L = {} ({})",
                                 quote_number(mean_of(low, last_cosine)), shallow, quote_number(mean_of(high, last_cosine)),
                                 deep, low.size() == 1 ? std::string("one seed") : fmt::format("means over {} seeds", low.size())),
                     // Each criterion says when it is judged: "not comparable" gave no reason beside a criterion met.
                     // One seed at depths 1 and 2 (n = 2, d = 4) read "not reproduced" from two noisy cosines.
                     fmt::format("higher at L = {} than at L = {} in every seed (judged when the deepest is at least twice "
                                 "the shallowest and 8 or more, over 2 seeds or more)",
                                 deep, shallow),
                     judge(deep >= 2 * shallow && deep >= 8 && low.size() >= 2, every_seed), setting});
        }

    // 2. Query/key gradients shrink relative to value gradients as a layer's input aligns: rank correlation over every
    // layer of every run between the input cosine and the gradient ratio.
    std::vector<double> cosines, query_ratios, key_ratios;
    for (const auto& run : result.runs)
        for (const auto& l : run.probe.layers) {
            const double query = std::log(l.grad_query / l.grad_value), key = std::log(l.grad_key / l.grad_value);
            // (a zero query/key gradient, log = −inf, still ranks lowest; NaN anywhere leaves the layer out)
            if (!std::isfinite(l.input_cosine) || !(l.grad_value > 0) || std::isnan(query) || std::isnan(key)) continue;
            cosines.push_back(l.input_cosine);
            query_ratios.push_back(query);
            key_ratios.push_back(key);
        }
    const double rho_query = cosines.size() >= 2 ? spearman_correlation(cosines, query_ratios) : NAN;
    const double rho_key = cosines.size() >= 2 ? spearman_correlation(cosines, key_ratios) : NAN;
    const double cosine_low = cosines.empty() ? NAN : *std::min_element(cosines.begin(), cosines.end());
    const double cosine_high = cosines.empty() ? NAN : *std::max_element(cosines.begin(), cosines.end());
    f.key("Spearman ρ(layer input cosine, log ‖∇W_Q‖/‖∇W_V‖), all layers of all runs", rho_query);
    f.key("Spearman ρ(layer input cosine, log ‖∇W_K‖/‖∇W_V‖)", rho_key);
    f.check({"Noci 2022", "As tokens align, the query and key gradients vanish relative to the value gradients",
             "abstract: rank collapse makes the query and key gradients vanish at init (exactly 0 for aligned tokens); values differ",
             fmt::format("ρ = {} (queries), {} (keys) over {} layers with input cosine {} to {}", quote_number(rho_query),
                         quote_number(rho_key), cosines.size(), quote_number(cosine_low), quote_number(cosine_high)),
             "ρ < −0.5 for queries and for keys (judged over at least 10 layers whose input cosines span at least 0.5)",
             judge(cosines.size() >= 10 && cosine_high - cosine_low >= 0.5, rho_query < -0.5 && rho_key < -0.5), setting});

    // 3 and 4. 1/√L scaling at the deepest depth: tokens further apart, query/key gradients larger relative to values.
    if (has(ResidualScaling::Plain) && has(ResidualScaling::InverseSqrtDepth))
        for (auto layer_norm : settings.layer_norms) {
            const auto& plain = runs[{layer_norm, ResidualScaling::Plain, deep}];
            const auto& scaled = runs[{layer_norm, ResidualScaling::InverseSqrtDepth, deep}];
            bool apart = plain.size() == scaled.size(), alive = apart;
            for (std::size_t i = 0; apart && i < plain.size(); ++i)
                apart = scaled[i]->probe.last_cosine < plain[i]->probe.last_cosine;
            // ... and most of the alignment that depth adds without scaling is gone with it.
            const double plain_growth = mean_of(plain, last_cosine) -
                                        mean_of(runs[{layer_norm, ResidualScaling::Plain, shallow}], last_cosine);
            const double scaled_growth = mean_of(scaled, last_cosine) -
                                         mean_of(runs[{layer_norm, ResidualScaling::InverseSqrtDepth, shallow}], last_cosine);
            apart = apart && scaled_growth < plain_growth / 2;
            const double ratio_plain = mean_of(plain, median_query_over_value);
            const double ratio_scaled = mean_of(scaled, median_query_over_value);
            alive = alive && ratio_scaled > ratio_plain;
            f.check({"Noci 2022", fmt::format("Scaling the residual branches by 1/√L keeps the tokens apart ({}-LN)", to_string(layer_norm)),
                     "abstract: an appropriate depth-dependent scaling of the residual branches prevents rank collapse",
                     fmt::format("last-layer cosine at L = {}: {} with α = 1/√L, {} with α = 1; growth from L = {}: {} and {}",
                                 deep, quote_number(mean_of(scaled, last_cosine)), quote_number(mean_of(plain, last_cosine)),
                                 shallow, quote_number(scaled_growth), quote_number(plain_growth)),
                     "lower with α = 1/√L in every seed, and its growth with depth under half of α = 1's (judged at a "
                     "deepest depth of 8 or more)",
                     judge(deep >= 8, apart), setting});
            f.check({"Noci 2022", fmt::format("Scaling the residual branches by 1/√L keeps the query/key gradients alive ({}-LN)", to_string(layer_norm)),
                     "abstract: scaling prevents the collapse that makes the query/key gradients vanish",
                     fmt::format("median over layers of ‖∇W_Q‖/‖∇W_V‖ at L = {}: {} with α = 1/√L, {} with α = 1", deep,
                                 quote_number(ratio_scaled), quote_number(ratio_plain)),
                     "larger with α = 1/√L (mean over seeds; judged at a deepest depth of 8 or more)",
                     judge(deep >= 8, alive), setting});
        }

    // Reading, from the same numbers.
    std::vector<std::string> sentences;
    for (auto layer_norm : settings.layer_norms)
        for (auto scaling : settings.scalings)
            sentences.push_back(fmt::format("{}: the mean token cosine at the last layer goes from {} at L = {} to {} at L = {}",
                                            label(layer_norm, scaling),
                                            quote_number(mean_of(runs[{layer_norm, scaling, shallow}], last_cosine)), shallow,
                                            quote_number(mean_of(runs[{layer_norm, scaling, deep}], last_cosine)), deep));
    const std::string correlation =
        rho_query < -0.5 && rho_key < -0.5
            ? "the more aligned a layer's input, the smaller its query and key gradients relative to its value gradient"
            : "a layer's input alignment and its query/value gradient ratio are not clearly anti-correlated";
    f.reading = fmt::format("{}. Over every layer of every run, {} (Spearman ρ = {} for queries, {} for keys).",
                            fmt::join(sentences, "; "), correlation, quote_number(rho_query), quote_number(rho_key));
    f.notes.push_back("Noci et al.'s Fig. 1 follows post-LN Transformers trained with Adam on IWSLT'14; here only "
                      "initialisation is measured, on random N(0, 1) tokens, with a linear read-out loss (the exact zero for "
                      "aligned tokens holds for any loss; unit test). The depth-dependent scale is taken as α = 1/√L on both "
                      "branches of every block.");
    return f;
}

}  // namespace rankscope
