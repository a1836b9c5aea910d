// Beyond the paper (SPEC.md §7): trainability at init (Noci et al. 2022) and the two failure modes (rank vs entropy
// collapse over the query/key scale), as `rankscope trainability` and `rankscope failure-modes` compute them.
#include "bindings.hpp"
#include "rankscope/failure_modes.hpp"
#include "rankscope/trainability.hpp"

namespace rankscope::python {

using namespace pybind11::literals;

void bind_beyond(py::module_& m) {
    m.def(
        "run_trainability",
        [](const std::vector<int>& depths, const std::vector<std::string>& layer_norms, const std::vector<std::string>& scalings,
           int d_model, int heads, int tokens, int samples, int seeds, std::uint64_t seed) {
            TrainabilitySettings settings;
            settings.depths = depths;
            settings.layer_norms.clear();
            for (const auto& name : layer_norms) settings.layer_norms.push_back(parse_layer_norm(name));
            settings.scalings.clear();
            for (const auto& name : scalings) settings.scalings.push_back(parse_residual_scaling(name));
            settings.d_model = d_model, settings.heads = heads, settings.tokens = tokens, settings.samples = samples;
            settings.seeds = seeds, settings.seed = seed;
            settings.validate();
            TrainabilityResult result;
            {
                py::gil_scoped_release release;
                TorchRandomStateGuard random_state;
                result = run_trainability_experiment(settings, python_interrupt());
            }
            py::dict out;
            out["layers"] = table_columns(trainability_layers_table(result));
            out["runs"] = table_columns(trainability_runs_table(result));
            out["summary"] = table_columns(trainability_summary_table(result));
            out["findings"] = trainability_findings(result, settings);
            return out;
        },
        "depths"_a, "layer_norms"_a, "scalings"_a, "d_model"_a, "heads"_a, "tokens"_a, "samples"_a, "seeds"_a, "seed"_a,
        "Token alignment and query/key/value gradient norms at init over depth (trainability.csv, _runs, _summary).");
    m.def(
        "run_failure_modes",
        [](const std::vector<double>& query_key_scales, const std::vector<std::string>& variants, int layers, int d_model,
           int heads, int tokens, int samples, int seeds, std::uint64_t seed, double entropy_threshold, double rank_threshold) {
            FailureModesSettings settings;
            settings.query_key_scales = query_key_scales, settings.variants = variants, settings.layers = layers;
            settings.d_model = d_model, settings.heads = heads, settings.tokens = tokens, settings.samples = samples;
            settings.seeds = seeds, settings.seed = seed;
            settings.entropy_collapse_below = entropy_threshold, settings.rank_collapse_below = rank_threshold;
            settings.validate();
            FailureModesResult result;
            {
                py::gil_scoped_release release;
                TorchRandomStateGuard random_state;
                result = run_failure_modes_experiment(settings, python_interrupt());
            }
            py::dict out;
            out["rows"] = table_columns(failure_modes_table(result));
            out["summary"] = table_columns(failure_modes_summary_table(result, settings));
            out["freezing_scale"] = entropy_freezing_scale(tokens);
            out["findings"] = failure_modes_findings(result, settings);
            return out;
        },
        "query_key_scales"_a, "variants"_a, "layers"_a, "d_model"_a, "heads"_a, "tokens"_a, "samples"_a, "seeds"_a, "seed"_a,
        "entropy_threshold"_a, "rank_threshold"_a,
        "Attention entropy, relative residual and token cosine per layer over query/key scales (failure_modes.csv, _summary).");
}

}  // namespace rankscope::python
