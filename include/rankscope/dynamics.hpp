#pragma once
// Rank collapse during pretraining (rankscope dynamics): E1 (the four surgeries), E2 and the attention statistics of
// every checkpoint of a run, on one batch of held-out text.
//
//   auto checkpoints = find_checkpoints("out/bert");         // out/bert/checkpoints/step-000000 ... (by step)
//   DynamicsResult result = run_dynamics(checkpoints, settings);
//   write_csv_atomically(out / "dynamics_residual.csv", dynamics_residual_table(result).to_csv(), provenance);
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "rankscope/e1.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct DynamicsCheckpoint {
    long step = 0;
    std::filesystem::path path;
};
// The checkpoint folders of a run, by step: `directory`/checkpoints/step-N or `directory`/step-N, or stepN (Pythia's
// revision names; folders holding a config.json). Throws Error naming the folder when there is none.
std::vector<DynamicsCheckpoint> find_checkpoints(const std::filesystem::path& directory);

struct DynamicsSettings {
    std::string text;        // the sentences (one per line or a GLUE .tsv); "" = <run>/corpus/heldout.txt, else RTE
                             // (with a warning: it may be the text the run trained on)
    int samples = 32;
    int tokens = 0;          // 0 = min(128, the model's max positions)
    RealModelSettings model; // variants, draws, seed (E2), ...
};
struct DynamicsResult {
    std::string model;                  // the run folder's name
    std::string model_type;             // "bert", "albert", "gpt_neox", ... (any Hugging Face architecture)
    bool parallel_block = false;        // GPT-NeoX's use_parallel_residual (the findings say what SAN+MLP is there)
    std::vector<int> attention_windows;  // per layer: the sliding window of a decoder's causal mask (0 = none)
    std::string text;                   // the text file the batch was cut from
    int layers = 0, heads = 0;
    std::int64_t samples = 0, tokens = 0;
    std::vector<long> steps;            // per checkpoint
    std::vector<WeightsRun> runs;       // per checkpoint (weights "step N")
};
// `progress` is called after each checkpoint (done, total).
DynamicsResult run_dynamics(const std::vector<DynamicsCheckpoint>& checkpoints, const DynamicsSettings& settings,
                            const std::function<void(std::size_t, std::size_t)>& progress = {});

// dynamics_residual.csv: step, checkpoint (index), variant, layer, mean, std, min, max, n, log10_mean.
Table dynamics_residual_table(const DynamicsResult& result);
// dynamics_paths.csv (E2 per path length): step, checkpoint, length, draws, mean, median, frobenius_mean.
Table dynamics_paths_table(const DynamicsResult& result);
// dynamics_attention.csv, per layer of the unmodified model: step, checkpoint, layer, entropy_mean (nats, mean over
// heads), first_token_share_mean, first_token_share_max (over heads), uniform_entropy (the mean entropy of a uniform
// head on this layer's mask: uniform_head).
Table dynamics_attention_table(const DynamicsResult& result);

// Heat map per variant (layer × checkpoint, colour = log10 mean relative residual) from dynamics_residual.csv.
Figure dynamics_heatmap_figure(const std::string& model, const std::vector<std::string>& variants,
                               const std::vector<long>& steps, int layers);
// Small multiples: one panel per selected step, the E1 curves of every variant (log y) from dynamics_residual.csv.
Figure dynamics_curves_figure(const std::string& model, const std::vector<std::string>& variants,
                              const std::vector<long>& selected_steps);
// Heat maps of attention entropy and first-token share (layer × checkpoint) from dynamics_attention.csv.
Figure dynamics_attention_figure(const std::string& model, const std::vector<long>& steps, int layers);
// Up to `count` steps spread over the run on a log scale (always the first and the last).
std::vector<long> select_steps(const std::vector<long>& steps, std::size_t count);

// What the run shows, from the numbers: per variant the last layer's relative residual at the first and the last
// checkpoint, the step where the SAN first collapses below 0.05 within 5 layers (the paper's pretrained shape), and the
// attention entropy's change.
Findings dynamics_findings(const DynamicsResult& result);

}  // namespace rankscope
