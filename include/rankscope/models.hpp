#pragma once
// Hugging Face architectures as torch::nn modules whose parameter names equal the checkpoint names, with the paper's
// surgery (SPEC.md §4 E1) as explicit options: the encoders BERT, RoBERTa, DistilBERT, ALBERT, XLNet, and the decoders
// GPT-2, GPT-NeoX (Pythia) and the Llama family (Llama, Mistral, Qwen2: one module, told apart by config.json).
//
//   auto model = load_hf_model("path/to/bert-base-cased");  // config.json + model.safetensors, or a sharded
//                                                           // model.safetensors.index.json; F32/F16/BF16 weights
//   auto random = make_hf_model(read_hf_config("config.json"), 0);  // the library's from_config init, seed 0
//   Recorder recorder;
//   model->forward(batch, Surgery{}, &recorder);   // hook_embed, blocks.{l}.hook_resid_post, blocks.{l}.attn.hook_pattern
//
// Dimension legend: B batch, n tokens, d hidden size, H heads.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/recorder.hpp"

namespace rankscope {

class SafetensorsFile;  // rankscope/io.hpp

// The fields of config.json that the architectures use (Hugging Face's field names and defaults; see hf_config.cpp).
struct HfConfig {
    std::string model_type;       // "bert", "roberta", "distilbert", "albert", "xlnet", "gpt2", "gpt_neox", "llama",
                                  // "mistral", "qwen2"
    std::string path;             // where it was read from ("" when built in code)
    int vocab_size = 0;
    int hidden_size = 0;          // d (XLNet: d_model)
    int embedding_size = 0;       // ALBERT's factorised embedding E (0 = hidden_size)
    int layers = 0;               // num_hidden_layers / n_layer
    int heads = 0;                // num_attention_heads / n_head
    int head_size = 0;            // d / heads (XLNet: d_head)
    int intermediate_size = 0;    // intermediate_size / d_inner
    int max_position_embeddings = 512;
    // RoBERTa numbers the positions of the tokens that are not pad_token_id from pad_token_id + 1 (Hugging Face's
    // create_position_ids_from_input_ids), so its 514 position embeddings hold 512 tokens; 0 for the others.
    int position_offset = 0;
    int type_vocab_size = 2;          // 0: no token types (DistilBERT)
    bool sinusoidal_positions = false;  // DistilBERT's sinusoidal_pos_embds (a fixed table; init computes it)
    int hidden_groups = 1;        // ALBERT num_hidden_groups (only 1 is supported)
    double layer_norm_eps = 1e-12;
    double initializer_range = 0.02;
    std::string activation = "gelu";  // "gelu" (erf), "gelu_new", "gelu_fast" or "gelu_pytorch_tanh" (tanh approximation), "relu", "silu"
    int clamp_len = -1;               // XLNet
    int pad_token_id = 0;
    // ---- decoders (gpt2, gpt_neox, llama, mistral, qwen2) ----
    int kv_heads = 0;                 // num_key_value_heads (grouped-query attention; 0 = heads)
    double rope_theta = 10000.0;      // rotary base (Llama family; GPT-NeoX rotary_emb_base)
    // Rotary positions turn the first rotary_dims features of each head (GPT-NeoX: int(head size × rotary_pct)); the
    // rest pass unrotated. -1: the whole head (the Llama family).
    int rotary_dims = -1;
    // GPT-NeoX use_parallel_residual: y = x + attn(LN_1 x) + mlp(LN_2 x) (both read the layer input), instead of
    // h = x + attn(LN_1 x), y = h + mlp(LN_2 h).
    bool parallel_residual = false;
    // rope_scaling: "default" (none), "linear" (inverse frequencies / factor) or "llama3" (Llama 3.1's: wavelengths
    // above original_max_position_embeddings / low_freq_factor divided by factor, below .../ high_freq_factor kept,
    // smoothly interpolated between).
    std::string rope_type = "default";
    double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
    int rope_original_max_positions = 0;
    bool qkv_bias = false;            // q/k/v projections have biases (Llama attention_bias; Qwen2: always)
    bool output_bias = false;         // o_proj has a bias (Llama attention_bias; Qwen2: never)
    bool mlp_bias = false;            // gate/up/down projections have biases (Llama mlp_bias)
    bool tie_word_embeddings = false; // the LM head reuses the token embedding (not used by any measurement)
    int sliding_window = 0;           // Mistral / Qwen2 sliding-window attention: query i sees keys j with
                                      // 0 <= i - j < sliding_window (0 = no window)
    // Qwen2: the window applies to layer l if true (its layer_types, or layers >= max_window_layers); empty: to every
    // layer (Mistral).
    std::vector<bool> layer_sliding;
    // " (not in config.json, so their defaults: hidden_size, ...)" for the sizes config.json left out, or "": said with
    // a size that does not match the checkpoint.
    std::string defaulted_sizes;

    // Whether the sliding window (when there is one) applies to `layer`.
    bool sliding_at(int layer) const { return layer_sliding.empty() || layer_sliding[static_cast<std::size_t>(layer)]; }
    // Layer l's causal window: a query sees at most this many keys (itself included); 0 = no window.
    int window_at(int layer) const { return sliding_window > 0 && sliding_at(layer) ? sliding_window : 0; }

    // The most tokens a sample may have: max_position_embeddings less RoBERTa's offset (XLNet has no limit: relative
    // positions).
    int max_tokens() const { return max_position_embeddings - position_offset; }
    // " 514 less RoBERTa's offset 2" after "max_position_embeddings" in the limit's errors; "" without an offset.
    std::string position_offset_note() const;
};
// A decoder-only architecture (causal attention): gpt2, gpt_neox, llama, mistral, qwen2.
bool is_decoder(const HfConfig& config);
bool is_decoder_model_type(const std::string& model_type);
// The activations (config.json names) the architectures compute: gelu (erf), the tanh approximation under each of its
// names, relu, silu. kSupportedActivations lists them for messages.
bool is_supported_activation(const std::string& name);
extern const char* const kSupportedActivations;
// The Llama family, one module told apart by config.json: llama, mistral, qwen2.
bool is_llama_family(const std::string& model_type);
// The published configurations of bert-base-cased, albert-base-v2, xlnet-base-cased, gpt2 and pythia-160m (12 layers,
// 12 heads, d = 768; Pythia: GPT-NeoX's parallel block, rotary on 16 of each head's 64 features, vocabulary 50304),
// and two Llama-style ones of ours: llama-12l (12 layers, d = 768, 12 heads of 64, SwiGLU 2048, RMSNorm eps
// 1e-6, rope_theta 10000, vocabulary 32000, untied) and llama-gqa (the same with 4 key/value heads: 3 query heads share
// each), for random-init runs without a download. Throws for other names.
HfConfig builtin_hf_config(const std::string& name);
bool is_builtin_hf_config(const std::string& name);
// Their names: bert-base-cased, albert-base-v2, xlnet-base-cased, gpt2, pythia-160m, llama-12l, llama-gqa.
const std::vector<std::string>& builtin_hf_config_names();
// Whether a --model argument means the built-in configuration: a built-in name, unless a folder of that name here holds
// a config.json (a checkpoint: read first, as Hugging Face's from_pretrained does). A folder without one — an --out
// folder called gpt2 — does not hide the built-in.
bool names_builtin_hf_config(const std::string& argument);

// Reads and validates config.json; throws rankscope::Error naming the file for a missing field or an unknown
// model_type.
HfConfig read_hf_config(const std::string& path);

// The paper's surgery. remove_attention_skip: the attention block's output is LN(dense(attention)) without "+ input";
// remove_mlp: the feed-forward block with its residual and LN becomes the identity. official_compat reproduces the
// official code's ALBERT "no MLP" defect (GELU and the residual stay).
// Beyond the paper, the layers' LayerNorms (not the embedding's): Keep; Remove (identity); Freeze (the paper's affine
// model of LN: one mean and one standard deviation per sample over all its tokens and features, then γ, β — no
// token-dependent division, so LN can no longer change the rank structure).
// Pre-norm decoders (GPT-2, GPT-NeoX, Llama): remove_attention_skip turns x + attn(norm(x)) into attn(norm(x)); remove_mlp
// turns h + mlp(norm(h)) into h; the LayerNorm setting applies to every norm of the layers and the final norm. A
// parallel block (GPT-NeoX's use_parallel_residual) is one sum x + attn(LN_1 x) + mlp(LN_2 x): remove_attention_skip
// drops its x (the skip both branches share), remove_mlp its mlp term, so SAN is attn(LN_1 x) as in the sequential
// decoders and SAN+MLP is attn(LN_1 x) + mlp(LN_2 x). RMSNorm's
// Freeze is the same idea: one root mean square per sample over all its real tokens and features, then γ.
// bidirectional: decoders only — the same weights with every real token attending to every real token (no causal
// mask, no sliding window); padding stays masked. Encoders ignore it.
enum class LayerNormSurgery { Keep, Remove, Freeze };
struct Surgery {
    bool remove_attention_skip = false;
    bool remove_mlp = false;
    bool official_compat = false;
    LayerNormSurgery layer_norm = LayerNormSurgery::Keep;
    bool bidirectional = false;
};
// "keep", "remove", "freeze"
LayerNormSurgery parse_layer_norm_surgery(const std::string& text);
std::string to_string(LayerNormSurgery surgery);

struct ModelBatch {
    at::Tensor input_ids;       // [B, n] int64
    at::Tensor attention_mask;  // [B, n] int64, 1 = real token
    at::Tensor token_type_ids;  // [B, n] int64 (zeros when not given)
    // The caller gave token_type_ids. Only GPT-2 tells the two apart: transformers' GPT2Model adds the token
    // embedding of each given type id (zeros included) to its input, and nothing when none are given.
    bool token_types_given = false;
};
// Whether a record of the batch (`model --dump`, Python's batch dict) holds its token_type_ids: always, except GPT-2's
// when none were given (read back, given ones would change its input).
bool records_token_types(const ModelBatch& batch, const HfConfig& config);

// A batch given as token ids (e.g. from the user's own tokenizer): `input_ids` [B, n] (int32/int64) and optional
// `attention_mask` (0/1, default all ones; padding may sit anywhere, XLNet pads on the left) and `token_type_ids`
// (default 0) in one .safetensors. Every value is checked against `config` (vocabulary, token types, positions); a
// sample needs at least one real token. Errors name the file and tensor.
// The same limits hold for --text and --inputs (and the Python module): samples x tokens <= kMaxBatchTokens, samples x
// tokens^2 <= kMaxBatchAttentionEntries (hidden states grow with the first, attention maps with the second), checked
// before anything is allocated; and every sample has at least kMinRealTokens real tokens (one row has no spread: its
// relative residual is 0 whatever the model does).
constexpr double kMaxBatchTokens = 65536;
constexpr double kMaxBatchAttentionEntries = double(1 << 21);
constexpr std::int64_t kMinRealTokens = 2;
ModelBatch read_model_batch(const std::string& path, const HfConfig& config);
// The `attention_mask` a file holds beside other tensors (a `rankscope model --dump`), checked as read_model_batch checks
// it: integers, `shape` [B, n], 0 or 1, at least kMinRealTokens real tokens a sample. Undefined when the file holds none.
at::Tensor read_attention_mask(const SafetensorsFile& file, const std::vector<std::int64_t>& shape);
// An integer 0/1 [B, n] mask with at least `min_real_tokens` real tokens a sample (shape checked by the caller); a
// sample too short whatever the mask is named by `where_unmasked` (input_ids), one with too much masked by `where`.
void check_attention_mask(const at::Tensor& mask, const std::string& where, const std::string& where_unmasked,
                          std::int64_t min_real_tokens = kMinRealTokens);
// The same checks on token ids already in memory: input_ids a non-empty integer [B, n] tensor; attention_mask and
// token_type_ids of the same shape, or undefined (all ones, zeros). Returns int64 copies; errors name
// `where` + ":input_ids" (just "input_ids" when `where` is empty). A batch that is only run, not measured (Python's
// Model.forward), needs 1 real token a sample, not the measures' 2.
ModelBatch checked_model_batch(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                               const at::Tensor& token_type_ids, const HfConfig& config, const std::string& where,
                               std::int64_t min_real_tokens = kMinRealTokens);

class EncoderModel {
public:
    virtual ~EncoderModel() = default;
    virtual const HfConfig& config() const = 0;
    // Returns the last hidden state [B, n, d] (decoders: after the final norm); records hook_embed (= Hugging Face
    // hidden_states[0]),
    // blocks.{l}.hook_resid_post (= hidden_states[l+1]) and blocks.{l}.attn.hook_pattern [B, H, n, n]; also
    // blocks.{l}.hook_attn_out (the attention sublayer's output after the output projection, before the skip is added)
    // and blocks.{l}.hook_resid_pre (the skip branch it is added to: the layer's input; USE lite's layer 0: after its
    // 256 → 512 residual projection). Both feed the skip ratio α_l = ‖resid_pre‖ / (‖resid_pre‖ + ‖attn_out‖).
    // Decoders: blocks.{L-1}.hook_resid_post is the last layer's output BEFORE the final norm (as TransformerLens);
    // the final norm's output is ln_final.hook_normalized (= Hugging Face's last hidden_states entry, which has the
    // final norm applied). Positions count real tokens only (position = real tokens before this one), so padding on
    // either side leaves the real tokens' states unchanged; Hugging Face's generate() builds the same position ids.
    virtual at::Tensor forward(const ModelBatch& batch, const Surgery& surgery, Recorder* recorder) = 0;
    // Every surgery on the same batch: returns forward(batch, surgeries[i], recorders[i]) for each i (recorders[i] may
    // be null). The default runs them one after another; the decoders run layer-major (every surgery passes layer l
    // before layer l + 1), so a streamed model reads each layer once. The results are the same either way.
    virtual std::vector<at::Tensor> forward_all(const ModelBatch& batch, const std::vector<Surgery>& surgeries,
                                                const std::vector<Recorder*>& recorders);
    // The unmodified forward with autograd on (no recorder, no surgery): the last hidden state [B, n, d], for training
    // (rankscope pretrain). Takes at::linear rather than the oneDNN fast path and computes out of place. Models that
    // cannot be trained (USE lite, streamed decoders) throw.
    virtual at::Tensor forward_for_training(const ModelBatch& batch);
    // True when the layers are read from the checkpoint during the forward (load_hf_model_streamed).
    virtual bool streamed() const { return false; }
    // Every parameter with its checkpoint name.
    virtual std::vector<std::pair<std::string, at::Tensor>> parameters() = 0;
    // Moves every parameter to `device` (once, explicitly; models are made on the CPU from their seed or file).
    // forward() then expects its batch on that device (batch_on) and makes every tensor there.
    virtual void to(const at::Device& device) = 0;
    virtual at::Device device() const = 0;
};

// The batch's three tensors on `device` (an explicit copy; the same tensors when already there).
ModelBatch batch_on(const ModelBatch& batch, const at::Device& device);

// The oneDNN fast path of the architectures' linear layers; false runs the at::linear reference. On by default only
// when libtorch has no MKL (where oneDNN's GEMM is the faster; src/models/common.cpp has the numbers).
void set_linear_fast_path(bool enabled);
bool linear_fast_path_enabled();

// Random init as the library's from_config: normal(0, initializer_range) weights, zero biases, unit LayerNorm, drawn
// in the order of parameters() from the global generator seeded with `seed`. Making the modules draws nothing else
// (before 2026-12-05 their discarded default reset drew first, so a seed gave other weights; manifest.json's git_sha
// tells the two apart).
std::unique_ptr<EncoderModel> make_hf_model(const HfConfig& config, std::uint64_t seed);
// config.json + model.safetensors (or model.safetensors.index.json + the shards of its weight_map) from a folder;
// F32/F16/BF16/F64 tensors (converted to float32), names bare or prefixed (bert., albert., transformer., model.);
// every parameter's presence and shape are checked. Errors name the file (shard, index) and the tensor. Nothing is
// drawn; a BERT or ALBERT pooler absent from the checkpoint (no measurement uses it) is zero.
std::unique_ptr<EncoderModel> load_hf_model(const std::string& directory);
// The same folder read one layer at a time (decoders: gpt2, gpt_neox, llama, mistral, qwen2): the forward reads each layer from
// the memory-mapped shards when it reaches it, runs every surgery through it and frees it (its pages are handed back to
// the page cache), so the peak memory is about one layer in float32, the token-embedding rows in use, the other
// embeddings and the activations. Every tensor's presence, shape and dtype are checked before any work, a layer's
// values (finite) when it is read. Encoders are an Error (they are small enough to load whole). parameters() of a
// streamed model throws (it never holds them all).
std::unique_ptr<EncoderModel> load_hf_model_streamed(const std::string& directory);
// Bytes the folder's weights take once converted to float32 (from the checkpoint headers; no weight is read).
std::int64_t hf_model_float32_bytes(const std::string& directory);

}  // namespace rankscope
