// E1/E2's shortcuts give the same numbers as the plain way: activations measured while the forward records them vs
// recorded in full and measured afterwards; the "transformer" variant's forward reused as the unmodified model's vs a
// separate forward; E2's path products in parallel vs one by one in the test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/intra_op_threads.hpp"
#include "rankscope/io.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/models.hpp"
#include "rankscope/paths.hpp"
#include "test_support.hpp"

using namespace rankscope;
using namespace rankscope::test_support;

namespace {

// The fixture's batch: 2 samples, one with padding, so the real-token paths run too.
ModelBatch fixture_batch(const std::string& model) {
    SafetensorsFile expected(kFixtures + "/" + model + "/expected-transformer.safetensors");
    return {tensor_of(expected, "input_ids"), tensor_of(expected, "attention_mask"), tensor_of(expected, "token_type_ids")};
}

void expect_same_rows(const std::vector<ResidualRow>& a, const std::vector<ResidualRow>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].variant, b[i].variant);
        EXPECT_EQ(a[i].layer, b[i].layer);
        EXPECT_DOUBLE_EQ(a[i].mean, b[i].mean) << a[i].variant << " layer " << a[i].layer;
        EXPECT_DOUBLE_EQ(a[i].std, b[i].std) << a[i].variant << " layer " << a[i].layer;
        EXPECT_DOUBLE_EQ(a[i].min, b[i].min);
        EXPECT_DOUBLE_EQ(a[i].max, b[i].max);
        EXPECT_EQ(a[i].n, b[i].n);
    }
}

void expect_same_paths(const std::vector<PathProductSample>& a, const std::vector<PathProductSample>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].layers, b[i].layers);
        EXPECT_EQ(a[i].heads, b[i].heads);
        EXPECT_EQ(a[i].sample, b[i].sample);
        EXPECT_DOUBLE_EQ(a[i].relative_residual, b[i].relative_residual) << "path " << i;
        EXPECT_DOUBLE_EQ(a[i].relative_residual_frobenius, b[i].relative_residual_frobenius) << "path " << i;
    }
}

}  // namespace

TEST(E1Shortcuts, MeasuringWhileRecordingEqualsMeasuringTheRecordedActivations) {
    for (const char* name : {"bert-tiny", "albert-tiny", "xlnet-tiny"}) {
        auto model = load_hf_model(kFixtures + "/" + name);
        const ModelBatch batch = fixture_batch(name);
        ASSERT_FALSE(batch.attention_mask.all().item<bool>()) << name << ": the fixture batch should have padding";
        RealModelSettings settings;
        settings.draws = 10;
        const WeightsRun measured = run_real_model(*model, batch, name, "pretrained", settings);
        Recorder everything;  // a caller's recorder: every activation kept, the measures taken afterwards
        const WeightsRun recorded = run_real_model(*model, batch, name, "pretrained", settings, &everything);
        ASSERT_TRUE(everything.has(block_hook(0, "attn.hook_pattern")));
        expect_same_rows(measured.residual, recorded.residual);
        ASSERT_EQ(measured.skip_ratio.size(), recorded.skip_ratio.size());
        for (std::size_t l = 0; l < measured.skip_ratio.size(); ++l)
            EXPECT_DOUBLE_EQ(measured.skip_ratio[l], recorded.skip_ratio[l]) << name << " layer " << l;
        expect_same_paths(measured.paths, recorded.paths);
        ASSERT_EQ(measured.heads.size(), recorded.heads.size());
        for (std::size_t l = 0; l < measured.heads.size(); ++l) {
            EXPECT_EQ(measured.heads[l].first_token_share, recorded.heads[l].first_token_share) << name << " layer " << l;
            EXPECT_EQ(measured.heads[l].entropy, recorded.heads[l].entropy) << name << " layer " << l;
        }
    }
}

TEST(E1Shortcuts, NonFiniteHiddenStateIsNamed) {
    // The measures stay on the model's device during the forward and are checked when their values come back: a NaN
    // in layer 1's MLP output weights makes layer 2's state (hidden index 2) non-finite in the transformer variant,
    // while SAN (no MLP) stays finite, measured while recording and from a caller's recorder alike; without the
    // transformer variant, the unmodified pass that only feeds E2 and the skip ratio is checked the same way.
    for (const auto& [variants, message] :
         std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"SAN", "transformer"}, "non-finite hidden state at layer 2 (transformer)"},
             {{"SAN"}, "non-finite hidden state at layer 2 (unmodified)"}})
    for (bool to_caller : {false, true}) {
        auto model = load_hf_model(kFixtures + "/bert-tiny");
        for (auto& [name, parameter] : model->parameters())
            if (name == "encoder.layer.1.output.dense.weight") {
                torch::NoGradGuard no_grad;
                parameter[0][0] = NAN;
            }
        RealModelSettings settings;
        settings.variants = variants;
        Recorder everything;
        try {
            run_real_model(*model, fixture_batch("bert-tiny"), "bert-tiny", "pretrained", settings,
                           to_caller ? &everything : nullptr);
            FAIL() << "a NaN weight gave finite rows";
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(message + " (pass --allow-nonfinite to write it anyway)"),
                      std::string::npos)
                << error.what();
        }
        // Allowed (--allow-nonfinite): the run completes, and only the rows after the NaN carry it.
        settings.allow_nonfinite = true;
        const WeightsRun run = run_real_model(*model, fixture_batch("bert-tiny"), "bert-tiny", "pretrained", settings,
                                              to_caller ? &everything : nullptr);
        ASSERT_EQ(run.residual.size(), 4 * variants.size());  // layers 0 to 3 of each variant
        for (const auto& row : run.residual)
            EXPECT_EQ(!std::isfinite(row.mean), row.variant == "transformer" && row.layer >= 2) << row.variant << " " << row.layer;
        // E2 reads the unmodified model's maps: layer 2's (after the NaN) is NaN, so is every product through it (it
        // read 0 before), and the check that runs before any file is written stops on it.
        ASSERT_FALSE(run.paths.empty());
        for (const auto& s : run.paths)
            EXPECT_EQ(std::isnan(s.relative_residual), std::count(s.layers.begin(), s.layers.end(), 2) > 0);
        EXPECT_THROW(check_weights_runs_finite("bert-tiny", {run}, false), Error);
    }
}

TEST(E1Shortcuts, TheTransformerVariantIsTheUnmodifiedForward) {
    auto model = load_hf_model(kFixtures + "/bert-tiny");
    const ModelBatch batch = fixture_batch("bert-tiny");
    RealModelSettings with_transformer, without_transformer;
    with_transformer.variants = {"SAN", "transformer"};
    without_transformer.variants = {"SAN"};  // the unmodified model then runs as a forward of its own
    with_transformer.draws = without_transformer.draws = 10;
    const WeightsRun shared = run_real_model(*model, batch, "bert-tiny", "pretrained", with_transformer);
    const WeightsRun separate = run_real_model(*model, batch, "bert-tiny", "pretrained", without_transformer);
    EXPECT_EQ(shared.skip_ratio, separate.skip_ratio);
    expect_same_paths(shared.paths, separate.paths);
    // The transformer rows equal E1 of the transformer variant alone, and SAN's rows are unchanged.
    const auto alone = residual_by_layer(*model, batch, "bert-tiny", "pretrained", {"SAN", "transformer"}, false);
    expect_same_rows(shared.residual, alone);
    const std::vector<ResidualRow> san_rows(shared.residual.begin(), shared.residual.begin() + separate.residual.size());
    expect_same_rows(san_rows, separate.residual);
}

TEST(E1Shortcuts, PathProductsInParallelEqualTheSerialProductsAndDoNotDependOnThreads) {
    auto model = load_hf_model(kFixtures + "/bert-tiny");
    const ModelBatch batch = fixture_batch("bert-tiny");
    Recorder recorder;
    model->forward(batch, Surgery{}, &recorder);
    std::vector<at::Tensor> patterns;
    for (int l = 0; l < model->config().layers; ++l) patterns.push_back(recorder.get(block_hook(l, "attn.hook_pattern")));
    auto on_threads = [&](int threads) {
        const IntraOpThreads scope(threads);
        return sample_path_products(patterns, 25, 7, batch.attention_mask);
    };
    const auto one_thread = on_threads(1);
    const auto two_threads = on_threads(2);
    expect_same_paths(one_thread, two_threads);
    // Each product again, serially and plainly: the real tokens' block of each factor, later layers on the left, and
    // the library's one-matrix rank-1 relative residual in each norm.
    for (const auto& s : two_threads) {
        const at::Tensor real = batch.attention_mask[s.sample].nonzero().squeeze(1);
        at::Tensor product = torch::eye(real.size(0), torch::kDouble);
        for (std::size_t j = 0; j < s.layers.size(); ++j) {
            const at::Tensor a = patterns[static_cast<std::size_t>(s.layers[j])][s.sample][s.heads[j]].to(torch::kDouble);
            product = a.index_select(0, real).index_select(1, real).matmul(product);
        }
        const Matrix matrix = to_matrix(product);
        EXPECT_NEAR(s.relative_residual, relative_residual(matrix, Norm::Composite, Center::Rank1), 1e-12);
        EXPECT_NEAR(s.relative_residual_frobenius, relative_residual(matrix, Norm::Frobenius, Center::Rank1), 1e-12);
    }
}

TEST(ModelSource, AFoldersNameIsItsLastComponentOnOneLine) {
    // A trailing separator (tab completion's) once gave the empty name, in residual.csv and every figure title.
    EXPECT_EQ(resolve_model_source(kFixtures + "/bert-tiny/").name, "bert-tiny");
    EXPECT_EQ(resolve_model_source(kFixtures + "/bert-tiny/.").name, "bert-tiny");
    EXPECT_EQ(model_display_name("models/bert"), "bert");
    EXPECT_EQ(model_display_name("/runs/a\nb\tc/"), "a b c");
    EXPECT_EQ(model_display_name("."), std::filesystem::current_path().filename().string());
}
