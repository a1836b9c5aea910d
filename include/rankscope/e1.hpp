#pragma once
// E1 (SPEC.md §4): the relative residual of a real architecture after the embeddings and after each layer, for the
// paper's four surgeries; E2 on the same run: products of attention matrices along random paths.
#include <string>
#include <vector>

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

}  // namespace rankscope
