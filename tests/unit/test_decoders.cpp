// GPT-2, GPT-NeoX and the Llama family: config.json read as Hugging Face reads it, the checkpoint loader's errors (sharded and
// not), the surgeries and masks on the decoders' forward, the built-in configurations and the attention-sink measures.
// The forward itself is checked against a python3-torch reference in tests/reference/test_decoders_reference.py and
// against transformers in tests/transformers/test_transformers_models.py.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "decoder_checkpoints.hpp"
#include "test_support.hpp"
#include "models/decoder.hpp"
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"

using namespace rankscope;
using namespace rankscope::test;

TEST(DecoderConfig, HuggingFaceNamesAndDefaults) {
    TempFolder dir("decoder-config");
    const HfConfig gpt2 = config_from(dir.path, R"({"model_type": "gpt2"})");  // every field from GPT2Config's defaults
    EXPECT_EQ(gpt2.vocab_size, 50257);
    EXPECT_EQ(gpt2.hidden_size, 768);
    EXPECT_EQ(gpt2.intermediate_size, 3072);  // n_inner null = 4 n_embd
    EXPECT_EQ(gpt2.max_position_embeddings, 1024);
    EXPECT_DOUBLE_EQ(gpt2.layer_norm_eps, 1e-5);
    EXPECT_EQ(gpt2.activation, "gelu_new");
    EXPECT_TRUE(gpt2.tie_word_embeddings);
    const HfConfig llama = config_from(dir.path, R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100})");
    EXPECT_EQ(llama.kv_heads, 4);  // null = num_attention_heads
    EXPECT_EQ(llama.head_size, 16);
    EXPECT_DOUBLE_EQ(llama.layer_norm_eps, 1e-6);
    EXPECT_DOUBLE_EQ(llama.rope_theta, 10000.0);
    EXPECT_FALSE(llama.qkv_bias || llama.output_bias || llama.mlp_bias || llama.tie_word_embeddings);
    EXPECT_EQ(llama.sliding_window, 0);
    const HfConfig head_dim = config_from(dir.path, R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "head_dim": 32, "attention_bias": true})");
    EXPECT_EQ(head_dim.head_size, 32);
    EXPECT_TRUE(head_dim.qkv_bias && head_dim.output_bias && !head_dim.mlp_bias);
    const HfConfig mistral = config_from(dir.path, R"({"model_type": "mistral", "hidden_size": 64, "num_attention_heads": 16,
        "num_hidden_layers": 2, "intermediate_size": 100})");
    EXPECT_EQ(mistral.kv_heads, 8);
    EXPECT_EQ(mistral.sliding_window, 4096);
    const HfConfig qwen2 = config_from(dir.path, R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "sliding_window": 128})");
    EXPECT_TRUE(qwen2.qkv_bias && !qwen2.output_bias && !qwen2.mlp_bias);
    EXPECT_EQ(qwen2.sliding_window, 0);  // use_sliding_window false
    const HfConfig qwen2_window = config_from(dir.path, R"({"model_type": "qwen2", "hidden_size": 64,
        "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 100, "use_sliding_window": true,
        "sliding_window": 128, "max_window_layers": 1})");
    EXPECT_EQ(qwen2_window.sliding_window, 128);
    EXPECT_EQ(qwen2_window.layer_sliding, (std::vector<bool>{false, true}));  // max_window_layers 1
    const std::string path = (dir.path / "config.json").string();
    expect_error([&] { config_from(dir.path, R"({"model_type": "llama", "num_attention_heads": 6, "num_key_value_heads": 4})"); },
                 "not a multiple of num_key_value_heads", path);
    expect_error([&] { config_from(dir.path, R"({"model_type": "llama", "rope_scaling": {"type": "llama3"}})"); },
                 "rope_scaling has no 'factor'", path);
    expect_error([&] { config_from(dir.path, R"({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4}})"); },
                 "rope_scaling type 'yarn' is not supported", path);
    const HfConfig llama3 = config_from(dir.path, R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3",
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
    EXPECT_EQ(llama3.rope_type, "llama3");
    EXPECT_DOUBLE_EQ(llama3.rope_factor, 8.0);
    EXPECT_EQ(llama3.rope_original_max_positions, 8192);
    expect_error([&] { config_from(dir.path, R"({"model_type": "gpt2", "n_embd": 10, "n_head": 4})"); },
                 "not divisible by n_head", path);
    // GPTNeoXConfig: rotary on int(head size × rotary_pct) features (0.25 by default), rotary_emb_base (its rope_theta
    // and partial_rotary_factor are overwritten from these two), parallel block, attention biases.
    const HfConfig neox = config_from(dir.path, R"({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "rope_theta": 7.0, "partial_rotary_factor": 1.0})");
    EXPECT_EQ(neox.head_size, 16);
    EXPECT_EQ(neox.rotary_dims, 4);
    EXPECT_DOUBLE_EQ(neox.rope_theta, 10000.0);
    EXPECT_TRUE(neox.parallel_residual && neox.qkv_bias && neox.output_bias && neox.mlp_bias);
    EXPECT_FALSE(neox.tie_word_embeddings);
    EXPECT_EQ(neox.vocab_size, 50432);
    EXPECT_DOUBLE_EQ(neox.layer_norm_eps, 1e-5);
    EXPECT_EQ(neox.activation, "gelu");
    EXPECT_EQ(neox.pad_token_id, -1);
    const HfConfig sequential = config_from(dir.path, R"({"model_type": "gpt_neox", "hidden_size": 64,
        "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 100, "rotary_pct": 0.3,
        "rotary_emb_base": 500, "use_parallel_residual": false, "attention_bias": false, "hidden_act": "gelu_fast"})");
    EXPECT_EQ(sequential.rotary_dims, 4);  // int(16 × 0.3) = int(4.8)
    EXPECT_DOUBLE_EQ(sequential.rope_theta, 500.0);
    EXPECT_FALSE(sequential.parallel_residual || sequential.qkv_bias || sequential.output_bias);
    EXPECT_TRUE(sequential.mlp_bias);
    expect_error([&] { config_from(dir.path, R"({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "rotary_pct": 0.2})"); },
                 "rotates 3 features per head; an odd count is not supported", path);
    expect_error([&] { config_from(dir.path, R"({"model_type": "gpt_neox", "hidden_size": 60, "num_attention_heads": 8})"); },
                 "hidden_size 60 is not divisible by num_attention_heads 8", path);
    expect_error([&] { config_from(dir.path, R"({"model_type": "gpt_neox"})"); }, "parameters", path);  // 20e9
    // head_dim is the head size the rotary fraction is taken of; null flags are false, as transformers reads them;
    // null where transformers cannot build the model is refused.
    const HfConfig nulls = config_from(dir.path, R"({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "head_dim": 8, "rotary_pct": 0.5,
        "use_parallel_residual": null, "attention_bias": null, "hidden_act": "gelu_pytorch_tanh"})");
    EXPECT_EQ(nulls.head_size, 16);
    EXPECT_EQ(nulls.rotary_dims, 4);
    EXPECT_FALSE(nulls.parallel_residual || nulls.qkv_bias || nulls.output_bias);
    expect_error([&] { config_from(dir.path, R"({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 100, "head_dim": 32, "rotary_pct": 1.0})"); },
                 "head_dim 32 × rotary_pct 1 rotates 32 features of heads 16 wide", path);
    for (const char* field : {"rotary_pct", "rotary_emb_base", "layer_norm_eps", "hidden_act"})
        expect_error([&] { config_from(dir.path, fmt::format(R"({{"model_type": "gpt_neox", "hidden_size": 64,
            "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 100, "{}": null}})", field)); },
                     fmt::format("config field '{}' is null", field), path);
    expect_error([&] { config_from(dir.path, R"({"model_type": "llama"})"); }, "parameters", path);  // 6.7e9 > the limit
}

// A checkpoint deeper than its config: the loaders read the config's layers and say, in one warning line, which
// tensors they left (they were ignored without a word). Task heads and saved buffers are not named.
TEST(DecoderLoader, TensorsTheConfigDoesNotDescribeAreNamed) {
    TempFolder dir("decoder-unread");
    // Whole loader: one layer too many (9 tensors); streamed: two (18). The same unread names are said once per
    // process (`dynamics` reads many checkpoints alike), so the cases differ.
    for (const auto& [streamed, layers, unread] : {std::tuple{false, 3, 9}, std::tuple{true, 4, 18}}) {
        std::string deeper = kTinyLlama;
        deeper.replace(deeper.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": " + std::to_string(layers));
        auto model = make_hf_model(config_from(dir.path, deeper), 7);
        write_checkpoint(*model, dir.path, "model.", 1);
        config_from(dir.path, kTinyLlama);  // the config now says 2 layers
        for (int again = 0; again < 2; ++again) {
            testing::internal::CaptureStderr();
            streamed ? load_hf_model_streamed(dir.path.string()) : load_hf_model(dir.path.string());
            const std::string warning = testing::internal::GetCapturedStderr();
            if (again == 1) {  // said already
                EXPECT_EQ(warning, "");
                continue;
            }
            EXPECT_NE(warning.find(fmt::format("rankscope: warning: {} tensors in {} are not read by the 2-layer llama model "
                                               "that {} describes: model.layers.2.",
                                               unread, (dir.path / "model.safetensors").string(),
                                               (dir.path / "config.json").string())),
                      std::string::npos) << warning;
            EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1) << warning;
        }
    }
    write_checkpoint(*make_hf_model(config_from(dir.path, kTinyLlama), 7), dir.path, "model.", 1);
    testing::internal::CaptureStderr();
    load_hf_model(dir.path.string());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    // Bare names beside task heads of other families (GPT-2's multiple-choice head, XLNet's SQuAD and logits heads)
    // and a saved buffer: nothing to say.
    auto bare = make_hf_model(config_from(dir.path, kTinyLlama), 7);
    std::vector<NamedArray> tensors;
    std::vector<at::Tensor> keep;
    auto add = [&](const std::string& name, const at::Tensor& value) {
        keep.push_back(value.contiguous());
        tensors.push_back({name, ArrayView{DType::F32, std::vector<std::int64_t>(value.sizes().begin(), value.sizes().end()),
                                           static_cast<const std::byte*>(keep.back().data_ptr())}});
    };
    for (const auto& [name, parameter] : bare->parameters()) add(name, parameter);
    for (const char* head : {"multiple_choice_head.summary.weight", "logits_proj.weight", "start_logits.dense.weight",
                             "end_logits.dense_0.weight", "answer_class.dense_1.weight", "embed_tokens.position_ids"})
        add(head, torch::ones({2, 2}));
    write_safetensors((dir.path / "model.safetensors").string(), tensors);
    testing::internal::CaptureStderr();
    load_hf_model(dir.path.string());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// The other way round: a config deeper than its checkpoint named two tensors of the config's last layer as missing
// ("2 tensors missing: model.layers.4.mlp.gate_proj.weight, ..."); now both counts, whole and streamed, and for an
// encoder (BERT's key and list names).
TEST(DecoderLoader, AConfigDeeperThanItsCheckpointNamesBothLayerCounts) {
    TempFolder dir("decoder-shallow");
    write_checkpoint(*make_hf_model(config_from(dir.path, kTinyLlama), 7), dir.path, "model.", 1);
    std::string deeper = kTinyLlama;
    deeper.replace(deeper.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 5");
    config_from(dir.path, deeper);
    const std::string words = fmt::format("{} says num_hidden_layers: 5, but the checkpoint holds 2 layers (model.layers.0 "
                                          "to model.layers.1): the config is for a deeper model ({})",
                                          (dir.path / "config.json").string(), (dir.path / "model.safetensors").string());
    expect_error([&] { load_hf_model(dir.path.string()); }, words, "");
    expect_error([&] { load_hf_model_streamed(dir.path.string()); }, words, "");

    TempFolder bert("bert-shallow");
    std::filesystem::copy(test_support::kFixtures + "/bert-tiny", bert.path, std::filesystem::copy_options::recursive);
    std::ifstream in(bert.path / "config.json");
    std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    config.replace(config.find("\"num_hidden_layers\": 3"), 22, "\"num_hidden_layers\": 4");
    std::ofstream(bert.path / "config.json") << config;
    expect_error([&] { load_hf_model(bert.path.string()); },
                 "says num_hidden_layers: 4, but the checkpoint holds 3 layers (encoder.layer.0 to encoder.layer.2)",
                 (bert.path / "config.json").string());

    // Each family's own key and layer list (the table of architectures in hf_model.cpp): GPT-2's n_layer under h.,
    // GPT-NeoX's num_hidden_layers under layers., whole and streamed.
    for (const auto& [json, key, list] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {kTinyGpt2, "n_layer", "h."}, {kTinyGptNeox, "num_hidden_layers", "layers."}}) {
        TempFolder decoder("decoder-shallow-" + key);
        write_checkpoint(*make_hf_model(config_from(decoder.path, json), 7), decoder.path, "", 1);
        std::string deeper = json;
        const std::string two = "\"" + key + "\": 2";
        deeper.replace(deeper.find(two), two.size(), "\"" + key + "\": 3");
        config_from(decoder.path, deeper);
        const std::string expected = fmt::format("says {}: 3, but the checkpoint holds 2 layers ({}0 to {}1)", key, list, list);
        expect_error([&] { load_hf_model(decoder.path.string()); }, expected, "");
        expect_error([&] { load_hf_model_streamed(decoder.path.string()); }, expected, "");
    }
}

TEST(DecoderLoader, ShardedPrefixedCheckpointRoundTripsAndErrorsNameTheFile) {
    TempFolder dir("decoder-loader");
    const HfConfig config = config_from(dir.path, kTinyLlama);
    auto model = make_hf_model(config, 7);
    write_checkpoint(*model, dir.path, "model.", 3);
    auto loaded = load_hf_model(dir.path.string());
    const auto original = model->parameters();
    const auto read = loaded->parameters();
    ASSERT_EQ(original.size(), read.size());
    for (std::size_t i = 0; i < read.size(); ++i) EXPECT_TRUE(torch::equal(original[i].second, read[i].second)) << read[i].first;

    const fs::path index = dir.path / "model.safetensors.index.json";
    std::string text;
    {
        std::ifstream in(index);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    auto load = [&] { load_hf_model(dir.path.string()); };
    // A missing shard.
    fs::rename(dir.path / "model-00002.safetensors", dir.path / "moved.safetensors");
    expect_error(load, "missing shard model-00002.safetensors", "model-00002.safetensors");
    fs::rename(dir.path / "moved.safetensors", dir.path / "model-00002.safetensors");
    // A tensor the index maps to a shard that does not hold it.
    std::string wrong = text;
    const std::string entry = "\"model.norm.weight\": \"model-0000";
    const auto at = wrong.find(entry);
    ASSERT_NE(at, std::string::npos);
    const char shard = wrong[at + entry.size()];
    wrong[at + entry.size()] = shard == '1' ? '2' : '1';
    std::ofstream(index) << wrong;
    expect_error(load, "'model.norm.weight' is mapped to this shard by the index", ".safetensors");
    // A tensor missing from the weight_map.
    std::string missing = text;  // model.norm.weight is not the first entry: remove it with the ", " before it
    const auto begin = missing.find(entry) - 2;
    missing.erase(begin, missing.find(".safetensors\"", begin) + 13 - begin);
    std::ofstream(index) << missing;
    expect_error(load, "1 tensor missing: model.norm.weight", "model.safetensors.index.json");
    // A shard path outside the folder.
    std::string outside = text;
    outside.replace(outside.find("model-00001"), 11, "../model-00001");
    std::ofstream(index) << outside;
    expect_error(load, "not a file name in the checkpoint folder", "model.safetensors.index.json");
    // A shard name with a NUL after a real shard's name (the file system would read only the part before it).
    std::string cut = text;
    cut.replace(cut.find("model-00001.safetensors"), 23, "model-00001.safetensors\\u0000.evil");
    std::ofstream(index) << cut;
    expect_error(load, "names 'model-00001.safetensors\\x00.evil', not a file name in the checkpoint folder",
                 "model.safetensors.index.json");
    std::ofstream(index) << text;
    EXPECT_NO_THROW(load());
    // model.safetensors beside the index: transformers' from_pretrained reads the single file, and so must this (the
    // shards were read, other weights under the same folder name).
    auto other = make_hf_model(config, 8);
    write_checkpoint(*other, dir.path, "model.", 1);
    const auto single_read = load_hf_model(dir.path.string())->parameters();
    const auto expected = other->parameters();
    ASSERT_EQ(single_read.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i)
        EXPECT_TRUE(torch::equal(expected[i].second, single_read[i].second)) << expected[i].first;
    fs::remove(dir.path / "model.safetensors");
    // A wrong shape (single file): a GPT-2 checkpoint whose Conv1D weight is stored [out, in].
    TempFolder single("decoder-shape");
    const HfConfig gpt2 = config_from(single.path, kTinyGpt2);
    auto gpt2_model = make_hf_model(gpt2, 1);
    for (auto& [name, parameter] : gpt2_model->parameters())
        if (name == "h.1.mlp.c_fc.weight") parameter.set_data(parameter.t().contiguous());
    write_checkpoint(*gpt2_model, single.path, "", 1);
    expect_error([&] { load_hf_model(single.path.string()); }, "shape [64, 16] does not match the config's [16, 64]",
                 "model.safetensors:h.1.mlp.c_fc.weight");
    // An unknown dtype.
    {
        const std::string header = R"({"wte.weight": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})";
        std::string bytes(8, '\0');
        for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
        std::ofstream(single.path / "model.safetensors", std::ios::binary) << bytes << header << 'x';
    }
    expect_error([&] { load_hf_model(single.path.string()); }, "unsupported safetensors dtype 'F8_E4M3'",
                 "model.safetensors:wte.weight");
}

TEST(DecoderForward, CausalMaskSurgeriesAndBidirectional) {
    TempFolder dir("decoder-forward");
    for (const char* json : {kTinyGpt2, kTinyLlama, kTinyGptNeox}) {
        const HfConfig config = config_from(dir.path, json);
        auto model = make_hf_model(config, 3);
        for (auto& [name, parameter] : model->parameters()) {  // larger weights: attention far from uniform
            torch::NoGradGuard no_grad;
            if (parameter.dim() == 2) parameter.normal_(0.0, 0.5);
        }
        const at::Tensor mask = torch::tensor({1, 1, 1, 1, 1, 1, 0, 0}, torch::kLong).unsqueeze(0);
        const ModelBatch batch = batch_of(config, mask);
        auto run = [&](const Surgery& surgery) {
            Recorder recorder;
            model->forward(batch, surgery, &recorder);
            return recorder;
        };
        const Recorder causal = run({});
        const at::Tensor pattern = causal.get("blocks.1.attn.hook_pattern");  // [1, H, 8, 8]
        EXPECT_EQ(pattern.size(1), 4) << config.model_type;                    // query heads, also with GQA
        EXPECT_EQ(torch::triu(pattern[0], 1).abs().max().item<double>(), 0.0) << config.model_type;
        EXPECT_EQ(pattern.select(3, 7).abs().max().item<double>(), 0.0) << "padding keys get no attention";
        Surgery bidirectional;
        bidirectional.bidirectional = true;
        const Recorder full = run(bidirectional);
        const at::Tensor full_pattern = full.get("blocks.1.attn.hook_pattern");
        const at::Tensor above_diagonal = torch::ones({6, 6}, torch::kBool).triu(1);  // future real keys
        EXPECT_GT(full_pattern[0].slice(1, 0, 6).slice(2, 0, 6).masked_select(above_diagonal).min().item<double>(), 0.0);
        EXPECT_EQ(full_pattern.select(3, 7).abs().max().item<double>(), 0.0);
        // The last token sees everything either way: its row in layer 0 is the same.
        EXPECT_TRUE(torch::allclose(full.get("blocks.0.attn.hook_pattern")[0].select(1, 5),
                                    causal.get("blocks.0.attn.hook_pattern")[0].select(1, 5), 1e-5, 1e-7));
        // SAN: each layer's output is its attention output.
        Surgery san;
        san.remove_attention_skip = san.remove_mlp = true;
        const Recorder pure = run(san);
        EXPECT_TRUE(torch::equal(pure.get("blocks.1.hook_resid_post"), pure.get("blocks.1.hook_attn_out")));
        // SAN+skip: x + attn(norm(x)).
        Surgery skip_only;
        skip_only.remove_mlp = true;
        const Recorder skip = run(skip_only);
        EXPECT_TRUE(torch::allclose(skip.get("blocks.1.hook_resid_post"),
                                    skip.get("blocks.1.hook_resid_pre") + skip.get("blocks.1.hook_attn_out")));
        // The final norm is recorded apart from the last layer's output.
        EXPECT_FALSE(torch::allclose(causal.get("ln_final.hook_normalized"), causal.get("blocks.1.hook_resid_post")));
    }
}

// GPT-NeoX's parallel block y = x + a + m, m = mlp(LN_2(x)): each surgery drops its terms, and the MLP term is
// computed here from the parameters. The sequential block (use_parallel_residual false) feeds the MLP x + a instead.
TEST(DecoderForward, GptNeoxParallelAndSequentialBlocksUnderEachSurgery) {
    TempFolder dir("gpt-neox-forward");
    for (const bool parallel : {true, false}) {
        std::string json = kTinyGptNeox;
        json.insert(json.size() - 1, parallel ? "" : R"(, "use_parallel_residual": false)");
        const HfConfig config = config_from(dir.path, json);
        auto model = make_hf_model(config, 4);
        std::map<std::string, at::Tensor> weights;
        for (auto& [name, parameter] : model->parameters()) {
            torch::NoGradGuard no_grad;
            if (parameter.dim() == 2) parameter.normal_(0.0, 0.5);
            else parameter.normal_(name.find("norm.weight") != std::string::npos ? 1.0 : 0.0, 0.1);
            weights[name] = parameter;
        }
        const ModelBatch batch = batch_of(config, torch::ones({2, 6}, torch::kLong));
        auto run = [&](bool remove_skip, bool remove_mlp) {
            Surgery surgery;
            surgery.remove_attention_skip = remove_skip;
            surgery.remove_mlp = remove_mlp;
            Recorder recorder;
            model->forward(batch, surgery, &recorder);
            return recorder;
        };
        auto mlp_of = [&](const at::Tensor& input) {  // layer 1's feed-forward, from its parameters
            const std::string p = "layers.1.";
            const at::Tensor u = torch::layer_norm(input, {16}, weights[p + "post_attention_layernorm.weight"],
                                                   weights[p + "post_attention_layernorm.bias"], 1e-5);
            const at::Tensor inner = torch::gelu(torch::linear(u, weights[p + "mlp.dense_h_to_4h.weight"],
                                                               weights[p + "mlp.dense_h_to_4h.bias"]));
            return torch::linear(inner, weights[p + "mlp.dense_4h_to_h.weight"], weights[p + "mlp.dense_4h_to_h.bias"]);
        };
        for (const bool remove_skip : {false, true})
            for (const bool remove_mlp : {false, true}) {
                const Recorder r = run(remove_skip, remove_mlp);
                const at::Tensor x = r.get("blocks.1.hook_resid_pre"), a = r.get("blocks.1.hook_attn_out");
                const at::Tensor h = remove_skip ? a : x + a;
                const at::Tensor expected = remove_mlp ? h : h + mlp_of(parallel ? x : h);
                EXPECT_TRUE(torch::allclose(r.get("blocks.1.hook_resid_post"), expected, 1e-5, 1e-5))
                    << "parallel " << parallel << ", remove_attention_skip " << remove_skip << ", remove_mlp " << remove_mlp;
            }
    }
}

TEST(DecoderForward, NormsUnderSurgeryAndSlidingWindow) {
    torch::manual_seed(2);
    const at::Tensor x = torch::randn({2, 5, 8});
    const at::Tensor weight = torch::randn({8});
    const at::Tensor mask = torch::tensor({1, 1, 1, 1, 1, 0, 1, 1, 1, 1}, torch::kLong).view({2, 5});
    Surgery surgery;
    const at::Tensor kept = models::rms_norm(x, weight, 1e-6, surgery, mask);
    EXPECT_TRUE(torch::allclose(kept, x / torch::sqrt(x.pow(2).mean(-1, true) + 1e-6) * weight, 1e-5, 1e-6));
    surgery.layer_norm = LayerNormSurgery::Remove;
    EXPECT_TRUE(torch::equal(models::rms_norm(x, weight, 1e-6, surgery, mask), x));
    surgery.layer_norm = LayerNormSurgery::Freeze;  // sample 1: its real tokens are 1..4
    const at::Tensor frozen = models::rms_norm(x, weight, 1e-6, surgery, mask);
    const double rms = std::sqrt(x[1].slice(0, 1).pow(2).mean().item<double>() + 1e-6);
    EXPECT_TRUE(torch::allclose(frozen[1], x[1] / rms * weight, 1e-5, 1e-6));
    // Window 2: query i sees i − 1 and i.
    const at::Tensor allowed = models::attention_allowed(torch::ones({1, 5}, torch::kLong), false, 2)[0][0];
    EXPECT_TRUE(torch::equal(allowed.to(torch::kLong), torch::tensor({1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0,
                                                                      0, 0, 0, 1, 1}, torch::kLong).view({5, 5})));
    // Positions count real tokens: left padding does not shift them.
    EXPECT_TRUE(torch::equal(models::real_token_positions(torch::tensor({0, 0, 1, 1, 1}, torch::kLong).unsqueeze(0)),
                             torch::tensor({0, 0, 0, 1, 2}, torch::kLong).unsqueeze(0)));
}

TEST(DecoderBuiltIns, PublishedSizes) {
    auto count = [](const std::string& name) {
        std::int64_t total = 0;
        for (const auto& [_, parameter] : make_hf_model(builtin_hf_config(name), 0)->parameters()) total += parameter.numel();
        return total;
    };
    EXPECT_EQ(count("gpt2"), 124439808);  // the published GPT-2 small
    // The published pythia-160m: 162,322,944 parameters, of which embed_out (the untied LM head, not made here) holds
    // 50304 × 768.
    EXPECT_EQ(count("pythia-160m"), 162322944LL - 50304LL * 768);
    // llama-12l: 32000·768 embeddings + 12 × (4·768² attention + 3·768·2048 SwiGLU + 2·768 norms) + 768 final norm.
    EXPECT_EQ(count("llama-12l"), 32000LL * 768 + 12LL * (4 * 768 * 768 + 3 * 768 * 2048 + 2 * 768) + 768);
    EXPECT_EQ(count("llama-gqa"), 32000LL * 768 + 12LL * (2 * 768 * 768 + 2 * 768 * 256 + 3 * 768 * 2048 + 2 * 768) + 768);
    const auto gpt2 = make_hf_model(builtin_hf_config("gpt2"), 0);
    for (const auto& [name, parameter] : gpt2->parameters())  // GPT-2's init: c_proj scaled by 1/√(2 L)
        if (name == "h.0.attn.c_proj.weight") {
            EXPECT_NEAR(parameter.std().item<double>(), 0.02 / std::sqrt(24.0), 3e-4);
        }
}

TEST(AttentionSinks, FirstTokenShareEntropyAndSinkRate) {
    // One sample, 2 heads, 3 real tokens after one left pad. Head 0 puts everything on the first real token;
    // head 1 is uniform over the allowed (causal) keys.
    const at::Tensor mask = torch::tensor({0, 1, 1, 1}, torch::kLong).unsqueeze(0);
    at::Tensor pattern = torch::zeros({1, 2, 4, 4}, torch::kDouble);
    pattern[0][0].select(1, 1).fill_(1.0);
    pattern[0][1][0][0] = 1.0;
    pattern[0][1][1][1] = 1.0;
    pattern[0][1][2].slice(0, 1, 3).fill_(0.5);
    pattern[0][1][3].slice(0, 1, 4).fill_(1.0 / 3);
    const HeadAttentionStats stats = head_attention_stats(pattern, mask);
    EXPECT_NEAR(stats.first_token_share[0], 1.0, 1e-12);
    EXPECT_NEAR(stats.first_token_share[1], (1.0 + 0.5 + 1.0 / 3) / 3, 1e-12);
    EXPECT_NEAR(stats.entropy[0], 0.0, 1e-12);
    EXPECT_NEAR(stats.entropy[1], (0.0 + std::log(2.0) + std::log(3.0)) / 3, 1e-12);
    EXPECT_DOUBLE_EQ(sink_rate(stats.first_token_share, 0.3), 1.0);
    EXPECT_DOUBLE_EQ(sink_rate(stats.first_token_share, 0.7), 0.5);
    // A NaN share (an overflowing model's map, under --allow-nonfinite) is no head's "not a sink": the rate is NaN.
    EXPECT_TRUE(std::isnan(sink_rate({0.9, NAN}, 0.3)));
}

TEST(AttentionSinks, AUniformHeadsBaselinesAreItsStatisticsOnTheModelsOwnMask) {
    // Closed forms by hand, n = 4. Causal rows see 1, 2, 3, 4 keys; with a window of 2 they see 1, 2, 2, 2, and rows 3
    // and 4 no longer see the first token.
    EXPECT_DOUBLE_EQ(uniform_head(4, false).first_token_share, 0.25);
    EXPECT_DOUBLE_EQ(uniform_head(4, false, 2).entropy, std::log(4.0));  // a window only narrows a causal mask
    EXPECT_NEAR(uniform_head(4, true).first_token_share, (1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4) / 4, 1e-15);
    EXPECT_NEAR(uniform_head(4, true, 2).first_token_share, (1 + 1.0 / 2) / 4, 1e-15);
    EXPECT_NEAR(uniform_head(4, true, 2).entropy, 3 * std::log(2.0) / 4, 1e-15);
    EXPECT_DOUBLE_EQ(uniform_head(4, true, 4).entropy, uniform_head(4, true).entropy);  // a window as wide as the sample
    // Brute force: a uniform pattern on the mask the decoders build (attention_allowed, as Mistral's and Qwen2's
    // windowed layers use it), read by the same statistics the measured heads go through.
    const std::int64_t n = 37;
    const at::Tensor real = torch::ones({1, n}, torch::kLong);
    for (const auto& [bidirectional, window] : std::vector<std::pair<bool, int>>{{true, 0}, {false, 0}, {false, 5}, {false, 36}, {false, 37}}) {
        const at::Tensor allowed = models::attention_allowed(real, bidirectional, window).to(torch::kDouble);  // [1, 1, n, n]
        const at::Tensor pattern = allowed / allowed.sum(-1, true);
        const HeadAttentionStats stats = head_attention_stats(pattern, real);
        const UniformHead closed = uniform_head(n, !bidirectional, window);
        EXPECT_NEAR(stats.first_token_share[0], closed.first_token_share, 1e-14) << bidirectional << " " << window;
        EXPECT_NEAR(stats.entropy[0], closed.entropy, 1e-13) << bidirectional << " " << window;
    }
    // A padded sample (2 pads on the left, 5 real tokens) is a 5-token sample: its baseline is uniform_head(5, ...).
    const at::Tensor padded = torch::tensor({0, 0, 1, 1, 1, 1, 1}, torch::kLong).unsqueeze(0);
    for (int window : {0, 3}) {
        const at::Tensor allowed = models::attention_allowed(padded, false, window).to(torch::kDouble);
        const at::Tensor pattern = allowed / allowed.sum(-1, true).clamp_min(1);  // a padding query's row is empty
        const HeadAttentionStats stats = head_attention_stats(pattern, padded);
        EXPECT_NEAR(stats.first_token_share[0], uniform_head(5, true, window).first_token_share, 1e-14) << window;
        EXPECT_NEAR(stats.entropy[0], uniform_head(5, true, window).entropy, 1e-14) << window;
    }
    // Over samples of their own lengths and over layers: the mean of the baselines, as the measured means average.
    const UniformHead mixed = uniform_head_mean({5, n}, true, {3});
    EXPECT_NEAR(mixed.entropy, (uniform_head(5, true, 3).entropy + uniform_head(n, true, 3).entropy) / 2, 1e-15);
    // Over layers: the mean of the layers' own baselines; the words name a window only where it narrows the sample.
    const UniformHead two = uniform_head_mean({n}, true, {0, 5});
    EXPECT_NEAR(two.entropy, (uniform_head(n, true).entropy + uniform_head(n, true, 5).entropy) / 2, 1e-15);
    EXPECT_NEAR(two.first_token_share, (uniform_head(n, true).first_token_share + uniform_head(n, true, 5).first_token_share) / 2,
                1e-15);
    EXPECT_EQ(sliding_window_words({0, 5, 5}, n), ", with its sliding window of 5 keys on 2 of 3 layers");
    EXPECT_EQ(sliding_window_words({40, 40}, n), "");
    EXPECT_EQ(sliding_window_words({}, n), "");
}

TEST(AttentionSinks, SinkRateTableCarriesEachLayersUniformBaseline) {
    // Two layers of one head, the second with a window of 2 over 4 tokens (HfConfig::window_at: Mistral's every layer,
    // Qwen2's from max_window_layers on).
    HfConfig config = builtin_hf_config("llama-12l");
    config.layers = 2;
    config.sliding_window = 2;
    config.layer_sliding = {false, true};
    EXPECT_EQ(config.window_at(0), 0);
    EXPECT_EQ(config.window_at(1), 2);
    config.layer_sliding.clear();  // Mistral: every layer
    EXPECT_EQ(config.window_at(0), 2);
    RealModelResult result;
    result.model = "m";
    result.tokens = 4;
    result.attention_windows = {0, 2};
    WeightsRun run;
    run.weights = "init";
    run.heads = {HeadAttentionStats{{0.5}, {1.0}}, HeadAttentionStats{{0.5}, {1.0}}};
    result.runs.push_back(run);
    const Table table = sink_rate_table(result);
    EXPECT_NEAR(table.column("uniform_first_token_share").reals[0], uniform_head(4, true).first_token_share, 1e-15);
    EXPECT_NEAR(table.column("uniform_first_token_share").reals[1], (1 + 1.0 / 2) / 4, 1e-15);
    EXPECT_NEAR(table.column("uniform_entropy").reals[1], 3 * std::log(2.0) / 4, 1e-15);
    result.settings.bidirectional = true;
    EXPECT_DOUBLE_EQ(sink_rate_table(result).column("uniform_entropy").reals[1], std::log(4.0));
}
