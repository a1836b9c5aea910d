#pragma once
// E1 (SPEC.md §4): the relative residual of a real architecture after the embeddings and after each layer, for the
// paper's four surgeries; E2 on the same run: products of attention matrices along random paths.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/interrupt.hpp"
#include "rankscope/models.hpp"
#include "rankscope/paths.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

class Tokenizer;  // tokenizer.hpp

// E1's thresholds read off the paper's figures (SPEC.md: ±0.03), shared by the findings of one model (e1_findings.cpp),
// of a pretraining run's checkpoints (dynamics.cpp) and of the mask comparison (mask_comparison.cpp).
inline constexpr double kCollapsedResidual = 0.05;    // "≈ 0"
inline constexpr int kPretrainedCollapseDepth = 5;    // "after 3–5 layers pretrained"
// The pretrained SAN's shape in Fig. 2: ≈0 by layer kPretrainedCollapseDepth, and not already after layer 1 (that is
// the figure's init shape; init weights would pass a check of layer 5 alone). A threshold on the curve, not a
// comparison with a measured init run. Judged over the intervals of the two means (judge_interval): the shape holds
// over both whole intervals, or nowhere (≈0 nowhere in the first, or above 0.05 over the whole of the second).
struct IntervalTest {
    bool holds_everywhere = false, holds_nowhere = false;
};
// "The statistic ≤ threshold" over the whole interval, or nowhere in it.
inline IntervalTest at_most(const Interval& interval, double threshold) {
    return {interval.high <= threshold, interval.low > threshold};
}
inline IntervalTest pretrained_san_shape(const Interval& after_first_layer, const Interval& after_collapse_depth) {
    return {after_collapse_depth.high <= kCollapsedResidual && after_first_layer.low > kCollapsedResidual,
            after_collapse_depth.low > kCollapsedResidual || after_first_layer.high <= kCollapsedResidual};
}
inline constexpr const char* kPretrainedSanClaim =
    "Without skip connections (SAN) the pretrained representation collapses to rank 1 after 3–5 layers, not after 1 "
    "as at init";

// "SAN" (no attention skip, no MLP), "SAN+MLP" (no attention skip), "SAN+skip" (no MLP), "transformer".
Surgery surgery_for_variant(const std::string& variant, bool official_compat);

struct ResidualRow {
    std::string model, weights, variant;
    int layer = 0;  // 0 = embeddings
    double mean = 0, std = 0, min = 0, max = 0;  // relative residual (composite, mean centre) over samples
    int n = 0;
};
// The interval of a row's mean over its n samples (Student t; undefined for one sample), at kVerdictLevel unless told:
// the E1 verdicts are judged on it.
Interval residual_interval(const ResidualRow& row, double level = kVerdictLevel);
// The row's mean with that interval, as verdicts quote it: "0.0103 (95% interval 0.0101–0.0104)".
std::string quote_residual(const ResidualRow& row);

// Runs each variant on the batch and summarises every layer; `recorder` (optional) receives the activations of the
// LAST variant run. `layer_norm` applies the LayerNorm surgery (keep, remove, freeze) to every variant.
// `interrupt` is polled at every hook point of every forward. A hidden state with a NaN/Inf is an Error naming the layer.
std::vector<ResidualRow> residual_by_layer(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                                           const std::string& weights, const std::vector<std::string>& variants,
                                           bool official_compat, Recorder* recorder = nullptr,
                                           LayerNormSurgery layer_norm = LayerNormSurgery::Keep,
                                           const InterruptPoll& interrupt = {});

struct IterateRow {
    std::string variant;  // "attention" or "attention+skip"
    int step = 0;         // applications of the layer (0 = its input)
    double mean = 0, std = 0, min = 0, max = 0;
    int n = 0;
};

// Reading a pretrained decoder's layers one at a time (load_hf_model_streamed): On; Off (the whole model in memory);
// Auto = On when the weights in float32 would take more than 3/4 of the memory available now (/proc/meminfo
// MemAvailable). Init weights are always made whole in memory from the seed. The results are the same either way.
enum class Streaming { Auto, On, Off };
// "auto", "on", "off"
Streaming parse_streaming(const std::string& text);
// Auto's rule: "" when weights of `needed` bytes (float32) fit in 3/4 of `available` (or `available` is unknown, < 0),
// else the warning that says so ("<model>: its weights take 9.0 GB in float32, more than 3/4 of the 8.0 GB available:
// reading them one layer at a time (stream off to load them whole)"), which make_model gives through warn() (a
// RankscopeWarning in Python; it went to stderr, which a notebook does not show).
std::string automatic_streaming_warning(const std::string& model, std::int64_t needed, std::int64_t available);

// Settings of one E1/E2 run on one model.
struct RealModelSettings {
    std::vector<std::string> variants = {"SAN", "SAN+MLP", "SAN+skip", "transformer"};
    bool official_compat = false;
    LayerNormSurgery layer_norm = LayerNormSurgery::Keep;
    int draws = 100;          // E2 draws per path length
    int iterate_steps = 0;    // USE lite: applications of its pretrained layer-1 attention sublayer (0 = none)
    std::uint64_t seed = 0;
    bool bidirectional = false;   // decoders: every variant without the causal mask (Surgery::bidirectional)
    double sink_threshold = 0.3;  // a head is a sink when its mean attention to the first real token exceeds this
    Streaming stream = Streaming::Auto;  // pretrained decoders: read layer by layer (see Streaming)
    at::Device device = at::kCPU; // where the forwards run (run_real_model_experiment moves each model there) and E1's
                                  // measures, the skip ratio and the head statistics with them; E2 reads its maps back
    bool allow_nonfinite = false; // a hidden state with a NaN/Inf (an overflowing model) gives NaN/Inf rows instead of
                                  // an Error naming the layer (--allow-nonfinite)
};

// Attention statistics of one layer's heads on the unmodified model (docs/attention_sinks.md), each a mean over the
// samples of a mean over the sample's real query tokens:
//   first_token_share[h] = mean_i P_h[i, f]   (f = the sample's first real token; for a causal model the query i = f
//                                              itself pays it 1, as in Gu et al. 2024's α_1)
//   entropy[h]           = mean_i −Σ_j P_h[i, j] log P_h[i, j]   (nats; 0 log 0 = 0)
struct HeadAttentionStats {
    std::vector<double> first_token_share, entropy;  // [H]
};
// pattern [B, H, n, n], attention_mask [B, n] (any device).
HeadAttentionStats head_attention_stats(const at::Tensor& pattern, const at::Tensor& attention_mask);
// The same in two steps, so that a forward on a GPU never waits for it: the summaries [2, H] (first_token_share,
// entropy) in float64 on the pattern's device, then read back.
at::Tensor head_attention_summaries(const at::Tensor& pattern, const at::Tensor& attention_mask);
HeadAttentionStats head_attention_stats(const at::Tensor& summaries);
// The fraction of heads whose first_token_share exceeds `threshold` (strictly).
double sink_rate(const std::vector<double>& first_token_share, double threshold);
// A uniform head on one sample of n real tokens: each query spreads its attention evenly over the keys it may see, all
// n, or under a causal mask the m_i = i keys up to itself, or with a sliding window w the last m_i = min(i, w)
// (i = 1..n). Its mean first-token share is 1/n, or (1/n) Σ_{i=1..min(n,w)} 1/i causal (a query past the window no
// longer sees the first token); its mean entropy (nats) is ln n, or (1/n) Σ_i ln m_i causal. `window` 0 = none; it
// only applies under the causal mask.
struct UniformHead {
    double first_token_share = 0, entropy = 0;
};
UniformHead uniform_head(std::int64_t tokens, bool causal, int window = 0);
// The same averaged as the measured statistics are: over samples, each on its own real tokens (head_attention_stats
// averages a sample's real queries, then the samples; padding on either side only shifts the positions), and over
// layers, each with its own window (`windows` one per layer; empty: one layer without a window).
UniformHead uniform_head_mean(const std::vector<std::int64_t>& real_tokens, bool causal, const std::vector<int>& windows);
// ", with its sliding window of w keys on k of L layers" where a layer's window is narrower than the sample (the
// baselines above then differ from the unwindowed ones), else "".
std::string sliding_window_words(const std::vector<int>& windows, std::int64_t tokens);

// E1, E2, the skip ratio and (USE lite) the iterate experiment for one set of weights.
struct WeightsRun {
    std::string weights;                   // "init" or "pretrained"
    bool streamed = false;                 // the layers were read one at a time (load_hf_model_streamed)
    std::vector<ResidualRow> residual;     // E1: variant × layer (variant labels carry the LN surgery when not kept)
    std::vector<PathProductSample> paths;  // E2, on the unmodified model
    // α_l = ‖resid_pre‖_F / (‖resid_pre‖_F + ‖attn_out‖_F) per layer of the unmodified model, mean over samples
    // (real tokens only): the weight of the skip branch in layer l.
    std::vector<double> skip_ratio;
    std::vector<IterateRow> iterate;
    std::vector<HeadAttentionStats> heads;  // per layer, of the unmodified model (attention sinks, entropy)
};
// Runs the variants, E2 and α on `model`; `recorder` (optional) receives the unmodified model's activations.
// The E1 row of `variant` (its label) at `layer` in `run`; null when not run.
const ResidualRow* row_at(const WeightsRun& run, const std::string& variant, int layer);
WeightsRun run_real_model(EncoderModel& model, const ModelBatch& batch, const std::string& model_name,
                          const std::string& weights, const RealModelSettings& settings, Recorder* recorder = nullptr,
                          const InterruptPoll& interrupt = {});

struct RealModelResult {
    std::string model;          // display name
    std::string model_type;     // "bert", "albert", "xlnet", "gpt2", "gpt_neox", "llama", ..., "use_lite"
    int layers = 0, heads = 0;
    bool parallel_block = false;  // GPT-NeoX's use_parallel_residual: attention and MLP both read the layer input
    std::vector<int> attention_windows;  // per layer: the sliding window of its causal mask (0 = none; HfConfig::window_at)
    std::int64_t samples = 0, tokens = 0;
    std::vector<std::int64_t> real_tokens;  // per sample: its real tokens (fewer than `tokens` with padded --inputs)
    RealModelSettings settings;
    std::vector<WeightsRun> runs;
};

// The paper's E1/E2 claims (SPEC.md §4) checked on this result, key numbers and a reading built from them. The skip
// ratio's check (SPEC.md §3, E6: α-weighting shifts the path-length mass to short paths) is here too: α is measured
// on this model.
// result.real_tokens, or `samples` × `tokens` when it is empty (a result built without them).
std::vector<std::int64_t> real_tokens_of(const RealModelResult& result);
Findings real_model_findings(const RealModelResult& result);

// The findings' note on a model of parallel blocks (GPT-NeoX's use_parallel_residual): what each surgery is there.
std::string parallel_block_note(const std::string& model);

// Label of a variant under a LayerNorm surgery: "SAN" with keep, "SAN (LN remove)" otherwise.
// With `bidirectional` (decoders without their causal mask): "SAN (bidirectional)", "SAN (LN remove, bidirectional)".
std::string variant_label(const std::string& variant, LayerNormSurgery layer_norm, bool bidirectional = false);

// ---- one `rankscope model` run, shared by the command line and the Python module (e1_model_runs.cpp) ---------------
// What a model argument names: a Hugging Face folder (config.json + model.safetensors: an architecture of models.hpp),
// USE lite ("use-lite", or a folder holding model.json + vocab.json), or a built-in configuration (bert-base-cased,
// albert-base-v2, xlnet-base-cased, gpt2, pythia-160m, llama-12l, llama-gqa: random init only).
struct ModelSource {
    enum Kind { HuggingFace, UseLite, BuiltIn };
    Kind kind = HuggingFace;
    std::string argument;   // as given
    std::string name;       // "use-lite", the folder's name, or the built-in configuration's name
    std::string directory;  // the folder read (USE lite: its dist folder); "" for a built-in configuration
    HfConfig config;
    std::string model_type() const { return kind == UseLite ? "use_lite" : config.model_type; }
};
// Throws Error naming the argument when it is none of the three.
ModelSource resolve_model_source(const std::string& argument);
// The name a folder argument gives a model in tables, figure titles and cell names: its last non-empty component
// ("models/bert/" and "models/bert/." name "bert", where filename() gave ""; "." names the working directory),
// control characters (a newline in a folder's name) replaced by spaces.
std::string model_display_name(const std::string& folder);
// `weights`: "pretrained" (read from the folder) or "init" (the library's from_config init from `seed`). A built-in
// configuration has no pretrained weights: an Error saying so.
// `stream` decides how pretrained decoder weights are read (Streaming; On for anything else is an Error).
std::unique_ptr<EncoderModel> make_model(const ModelSource& source, const std::string& weights, std::uint64_t seed,
                                         Streaming stream = Streaming::Off);
// The Error make_model throws for `stream` On on a model that is not a decoder folder, raised before any work (the
// command line read and tokenised the text first).
void check_streaming(const ModelSource& source, Streaming stream);
// "auto" → every kind the model has ({"init"} for a built-in configuration, else {"init", "pretrained"}); "both" →
// {"init", "pretrained"}; "init" / "pretrained" → itself; a built-in configuration with "both" or "pretrained" is the
// Error make_model would throw, raised before any work.
std::vector<std::string> weight_kinds(const ModelSource& source, const std::string& weights);
// The sentences of `text_path` packed into `samples` × `tokens` real tokens with the source's tokenizer (the folder's
// vocab.txt or spiece.model, USE lite's vocab.json, or for a built-in configuration a 4000-piece SentencePiece model
// trained on the text into `tokenizer_directory`). Checks `tokens` against the model's positions and the ids against
// its vocabulary.
ModelBatch text_batch(const ModelSource& source, const std::string& text_path, int samples, int tokens,
                      const std::string& tokenizer_directory);
// The warning text_batch gives when at least half of the text's `content` tokens (special tokens left out) are the
// tokenizer's unknown token: the samples would measure that one embedding, not the text. `tokenize` gives it too.
void warn_if_mostly_unknown(const Tokenizer& tokenizer, std::int64_t unknowns, std::int64_t content,
                            const std::string& text_path);
// The warning text_batch and tokenize give when a sentence holds a special token's string ("[MASK]", "<s>", ...)
// that the tokenizer reads as plain characters (Tokenizer::special_tokens_read_as_text).
void warn_if_special_token_text(const Tokenizer& tokenizer, const std::vector<std::string>& sentences,
                                const std::string& text_path);
// Every weights kind in turn on the same batch (E1, E2, α, and for USE lite the iterate experiment). `dump`
// (optional) receives the unmodified model's activations of the LAST kind. `interrupt` is polled at every hook point.
RealModelResult run_real_model_experiment(const ModelSource& source, const ModelBatch& batch,
                                          const std::vector<std::string>& weights, const RealModelSettings& settings,
                                          Recorder* dump = nullptr, const InterruptPoll& interrupt = {});
// A NaN/Inf relative residual (E1) or path product (E2) is an Error naming model, weights, variant and layer (or the
// path), unless allowed.
void check_real_model_finite(const RealModelResult& result, bool allow_nonfinite);
// The same for runs of `model` outside a RealModelResult (rankscope dynamics: one run per checkpoint).
void check_weights_runs_finite(const std::string& model, const std::vector<WeightsRun>& runs, bool allow_nonfinite);

// ---- decoders: causal vs bidirectional (mask_comparison.cpp) --------------------------------------------------------
// The rows of a residual.csv that `rankscope model` wrote (its text; '#' lines skipped). Errors name `where`.
std::vector<ResidualRow> residual_rows_from_csv(const std::string& csv_text, const std::string& where);
// The same weights run with the causal mask (`causal`) and with --mask bidirectional (`bidirectional`, labels
// "... (bidirectional)"), compared per weights kind on the SAN variant (Wu et al. 2024: a causal mask slows rank
// collapse; not in the paper): one check per weights kind (the first layer whose SAN relative residual is below 0.05,
// causal vs bidirectional), key numbers, and a reading built from them. Throws when no weights kind has a SAN curve of
// the same depth in both.
Findings mask_comparison_findings(const std::vector<ResidualRow>& causal, const std::vector<ResidualRow>& bidirectional);

// The tables `rankscope model` writes:
Table residual_table(const RealModelResult& result);       // residual.csv (norm "composite", center "mean")
Table path_products_table(const RealModelResult& result);  // paths.csv (layers, heads as "2 5 7")
Table skip_ratio_table(const RealModelResult& result);     // skip_ratio.csv
Table iterate_table(const RealModelResult& result);        // iterate.csv (USE lite; no rows otherwise)
Table attention_heads_table(const RealModelResult& result);  // attention_heads.csv: per layer and head (decoders)
Table sink_rate_table(const RealModelResult& result);        // sink_rate.csv: per layer (decoders)

}  // namespace rankscope
