#pragma once
// Settings of the trained tasks (SPEC.md §4 E3–E5) and the per-epoch training record, without libtorch: experiment
// headers (e3_circle.hpp) and the command line hold these as plain values.
//
//   TaskSettings s = default_task_settings("circle");   // the paper's defaults, with rankscope's circle recipe
//   s.seed = 7;
//   std::string key = s.checkpoint_key();               // a checkpoint is reused only for exactly these settings
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace rankscope {

struct TaskSettings {
    std::string task;  // "sort", "hull", "memorize", "circle"
    std::uint64_t seed = 2;
    int layers = 6, heads = 2, d_model = 48;
    bool skip = true;   // attention skip inside each layer (the paper's trained models are post-LN BERT layers)
    bool mlp = false;
    bool layer_norm = true;
    int epochs = 65, batch_size = 30;  // epochs: the budget (training may stop earlier at target_mse)
    double learning_rate = 1e-3, weight_decay = 0;  // the paper used 1e-5 (see default_task_settings)
    int train_count = 1000, eval_count = 200;
    int sequence_length = 8, vocab = 10;  // sort: length, value range; hull: points; memorize: max tokens, pieces
    std::string text;                     // memorize: the RTE .tsv
    // Training recipe. The paper's runs (and the defaults of sort, hull, memorize) visit the data in order with a
    // constant learning rate; the circle needs better (see default_task_settings).
    bool shuffle = false;                      // a new random order of the training items every epoch (from seed)
    std::string lr_schedule = "constant";      // "constant" or "cosine" (from learning_rate to 0 over `epochs`)
    double target_mse = 0;                     // regression: stop after the first epoch whose training-set MSE
                                               // (mean over coordinates, model in eval mode) is below this; 0 = never
    std::string init = "normal";               // weight draw: "normal" or "uniform" (PyTorch's nn.Linear default);
                                               // see TaskModelConfig::init. Part of the key only when "uniform"
    bool embedding_layer_norm = true;          // circle only: LayerNorm after the input projection (outside the layer)
    double input_noise = 0;                    // circle only: every batch's inputs get N(0, σ²) noise per coordinate and
                                               // the targets the same noise rotated by one step (target = R x̃: the
                                               // map is the rotation, also next to the arcs); 0 = the exact points
    // Where the model trains and runs: "cpu", "cuda" or "cuda:N" (the model is made on the CPU from the seed and moved
    // once; each batch is copied there explicitly; measurements read back). Part of the key only when not "cpu".
    std::string device = "cpu";
    // Everything above, as one JSON object: the checkpoint key is a hash of exactly this. The recipe fields appear for
    // the circle always and for the other tasks only when they differ from the defaults (so older keys stay valid).
    nlohmann::json to_json() const;
    std::string checkpoint_key() const;  // 16 hex digits (FNV-1a 64 of the canonical JSON)
};
// The paper's settings (README of its official code) for "sort", "hull", "memorize", "circle".
TaskSettings default_task_settings(const std::string& task);

struct EpochRecord {
    int epoch = 0;
    double loss = 0, train_metric = 0, seconds = 0, learning_rate = 0;
};

}  // namespace rankscope
