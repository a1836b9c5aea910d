// torch tensors ↔ .safetensors (see tensor_file.hpp).
#include "rankscope/tensor_file.hpp"

#include <ATen/ATen.h>

#include "rankscope/error.hpp"

namespace rankscope {

DType stored_dtype(at::ScalarType type, const std::string& where) {
    switch (type) {
        case at::kHalf: return DType::F16;
        case at::kBFloat16: return DType::BF16;
        case at::kFloat: return DType::F32;
        case at::kDouble: return DType::F64;
        case at::kInt: return DType::I32;
        case at::kLong: return DType::I64;
        case at::kByte: return DType::U8;
        case at::kBool: return DType::Bool;
        default: throw Error(std::string("cannot store tensor type ") + at::toString(type), where);
    }
}

at::ScalarType torch_dtype(DType dtype, const std::string& where) {
    switch (dtype) {
        case DType::F16: return at::kHalf;
        case DType::BF16: return at::kBFloat16;
        case DType::F32: return at::kFloat;
        case DType::F64: return at::kDouble;
        case DType::I8: return at::kChar;
        case DType::I16: return at::kShort;
        case DType::I32: return at::kInt;
        case DType::I64: return at::kLong;
        case DType::U8: return at::kByte;
        case DType::Bool: return at::kBool;
    }
    throw Error("unknown dtype", where);
}

void write_tensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
    std::vector<at::Tensor> keep;  // contiguous CPU copies that own the bytes the views point at
    std::vector<NamedArray> arrays;
    keep.reserve(tensors.size());
    for (const auto& [name, tensor] : tensors) {
        keep.push_back(tensor.detach().cpu().contiguous());
        const at::Tensor& t = keep.back();
        arrays.push_back({name, ArrayView{stored_dtype(t.scalar_type(), path + ":" + name),
                                          std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()),
                                          static_cast<const std::byte*>(t.data_ptr())}});
    }
    write_safetensors(path, arrays, metadata);
}

at::Tensor read_tensor(const SafetensorsFile& file, const std::string& name) {
    const ArrayView view = file.view(name);
    return at::from_blob(const_cast<std::byte*>(view.data), view.shape,
                         at::TensorOptions().dtype(torch_dtype(view.dtype, file.path() + ":" + name)))
        .clone();
}

}  // namespace rankscope
