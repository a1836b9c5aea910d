// rankscope dynamics: E1, E2 and attention statistics of every checkpoint of a pretraining run (run_real_model on
// each, the same batch for all), as tidy tables, heat maps over (checkpoint, layer) and small multiples of E1 curves.
#include "rankscope/dynamics.hpp"

#include <fmt/ranges.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/models.hpp"  // ModelBatch, HfConfig
#include "rankscope/tokenizer.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

// Whether a folder name claims to be a checkpoint: step-* (rankscope pretrain's step-000100), or "step" and a digit
// (Pythia's revisions step0 ... step143000, as the hub names them). Other names (final/, logs, steps/) are not.
bool checkpoint_name(const std::string& name) {
    return name.rfind("step-", 0) == 0 || (name.rfind("step", 0) == 0 && name.size() > 4 && name[4] >= '0' && name[4] <= '9');
}

// N of step-N or stepN; -1 when the rest is not a whole number up to 10^9.
long step_of(const std::string& name) {
    const std::size_t start = name.rfind("step-", 0) == 0 ? 5 : 4;
    if (name.size() == start) return -1;
    long step = 0;
    for (std::size_t i = start; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return -1;
        step = step * 10 + (name[i] - '0');
        if (step > 1000000000L) return -1;  // up to 10^9, as the error message says
    }
    return step;
}

std::string step_tics(const std::vector<long>& steps) {
    std::vector<std::string> tics;
    const std::size_t stride = std::max<std::size_t>(1, (steps.size() + 7) / 8);
    for (std::size_t i = 0; i < steps.size(); ++i)  // every stride-th, and the last without crowding its neighbour
        if ((i % stride == 0 && steps.size() - 1 - i >= stride) || i + 1 == steps.size())
            tics.push_back(fmt::format("'{}' {}", steps[i], i));
    return fmt::format("set xtics ({})\n", fmt::join(tics, ", "));
}


// One heat-map panel: cells (checkpoint, layer) coloured by `value` of the rows where `condition` holds.
// Layers first_layer..last_layer on y, labelled `y_label`.
std::string heatmap_panel(const std::string& csv, const std::string& condition, const std::string& value,
                          const std::string& title, const std::vector<long>& steps, const std::string& cb_label,
                          const std::string& y_label, int first_layer, int last_layer) {
    const int stride = std::max(1, (last_layer - first_layer + 1 + 7) / 8);
    return fmt::format(
        "set title {}\nset xlabel 'training step (checkpoints, log-spaced)'\nset ylabel {}\n{}set xrange [-0.5:{}]\n"
        "set yrange [{}:{}]\nset ytics {}\nset cblabel {}\nset style fill solid 1.0 noborder\n"
        "plot '{}' using {}:({}):(0.5):(0.5):({}) with boxxyerror fc palette notitle\n",
        gnuplot_quote(title), gnuplot_quote(y_label), step_tics(steps), steps.size() - 0.5, first_layer - 0.5,
        last_layer + 0.5, stride,
        gnuplot_quote(cb_label), csv, only_if(condition, csv_number("checkpoint")), csv_number("layer"), value);
}

constexpr int kColorbox = 150;
constexpr int kHeatmapFloor = -8;  // log10: float32 round-off of a relative residual is ~1e-7

}  // namespace

std::vector<DynamicsCheckpoint> find_checkpoints(const fs::path& directory) {
    std::error_code ec;
    if (!fs::is_directory(directory, ec)) throw Error("not a folder", directory.string());
    const fs::path nested = directory / "checkpoints";
    const fs::path root = fs::is_directory(nested, ec) ? nested : directory;
    std::vector<DynamicsCheckpoint> out;
    // Every entry named step-* or step<digit>* is a checkpoint or an error: none is skipped silently (a malformed name,
    // a file in a folder's place, a folder without config.json, two folders for one step would each have dropped a
    // point from the trajectory without a word). Other names (final/, logs, steps/, step_1) are not checkpoints and are
    // left alone.
    for (const auto& entry : fs::directory_iterator(root)) {
        const std::string name = entry.path().filename().string();
        if (!checkpoint_name(name)) continue;
        // pretrain's own unfinished writes (an interrupted run): step-N.partial, step-N.old
        if (name.size() > 8 && (name.substr(name.size() - 8) == ".partial" || name.substr(name.size() - 4) == ".old")) continue;
        const long step = step_of(name);
        if (step < 0)
            throw Error("'" + printable(name, 40) + "' is not a checkpoint name step-N or stepN (N a whole number up to 10^9)",
                        entry.path().string());
        if (!entry.is_directory(ec)) throw Error("a checkpoint (step-N or stepN) must be a folder, this is a file", entry.path().string());
        if (!fs::is_regular_file(entry.path() / "config.json", ec))
            throw Error("checkpoint folder without a config.json", entry.path().string());
        out.push_back({step, entry.path()});
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    for (std::size_t i = 1; i < out.size(); ++i)
        if (out[i].step == out[i - 1].step)
            throw Error(fmt::format("two checkpoint folders for step {}: {} and {}", out[i].step,
                                    out[i - 1].path.filename().string(), out[i].path.filename().string()),
                        root.string());
    if (out.empty())
        throw Error(fs::is_regular_file(directory / "config.json", ec)
                        ? "one checkpoint, not a run: `rankscope model --model` measures it; dynamics reads a folder of "
                          "step-N or stepN checkpoint folders (or its checkpoints/ subfolder)"
                        : "no checkpoint folders step-N or stepN (with a config.json) in the folder or its checkpoints/ "
                          "subfolder",
                    directory.string());
    return out;
}

DynamicsResult run_dynamics(const std::vector<DynamicsCheckpoint>& checkpoints, const DynamicsSettings& settings,
                            const std::function<void(std::size_t, std::size_t)>& progress) {
    if (checkpoints.empty()) throw Error("run_dynamics: no checkpoints");
    DynamicsResult result;
    const ModelSource first = resolve_model_source(checkpoints.front().path.string());
    if (first.kind != ModelSource::HuggingFace)
        throw Error("dynamics reads Hugging Face checkpoint folders (rankscope pretrain's, or a model's training "
                    "checkpoints such as Pythia's), not USE lite",
                    checkpoints.front().path.string());
    const fs::path run_dir = checkpoints.front().path.parent_path().filename() == "checkpoints"
                                 ? checkpoints.front().path.parent_path().parent_path()
                                 : checkpoints.front().path.parent_path();
    result.model = model_display_name(run_dir.string());
    result.model_type = first.config.model_type;
    result.parallel_block = first.config.parallel_residual;
    result.layers = first.config.layers;
    for (int l = 0; l < result.layers; ++l) result.attention_windows.push_back(first.config.window_at(l));
    result.heads = first.config.heads;
    result.text = settings.text;
    if (result.text.empty()) {
        const fs::path heldout = run_dir / "corpus" / "heldout.txt";
        result.text = fs::exists(heldout) ? heldout.string() : default_rte_path();
        if (result.text.empty()) throw Error("no text: give --text (the run has no corpus/heldout.txt)", run_dir.string());
        // A run that pretrained on RTE (the default corpus) would be measured on its own training text, unsaid.
        if (result.text != heldout.string())
            warn(fmt::format("{} has no corpus/heldout.txt: measuring on {}, which may be text the checkpoints were "
                             "trained on (give --text a held-out text)",
                             run_dir.string(), result.text));
    }
    const int tokens = settings.tokens > 0 ? settings.tokens : std::min(128, first.config.max_position_embeddings);
    const ModelBatch batch = text_batch(first, result.text, settings.samples, tokens, "");
    result.samples = batch.input_ids.size(0);
    result.tokens = batch.input_ids.size(1);
    for (std::size_t i = 0; i < checkpoints.size(); ++i) {
        const ModelSource source = resolve_model_source(checkpoints[i].path.string());
        if (source.config.model_type != first.config.model_type || source.config.layers != first.config.layers ||
            source.config.vocab_size != first.config.vocab_size)
            throw Error("the checkpoint's architecture differs from the first checkpoint's", checkpoints[i].path.string());
        auto model = make_model(source, "pretrained", settings.model.seed);
        WeightsRun run = run_real_model(*model, batch, result.model, fmt::format("step {}", checkpoints[i].step), settings.model);
        result.steps.push_back(checkpoints[i].step);
        result.runs.push_back(std::move(run));
        if (progress) progress(i + 1, checkpoints.size());
    }
    return result;
}

Table dynamics_residual_table(const DynamicsResult& result) {
    Table table({{"model", Table::Text}, {"step", Table::Integer}, {"checkpoint", Table::Integer}, {"variant", Table::Text},
                 {"layer", Table::Integer}, {"mean", Table::Real}, {"std", Table::Real}, {"min", Table::Real},
                 {"max", Table::Real}, {"n", Table::Integer}, {"log10_mean", Table::Real}});
    for (std::size_t c = 0; c < result.runs.size(); ++c)
        for (const auto& r : result.runs[c].residual)
            table.add({result.model, result.steps[c], static_cast<long>(c), r.variant, r.layer, r.mean, r.std, r.min, r.max,
                       r.n, std::log10(std::max(r.mean, 1e-30))});
    return table;
}

Table dynamics_paths_table(const DynamicsResult& result) {
    Table table({{"model", Table::Text}, {"step", Table::Integer}, {"checkpoint", Table::Integer}, {"length", Table::Integer},
                 {"draws", Table::Integer}, {"mean", Table::Real}, {"median", Table::Real}, {"frobenius_median", Table::Real}});
    for (std::size_t c = 0; c < result.runs.size(); ++c) {
        std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_length;
        for (const auto& p : result.runs[c].paths) {
            by_length[p.length].first.push_back(p.relative_residual);
            by_length[p.length].second.push_back(p.relative_residual_frobenius);
        }
        for (const auto& [length, values] : by_length) {
            double mean = 0;
            for (double v : values.first) mean += v / static_cast<double>(values.first.size());
            table.add({result.model, result.steps[c], static_cast<long>(c), length, static_cast<long>(values.first.size()), mean,
                       median(values.first), median(values.second)});
        }
    }
    return table;
}

Table dynamics_attention_table(const DynamicsResult& result) {
    Table table({{"model", Table::Text}, {"step", Table::Integer}, {"checkpoint", Table::Integer}, {"layer", Table::Integer},
                 {"entropy_mean", Table::Real}, {"first_token_share_mean", Table::Real},
                 {"first_token_share_max", Table::Real}, {"uniform_entropy", Table::Real}});
    // Every sample is packed full (no padding): a uniform head spreads over all n keys, or under a decoder's causal
    // mask over the i keys query i sees, the last `window` of them on a layer with a sliding window.
    const bool causal = is_decoder_model_type(result.model_type);
    for (std::size_t c = 0; c < result.runs.size(); ++c)
        for (std::size_t l = 0; l < result.runs[c].heads.size(); ++l) {
            const auto& h = result.runs[c].heads[l];
            double entropy = 0, share = 0, share_max = 0;
            for (std::size_t i = 0; i < h.entropy.size(); ++i) {
                entropy += h.entropy[i] / static_cast<double>(h.entropy.size());
                share += h.first_token_share[i] / static_cast<double>(h.entropy.size());
                share_max = max_or_nan(share_max, h.first_token_share[i]);
            }
            const int window = l < result.attention_windows.size() ? result.attention_windows[l] : 0;
            // `layer`: the block index from 0, as in attention_heads.csv and TransformerLens's blocks.{l}.
            table.add({result.model, result.steps[c], static_cast<long>(c), static_cast<long>(l), entropy, share, share_max,
                       uniform_head(result.tokens, causal, window).entropy});
        }
    return table;
}

Figure dynamics_heatmap_figure(const std::string& model, const std::vector<std::string>& variants, const std::vector<long>& steps,
                               int layers) {
    const int cols = variants.size() > 1 ? 2 : 1;
    const int rows = static_cast<int>((variants.size() + cols - 1) / cols);
    PanelFigure figure("dynamics_heatmap", model + ": relative residual (log10) by layer through pretraining", rows, cols, 480, 330);
    figure.reserve_colorbox(kColorbox);
    // Values at or below float32 round-off (exact zeros included: all rows equal in float32) share the bottom colour.
    figure.add_preface(std::string(heatmap_palette()) + fmt::format("set cbrange [{}:0.1]\n", kHeatmapFloor));
    const std::string clamped = fmt::format("({0} < {1} ? {1} : {0})", csv_number("log10_mean"), kHeatmapFloor);
    for (const auto& variant : variants)
        figure.add_panel(heatmap_panel("dynamics_residual.csv", text_is("variant", variant), clamped, variant, steps,
                                       fmt::format("log10 relative residual (≤ {}: round-off)", kHeatmapFloor),
                                       "layer (0 = embeddings)", 0, layers));
    return figure.build();
}

Figure dynamics_curves_figure(const std::string& model, const std::vector<std::string>& variants,
                              const std::vector<long>& selected_steps) {
    const int cols = std::min<int>(3, static_cast<int>(selected_steps.size()));
    const int rows = static_cast<int>((selected_steps.size() + cols - 1) / cols);
    PanelFigure figure("dynamics_curves", model + ": relative residual by layer at selected training steps", rows, cols, 420, 300);
    figure.add_preface(log_y("dynamics_residual.csv", csv_number("mean"), FloatFloor::float32, "y") +
                       integer_axis("x", "dynamics_residual.csv", csv_number("layer"), "x"));
    // SAN and SAN+MLP (SAN+skip and the transformer) may coincide, as in E1's figure; each variant in its own colour.
    std::vector<std::string> styles;
    for (std::size_t v = 0; v < variants.size(); ++v)
        styles.push_back(coinciding_series_style(v, variant_linetype(variants[v], static_cast<int>(v) + 1)));
    for (const long step : selected_steps) {
        std::vector<std::string> plots;
        for (std::size_t v = 0; v < variants.size(); ++v)
            plots.push_back(fmt::format("'dynamics_residual.csv' using ({}):({}) {} notitle",
                                        only_if(all_of({text_is("variant", variants[v]), number_is("step", double(step))}), csv_number("layer")),
                                        log_value(csv_number("mean"), "y"), styles[v]));
        figure.add_panel(fmt::format("set title 'step {}'\nset xlabel 'layer'\nset ylabel 'relative residual'\nplot {}\n", step,
                                     fmt::join(plots, ", \\\n     ")));
    }
    for (std::size_t v = 0; v < variants.size(); ++v) figure.add_key_entry(variants[v], styles[v]);
    return figure.build();
}

Figure dynamics_attention_figure(const std::string& model, const std::vector<long>& steps, int layers) {
    PanelFigure figure("dynamics_attention", model + ": attention through pretraining (unmodified model)", 1, 2, 480, 330);
    figure.reserve_colorbox(kColorbox);
    figure.add_preface(heatmap_palette());
    // Entropy over its own maximum (a uniform head's on the layer's mask: ln n, or causal (1/n) Σ ln min(i, window)), on
    // a fixed [0, 1] as failure_modes draws it: comparable between runs, and a nearly uniform run is one colour instead
    // of a colour bar stretched over 1e-5 nats (repeated tick labels).
    figure.add_panel("set cbrange [0:1]\n" +
                     heatmap_panel("dynamics_attention.csv", "1",
                                   csv_number("entropy_mean") + " / " + csv_number("uniform_entropy"),
                                   "attention entropy / a uniform head's, mean over heads (1 = uniform)", steps,
                                   "entropy / uniform",
                                   "block (0 = first)", 0, layers - 1));
    figure.add_panel("set cbrange [0:1]\n" + heatmap_panel("dynamics_attention.csv", "1", csv_number("first_token_share_mean"),
                                                           "share to the first token", steps, "share",
                                                           "block (0 = first)", 0, layers - 1));
    return figure.build();
}

std::vector<long> select_steps(const std::vector<long>& steps, std::size_t count) {
    if (steps.size() <= count) return steps;
    std::vector<long> out;
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t index = static_cast<std::size_t>(std::llround(double(i) * double(steps.size() - 1) / double(count - 1)));
        if (out.empty() || out.back() != steps[index]) out.push_back(steps[index]);
    }
    return out;
}

Findings dynamics_findings(const DynamicsResult& result) {
    Findings f;
    f.experiment = "dynamics";
    f.subject = fmt::format("{} ({}, {} layer{}), {} checkpoints from step {} to {}, {} × {} tokens of {}", result.model,
                            result.model_type, result.layers, result.layers == 1 ? "" : "s", result.steps.size(), result.steps.front(), result.steps.back(),
                            result.samples, result.tokens, fs::path(result.text).filename().string());
    const int L = result.layers;
    // A decoder runs with its causal mask: the paper's depths are of bidirectional encoders (as `model` judges them),
    // and a uniform head's entropy is the causal one.
    const bool decoder = is_decoder_model_type(result.model_type);
    const auto& first = result.runs.front();
    const auto& last = result.runs.back();
    std::vector<std::string> sentences;
    for (const auto& variant : {"SAN", "SAN+MLP", "SAN+skip", "transformer"}) {
        const ResidualRow* a = row_at(first, variant, L);
        const ResidualRow* b = row_at(last, variant, L);
        if (!a || !b) continue;
        f.key(fmt::format("{}: relative residual after layer {}, step {} → step {}", variant, L, result.steps.front(),
                          result.steps.back()),
              fmt::format("{:.3g} → {:.3g}", a->mean, b->mean));
        sentences.push_back(fmt::format("{} {:.3g} → {:.3g}", variant, a->mean, b->mean));
    }
    // The first checkpoint from which the SAN stays collapsed within kPretrainedCollapseDepth layers.
    const int depth = std::min(kPretrainedCollapseDepth, L);
    long collapsed_from = -1;
    for (std::size_t c = result.runs.size(); c-- > 0;) {
        const ResidualRow* r = row_at(result.runs[c], "SAN", depth);
        if (!r || !(r->mean <= kCollapsedResidual)) break;  // (a NaN mean, under --allow-nonfinite, is not collapsed)
        collapsed_from = result.steps[c];
    }
    const ResidualRow* san_last = row_at(last, "SAN", depth);
    const ResidualRow* san_last_first = row_at(last, "SAN", 1);
    if (san_last && san_last_first) {
        // Judged over the 95% intervals of the two means (e1.hpp), as `model` judges the claim.
        const IntervalTest shape = pretrained_san_shape(residual_interval(*san_last_first), residual_interval(*san_last));
        f.check({"dynamics", std::string(kPretrainedSanClaim) + " (E1, final checkpoint)",
                 "≈0 after 3–5 layers pretrained (Fig. 2)",
                 fmt::format("SAN at step {} after layer 1: {}; after layer {}: {}", result.steps.back(),
                             quote_residual(*san_last_first), depth, quote_residual(*san_last)),
                 // The claim's depth, whatever this model's: a 1-layer model read "≤ 0.05 after layer 1, and above it
                 // after layer 1" (it is judged not comparable).
                 fmt::format("≤ {} after layer {}, and above it after layer 1, over the whole 95% interval of each mean "
                             "over samples{}{}",
                             kCollapsedResidual, L >= kPretrainedCollapseDepth ? depth : kPretrainedCollapseDepth,
                             L >= kPretrainedCollapseDepth
                                 ? ""
                                 : fmt::format(" (needs {} layers; this model has {})", kPretrainedCollapseDepth, L),
                             decoder ? "; not judged under a causal mask (the paper's encoders are bidirectional)" : ""),
                 judge_interval(L >= kPretrainedCollapseDepth && !decoder, shape.holds_everywhere, shape.holds_nowhere),
                 decoder ? "final checkpoint, causal mask" : "final checkpoint"});
    }
    std::string reading = fmt::format("Relative residual after the last layer ({}), from step {} to step {}: {}.",
                                      L, result.steps.front(), result.steps.back(), fmt::join(sentences, "; "));
    if (collapsed_from >= 0)
        reading += fmt::format(" The SAN is below {} after layer {} at every checkpoint from step {} on.", kCollapsedResidual,
                               depth, collapsed_from);
    else if (san_last && std::isnan(san_last->mean))
        reading += fmt::format(" The SAN's relative residual after layer {} is NaN at the last checkpoint.", depth);
    else
        reading += fmt::format(" The SAN is above {} after layer {} at the last checkpoint.", kCollapsedResidual, depth);
    if (!first.heads.empty() && !last.heads.empty()) {
        auto mean_entropy = [](const WeightsRun& run) {
            double total = 0;
            std::size_t count = 0;
            for (const auto& h : run.heads)
                for (double e : h.entropy) total += e, ++count;
            return count ? total / double(count) : std::nan("");
        };
        const double e0 = mean_entropy(first), e1 = mean_entropy(last);
        f.key("attention entropy, mean over layers and heads (nats), first → last checkpoint", fmt::format("{:.3g} → {:.3g}", e0, e1));
        reading += fmt::format(" Attention entropy (mean over layers and heads) goes from {:.3g} to {:.3g} nats (a uniform "
                               "{}head over {} tokens{}: {:.3g}).",
                               e0, e1, decoder ? "causal " : "", result.tokens,
                               decoder ? sliding_window_words(result.attention_windows, result.tokens) : "",
                               uniform_head_mean({result.tokens}, decoder, result.attention_windows).entropy);
    }
    f.reading = reading;
    if (result.parallel_block) f.notes.push_back(parallel_block_note(result.model));
    return f;
}

}  // namespace rankscope
