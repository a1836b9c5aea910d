// config.json and model.safetensors (or model.safetensors.index.json + shards) of a Hugging Face folder → one of the
// architecture modules.
// The checkpoint-name → parameter table is the module tree itself (member name = checkpoint name); every parameter
// must be present with its exact shape, and finite.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <set>

#include "loaders/hf_checkpoint.hpp"
#include "loaders/hf_weights.hpp"
#include "models/common.hpp"
#include "models/decoder.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tensor_file.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope {
namespace {

bool is_floating(DType dtype) {
    return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

}  // namespace

const std::vector<std::string>& builtin_hf_config_names() {
    static const std::vector<std::string> names = {"bert-base-cased", "albert-base-v2", "xlnet-base-cased", "gpt2",
                                                   "pythia-160m",     "llama-12l",      "llama-gqa"};
    return names;
}

bool is_builtin_hf_config(const std::string& name) {
    const auto& names = builtin_hf_config_names();
    return std::find(names.begin(), names.end(), name) != names.end();
}

bool names_builtin_hf_config(const std::string& argument) {
    std::error_code error;
    return is_builtin_hf_config(argument) && !std::filesystem::exists(std::filesystem::path(argument) / "config.json", error);
}

HfConfig builtin_hf_config(const std::string& name) {
    HfConfig c;
    c.path = "built-in " + name;
    c.hidden_size = c.embedding_size = 768;
    c.layers = 12;
    c.heads = c.kv_heads = 12;
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
    } else if (name == "gpt2") {  // the published gpt2 (124M) config.json
        c.model_type = "gpt2";
        c.vocab_size = 50257;
        c.max_position_embeddings = 1024;
        c.layer_norm_eps = 1e-5;
        c.activation = "gelu_new";
        c.qkv_bias = c.output_bias = c.mlp_bias = true;
        c.tie_word_embeddings = true;
    } else if (name == "pythia-160m") {  // the published EleutherAI pythia-160m config.json (GPT-NeoX layout)
        c.model_type = "gpt_neox";
        c.vocab_size = 50304;
        c.max_position_embeddings = 2048;
        c.layer_norm_eps = 1e-5;
        c.activation = "gelu";
        c.rope_theta = 10000.0;  // rotary_emb_base
        c.rotary_dims = 16;      // int(64 × rotary_pct 0.25)
        c.parallel_residual = true;
        c.qkv_bias = c.output_bias = c.mlp_bias = true;
        c.pad_token_id = -1;
    } else if (name == "llama-12l" || name == "llama-gqa") {
        // Ours, Llama-shaped at GPT-2's size: SwiGLU width 2048 (≈ 8/3 d), no biases, untied head.
        c.model_type = "llama";
        c.vocab_size = 32000;
        c.intermediate_size = 2048;
        c.max_position_embeddings = 2048;
        c.layer_norm_eps = 1e-6;
        c.rope_theta = 10000.0;
        c.activation = "silu";
        c.pad_token_id = -1;
        if (name == "llama-gqa") c.kv_heads = 4;  // 3 query heads share each key/value head
    } else {
        throw Error(fmt::format("no built-in configuration named '{}' ({})", name,
                                fmt::join(builtin_hf_config_names(), ", ")));
    }
    return c;
}

// read_hf_config: src/loaders/hf_config.cpp (torch-free, fuzzed).

// ---- the architectures, one row per checkpoint family ---------------------------------------------------------------
// Everything the loaders know of a family by config.json's model_type, in one place. A new architecture is its model
// file (src/models/), its config fields and model_type lists (hf_config.cpp), one row here, and where it differs its
// tokenizer framing and token types (README, "Layout").
namespace {

using SizeTensors = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

struct Architecture {
    bool (*matches)(const std::string& model_type);
    // Layer l's tensors are "<layer_list><l>.<name>"; nullptr for ALBERT, whose one shared layer is stored once.
    const char* layer_list;
    const char* layers_field;  // config.json's layer count, named when the checkpoint holds fewer layers
    std::unique_ptr<EncoderModel> (*make)(const HfConfig&, models::Draw);
    const models::DecoderLayout& (*decoder_layout)();  // decoders: one layer at a time (streaming); nullptr: encoders
    // The tensors that carry every large size of the config (checkpoint names, without the task-head prefix): the token
    // (and position) embeddings `top`, and in the first and the last layer the MLP's input weight and the query weight
    // `per_layer` (names after "<layer_list><l>"). If they match, what the model allocates is about what the
    // checkpoint holds.
    void (*size_tensors)(const HfConfig& c, SizeTensors& top, SizeTensors& per_layer);
};

std::int64_t embedding_width(const HfConfig& c) { return c.embedding_size > 0 ? c.embedding_size : c.hidden_size; }

const std::vector<Architecture>& architectures() {
    static const std::vector<Architecture> table = {
        {[](const std::string& t) { return t == "bert" || t == "roberta"; }, "encoder.layer.", "num_hidden_layers",
         models::make_bert, nullptr,
         [](const HfConfig& c, SizeTensors& top, SizeTensors& per_layer) {
             top = {{"embeddings.word_embeddings.weight", {c.vocab_size, c.hidden_size}},
                    {"embeddings.position_embeddings.weight", {c.max_position_embeddings, c.hidden_size}}};
             per_layer = {{".intermediate.dense.weight", {c.intermediate_size, c.hidden_size}},
                          {".attention.self.query.weight", {c.hidden_size, c.hidden_size}}};
         }},
        {[](const std::string& t) { return t == "distilbert"; }, "transformer.layer.", "n_layers", models::make_distilbert,
         nullptr,
         [](const HfConfig& c, SizeTensors& top, SizeTensors& per_layer) {
             top = {{"embeddings.word_embeddings.weight", {c.vocab_size, c.hidden_size}},
                    {"embeddings.position_embeddings.weight", {c.max_position_embeddings, c.hidden_size}}};
             per_layer = {{".ffn.lin1.weight", {c.intermediate_size, c.hidden_size}},
                          {".attention.q_lin.weight", {c.hidden_size, c.hidden_size}}};
         }},
        {[](const std::string& t) { return t == "albert"; }, nullptr, "num_hidden_layers", models::make_albert, nullptr,
         [](const HfConfig& c, SizeTensors& top, SizeTensors&) {  // one shared layer
             const std::string layer = "encoder.albert_layer_groups.0.albert_layers.0.";
             top = {{"embeddings.word_embeddings.weight", {c.vocab_size, embedding_width(c)}},
                    {"embeddings.position_embeddings.weight", {c.max_position_embeddings, embedding_width(c)}},
                    {"encoder.embedding_hidden_mapping_in.weight", {c.hidden_size, embedding_width(c)}},
                    {layer + "ffn.weight", {c.intermediate_size, c.hidden_size}},
                    {layer + "attention.query.weight", {c.hidden_size, c.hidden_size}}};
         }},
        {[](const std::string& t) { return t == "xlnet"; }, "layer.", "n_layer", models::make_xlnet, nullptr,
         [](const HfConfig& c, SizeTensors& top, SizeTensors& per_layer) {
             top = {{"word_embedding.weight", {c.vocab_size, c.hidden_size}}};
             per_layer = {{".ff.layer_1.weight", {c.intermediate_size, c.hidden_size}},
                          {".rel_attn.q", {c.hidden_size, c.heads, c.head_size}}};
         }},
        {[](const std::string& t) { return t == "gpt2"; }, "h.", "n_layer", models::make_gpt2, models::gpt2_layout,
         [](const HfConfig& c, SizeTensors& top, SizeTensors& per_layer) {  // Conv1D weights are [in, out]
             top = {{"wte.weight", {c.vocab_size, c.hidden_size}}, {"wpe.weight", {c.max_position_embeddings, c.hidden_size}}};
             per_layer = {{".mlp.c_fc.weight", {c.hidden_size, c.intermediate_size}},
                          {".attn.c_attn.weight", {c.hidden_size, 3 * std::int64_t(c.hidden_size)}}};
         }},
        {[](const std::string& t) { return t == "gpt_neox"; }, "layers.", "num_hidden_layers", models::make_gpt_neox,
         models::gpt_neox_layout,
         [](const HfConfig& c, SizeTensors& top, SizeTensors& per_layer) {
             top = {{"embed_in.weight", {c.vocab_size, c.hidden_size}}};
             per_layer = {{".mlp.dense_h_to_4h.weight", {c.intermediate_size, c.hidden_size}},
                          {".attention.query_key_value.weight", {3 * std::int64_t(c.hidden_size), c.hidden_size}}};
         }},
        {is_llama_family, "layers.", "num_hidden_layers", models::make_llama, models::llama_layout,
         [](const HfConfig& c, SizeTensors& top, SizeTensors& per_layer) {
             const std::int64_t kv_heads = c.kv_heads > 0 ? c.kv_heads : c.heads;
             top = {{"embed_tokens.weight", {c.vocab_size, c.hidden_size}}};
             per_layer = {{".mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}},
                          {".self_attn.q_proj.weight", {std::int64_t(c.heads) * c.head_size, c.hidden_size}},
                          {".self_attn.k_proj.weight", {kv_heads * c.head_size, c.hidden_size}}};
         }},
    };
    return table;
}

const Architecture& architecture_of(const HfConfig& config) {
    for (const Architecture& architecture : architectures())
        if (architecture.matches(config.model_type)) return architecture;
    throw Error("unknown model_type '" + config.model_type + "'", config.path);
}

}  // namespace

std::unique_ptr<EncoderModel> make_hf_model(const HfConfig& config, std::uint64_t seed) {
    torch::manual_seed(seed);
    return architecture_of(config).make(config, models::Draw::Yes);
}

namespace detail {

std::string shape_list(const std::vector<std::int64_t>& shape) {
    std::string out;
    for (auto e : shape) out += (out.empty() ? "" : ", ") + std::to_string(e);
    return "[" + out + "]";
}

std::string checkpoint_prefix(const HfCheckpoint& weights, const std::string& first_parameter) {
    // Checkpoints saved from task heads prefix the base model ("bert.", "roberta.", "distilbert.", "albert.",
    // "transformer." for XLNet and GPT-2, "gpt_neox." for GPT-NeoX, "model." for the Llama family); the heads' own
    // tensors sit beside it.
    std::string prefix;
    const auto names = weights.names();
    for (const char* candidate : {"bert.", "roberta.", "distilbert.", "albert.", "transformer.", "gpt_neox.", "model."}) {
        if (!names.empty() && std::all_of(names.begin(), names.end(), [&](const std::string& name) {
                return name.rfind(candidate, 0) == 0 || name.find('.') == std::string::npos || is_task_head_tensor(name);
            }) && weights.contains(std::string(candidate) + first_parameter))
            prefix = candidate;
    }
    return prefix;
}

bool is_task_head_tensor(const std::string& name) {
    // BERT/ALBERT (cls., predictions., sop_classifier.), DistilBERT (vocab_transform., vocab_layer_norm.,
    // vocab_projector., pre_classifier.), XLNet (lm_loss, sequence_summary., logits_proj., the SQuAD
    // head's start_logits., end_logits., answer_class.), GPT-2 (lm_head., multiple_choice_head.), GPT-NeoX
    // (embed_out.), Llama (score.), and every family's classifier. / qa_outputs.
    for (const char* head : {"cls.", "lm_loss", "predictions.", "sequence_summary.", "classifier.", "sop_classifier.",
                             "qa_outputs.", "lm_head.", "score.", "logits_proj.", "start_logits.", "end_logits.",
                             "answer_class.", "multiple_choice_head.", "vocab_transform.", "vocab_layer_norm.",
                             "vocab_projector.", "pre_classifier.", "embed_out."})
        if (name.rfind(head, 0) == 0) return true;
    return false;
}

void warn_unread_tensors(const HfCheckpoint& weights, const std::string& prefix, const std::set<std::string>& read,
                         const HfConfig& config) {
    // Buffers that transformers saves beside the parameters and recomputes: the position ids, GPT-2's and GPT-NeoX's
    // causal masks, the rotary frequencies.
    auto is_buffer = [](const std::string& name) {
        for (const char* suffix : {"position_ids", ".attn.bias", ".attn.masked_bias", ".attention.bias",
                                   ".attention.masked_bias", "rotary_emb.inv_freq"})
            if (name.size() >= std::strlen(suffix) && name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
                return true;
        return false;
    };
    std::vector<std::string> unread;
    for (const auto& name : weights.names())
        if (!read.count(name) && name.rfind(prefix, 0) == 0 && !is_task_head_tensor(name) && !is_buffer(name))
            unread.push_back(name);
    if (unread.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < unread.size() && i < 3; ++i) list += (i ? ", " : "") + printable(unread[i]);
    // Once per set of unread names in a process: `dynamics` reads one checkpoint per step, all alike.
    static std::mutex mutex;
    static std::set<std::string> said;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!said.insert(std::to_string(unread.size()) + '\n' + list).second) return;
    }
    warn(fmt::format("{} tensor{} in {} {} not read by the {}-layer {} model that {} describes: {}{} (a checkpoint "
                     "deeper or wider than its config?)",
                     unread.size(), unread.size() == 1 ? "" : "s", weights.source(), unread.size() == 1 ? "is" : "are",
                     config.layers, config.model_type, config.path.empty() ? "the config" : config.path, list,
                     unread.size() > 3 ? ", ..." : ""));
}

void check_stored_tensor(const HfCheckpoint& weights, const std::string& stored, const std::vector<std::int64_t>& shape) {
    const ArrayView view = weights.view(stored);
    const std::string where = weights.where(stored);
    if (view.shape != shape)
        throw Error("shape " + shape_list(view.shape) + " does not match the config's " + shape_list(shape), where);
    if (!is_floating(view.dtype)) throw Error("weights must be floating point, found " + dtype_name(view.dtype), where);
}

at::Tensor stored_tensor(const HfCheckpoint& weights, const std::string& stored) {
    const ArrayView view = weights.view(stored);
    return torch::from_blob(const_cast<std::byte*>(view.data), view.shape,
                            torch::TensorOptions().dtype(torch_dtype(view.dtype, weights.where(stored))));
}

void load_parameter(const HfCheckpoint& weights, const std::string& stored, at::Tensor& parameter) {
    check_stored_tensor(weights, stored, std::vector<std::int64_t>(parameter.sizes().begin(), parameter.sizes().end()));
    // F16 / BF16 / F64 weights are converted to the parameter's float32 for compute.
    const at::Tensor converted = stored_tensor(weights, stored).to(parameter.scalar_type());
    if (!torch::isfinite(converted).all().item<bool>()) throw Error("weights contain NaN or Inf", weights.where(stored));
    torch::NoGradGuard no_grad;
    parameter.copy_(converted);
    weights.release(stored);  // copied: the file's pages need not stay resident
}

void zero_unread_parameter(at::Tensor& parameter) {
    torch::NoGradGuard no_grad;
    parameter.zero_();
}

void throw_missing(const std::vector<std::string>& missing, const std::string& source) {
    if (missing.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) list += ", ...";
    throw Error(fmt::format("{} tensor{} missing: {}", missing.size(), missing.size() == 1 ? "" : "s", list), source);
}

const models::DecoderLayout* decoder_layout_of(const HfConfig& config) {
    const Architecture& architecture = architecture_of(config);
    return architecture.decoder_layout ? &architecture.decoder_layout() : nullptr;
}

const char* layer_list_of(const HfConfig& config) { return architecture_of(config).layer_list; }

std::vector<std::pair<std::string, std::vector<std::int64_t>>> size_tensors(const HfConfig& config) {
    const Architecture& architecture = architecture_of(config);
    SizeTensors top, per_layer;
    architecture.size_tensors(config, top, per_layer);
    std::vector<int> layers = {0};
    if (config.layers > 1) layers.push_back(config.layers - 1);
    for (const auto& [after, shape] : per_layer)
        for (int l : layers) top.emplace_back(architecture.layer_list + std::to_string(l) + after, shape);
    return top;
}

// One past the largest l of the names "<layer_prefix><l>.…"; 0 when there is none.
static int stored_layer_count(const HfCheckpoint& weights, const std::string& layer_prefix) {
    int count = 0;
    for (const std::string& name : weights.names()) {
        if (name.compare(0, layer_prefix.size(), layer_prefix) != 0) continue;
        const std::size_t digits_end = name.find_first_not_of("0123456789", layer_prefix.size());
        if (digits_end == layer_prefix.size() || digits_end == std::string::npos || name[digits_end] != '.' ||
            digits_end - layer_prefix.size() > 6)
            continue;
        count = std::max(count, std::stoi(name.substr(layer_prefix.size(), digits_end - layer_prefix.size())) + 1);
    }
    return count;
}

void check_layer_count(const HfConfig& config, const HfCheckpoint& weights, const std::string& layer_prefix) {
    const int stored = stored_layer_count(weights, layer_prefix);
    if (stored == 0 || stored >= config.layers) return;  // no layer at all: the tensors' own names say more
    const std::string held = stored == 1 ? layer_prefix + "0" : fmt::format("{}0 to {}{}", layer_prefix, layer_prefix, stored - 1);
    throw Error(fmt::format("{} says {}: {}, but the checkpoint holds {} layer{} ({}): the config is for a deeper model",
                            config.path.empty() ? "the config" : config.path,
                            architecture_of(config).layers_field,
                            config.layers, stored, stored == 1 ? "" : "s", held),
                weights.source());
}

void check_sizes_against_checkpoint(const HfConfig& config, const HfCheckpoint& weights) {
    const auto tensors = size_tensors(config);
    const std::string prefix = checkpoint_prefix(weights, tensors.front().first);
    std::vector<std::string> missing;
    for (const auto& [name, shape] : tensors) {
        if (!weights.contains(prefix + name)) {
            missing.push_back(prefix + name);
            continue;
        }
        const ArrayView view = weights.view(prefix + name);
        if (view.shape != shape)
            throw Error(fmt::format("shape {} does not match the config's {} (checked before the model is built){}",
                                    shape_list(view.shape), shape_list(shape), config.defaulted_sizes),
                        weights.where(prefix + name));
    }
    // After the shapes: a config both wider and deeper than its checkpoint is named by its first wrong shape.
    if (const char* list = layer_list_of(config)) check_layer_count(config, weights, prefix + list);
    if (!missing.empty())
        throw_missing(missing, weights.source() + ", for the sizes of " + (config.path.empty() ? "the config" : config.path));
}

}  // namespace detail

std::unique_ptr<EncoderModel> load_hf_model(const std::string& directory) {
    const std::filesystem::path folder = directory;
    if (!std::filesystem::is_directory(folder)) throw Error("not a model folder", directory);
    const HfConfig config = read_hf_config((folder / "config.json").string());
    const HfCheckpoint weights(directory);  // model.safetensors, or the index + shards
    // Every size of the config against the checkpoint before anything is allocated: a config that disagrees with
    // its checkpoint (say 48 layers of 8192 for a 4 MB file) once built the whole model first, GBs, then failed.
    detail::check_sizes_against_checkpoint(config, weights);
    // Nothing drawn: every parameter is read from the checkpoint, the pooler zeroed where the checkpoint has none. (The
    // discarded init draw made `rankscope model` on a BERT-base checkpoint and 8 tokens take 2.2-3.2 s and 797 MB,
    // now 1.5-1.7 s and 720 MB; 2026-12-05.)
    auto model = architecture_of(config).make(config, models::Draw::No);
    const std::string prefix = detail::checkpoint_prefix(weights, model->parameters().front().first);
    std::vector<std::string> missing;
    std::set<std::string> read;
    for (auto& [name, parameter] : model->parameters()) {
        const std::string stored = prefix + name;
        read.insert(stored);
        if (!weights.contains(stored)) {
            // The pooler is not used by any measurement: absent is fine.
            if (name.rfind("pooler", 0) != 0) missing.push_back(stored);
            detail::zero_unread_parameter(parameter);
            continue;
        }
        detail::load_parameter(weights, stored, parameter);
    }
    detail::throw_missing(missing, weights.source());
    detail::warn_unread_tensors(weights, prefix, read, config);
    return model;
}

}  // namespace rankscope
