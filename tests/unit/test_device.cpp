// --device: every model's forward makes its tensors on the device of its inputs and parameters, and nowhere else.
// No GPU here, so the forwards run on PyTorch's `meta` device (shapes only, no data): a tensor made without the
// inputs' device (a bare torch::arange, torch::ones, a mask) lands on the CPU and is caught — by the op that mixes
// it with meta tensors, or by the check of every recorded activation below. parse_device's refusals are checked too.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "rankscope/device.hpp"
#include "rankscope/error.hpp"
#include "rankscope/models.hpp"
#include "rankscope/san.hpp"
#include "rankscope/theory.hpp"

using namespace rankscope;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = RANKSCOPE_FIXTURES_DIR;

HfConfig config_from_json(const std::string& name, const std::string& json) {
    const fs::path folder = fs::temp_directory_path() / ("rankscope-device-" + name + "-" + std::to_string(::getpid()));
    fs::create_directories(folder);
    std::ofstream(folder / "config.json") << json;
    HfConfig config = read_hf_config((folder / "config.json").string());
    fs::remove_all(folder);
    return config;
}

// The configurations whose forwards are checked: the three encoder fixtures and one decoder of each family, with the
// options that add tensors of their own (GQA, a sliding window shorter than the batch, rope scaling, biases).
std::vector<std::pair<std::string, HfConfig>> configurations() {
    std::vector<std::pair<std::string, HfConfig>> out;
    for (const char* name : {"bert-tiny", "albert-tiny", "xlnet-tiny"})
        out.emplace_back(name, read_hf_config(kFixtures + "/" + name + "/config.json"));
    out.emplace_back("gpt2", config_from_json("gpt2", R"({"model_type": "gpt2", "vocab_size": 30, "n_embd": 16,
        "n_layer": 2, "n_head": 4, "n_positions": 16})"));
    out.emplace_back("llama", config_from_json("llama", R"({"model_type": "llama", "vocab_size": 30, "hidden_size": 16,
        "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "attention_bias": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8}})"));
    out.emplace_back("mistral", config_from_json("mistral", R"({"model_type": "mistral", "vocab_size": 30,
        "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 1, "sliding_window": 3})"));
    out.emplace_back("qwen2", config_from_json("qwen2", R"({"model_type": "qwen2", "vocab_size": 30, "hidden_size": 16,
        "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2})"));
    return out;
}

// A padded batch of 2 × 6 on the CPU: the second sample has two padding tokens (on the left for XLNet and the
// decoders, on the right for BERT and ALBERT) and two segments.
ModelBatch cpu_batch(const HfConfig& config) {
    const bool left = config.model_type != "bert" && config.model_type != "albert";
    at::Tensor ids = torch::randint(1, std::min(config.vocab_size, 20), {2, 6}, torch::kLong);
    at::Tensor mask = torch::ones({2, 6}, torch::kLong);
    if (left) mask[1].slice(0, 0, 2).zero_();
    else mask[1].slice(0, 4, 6).zero_();
    at::Tensor types = torch::zeros({2, 6}, torch::kLong);
    types.slice(1, 3, 6).fill_(1);
    return {ids, mask, types};
}

void expect_on(const at::Device& device, const at::Tensor& tensor, const std::string& what) {
    ASSERT_TRUE(tensor.defined()) << what;
    EXPECT_EQ(tensor.device(), device) << what << " is on " << tensor.device() << ", not " << device;
}

}  // namespace

TEST(Device, EveryForwardStaysOnTheRequestedDevice) {
    const at::Device meta(at::kMeta);
    for (const auto& [name, config] : configurations()) {
        SCOPED_TRACE(name);
        const auto model = make_hf_model(config, 0);
        model->to(meta);
        EXPECT_EQ(model->device(), meta);
        for (const auto& [parameter, tensor] : model->parameters()) expect_on(meta, tensor, parameter);
        const ModelBatch batch = batch_on(cpu_batch(config), meta);
        Surgery frozen;
        frozen.layer_norm = LayerNormSurgery::Freeze;
        Surgery bidirectional_san;
        bidirectional_san.remove_attention_skip = bidirectional_san.remove_mlp = true;
        bidirectional_san.bidirectional = is_decoder(config);
        for (const Surgery& surgery : {Surgery{}, frozen, bidirectional_san}) {
            Recorder recorder;
            at::Tensor out;
            ASSERT_NO_THROW(out = model->forward(batch, surgery, &recorder)) << "a tensor of the forward left the device";
            expect_on(meta, out, "the output");
            EXPECT_GE(recorder.all().size(), static_cast<std::size_t>(1 + 4 * config.layers));
            for (const auto& [hook, value] : recorder.all()) expect_on(meta, value, hook);
        }
    }
}

TEST(Device, SanForwardStaysOnTheRequestedDevice) {
    const at::Device meta(at::kMeta);
    SanConfig config;
    config.layers = 2;
    config.heads = 2;
    config.d_model = 8;
    config.tokens = 5;
    config.biases = true;
    for (const LayerNormKind norm : {LayerNormKind::None, LayerNormKind::Post, LayerNormKind::Pre, LayerNormKind::Affine}) {
        config.block = BlockConfig{};
        config.block.attention_skip = config.block.mlp = config.block.mlp_skip = true;
        config.block.layer_norm = norm;
        San network(config);
        network->to(meta);
        Recorder recorder;
        const at::Tensor out = network->forward(random_input(config, 3, torch::kFloat).to(meta), &recorder);
        expect_on(meta, out, "the SAN output (" + to_string(norm) + ")");
        for (const auto& [hook, value] : recorder.all()) expect_on(meta, value, hook + " (" + to_string(norm) + ")");
    }
}

TEST(Device, TheoryRunOnAnExplicitCpuDeviceEqualsTheDefault) {
    SanConfig base;
    base.layers = 3;
    base.d_model = 8;
    base.tokens = 6;
    const auto variants = theory_variants(base, 2);
    const auto plain = run_theory(variants[0], 7);
    const auto explicit_cpu = run_theory(variants[0], 7, nullptr, at::Device(at::kCPU));
    ASSERT_EQ(plain.size(), explicit_cpu.size());
    for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].relative_residual, explicit_cpu[i].relative_residual);
}

TEST(Device, ParseDevice) {
    EXPECT_EQ(parse_device("cpu"), at::Device(at::kCPU));
    for (const char* bad : {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1:2", "meta", "cpu:0", "cuda:0000"}) {
        try {
            parse_device(bad);
            ADD_FAILURE() << "'" << bad << "' was accepted";
        } catch (const Error& error) {
            EXPECT_NE(error.one_line().find("unknown device"), std::string::npos) << error.one_line();
            EXPECT_NE(error.one_line().find("--device"), std::string::npos) << error.one_line();
        }
    }
    // CUDA: refused in one line by a CPU-only libtorch (Debian's); accepted, with its index checked, by a CUDA one.
    if (!torch::cuda::is_available()) {
        for (const char* cuda : {"cuda", "cuda:0", "cuda:7"}) {
            try {
                parse_device(cuda);
                ADD_FAILURE() << cuda << " was accepted without CUDA";
            } catch (const Error& error) {
                EXPECT_NE(error.one_line().find("has no CUDA"), std::string::npos) << error.one_line();
            }
        }
    } else {
        EXPECT_EQ(parse_device("cuda"), at::Device(at::kCUDA, 0));
        const auto count = static_cast<int>(torch::cuda::device_count());
        EXPECT_THROW(parse_device("cuda:" + std::to_string(count)), Error);
    }
}
