#pragma once
// Where models and experiments compute: `--device cpu|cuda|cuda:N` (SPEC: every model and experiment takes it).
//
//   const at::Device device = parse_device("cuda:1");   // Error when this libtorch has no CUDA or no device 1
//   model->to(device);                                   // parameters move once
//   model->forward(batch_on(batch, device), ...);        // every tensor the forward makes takes its inputs' device
//
// Conventions: tensors are created on the CPU from the seed (so a seed gives the same numbers on every device) and
// moved once, explicitly; a forward creates nothing on another device than its inputs'; measurements (the relative
// residual, E2's products, the bounds) read their tensors back with an explicit .to(at::kCPU).
// Debian's libtorch is CPU-only; a CUDA-enabled libtorch is used by configuring with
// -DCMAKE_PREFIX_PATH=/path/to/libtorch (docs/cluster.md).
#include <c10/core/Device.h>

#include <string>

namespace rankscope {

// "cpu", "cuda" (= cuda:0) or "cuda:N". Throws rankscope::Error for another spelling, for CUDA when this libtorch was
// built without it or sees no GPU, and for an index past the devices it sees; the error names `where` (the flag, or
// the Python module's setting).
at::Device parse_device(const std::string& text, const std::string& where = "--device");

}  // namespace rankscope
