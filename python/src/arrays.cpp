#include "arrays.hpp"

#include <memory>

#include "rankscope/error.hpp"

namespace rankscope::python {
namespace {

using namespace pybind11::literals;

at::ScalarType scalar_type_of(const py::dtype& dtype, const std::string& what) {
    const char kind = dtype.kind();
    const auto size = dtype.itemsize();
    if (kind == 'f' && size == 2) return at::kHalf;
    if (kind == 'f' && size == 4) return at::kFloat;
    if (kind == 'f' && size == 8) return at::kDouble;
    if (kind == 'i' && size == 1) return at::kChar;
    if (kind == 'i' && size == 2) return at::kShort;
    if (kind == 'i' && size == 4) return at::kInt;
    if (kind == 'i' && size == 8) return at::kLong;
    if (kind == 'u' && size == 1) return at::kByte;
    if (kind == 'b' && size == 1) return at::kBool;
    throw Error("unsupported dtype " + py::cast<std::string>(py::str(static_cast<const py::handle&>(dtype))) +
                    " (expected float16/32/64, int8/16/32/64, uint8 or bool)",
                what);
}

DType dtype_of(at::ScalarType type) {
    switch (type) {
        case at::kHalf: return DType::F16;
        case at::kFloat: return DType::F32;
        case at::kDouble: return DType::F64;
        case at::kChar: return DType::I8;
        case at::kShort: return DType::I16;
        case at::kInt: return DType::I32;
        case at::kLong: return DType::I64;
        case at::kByte: return DType::U8;
        case at::kBool: return DType::Bool;
        default: break;
    }
    throw Error("unsupported dtype");
}

py::dtype numpy_dtype(at::ScalarType type) {
    switch (type) {
        case at::kHalf: return py::dtype("float16");
        case at::kFloat: return py::dtype("float32");
        case at::kDouble: return py::dtype("float64");
        case at::kChar: return py::dtype("int8");
        case at::kShort: return py::dtype("int16");
        case at::kInt: return py::dtype("int32");
        case at::kLong: return py::dtype("int64");
        case at::kByte: return py::dtype("uint8");
        case at::kBool: return py::dtype("bool");
        default: break;
    }
    throw Error(std::string("no numpy dtype for ") + c10::toString(type));
}

void require_array(const py::handle& array, const std::string& what) {
    if (!array.ptr()) throw Error("no array (a null handle)", what);
}

}  // namespace

py::array array_of(const py::handle& object, const std::string& what, bool c_contiguous) {
    if (!object.ptr()) throw Error("no array (a null handle)", what);
    const py::module_ numpy = py::module_::import("numpy");
    // Raises error_already_set with numpy's own exception (MemoryError, ValueError, TypeError) on failure.
    py::object result = numpy.attr(c_contiguous ? "ascontiguousarray" : "asarray")(object);
    if (!py::isinstance<py::array>(result)) throw Error("numpy did not return an array", what);
    return py::reinterpret_borrow<py::array>(result);
}

at::Tensor tensor_view(const py::array& array, const std::string& what) {
    require_array(array, what);
    if (array.dtype().byteorder() == '>') throw Error("big-endian data: convert with .astype('<f8') first", what);
    const at::ScalarType type = scalar_type_of(array.dtype(), what);
    std::vector<std::int64_t> sizes(array.shape(), array.shape() + array.ndim());
    std::vector<std::int64_t> strides;
    for (py::ssize_t i = 0; i < array.ndim(); ++i) {
        if (array.strides(i) % array.itemsize() != 0)
            throw Error("strides that are not a multiple of the item size (a view into a record array?)", what);
        strides.push_back(array.strides(i) / array.itemsize());
    }
    // from_blob never writes; the const_cast only satisfies its signature.
    return at::from_blob(const_cast<void*>(array.data()), sizes, strides, at::TensorOptions().dtype(type));
}

ArrayView array_view_of(const py::array& array, py::array& contiguous, const std::string& what) {
    require_array(array, what);
    if (array.dtype().byteorder() == '>') throw Error("big-endian data: convert with .astype('<f8') first", what);
    contiguous = array_of(array, what, /*c_contiguous=*/true);
    ArrayView view;
    view.dtype = dtype_of(scalar_type_of(contiguous.dtype(), what));
    view.shape.assign(contiguous.shape(), contiguous.shape() + contiguous.ndim());
    view.data = static_cast<const std::byte*>(contiguous.data());
    return view;
}

py::array to_numpy(const at::Tensor& tensor) {
    // Results computed on a GPU (device="cuda") are read back here; on the CPU .to(kCPU) is the tensor itself.
    const at::Tensor on_cpu = tensor.detach().to(at::kCPU);
    const at::Tensor source = on_cpu.scalar_type() == at::kBFloat16 ? on_cpu.to(at::kFloat) : on_cpu;
    auto owner = std::make_unique<at::Tensor>(source);
    const at::Tensor& t = *owner;
    std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
    std::vector<py::ssize_t> strides;
    for (auto stride : t.strides()) strides.push_back(stride * static_cast<py::ssize_t>(t.element_size()));
    py::capsule base(owner.get(), [](void* pointer) { delete static_cast<at::Tensor*>(pointer); });
    owner.release();
    return py::array(numpy_dtype(t.scalar_type()), shape, strides, t.data_ptr(), base);
}

py::dict table_columns(const Table& table) {
    py::dict columns;
    for (const auto& column : table.columns()) {
        switch (column.kind) {
            case Table::Integer: columns[column.name.c_str()] = py::array_t<std::int64_t>(column.integers.size(), column.integers.data()); break;
            case Table::Unsigned: columns[column.name.c_str()] = py::array_t<std::uint64_t>(column.unsigneds.size(), column.unsigneds.data()); break;
            case Table::Real: columns[column.name.c_str()] = py::array_t<double>(column.reals.size(), column.reals.data()); break;
            case Table::Text: {
                py::list texts;
                for (const auto& text : column.texts) texts.append(py::str(text));
                columns[column.name.c_str()] = py::module_::import("numpy").attr("array")(texts, "dtype"_a = "object");
                break;
            }
        }
    }
    return columns;
}

}  // namespace rankscope::python
