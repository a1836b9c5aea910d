#include "common.hpp"

#include <ATen/Parallel.h>

#include <thread>
#include <vector>

namespace rankscope::cli {
namespace {
std::vector<std::string> command_line;
}

void remember_command_line(int argc, const char* const* argv) { command_line.assign(argv, argv + argc); }

void add_common_options(CLI::App& command, CommonOptions& options, bool out_required) {
    auto* out = command.add_option("--out", options.out, "Directory for result files (created if missing)");
    if (out_required) out->required();
    command.add_option("--seed", options.seed, "Seed for every random draw")->capture_default_str();
    command.add_option("--threads", options.threads, "Worker threads (0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    command.add_option("--format", options.format, "Standard output format")
        ->capture_default_str()
        ->check(CLI::IsMember({"table", "csv", "json"}));
}

int apply_threads(int requested) {
    const int threads = requested > 0 ? requested : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(threads);
    return threads;
}

Provenance start_run(const CommonOptions& options) {
    const int threads = apply_threads(options.threads);
    std::vector<const char*> argv;
    for (const auto& word : command_line) argv.push_back(word.c_str());
    return make_provenance(static_cast<int>(argv.size()), argv.data(), options.seed, threads);
}

}  // namespace rankscope::cli
