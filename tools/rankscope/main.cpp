// rankscope: measure and explain rank collapse in attention networks.
// A dispatch table of subcommands (one file each); errors become one line on stderr and exit status 2.
#include <fmt/format.h>

#include <filesystem>
#include <ios>
#include <new>
#include <sstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "rankscope/allocator.hpp"
#include "rankscope/error.hpp"
#include "rankscope/error_report.hpp"
#include "rankscope/io.hpp"
#include "rankscope/parent_watch.hpp"
#include "rankscope/process.hpp"
#include "rankscope/vector_math.hpp"
#include "sweep_scheduler.hpp"

namespace {

const rankscope::cli::Subcommand kSubcommands[] = {
    {"measure", "Every rank-collapse measure of a matrix file (.npy, .csv, .safetensors:tensor)",
     rankscope::cli::setup_measure},
    {"theory", "Random SAN variants collapsing layer by layer beside the theorems' bounds (theory.csv + figure)",
     rankscope::cli::setup_theory},
    {"paths", "Path decomposition check, path-length counts, path-product sampling", rankscope::cli::setup_paths},
    {"model", "E1/E2 on a Hugging Face folder (BERT, RoBERTa, DistilBERT, ALBERT, XLNet, GPT-2, GPT-NeoX, Llama, Mistral, Qwen2) or a built-in config",
     rankscope::cli::setup_model},
    {"tokenize", "The token ids a model folder's tokenizer gives a text (vocab.txt, spiece.model, tokenizer.json)",
     rankscope::cli::setup_tokenize},
    {"embed", "Sentence embeddings of USE lite and their cosine similarities", rankscope::cli::setup_embed},
    {"task", "E3/E4: train circle, sort, hull or memorize models; circle trajectories; accuracy of path ensembles",
     rankscope::cli::setup_task},
    {"circle-regimes", "E3 in four training regimes (plain MSE / denoising, with / without input LN): merge and arc rates",
     rankscope::cli::setup_circle_regimes},
    {"width-depth", "E5: equal-parameter models, shallow-wide vs deep-narrow: accuracy, residual per layer, path lengths",
     rankscope::cli::setup_width_depth},
    {"trainability", "Beyond the paper: token alignment and query/key vs value gradients at init over depth (Noci et al. 2022)",
     rankscope::cli::setup_trainability},
    {"failure-modes", "Beyond the paper: rank collapse vs entropy collapse at init over query/key scale and depth (phase diagram)",
     rankscope::cli::setup_failure_modes},
    {"pretrain", "Masked-language-model pretraining of BERT or ALBERT on real English, checkpoints at log-spaced steps",
     rankscope::cli::setup_pretrain},
    {"dynamics", "E1/E2 and attention statistics of every checkpoint of a pretraining run: heat maps over training",
     rankscope::cli::setup_dynamics},
    {"reproduce", "The implemented experiments end to end, with report.html (--quick: about a minute)",
     rankscope::cli::setup_reproduce},
    {"sweep", "A grid of one experiment's settings (JSON/TOML): cells on local workers or MPI ranks, one tidy table",
     rankscope::cli::setup_sweep},
};

// Every error is ONE line on stderr: "rankscope: error: <what> (<file or flag>)".
void print_error(const std::string& message) {
    std::string line = message;
    for (char& c : line)
        if (c == '\n' || c == '\r') c = ' ';
    // Other control characters (an ESC in a file name) as \xNN: the terminal shows the line, never acts on it.
    fmt::print(stderr, "rankscope: error: {}\n", rankscope::printable(line, std::string::npos));
}

// CLI11 answers a mistyped subcommand ("rankscope thoery", "rankscope paths smaple") with "A subcommand is required".
// This names the word and what it could be: walks the subcommands the arguments name, to the first one that has
// subcommands and is given an unknown word (or none).
std::string subcommand_error_line(const CLI::App& app, int argc, char** argv) {
    const auto every = [](const CLI::App*) { return true; };
    const auto names_of = [&](const CLI::App* parent) {
        std::string names;
        for (const CLI::App* candidate : parent->get_subcommands(every)) names += (names.empty() ? "" : ", ") + candidate->get_name();
        return names;
    };
    const CLI::App* current = &app;
    std::string path = "rankscope";
    for (int i = 1; i < argc && argv[i][0] != '\0' && argv[i][0] != '-'; ++i) {
        const CLI::App* next = nullptr;
        for (const CLI::App* candidate : current->get_subcommands(every))
            if (candidate->get_name() == argv[i]) next = candidate;
        if (next == nullptr)
            return fmt::format("unknown subcommand '{}' of {} (one of: {})", argv[i], path, names_of(current));
        current = next;
        path += " " + std::string(argv[i]);
    }
    return fmt::format("{} needs a subcommand (one of: {})", path, names_of(current));
}

std::string command_of(int argc, char** argv) {
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    return command;
}

// Exit status 2: bad input (rankscope::Error, unreadable or unwritable paths, a request too large for this machine);
// 1: an internal failure (libtorch, anything unexpected); 128 + signal when interrupted (SIGINT 130, SIGTERM 143).
int run_guarded(const std::function<void()>& run, int argc, char** argv) {
    try {
        run();
        return 0;
    } catch (const CLI::ParseError& error) {
        print_error(rankscope::cli::cli_error_line(error.what()));
        return 2;
    } catch (...) {
        const rankscope::ErrorReport report = rankscope::describe_current_exception();
        switch (report.kind) {
            case rankscope::ErrorReport::Interrupted: print_error(report.message); return 128 + report.signal;
            case rankscope::ErrorReport::BadInput: print_error(report.message); return 2;
            case rankscope::ErrorReport::OutOfMemory: print_error(report.message + " (" + command_of(argc, argv) + ")"); return 2;
            case rankscope::ErrorReport::Internal: break;
        }
        print_error(report.message);
        return 1;
    }
}

// After a failed run: removes `directory` and its subfolders when they hold no file at all (only folders this run
// created: the caller checks that `directory` did not exist before). Never removes a file.
bool remove_if_empty_tree(const std::filesystem::path& directory) {
    std::error_code error;
    if (!std::filesystem::is_directory(std::filesystem::symlink_status(directory, error))) return false;
    bool empty = true;
    for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
        if (entry.is_directory(error) && !entry.is_symlink(error) && remove_if_empty_tree(entry.path())) continue;
        empty = false;
    }
    return !error && empty && std::filesystem::remove(directory, error);
}

// The commands parsed, outermost first, down to a nested one: {paths, sample}.
std::vector<const CLI::App*> parsed_commands(const CLI::App& app) {
    std::vector<const CLI::App*> chain;
    for (const CLI::App* command = &app; !command->get_subcommands().empty();)
        chain.push_back(command = command->get_subcommands().front());
    return chain;
}

// The outermost folder that the chosen subcommand's --out (or the default folder its --help shows) would create (`a`
// for a new `a/b/out`), or "" when there is none or it exists already.
std::filesystem::path new_out_folder(const CLI::App& app) {
    auto missing = [](const std::filesystem::path& path) {
        std::error_code error;
        return !std::filesystem::exists(std::filesystem::symlink_status(path, error));
    };
    const std::vector<const CLI::App*> chain = parsed_commands(app);
    const CLI::Option* out = chain.empty() ? nullptr : chain.back()->get_option_no_throw("--out");
    if (out == nullptr) return {};
    const std::string given = out->count() > 0 ? out->as<std::string>() : out->get_default_str();
    if (given.empty()) return {};
    std::error_code error;
    std::filesystem::path path = std::filesystem::absolute(given, error).lexically_normal();
    if (error) return {};  // (an empty --out is refused by its validator)
    if (path.has_parent_path() && path.filename().empty()) path = path.parent_path();  // "a/out/" -> "a/out"
    if (path.empty() || !missing(path)) return {};
    while (path.has_parent_path() && path.parent_path() != path && missing(path.parent_path())) path = path.parent_path();
    return path;
}

}  // namespace

namespace rankscope::cli {
const Subcommand* find_subcommand(const std::string& name) {
    for (const auto& subcommand : kSubcommands)
        if (name == subcommand.name) return &subcommand;
    return nullptr;
}
}  // namespace rankscope::cli

int main(int argc, char** argv) {
    rankscope::cli::remember_main_arguments(argc, argv);
    rankscope::stop_with_parent();
    rankscope::configure_allocator();
    rankscope::warm_up_vector_math();  // before any parallel work (vector_math.hpp)
    rankscope::install_interrupt_handlers();
    rankscope::cli::remember_command_line(argc, argv);
    CLI::App app{"rankscope: measure and explain rank collapse in attention networks", "rankscope"};
    app.set_version_flag("--version", rankscope::version_string());
    app.require_subcommand(1);
    std::function<void()> run;
    for (const auto& subcommand : kSubcommands) {
        CLI::App* command = app.add_subcommand(subcommand.name, subcommand.description);
        auto runner = subcommand.setup(*command);
        command->callback([&run, runner] { run = runner; });
    }
    try {
        app.parse(argc, argv);
        rankscope::cli::check_lists_name_values_once(app);
        std::string parsed;  // "paths sample"
        for (const CLI::App* command : parsed_commands(app)) parsed += (parsed.empty() ? "" : " ") + command->get_name();
        rankscope::cli::remember_subcommand(parsed);
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
        const bool missing_subcommand = std::string(error.what()).find("subcommand is required") != std::string::npos;
        print_error(missing_subcommand ? subcommand_error_line(app, argc, argv) : rankscope::cli::cli_error_line(error.what()));
        return 2;
    }
    // A run rejected before writing anything (bad input found after --out was created) leaves no empty folder behind.
    const std::filesystem::path created_out = new_out_folder(app);
    const int status = run_guarded(run, argc, argv);
    if (status != 0 && !created_out.empty()) remove_if_empty_tree(created_out);
    return status;
}
