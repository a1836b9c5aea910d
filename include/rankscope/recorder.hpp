#pragma once
// Explicit activation recording with TransformerLens names (libtorch modules have no forward hooks).
//
//   Recorder recorder;                       // records everything; or Recorder({"blocks.3.hook_resid_post"})
//   network->forward(x, &recorder);          // modules call record(rec, name, tensor) at each hook point
//   at::Tensor h = recorder.get("blocks.3.hook_resid_post");
//
// Names: hook_embed, blocks.{l}.hook_resid_pre|mid|post, blocks.{l}.hook_attn_out, blocks.{l}.hook_mlp_out,
// blocks.{l}.attn.hook_pattern ([batch, heads, n, n]). A recorder lives for one run (RAII); nothing global.
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rankscope/interrupt.hpp"

namespace rankscope {

class Recorder {
public:
    Recorder() = default;
    // Only these names are kept; names that the forward never produced are reported by check_filter_matched().
    explicit Recorder(std::vector<std::string> keep) : keep_(std::move(keep)) {}

    // Stores reduce(value) instead of value under `name` (e.g. a per-sample measure of a hidden state), so that the
    // activation itself is freed as soon as the forward moves on. A reduced name is kept even under a filter.
    using Reduction = std::function<at::Tensor(const at::Tensor&)>;
    void reduce(const std::string& name, Reduction reduction);

    void put(const std::string& name, const at::Tensor& value);
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    // Throws rankscope::Error naming the hook when absent.
    const at::Tensor& get(const std::string& name) const;
    const std::map<std::string, at::Tensor>& all() const { return values_; }
    // Throws when a name in the filter matched nothing (a typo must not be silent).
    void check_filter_matched() const;
    // Polled at every hook point (each recorded activation, kept or not): a long forward stops within a layer.
    void set_interrupt(InterruptPoll interrupt) { interrupt_ = std::move(interrupt); }

private:
    std::vector<std::string> keep_;
    std::map<std::string, Reduction> reductions_;
    InterruptPoll interrupt_;
    std::map<std::string, at::Tensor> values_;
};

// Records `value` under `name` when `recorder` is not null; returns `value` (identity) either way.
inline const at::Tensor& record(Recorder* recorder, const std::string& name, const at::Tensor& value) {
    if (recorder) recorder->put(name, value);
    return value;
}

// blocks.{layer}.{suffix}
std::string block_hook(int layer, const std::string& suffix);

}  // namespace rankscope
