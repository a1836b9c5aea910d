#include <torch/torch.h>

#include <cmath>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/summary.hpp"

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

namespace {

// The relative residual of each sample [B] over its real tokens only: padding rows are not part of the text.
at::Tensor residual_over_real_tokens(const at::Tensor& hidden, const at::Tensor& attention_mask) {
    if (attention_mask.all().item<bool>()) return batched_relative_residual(hidden, Norm::Composite, Center::Mean);
    std::vector<at::Tensor> values;
    for (std::int64_t b = 0; b < hidden.size(0); ++b) {
        const at::Tensor real = attention_mask[b].nonzero().squeeze(1);
        values.push_back(batched_relative_residual(hidden[b].index_select(0, real).unsqueeze(0), Norm::Composite, Center::Mean));
    }
    return torch::cat(values);
}

}  // namespace

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
            const at::Tensor values = residual_over_real_tokens(hidden, batch.attention_mask);
            const Summary s = summarize(values);
            rows.push_back({model_name, weights, variant, l, s.mean, s.std, s.min, s.max, s.n});
        }
    }
    return rows;
}

}  // namespace rankscope
