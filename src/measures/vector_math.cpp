#include "rankscope/vector_math.hpp"

#include <torch/torch.h>

#include <mutex>

namespace rankscope {

void warm_up_vector_math() {
    static std::once_flag once;
    std::call_once(once, [] {
        torch::NoGradGuard no_grad;
        // Every function ATen sends to oneMKL (IMPLEMENT_VML_MKL in aten/src/ATen/cpu/vml.h) and a few that it computes
        // itself; 0.5 is inside every domain.
        using Unary = at::Tensor (*)(const at::Tensor&);
        const Unary functions[] = {&at::abs,  &at::acos,  &at::asin,  &at::atan,   &at::atanh, &at::cos,
                                   &at::cosh, &at::erf,   &at::erfc,  &at::erfinv, &at::exp,   &at::expm1,
                                   &at::log,  &at::log10, &at::log1p, &at::log2,   &at::sin,   &at::sinh,
                                   &at::sqrt, &at::tan,   &at::tanh,  &at::trunc};
        for (const auto dtype : {at::kFloat, at::kDouble}) {
            const at::Tensor one = torch::full({1}, 0.5, at::TensorOptions().dtype(dtype));  // one element: no threads
            for (const Unary function : functions) (void)function(one);
        }
    });
}

}  // namespace rankscope
