#pragma once
// Options every subcommand shares, and the subcommand registry used by main.cpp.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "rankscope/provenance.hpp"

namespace rankscope::cli {

struct CommonOptions {
    std::string out;          // --out DIR: where result files go ("" = print only, where the command allows it)
    std::uint64_t seed = 0;   // --seed N: every random draw derives from it
    int threads = 0;          // --threads N: 0 = all cores
    std::string format = "table";  // --format table|csv|json: what goes to standard output
};

// Adds --out, --seed, --threads, --format with their defaults shown in --help.
void add_common_options(CLI::App& command, CommonOptions& options, bool out_required);

// Applies --threads to ATen (intra-op) and returns the number in use.
int apply_threads(int requested);

// Fills the provenance once the command line has been parsed.
Provenance start_run(const CommonOptions& options);

// Remembered by main() for provenance.
void remember_command_line(int argc, const char* const* argv);

// One subcommand: `setup` registers options on its CLI::App and returns the function that runs it.
struct Subcommand {
    const char* name;
    const char* description;
    std::function<std::function<void()>(CLI::App&)> setup;
};

std::function<void()> setup_measure(CLI::App& command);
std::function<void()> setup_theory(CLI::App& command);
std::function<void()> setup_paths(CLI::App& command);
std::function<void()> setup_model(CLI::App& command);
std::function<void()> setup_reproduce(CLI::App& command);
std::function<void()> setup_task(CLI::App& command);
std::function<void()> setup_width_depth(CLI::App& command);
std::function<void()> setup_embed(CLI::App& command);

}  // namespace rankscope::cli
