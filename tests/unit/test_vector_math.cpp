// warm_up_vector_math (vector_math.hpp) runs before every test of this binary; after it, ATen's float32 and float64
// unary functions are accurate on every thread of a parallel call. The race it prevents (one thread's chunk computed
// by oneMKL's low-accuracy kernel) is rare and timing-dependent, and no test provokes it on demand: the measurements
// of it, and of the warm-up, are in docs/reliability.md, part 3.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>

#include "rankscope/intra_op_threads.hpp"
#include "rankscope/vector_math.hpp"

namespace {

// Every test of this binary starts after the warm-up, as every rankscope program does: the unit tests' numbers must
// not depend on the race either.
class VectorMathWarmUp : public ::testing::Environment {
public:
    void SetUp() override { rankscope::warm_up_vector_math(); }
};
::testing::Environment* const kWarmUp = ::testing::AddGlobalTestEnvironment(new VectorMathWarmUp);

// erf⁻¹(x) for |x| < 1 by Newton's method on erf(y) − x from y = 0: erf is concave on y > 0 (convex on y < 0), so the
// iterates move monotonically to the root; 60 steps reach double precision. Its error is erf's rounding over erf′(y):
// on |x| ≤ 0.9 under 2 epsilon of y.
double erfinv_by_newton(double x) {
    double y = 0;
    for (int step = 0; step < 60; ++step) y -= (std::erf(y) - x) / (2 / std::sqrt(M_PI) * std::exp(-y * y));
    return y;
}

// A reference for each function the warm-up calls (vector_math_functions(), looked up by name).
struct UnaryCase {
    const char* name;
    double (*reference)(double);
    double low, high;  // the inputs: evenly spaced in [low, high]
};

const UnaryCase kUnaryCases[] = {
    {"abs", [](double x) { return std::fabs(x); }, -4, 4},
    {"acos", [](double x) { return std::acos(x); }, -0.99, 0.99},
    {"asin", [](double x) { return std::asin(x); }, -0.99, 0.99},
    {"atan", [](double x) { return std::atan(x); }, -4, 4},
    {"atanh", [](double x) { return std::atanh(x); }, -0.99, 0.99},
    {"cos", [](double x) { return std::cos(x); }, -4, 4},
    {"cosh", [](double x) { return std::cosh(x); }, -4, 4},
    {"erf", [](double x) { return std::erf(x); }, -4, 4},
    {"erfc", [](double x) { return std::erfc(x); }, -4, 4},
    {"exp", [](double x) { return std::exp(x); }, -4, 4},
    {"expm1", [](double x) { return std::expm1(x); }, -4, 4},
    {"log", [](double x) { return std::log(x); }, 0.01, 100},
    {"log10", [](double x) { return std::log10(x); }, 0.01, 100},
    {"log1p", [](double x) { return std::log1p(x); }, -0.9, 100},
    {"log2", [](double x) { return std::log2(x); }, 0.01, 100},
    {"sin", [](double x) { return std::sin(x); }, -4, 4},
    {"sinh", [](double x) { return std::sinh(x); }, -4, 4},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0.01, 100},
    {"tan", [](double x) { return std::tan(x); }, -1.4, 1.4},
    {"tanh", [](double x) { return std::tanh(x); }, -4, 4},
    {"trunc", [](double x) { return std::trunc(x); }, -4, 4},
    {"erfinv", &erfinv_by_newton, -0.9, 0.9},
};

// The worst error of `unary` over 8192 inputs (ATen splits them evenly between the 2 threads: both call the
// function at once), in units of the result type's epsilon relative to |reference| (floored at the smallest normal
// number). A NaN anywhere gives NaN, which fails every bound.
template <typename T>
double worst_error_in_epsilons(const rankscope::VectorMathFunction& unary, const UnaryCase& c) {
    const auto dtype = c10::CppTypeToScalarType<T>::value;
    const at::Tensor x = at::linspace(c.low, c.high, 8192, at::TensorOptions().dtype(dtype));
    const at::Tensor y = unary.function(x).contiguous();
    const T* in = x.data_ptr<T>();
    const T* out = y.data_ptr<T>();
    double worst = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        const double reference = c.reference(static_cast<double>(in[i]));  // exact for float32, ~1 ulp for float64
        const double scale = std::max(std::fabs(reference), static_cast<double>(std::numeric_limits<T>::min()));
        const double error = std::fabs(static_cast<double>(out[i]) - reference) / scale /
                             static_cast<double>(std::numeric_limits<T>::epsilon());
        if (!(error <= worst)) worst = error;  // keeps a NaN
    }
    return worst;
}

}  // namespace

// oneMKL's high-accuracy kernels are within 1 ulp (the worst here: erfc in float64, 2.3 epsilon from libm); the
// low-accuracy kernel the race can pick reaches ~4000 ulp (PyTorch issue 188792).
TEST(VectorMath, UnaryFunctionsAreAccurateOnEveryThreadOfAParallelCall) {
    const rankscope::IntraOpThreads two(2);
    ASSERT_EQ(at::get_num_threads(), 2);
    const auto& functions = rankscope::vector_math_functions();
    ASSERT_EQ(functions.size(), std::size(kUnaryCases)) << "a reference case for each warmed-up function, no more";
    for (const rankscope::VectorMathFunction& unary : functions) {
        const auto c = std::find_if(std::begin(kUnaryCases), std::end(kUnaryCases), [&](const UnaryCase& candidate) {
            return std::string(candidate.name) == unary.name;
        });
        ASSERT_NE(c, std::end(kUnaryCases)) << "no reference case for " << unary.name;
        EXPECT_LE(worst_error_in_epsilons<float>(unary, *c), 8.0) << unary.name << " float32";
        EXPECT_LE(worst_error_in_epsilons<double>(unary, *c), 8.0) << unary.name << " float64";
    }
}
