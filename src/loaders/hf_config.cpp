// config.json of a Hugging Face folder → HfConfig, validated before anything is allocated: every size is an integer in
// a stated range (a config asking for 10^9 layers is refused with the limit named), the sizes are consistent with each
// other (heads divide the hidden size, ...), and the whole model stays below a parameter budget. Torch-free: this file
// uses only the HfConfig struct, so the config fuzzer builds it without libtorch.
#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"

namespace rankscope {
namespace {

// Limits on config sizes (docs/reliability.md). Generous for real checkpoints (BERT-large: 24 layers, 1024 hidden,
// 16 heads, 4096 intermediate, 512 positions; vocabularies up to ~250k), small enough that nothing is allocated for a
// nonsense config.
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxHidden = 65536;
constexpr std::int64_t kMaxHeads = 1024;
constexpr std::int64_t kMaxIntermediate = 262144;
constexpr std::int64_t kMaxVocab = 10000000;
constexpr std::int64_t kMaxPositions = 1048576;
constexpr std::int64_t kMaxTokenTypes = 1024;
constexpr double kMaxParameters = 2e9;  // 8 GB of float32

bool present(const nlohmann::json& json, const char* name) { return json.contains(name) && !json[name].is_null(); }

// An integer field in [low, high]; `fallback` when absent (nullptr: required).
int integer(const nlohmann::json& json, const char* name, std::int64_t low, std::int64_t high, const std::string& path,
            const std::int64_t* fallback = nullptr) {
    if (!present(json, name)) {
        if (fallback) return static_cast<int>(*fallback);
        throw Error(std::string("config has no '") + name + "'", path);
    }
    const auto& value = json[name];
    const auto range = fmt::format("{}..{}", low, high);
    if (!value.is_number_integer())
        throw Error(fmt::format("config field '{}' must be an integer in {}, found {}", name, range,
                                printable(value.dump(), 40)),
                    path);
    const bool fits = value.is_number_unsigned() ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(high) &&
                                                       static_cast<std::int64_t>(value.get<std::uint64_t>()) >= low
                                                 : value.get<std::int64_t>() >= low && value.get<std::int64_t>() <= high;
    if (!fits)
        throw Error(fmt::format("config field '{}' = {} is outside the supported range {}", name, value.dump(), range),
                    path);
    return static_cast<int>(value.get<std::int64_t>());
}
int integer_or(const nlohmann::json& json, const char* name, std::int64_t fallback, std::int64_t low, std::int64_t high,
               const std::string& path) {
    return integer(json, name, low, high, path, &fallback);
}

double real_or(const nlohmann::json& json, const char* name, double fallback, double low, double high,
               const std::string& path) {
    if (!present(json, name)) return fallback;
    const auto& value = json[name];
    if (!value.is_number())
        throw Error(fmt::format("config field '{}' must be a number, found {}", name, printable(value.dump(), 40)), path);
    const double x = value.get<double>();
    if (!std::isfinite(x) || x < low || x > high)
        throw Error(fmt::format("config field '{}' = {} is outside the supported range {}..{}", name, x, low, high), path);
    return x;
}

std::string string_or(const nlohmann::json& json, const char* name, const std::string& fallback, const std::string& path) {
    if (!present(json, name)) return fallback;
    if (!json[name].is_string())
        throw Error(fmt::format("config field '{}' must be a string, found {}", name, printable(json[name].dump(), 40)), path);
    return json[name].get<std::string>();
}

bool boolean_or(const nlohmann::json& json, const char* name, bool fallback, const std::string& path) {
    if (!present(json, name)) return fallback;
    if (!json[name].is_boolean())
        throw Error(fmt::format("config field '{}' must be true or false, found {}", name, printable(json[name].dump(), 40)),
                    path);
    return json[name].get<bool>();
}

// The fields of `names` that config.json leaves out or sets to null, as " (absent or null in config.json, so their
// defaults: a, b)", or "".
std::string defaulted_fields(const nlohmann::json& json, std::initializer_list<const char*> names) {
    std::string list;
    for (const char* name : names)
        if (!present(json, name)) list += (list.empty() ? "" : ", ") + std::string(name);
    return list.empty() ? std::string() : " (absent or null in config.json, so their defaults: " + list + ")";
}

// GPT2Config (Hugging Face's names and defaults): n_embd 768, n_layer 12, n_head 12, n_inner null (= 4 n_embd),
// n_positions 1024, vocab_size 50257, layer_norm_epsilon 1e-5, activation_function "gelu_new", tie_word_embeddings true.
void read_gpt2_fields(const nlohmann::json& json, const std::string& path, HfConfig& c) {
    c.vocab_size = integer_or(json, "vocab_size", 50257, 1, kMaxVocab, path);
    c.hidden_size = c.embedding_size = integer_or(json, "n_embd", 768, 1, kMaxHidden, path);
    c.layers = integer_or(json, "n_layer", 12, 1, kMaxLayers, path);
    c.heads = c.kv_heads = integer_or(json, "n_head", 12, 1, kMaxHeads, path);
    c.intermediate_size = integer_or(json, "n_inner", 4 * std::int64_t(c.hidden_size), 1, kMaxIntermediate, path);
    c.max_position_embeddings = integer_or(json, "n_positions", 1024, 1, kMaxPositions, path);
    c.layer_norm_eps = real_or(json, "layer_norm_epsilon", 1e-5, 1e-30, 1.0, path);
    c.activation = string_or(json, "activation_function", "gelu_new", path);
    c.tie_word_embeddings = boolean_or(json, "tie_word_embeddings", true, path);
    c.pad_token_id = 0;  // GPT-2 has no padding token; padding is given by the attention mask only
    c.defaulted_sizes = defaulted_fields(json, {"vocab_size", "n_embd", "n_layer", "n_head", "n_inner", "n_positions"});
    c.qkv_bias = c.output_bias = c.mlp_bias = true;
    if (!boolean_or(json, "scale_attn_weights", true, path))
        throw Error("GPT-2 with scale_attn_weights false is not supported", path);
    if (boolean_or(json, "scale_attn_by_inverse_layer_idx", false, path))
        throw Error("GPT-2 with scale_attn_by_inverse_layer_idx true is not supported", path);
    if (boolean_or(json, "add_cross_attention", false, path))
        throw Error("GPT-2 with add_cross_attention true is not supported", path);
    if (c.hidden_size % c.heads != 0)
        throw Error(fmt::format("n_embd {} is not divisible by n_head {}", c.hidden_size, c.heads), path);
    c.head_size = c.hidden_size / c.heads;
}

// rope_scaling: {"rope_type" (or the older "type"): "default" | "linear" | "llama3", "factor", and for llama3
// "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}. Other types (dynamic, yarn, longrope)
// are refused.
void read_rope_scaling(const nlohmann::json& scaling, const std::string& path, HfConfig& c) {
    if (!scaling.is_object()) throw Error("config field 'rope_scaling' must be an object or null", path);
    c.rope_type = string_or(scaling, "rope_type", string_or(scaling, "type", "default", path), path);
    if (c.rope_type == "default") return;
    if (c.rope_type != "linear" && c.rope_type != "llama3")
        throw Error("rope_scaling type '" + printable(c.rope_type, 40) + "' is not supported (default, linear or llama3)", path);
    if (!present(scaling, "factor")) throw Error("rope_scaling has no 'factor'", path);
    c.rope_factor = real_or(scaling, "factor", 1.0, 1e-6, 1e6, path);
    if (c.rope_type == "llama3") {
        for (const char* field : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
            if (!present(scaling, field)) throw Error(std::string("rope_scaling (llama3) has no '") + field + "'", path);
        c.rope_low_freq_factor = real_or(scaling, "low_freq_factor", 1.0, 1e-6, 1e6, path);
        c.rope_high_freq_factor = real_or(scaling, "high_freq_factor", 4.0, 1e-6, 1e6, path);
        c.rope_original_max_positions = integer(scaling, "original_max_position_embeddings", 1, kMaxPositions, path);
        if (c.rope_high_freq_factor <= c.rope_low_freq_factor)
            throw Error("rope_scaling high_freq_factor must exceed low_freq_factor", path);
    }
}

// Qwen2's layer_types: one "full_attention" or "sliding_attention" per layer. A sliding layer needs the window
// (transformers fails on one without it).
void read_layer_types(const nlohmann::json& types, const std::string& path, HfConfig& c) {
    if (!types.is_array() || types.size() != static_cast<std::size_t>(c.layers))
        throw Error(fmt::format("layer_types must list one type per layer ({})", c.layers), path);
    c.layer_sliding.clear();
    for (const auto& type : types) {
        const std::string name = type.is_string() ? type.get<std::string>() : type.dump();
        if (name != "full_attention" && name != "sliding_attention")
            throw Error("layer_types holds '" + printable(name, 40) + "' (expected full_attention or sliding_attention)",
                        path);
        c.layer_sliding.push_back(name == "sliding_attention");
    }
    for (std::size_t l = 0; l < c.layer_sliding.size(); ++l)
        if (c.layer_sliding[l] && c.sliding_window == 0)
            throw Error(fmt::format("layer_types makes layer {} sliding_attention, but there is no window "
                                    "(use_sliding_window false or sliding_window null)",
                                    l),
                        path);
}

// LlamaConfig / MistralConfig / Qwen2Config (Hugging Face's names and defaults, per model_type):
//   vocab_size 32000 (qwen2 151936), hidden_size 4096, intermediate_size 11008 (mistral 14336, qwen2 22016),
//   num_hidden_layers 32, num_attention_heads 32, num_key_value_heads null = num_attention_heads (mistral 8),
//   head_dim null = hidden_size / num_attention_heads, hidden_act "silu", max_position_embeddings 2048 (mistral
//   131072, qwen2 32768), rms_norm_eps 1e-6, rope_theta 10000, rope_scaling null (see read_rope_scaling),
//   tie_word_embeddings false.
//   llama: attention_bias false (q, k, v and o), mlp_bias false. qwen2: q/k/v biases, no o_proj bias, no MLP bias;
//   use_sliding_window false, sliding_window 4096, max_window_layers 28 (the window applies to layers >= it).
//   mistral: no biases, sliding_window 4096 (null = none), on every layer.
void read_llama_fields(const nlohmann::json& json, const std::string& path, HfConfig& c) {
    const bool mistral = c.model_type == "mistral", qwen2 = c.model_type == "qwen2";
    c.vocab_size = integer_or(json, "vocab_size", qwen2 ? 151936 : 32000, 1, kMaxVocab, path);
    c.hidden_size = c.embedding_size = integer_or(json, "hidden_size", 4096, 1, kMaxHidden, path);
    c.intermediate_size =
        integer_or(json, "intermediate_size", mistral ? 14336 : qwen2 ? 22016 : 11008, 1, kMaxIntermediate, path);
    c.layers = integer_or(json, "num_hidden_layers", 32, 1, kMaxLayers, path);
    c.heads = integer_or(json, "num_attention_heads", 32, 1, kMaxHeads, path);
    c.kv_heads = integer_or(json, "num_key_value_heads", mistral ? 8 : c.heads, 1, kMaxHeads, path);
    // A size the folder leaves out takes the class's default (LlamaConfig's 4096, ...): the errors it leads to say so.
    const std::string defaults = defaulted_fields(json, {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                                         "num_attention_heads", "num_key_value_heads"});
    if (c.heads % c.kv_heads != 0)
        throw Error(fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}{}", c.heads,
                                c.kv_heads, defaults),
                    path);
    if (!present(json, "head_dim") && c.hidden_size % c.heads != 0)
        throw Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {} (and no head_dim is given){}",
                                c.hidden_size, c.heads, defaults),
                    path);
    c.head_size = integer_or(json, "head_dim", c.hidden_size / std::max(c.heads, 1), 1, kMaxHidden, path);
    if (c.head_size % 2 != 0)
        throw Error(fmt::format("head_dim {} must be even for rotary positions{}", c.head_size, defaults), path);
    c.defaulted_sizes = defaults;
    // Rotary positions on part of each head (partial_rotary_factor < 1) are not implemented: refused, not ignored.
    if (const double part = real_or(json, "partial_rotary_factor", 1.0, 0.0, 1.0, path); part != 1.0)
        throw Error(fmt::format("partial_rotary_factor {} is not supported (rotary positions on the whole head only)", part),
                    path);
    c.activation = string_or(json, "hidden_act", "silu", path);
    c.max_position_embeddings =
        integer_or(json, "max_position_embeddings", mistral ? 131072 : qwen2 ? 32768 : 2048, 1, kMaxPositions, path);
    c.layer_norm_eps = real_or(json, "rms_norm_eps", 1e-6, 1e-30, 1.0, path);
    c.rope_theta = real_or(json, "rope_theta", 10000.0, 1.0, 1e12, path);
    if (present(json, "rope_scaling")) read_rope_scaling(json["rope_scaling"], path, c);
    c.tie_word_embeddings = boolean_or(json, "tie_word_embeddings", false, path);
    // The embedding's padding row (zeroed at init only); absent, null or outside the vocabulary (some released configs
    // name a token of the tokenizer's added range): none.
    c.pad_token_id = -1;
    if (present(json, "pad_token_id") && json["pad_token_id"].is_number_integer() &&
        json["pad_token_id"].get<std::int64_t>() >= 0 && json["pad_token_id"].get<std::int64_t>() < c.vocab_size)
        c.pad_token_id = static_cast<int>(json["pad_token_id"].get<std::int64_t>());
    // sliding_window: absent = the default 4096; an explicit null = no window (as Hugging Face's configs).
    const bool window_null = json.contains("sliding_window") && json["sliding_window"].is_null();
    const int window = window_null ? 0 : integer_or(json, "sliding_window", 4096, 1, kMaxPositions, path);
    if (qwen2) {
        c.qkv_bias = true;
        c.output_bias = c.mlp_bias = false;
        // layer_types ("full_attention" / "sliding_attention" per layer), when given, decide which layers have the
        // window; transformers derives them from max_window_layers only when they are absent.
        if (boolean_or(json, "use_sliding_window", false, path)) {
            c.sliding_window = window;
            const int first = integer_or(json, "max_window_layers", 28, 0, kMaxLayers, path);
            for (int l = 0; l < c.layers; ++l) c.layer_sliding.push_back(l >= first);
        }
        if (present(json, "layer_types")) read_layer_types(json["layer_types"], path, c);
    } else {
        c.qkv_bias = c.output_bias = !mistral && boolean_or(json, "attention_bias", false, path);
        c.mlp_bias = !mistral && boolean_or(json, "mlp_bias", false, path);
        if (mistral) c.sliding_window = window;
    }
}

// GPTNeoXConfig (Hugging Face's names and defaults): vocab_size 50432, hidden_size 6144, num_hidden_layers 44,
// num_attention_heads 64, intermediate_size 24576, hidden_act "gelu", rotary_pct 0.25, rotary_emb_base 10000,
// max_position_embeddings 2048, layer_norm_eps 1e-5, use_parallel_residual true, attention_bias true (query_key_value
// and dense; the MLP always has biases), rope_scaling null, tie_word_embeddings false. GPTNeoXConfig sets rope_theta and
// partial_rotary_factor from rotary_emb_base and rotary_pct whatever config.json says of them, so only those two are
// read. The rotated features per head are int(head size × rotary_pct), as its attention computes them.
void read_gpt_neox_fields(const nlohmann::json& json, const std::string& path, HfConfig& c) {
    // null where GPTNeoXConfig keeps it: transformers then fails to build these (a TypeError or KeyError), and reads
    // a null use_parallel_residual or attention_bias as false (`if config.use_parallel_residual:`, nn.Linear(bias=None)).
    for (const char* name : {"rotary_pct", "rotary_emb_base", "layer_norm_eps", "hidden_act"})
        if (json.contains(name) && json[name].is_null())
            throw Error(std::string("config field '") + name + "' is null (transformers cannot build GPT-NeoX with it)", path);
    auto null_or_boolean = [&](const char* name, bool fallback) {
        return json.contains(name) && json[name].is_null() ? false : boolean_or(json, name, fallback, path);
    };
    c.vocab_size = integer_or(json, "vocab_size", 50432, 1, kMaxVocab, path);
    c.hidden_size = c.embedding_size = integer_or(json, "hidden_size", 6144, 1, kMaxHidden, path);
    c.layers = integer_or(json, "num_hidden_layers", 44, 1, kMaxLayers, path);
    c.heads = c.kv_heads = integer_or(json, "num_attention_heads", 64, 1, kMaxHeads, path);
    c.intermediate_size = integer_or(json, "intermediate_size", 24576, 1, kMaxIntermediate, path);
    c.defaulted_sizes = defaulted_fields(json, {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                                "intermediate_size"});
    if (c.hidden_size % c.heads != 0)
        throw Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {}{}", c.hidden_size, c.heads,
                                c.defaulted_sizes),
                    path);
    c.head_size = c.hidden_size / c.heads;
    // transformers' rotary setup takes a config's head_dim, when there is one, as the head size it rotates a fraction
    // of (the attention's heads stay hidden_size / num_attention_heads wide).
    const int rotary_head = integer_or(json, "head_dim", c.head_size, 1, kMaxHidden, path);
    const double rotary_pct = real_or(json, "rotary_pct", 0.25, 0.0, 1.0, path);
    c.rotary_dims = static_cast<int>(rotary_head * rotary_pct);  // Python's int(): toward zero
    if (c.rotary_dims % 2 != 0)
        throw Error(fmt::format("rotary_pct {} of head size {} rotates {} features per head; an odd count is not "
                                "supported (rotary positions turn pairs)",
                                rotary_pct, rotary_head, c.rotary_dims),
                    path);
    if (c.rotary_dims > c.head_size)
        throw Error(fmt::format("head_dim {} × rotary_pct {} rotates {} features of heads {} wide", rotary_head, rotary_pct,
                                c.rotary_dims, c.head_size),
                    path);
    c.rope_theta = real_or(json, "rotary_emb_base", 10000.0, 1.0, 1e12, path);
    if (present(json, "rope_scaling")) read_rope_scaling(json["rope_scaling"], path, c);
    c.activation = string_or(json, "hidden_act", "gelu", path);
    c.max_position_embeddings = integer_or(json, "max_position_embeddings", 2048, 1, kMaxPositions, path);
    c.layer_norm_eps = real_or(json, "layer_norm_eps", 1e-5, 1e-30, 1.0, path);
    c.parallel_residual = null_or_boolean("use_parallel_residual", true);
    c.qkv_bias = c.output_bias = null_or_boolean("attention_bias", true);
    c.mlp_bias = true;
    c.tie_word_embeddings = boolean_or(json, "tie_word_embeddings", false, path);
    c.pad_token_id = -1;  // embed_in has no padding row
}

}  // namespace

std::string HfConfig::position_offset_note() const {
    return position_offset > 0 ? fmt::format(" {} less RoBERTa's offset {}", max_position_embeddings, position_offset) : "";
}

bool is_decoder_model_type(const std::string& model_type) {
    return model_type == "gpt2" || model_type == "gpt_neox" || is_llama_family(model_type);
}
bool is_decoder(const HfConfig& config) { return is_decoder_model_type(config.model_type); }
const char* const kSupportedActivations = "gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, relu or silu";
bool is_supported_activation(const std::string& name) {
    return name == "gelu" || name == "gelu_new" || name == "gelu_fast" || name == "gelu_pytorch_tanh" || name == "relu" ||
           name == "silu";
}
bool is_llama_family(const std::string& model_type) {
    return model_type == "llama" || model_type == "mistral" || model_type == "qwen2";
}

HfConfig read_hf_config(const std::string& path) try {
    const nlohmann::json json = read_json_file(path, "config file");
    if (!json.is_object()) throw Error("config.json must hold a JSON object", path);
    HfConfig c;
    c.path = path;
    c.model_type = string_or(json, "model_type", "", path);
    c.initializer_range = real_or(json, "initializer_range", 0.02, 0.0, 10.0, path);
    if (!is_decoder(c)) {
        c.vocab_size = integer(json, "vocab_size", 1, kMaxVocab, path);
        c.layer_norm_eps = real_or(json, "layer_norm_eps", 1e-12, 1e-30, 1.0, path);
        // RobertaConfig's default pad is 1 (<pad> after <s>); BERT's, ALBERT's and XLNet's 0.
        c.pad_token_id = integer_or(json, "pad_token_id", c.model_type == "roberta" ? 1 : 0, 0, c.vocab_size - 1, path);
    }
    if (c.model_type == "bert" || c.model_type == "roberta" || c.model_type == "albert") {
        c.hidden_size = integer(json, "hidden_size", 1, kMaxHidden, path);
        c.layers = integer(json, "num_hidden_layers", 1, kMaxLayers, path);
        c.heads = integer(json, "num_attention_heads", 1, kMaxHeads, path);
        c.intermediate_size = integer(json, "intermediate_size", 1, kMaxIntermediate, path);
        c.max_position_embeddings = integer_or(json, "max_position_embeddings", 512, 1, kMaxPositions, path);
        c.type_vocab_size = integer_or(json, "type_vocab_size", 2, 1, kMaxTokenTypes, path);
        c.defaulted_sizes = defaulted_fields(json, {"max_position_embeddings", "type_vocab_size"});
        // AlbertConfig's default is gelu_new, BertConfig's and RobertaConfig's gelu.
        c.activation = string_or(json, "hidden_act", c.model_type == "albert" ? "gelu_new" : "gelu", path);
        c.embedding_size = c.model_type == "albert" ? integer(json, "embedding_size", 1, kMaxHidden, path) : c.hidden_size;
        c.hidden_groups = integer_or(json, "num_hidden_groups", 1, 1, kMaxLayers, path);
        if (integer_or(json, "inner_group_num", 1, 1, kMaxLayers, path) != 1)
            throw Error("ALBERT with inner_group_num != 1 is not supported", path);
        // An explicit null means no position embeddings at all in transformers (its `== "absolute"` test fails).
        if (json.contains("position_embedding_type") && json["position_embedding_type"].is_null())
            throw Error("position_embedding_type null (no position embeddings) is not supported (only \"absolute\")", path);
        if (const std::string type = string_or(json, "position_embedding_type", "absolute", path); type != "absolute")
            throw Error("position_embedding_type \"" + printable(type, 40) + "\" is not supported (only \"absolute\")",
                        path);
        // is_decoder makes BERT and RoBERTa causal (their *ForCausalLM); ALBERT ignores it.
        if (c.model_type != "albert" && boolean_or(json, "is_decoder", false, path))
            throw Error("is_decoder true (a causal " + std::string(c.model_type == "bert" ? "BERT" : "RoBERTa") +
                            ", as its ForCausalLM) is not supported",
                        path);
        if (c.hidden_size % c.heads != 0)
            throw Error(fmt::format("hidden_size {} is not divisible by num_attention_heads {}", c.hidden_size, c.heads), path);
        c.head_size = c.hidden_size / c.heads;
        if (c.model_type == "roberta") {
            c.position_offset = c.pad_token_id + 1;
            if (c.position_offset >= c.max_position_embeddings)
                throw Error(fmt::format("max_position_embeddings {} leaves no position after pad_token_id {} (RoBERTa "
                                        "numbers positions from pad_token_id + 1)",
                                        c.max_position_embeddings, c.pad_token_id),
                            path);
        }
    } else if (c.model_type == "distilbert") {
        // DistilBertConfig: dim, n_layers, n_heads, hidden_dim, activation; LayerNorm eps fixed at 1e-12; no token types.
        c.hidden_size = c.embedding_size = integer(json, "dim", 1, kMaxHidden, path);
        c.layers = integer(json, "n_layers", 1, kMaxLayers, path);
        c.heads = integer(json, "n_heads", 1, kMaxHeads, path);
        c.intermediate_size = integer(json, "hidden_dim", 1, kMaxIntermediate, path);
        c.max_position_embeddings = integer_or(json, "max_position_embeddings", 512, 1, kMaxPositions, path);
        c.defaulted_sizes = defaulted_fields(json, {"max_position_embeddings"});
        c.activation = string_or(json, "activation", "gelu", path);
        c.sinusoidal_positions = boolean_or(json, "sinusoidal_pos_embds", false, path);
        c.layer_norm_eps = 1e-12;
        c.type_vocab_size = 0;
        if (c.hidden_size % c.heads != 0)
            throw Error(fmt::format("dim {} is not divisible by n_heads {}", c.hidden_size, c.heads), path);
        c.head_size = c.hidden_size / c.heads;
    } else if (c.model_type == "xlnet") {
        c.hidden_size = integer(json, "d_model", 1, kMaxHidden, path);
        c.layers = integer(json, "n_layer", 1, kMaxLayers, path);
        c.heads = integer(json, "n_head", 1, kMaxHeads, path);
        // XLNetConfig sets d_head = d_model // n_head itself (a d_head given must agree).
        if (!present(json, "d_head") && c.hidden_size % c.heads != 0)
            throw Error(fmt::format("d_model {} is not divisible by n_head {}", c.hidden_size, c.heads), path);
        c.head_size = integer_or(json, "d_head", c.hidden_size / c.heads, 1, kMaxHidden, path);
        c.intermediate_size = integer(json, "d_inner", 1, kMaxIntermediate, path);
        c.activation = string_or(json, "ff_activation", "gelu", path);
        c.clamp_len = integer_or(json, "clamp_len", -1, -1, kMaxPositions, path);
        c.embedding_size = c.hidden_size;
        if (string_or(json, "attn_type", "bi", path) != "bi") throw Error("only attn_type 'bi' is supported", path);
        if (boolean_or(json, "bi_data", false, path)) throw Error("bi_data is not supported", path);
        // As Hugging Face's XLNetConfig: d_head must be d_model / n_head.
        if (c.hidden_size % c.heads != 0 || c.head_size != c.hidden_size / c.heads)
            throw Error(fmt::format("d_head {} must equal d_model {} / n_head {}", c.head_size, c.hidden_size, c.heads), path);
    } else if (c.model_type == "gpt2") {
        read_gpt2_fields(json, path, c);
    } else if (c.model_type == "gpt_neox") {
        read_gpt_neox_fields(json, path, c);
    } else if (is_llama_family(c.model_type)) {
        read_llama_fields(json, path, c);
    } else {
        throw Error("unknown model_type '" + printable(c.model_type, 40) +
                        "' (expected bert, roberta, distilbert, albert, xlnet, gpt2, gpt_neox, llama, mistral or qwen2)",
                    path);
    }
    if (!is_supported_activation(c.activation))
        throw Error("unsupported activation '" + printable(c.activation, 40) + "' (expected " + kSupportedActivations + ")",
                    path);
    // The parameter budget, in double (no overflow): embeddings, then the layers (ALBERT shares one).
    if (is_decoder(c)) {
        const double h = c.hidden_size, attention_width = double(c.heads) * c.head_size,
                     kv_width = double(c.kv_heads) * c.head_size;
        const bool two_matrices = c.model_type == "gpt2" || c.model_type == "gpt_neox";  // no gate
        const double mlp = (two_matrices ? 2.0 : 3.0) * h * c.intermediate_size;
        const double parameters = (double(c.vocab_size) + (c.model_type == "gpt2" ? c.max_position_embeddings : 0)) * h +
                                  double(c.layers) * (2.0 * h * attention_width + 2.0 * h * kv_width + mlp);
        if (parameters > kMaxParameters)
            throw Error(fmt::format("config describes about {:.3g} parameters, more than the limit of {:.3g}", parameters,
                                    kMaxParameters),
                        path);
        return c;
    }
    const double h = c.hidden_size, e = c.embedding_size;
    const double embeddings = (static_cast<double>(c.vocab_size) + c.max_position_embeddings + c.type_vocab_size) * e + e * h;
    const double layer = 4.0 * h * h + 2.0 * h * c.intermediate_size + 2.0 * c.heads * c.head_size * h;
    const double parameters = embeddings + (c.model_type == "albert" ? 1.0 : static_cast<double>(c.layers)) * layer;
    if (parameters > kMaxParameters)
        throw Error(fmt::format("config describes about {:.3g} parameters, more than the limit of {:.3g}", parameters,
                                kMaxParameters),
                    path);
    return c;
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, path);
}

}  // namespace rankscope
