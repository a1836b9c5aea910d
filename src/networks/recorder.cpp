#include "rankscope/recorder.hpp"

#include <algorithm>

#include "rankscope/error.hpp"

namespace rankscope {

void Recorder::reduce(const std::string& name, Reduction reduction) { reductions_[name] = std::move(reduction); }

void Recorder::put(const std::string& name, const at::Tensor& value) {
    interrupt_.poll();
    if (const auto reduction = reductions_.find(name); reduction != reductions_.end()) {
        values_[name] = reduction->second(value.detach());
        return;
    }
    if (!keep_.empty() && std::find(keep_.begin(), keep_.end(), name) == keep_.end()) return;
    values_[name] = value.detach();
}

const at::Tensor& Recorder::get(const std::string& name) const {
    const auto found = values_.find(name);
    if (found == values_.end()) throw Error("no recorded activation named '" + name + "'");
    return found->second;
}

void Recorder::check_filter_matched() const {
    for (const auto& name : keep_)
        if (!values_.count(name)) throw Error("hook name '" + name + "' matched nothing in this model");
}

std::string block_hook(int layer, const std::string& suffix) { return "blocks." + std::to_string(layer) + "." + suffix; }

}  // namespace rankscope
