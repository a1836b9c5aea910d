// Regression test of the fuzzers' findings: every file of tests/fuzz_corpus/<parser>/ (seeds, and each input that once
// crashed, hung or misparsed a parser) goes through the same entry the libFuzzer program uses (fuzz/fuzz_targets.hpp)
// and must end normally or with rankscope::Error — no crash, no other exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../../fuzz/fuzz_targets.hpp"

namespace fs = std::filesystem;

namespace {
const fs::path kCorpus = fs::path(__FILE__).parent_path().parent_path() / "fuzz_corpus";

std::string contents(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST(FuzzCorpus, EveryParserHasACorpus) {
    for (const auto& [parser, function] : rankscope::fuzz::parsers()) {
        (void)function;
        EXPECT_TRUE(fs::is_directory(kCorpus / parser)) << "no " << (kCorpus / parser);
    }
    for (const auto& entry : fs::directory_iterator(kCorpus))
        EXPECT_TRUE(rankscope::fuzz::parsers().count(entry.path().filename().string()))
            << "corpus folder of no parser: " << entry.path();
}

TEST(FuzzCorpus, EveryInputEndsCleanly) {
    std::size_t inputs = 0;
    for (const auto& [parser, function] : rankscope::fuzz::parsers()) {
        (void)function;
        if (!fs::is_directory(kCorpus / parser)) continue;
        std::vector<fs::path> files;
        for (const auto& entry : fs::directory_iterator(kCorpus / parser)) files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        for (const auto& file : files) {
            const std::string bytes = contents(file);
            SCOPED_TRACE(file.string());
            EXPECT_NO_THROW(rankscope::fuzz::run(parser, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
            ++inputs;
        }
    }
    EXPECT_GE(inputs, 16u);
    std::error_code ignored;
    fs::remove_all(rankscope::fuzz::scratch(), ignored);
}
