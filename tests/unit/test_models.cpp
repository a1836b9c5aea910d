// BERT, ALBERT and XLNet against the shared conformance fixtures (an independent implementation written from the
// Hugging Face sources): every hidden state, every attention map and the E1 numbers, for all four surgeries.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/measures.hpp"
#include "models/common.hpp"
#include "rankscope/models.hpp"
#include "rankscope/san.hpp"
#include "test_support.hpp"

using namespace rankscope;
using namespace rankscope::test_support;
namespace fs = std::filesystem;

namespace {
double max_relative_difference(const at::Tensor& got, const at::Tensor& expected) {
    return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30)).item<double>();
}
}  // namespace

// Outside the anonymous namespace: the fixture class below derives from a template of it, and in a unity batch this
// file is an included one, where GCC warns about a base type with internal linkage (-Wsubobject-linkage).
struct ModelCase {
    std::string model, variant;
};
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model << " " << c.variant; }

namespace {
std::vector<ModelCase> all_cases() {
    std::vector<ModelCase> cases;
    for (const char* m : {"bert-tiny", "albert-tiny", "xlnet-tiny"})
        for (const char* v : {"transformer", "SAN+skip", "SAN+MLP", "SAN"}) cases.push_back({m, v});
    return cases;
}
}  // namespace

class Conformance : public ::testing::TestWithParam<ModelCase> {};

TEST_P(Conformance, HiddenStatesAttentionsAndE1MatchTheFixture) {
    const auto& [model_name, variant] = GetParam();
    const std::string folder = kFixtures + "/" + model_name;
    ASSERT_TRUE(fs::exists(folder)) << "the repository's fixture is missing: " << folder;
    auto model = load_hf_model(folder);
    SafetensorsFile expected(folder + "/expected-" + variant + ".safetensors");
    ModelBatch batch{tensor_of(expected, "input_ids"), tensor_of(expected, "attention_mask"),
                     tensor_of(expected, "token_type_ids")};
    Surgery surgery;
    surgery.remove_attention_skip = variant == "SAN" || variant == "SAN+MLP";
    surgery.remove_mlp = variant == "SAN" || variant == "SAN+skip";
    Recorder recorder;
    model->forward(batch, surgery, &recorder);
    const int layers = model->config().layers;
    for (int l = 0; l <= layers; ++l) {
        const at::Tensor got = recorder.get(l == 0 ? "hook_embed" : block_hook(l - 1, "hook_resid_post"));
        const double difference = max_relative_difference(got, tensor_of(expected, "hidden_states." + std::to_string(l)));
        EXPECT_LT(difference, 1e-5) << model_name << " " << variant << " hidden_states." << l;
    }
    for (int l = 0; l < layers; ++l) {
        const at::Tensor got = recorder.get(block_hook(l, "attn.hook_pattern"));
        EXPECT_LT(max_relative_difference(got, tensor_of(expected, "attentions." + std::to_string(l))), 1e-5)
            << model_name << " " << variant << " attentions." << l;
    }
    // E1: relative residual (composite, mean over the sample's real tokens), mean and unbiased std over samples.
    const at::Tensor e1_mean = tensor_of(expected, "e1_mean"), e1_std = tensor_of(expected, "e1_std");
    for (int l = 0; l <= layers; ++l) {
        const at::Tensor hidden = recorder.get(l == 0 ? "hook_embed" : block_hook(l - 1, "hook_resid_post"));
        std::vector<double> values;
        for (int b = 0; b < hidden.size(0); ++b) {
            const at::Tensor real = hidden[b].index({batch.attention_mask[b].to(torch::kBool)});
            values.push_back(relative_residual(to_matrix(real), Norm::Composite, Center::Mean));
        }
        const double mean = (values[0] + values[1]) / 2, std = std::abs(values[0] - values[1]) / std::sqrt(2.0);
        EXPECT_NEAR(mean, e1_mean[l].item<double>(), 1e-5 * std::max(1.0, mean)) << model_name << " " << variant << " layer " << l;
        EXPECT_NEAR(std, e1_std[l].item<double>(), 1e-5) << model_name << " " << variant << " layer " << l;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Conformance, ::testing::ValuesIn(all_cases()), [](const auto& info) {
    std::string name = info.param.model + "_" + info.param.variant;
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return name;
});

// The oneDNN linear fast path against the at::linear reference, on a random model of realistic width (d = 256, so
// the GEMMs are blocked as in BERT-base) and on ALBERT's factorised embedding; every hidden state recorded.
TEST(LinearFastPath, MatchesTheReferenceOnEveryLayer) {
    ASSERT_TRUE(at::hasMKLDNN()) << "this libtorch has no oneDNN: the fast path would never run";
    for (const char* name : {"bert-base-cased", "albert-base-v2", "xlnet-base-cased"}) {
        HfConfig config = builtin_hf_config(name);
        config.layers = 3;
        auto model = make_hf_model(config, 5);
        torch::manual_seed(1);
        const ModelBatch batch{torch::randint(5, 1000, {3, 40}, torch::kLong), torch::ones({3, 40}, torch::kLong),
                               torch::zeros({3, 40}, torch::kLong)};
        Recorder fast, reference;
        const bool default_path = linear_fast_path_enabled();
        set_linear_fast_path(true);
        model->forward(batch, Surgery{}, &fast);
        set_linear_fast_path(false);
        model->forward(batch, Surgery{}, &reference);
        set_linear_fast_path(default_path);
        for (int l = 0; l < config.layers; ++l) {
            const std::string hook = block_hook(l, "hook_resid_post");
            EXPECT_LT(max_relative_difference(fast.get(hook), reference.get(hook)), 1e-5) << name << " " << hook;
            EXPECT_FALSE(torch::equal(fast.get(hook), reference.get(hook))) << name << ": the fast path did not run";
        }
    }
}

TEST(HfLoader, RandomInitFollowsFromConfig) {
    const std::string folder = kFixtures + "/bert-tiny";
    ASSERT_TRUE(fs::exists(folder)) << "the repository's fixture is missing: " << folder;
    auto model = make_hf_model(read_hf_config(folder + "/config.json"), 3);
    for (const auto& [name, parameter] : model->parameters()) {
        if (name.find("LayerNorm.weight") != std::string::npos) {
            EXPECT_TRUE(parameter.eq(1).all().item<bool>()) << name;
        } else if (name.size() > 5 && name.substr(name.size() - 5) == ".bias") {
            EXPECT_TRUE(parameter.eq(0).all().item<bool>()) << name;
        } else if (parameter.numel() > 500) {
            EXPECT_NEAR(parameter.std().item<double>(), 0.02, 0.003) << name;
        }
    }
}

namespace {
// While alive (libtorch >= 2.1), at::empty fills new float tensors with NaN: deterministic algorithms in warn-only mode
// with the uninitialized-memory fill; the previous settings come back at its end.
struct UninitializedMemoryAsNaN {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    UninitializedMemoryAsNaN()
        : algorithms(at::globalContext().deterministicAlgorithms()),
          warn_only(at::globalContext().deterministicAlgorithmsWarnOnly()),
          fill(at::globalContext().deterministicFillUninitializedMemory()) {
        at::globalContext().setDeterministicAlgorithms(true, true);
        at::globalContext().setDeterministicFillUninitializedMemory(true);
    }
    ~UninitializedMemoryAsNaN() {
        at::globalContext().setDeterministicFillUninitializedMemory(fill);
        at::globalContext().setDeterministicAlgorithms(algorithms, warn_only);
    }
    bool algorithms, warn_only, fill;
#else
    UninitializedMemoryAsNaN() {}
#endif
};
}  // namespace

// A loaded model is its checkpoint, value for value: nothing is drawn (the caller's random stream goes on untouched),
// every stored tensor is copied in, and the pooler, absent from this copy of the checkpoint, is zero, not unset memory.
TEST(HfLoader, ReadsEveryValueFromTheCheckpointAndDrawsNothing) {
    const std::string source = kFixtures + "/bert-tiny";
    ASSERT_TRUE(fs::exists(source)) << "the repository's fixture is missing: " << source;
    const fs::path dir = temp_dir("no_pooler");
    fs::copy_file(source + "/config.json", dir / "config.json");
    const SafetensorsFile original(source + "/model.safetensors");
    std::vector<NamedArray> tensors;
    for (const auto& name : original.names())
        if (name.find("pooler") == std::string::npos) tensors.push_back({name, original.view(name)});
    ASSERT_LT(tensors.size(), original.names().size()) << "the fixture has no pooler to leave out";
    write_safetensors((dir / "model.safetensors").string(), tensors);

    torch::manual_seed(77);
    const at::Tensor expected_draw = torch::rand({4});
    torch::manual_seed(77);
    std::unique_ptr<EncoderModel> model;
    {
        // Unset memory reads as NaN while this holds (fresh pages read as zeros, which would hide a missing zero_()).
        // libtorch before 2.1 (1.13: make TORCH=system) has no such fill: there the zero check can pass on fresh pages.
        const UninitializedMemoryAsNaN nan_fill;
        model = load_hf_model(dir.string());
    }
    EXPECT_TRUE(torch::equal(torch::rand({4}), expected_draw)) << "loading drew from the global generator";
    int pooler = 0;
    for (const auto& [name, parameter] : model->parameters()) {
        if (name.rfind("pooler", 0) == 0) {
            ++pooler;
            EXPECT_TRUE(parameter.eq(0).all().item<bool>()) << name;
        } else {
            EXPECT_TRUE(torch::equal(parameter, tensor_of(original, name).to(torch::kFloat))) << name;
        }
    }
    EXPECT_EQ(pooler, 2);
    fs::remove_all(dir);
}

// The attention's products sample by sample (the CPU path) against the batched torch::matmul reference, for plain
// multi-head and grouped-query sharing, on projections that are views of a wider tensor (GPT-2's c_attn chunks) and on
// contiguous ones, in float32 and float64: within 4 units in the last place of the largest entry. On the Intel VMs
// they were the same bits; on an AMD EPYC VM (2026-12-06) float64 multi-head scores were 1 unit apart (3.6e-15 of
// 18.7): the GEMM kernels may sum in another order for one sample than for the batch.
TEST(HeadProducts, SampleBySampleEqualsTheBatchedReferenceToRoundOff) {
    torch::NoGradGuard no_grad;
    auto ulps_apart = [](const at::Tensor& a, const at::Tensor& b) {
        const double unit = a.scalar_type() == torch::kFloat ? std::numeric_limits<float>::epsilon()
                                                              : std::numeric_limits<double>::epsilon();
        return (a - b).abs().max().item<double>() / (unit * b.abs().max().item<double>());
    };
    torch::manual_seed(3);
    const std::int64_t B = 3, n = 37, k = 16;
    for (const auto dtype : {torch::kFloat, torch::kDouble})
        for (const auto& [heads, kv_heads] : {std::pair{6, 6}, std::pair{6, 2}}) {
            const at::Tensor fused = torch::randn({B, n, (heads + 2 * kv_heads) * k}, dtype);
            const auto parts = fused.split({heads * k, kv_heads * k, kv_heads * k}, -1);  // non-contiguous views
            for (const bool views : {true, false}) {
                const at::Tensor query = views ? parts[0] : parts[0].contiguous();
                const at::Tensor key = views ? parts[1] : parts[1].contiguous();
                const at::Tensor value = views ? parts[2] : parts[2].contiguous();
                ASSERT_EQ(models::head_products(query, key), models::HeadProducts::BySample);
                const at::Tensor scores = models::head_scores(query, key, heads, kv_heads, models::HeadProducts::BySample);
                const at::Tensor reference = models::head_scores(query, key, heads, kv_heads, models::HeadProducts::Batched);
                ASSERT_EQ(scores.sizes(), (std::vector<std::int64_t>{B, heads, n, n}));
                EXPECT_LE(ulps_apart(scores, reference), 4.0) << heads << "/" << kv_heads << " views " << views << " " << dtype;
                // Query head h reads key head h / (H / G) (not h % G): a score of every head recomputed by hand.
                for (int h = 0; h < heads; ++h) {
                    const int g = h / (heads / kv_heads);
                    const at::Tensor one = torch::dot(query[1][5].narrow(0, h * k, k), key[1][9].narrow(0, g * k, k));
                    EXPECT_NEAR(scores[1][h][5][9].item<double>(), one.item<double>(), 1e-5) << "head " << h;
                }
                const at::Tensor pattern = torch::softmax(scores, -1);
                const at::Tensor context = models::head_context(pattern, value, heads, kv_heads, models::HeadProducts::BySample);
                const at::Tensor context_reference =
                    models::head_context(pattern, value, heads, kv_heads, models::HeadProducts::Batched);
                ASSERT_EQ(context.sizes(), (std::vector<std::int64_t>{B, n, heads * k}));
                EXPECT_LE(ulps_apart(context, context_reference), 4.0)
                    << heads << "/" << kv_heads << " views " << views << " " << dtype;
            }
        }
    // Under autograd the batched form runs (bmm's out= form throws on an input that requires grad).
    at::AutoGradMode grad(true);
    const at::Tensor leaf = torch::randn({1, 4, 8}).requires_grad_();
    EXPECT_EQ(models::head_products(leaf, leaf), models::HeadProducts::Batched);
}

// make_hf_model draws the from_config init in the order of parameters() from the seeded global generator, and
// nothing else: replaying those draws gives every weight bit for bit and leaves the generator where making left it.
TEST(HfLoader, RandomInitDrawsEachWeightInParameterOrderAndNothingElse) {
    for (const char* fixture : {"bert-tiny", "albert-tiny", "xlnet-tiny"}) {
        const std::string folder = kFixtures + "/" + fixture;
        ASSERT_TRUE(fs::exists(folder)) << "the repository's fixture is missing: " << folder;
        const HfConfig config = read_hf_config(folder + "/config.json");
        const auto model = make_hf_model(config, 9);
        const at::Tensor after_making = torch::rand({4});
        torch::manual_seed(9);
        int drawn = 0;
        for (const auto& [name, parameter] : model->parameters()) {
            const bool norm = name.find("LayerNorm") != std::string::npos || name.find("layer_norm") != std::string::npos;
            const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
            if (norm && !bias) {
                EXPECT_TRUE(parameter.eq(1).all().item<bool>()) << fixture << " " << name;
            } else if (bias) {
                EXPECT_TRUE(parameter.eq(0).all().item<bool>()) << fixture << " " << name;
            } else {
                at::Tensor expected = torch::empty(parameter.sizes()).normal_(0.0, config.initializer_range);
                if (name == "embeddings.word_embeddings.weight" && config.pad_token_id >= 0) expected[config.pad_token_id].zero_();
                EXPECT_TRUE(torch::equal(parameter, expected)) << fixture << " " << name;
                ++drawn;
            }
        }
        EXPECT_GT(drawn, 5) << fixture;
        EXPECT_TRUE(torch::equal(torch::rand({4}), after_making)) << fixture << ": making the model drew more than its init";
    }
}

TEST(HfLoader, BadFoldersNameTheFileAndTensor) {
    const std::string source = kFixtures + "/bert-tiny";
    ASSERT_TRUE(fs::exists(source)) << "the repository's fixture is missing: " << source;
    const fs::path dir = temp_dir("bad");
    auto expect_error = [&](const std::string& words, const std::string& file) {
        try {
            load_hf_model(dir.string());
            ADD_FAILURE() << "no error, expected " << words;
        } catch (const Error& e) {
            EXPECT_NE(e.one_line().find(words), std::string::npos) << e.one_line();
            EXPECT_NE(e.one_line().find(file), std::string::npos) << e.one_line();
        }
    };
    expect_error("config.json", "config.json");  // missing config
    fs::copy_file(source + "/config.json", dir / "config.json");
    expect_error("missing model.safetensors (and no model.safetensors.index.json)", "model.safetensors");
    // A folder of PyTorch's pickle only: named, with the conversion.
    std::ofstream(dir / "pytorch_model.bin") << "PK";
    expect_error("missing model.safetensors: the folder holds pytorch_model.bin (PyTorch's pickle format, not read); "
                 "convert it once in Python: AutoModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)",
                 "model.safetensors");
    fs::remove(dir / "pytorch_model.bin");
    // A wrong shape: rewrite the checkpoint with one tensor transposed.
    SafetensorsFile original(source + "/model.safetensors");
    std::vector<NamedArray> tensors;
    std::vector<std::vector<float>> storage;
    for (const auto& name : original.names()) {
        ArrayView view = original.view(name);
        if (name == "encoder.layer.1.intermediate.dense.weight") std::swap(view.shape[0], view.shape[1]);
        tensors.push_back({name, view});
    }
    write_safetensors((dir / "model.safetensors").string(), tensors);
    expect_error("encoder.layer.1.intermediate.dense.weight", "model.safetensors");
    // A missing tensor.
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [](const NamedArray& t) {
                      return t.name == "encoder.layer.1.intermediate.dense.weight" || t.name == "encoder.layer.2.output.dense.bias";
                  }),
                  tensors.end());
    write_safetensors((dir / "model.safetensors").string(), tensors);
    expect_error("2 tensors missing", "model.safetensors");
    // Unknown model_type.
    std::ofstream(dir / "config.json") << R"({"model_type": "gpt9", "vocab_size": 10})";
    expect_error("unknown model_type 'gpt9'", "config.json");
    fs::remove_all(dir);
}

// DistilBERT's sinusoidal_pos_embds table, by hand: angle(p, j) = p / 10000^(2⌊j/2⌋ / dim), sin on even columns and
// cos on odd ones. dim 4: p = 0 gives [0, 1, 0, 1]; p = 1 gives [sin 1, cos 1, sin 0.01, cos 0.01]; p = 3, dim 6
// column 5: cos(3 / 10000^(4/6)).
TEST(DistilBert, SinusoidalPositionTableIsTheClosedForm) {
    const at::Tensor table = models::sinusoidal_position_table(2, 4);
    ASSERT_EQ(table.sizes(), (std::vector<std::int64_t>{2, 4}));
    const std::vector<double> expected = {0, 1, 0, 1, std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)};
    for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(table.view({-1})[i].item<float>(), static_cast<float>(expected[i])) << i;
    EXPECT_FLOAT_EQ(models::sinusoidal_position_table(4, 6)[3][5].item<float>(),
                    static_cast<float>(std::cos(3.0 / std::pow(10000.0, 4.0 / 6.0))));
}

// LayerNorm surgery (beyond the paper): remove = identity; freeze = the SAN laboratory's affine model of LN, written
// independently in san.cpp (NormLayer with LayerNormKind::Affine).
TEST(LayerNormSurgery, RemoveIsIdentityAndFreezeIsTheAffineModel) {
    torch::manual_seed(11);
    const at::Tensor x = torch::randn({3, 7, 16});
    const at::Tensor weight = torch::randn({16}), bias = torch::randn({16});
    Surgery surgery;
    surgery.layer_norm = LayerNormSurgery::Remove;
    EXPECT_TRUE(torch::equal(models::layer_norm(x, weight, bias, 1e-5, surgery), x));
    surgery.layer_norm = LayerNormSurgery::Freeze;
    NormLayer affine(16, LayerNormKind::Affine);
    {
        torch::NoGradGuard no_grad;
        affine->w.copy_(weight);
        affine->b.copy_(bias);
    }
    EXPECT_TRUE(torch::allclose(models::layer_norm(x, weight, bias, 1e-5, surgery), affine->forward(x), 1e-5, 1e-6));
    surgery.layer_norm = LayerNormSurgery::Keep;
    EXPECT_TRUE(torch::allclose(models::layer_norm(x, weight, bias, 1e-5, surgery),
                                torch::layer_norm(x, {16}, weight, bias, 1e-5), 1e-6, 1e-7));
    EXPECT_EQ(parse_layer_norm_surgery("freeze"), LayerNormSurgery::Freeze);
    EXPECT_THROW(parse_layer_norm_surgery("drop"), Error);
}
