// Relative residual per layer of a trained task model (SPEC.md §2 measure, §4 E5).
#include <torch/torch.h>

#include "rankscope/measures.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

std::vector<LayerResidual> residual_by_layer(TaskModel& model, const TaskBatch& batch) {
    torch::NoGradGuard no_grad;
    model->eval();
    Recorder recorder;
    model->forward(batch.to(model->device()), &recorder);  // measured below on the CPU, in float64
    const int layers = model->config.encoder.layers;
    // Real tokens per sample: all of them, or the unmasked prefix when the batch is padded.
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch.size()), batch.inputs.size(1));
    if (batch.key_bias.defined()) {
        const at::Tensor real = batch.key_bias.reshape({batch.size(), -1}).eq(0).sum(-1);
        for (std::int64_t i = 0; i < batch.size(); ++i) lengths[static_cast<std::size_t>(i)] = real[i].item<std::int64_t>();
    }
    std::vector<LayerResidual> rows;
    for (int layer = 0; layer <= layers; ++layer) {
        const at::Tensor hidden =
            recorder.get(layer == 0 ? "hook_embed" : block_hook(layer - 1, "hook_resid_post")).to(at::kCPU, torch::kDouble);
        std::vector<double> values;
        for (std::int64_t i = 0; i < batch.size(); ++i)
            values.push_back(relative_residual(to_matrix(hidden[i].narrow(0, 0, lengths[static_cast<std::size_t>(i)])),
                                               Norm::Composite, Center::Mean));
        const Summary summary = summarize(values);
        rows.push_back({layer, summary.mean, summary.std, summary.n});
    }
    return rows;
}

}  // namespace rankscope
