#pragma once
// Configurable self-attention networks (SPEC.md §1): pure SAN and its variants with skip connections, MLPs and
// LayerNorm, as torch::nn modules with TransformerLens parameter and hook names.
//
//   SanConfig config;                 // defaults below
//   config.block.attention_skip = true;
//   San network(config);              // random init from the global torch seed (torch::manual_seed)
//   Recorder recorder;
//   at::Tensor y = network->forward(x, &recorder);   // x: [batch, n, d_model]
//
// Dimension legend: B batch, n tokens, d d_model, H heads, k d_qk, v d_v, m MLP width.
// One layer (block l), in order:
//   a   = pre-LN ? LN1(X) : X
//   P_h = softmax_rows((a W_Q,h + 1 b_Q,hᵀ)(a W_K,h + 1 b_K,hᵀ)ᵀ / sqrt(k))                    [B, H, n, n]
//   A   = Σ_h P_h (a W_V,h + 1 b_V,hᵀ) W_O,h + 1 b_Oᵀ                                            [B, n, d]
//   M   = (attention skip ? X + α A : A), then LN1 for post-LN / affine-LN   (α = residual_scale, 1 by default)
//   Y   = MLP block on M likewise (W_in [d, m], ReLU or GELU, W_out [m, d], optional skip M + α MLP, LN2)
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "rankscope/recorder.hpp"

namespace rankscope {

enum class LayerNormKind {
    None,
    Post,    // LN(sublayer(X) [+ X]) as in BERT
    Pre,     // X [+] sublayer(LN(X)) as in GPT-2
    Affine,  // the paper's model of LN: (X − μ 11ᵀ)/σ ⊙ γ + β with μ, σ the mean and std of the WHOLE sample matrix,
             // so no token-dependent division (rows stay identical if they were)
};
enum class Activation { ReLU, GELU };

std::string to_string(LayerNormKind kind);  // "none", "post", "pre", "affine"
LayerNormKind parse_layer_norm(const std::string& text);

struct BlockConfig {
    bool attention_skip = false;  // X + SA(X)
    bool mlp = false;             // a per-token MLP after attention
    bool mlp_skip = false;        // M + MLP(M)
    Activation activation = Activation::ReLU;
    int mlp_width = 0;            // 0 = 4 · d_model
    LayerNormKind layer_norm = LayerNormKind::None;
    // α of the skip connections: X + α·SA(·) and M + α·MLP(·) (Noci et al. 2022 scale the branches by 1/√L to keep
    // tokens apart at depth). Only used where a skip is on.
    double residual_scale = 1.0;
};

struct SanConfig {
    int layers = 6;
    int heads = 1;
    int d_model = 32;
    int d_qk = 0;             // per head; 0 = d_model / heads
    int d_v = 0;              // per head; 0 = d_model / heads
    int tokens = 32;          // n, for random inputs
    bool biases = false;      // b_Q, b_K, b_V, b_O, b_in, b_out (drawn N(0, 0.1²) when on)
    double init_scale = 1.0;  // weights ~ N(0, init_scale² / fan_in)
    // W_Q and W_K ~ N(0, (init_scale · query_key_scale)² / fan_in): the attention logits grow as query_key_scale²
    // (large values make attention near one-hot, "entropy collapse"; small ones near uniform).
    double query_key_scale = 1.0;
    BlockConfig block;        // used for every layer unless per_layer is non-empty
    std::vector<BlockConfig> per_layer;
    BlockConfig block_at(int layer) const;
    int qk_dim() const { return d_qk > 0 ? d_qk : d_model / heads; }
    int v_dim() const { return d_v > 0 ? d_v : d_model / heads; }
    void validate() const;  // throws rankscope::Error on impossible sizes
};

// One multi-head attention layer; parameters per head as in TransformerLens.
struct AttentionImpl : torch::nn::Module {
    AttentionImpl(const SanConfig& config);
    // x: [B, n, d] → [B, n, d]; records blocks.{layer}.attn.hook_pattern [B, H, n, n].
    // key_bias (optional): additive [B, 1, 1, n], 0 for real keys and a large negative number for padding.
    at::Tensor forward(const at::Tensor& x, Recorder* recorder, int layer, const at::Tensor& key_bias = {});
    // Head h alone (SPEC.md E4): P_h (x W_V,h + 1 b_V,hᵀ) W_O,h + 1 b_Oᵀ — its attention, value slice and output
    // slice. With H = 1 this is forward().
    at::Tensor forward_head(const at::Tensor& x, int head, const at::Tensor& key_bias = {});
    // Attention patterns only: [B, H, n, n].
    at::Tensor pattern(const at::Tensor& x, const at::Tensor& key_bias = {});
    // W_h = W_V,h W_O,h: [H, d, d]; W_QK,h = W_Q,h W_K,hᵀ: [H, d, d].
    at::Tensor value_output_product();
    at::Tensor query_key_product();

    int heads, d_qk;
    at::Tensor W_Q, W_K, W_V, W_O;  // [H, d, k], [H, d, k], [H, d, v], [H, v, d]
    at::Tensor b_Q, b_K, b_V, b_O;  // [H, k], [H, k], [H, v], [d]
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
    MlpImpl(const SanConfig& config, const BlockConfig& block);
    at::Tensor forward(const at::Tensor& x);
    Activation activation;
    at::Tensor W_in, b_in, W_out, b_out;  // [d, m], [m], [m, d], [d]
};
TORCH_MODULE(Mlp);

// LayerNorm over the last dimension without affine parameters: (x − mean) / sqrt(var + eps).
at::Tensor plain_layer_norm(const at::Tensor& x, double eps = 1e-5);

// LayerNorm over features (true), or the paper's affine model (see LayerNormKind::Affine).
struct NormLayerImpl : torch::nn::Module {
    NormLayerImpl(int d_model, LayerNormKind kind);
    at::Tensor forward(const at::Tensor& x);
    LayerNormKind kind;
    at::Tensor w, b;  // γ, β: [d]
};
TORCH_MODULE(NormLayer);

struct BlockImpl : torch::nn::Module {
    BlockImpl(const SanConfig& config, const BlockConfig& block);
    at::Tensor forward(const at::Tensor& x, Recorder* recorder, int layer, const at::Tensor& key_bias = {});
    // The block restricted to one head (path evaluation, SPEC.md E4). With `sub_path` the block keeps its own skip
    // and LayerNorm: LN1(x + head_h(x)); without (the paper's --no_sub_path) only the head's output passes, through
    // a LayerNorm without affine parameters when the block has a LayerNorm: LN(head_h(x)). The MLP block, if any,
    // follows unchanged.
    at::Tensor forward_head(const at::Tensor& x, int head, bool sub_path, const at::Tensor& key_bias = {});
    // The MLP sub-block (identity when the block has no MLP), with its skip and LN2 as configured.
    at::Tensor mlp_block(const at::Tensor& mid, Recorder* recorder, int layer);
    // x + α·branch (α = config.residual_scale; exactly x + branch when α = 1).
    at::Tensor skip_add(const at::Tensor& x, const at::Tensor& branch) const;
    BlockConfig config;
    Attention attn{nullptr};
    Mlp mlp{nullptr};
    NormLayer ln1{nullptr}, ln2{nullptr};
};
TORCH_MODULE(Block);

struct SanImpl : torch::nn::Module {
    explicit SanImpl(SanConfig config);
    // x: [B, n, d]. Records hook_embed and, per block, hook_resid_pre, attn.hook_pattern, hook_attn_out,
    // hook_resid_mid, hook_mlp_out (when there is an MLP), hook_resid_post.
    at::Tensor forward(const at::Tensor& x, Recorder* recorder = nullptr, const at::Tensor& key_bias = {});
    SanConfig config;
    torch::nn::ModuleList blocks;  // of Block; parameter names blocks.{l}.attn.W_Q, ...
    Block block(int layer) const { return Block(blocks->ptr<BlockImpl>(static_cast<std::size_t>(layer))); }
};
TORCH_MODULE(San);

// Random N(0, 1) input [batch, tokens, d_model] in the network's dtype.
at::Tensor random_input(const SanConfig& config, int batch, at::ScalarType dtype);

}  // namespace rankscope
