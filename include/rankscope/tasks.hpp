#pragma once
// Trained attention networks of SPEC.md §4 E3–E5: the task data, the per-token model, training with libtorch's Adam,
// checkpoints keyed by every setting, and path-restricted evaluation.
//
//   TaskSettings settings = default_task_settings("sort");     // the paper's defaults
//   TaskSplits data = make_task_data(settings);                 // train + eval, reproducible from settings.seed
//   TrainedTask trained = train_or_load(settings, data, "checkpoints/");
//   double accuracy = token_accuracy(trained.model, data.eval);
//
// Dimension legend: B sequences, n tokens, d d_model, c classes (or output coordinates for the circle).
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "rankscope/san.hpp"
#include "rankscope/task_settings.hpp"

namespace rankscope {

// ---- data --------------------------------------------------------------------------------------------------------
struct TaskBatch {
    at::Tensor inputs;    // int64 [B, n] token ids, or float [B, n, features] coordinates
    at::Tensor targets;   // int64 [B, n] class per token (−1 = ignored padding), or float [B, n, 2] (circle)
    at::Tensor key_bias;  // undefined, or additive attention bias [B, 1, 1, n] (0 real key, −1e4 padding)
    std::int64_t size() const { return inputs.size(0); }
    TaskBatch slice(std::int64_t begin, std::int64_t end) const;
    TaskBatch take(const at::Tensor& indices) const;  // the items at int64 `indices` [k], in that order
    TaskBatch to(const at::Device& device) const;      // an explicit copy there (the same tensors when already there)
};
struct TaskSplits {
    TaskBatch train, eval;
    int classes = 0;      // 0 for regression (circle)
    int input_vocab = 0;  // token vocabulary (sort, memorize) or input features (hull, circle)
};

// Sorting (E4): integers uniform in [0, vocab), repeats allowed; target = the sorted sequence, position by position.
TaskBatch make_sort_data(int count, int length, int vocab, std::mt19937_64& rng);
// Convex hull (E4): `points` uniform in [0, 10]² plus one N(0, 3.3²) offset shared by the set; target 1 for hull vertices.
TaskBatch make_hull_data(int count, int points, std::mt19937_64& rng);
// Vertices of the convex hull of 2-D points (Andrew's monotone chain; collinear boundary points are not vertices).
std::vector<bool> hull_vertices(const std::vector<double>& x, const std::vector<double>& y);
// Circle (E3): `points` equally spaced on a circle of radius 0.3; item i has two tokens, points i and i + m on the two
// half-circle arcs (m = points/2 − 1 items); target = the next point on each arc.
TaskBatch make_circle_data(int points);
// Memorization (E4): the first `pairs` sentence pairs of an RTE-style .tsv tokenised as [CLS] a [SEP] b [SEP]
// (truncated to max_tokens, padded with 0 and masked); every real token gets a uniform random label in {0, 1}.
// `token_ids` is the tokenised text, one vector per pair (see tokenize_sentence_pairs).
TaskBatch make_memorization_data(const std::vector<std::vector<int>>& token_ids, int max_tokens, std::mt19937_64& rng);
std::vector<std::pair<std::string, std::string>> read_sentence_pairs(const std::string& tsv_path, int pairs);

// ---- model -------------------------------------------------------------------------------------------------------
struct TaskModelConfig {
    std::string input = "tokens";  // "tokens" (embed.W_E + pos_embed.W_pos) or "coordinates" (embed.W_in)
    int vocab = 0;                 // tokens: vocabulary size; coordinates: input features
    int positions = 0;             // tokens: learned positions (0 = none)
    bool two_layer_embedding = false;  // coordinates: W_in → GELU → W_hidden (the paper's hull "ffn2")
    bool embedding_layer_norm = true;  // ln_embed after the embedding
    int outputs = 2;               // classes, or output features (circle)
    SanConfig encoder;             // blocks.*; layers, heads, d_model, skip, MLP, LayerNorm
    // How the weights are drawn: "normal" (rankscope's: every W_* ~ N(0, 1/fan_in), attention and MLP biases
    // N(0, 0.1²), embedding and unembedding biases 0) or "uniform" (PyTorch's nn.Linear default: every W_* and its
    // b_* ~ U(−1/√fan_in, 1/√fan_in)). Token and position embeddings stay N(0, 1), LayerNorm at (1, 0) in both.
    std::string init = "normal";
    nlohmann::json to_json() const;
};

// embed → encoder (San blocks) → unembed, with TransformerLens names: embed.W_E [vocab, d], pos_embed.W_pos [n, d],
// embed.W_in [f, d] (+ b_in, W_hidden, b_hidden), ln_embed.w/b, blocks.{l}.*, unembed.W_U [d, c], unembed.b_U [c].
struct TaskModelImpl : torch::nn::Module {
    explicit TaskModelImpl(TaskModelConfig config);
    at::Tensor embed(const at::Tensor& inputs);  // [B, n] or [B, n, f] → [B, n, d]
    at::Tensor unembed(const at::Tensor& hidden);  // [B, n, d] → [B, n, c]
    // Whole model; records hook_embed, blocks.{l}.* and hook_final when a recorder is given.
    // The batch must be on the model's device (TaskBatch::to); the functions below that take a model and a batch move
    // the batch there themselves, once.
    at::Tensor forward(const TaskBatch& batch, Recorder* recorder = nullptr);
    at::Device device() const { return W_U.device(); }
    TaskModelConfig config;
    San encoder{nullptr};
    at::Tensor W_E, W_pos, W_in, b_in, W_hidden, b_hidden, W_U, b_U;
    NormLayer ln_embed{nullptr};
};
TORCH_MODULE(TaskModel);

std::int64_t parameter_count(TaskModel& model);

// ---- settings, training, checkpoints -----------------------------------------------------------------------------
TaskModelConfig model_config_for(const TaskSettings& settings, const TaskSplits& data);
// Generates train and eval data from settings.seed (memorize: tokenises settings.text with a SentencePiece model
// trained on that text, in `work_dir`).
TaskSplits make_task_data(const TaskSettings& settings, const std::filesystem::path& work_dir);

struct TrainedTask {
    TaskModel model{nullptr};
    std::vector<EpochRecord> history;  // the training's epochs: trained now, or stored in the checkpoint reused
    std::string checkpoint;            // path written or read
    bool reused = false;
    // Whether `history` and `train_seconds` are known: false only for a checkpoint an older build wrote without them
    // (a rerun into the same folder wrote an empty training.csv and lost the training time).
    bool history_known = false;
    double train_seconds = 0;
};
// Trains with Adam (settings' learning rate and weight decay), cross-entropy over real tokens (or summed squared error
// for the circle). The items are visited in the data's order as the paper did, or reshuffled every epoch when
// settings.shuffle; the learning rate follows settings.lr_schedule; a regression task stops after the first epoch whose
// training-set MSE is below settings.target_mse (when > 0). Shows a progress bar with loss, accuracy and ETA on a
// terminal. Reuses `<checkpoint_dir>/<task>-<key>.safetensors` when it exists and its stored settings
// equal these exactly (otherwise an error: a key collision never silently reuses other settings); `retrain` ignores it.
// A NaN/Inf training loss stops training with an Error naming the epoch and step (no checkpoint is written), unless
// `allow_nonfinite`.
TrainedTask train_or_load(const TaskSettings& settings, const TaskSplits& data, const std::filesystem::path& checkpoint_dir,
                          bool retrain = false, bool allow_nonfinite = false);
// Several models whose settings differ only in the seed (checked), each with its own data (of one shape), trained as
// one stacked model: every operator runs once per step for all of them, so S seeds cost little more than one at the
// task models' sizes. Each model gets exactly its own gradients and Adam updates (its own initialisation, data, epoch
// order, input noise and stopping epoch), as train_or_load would give it alone, up to float32 rounding; each is
// reused from or saved to its own checkpoint. train_or_load is this with one seed.
std::vector<TrainedTask> train_or_load_seeds(const std::vector<TaskSettings>& settings, const std::vector<TaskSplits>& data,
                                             const std::filesystem::path& checkpoint_dir, bool retrain = false,
                                             bool allow_nonfinite = false);
// The parameters, with the settings, the training's epochs and seconds as metadata (train_or_load restores them).
void save_task_checkpoint(const std::string& path, TaskModel& model, const TaskSettings& settings,
                          const std::vector<EpochRecord>& history = {}, double train_seconds = 0);
void load_task_checkpoint(const std::string& path, TaskModel& model, const TaskSettings& settings);

// Token accuracy over targets ≠ −1 (classification).
double token_accuracy(const at::Tensor& logits, const at::Tensor& targets);
double token_accuracy(TaskModel& model, const TaskBatch& batch);
// Accuracy of always predicting the most frequent training label, measured on `eval`.
double majority_accuracy(const TaskBatch& train, const TaskBatch& eval, int classes);
// Accuracy of predicting, at each position, the most frequent training label at that position (ties: the smaller
// label; a position no training item reaches: the overall majority), measured on `eval`. Like the majority level it
// never looks at the input, but it knows the position: on sort the first sorted digit is usually 0, the last 9, and
// this level is ≈0.35 where the majority class is 0.1.
double position_majority_accuracy(const TaskBatch& train, const TaskBatch& eval, int classes);

// ---- paths (E4) --------------------------------------------------------------------------------------------------
// A path picks, per layer, a head in [0, H) or the skip (= H). Exactly `length` layers use a head.
std::vector<int> random_path(int layers, int heads, int length, std::mt19937_64& rng);
// LayerNorm(Σ_paths path(x)) (LayerNorm without affine parameters, as the paper's ensemble), then unembed → logits.
// Along a path a skip layer passes its input on; a head layer is Block::forward_head(x, head, sub_path).
at::Tensor path_ensemble_logits(TaskModel& model, const TaskBatch& batch, const std::vector<std::vector<int>>& paths,
                                bool sub_path);

struct PathEffectivenessRow {
    std::string task;
    bool sub_path = false;
    int length = 0, n_paths = 0, repeat = 0;
    double accuracy = 0;
    std::uint64_t seed = 0;  // the model's (and the path draws') seed
};
// For k = 0..L (k = L only in a model without skips), n in n_paths_list, `repeats` draws each: accuracy of the
// ensemble of n random paths of length k.
// The paths are drawn from `seed` (one stream per cell); the rows carry it.
std::vector<PathEffectivenessRow> path_effectiveness(TaskModel& model, const TaskBatch& batch, const std::string& task,
                                                     const std::vector<int>& n_paths_list, int repeats, bool sub_path,
                                                     std::uint64_t seed);

// ---- residual per layer (E5) ------------------------------------------------------------------------------------
struct LayerResidual {
    int layer = 0;  // 0 = after the embedding, l = after block l
    double mean = 0, std = 0;
    int n = 0;
};
// Relative residual (composite norm, mean centre) of each sample's real tokens after the embedding and each block.
std::vector<LayerResidual> residual_by_layer(TaskModel& model, const TaskBatch& batch);

// ---- circle (E3) -------------------------------------------------------------------------------------------------
// Feeds the model its own output for `steps` steps from `start` [1, 2, 2]; returns [steps, 2 tokens, 2 coordinates]
// (row 0 = start), as computed: a state that runs away grows (to inf or NaN), and measure_rollout stops at the first
// beyond ±kRunawayCoordinate (e3_circle.hpp).
at::Tensor circle_rollout(TaskModel& model, const at::Tensor& start, int steps);

}  // namespace rankscope
