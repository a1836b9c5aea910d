#include "task_settings_options.hpp"

#include <fmt/format.h>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/provenance.hpp"

namespace rankscope::cli {

TaskSettingFlags::TaskSettingFlags(CLI::App& command)
    : command_(command), values_(std::make_shared<std::map<std::string, std::string>>()),
      skip_(std::make_shared<bool>(true)), mlp_(std::make_shared<bool>(false)), layer_norm_(std::make_shared<bool>(true)) {
    // Values are kept as (validated, canonical) text: the task's defaults are known only once the task is parsed.
    auto add = [&](const std::string& flag, const std::string& help, const CLI::Validator& range, const char* type) {
        command.add_option_function<std::string>(flag, [values = values_, flag](const std::string& v) { (*values)[flag] = v; },
                                                 help)
            ->type_name(type)  // kept as text, shown as the number it is
            ->transform(range);  // transform: the validator's canonical decimal text is what is stored
    };
    add("--layers", "Layers (default: the task's; sort/hull/memorize 6, circle 1)", IntRange(1, 48), "INT");
    add("--heads", "Heads per layer (sort 2, hull 3, memorize 2, circle 2)", IntRange(1, 64), "INT");
    add("--d-model", "Model width (sort 48, hull 84, memorize 250, circle 32)", IntRange(1, 2048), "INT");
    add("--epochs", "Training epochs (sort 65, hull 70, memorize 50; circle at most 400, stopping at --target-mse)",
        IntRange(0, 100000), "INT");
    // Each task's default, from the defaults themselves (the help said "30; memorize 8" and "1e-3; memorize 3e-4" while
    // circle used 50 and 3e-3).
    auto per_task = [](auto member) {
        std::string text;
        for (const char* task : {"sort", "hull", "memorize", "circle"})
            text += fmt::format("{}{} {}", text.empty() ? "" : ", ", task, format_number(default_task_settings(task).*member));
        return text;
    };
    add("--batch-size", "Sequences per step (" + per_task(&TaskSettings::batch_size) + ")", IntRange(1, 100000), "INT");
    add("--lr", "Adam learning rate (" + per_task(&TaskSettings::learning_rate) + ")", RealRange(0, 1, true), "FLOAT");
    add("--weight-decay", "Adam weight decay (0)", RealRange(0, 1), "FLOAT");
    add("--train-count", "Training sequences (sort 1000, hull 10000, memorize 500 pairs) or circle points (1000)",
        IntRange(1, 1000000), "INT");
    add("--eval-count", "Evaluation sequences (sort 200, hull 300; memorize: the first N training pairs, 50, or 0 for "
        "all of them)",
        IntRange(0, 100000), "INT");
    add("--input-noise", "Circle: std of the noise added to the training inputs, targets rotated with it (circle 0.03)",
        RealRange(0, 1), "FLOAT");
    add("--target-mse", "Circle: stop training at this one-step training MSE (circle 3.5e-8; 0 = run all epochs)",
        RealRange(0, 1), "FLOAT");
    command.add_option_function<std::string>(
               "--lr-schedule", [values = values_](const std::string& v) { (*values)["--lr-schedule"] = v; },
               "Learning rate over the epochs: constant or cosine (circle cosine, others constant)")
        ->check(CLI::IsMember({"constant", "cosine"}));
    command.add_option_function<std::string>(
               "--shuffle", [values = values_](const std::string& v) { (*values)["--shuffle"] = v; },
               "Reshuffle the training items every epoch: yes or no (circle yes; others no, as the paper)")
        ->check(CLI::IsMember({"yes", "no"}));
    command.add_option_function<std::string>(
               "--embedding-layer-norm", [values = values_](const std::string& v) { (*values)["--embedding-layer-norm"] = v; },
               std::string("Circle: LayerNorm after the input projection, outside the layer: yes or no (default ") +
                   (default_task_settings("circle").embedding_layer_norm ? "yes" : "no") + ")")
        ->check(CLI::IsMember({"yes", "no"}));
    command.add_option_function<std::string>(
               "--init", [values = values_](const std::string& v) { (*values)["--init"] = v; },
               "Weight draw: normal (rankscope's, N(0, 1/fan_in)) or uniform (PyTorch nn.Linear's default, "
               "U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases); default normal")
        ->check(CLI::IsMember({"normal", "uniform"}));
    command.add_option_function<std::string>(
               "--text", [values = values_](const std::string& v) { (*values)["--text"] = v; },
               "Memorize: an RTE-style .tsv (default data/RTE/train.tsv of the repository)")
        ->check(ReadableFile());
    command.add_flag("--skip,!--no-skip", *skip_, "Attention skip in every layer (default on; circle: see --variants)");
    command.add_flag("--mlp", *mlp_, "An MLP block in every layer (default off)");
    command.add_flag("--layer-norm,!--no-layer-norm", *layer_norm_, "Post-LN layers (default on; circle off)");
}

TaskSettings TaskSettingFlags::settings_for(const std::string& task, std::uint64_t seed) const {
    TaskSettings s = default_task_settings(task);
    if (command_.count("--skip") + command_.count("--no-skip")) s.skip = *skip_;
    if (command_.count("--mlp")) s.mlp = *mlp_;
    if (command_.count("--layer-norm") + command_.count("--no-layer-norm")) s.layer_norm = *layer_norm_;
    for (const auto& [flag, value] : *values_) {
        try {
            std::size_t used = 0;
            auto integer = [&] { const int v = std::stoi(value, &used); if (used != value.size()) throw std::invalid_argument(value); return v; };
            auto real = [&] { const double v = std::stod(value, &used); if (used != value.size()) throw std::invalid_argument(value); return v; };
            if (flag == "--layers") s.layers = integer();
            else if (flag == "--heads") s.heads = integer();
            else if (flag == "--d-model") s.d_model = integer();
            else if (flag == "--epochs") s.epochs = integer();
            else if (flag == "--batch-size") s.batch_size = integer();
            else if (flag == "--lr") s.learning_rate = real();
            else if (flag == "--weight-decay") s.weight_decay = real();
            else if (flag == "--train-count") s.train_count = integer();
            else if (flag == "--eval-count") s.eval_count = integer();
            else if (flag == "--text") s.text = value;
            else if (flag == "--target-mse") s.target_mse = real();
            else if (flag == "--input-noise") s.input_noise = real();
            else if (flag == "--lr-schedule") s.lr_schedule = value;
            else if (flag == "--shuffle") s.shuffle = value == "yes";
            else if (flag == "--embedding-layer-norm") s.embedding_layer_norm = value == "yes";
            else if (flag == "--init") s.init = value;
        } catch (const std::exception&) {
            throw Error("not a number: '" + value + "'", flag);
        }
    }
    // Flags only one task reads: given for another, they were accepted and ignored.
    for (const auto& [flag, only] : {std::pair<const char*, const char*>{"--input-noise", "circle"},
                                     {"--target-mse", "circle"},
                                     {"--embedding-layer-norm", "circle"},
                                     {"--text", "memorize"}})
        if (values_->count(flag) && task != only)
            throw Error(std::string("applies to the ") + only + " task only, not " + task, flag);
    // The flags' ranges hold already (CLI11 checks); these combinations are checked here, before anything is written.
    if (s.eval_count < 1 && task != "memorize") throw Error("--eval-count must be at least 1 for " + task, "--eval-count");
    if (s.d_model % s.heads != 0)
        throw Error("--d-model " + std::to_string(s.d_model) + " is not divisible by --heads " + std::to_string(s.heads),
                    "--d-model, --heads");
    // Weights (attention 4d^2, MLP 8d^2 per layer), plus Adam's two moments: at most 50 million, about 600 MB.
    check_size("parameters (about layers x 12 x d_model^2)", double(s.layers) * 12.0 * s.d_model * s.d_model, 5e7,
               "--layers, --d-model");
    s.seed = seed;
    return s;
}

}  // namespace rankscope::cli
