#pragma once
// Host arrays read from or written to disk, independent of torch.
//
//   rankscope::HostArray a = rankscope::read_npy("x.npy");      // owns its bytes
//   rankscope::SafetensorsFile f("model.safetensors");          // memory-mapped, validated header
//   rankscope::ArrayView w = f.view("encoder.layer.0.attention.self.query.weight");
//
// Element data are little-endian and C-contiguous (row-major); a Fortran-ordered .npy is transposed on read.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rankscope {

enum class DType { F16, BF16, F32, F64, I8, I16, I32, I64, U8, Bool };

// Bytes per element.
std::size_t dtype_size(DType dtype);
// safetensors spelling: "F32", "I64", ...
std::string dtype_name(DType dtype);
// The machine epsilon of a floating dtype, the precision its values were stored with: F16 2^-10, BF16 2^-7, F32 2^-23,
// F64 2^-52; integers and booleans are exact and measured in float64: 2^-52.
double dtype_epsilon(DType dtype);

// ---- checked sizes ------------------------------------------------------------------------------------------------
// Every element count or byte size computed from a file or a flag goes through these: a negative extent or a product
// that does not fit in int64 throws Error naming `where` (the file, or file:tensor) and the shape.
//   const std::size_t bytes = shape_nbytes(shape, DType::F32, path);   // throws instead of wrapping
bool checked_multiply(std::int64_t a, std::int64_t b, std::int64_t& product);  // false on overflow
bool checked_add(std::int64_t a, std::int64_t b, std::int64_t& sum);          // false on overflow
std::int64_t shape_numel(const std::vector<std::int64_t>& shape, const std::string& where);
std::int64_t shape_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const std::string& where);
// "[2, 3, 4]"
std::string shape_text(const std::vector<std::int64_t>& shape);
// Where the entry at row-major `flat` sits in `shape`: "[1, 1, 2] (flat index 17)" for shape [2, 4, 3].
std::string entry_position_text(const std::vector<std::int64_t>& shape, std::int64_t flat);

// A read-only view of contiguous row-major data owned elsewhere (a HostArray or a mapped file).
struct ArrayView {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const std::byte* data = nullptr;
    // Checked (see shape_numel): throws Error for a negative extent or an overflowing product.
    std::int64_t numel() const;
    std::size_t nbytes() const;
};

// An array that owns its bytes.
struct HostArray {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::vector<std::byte> bytes;
    ArrayView view() const { return ArrayView{dtype, shape, bytes.data()}; }
    std::int64_t numel() const { return view().numel(); }
};

// A float64 array holding `values` (row-major) with the given shape.
HostArray make_f64_array(std::vector<std::int64_t> shape, const std::vector<double>& values);

// Element i converted to double (any dtype).
double element_as_double(const ArrayView& view, std::int64_t i);
// All elements converted to double.
std::vector<double> to_double_vector(const ArrayView& view);

}  // namespace rankscope
