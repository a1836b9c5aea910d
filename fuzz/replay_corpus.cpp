// Replays the fuzz corpus (tests/fuzz_corpus/<parser>/: seeds and every input that once broke a parser) through the
// fuzzers' entry points, in a build compiled with AddressSanitizer + UndefinedBehaviorSanitizer by any compiler (no
// libFuzzer needed): `make test-sanitize-parsers`, run by CI. A sanitizer report, a crash or an exception other than
// rankscope::Error ends the program with a non-zero status.
//
//   replay_corpus tests/fuzz_corpus            # every parser
//   replay_corpus tests/fuzz_corpus npy csv    # some
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_targets.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: replay_corpus CORPUS_DIR [PARSER...]\n");
        return 2;
    }
    const fs::path root = argv[1];
    std::vector<std::string> names;
    for (int i = 2; i < argc; ++i) names.emplace_back(argv[i]);
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
            rankscope::fuzz::run(name, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        }
        std::printf("replay_corpus: %-12s %zu inputs ended cleanly\n", name.c_str(), files.size());
        total += files.size();
    }
    std::error_code ignored;
    fs::remove_all(rankscope::fuzz::scratch(), ignored);
    if (total == 0) {
        std::fprintf(stderr, "replay_corpus: no inputs found under %s\n", root.c_str());
        return 1;
    }
    std::printf("replay_corpus: %zu inputs in all\n", total);
    return 0;
}
