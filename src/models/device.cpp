#include "rankscope/device.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <cctype>

#include "rankscope/error.hpp"

namespace rankscope {

at::Device parse_device(const std::string& text, const std::string& where) {
    if (text == "cpu") return at::Device(at::kCPU);
    int index = 0;
    if (text != "cuda") {
        const std::string prefix = "cuda:";
        const std::string digits = text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size()) : "";
        const bool numeral = !digits.empty() && digits.size() <= 3 &&
                             std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); });
        if (!numeral) throw Error("unknown device '" + text + "' (expected cpu, cuda or cuda:N)", where);
        index = std::stoi(digits);
    }
    if (!torch::cuda::is_available())
        throw Error("device " + text + ": this libtorch has no CUDA or sees no GPU (Debian's libtorch and the CPU wheel "
                    "are CPU-only; build rankscope against a CUDA torch: docs/cluster.md)", where);
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (index >= count)
        throw Error("device " + text + ": only " + std::to_string(count) + " CUDA device(s) visible", where);
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace rankscope
