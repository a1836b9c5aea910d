// Streamed decoders (load_hf_model_streamed): each layer read from the memory-mapped shards when the forward reaches
// it, run by every surgery, then freed. They must give the numbers of the whole model in memory: every recorded
// activation, for every surgery, and the E1/E2 tables built on them. Errors name the file and tensor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "decoder_checkpoints.hpp"
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"

using namespace rankscope;
using namespace rankscope::test;

namespace {

struct StreamedCase {
    std::string name, config, prefix;
    int shards;
    int tokens;
};

// Tiny checkpoints in the layouts the streamed loader reads: prefixed or bare names, one file or shards, GQA, biases,
// Qwen2's sliding window from layer 1 (tokens > window, so it changes the result), GPT-NeoX's parallel block.
const std::vector<StreamedCase> kCases = {
    {"llama-gqa", kTinyLlama, "model.", 3, 6},
    {"gpt2", kTinyGpt2, "transformer.", 1, 6},
    {"gpt-neox", kTinyGptNeox, "gpt_neox.", 2, 6},
    {"llama-biases", R"({"model_type": "llama", "vocab_size": 30, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 3, "num_attention_heads": 4, "attention_bias": true, "mlp_bias": true})", "", 2, 6},
    {"qwen2-window", R"({"model_type": "qwen2", "vocab_size": 30, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "use_sliding_window": true,
        "sliding_window": 3, "max_window_layers": 1})", "model.", 2, 8},
};

// The surgeries a run uses, with the mask and LayerNorm options beside them.
std::vector<Surgery> surgeries() {
    std::vector<Surgery> out(6);
    out[1].remove_attention_skip = out[1].remove_mlp = true;               // SAN
    out[2].remove_attention_skip = true;                                   // SAN+MLP
    out[3].remove_mlp = true;                                              // SAN+skip
    out[4].layer_norm = LayerNormSurgery::Freeze;
    out[4].bidirectional = true;
    out[5].layer_norm = LayerNormSurgery::Remove;
    out[5].remove_attention_skip = true;
    return out;
}

// A checkpoint of `config` with weights large enough that attention is far from uniform; left padding on sample 1.
struct Written {
    TempFolder dir;
    HfConfig config;
    ModelBatch batch;
    explicit Written(const StreamedCase& c) : dir("streamed-" + c.name), config(config_from(dir.path, c.config)) {
        auto model = make_hf_model(config, 11);
        {
            torch::NoGradGuard no_grad;
            for (auto& [name, parameter] : model->parameters()) parameter.mul_(4.0);
        }
        write_checkpoint(*model, dir.path, c.prefix, c.shards);
        at::Tensor mask = torch::ones({2, c.tokens}, torch::kLong);
        mask[1].slice(0, 0, 2).zero_();
        batch = batch_of(config, mask);
    }
};

}  // namespace

TEST(StreamedDecoder, EveryActivationOfEverySurgeryEqualsTheWholeModel) {
    for (const auto& c : kCases) {
        SCOPED_TRACE(c.name);
        Written written(c);
        auto whole = load_hf_model(written.dir.path.string());
        auto streamed = load_hf_model_streamed(written.dir.path.string());
        EXPECT_FALSE(whole->streamed());
        EXPECT_TRUE(streamed->streamed());
        const auto all = surgeries();
        std::vector<Recorder> recorders(all.size());
        std::vector<Recorder*> pointers;
        for (auto& r : recorders) pointers.push_back(&r);
        const auto outputs = streamed->forward_all(written.batch, all, pointers);
        ASSERT_EQ(outputs.size(), all.size());
        for (std::size_t s = 0; s < all.size(); ++s) {
            SCOPED_TRACE("surgery " + std::to_string(s));
            Recorder expected;
            const at::Tensor output = whole->forward(written.batch, all[s], &expected);
            EXPECT_TRUE(torch::allclose(outputs[s], output, 1e-6, 1e-7));
            ASSERT_EQ(recorders[s].all().size(), expected.all().size());
            for (const auto& [name, value] : expected.all()) {
                ASSERT_TRUE(recorders[s].has(name)) << name;
                const at::Tensor& got = recorders[s].get(name);
                EXPECT_TRUE(torch::allclose(got, value, 1e-6, 1e-7))
                    << name << ": max difference " << (got - value).abs().max().item<double>();
            }
        }
        // forward_all's layer-major order changes nothing for the whole model either.
        std::vector<Recorder> whole_recorders(all.size());
        std::vector<Recorder*> whole_pointers;
        for (auto& r : whole_recorders) whole_pointers.push_back(&r);
        whole->forward_all(written.batch, all, whole_pointers);
        for (std::size_t s = 0; s < all.size(); ++s)
            for (const auto& [name, value] : whole_recorders[s].all())
                EXPECT_TRUE(torch::equal(recorders[s].get(name), value) ||
                            torch::allclose(recorders[s].get(name), value, 1e-6, 1e-7))
                    << name;
        // A surgery that changes nothing must not be what makes the comparison pass: the variants differ.
        EXPECT_FALSE(torch::allclose(outputs[0], outputs[1], 1e-3, 1e-3));
    }
}

TEST(StreamedDecoder, E1AndE2TablesEqualTheWholeModel) {
    Written written(kCases[0]);
    auto whole = load_hf_model(written.dir.path.string());
    auto streamed = load_hf_model_streamed(written.dir.path.string());
    RealModelSettings settings;
    settings.draws = 4;
    for (bool bidirectional : {false, true}) {
        settings.bidirectional = bidirectional;
        const WeightsRun a = run_real_model(*whole, written.batch, "tiny", "pretrained", settings);
        const WeightsRun b = run_real_model(*streamed, written.batch, "tiny", "pretrained", settings);
        ASSERT_EQ(a.residual.size(), b.residual.size());
        ASSERT_EQ(a.residual.size(), 4u * 3u);  // 4 variants × (embeddings + 2 layers)
        for (std::size_t i = 0; i < a.residual.size(); ++i) {
            EXPECT_EQ(a.residual[i].variant, b.residual[i].variant);
            EXPECT_EQ(a.residual[i].layer, b.residual[i].layer);
            EXPECT_NEAR(a.residual[i].mean, b.residual[i].mean, 1e-6 * std::abs(a.residual[i].mean) + 1e-9);
            EXPECT_NEAR(a.residual[i].max, b.residual[i].max, 1e-6 * std::abs(a.residual[i].max) + 1e-9);
        }
        ASSERT_EQ(a.paths.size(), b.paths.size());
        ASSERT_FALSE(a.paths.empty());
        for (std::size_t i = 0; i < a.paths.size(); ++i)
            EXPECT_NEAR(a.paths[i].relative_residual, b.paths[i].relative_residual,
                        1e-6 * std::abs(a.paths[i].relative_residual) + 1e-9);
        ASSERT_EQ(a.skip_ratio.size(), b.skip_ratio.size());
        for (std::size_t l = 0; l < a.skip_ratio.size(); ++l) EXPECT_NEAR(a.skip_ratio[l], b.skip_ratio[l], 1e-6);
        ASSERT_EQ(a.heads.size(), b.heads.size());
        for (std::size_t l = 0; l < a.heads.size(); ++l)
            for (std::size_t h = 0; h < a.heads[l].first_token_share.size(); ++h)
                EXPECT_NEAR(a.heads[l].first_token_share[h], b.heads[l].first_token_share[h], 1e-6);
    }
}

TEST(StreamedDecoder, BadCheckpointsFailInOneLineNamingTheFileAndTensor) {
    // A layer the config has but the checkpoint lacks: refused when the model is opened, before layer 0 runs.
    {
        Written written(kCases[0]);
        std::ofstream(written.dir.path / "config.json") << R"({"model_type": "llama", "vocab_size": 30, "hidden_size": 16,
            "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2})";
        expect_error([&] { load_hf_model_streamed(written.dir.path.string()); },
                     "says num_hidden_layers: 3, but the checkpoint holds 2 layers (model.layers.0 to model.layers.1)",
                     "model.safetensors.index.json");
    }
    // A wrong shape in the last layer: refused when opened, naming the shard and tensor.
    {
        TempFolder dir("streamed-shape");
        const HfConfig config = config_from(dir.path, kTinyGpt2);
        auto model = make_hf_model(config, 3);
        write_checkpoint(*model, dir.path, "", 1);
        std::ofstream(dir.path / "config.json") << R"({"model_type": "gpt2", "vocab_size": 30, "n_embd": 16, "n_layer": 2,
            "n_head": 4, "n_positions": 16, "n_inner": 32})";
        expect_error([&] { load_hf_model_streamed(dir.path.string()); }, "does not match the config's [16, 32]",
                     "model.safetensors:h.0.mlp.c_fc.weight");
    }
    // NaN in layer 1: opened (values are read when the layer is), refused by the forward, naming the tensor.
    {
        TempFolder dir("streamed-nan");
        const HfConfig config = config_from(dir.path, kTinyLlama);
        auto model = make_hf_model(config, 3);
        for (auto& [name, parameter] : model->parameters())
            if (name == "layers.1.mlp.up_proj.weight") parameter.detach()[2][3] = std::nan("");
        write_checkpoint(*model, dir.path, "model.", 2);
        auto streamed = load_hf_model_streamed(dir.path.string());
        const ModelBatch batch = batch_of(config, torch::ones({1, 4}, torch::kLong));
        expect_error([&] { streamed->forward(batch, Surgery{}, nullptr); }, "NaN or Inf",
                     "model.layers.1.mlp.up_proj.weight");
    }
    // Encoders are loaded whole.
    {
        TempFolder dir("streamed-bert");
        config_from(dir.path, R"({"model_type": "bert", "vocab_size": 30, "hidden_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 20})");
        expect_error([&] { load_hf_model_streamed(dir.path.string()); }, "not model_type 'bert'", "config.json");
    }
    // A streamed model never holds all its parameters.
    {
        Written written(kCases[1]);
        auto streamed = load_hf_model_streamed(written.dir.path.string());
        expect_error([&] { streamed->parameters(); }, "holds one layer at a time", "config.json");
    }
}

TEST(StreamedDecoder, StreamingChoiceAndFloat32Size) {
    Written written(kCases[0]);
    const ModelSource source = resolve_model_source(written.dir.path.string());
    // 4 bytes per stored value, whatever the stored dtype: the parameters of the tiny model.
    std::int64_t values = 0;
    for (const auto& [name, parameter] : make_hf_model(written.config, 0)->parameters()) values += parameter.numel();
    EXPECT_EQ(hf_model_float32_bytes(written.dir.path.string()), 4 * values);
    EXPECT_TRUE(make_model(source, "pretrained", 0, Streaming::On)->streamed());
    EXPECT_FALSE(make_model(source, "pretrained", 0, Streaming::Off)->streamed());
    EXPECT_FALSE(make_model(source, "pretrained", 0, Streaming::Auto)->streamed());  // a few kB: fits
    EXPECT_FALSE(make_model(source, "init", 0, Streaming::On)->streamed());          // init weights: made in memory
    // A folder with config.json alone: init weights need no checkpoint, whatever --stream says.
    TempFolder config_only("streamed-config-only");
    config_from(config_only.path, kTinyGpt2);
    const ModelSource no_weights = resolve_model_source(config_only.path.string());
    EXPECT_FALSE(make_model(no_weights, "init", 0, Streaming::Auto)->streamed());
    EXPECT_FALSE(make_model(no_weights, "init", 0, Streaming::On)->streamed());
    expect_error([&] { make_model(resolve_model_source("gpt2"), "init", 0, Streaming::On); },
                 "streaming reads a decoder checkpoint", "gpt2");
    EXPECT_EQ(parse_streaming("auto"), Streaming::Auto);
    EXPECT_THROW(parse_streaming("yes"), Error);
}

// Auto streams above 3/4 of the memory available and says so as a warning (a Python warning; it was a plain stderr
// line that no notebook showed and no test reached, since it needs a model larger than the test machine's memory).
TEST(StreamedDecoder, AutomaticStreamingIsAWarningAboveThreeQuartersOfMemory) {
    EXPECT_EQ(automatic_streaming_warning("m", 6'000'000'000, 8'000'000'000), "");   // exactly 3/4: fits
    EXPECT_EQ(automatic_streaming_warning("m", 9'000'000'000, -1), "");              // memory unknown: whole
    EXPECT_EQ(automatic_streaming_warning("big", 6'000'000'004, 8'000'000'000),
              "big: its weights take 6.0 GB in float32, more than 3/4 of the 8.0 GB available: reading them one layer "
              "at a time (stream off to load them whole)");
}

TEST(WeightKinds, AutoIsEveryKindTheModelHas) {
    // The default "both" failed on every built-in configuration ("has no pretrained weights"); "auto" takes what the
    // model has, and asking a built-in for pretrained weights is still refused, naming the setting.
    const ModelSource builtin = resolve_model_source("gpt2");
    EXPECT_EQ(weight_kinds(builtin, "auto"), (std::vector<std::string>{"init"}));
    EXPECT_EQ(weight_kinds(builtin, "init"), (std::vector<std::string>{"init"}));
    for (const char* refused : {"both", "pretrained"}) {
        try {
            weight_kinds(builtin, refused);
            ADD_FAILURE() << refused;
        } catch (const Error& error) {
            EXPECT_EQ(error.one_line(), "the built-in configuration 'gpt2' has no pretrained weights, only a random init "
                                        "(init); a downloaded Hugging Face folder has both (--weights)");
        }
    }
    TempFolder folder("weight-kinds");
    config_from(folder.path, kTinyGpt2);
    const ModelSource checkpoint = resolve_model_source(folder.path.string());
    EXPECT_EQ(weight_kinds(checkpoint, "auto"), (std::vector<std::string>{"init", "pretrained"}));
    EXPECT_EQ(weight_kinds(checkpoint, "both"), (std::vector<std::string>{"init", "pretrained"}));
    EXPECT_EQ(weight_kinds(checkpoint, "pretrained"), (std::vector<std::string>{"pretrained"}));
    EXPECT_THROW(weight_kinds(checkpoint, "all"), Error);
}

TEST(SafetensorsRelease, ValuesReadAgainAfterTheirPagesAreReleased) {
    TempFolder dir("release");
    std::vector<float> values(5000);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
    const std::vector<float> small = {1.f, 2.f, 3.f};
    write_safetensors((dir.path / "a.safetensors").string(),
                      {{"big", ArrayView{DType::F32, {5000}, reinterpret_cast<const std::byte*>(values.data())}},
                       {"small", ArrayView{DType::F32, {3}, reinterpret_cast<const std::byte*>(small.data())}}});
    const SafetensorsFile file((dir.path / "a.safetensors").string());
    file.release("big");  // its pages (and the neighbour's, sharing one) leave the process; the values stay readable
    const auto* big = reinterpret_cast<const float*>(file.view("big").data);
    for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(big[i], values[i]);
    const auto* three = reinterpret_cast<const float*>(file.view("small").data);
    EXPECT_EQ(three[2], 3.f);
    EXPECT_THROW(file.release("absent"), Error);
}

// A streamed forward draws nothing from the global generator (its layer module is made when the model is opened, and
// refilled; its parameters are allocated, not drawn): the caller's random stream is the same with or without one, the
// first forward included.
TEST(StreamedDecoder, ForwardLeavesTheGlobalGeneratorAlone) {
    Written written(kCases[2]);  // Llama with biases: its layers once drew when made (torch::nn::Linear)
    auto streamed = load_hf_model_streamed(written.dir.path.string());
    torch::manual_seed(77);
    const at::Tensor expected = torch::rand({4});
    torch::manual_seed(77);
    streamed->forward(written.batch, Surgery{}, nullptr);
    EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
    EXPECT_TRUE(streamed->forward_all(written.batch, {}, {}).empty());
}
