#pragma once
// E1 (SPEC.md §4): the relative residual of a real architecture after the embeddings and after each layer, for the
// paper's four surgeries; E2 on the same run: products of attention matrices along random paths.
#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/models.hpp"
#include "rankscope/paths.hpp"

namespace rankscope {

// "SAN" (no attention skip, no MLP), "SAN+MLP" (no attention skip), "SAN+skip" (no MLP), "transformer".
Surgery surgery_for_variant(const std::string& variant, bool official_compat);

struct ResidualRow {
    std::string model, weights, variant;
    int layer = 0;  // 0 = embeddings
    double mean = 0, std = 0, min = 0, max = 0;  // relative residual (composite, mean centre) over samples
    int n = 0;
};

// Runs each variant on the batch and summarises every layer; `recorder` (optional) receives the activations of the
// LAST variant run. `layer_norm` applies the LayerNorm surgery (keep, remove, freeze) to every variant.
std::vector<ResidualRow> residual_by_layer(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                                           const std::string& weights, const std::vector<std::string>& variants,
                                           bool official_compat, Recorder* recorder = nullptr,
                                           LayerNormSurgery layer_norm = LayerNormSurgery::Keep);

struct IterateRow {
    std::string variant;  // "attention" or "attention+skip"
    int step = 0;         // applications of the layer (0 = its input)
    double mean = 0, std = 0, min = 0, max = 0;
    int n = 0;
};

// Settings of one E1/E2 run on one model.
struct RealModelSettings {
    std::vector<std::string> variants = {"SAN", "SAN+MLP", "SAN+skip", "transformer"};
    bool official_compat = false;
    LayerNormSurgery layer_norm = LayerNormSurgery::Keep;
    int draws = 100;          // E2 draws per path length
    int iterate_steps = 0;    // USE lite: applications of its pretrained layer-1 attention sublayer (0 = none)
    std::uint64_t seed = 0;
};

// E1, E2, the skip ratio and (USE lite) the iterate experiment for one set of weights.
struct WeightsRun {
    std::string weights;                   // "init" or "pretrained"
    std::vector<ResidualRow> residual;     // E1: variant × layer (variant labels carry the LN surgery when not kept)
    std::vector<PathProductSample> paths;  // E2, on the unmodified model
    // α_l = ‖resid_pre‖_F / (‖resid_pre‖_F + ‖attn_out‖_F) per layer of the unmodified model, mean over samples
    // (real tokens only): the weight of the skip branch in layer l.
    std::vector<double> skip_ratio;
    std::vector<IterateRow> iterate;
};
// Runs the variants, E2 and α on `model`; `recorder` (optional) receives the unmodified model's activations.
WeightsRun run_real_model(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                          const std::string& weights, const RealModelSettings& settings, Recorder* recorder = nullptr);

struct RealModelResult {
    std::string model;          // display name
    std::string model_type;     // "bert", "albert", "xlnet", "use_lite"
    int layers = 0, heads = 0;
    std::int64_t samples = 0, tokens = 0;
    RealModelSettings settings;
    std::vector<WeightsRun> runs;
};

// The paper's E1/E2 claims (SPEC.md §4) checked on this result, key numbers and a reading built from them. The skip
// ratio's check (SPEC.md §3, E6: α-weighting shifts the path-length mass to short paths) is here too: α is measured
// on this model.
Findings real_model_findings(const RealModelResult& result);

// Label of a variant under a LayerNorm surgery: "SAN" with keep, "SAN (LN remove)" otherwise.
std::string variant_label(const std::string& variant, LayerNormSurgery layer_norm);

}  // namespace rankscope
