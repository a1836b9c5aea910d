#include <torch/torch.h>

#include <cmath>
#include <optional>

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
        throw Error("unknown variant '" + variant + "' (expected SAN, SAN+MLP, SAN+skip or transformer)", "variant");
    return surgery;
}

namespace {

// Which tokens of each sample are text, found once per run on the model's device: E1 and the skip ratio measure each
// sample over its real tokens only (padding rows are not part of the text).
struct RealTokens {
    bool all = true;                 // no padding: the whole batch is measured at once
    std::vector<at::Tensor> indices; // otherwise, per sample, its real tokens' positions [n_b]
    at::Tensor mask;                 // the attention mask [B, n] 0/1
    at::Tensor rows;                 // [B, n, 1] float64, 1 on real tokens
};

RealTokens real_tokens(const at::Tensor& attention_mask, const c10::Device& device) {
    RealTokens real;
    real.all = attention_mask.all().item<bool>();
    for (std::int64_t b = 0; !real.all && b < attention_mask.size(0); ++b)
        real.indices.push_back(attention_mask[b].nonzero().squeeze(1).to(device));
    real.mask = attention_mask.to(device);
    real.rows = attention_mask.to(device, torch::kDouble).unsqueeze(-1);
    return real;
}

// E1's measure of one hidden state: the relative residual of each sample [B] over its real tokens, in float64 on the
// state's device (only [B] comes back, when the rows are written). A non-finite state gives non-finite values
// (batched_relative_residual keeps NaN and Inf), which hidden_values names.
at::Tensor measure_hidden(const at::Tensor& hidden, const RealTokens& real) {
    if (real.all) return batched_relative_residual(hidden, Norm::Composite, Center::Mean);
    std::vector<at::Tensor> values;
    for (std::int64_t b = 0; b < hidden.size(0); ++b)
        values.push_back(batched_relative_residual(hidden[b].index_select(0, real.indices[static_cast<std::size_t>(b)]).unsqueeze(0),
                                                   Norm::Composite, Center::Mean));
    return torch::cat(values);
}

// ‖M_b‖_F over each sample's real tokens [B] (padding rows zeroed first), in float64 on m's device.
at::Tensor frobenius_over_real_tokens(const at::Tensor& m, const RealTokens& real) {
    return (m.to(torch::kDouble) * real.rows).flatten(1).norm(2, {1});
}

// The hidden state E1 reads at layer l: the embeddings' output (l = 0) or layer l's output.
std::string hidden_hook(int l) { return l == 0 ? "hook_embed" : block_hook(l - 1, "hook_resid_post"); }

// A recorder that measures while the forward runs, so no activation outlives its layer: each hidden state E1 reads
// becomes its per-sample relative residual [B]; with `branches`, each layer's skip branch (hook_resid_pre) and
// attention branch (hook_attn_out) become their per-sample Frobenius norms [B]; with `patterns`, the attention maps
// are kept (E2, read back to the CPU). Everything else the forward records is dropped. The measures stay on the
// model's device until the forward is over: a forward on a GPU never waits for them.
// With `head_summaries` (the unmodified forward), each attention map is also reduced to its heads' statistics
// (head_attention_summaries, [2, H]), stored in (*head_summaries)[l]; the map itself is then kept only with `patterns`.
Recorder measuring_recorder(int layers, const std::shared_ptr<const RealTokens>& real, bool branches, bool patterns,
                            const std::shared_ptr<std::vector<at::Tensor>>& head_summaries = nullptr) {
    std::vector<std::string> keep;
    for (int l = 0; l <= layers; ++l) keep.push_back(hidden_hook(l));
    for (int l = 0; patterns && l < layers; ++l) keep.push_back(block_hook(l, "attn.hook_pattern"));
    Recorder recorder(keep);
    for (int l = 0; l <= layers; ++l)
        recorder.reduce(hidden_hook(l), [real](const at::Tensor& hidden) { return measure_hidden(hidden, *real); });
    for (int l = 0; branches && l < layers; ++l)
        for (const char* branch : {"hook_resid_pre", "hook_attn_out"})
            recorder.reduce(block_hook(l, branch), [real](const at::Tensor& m) { return frobenius_over_real_tokens(m, *real); });
    if (head_summaries) {
        head_summaries->assign(static_cast<std::size_t>(layers), {});
        for (int l = 0; l < layers; ++l)
            recorder.reduce(block_hook(l, "attn.hook_pattern"), [l, patterns, head_summaries, real](const at::Tensor& pattern) {
                (*head_summaries)[static_cast<std::size_t>(l)] = head_attention_summaries(pattern, real->mask);
                return patterns ? pattern.to(at::kCPU) : at::Tensor();
            });
    }
    return recorder;
}

// The per-sample values [B] of hidden state l from a forward recorded in `sink`, by a measuring recorder (`measured`)
// or by a caller's recorder that kept the hidden states themselves, read back to the CPU after the forward. A
// non-finite one (a NaN or Inf in that state's real tokens) is an error naming the layer, the model and its weights
// ("init", "pretrained", "step 1000"), unless `allow_nonfinite` (then its rows carry the NaN/Inf).
at::Tensor hidden_values(const Recorder& sink, bool measured, const RealTokens& real, int l, const std::string& model_name,
                         const std::string& weights, const std::string& variant, bool allow_nonfinite) {
    const at::Tensor& recorded = sink.get(hidden_hook(l));
    const at::Tensor values = (measured ? recorded : measure_hidden(recorded, real)).to(at::kCPU);
    if (!allow_nonfinite && !torch::isfinite(values).all().item<bool>())
        throw Error("non-finite hidden state at layer " + std::to_string(l) + " (" + variant +
                        ") (pass --allow-nonfinite to write it anyway)",
                    model_name + " " + weights);
    return values;
}

// One row per layer (0 = embeddings); with `rows` null only the check of hidden_values (a pass that writes no rows).
void append_residual_rows(const Recorder& sink, bool measured, const EncoderModel& model, const RealTokens& real,
                          const std::string& model_name, const std::string& weights, const std::string& variant,
                          bool allow_nonfinite, std::vector<ResidualRow>* rows) {
    for (int l = 0; l <= model.config().layers; ++l) {
        const at::Tensor values = hidden_values(sink, measured, real, l, model_name, weights, variant, allow_nonfinite);
        if (!rows) continue;
        const Summary s = summarize(values);
        rows->push_back({model_name, weights, variant, l, s.mean, s.std, s.min, s.max, s.n});
    }
}

Surgery variant_surgery(const std::string& variant, bool official_compat, LayerNormSurgery layer_norm,
                        bool bidirectional = false) {
    Surgery surgery = surgery_for_variant(variant, official_compat);
    surgery.layer_norm = layer_norm;
    surgery.bidirectional = bidirectional;
    return surgery;
}

bool is_unmodified(const Surgery& surgery) { return !surgery.remove_attention_skip && !surgery.remove_mlp; }

}  // namespace

std::vector<ResidualRow> residual_by_layer(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                                           const std::string& weights, const std::vector<std::string>& variants,
                                           bool official_compat, Recorder* recorder, LayerNormSurgery layer_norm,
                                           const InterruptPoll& interrupt) {
    std::vector<ResidualRow> rows;
    const ModelBatch device_batch = batch_on(batch, model.device());
    const auto real = std::make_shared<const RealTokens>(real_tokens(batch.attention_mask, model.device()));
    std::vector<Recorder> measuring;
    measuring.reserve(variants.size());  // the sinks point into it
    std::vector<Recorder*> sinks;
    std::vector<Surgery> surgeries;
    for (const auto& variant : variants) {
        const bool to_caller = recorder && &variant == &variants.back();
        measuring.push_back(measuring_recorder(model.config().layers, real, false, false));
        sinks.push_back(to_caller ? recorder : &measuring.back());
        sinks.back()->set_interrupt(interrupt);
        surgeries.push_back(variant_surgery(variant, official_compat, layer_norm));
    }
    model.forward_all(device_batch, surgeries, sinks);
    for (Recorder* sink : sinks) sink->set_interrupt({});  // nothing stays attached to the caller's recorder
    for (std::size_t i = 0; i < variants.size(); ++i)
        append_residual_rows(*sinks[i], sinks[i] != recorder, model, *real, model_name, weights, variants[i], false, &rows);
    return rows;
}

std::string variant_label(const std::string& variant, LayerNormSurgery layer_norm, bool bidirectional) {
    std::string notes = layer_norm == LayerNormSurgery::Keep ? "" : "LN " + to_string(layer_norm);
    if (bidirectional) notes += (notes.empty() ? "" : ", ") + std::string("bidirectional");
    return notes.empty() ? variant : variant + " (" + notes + ")";
}

WeightsRun run_real_model(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                          const std::string& weights, const RealModelSettings& settings, Recorder* recorder,
                          const InterruptPoll& interrupt) {
    WeightsRun run;
    run.weights = weights;
    // The forwards and the measures run on the model's device; per-sample and per-head values come back to the CPU
    // after the forwards (E2's attention maps too: its path products run on the CPU).
    const ModelBatch device_batch = batch_on(batch, model.device());
    const auto real = std::make_shared<const RealTokens>(real_tokens(batch.attention_mask, model.device()));
    if (settings.iterate_steps > 0) {
        for (bool keep_skip : {false, true}) {
            interrupt.poll();
            const auto states = iterate_attention(model, device_batch, settings.iterate_steps, keep_skip);
            for (std::size_t step = 0; step < states.size(); ++step) {
                const Summary s =  // float64 as before (the fused kernel's float32 build sums in another order)
                    summarize(batched_relative_residual(states[step].to(torch::kDouble), Norm::Composite, Center::Mean));
                run.iterate.push_back({keep_skip ? "attention+skip" : "attention", static_cast<int>(step), s.mean, s.std,
                                       s.min, s.max, s.n});
            }
        }
    }
    // E1: one pass per variant, all in one forward_all (a decoder runs them layer-major, so a streamed model reads
    // each layer once). The "transformer" variant is the unmodified model (apart from the LayerNorm surgery): its
    // pass also gives E2's attention maps and the skip ratio, so the unmodified model runs once; without that variant
    // one more pass runs it. Activations are measured as the forward records them (measuring_recorder), unless the
    // caller asked for the unmodified model's activations.
    const int L = model.config().layers;
    const bool sample_paths = settings.draws > 0;
    struct Pass {
        Surgery surgery;
        std::string variant;
        bool unmodified, rows;
    };
    std::vector<Pass> passes;
    bool have_unmodified = false;
    for (const auto& variant : settings.variants) {
        const Surgery surgery = variant_surgery(variant, settings.official_compat, settings.layer_norm, settings.bidirectional);
        const bool unmodified = is_unmodified(surgery) && !have_unmodified;
        have_unmodified = have_unmodified || unmodified;
        passes.push_back({surgery, variant_label(variant, settings.layer_norm, settings.bidirectional), unmodified, true});
    }
    if (!have_unmodified) {
        Surgery unmodified;
        unmodified.layer_norm = settings.layer_norm;
        unmodified.bidirectional = settings.bidirectional;
        passes.push_back({unmodified, "unmodified", true, false});
    }
    const auto head_summaries = std::make_shared<std::vector<at::Tensor>>();
    std::vector<Recorder> measuring;
    measuring.reserve(passes.size());  // the sinks point into it
    std::vector<Recorder*> sinks;
    std::vector<Surgery> surgeries;
    for (const auto& pass : passes) {
        measuring.push_back(measuring_recorder(L, real, pass.unmodified, pass.unmodified && sample_paths,
                                               pass.unmodified ? head_summaries : nullptr));
        sinks.push_back(pass.unmodified && recorder ? recorder : &measuring.back());
        sinks.back()->set_interrupt(interrupt);
        surgeries.push_back(pass.surgery);
    }
    model.forward_all(device_batch, surgeries, sinks);
    for (Recorder* sink : sinks) sink->set_interrupt({});  // nothing stays attached to the caller's recorder
    const Recorder* unmodified_sink = nullptr;
    for (std::size_t i = 0; i < passes.size(); ++i) {
        const bool to_caller = sinks[i] == recorder;
        // A pass without rows (the unmodified model run for E2 and the skip ratio only) is checked all the same.
        append_residual_rows(*sinks[i], !to_caller, model, *real, model_name, weights, passes[i].variant,
                             settings.allow_nonfinite, passes[i].rows ? &run.residual : nullptr);
        if (!passes[i].unmodified) continue;
        unmodified_sink = sinks[i];
        if (to_caller)  // the caller's recorder kept the maps themselves
            for (int l = 0; l < L; ++l)
                run.heads.push_back(head_attention_stats(recorder->get(block_hook(l, "attn.hook_pattern")), real->mask));
        else
            for (const at::Tensor& summaries : *head_summaries) run.heads.push_back(head_attention_stats(summaries));
    }
    const bool measured = unmodified_sink != recorder;
    std::vector<at::Tensor> patterns;
    for (int l = 0; l < L; ++l) {
        if (sample_paths) patterns.push_back(unmodified_sink->get(block_hook(l, "attn.hook_pattern")).to(at::kCPU));
        at::Tensor skip = unmodified_sink->get(block_hook(l, "hook_resid_pre"));
        at::Tensor attention = unmodified_sink->get(block_hook(l, "hook_attn_out"));
        if (!measured) {
            skip = frobenius_over_real_tokens(skip, *real);
            attention = frobenius_over_real_tokens(attention, *real);
        }
        run.skip_ratio.push_back((skip / (skip + attention)).mean().item<double>());
    }
    interrupt.poll();
    if (sample_paths) run.paths = sample_path_products(patterns, settings.draws, settings.seed, batch.attention_mask);
    return run;
}

}  // namespace rankscope
