#pragma once
// E5 (SPEC.md §4): models of (nearly) equal parameter count, shallow-and-wide vs deep-and-narrow, trained on the same
// task: accuracy, the relative residual along relative depth, and the path-length distribution side by side.
#include <filesystem>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/paths.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

struct WidthDepthSettings {
    TaskSettings base;                 // the reference model: its parameter count is the target
    std::vector<int> depths = {2, 6, 12};
    std::filesystem::path work_dir, checkpoints;
    bool retrain = false, allow_nonfinite = false;
};

struct WidthDepthModel {
    TaskSettings settings;             // with the matched d_model
    std::int64_t parameters = 0;
    double accuracy = 0;
    double mean_path_length = 0;
    std::vector<PathLengthRow> paths;  // path_length_distribution(layers, heads)
    std::vector<LayerResidual> residual;
    bool reused = false;
    double train_seconds = 0;  // NaN: a checkpoint an older build wrote, without its training time
    std::string checkpoint;
};

struct WidthDepthResult {
    std::int64_t target_parameters = 0;
    double majority_accuracy = 0;
    std::vector<WidthDepthModel> models;  // one per depth, in the order given
};

// The width (a multiple of the head count) whose model at `layers` layers has the parameter count closest to `target`.
int matching_width(TaskSettings settings, const TaskSplits& data, int layers, std::int64_t target);

WidthDepthResult run_width_depth_experiment(const WidthDepthSettings& settings);

// The paper's §4.3 reading (deeper models have longer paths; long paths carry little) checked on the result.
Findings width_depth_findings(const WidthDepthResult& result, const WidthDepthSettings& settings);

}  // namespace rankscope
