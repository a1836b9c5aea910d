// --device: a forward makes every tensor of its own on the device of its inputs and moves nothing. No GPU here, and
// libtorch 1.13's C++ Module::to refuses the `meta` device (set_data: incompatible tensor type), so the forwards are
// watched at the dispatcher instead (at::RecordFunction, the profiler's hook): every operator the forward calls
// directly (not the ones libtorch calls inside an operator) is checked, and the test fails on
//   - a factory (arange, ones, zeros, full, empty, eye, scalar_tensor, randn, ...) called without a device: it would
//     make its tensor on the CPU whatever device the model is on (torch::arange(n) instead of
//     torch::arange(n, x.options()));
//   - a copy to a stated device inside the forward (x.to(at::kCPU), torch::tensor(...), which copies from the CPU);
// and, run on the CPU, on any operator output on another device. parse_device's refusals are checked too.
#include <gtest/gtest.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "rankscope/device.hpp"
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/models.hpp"
#include "rankscope/san.hpp"
#include "rankscope/tasks.hpp"
#include "rankscope/theory.hpp"
#include "test_support.hpp"

using namespace rankscope;
using namespace rankscope::test_support;
namespace fs = std::filesystem;

namespace {

// What a watched forward did wrong, one line per operator call.
struct DeviceWatch {
    std::mutex mutex;
    std::thread::id thread;
    std::vector<std::string> findings;
    int operators = 0;
};
DeviceWatch* watch = nullptr;
thread_local int depth = 0;

std::unique_ptr<at::ObserverContext> on_operator_start(const at::RecordFunction& call) {
    if (depth++ != 0 || !watch || std::this_thread::get_id() != watch->thread) return nullptr;
    const auto name = call.operator_name();
    if (!name) return nullptr;
    const auto handle = c10::Dispatcher::singleton().findSchema(*name);
    if (!handle) return nullptr;
    const auto& arguments = handle->schema().arguments();
    const auto inputs = call.inputs();
    std::lock_guard<std::mutex> lock(watch->mutex);
    ++watch->operators;
    const std::string op = call.name();
    const bool move = op == "aten::to" || op == "aten::_to_copy" || op == "aten::copy_";
    const bool follows_input = op.size() > 5 && op.compare(op.size() - 5, 5, "_like") == 0;
    for (std::size_t i = 0; i < arguments.size() && i < inputs.size(); ++i) {
        if (arguments[i].name() != "device") continue;
        if (inputs[i].isNone() && !follows_input && !move)
            watch->findings.push_back(op + " without a device (it makes its tensor on the CPU)");
        if (!inputs[i].isNone() && move)
            watch->findings.push_back(op + " to " + inputs[i].toDevice().str() + " (a copy inside the forward) of " +
                                      std::to_string(inputs[0].isTensor() ? inputs[0].toTensor().numel() : -1) +
                                      " elements");
    }
    return nullptr;
}
void on_operator_end(const at::RecordFunction&, at::ObserverContext*) { --depth; }

// Runs `work` with the observer on; returns what it found ("" = nothing) and fails when no operator was seen.
template <typename Work>
std::string watched(Work work) {
    DeviceWatch state;
    state.thread = std::this_thread::get_id();
    watch = &state;
    const auto handle = at::addGlobalCallback(at::RecordFunctionCallback(on_operator_start, on_operator_end)
                                                  .needsInputs(true)
                                                  .scopes({at::RecordScope::FUNCTION}));
    try {
        work();
    } catch (...) {
        at::removeCallback(handle);
        watch = nullptr;
        throw;
    }
    at::removeCallback(handle);
    watch = nullptr;
    EXPECT_GT(state.operators, 10) << "the observer saw no operators: the check would pass vacuously";
    std::string report;
    for (const auto& finding : state.findings) report += "\n  " + finding;
    return report;
}

HfConfig config_from_json(const std::string& name, const std::string& json) {
    const fs::path folder = temp_dir("device_" + name);
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
    // RoBERTa's positions are computed from the ids (ne, cumsum) on their device.
    out.emplace_back("roberta", config_from_json("roberta", R"({"model_type": "roberta", "vocab_size": 30,
        "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24,
        "max_position_embeddings": 20, "type_vocab_size": 1})"));
    out.emplace_back("distilbert", config_from_json("distilbert", R"({"model_type": "distilbert", "vocab_size": 30,
        "dim": 16, "n_layers": 2, "n_heads": 4, "hidden_dim": 24, "max_position_embeddings": 20})"));
    out.emplace_back("gpt2", config_from_json("gpt2", R"({"model_type": "gpt2", "vocab_size": 30, "n_embd": 16,
        "n_layer": 2, "n_head": 4, "n_positions": 16})"));
    // GPT-NeoX: partial rotary (the unrotated features concatenated back) and the parallel block.
    out.emplace_back("gpt_neox", config_from_json("gpt_neox", R"({"model_type": "gpt_neox", "vocab_size": 30,
        "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
        "rotary_pct": 0.5})"));
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
// decoders, on the right for BERT, RoBERTa, DistilBERT and ALBERT) and two segments (one where the model has one token type).
ModelBatch cpu_batch(const HfConfig& config) {
    const bool left = config.model_type != "bert" && config.model_type != "roberta" && config.model_type != "distilbert" &&
                      config.model_type != "albert";
    at::Tensor ids = torch::randint(1, std::min(config.vocab_size, 20), {2, 6}, torch::kLong);
    at::Tensor mask = torch::ones({2, 6}, torch::kLong);
    if (left) mask[1].slice(0, 0, 2).zero_();
    else mask[1].slice(0, 4, 6).zero_();
    at::Tensor types = torch::zeros({2, 6}, torch::kLong);
    if (config.type_vocab_size > 1) types.slice(1, 3, 6).fill_(1);
    return {ids, mask, types};
}

void expect_on(const at::Device& device, const at::Tensor& tensor, const std::string& what) {
    ASSERT_TRUE(tensor.defined()) << what;
    EXPECT_EQ(tensor.device(), device) << what << " is on " << tensor.device() << ", not " << device;
}

}  // namespace

// The observer itself: it catches each kind of mistake it is there for, and passes the right spellings.
TEST(Device, TheWatchCatchesTensorsMadeOffTheInputsDevice) {
    const at::Tensor x = torch::randn({4, 5});
    auto ops = [&] {  // enough operators for the watch to count
        at::Tensor y = x;
        for (int i = 0; i < 12; ++i) y = torch::relu(y);
    };
    EXPECT_EQ(watched([&] { ops(); torch::arange(5, x.options().dtype(torch::kLong)); torch::zeros_like(x); x.to(torch::kDouble); }), "");
    EXPECT_NE(watched([&] { ops(); torch::arange(5, torch::kLong); }).find("aten::arange without a device"), std::string::npos);
    EXPECT_NE(watched([&] { ops(); torch::ones({3}); }).find("aten::ones without a device"), std::string::npos);
    EXPECT_NE(watched([&] { ops(); x.to(at::kCPU); }).find("aten::to to cpu"), std::string::npos);
    EXPECT_NE(watched([&] { ops(); torch::tensor({1.0, 2.0}, torch::kFloat); }).find("a copy inside the forward"), std::string::npos);
}

TEST(Device, EveryForwardMakesItsTensorsOnItsInputsDevice) {
    for (const auto& [name, config] : configurations()) {
        SCOPED_TRACE(name);
        const auto model = make_hf_model(config, 0);
        model->to(at::kCPU);
        EXPECT_EQ(model->device(), at::Device(at::kCPU));
        const ModelBatch batch = batch_on(cpu_batch(config), model->device());
        Surgery frozen;
        frozen.layer_norm = LayerNormSurgery::Freeze;
        Surgery bidirectional_san;
        bidirectional_san.remove_attention_skip = bidirectional_san.remove_mlp = true;
        bidirectional_san.bidirectional = is_decoder(config);
        for (const Surgery& surgery : {Surgery{}, frozen, bidirectional_san}) {
            Recorder recorder;
            at::Tensor out;
            EXPECT_EQ(watched([&] { out = model->forward(batch, surgery, &recorder); }), "");
            expect_on(model->device(), out, "the output");
            EXPECT_GE(recorder.all().size(), static_cast<std::size_t>(1 + 4 * config.layers));
            for (const auto& [hook, value] : recorder.all()) expect_on(model->device(), value, hook);
        }
    }
}

TEST(Device, ModelRunsReadBackOnlyPerSampleAndPerHeadValues) {
    // `rankscope model --draws 0` as a library call: the measures run where the tensors are, so what is copied to a
    // stated device (here the CPU, as it would be from a GPU) is the batch itself (B × n ids and masks), per-sample
    // values [B] and per-head summaries [2, H]; never a hidden state [B, n, d] nor an attention map [B, H, n, n].
    // (Before the measures moved to the device, each hidden state was read back whole, 2 × 6 × d elements here.)
    for (const auto& [name, config] : configurations()) {
        SCOPED_TRACE(name);
        const auto model = make_hf_model(config, 0);
        const ModelBatch batch = cpu_batch(config);
        RealModelSettings settings;
        settings.draws = 0;
        std::int64_t copies = 0, head_summaries = 0;
        std::istringstream findings(watched([&] { run_real_model(*model, batch, name, "init", settings); }));
        for (std::string line; std::getline(findings, line);) {
            const std::string marker = " (a copy inside the forward) of ";
            const auto at = line.find(marker);
            if (at == std::string::npos) continue;
            ++copies;
            const std::int64_t elements = std::stoll(line.substr(at + marker.size()));
            head_summaries += elements == 2 * config.heads;
            EXPECT_LE(elements, std::max<std::int64_t>(batch.input_ids.numel(), 2 * config.heads)) << line;
        }
        EXPECT_GT(copies, 0) << "no read-back seen: the check would pass vacuously";
        EXPECT_EQ(head_summaries, config.layers) << "each layer's head summaries [2, H] should come back once";
    }
}

TEST(Device, SanAndTaskForwardsMakeTheirTensorsOnTheirInputsDevice) {
    SanConfig config;
    config.layers = 2;
    config.heads = 2;
    config.d_model = 8;
    config.tokens = 5;
    config.biases = true;
    for (const LayerNormKind norm : {LayerNormKind::None, LayerNormKind::Post, LayerNormKind::Pre, LayerNormKind::Affine}) {
        SCOPED_TRACE(to_string(norm));
        config.block = BlockConfig{};
        config.block.attention_skip = config.block.mlp = config.block.mlp_skip = true;
        config.block.layer_norm = norm;
        San network(config);
        network->to(at::kCPU);
        const at::Tensor x = random_input(config, 3, torch::kFloat);
        const at::Tensor key_bias = torch::zeros({3, 1, 1, config.tokens});
        Recorder recorder;
        EXPECT_EQ(watched([&] { network->forward(x, &recorder, key_bias); }), "");
        for (const auto& [hook, value] : recorder.all()) expect_on(at::kCPU, value, hook);
    }
    std::mt19937_64 rng(1);
    TaskSplits data;
    data.train = data.eval = make_sort_data(6, 8, 10, rng);
    data.classes = data.input_vocab = 10;
    TaskSettings settings = default_task_settings("sort");
    settings.layers = 2;
    TaskModel model(model_config_for(settings, data));
    model->eval();
    torch::NoGradGuard no_grad;
    const TaskBatch batch = data.eval.to(model->device());
    EXPECT_EQ(watched([&] { model->forward(batch); }), "");
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
