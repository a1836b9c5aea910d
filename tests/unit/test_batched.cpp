// The fused and batched fast paths against the naive single-matrix reference.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

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

TEST(Batched, TorchOperationsPathEqualsFusedKernel) {
    // The path tensors on a GPU take (torch operations in float64), run here on CPU tensors, against the fused kernel:
    // float32 and float64 items, leading dimensions, and an all-zero item (0 in both).
    at::manual_seed(5);
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
        at::Tensor x = (at::randn({2, 3, 11, 7}, dtype) * 2 + 0.5);
        x[1][2].zero_();
        for (Norm norm : {Norm::L1, Norm::LInf, Norm::Composite, Norm::Frobenius}) {
            const at::Tensor torch_path = batched_mean_relative_residual_on_device(x, norm);
            const at::Tensor fused = batched_relative_residual(x, norm, Center::Mean);
            ASSERT_EQ(torch_path.sizes(), fused.sizes());
            ASSERT_EQ(torch_path.scalar_type(), at::kDouble);
            EXPECT_TRUE(at::allclose(torch_path, fused, 1e-13, 1e-15)) << to_string(norm) << "\n" << torch_path - fused;
            EXPECT_EQ(torch_path[1][2].item<double>(), 0.0);
        }
    }
}

TEST(Batched, FrobeniusNeitherOverflowsNorUnderflowsOnEitherPath) {
    // The relative residual does not depend on X's scale. Squares of entries near 1e160 overflowed (NaN) and near 1e-170
    // underflowed (0, read as total collapse) in the fused kernel and the torch path, while the reference
    // (shifted_sum_norms) scales by the largest entry; the other norms never square.
    at::manual_seed(6);
    const at::Tensor x = at::randn({2, 4, 4}, at::kDouble);
    for (Norm norm : {Norm::Frobenius, Norm::Composite}) {
        const at::Tensor reference = batched_relative_residual(x, norm, Center::Mean);
        for (const double scale : {1e160, 1e200, 1e-160, 1e-170, 1e-300})
            for (const at::Tensor& measure : {batched_relative_residual(x * scale, norm, Center::Mean),
                                              batched_mean_relative_residual_on_device(x * scale, norm)})
                EXPECT_TRUE(at::allclose(measure, reference, 1e-12, 0)) << to_string(norm) << " " << scale << "\n"
                                                                         << measure << "\n" << reference;
        for (const double scale : {1e200, 1e-300})
            EXPECT_NEAR(batched_relative_residual(x * scale, norm, Center::Mean)[0].item<double>(),
                        relative_residual(to_matrix(x[0] * scale), norm, Center::Mean), 1e-12);
    }
}

TEST(Batched, NonFiniteEntryGivesNonFiniteMeasureOnBothPaths) {
    // One NaN or Inf entry in an item: its measure is NaN on the fused kernel and on the torch path (E1 names a
    // non-finite hidden state by it), and the other items are untouched.
    for (const double bad : {std::nan(""), double(INFINITY), -double(INFINITY)}) {
        at::Tensor x = at::randn({3, 8, 5}, at::kFloat);
        x[1][4][2] = bad;
        for (Norm norm : {Norm::L1, Norm::LInf, Norm::Composite, Norm::Frobenius})
            for (const at::Tensor& measure : {batched_relative_residual(x, norm, Center::Mean),
                                              batched_mean_relative_residual_on_device(x, norm)}) {
                EXPECT_TRUE(std::isnan(measure[1].item<double>())) << to_string(norm) << " " << bad;
                EXPECT_TRUE(std::isfinite(measure[0].item<double>()) && std::isfinite(measure[2].item<double>()));
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
