#pragma once
// Hugging Face encoder architectures (BERT, ALBERT, XLNet) as torch::nn modules whose parameter names equal the
// checkpoint names, with the paper's surgery (SPEC.md §4 E1) as explicit options.
//
//   auto model = load_hf_model("path/to/bert-base-cased");          // config.json + model.safetensors
//   auto random = make_hf_model(read_hf_config("config.json"), 0);  // the library's from_config init, seed 0
//   Recorder recorder;
//   model->forward(batch, Surgery{}, &recorder);   // hook_embed, blocks.{l}.hook_resid_post, blocks.{l}.attn.hook_pattern
//
// Dimension legend: B batch, n tokens, d hidden size, H heads.
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "rankscope/recorder.hpp"

namespace rankscope {

// The fields of config.json that the three architectures use.
struct HfConfig {
    std::string model_type;       // "bert", "albert", "xlnet"
    std::string path;             // where it was read from ("" when built in code)
    int vocab_size = 0;
    int hidden_size = 0;          // d (XLNet: d_model)
    int embedding_size = 0;       // ALBERT's factorised embedding E (0 = hidden_size)
    int layers = 0;               // num_hidden_layers / n_layer
    int heads = 0;                // num_attention_heads / n_head
    int head_size = 0;            // d / heads (XLNet: d_head)
    int intermediate_size = 0;    // intermediate_size / d_inner
    int max_position_embeddings = 512;
    int type_vocab_size = 2;
    int hidden_groups = 1;        // ALBERT num_hidden_groups (only 1 is supported)
    double layer_norm_eps = 1e-12;
    double initializer_range = 0.02;
    std::string activation = "gelu";  // "gelu" (erf), "gelu_new" (tanh approximation), "relu"
    int clamp_len = -1;               // XLNet
    int pad_token_id = 0;
};
// The published configurations of bert-base-cased, albert-base-v2 and xlnet-base-cased (12 layers, 12 heads,
// d = 768), for random-init runs without a download. Throws for other names.
HfConfig builtin_hf_config(const std::string& name);
bool is_builtin_hf_config(const std::string& name);

// Reads and validates config.json; throws rankscope::Error naming the file for a missing field or an unknown
// model_type.
HfConfig read_hf_config(const std::string& path);

// The paper's surgery. remove_attention_skip: the attention block's output is LN(dense(attention)) without "+ input";
// remove_mlp: the feed-forward block with its residual and LN becomes the identity. official_compat reproduces the
// official code's ALBERT "no MLP" defect (GELU and the residual stay).
// Beyond the paper, the layers' LayerNorms (not the embedding's): Keep; Remove (identity); Freeze (the paper's affine
// model of LN: one mean and one standard deviation per sample over all its tokens and features, then γ, β — no
// token-dependent division, so LN can no longer change the rank structure).
enum class LayerNormSurgery { Keep, Remove, Freeze };
struct Surgery {
    bool remove_attention_skip = false;
    bool remove_mlp = false;
    bool official_compat = false;
    LayerNormSurgery layer_norm = LayerNormSurgery::Keep;
};
// "keep", "remove", "freeze"
LayerNormSurgery parse_layer_norm_surgery(const std::string& text);
std::string to_string(LayerNormSurgery surgery);

struct ModelBatch {
    at::Tensor input_ids;       // [B, n] int64
    at::Tensor attention_mask;  // [B, n] int64, 1 = real token
    at::Tensor token_type_ids;  // [B, n] int64
};

// A batch given as token ids (e.g. from the user's own tokenizer): `input_ids` [B, n] (int32/int64) and optional
// `attention_mask` (0/1, default all ones; padding may sit anywhere, XLNet pads on the left) and `token_type_ids`
// (default 0) in one .safetensors. Every value is checked against `config` (vocabulary, token types, positions); a
// sample needs at least one real token. Errors name the file and tensor.
ModelBatch read_model_batch(const std::string& path, const HfConfig& config);
// The same checks on token ids already in memory: input_ids a non-empty integer [B, n] tensor; attention_mask and
// token_type_ids of the same shape, or undefined (all ones, zeros). Returns int64 copies; errors name
// `where` + ":input_ids" (just "input_ids" when `where` is empty).
ModelBatch checked_model_batch(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                               const at::Tensor& token_type_ids, const HfConfig& config, const std::string& where);

class EncoderModel {
public:
    virtual ~EncoderModel() = default;
    virtual const HfConfig& config() const = 0;
    // Returns the last hidden state [B, n, d]; records hook_embed (= Hugging Face hidden_states[0]),
    // blocks.{l}.hook_resid_post (= hidden_states[l+1]) and blocks.{l}.attn.hook_pattern [B, H, n, n]; also
    // blocks.{l}.hook_attn_out (the attention sublayer's output after the output projection, before the skip is added)
    // and blocks.{l}.hook_resid_pre (the skip branch it is added to: the layer's input; USE lite's layer 0: after its
    // 256 → 512 residual projection). Both feed the skip ratio α_l = ‖resid_pre‖ / (‖resid_pre‖ + ‖attn_out‖).
    virtual at::Tensor forward(const ModelBatch& batch, const Surgery& surgery, Recorder* recorder) = 0;
    // Every parameter with its checkpoint name.
    virtual std::vector<std::pair<std::string, at::Tensor>> parameters() = 0;
};

// The oneDNN fast path of the architectures' linear layers (on by default); false runs the at::linear reference.
void set_linear_fast_path(bool enabled);

// Random init as the library's from_config: normal(0, initializer_range) weights, zero biases, unit LayerNorm.
std::unique_ptr<EncoderModel> make_hf_model(const HfConfig& config, std::uint64_t seed);
// config.json + model.safetensors from a folder; every parameter's presence and shape are checked.
std::unique_ptr<EncoderModel> load_hf_model(const std::string& directory);

}  // namespace rankscope
