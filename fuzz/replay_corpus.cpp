// Replays the fuzz corpus (tests/fuzz_corpus/<parser>/: seeds and every input that once broke a parser) through the
// fuzzers' entry points, in a build compiled with AddressSanitizer + UndefinedBehaviorSanitizer by any compiler (no
// libFuzzer needed): `make test-sanitize-parsers`, run by CI. A sanitizer report, a crash or an exception other than
// rankscope::Error ends the program with a non-zero status.
// With --mutations N each input is also replayed N more times, deterministically mutated (seeded by the file's name and
// the mutation number): cut at a random length, bytes flipped, overwritten with boundary values (0, 0xff, '"', '{',
// digits), inserted or deleted. A small, repeatable fuzz run for compilers without libFuzzer.
//
// Each input has a budget of CPU time (--seconds-per-input, 1 by default: the slowest input took 0.11 s here under
// the sanitizers, the quadratic pre-tokenizer pattern of tests/fuzz_corpus/tokenizer_json/bug-lookahead-every-position
// took 2.1 s before its fix):
// an input that takes longer fails the replay as a crash does, naming the file (work that grows without bound on
// some input is a finding too). CPU time, not wall time: another process on the machine does not count.
//
//   replay_corpus tests/fuzz_corpus                       # every parser, the inputs as they are
//   replay_corpus tests/fuzz_corpus --mutations 300 npy   # some parsers, 300 variants of each input
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <vector>

#include "fuzz_targets.hpp"

namespace fs = std::filesystem;

namespace {

// Variant `number` of `input`: one to four edits drawn from a generator seeded by the file name and the number.
std::string mutated(const std::string& input, const std::string& file, int number) {
    std::seed_seq seed{static_cast<unsigned>(std::hash<std::string>{}(file)), static_cast<unsigned>(number)};
    std::mt19937 rng(seed);
    std::string bytes = input;
    static const char kBoundary[] = {'\0', '\xff', '"', '{', '}', '[', ',', ':', '-', '9', '0', '\n', '.', 'e'};
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
        const std::size_t at = bytes.empty() ? 0 : rng() % bytes.size();
        switch (rng() % 5) {
            case 0: bytes.resize(at); break;                                                      // cut
            case 1: if (!bytes.empty()) bytes[at] = static_cast<char>(bytes[at] ^ (1u << (rng() % 8))); break;  // flip a bit
            case 2: if (!bytes.empty()) bytes[at] = kBoundary[rng() % sizeof kBoundary]; break;  // boundary byte
            case 3: bytes.insert(at, 1, kBoundary[rng() % sizeof kBoundary]); break;             // insert
            default: if (!bytes.empty()) bytes.erase(at, 1 + rng() % 8); break;                  // delete a run
        }
    }
    return bytes;
}

double cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: replay_corpus CORPUS_DIR [--mutations N] [PARSER...]\n");
        return 2;
    }
    const fs::path root = argv[1];
    std::vector<std::string> names;
    int mutations = 0;
    double budget = 1;
    double slowest = 0;
    std::string slowest_input;
    for (int i = 2; i < argc; ++i) {
        if (std::string(argv[i]) == "--mutations" && i + 1 < argc) mutations = std::atoi(argv[++i]);
        else if (std::string(argv[i]) == "--seconds-per-input" && i + 1 < argc) budget = std::atof(argv[++i]);
        else names.emplace_back(argv[i]);
    }
    if (names.empty())
        for (const auto& [name, function] : rankscope::fuzz::parsers()) names.push_back(name);
    std::size_t total = 0;
    for (const auto& name : names) {
        if (!rankscope::fuzz::parsers().count(name)) {
            std::fprintf(stderr, "replay_corpus: no parser named %s\n", name.c_str());
            return 2;
        }
        if (!fs::is_directory(root / name)) {
            std::fprintf(stderr, "replay_corpus: no corpus folder %s\n", (root / name).c_str());
            return 1;
        }
        std::vector<fs::path> files;
        for (const auto& entry : fs::directory_iterator(root / name))
            if (entry.is_regular_file()) files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        for (const auto& file : files) {
            std::ifstream in(file, std::ios::binary);
            const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            auto timed_run = [&](const std::string& input, int variant) {
                const double start = cpu_seconds();
                rankscope::fuzz::run(name, reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
                const double seconds = cpu_seconds() - start;
                const std::string label = file.string() + (variant < 0 ? "" : " (variant " + std::to_string(variant) + ")");
                if (seconds > slowest) slowest = seconds, slowest_input = label;
                if (seconds > budget) {
                    std::fprintf(stderr, "replay_corpus: %s took %.1f CPU seconds, over the budget of %.1f per input\n",
                                 label.c_str(), seconds, budget);
                    std::exit(1);
                }
            };
            timed_run(bytes, -1);
            for (int m = 0; m < mutations; ++m) timed_run(mutated(bytes, file.filename().string(), m), m);
        }
        std::printf("replay_corpus: %-12s %zu inputs and %zu variants ended cleanly\n", name.c_str(), files.size(),
                    files.size() * static_cast<std::size_t>(mutations));
        total += files.size();
    }
    std::error_code ignored;
    fs::remove_all(rankscope::fuzz::scratch(), ignored);
    if (total == 0) {
        std::fprintf(stderr, "replay_corpus: no inputs found under %s\n", root.c_str());
        return 1;
    }
    std::printf("replay_corpus: %zu inputs in all; the slowest took %.2f CPU seconds (budget %.1f): %s\n", total, slowest,
                budget, slowest_input.c_str());
    return 0;
}
