#include "rankscope/array.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "rankscope/error.hpp"

namespace rankscope {

std::size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::F16: case DType::BF16: case DType::I16: return 2;
        case DType::F32: case DType::I32: return 4;
        case DType::F64: case DType::I64: return 8;
        case DType::I8: case DType::U8: case DType::Bool: return 1;
    }
    return 0;
}

double dtype_epsilon(DType dtype) {
    switch (dtype) {
        case DType::F16: return 0x1p-10;
        case DType::BF16: return 0x1p-7;
        case DType::F32: return 0x1p-23;
        default: return 0x1p-52;
    }
}

std::string dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::F32: return "F32";
        case DType::F64: return "F64";
        case DType::I8: return "I8";
        case DType::I16: return "I16";
        case DType::I32: return "I32";
        case DType::I64: return "I64";
        case DType::U8: return "U8";
        case DType::Bool: return "BOOL";
    }
    return "?";
}

bool checked_multiply(std::int64_t a, std::int64_t b, std::int64_t& product) {
    return !__builtin_mul_overflow(a, b, &product);
}

bool checked_add(std::int64_t a, std::int64_t b, std::int64_t& sum) { return !__builtin_add_overflow(a, b, &sum); }

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

std::string entry_position_text(const std::vector<std::int64_t>& shape, std::int64_t flat) {
    std::vector<std::int64_t> index(shape.size());
    std::int64_t rest = flat;
    for (std::size_t i = shape.size(); i-- > 0;) {
        const std::int64_t extent = shape[i] > 0 ? shape[i] : 1;
        index[i] = rest % extent;
        rest /= extent;
    }
    return shape_text(index) + " (flat index " + std::to_string(flat) + ")";
}

std::int64_t shape_numel(const std::vector<std::int64_t>& shape, const std::string& where) {
    std::int64_t n = 1;
    for (auto extent : shape) {
        if (extent < 0) throw Error("shape " + shape_text(shape) + " has a negative extent", where);
        if (!checked_multiply(n, extent, n))
            throw Error("shape " + shape_text(shape) + " has more elements than fit in 64 bits", where);
    }
    return n;
}

std::int64_t shape_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const std::string& where) {
    std::int64_t bytes = 0;
    if (!checked_multiply(shape_numel(shape, where), static_cast<std::int64_t>(dtype_size(dtype)), bytes))
        throw Error("shape " + shape_text(shape) + " of " + dtype_name(dtype) + " needs more bytes than fit in 64 bits",
                    where);
    return bytes;
}

std::int64_t ArrayView::numel() const { return shape_numel(shape, "array view"); }

std::size_t ArrayView::nbytes() const { return static_cast<std::size_t>(shape_nbytes(shape, dtype, "array view")); }

namespace {
template <typename T>
T load(const std::byte* p) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
}

// IEEE half (binary16) to float, including subnormals, infinities and NaN.
double half_to_double(std::uint16_t h) {
    const int sign = (h >> 15) & 1;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    double value;
    if (exponent == 0) value = std::ldexp(static_cast<double>(mantissa), -24);
    else if (exponent == 31) value = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else value = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
    return sign ? -value : value;
}

double bfloat16_to_double(std::uint16_t b) {
    const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
}  // namespace

HostArray make_f64_array(std::vector<std::int64_t> shape, const std::vector<double>& values) {
    HostArray array;
    array.dtype = DType::F64;
    array.shape = std::move(shape);
    const auto* first = reinterpret_cast<const std::byte*>(values.data());
    array.bytes.assign(first, first + values.size() * sizeof(double));
    if (array.numel() != static_cast<std::int64_t>(values.size())) throw Error("internal: shape does not match values");
    return array;
}

double element_as_double(const ArrayView& view, std::int64_t i) {
    const std::byte* p = view.data + static_cast<std::size_t>(i) * dtype_size(view.dtype);
    switch (view.dtype) {
        case DType::F16: return half_to_double(load<std::uint16_t>(p));
        case DType::BF16: return bfloat16_to_double(load<std::uint16_t>(p));
        case DType::F32: return load<float>(p);
        case DType::F64: return load<double>(p);
        case DType::I8: return load<std::int8_t>(p);
        case DType::I16: return load<std::int16_t>(p);
        case DType::I32: return load<std::int32_t>(p);
        case DType::I64: return static_cast<double>(load<std::int64_t>(p));
        case DType::U8: return load<std::uint8_t>(p);
        case DType::Bool: return load<std::uint8_t>(p) ? 1.0 : 0.0;
    }
    return 0.0;
}

std::vector<double> to_double_vector(const ArrayView& view) {
    const std::int64_t n = view.numel();
    std::vector<double> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = element_as_double(view, i);
    return out;
}

}  // namespace rankscope
