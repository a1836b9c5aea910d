// Path-restricted ensembles of a trained task model (SPEC.md §4 E4) and the circle rollout (E3).
#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "rankscope/error.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

std::vector<int> random_path(int layers, int heads, int length, std::mt19937_64& rng) {
    if (length < 0 || length > layers) throw Error("path length must lie in [0, layers]");
    // Which layers use a head: a uniformly random subset of size `length`; each picks a uniformly random head.
    std::vector<int> order(static_cast<std::size_t>(layers));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> path(static_cast<std::size_t>(layers), heads);  // heads = skip
    std::uniform_int_distribution<int> head(0, heads - 1);
    for (int i = 0; i < length; ++i) path[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = head(rng);
    return path;
}

at::Tensor path_ensemble_logits(TaskModel& model, const TaskBatch& any_device_batch, const std::vector<std::vector<int>>& paths,
                                bool sub_path) {
    torch::NoGradGuard no_grad;
    model->eval();
    const TaskBatch batch = any_device_batch.to(model->device());
    const at::Tensor embedded = model->embed(batch.inputs);
    const int layers = model->config.encoder.layers, heads = model->config.encoder.heads;
    at::Tensor sum = torch::zeros_like(embedded);
    for (const auto& path : paths) {
        if (static_cast<int>(path.size()) != layers) throw Error("a path must pick a head or the skip in every layer");
        at::Tensor h = embedded;
        for (int l = 0; l < layers; ++l) {
            const int choice = path[static_cast<std::size_t>(l)];
            if (choice == heads) continue;  // the skip: the layer passes its input on
            h = model->encoder->block(l)->forward_head(h, choice, sub_path, batch.key_bias);
        }
        sum += h;
    }
    return model->unembed(plain_layer_norm(sum));
}

std::vector<PathEffectivenessRow> path_effectiveness(TaskModel& model, const TaskBatch& batch, const std::string& task,
                                                     const std::vector<int>& n_paths_list, int repeats, bool sub_path,
                                                     std::uint64_t seed) {
    const int layers = model->config.encoder.layers, heads = model->config.encoder.heads;
    // A path skips a layer only where the layer has a skip: without skips (task --no-skip) every path goes through a
    // head in every layer, length L (shorter "paths" were drawn through skips the model does not have).
    int skips = 0;
    for (int l = 0; l < layers; ++l) skips += model->config.encoder.block_at(l).attention_skip ? 1 : 0;
    if (skips != 0 && skips != layers)
        throw Error("path ensembles need a skip in every layer or in none (some layers have one)");
    const bool every_layer_skips = skips == layers;
    const TaskBatch on_device = batch.to(model->device());  // once, for every ensemble
    std::vector<PathEffectivenessRow> rows;
    for (int length = every_layer_skips ? 0 : layers; length <= layers; ++length)
        for (int n_paths : n_paths_list)
            for (int repeat = 0; repeat < repeats; ++repeat) {
                // One stream per cell, so any cell can be recomputed alone.
                std::seed_seq cell{seed, static_cast<std::uint64_t>(length), static_cast<std::uint64_t>(n_paths),
                                   static_cast<std::uint64_t>(repeat), static_cast<std::uint64_t>(sub_path)};
                std::mt19937_64 rng(cell);
                std::vector<std::vector<int>> paths;
                for (int i = 0; i < n_paths; ++i) paths.push_back(random_path(layers, heads, length, rng));
                const double accuracy = token_accuracy(path_ensemble_logits(model, on_device, paths, sub_path), on_device.targets);
                rows.push_back({task, sub_path, length, n_paths, repeat, accuracy, seed});
            }
    return rows;
}

at::Tensor circle_rollout(TaskModel& model, const at::Tensor& start, int steps) {
    torch::NoGradGuard no_grad;
    model->eval();
    std::vector<at::Tensor> trajectory = {start.squeeze(0).to(at::kCPU)};
    at::Tensor x = start.to(model->device());
    for (int step = 1; step < steps; ++step) {
        x = model->forward(TaskBatch{x, {}, {}});
        // A recurrent map can run away: the states are kept as computed (inf or NaN once they overflow), and the
        // measures stop at the first beyond kRunawayCoordinate (measure_rollout).
        trajectory.push_back(x.squeeze(0).to(at::kCPU));
    }
    return torch::stack(trajectory);
}

}  // namespace rankscope
