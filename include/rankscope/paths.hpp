#pragma once
// The path decomposition (SPEC.md §3, Theorem 2.1) and path statistics.
//
// A path picks, in each layer l, one head h_l (or the skip "−" when the layer has one). Without LN and MLP:
//   SAN(X) = Σ_paths P_path X W_path + 1 bᵀ,  P_path = P^L_{h_L} ··· P^1_{h_1} (latest layer on the LEFT),
//   W_path = W^1_{h_1} ··· W^L_{h_L},  W_h = W_V,h W_O,h,  a skip contributes the identity to both.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rankscope/san.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct PathCheck {
    double paths = 0;              // number of paths enumerated: H^L, or (H+1)^L with skips
    double max_abs_error = 0;      // max |Σ_paths ... − forward output|
    double max_abs_output = 0;     // scale of the output, for a relative reading
};
// Enumerates every path of `network` on input x [B, n, d]. Throws when a layer has LN or an MLP, or when there are
// more than `max_paths` paths.
PathCheck check_path_decomposition(San& network, const at::Tensor& x, double max_paths = 1e6);

struct PathLengthRow {
    int length = 0;             // k: number of layers where the path goes through a head
    double count = 0;           // N(k) = C(L, k) H^k
    double share = 0;           // N(k) / (H + 1)^L  (Binomial(L, H/(H+1)))
    double alpha_share = -1;    // Σ over paths of length k of Π_l (skip ? α_l : (1 − α_l)/H); −1 without α
};
// Path-length distribution with skips; alpha (size L, each in [0, 1]) weights the skip branch of each layer.
std::vector<PathLengthRow> path_length_distribution(int layers, int heads, const std::vector<double>& alpha = {});
double mean_path_length(const std::vector<PathLengthRow>& rows, bool alpha_weighted);

struct NamedArchitecture {
    const char* name;
    int layers, heads;
};
// SPEC.md E6: BERT-base, DistilBERT, MobileBERT, BERT-large, ViT-H, T5-3B, T5-11B, GPT-3, DeiT-T.
const std::vector<NamedArchitecture>& known_architectures();

struct PathProductSample {
    int length = 0;
    int draw = 0;
    int sample = 0;               // which batch item
    std::vector<int> layers;      // ascending (forward order)
    std::vector<int> heads;
    double relative_residual = 0; // rank-1 relative residual, composite norm, of A_{l_k} ··· A_{l_1} (the paper's)
    // ||A − SVD₁(A)||_F / ||A||_F: a true distance to the nearest rank-1 matrix (Eckart–Young), always in [0, 1]. The
    // composite value above can exceed 1: SVD₁ is the best rank-1 matrix in the Frobenius and spectral norms only.
    double relative_residual_frobenius = 0;
};
// Every patterns[l] a float [B, H, n, n] tensor of patterns[0]'s shape (the first part of check_attention_patterns,
// for a caller that needs the shape before it reads the mask); errors name where_of(l).
void check_pattern_shapes(const std::vector<at::Tensor>& patterns, const std::function<std::string(std::size_t)>& where_of);
// What sample_path_products takes, checked: every patterns[l] a finite float [B, H, n, n] tensor of patterns[0]'s
// shape, each real token's row (every row without a mask) an attention row (first_non_attention_row,
// attention_rows.hpp) within the rounding of a softmax over n keys (sums within max(1e-4, n·eps) of the stored dtype),
// and `attention_mask`, when defined, a [B, n] tensor of 0 and 1 with at least kMinRealTokens real tokens a sample
// (check_attention_mask, models.hpp).
// Errors name `where_of(l)` (the pattern's file and tensor, or Python's "patterns[1]") and the row. Other matrices
// were sampled as if they were attention: NaN rows gave a relative residual of 0, products of matrices that are
// not attention measure nothing the paper speaks of.
// `stored_epsilons`, when not empty, gives each layer's stored dtype epsilon where the tensor was widened before it
// came here (Python's bfloat16 tensors reach the engine as float32).
void check_attention_patterns(const std::vector<at::Tensor>& patterns, const at::Tensor& attention_mask,
                              const std::function<std::string(std::size_t)>& where_of, const std::string& mask_where,
                              const std::vector<double>& stored_epsilons = {});

// patterns[l]: [B, H, n, n] attention of layer l (check_attention_patterns first). For k = 1..L, `draws` times: k distinct layers, one random head
// each, a random batch item; the product in FORWARD order (later layers on the left). With `attention_mask` [B, n]
// (1 = real token), each pattern is restricted to the sample's real tokens (rows and columns) before the product.
std::vector<PathProductSample> sample_path_products(const std::vector<at::Tensor>& patterns, int draws,
                                                    std::uint64_t seed, const at::Tensor& attention_mask = {});

// "2 5 7": a path's layers or heads as one CSV cell.
std::string join_indices(const std::vector<int>& indices);
// `paths sample`'s paths.csv: length, draw, sample, layers, heads, relative_residual.
Table path_samples_table(const std::vector<PathProductSample>& samples);

}  // namespace rankscope
