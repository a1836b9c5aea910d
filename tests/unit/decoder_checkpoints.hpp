#pragma once
// Tiny decoder checkpoints in the Hugging Face layouts and the helpers the decoder tests share (test_decoders.cpp,
// test_streamed.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"

namespace rankscope::test {

namespace fs = std::filesystem;

// A fresh folder under the temp directory, removed at the end of the test.
struct TempFolder {
    fs::path path;
    explicit TempFolder(const std::string& name)
        : path(fs::temp_directory_path() / ("rankscope-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempFolder() { fs::remove_all(path); }
};

inline HfConfig config_from(const fs::path& folder, const std::string& json) {
    std::ofstream(folder / "config.json") << json;
    return read_hf_config((folder / "config.json").string());
}

inline const char* kTinyLlama = R"({"model_type": "llama", "vocab_size": 30, "hidden_size": 16, "intermediate_size": 24,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2})";
inline const char* kTinyGptNeox = R"({"model_type": "gpt_neox", "vocab_size": 30, "hidden_size": 16,
    "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "rotary_pct": 0.5})";
inline const char* kTinyGpt2 = R"({"model_type": "gpt2", "vocab_size": 30, "n_embd": 16, "n_layer": 2, "n_head": 4,
    "n_positions": 16})";

// The model's parameters written as a checkpoint (`prefix` + name), F32, split over `shards` files when > 1.
inline void write_checkpoint(EncoderModel& model, const fs::path& folder, const std::string& prefix, int shards) {
    std::vector<NamedArray> tensors;
    std::vector<at::Tensor> keep;
    for (const auto& [name, parameter] : model.parameters()) {
        keep.push_back(parameter.contiguous());
        tensors.push_back({prefix + name, ArrayView{DType::F32, std::vector<std::int64_t>(parameter.sizes().begin(), parameter.sizes().end()),
                                                    static_cast<const std::byte*>(keep.back().data_ptr())}});
    }
    if (shards == 1) {
        write_safetensors((folder / "model.safetensors").string(), tensors);
        return;
    }
    std::string weight_map;
    for (int s = 0; s < shards; ++s) {
        std::vector<NamedArray> part;
        const std::string file = "model-0000" + std::to_string(s + 1) + ".safetensors";
        for (std::size_t i = s; i < tensors.size(); i += shards) {
            part.push_back(tensors[i]);
            weight_map += (weight_map.empty() ? "" : ", ") + ("\"" + tensors[i].name + "\": \"" + file + "\"");
        }
        write_safetensors((folder / file).string(), part);
    }
    std::ofstream(folder / "model.safetensors.index.json") << "{\"metadata\": {}, \"weight_map\": {" << weight_map << "}}";
}

inline ModelBatch batch_of(const HfConfig& config, const at::Tensor& mask) {
    torch::manual_seed(5);
    const at::Tensor ids = torch::randint(config.vocab_size, mask.sizes(), torch::kLong);
    return checked_model_batch(ids, mask, {}, config, "");
}

inline void expect_error(const std::function<void()>& action, const std::string& words, const std::string& file) {
    try {
        action();
        ADD_FAILURE() << "no error, expected " << words;
    } catch (const Error& e) {
        EXPECT_NE(e.one_line().find(words), std::string::npos) << e.one_line();
        EXPECT_NE(e.one_line().find(file), std::string::npos) << e.one_line();
        EXPECT_EQ(e.one_line().find('\n'), std::string::npos) << e.one_line();
    }
}

}  // namespace rankscope::test
