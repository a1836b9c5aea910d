#include <torch/torch.h>

#include <cmath>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/use_lite.hpp"

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
                                           bool official_compat, Recorder* recorder, LayerNormSurgery layer_norm,
                                           const InterruptPoll& interrupt) {
    std::vector<ResidualRow> rows;
    for (const auto& variant : variants) {
        Recorder local;
        Recorder& sink = recorder ? *recorder : local;
        sink.set_interrupt(interrupt);
        Surgery surgery = surgery_for_variant(variant, official_compat);
        surgery.layer_norm = layer_norm;
        model.forward(batch, surgery, &sink);
        sink.set_interrupt({});
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

std::string variant_label(const std::string& variant, LayerNormSurgery layer_norm) {
    return layer_norm == LayerNormSurgery::Keep ? variant : variant + " (LN " + to_string(layer_norm) + ")";
}

namespace {

// ‖M_b‖_F over each sample's real tokens [B]: padding rows are zeroed first.
at::Tensor frobenius_over_real_tokens(const at::Tensor& m, const at::Tensor& attention_mask) {
    const at::Tensor rows = attention_mask.to(torch::kDouble).unsqueeze(-1);
    return (m.to(torch::kDouble) * rows).flatten(1).norm(2, {1});
}

}  // namespace

WeightsRun run_real_model(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                          const std::string& weights, const RealModelSettings& settings, Recorder* recorder,
                          const InterruptPoll& interrupt) {
    WeightsRun run;
    run.weights = weights;
    if (settings.iterate_steps > 0) {
        for (bool keep_skip : {false, true}) {
            interrupt.poll();
            const auto states = iterate_attention(model, batch, settings.iterate_steps, keep_skip);
            for (std::size_t step = 0; step < states.size(); ++step) {
                const Summary s =
                    summarize(batched_relative_residual(states[step].to(torch::kDouble), Norm::Composite, Center::Mean));
                run.iterate.push_back({keep_skip ? "attention+skip" : "attention", static_cast<int>(step), s.mean, s.std,
                                       s.min, s.max, s.n});
            }
        }
    }
    run.residual = residual_by_layer(model, batch, model_name, weights, settings.variants, settings.official_compat,
                                     nullptr, settings.layer_norm, interrupt);
    for (auto& row : run.residual) row.variant = variant_label(row.variant, settings.layer_norm);
    // The unmodified model (apart from the LayerNorm surgery): E2's attention maps and the skip ratio.
    Recorder local;
    Recorder& sink = recorder ? *recorder : local;
    sink.set_interrupt(interrupt);
    Surgery unmodified;
    unmodified.layer_norm = settings.layer_norm;
    model.forward(batch, unmodified, &sink);
    sink.set_interrupt({});  // nothing stays attached to the caller's recorder
    std::vector<at::Tensor> patterns;
    for (int l = 0; l < model.config().layers; ++l) {
        patterns.push_back(sink.get(block_hook(l, "attn.hook_pattern")));
        const at::Tensor skip = frobenius_over_real_tokens(sink.get(block_hook(l, "hook_resid_pre")), batch.attention_mask);
        const at::Tensor attention = frobenius_over_real_tokens(sink.get(block_hook(l, "hook_attn_out")), batch.attention_mask);
        run.skip_ratio.push_back((skip / (skip + attention)).mean().item<double>());
    }
    interrupt.poll();
    run.paths = sample_path_products(patterns, settings.draws, settings.seed, batch.attention_mask);
    return run;
}

}  // namespace rankscope
