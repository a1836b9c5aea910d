#include "rankscope/vector_math.hpp"

#include <torch/torch.h>

#include <mutex>

namespace rankscope {

const std::vector<VectorMathFunction>& vector_math_functions() {
    static const std::vector<VectorMathFunction> functions = {
        {"abs", &at::abs},     {"acos", &at::acos},   {"asin", &at::asin},   {"atan", &at::atan},
        {"atanh", &at::atanh}, {"cos", &at::cos},     {"cosh", &at::cosh},   {"erf", &at::erf},
        {"erfc", &at::erfc},   {"erfinv", &at::erfinv}, {"exp", &at::exp},   {"expm1", &at::expm1},
        {"log", &at::log},     {"log10", &at::log10}, {"log1p", &at::log1p}, {"log2", &at::log2},
        {"sin", &at::sin},     {"sinh", &at::sinh},   {"sqrt", &at::sqrt},   {"tan", &at::tan},
        {"tanh", &at::tanh},   {"trunc", &at::trunc}};
    return functions;
}

void warm_up_vector_math() {
    static std::once_flag once;
    std::call_once(once, [] {
        torch::NoGradGuard no_grad;
        for (const auto dtype : {at::kFloat, at::kDouble}) {
            // One element (no threads) of 0.5, inside every domain.
            const at::Tensor one = torch::full({1}, 0.5, at::TensorOptions().dtype(dtype));
            for (const VectorMathFunction& unary : vector_math_functions()) (void)unary.function(one);
        }
    });
}

}  // namespace rankscope
