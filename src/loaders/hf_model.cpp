// config.json and model.safetensors of a Hugging Face folder → one of the architecture modules.
// The checkpoint-name → parameter table is the module tree itself (member name = checkpoint name); every parameter
// must be present with its exact shape, and finite.
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tensor_file.hpp"

namespace rankscope {
namespace {

template <typename T>
T field(const nlohmann::json& json, const char* name, const std::string& path) {
    if (!json.contains(name) || json[name].is_null()) throw Error(std::string("config has no '") + name + "'", path);
    try {
        return json[name].get<T>();
    } catch (const nlohmann::json::exception&) {
        throw Error(std::string("config field '") + name + "' has the wrong type", path);
    }
}
template <typename T>
T field_or(const nlohmann::json& json, const char* name, T fallback) {
    return json.contains(name) && !json[name].is_null() ? json[name].get<T>() : fallback;
}

bool is_floating(DType dtype) {
    return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

}  // namespace

bool is_builtin_hf_config(const std::string& name) {
    return name == "bert-base-cased" || name == "albert-base-v2" || name == "xlnet-base-cased";
}

HfConfig builtin_hf_config(const std::string& name) {
    HfConfig c;
    c.path = "built-in " + name;
    c.hidden_size = c.embedding_size = 768;
    c.layers = 12;
    c.heads = 12;
    c.head_size = 64;
    c.intermediate_size = 3072;
    if (name == "bert-base-cased") {
        c.model_type = "bert";
        c.vocab_size = 28996;
    } else if (name == "albert-base-v2") {
        c.model_type = "albert";
        c.vocab_size = 30000;
        c.embedding_size = 128;
        c.activation = "gelu_new";
    } else if (name == "xlnet-base-cased") {
        c.model_type = "xlnet";
        c.vocab_size = 32000;
        c.pad_token_id = 5;
    } else {
        throw Error("no built-in configuration named '" + name + "' (bert-base-cased, albert-base-v2, xlnet-base-cased)");
    }
    return c;
}

HfConfig read_hf_config(const std::string& path) {
    const nlohmann::json json = read_json_file(path, "file");
    HfConfig c;
    c.path = path;
    c.model_type = field_or<std::string>(json, "model_type", "");
    c.vocab_size = field<int>(json, "vocab_size", path);
    c.initializer_range = field_or<double>(json, "initializer_range", 0.02);
    c.layer_norm_eps = field_or<double>(json, "layer_norm_eps", 1e-12);
    c.pad_token_id = field_or<int>(json, "pad_token_id", 0);
    if (c.model_type == "bert" || c.model_type == "albert") {
        c.hidden_size = field<int>(json, "hidden_size", path);
        c.layers = field<int>(json, "num_hidden_layers", path);
        c.heads = field<int>(json, "num_attention_heads", path);
        c.intermediate_size = field<int>(json, "intermediate_size", path);
        c.max_position_embeddings = field_or<int>(json, "max_position_embeddings", 512);
        c.type_vocab_size = field_or<int>(json, "type_vocab_size", 2);
        c.activation = field_or<std::string>(json, "hidden_act", "gelu");
        c.embedding_size = c.model_type == "albert" ? field<int>(json, "embedding_size", path) : c.hidden_size;
        c.hidden_groups = field_or<int>(json, "num_hidden_groups", 1);
        if (field_or<int>(json, "inner_group_num", 1) != 1)
            throw Error("ALBERT with inner_group_num != 1 is not supported", path);
        if (field_or<std::string>(json, "position_embedding_type", "absolute") != "absolute")
            throw Error("only absolute position embeddings are supported", path);
        if (c.heads <= 0 || c.hidden_size % c.heads != 0)
            throw Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {}", c.hidden_size, c.heads), path);
        c.head_size = c.hidden_size / c.heads;
    } else if (c.model_type == "xlnet") {
        c.hidden_size = field<int>(json, "d_model", path);
        c.layers = field<int>(json, "n_layer", path);
        c.heads = field<int>(json, "n_head", path);
        c.head_size = field<int>(json, "d_head", path);
        c.intermediate_size = field<int>(json, "d_inner", path);
        c.activation = field_or<std::string>(json, "ff_activation", "gelu");
        c.clamp_len = field_or<int>(json, "clamp_len", -1);
        c.embedding_size = c.hidden_size;
        if (field_or<std::string>(json, "attn_type", "bi") != "bi") throw Error("only attn_type 'bi' is supported", path);
        if (field_or<bool>(json, "bi_data", false)) throw Error("bi_data is not supported", path);
    } else {
        throw Error("unknown model_type '" + c.model_type + "' (expected bert, albert or xlnet)", path);
    }
    if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.layers <= 0 || c.heads <= 0 || c.intermediate_size <= 0)
        throw Error("config sizes must be positive", path);
    return c;
}

std::unique_ptr<EncoderModel> make_hf_model(const HfConfig& config, std::uint64_t seed) {
    torch::manual_seed(seed);
    if (config.model_type == "bert") return models::make_bert(config);
    if (config.model_type == "albert") return models::make_albert(config);
    if (config.model_type == "xlnet") return models::make_xlnet(config);
    throw Error("unknown model_type '" + config.model_type + "'", config.path);
}

std::unique_ptr<EncoderModel> load_hf_model(const std::string& directory) {
    const std::filesystem::path folder = directory;
    if (!std::filesystem::is_directory(folder)) throw Error("not a model folder", directory);
    const HfConfig config = read_hf_config((folder / "config.json").string());
    const std::string weights_path = (folder / "model.safetensors").string();
    if (!std::filesystem::exists(weights_path)) throw Error("missing model.safetensors", weights_path);
    SafetensorsFile weights(weights_path);
    auto model = make_hf_model(config, 0);

    // Checkpoints saved from task heads prefix the base model ("bert.", "albert.", "transformer.").
    std::string prefix;
    for (const char* candidate : {"bert.", "albert.", "transformer."}) {
        const auto names = weights.names();
        if (!names.empty() && std::all_of(names.begin(), names.end(), [&](const std::string& name) {
                return name.rfind(candidate, 0) == 0 || name.find('.') == std::string::npos ||
                       name.rfind("cls.", 0) == 0 || name.rfind("lm_loss", 0) == 0 || name.rfind("predictions.", 0) == 0 ||
                       name.rfind("sequence_summary.", 0) == 0 || name.rfind("classifier.", 0) == 0 ||
                       name.rfind("sop_classifier.", 0) == 0 || name.rfind("qa_outputs.", 0) == 0;
            }) && weights.contains(std::string(candidate) + model->parameters().front().first))
            prefix = candidate;
    }
    std::vector<std::string> missing;
    torch::NoGradGuard no_grad;
    for (auto& [name, parameter] : model->parameters()) {
        const std::string stored = prefix + name;
        if (!weights.contains(stored)) {
            // The pooler is not used by any measurement: absent is fine.
            if (name.rfind("pooler", 0) != 0) missing.push_back(stored);
            continue;
        }
        const ArrayView view = weights.view(stored);
        const std::string where = weights_path + ":" + stored;
        if (view.shape != std::vector<std::int64_t>(parameter.sizes().begin(), parameter.sizes().end())) {
            auto text = [](const auto& shape) {
                std::string out;
                for (auto e : shape) out += (out.empty() ? "" : ", ") + std::to_string(e);
                return "[" + out + "]";
            };
            throw Error("shape " + text(view.shape) + " does not match the config's " + text(parameter.sizes()), where);
        }
        if (!is_floating(view.dtype)) throw Error("weights must be floating point, found " + dtype_name(view.dtype), where);
        const at::Tensor source = torch::from_blob(const_cast<std::byte*>(view.data), view.shape,
                                                   torch::TensorOptions().dtype(torch_dtype(view.dtype, where)));
        if (!torch::isfinite(source).all().item<bool>()) throw Error("weights contain NaN or Inf", where);
        parameter.copy_(source);
    }
    if (!missing.empty()) {
        std::string list;
        for (std::size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", " : "") + missing[i];
        if (missing.size() > 5) list += ", ...";
        throw Error(fmt::format("{} tensor{} missing: {}", missing.size(), missing.size() == 1 ? "" : "s", list),
                    weights_path);
    }
    return model;
}

}  // namespace rankscope
