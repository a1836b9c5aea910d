#pragma once
// S task models of one configuration run as one (internal to src/tasks; the tests include it).
//
// Every parameter of TaskModel gets a leading model dimension S, and one forward runs all S models, each on its own
// batch: one operator per step for all of them instead of one per model. At the task models' sizes (sort: 6 layers,
// d = 48, batches of 30 × 8 tokens) operators, not arithmetic, decide the speed, so training S seeds this way costs
// little more than training one (docs/performance.md). Model s of the stack computes exactly TaskModel::forward of
// its own parameters; TaskModel::forward is the reference (tests/unit/test_stacked_training.cpp).
//
//   StackedTaskModel stack = StackedTaskModel::stack({model_a, model_b});   // copies the parameters
//   at::Tensor logits = stack.forward(inputs, key_bias);                     // [S, B, n, c]
//   stack.copy_into(1, model_b);                                             // model 1's parameters back
//
// Shapes (S models, B sequences, n tokens, f input features, d d_model, H heads, k = v = d / H, c outputs):
//   inputs  int64 [S, B, n] (tokens) or float [S, B, n, f] (coordinates); key_bias undefined or [S, B, 1, 1, n].
// Supports what model_config_for builds: token or coordinate input, post-LN or no LayerNorm, MLP with GELU or ReLU.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "rankscope/tasks.hpp"

namespace rankscope {

struct StackedTaskModel {
    TaskModelConfig config;
    std::vector<std::string> names;      // TaskModel's parameter names, in its order
    std::vector<at::Tensor> parameters;  // [S, ...] each: leaf tensors that require a gradient

    // The models must share one configuration (checked); the stack is made on `device`.
    static StackedTaskModel stack(const std::vector<TaskModel>& models, const at::Device& device = at::kCPU);
    std::int64_t models() const { return parameters.empty() ? 0 : parameters.front().size(0); }
    // Model s's parameters copied into `model` (same configuration, any device).
    void copy_into(std::int64_t s, TaskModel& model) const;
    at::Tensor forward(const at::Tensor& inputs, const at::Tensor& key_bias) const;  // [S, B, n, c]

  private:
    const at::Tensor& get(const std::string& name) const;
};

}  // namespace rankscope
