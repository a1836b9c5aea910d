// What built this binary and what it computes with, for manifest.json and the report's header: libtorch's version
// (the headers it was compiled against, which must match the library it links), its BLAS and CUDA, and the compiler.
// A result's numbers depend on these (the linear path, oneDNN or MKL, changed the last digits between torch 1.13 and
// 2.13: docs/performance.md).
#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/version.h>

#include "rankscope/provenance.hpp"

namespace rankscope {
namespace {

const std::string kLibtorch = fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
const std::string kCompiler = fmt::format("g++ {}", __VERSION__);

}  // namespace

nlohmann::json build_json() {
    return {{"libtorch", kLibtorch}, {"mkl", at::hasMKL()}, {"lapack", at::hasLAPACK()}, {"cuda", at::hasCUDA()},
            {"compiler", kCompiler}};
}

std::string build_summary() {
    return fmt::format("libtorch {} ({}{}), {}", kLibtorch, at::hasMKL() ? "MKL" : "no MKL",
                       at::hasCUDA() ? ", CUDA" : ", CPU only", kCompiler);
}

}  // namespace rankscope
