#include "task_settings_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/provenance.hpp"

namespace rankscope::cli {

namespace {

// The tasks whose defaults are listed in the help, and which read a task-only flag.
bool serves(const std::vector<std::string>& tasks, const std::string& task) {
    return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

}  // namespace

TaskSettingFlags::TaskSettingFlags(CLI::App& command, std::vector<std::string> tasks)
    : command_(command), values_(std::make_shared<std::map<std::string, std::string>>()),
      skip_(std::make_shared<bool>(true)), mlp_(std::make_shared<bool>(false)), layer_norm_(std::make_shared<bool>(true)) {
    // Each default in the help comes from default_task_settings of the tasks this command serves (the help once said
    // "30; memorize 8" and "1e-3; memorize 3e-4" while circle used 50 and 3e-3, and width-depth's listed circle and
    // memorize defaults it never uses): "6" when they agree, "sort 48, hull 84" when they differ.
    auto defaults_of = [](const std::vector<std::string>& listed, auto value_of) -> std::string {
        if (listed.empty()) return "no default";  // (no command serves circle alone: values.front() needs one)
        std::vector<std::string> values;
        for (const auto& task : listed) values.push_back(value_of(default_task_settings(task)));
        if (std::all_of(values.begin(), values.end(), [&](const std::string& v) { return v == values.front(); }))
            return "default " + values.front();
        std::string text;
        for (std::size_t i = 0; i < listed.size(); ++i) text += fmt::format("{}{} {}", i ? ", " : "", listed[i], values[i]);
        return text;
    };
    auto defaults = [&](auto value_of) { return defaults_of(tasks, value_of); };
    // Flags the circle task refuses (settings_for): its variants set the skip and the MLP, its layers have no
    // LayerNorm, and it is evaluated on its training points and a held-out set made from --train-count.
    std::vector<std::string> not_circle;
    std::copy_if(tasks.begin(), tasks.end(), std::back_inserter(not_circle), [](const std::string& t) { return t != "circle"; });
    auto defaults_but_circle = [&](auto value_of, const std::string& circle_instead) -> std::string {
        const std::string circle = serves(tasks, "circle") ? "not for circle: " + circle_instead : "";
        if (not_circle.empty()) return circle;
        return defaults_of(not_circle, value_of) + (circle.empty() ? "" : "; " + circle);
    };
    auto number = [](auto member) { return [member](const TaskSettings& s) { return format_number(s.*member); }; };
    auto yes_no = [](auto member) { return [member](const TaskSettings& s) { return std::string(s.*member ? "yes" : "no"); }; };
    auto text = [](auto member) { return [member](const TaskSettings& s) { return std::string(s.*member); }; };
    // A flag only some other task reads stays registered, so that it is refused by name in settings_for ("applies to
    // the circle task only, not sort"), but is left out of this command's help.
    auto keep_for = [&](CLI::Option* option, const std::string& only) {
        if (!serves(tasks, only)) option->group("");
    };
    // Values are kept as (validated, canonical) text: the task's defaults are known only once the task is parsed.
    auto record = [&](const std::string& flag, const std::string& help) {
        return command.add_option_function<std::string>(
            flag, [values = values_, flag](const std::string& v) { (*values)[flag] = v; }, help);
    };
    auto add = [&](const std::string& flag, const std::string& help, const CLI::Validator& range, const char* type) {
        return record(flag, help)
            ->type_name(type)  // kept as text, shown as the number it is
            ->transform(range);  // transform: the validator's canonical decimal text is what is stored
    };
    auto add_choice = [&](const std::string& flag, const std::string& help, std::vector<std::string> choices) {
        return record(flag, help)->check(CLI::IsMember(std::move(choices)));
    };
    add("--layers", "Layers (" + defaults(number(&TaskSettings::layers)) + ")", IntRange(1, 48), "INT");
    add("--heads", "Heads per layer (" + defaults(number(&TaskSettings::heads)) + ")", IntRange(1, 64), "INT");
    add("--d-model", "Model width (" + defaults(number(&TaskSettings::d_model)) + ")", IntRange(1, 2048), "INT");
    add("--epochs",
        "Training epochs (" + defaults(number(&TaskSettings::epochs)) +
            (serves(tasks, "circle") ? "; circle stops earlier at --target-mse)" : ")"),
        IntRange(0, 100000), "INT");
    add("--batch-size", "Sequences per step (" + defaults(number(&TaskSettings::batch_size)) + ")", IntRange(1, 100000), "INT");
    add("--lr", "Adam learning rate (" + defaults(number(&TaskSettings::learning_rate)) + ")", RealRange(0, 1, true), "FLOAT");
    add("--weight-decay", "Adam weight decay (" + defaults(number(&TaskSettings::weight_decay)) + ")", RealRange(0, 1), "FLOAT");
    add("--train-count",
        std::string(serves(tasks, "circle") || serves(tasks, "memorize") ? "Training items: sequences, memorize pairs or circle points"
                                                                          : "Training sequences") +
            " (" + defaults(number(&TaskSettings::train_count)) + ")",
        IntRange(1, 1000000), "INT");
    add("--eval-count",
        std::string(serves(tasks, "memorize") ? "Evaluation sequences (memorize: the first N training pairs, or 0 for all of them; "
                                              : "Evaluation sequences (") +
            defaults_but_circle(number(&TaskSettings::eval_count), "it is evaluated on its own points") + ")",
        IntRange(0, 100000), "INT");
    keep_for(add("--input-noise",
                 "Circle: std of the noise added to the training inputs, targets rotated with it (default " +
                     format_number(default_task_settings("circle").input_noise) + ")",
                 RealRange(0, 1), "FLOAT"),
             "circle");
    keep_for(add("--target-mse",
                 "Circle: stop training at this one-step training MSE (default " +
                     format_number(default_task_settings("circle").target_mse) + "; 0 = run all epochs)",
                 RealRange(0, 1), "FLOAT"),
             "circle");
    add_choice("--lr-schedule",
               "Learning rate over the epochs: constant or cosine (" + defaults(text(&TaskSettings::lr_schedule)) + ")",
               {"constant", "cosine"});
    add_choice("--shuffle",
               "Reshuffle the training items every epoch: yes or no (" + defaults(yes_no(&TaskSettings::shuffle)) + ")",
               {"yes", "no"});
    keep_for(add_choice("--embedding-layer-norm",
                        "Circle: LayerNorm after the input projection, outside the layer: yes or no (default " +
                            std::string(default_task_settings("circle").embedding_layer_norm ? "yes" : "no") + ")",
                        {"yes", "no"}),
             "circle");
    add_choice("--init",
               "Weight draw: normal (rankscope's, N(0, 1/fan_in)) or uniform (PyTorch nn.Linear's default, "
               "U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases) (" + defaults(text(&TaskSettings::init)) + ")",
               {"normal", "uniform"});
    keep_for(record("--text", "Memorize: an RTE-style .tsv (default data/RTE/train.tsv of the repository)")
                 ->check(ReadableFile()),
             "memorize");
    // A switch and its negation as two flags that exclude each other (one negatable flag printed as
    // "--skip,--no-skip{false}", and "--skip --no-skip" took the last).
    auto switch_pair = [&](const std::string& on, const std::string& off, const std::shared_ptr<bool>& value,
                           const std::string& help, const std::string& off_help) {
        CLI::Option* yes = command.add_flag_callback(on, [value] { *value = true; }, help);
        CLI::Option* no = command.add_flag_callback(off, [value] { *value = false; }, off_help);
        yes->excludes(no);
    };
    switch_pair("--skip", "--no-skip", skip_,
                "Attention skip in every layer (" + defaults_but_circle(yes_no(&TaskSettings::skip), "see --variants") + ")",
                "No attention skip");
    command.add_flag("--mlp", *mlp_,
                     "An MLP block in every layer (" + defaults_but_circle(yes_no(&TaskSettings::mlp), "see --variants") + ")");
    switch_pair("--layer-norm", "--no-layer-norm", layer_norm_,
                "Post-LN layers (" + defaults_but_circle(yes_no(&TaskSettings::layer_norm), "its layers have none") + ")",
                "No LayerNorm in the layers");
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
    // Flags the circle ignored when given: circle_variant_settings sets the skip and the MLP from --variants and
    // removes the layers' LayerNorm, and the circle is evaluated on its own points, not on --eval-count sequences.
    if (task == "circle") {
        for (const char* flag : {"--skip", "--no-skip", "--mlp", "--layer-norm", "--no-layer-norm"})
            if (command_.count(flag))
                throw Error("does not apply to the circle task: --variants sets the skip and the MLP, and its layers have "
                            "no LayerNorm",
                            flag);
        if (values_->count("--eval-count"))
            throw Error("does not apply to the circle task: it is evaluated on its training points and on a held-out set "
                        "made from --train-count",
                        "--eval-count");
    }
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
