// rankscope: measure and explain rank collapse in attention networks.
// A dispatch table of subcommands (one file each); errors become one line on stderr and exit status 2.
#include <fmt/format.h>
#include <malloc.h>

#include <climits>

#include "common.hpp"
#include "rankscope/error.hpp"

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

}  // namespace

int main(int argc, char** argv) {
    configure_allocator();
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
    } catch (const CLI::Success& success) {
        return app.exit(success);
    } catch (const CLI::ParseError& error) {
        app.exit(error);
        return 2;
    }
    try {
        run();
    } catch (const rankscope::Error& error) {
        fmt::print(stderr, "rankscope: error: {}\n", error.one_line());
        return 2;
    } catch (const std::exception& error) {
        fmt::print(stderr, "rankscope: error: {}\n", error.what());
        return 2;
    }
    return 0;
}
