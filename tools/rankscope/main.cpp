// rankscope: measure and explain rank collapse in attention networks.
// A dispatch table of subcommands (one file each); errors become one line on stderr and exit status 2.
#include <fmt/format.h>
#include <malloc.h>

#include <climits>
#include <filesystem>
#include <ios>
#include <new>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/error_report.hpp"
#include "rankscope/process.hpp"

namespace {

const rankscope::cli::Subcommand kSubcommands[] = {
    {"measure", "Every rank-collapse measure of a matrix file (.npy, .csv, .safetensors:tensor)",
     rankscope::cli::setup_measure},
    {"theory", "Random SAN variants collapsing layer by layer beside the theorems' bounds (theory.csv + figure)",
     rankscope::cli::setup_theory},
    {"paths", "Path decomposition check, path-length counts, path-product sampling", rankscope::cli::setup_paths},
    {"model", "E1/E2 on a Hugging Face BERT, ALBERT or XLNet folder: residual per layer under the paper's surgery",
     rankscope::cli::setup_model},
    {"embed", "Sentence embeddings of USE lite and their cosine similarities", rankscope::cli::setup_embed},
    {"task", "E3/E4: train circle, sort, hull or memorize models; circle trajectories; accuracy of path ensembles",
     rankscope::cli::setup_task},
    {"width-depth", "E5: equal-parameter models, shallow-wide vs deep-narrow: accuracy, residual per layer, path lengths",
     rankscope::cli::setup_width_depth},
    {"reproduce", "The implemented experiments end to end, with report.html (--quick: about a minute)",
     rankscope::cli::setup_reproduce},
};

// Freshly touched pages cost ~8 µs each on these VMs: keep freed memory in the process instead of returning it.
void configure_allocator() {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

// Every error is ONE line on stderr: "rankscope: error: <what> (<file or flag>)".
void print_error(const std::string& message) {
    std::string line = message;
    for (char& c : line)
        if (c == '\n' || c == '\r') c = ' ';
    fmt::print(stderr, "rankscope: error: {}\n", line);
}

// CLI11 says "--layers: 0 is outside [1, 100]"; rankscope puts the flag last: "0 is outside [1, 100] (--layers)".
// (The positional of `measure` is called "file": "is a directory, not a file: d (file)".)
std::string cli_error_line(std::string message) {
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    const auto colon = message.find(": ");
    // The part before ": " is an option ("--layers") or a positional's name ("file") when it holds no space.
    if (!message.empty() && colon != std::string::npos && colon > 0 && message.find(' ') > colon)
        return message.substr(colon + 2) + " (" + message.substr(0, colon) + ")";
    return message;
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
        print_error(cli_error_line(error.what()));
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

}  // namespace

int main(int argc, char** argv) {
    configure_allocator();
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
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
        print_error(cli_error_line(error.what()));
        return 2;
    }
    return run_guarded(run, argc, argv);
}
