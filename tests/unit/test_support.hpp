#pragma once
// Helpers that several test files share. One definition each: the test binary is built in unity batches (several
// files in one translation unit), where two files' anonymous-namespace helpers of one name would collide.
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "rankscope/io.hpp"

namespace rankscope::test_support {

// tests/fixtures of the repository: the tiny checkpoints and their expected hidden states.
inline const std::string kFixtures = RANKSCOPE_FIXTURES_DIR;

// A fixture array as a torch tensor (F32, F64 or I64, copied out of the file's memory; another dtype is an error).
inline at::Tensor tensor_of(const SafetensorsFile& file, const std::string& name) {
    const ArrayView v = file.view(name);
    if (v.dtype != DType::F32 && v.dtype != DType::F64 && v.dtype != DType::I64)
        throw std::runtime_error("tensor_of: " + name + " is neither F32, F64 nor I64");
    const auto dtype = v.dtype == DType::F32 ? torch::kFloat : v.dtype == DType::F64 ? torch::kDouble : torch::kLong;
    return torch::from_blob(const_cast<std::byte*>(v.data), v.shape, dtype).clone();
}

// A fresh, empty folder under the temporary directory, unique to this process.
inline std::filesystem::path temp_dir(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("rankscope_test_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace rankscope::test_support
