#pragma once
// E4 (SPEC.md §4, paper §4.3 Fig. 4): train (or reuse) a task model, then measure how much of its accuracy ensembles of
// random paths of each length k keep, beside the whole model and the majority level measured in the same run. With
// several seeds, one model per seed (its own initialisation, data and path draws), trained together as one stacked
// model (train_or_load_seeds), and every number pooled over the seeds as well as the repeats.
#include <filesystem>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

struct PathEffectivenessSettings {
    TaskSettings task;                    // sort, hull or memorize
    std::vector<std::uint64_t> seeds;     // one model per seed; empty = task.seed alone
    std::filesystem::path work_dir;       // memorize: its tokenizer is trained here
    std::filesystem::path checkpoints;
    bool retrain = false, allow_nonfinite = false;
    std::vector<int> n_paths = {5, 20};
    int repeats = 5;
    std::vector<bool> sub_path_modes = {false};  // false: the paper's no_sub_path (no in-layer skip or LN on a path)
};

struct PathAccuracy {
    bool sub_path = false;
    int n_paths = 0, length = 0;
    Summary accuracy;  // over seeds and repeats
};

// One seed's trained model and what was measured on it.
struct SeedOutcome {
    std::uint64_t seed = 0;
    TrainedTask trained;
    TaskBatch eval;  // the evaluation batch (written out so any number can be recomputed)
    double whole_model_accuracy = 0, whole_model_train_accuracy = 0, majority_accuracy = 0;
    double position_majority_accuracy = 0;  // the most common training label at each position (tasks.hpp)
    std::vector<LayerResidual> residual;  // relative residual per layer of the trained model on eval
};

struct PathEffectivenessResult {
    std::vector<SeedOutcome> seeds;
    // Means over the seeds (with one seed, that seed's numbers).
    double whole_model_accuracy = 0, whole_model_train_accuracy = 0, majority_accuracy = 0, chance_accuracy = 0;
    double position_majority_accuracy = 0;
    double train_seconds = 0;                // wall time of training (the seeds not reused, together); 0 when all reused
    std::vector<PathEffectivenessRow> rows;  // every ensemble of every seed
    std::vector<PathAccuracy> by_length;     // summarised over seeds and repeats
};

PathEffectivenessResult run_path_effectiveness_experiment(const PathEffectivenessSettings& settings);

// Whether `settings` trains at least as long, on at least as much data, as the paper's (default_task_settings).
bool at_paper_scale(const TaskSettings& settings);

// The paper's whole-model level for the task, and Fig. 4's takeaway (short paths carry most of the accuracy; long
// paths add little), judged on the result.
Findings path_effectiveness_findings(const PathEffectivenessResult& result, const PathEffectivenessSettings& settings);

}  // namespace rankscope
