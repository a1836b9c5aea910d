// The fused and batched fast paths against the naive single-matrix reference.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "measures/kernels.hpp"
#include "rankscope/measures.hpp"

using namespace rankscope;

TEST(Batched, FusedMeanKernelEqualsNaiveReference) {
    at::manual_seed(3);
    const at::Tensor x = at::randn({5, 17, 9}, at::kFloat) * 3 + 1;
    for (Norm norm : {Norm::L1, Norm::LInf, Norm::Composite, Norm::Frobenius}) {
        const at::Tensor fast = batched_relative_residual(x, norm, Center::Mean);
        for (int b = 0; b < 5; ++b) {
            const Matrix item = to_matrix(x[b]);
            EXPECT_NEAR(fast[b].item<double>(), relative_residual(item, norm, Center::Mean), 1e-12) << to_string(norm);
        }
    }
}

TEST(Batched, LeadingDimensionsAndEveryCentre) {
    at::manual_seed(4);
    const at::Tensor x = at::randn({2, 3, 6, 4}, at::kDouble);
    for (Center center : all_centers()) {
        const at::Tensor fast = batched_residual_norm(x, Norm::Composite, center);
        ASSERT_EQ(fast.sizes(), (std::vector<std::int64_t>{2, 3}));
        for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 3; ++b)
                EXPECT_NEAR(fast[a][b].item<double>(), residual_norm(to_matrix(x[a][b]), Norm::Composite, center), 1e-12);
    }
    const at::Tensor norms = batched_matrix_norm(x.transpose(-1, -2), Norm::Spectral);  // non-contiguous input
    EXPECT_NEAR(norms[1][2].item<double>(), spectral_norm(to_matrix(x[1][2]).transpose()), 1e-12);
    const at::Tensor cosines = batched_mean_pairwise_cosine(x.to(at::kFloat));
    ASSERT_EQ(cosines.sizes(), (std::vector<std::int64_t>{2, 3}));
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b)
            EXPECT_NEAR(cosines[a][b].item<double>(), mean_pairwise_cosine(to_matrix(x[a][b].to(at::kFloat))), 1e-12);
}

TEST(Batched, RejectsIntegerAndVectors) {
    EXPECT_THROW(batched_relative_residual(at::ones({3}, at::kFloat), Norm::L1, Center::Mean), std::exception);
    EXPECT_THROW(batched_relative_residual(at::ones({2, 3, 3}, at::kLong), Norm::L1, Center::Median), std::exception);
}
