#pragma once
// torch tensors ↔ .safetensors, on top of io.hpp's torch-free reader and atomic writer.
//
//   write_tensors("acts.safetensors", {{"hook_embed", h}, {"input_ids", ids}}, {{"seed", "0"}});
//   SafetensorsFile file("acts.safetensors");
//   at::Tensor h = read_tensor(file, "hook_embed");   // an owned copy
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/io.hpp"

namespace rankscope {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The torch type of a stored dtype; throws Error naming `where` for a type torch has no equivalent of here.
at::ScalarType torch_dtype(DType dtype, const std::string& where);
// The stored dtype of a torch type (the inverse of torch_dtype for the types write_tensors stores); throws Error naming
// `where` for any other.
DType stored_dtype(at::ScalarType type, const std::string& where);

// Writes the tensors in their own dtype (float16/32/64, int32/64, uint8, bool), atomically, with the metadata.
void write_tensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

// An owned copy of tensor `name`; throws Error naming the file and tensor when absent.
at::Tensor read_tensor(const SafetensorsFile& file, const std::string& name);

}  // namespace rankscope
