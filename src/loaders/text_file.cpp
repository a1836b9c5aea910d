// Text files for tokenisation (`rankscope model --text`, the memorize task's tokenizer corpus): a GLUE-style .tsv with
// a sentence1/sentence2 header (those columns), else one sentence per non-blank line. Bounded: a regular file of at most
// kMaxTextFileBytes, read once, and no line longer than kMaxLineBytes (a 50 MB one-word "sentence" is refused before
// any tokenizer sees it). Torch-free (fuzzed alone).
#include <string>
#include <vector>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tokenizer.hpp"

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
