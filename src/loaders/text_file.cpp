// Text files for tokenisation (`rankscope model --text`, the memorize task's tokenizer corpus): a GLUE-style .tsv with
// a sentence1/sentence2 header (those columns), else one sentence per non-blank line. Bounded: a regular file of at most
// kMaxTextFileBytes, read once, and no line longer than kMaxLineBytes (a 50 MB one-word "sentence" is refused before
// any tokenizer sees it). Torch-free (fuzzed alone).
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/build_info.hpp"  // RANKSCOPE_SOURCE_DIR
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tokenizer.hpp"
#include "text_utf8.hpp"

namespace rankscope {
namespace {

constexpr std::size_t kMaxLineBytes = 1u << 20;

}  // namespace

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
        fields.push_back(line.substr(start, tab - start));
    fields.push_back(line.substr(start));
    return fields;
}

std::string default_rte_path() {
    // The repository's copy: from the repository root, beside the program's build folder (build/bin/rankscope), or in
    // the source tree this program was built from (any build folder, e.g. build/sanitize).
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
    for (const auto& candidate : {std::filesystem::path("data/RTE/train.tsv"), self / ".." / ".." / "data/RTE/train.tsv",
                                  self / ".." / "data/RTE/train.tsv",
                                  std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "data/RTE/train.tsv"})
        if (std::filesystem::is_regular_file(candidate, ec)) return candidate.lexically_normal().string();
    return "";
}

std::vector<std::string> read_sentences(const std::string& path) {
    const std::string text = read_file_limited(path, kMaxTextFileBytes, "text file");
    std::vector<std::string> sentences;
    std::vector<std::size_t> columns;
    std::size_t line_number = 0;
    for (std::size_t start = 0; start < text.size();) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        ++line_number;
        if (end - start > kMaxLineBytes)
            throw Error("line " + std::to_string(line_number) + " is " + std::to_string(end - start) +
                            " bytes long, more than the limit of " + std::to_string(kMaxLineBytes) +
                            " bytes per line (one sentence per line is expected)",
                        path);
        std::string line = text.substr(start, end - start);
        // Python's tokenizers read text as str (strict UTF-8); the error names this file and line, not a tokenizer.
        if (const std::size_t bad = utf8::first_invalid(line); bad != std::string::npos)
            throw Error(fmt::format("line {} is not valid UTF-8 (byte {} of the line: 0x{:02x})", line_number, bad + 1,
                                    static_cast<unsigned char>(line[bad])),
                        path);
        start = end + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line_number == 1) {
            const auto header = split_tabs(line);
            for (std::size_t i = 0; i < header.size(); ++i)
                if (header[i] == "sentence1" || header[i] == "sentence2") columns.push_back(i);
            if (!columns.empty()) continue;
        }
        if (columns.empty()) {
            if (line.find_first_not_of(" \t") != std::string::npos) sentences.push_back(line);
            continue;
        }
        const auto fields = split_tabs(line);
        for (std::size_t column : columns)
            if (column < fields.size() && !fields[column].empty()) sentences.push_back(fields[column]);
    }
    if (sentences.empty()) throw Error("no text in file", path);
    return sentences;
}

}  // namespace rankscope
