#include <torch/torch.h>

#include <cmath>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/measures.hpp"

namespace rankscope {

Surgery surgery_for_variant(const std::string& variant, bool official_compat) {
    Surgery surgery;
    surgery.official_compat = official_compat;
    if (variant == "SAN") surgery.remove_attention_skip = surgery.remove_mlp = true;
    else if (variant == "SAN+MLP") surgery.remove_attention_skip = true;
    else if (variant == "SAN+skip") surgery.remove_mlp = true;
    else if (variant != "transformer")
        throw Error("unknown variant '" + variant + "' (expected SAN, SAN+MLP, SAN+skip or transformer)");
    return surgery;
}

std::vector<ResidualRow> residual_by_layer(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                                           const std::string& weights, const std::vector<std::string>& variants,
                                           bool official_compat, Recorder* recorder, LayerNormSurgery layer_norm) {
    std::vector<ResidualRow> rows;
    for (const auto& variant : variants) {
        Recorder local;
        Recorder& sink = recorder ? *recorder : local;
        Surgery surgery = surgery_for_variant(variant, official_compat);
        surgery.layer_norm = layer_norm;
        model.forward(batch, surgery, &sink);
        for (int l = 0; l <= model.config().layers; ++l) {
            const at::Tensor hidden = sink.get(l == 0 ? "hook_embed" : block_hook(l - 1, "hook_resid_post"));
            if (!torch::isfinite(hidden).all().item<bool>())
                throw Error("non-finite hidden state at layer " + std::to_string(l) + " (" + variant + ")", model_name);
            // Packed samples have no padding; a padded batch would need per-sample real-token rows.
            const at::Tensor values = batched_relative_residual(hidden, Norm::Composite, Center::Mean);
            ResidualRow row{model_name, weights, variant, l};
            row.n = static_cast<int>(values.numel());
            row.mean = values.mean().item<double>();
            row.std = row.n > 1 ? values.std(/*unbiased=*/true).item<double>() : 0.0;
            row.min = values.min().item<double>();
            row.max = values.max().item<double>();
            rows.push_back(row);
        }
    }
    return rows;
}

}  // namespace rankscope
