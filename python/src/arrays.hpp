#pragma once
// numpy arrays ↔ at::Tensor without copies, and rankscope's typed tables as {column: numpy array}.
//
// Python hands every array to the extension as a numpy array (a torch tensor arrives as `t.detach().numpy()`, a view
// of the same memory); results come back as numpy arrays viewing the tensor's memory (torch.from_numpy makes them
// torch tensors, again without a copy).
#include <ATen/ATen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "rankscope/array.hpp"
#include "rankscope/table.hpp"

namespace rankscope::python {

namespace py = pybind11;

// Any Python object as a numpy array (numpy.asarray; numpy.ascontiguousarray when `c_contiguous`). Whatever numpy
// raises (MemoryError for a copy that cannot be made, ValueError for a ragged list) reaches Python as that exception;
// never a null handle (py::array::ensure returns one and clears the error: used anyway, it crashed Python).
py::array array_of(const py::handle& object, const std::string& what, bool c_contiguous = false);
// A tensor over the array's own memory (any strides; native byte order; float16/32/64, int8/16/32/64, uint8, bool).
// The array must outlive the tensor (keep the py::array in scope). Throws Error for other dtypes.
at::Tensor tensor_view(const py::array& array, const std::string& what = "array");
// The same memory as a rankscope ArrayView (needs a C-contiguous array; `contiguous` is a copy made when it is not,
// by array_of, so a copy that cannot be made raises).
ArrayView array_view_of(const py::array& array, py::array& contiguous, const std::string& what = "array");
// An array over the tensor's memory; the array owns a reference to the tensor. Tensors of a dtype numpy lacks
// (bfloat16) come back as float32 copies.
py::array to_numpy(const at::Tensor& tensor);
// {column name: numpy array} in column order: int64 / uint64 / float64 arrays, text columns as object arrays of str.
py::dict table_columns(const Table& table);

}  // namespace rankscope::python
