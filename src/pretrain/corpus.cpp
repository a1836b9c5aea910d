// The pretraining corpus: real English from Debian packages (docs/pretraining.md), cleaned to one unit per line.
//   wordnet-base  /usr/share/wordnet/data.{noun,verb,adj,adv}   glosses and their quoted examples
//   fortunes      /usr/share/games/fortunes/*                    quotations, proverbs, jokes ("%" separated)
//   dict-gcide    /usr/share/dictd/gcide.dict.dz                 the 1913 Webster + GCIDE definitions (gzip)
//   RTE           data/RTE/train.tsv                              news sentences (repository copy)
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "rankscope/file_hash.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/pretrain.hpp"
#include "rankscope/tokenizer.hpp"

namespace rankscope {
namespace {

constexpr int kMinWords = 3;

std::string collapse_whitespace(const std::string& text) {
    std::string out;
    bool space = false;
    for (char c : text) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = !out.empty();
            continue;
        }
        if (space) out += ' ';
        space = false;
        out += c;
    }
    return out;
}

int word_count(const std::string& text) {
    std::istringstream words(text);
    int count = 0;
    for (std::string word; words >> word;) ++count;
    return count;
}

// Mostly letters: at least 70% of the non-space characters (bytes of multi-byte characters count as letters).
bool mostly_letters(const std::string& text) {
    long letters = 0, others = 0;
    for (unsigned char c : text) {
        if (c == ' ') continue;
        if (std::isalpha(c) || c >= 0x80) ++letters;
        else ++others;
    }
    return letters > 0 && letters >= 0.7 * double(letters + others);
}

void add_unit(std::vector<CorpusText>& out, const std::string& raw, const std::string& source) {
    std::string text = collapse_whitespace(raw);
    if (word_count(text) < kMinWords || !mostly_letters(text)) return;
    out.push_back({std::move(text), source});
}

std::string read_whole(const std::string& path, const std::string& package) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error("corpus file missing (install the Debian package " + package + ")", path);
    return read_file_limited(path, kMaxTextFileBytes, "corpus file");
}

// Removes balanced [...] spans (GCIDE etymologies, "[1913 Webster]", "[Obs.]", "[deg]").
std::string remove_brackets(const std::string& text) {
    std::string out;
    int depth = 0;
    for (char c : text) {
        if (c == '[') ++depth;
        else if (c == ']' && depth > 0) --depth;
        else if (depth == 0) out += c;
    }
    return out;
}

// Removes citation tails: " --Shak." / " --Davies & Peck." (from "--" to the next ". " or the end).
std::string remove_citations(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        if (text.compare(i, 2, "--") == 0 && i + 2 < text.size() && std::isupper(static_cast<unsigned char>(text[i + 2]))) {
            std::size_t end = text.find(". ", i);
            i = end == std::string::npos ? text.size() : end + 1;
            continue;
        }
        out += text[i++];
    }
    return out;
}

// One GCIDE paragraph to plain text; `header` is true for the entry's first paragraph, which starts with the headword
// line ("Coagulate \Co*ag"u*late\, v. t. [imp. & p. p. ...]"): it is dropped up to the end of its first line, or up to
// where a bracket opened on that line closes.
std::string clean_gcide_paragraph(const std::string& paragraph, bool header) {
    std::string text = paragraph;
    if (header) {
        const std::size_t line_end = std::min(text.find('\n'), text.size());
        int depth = 0;
        std::size_t cut = line_end;
        for (std::size_t i = 0; i < line_end; ++i) depth += text[i] == '[' ? 1 : text[i] == ']' ? -1 : 0;
        for (std::size_t i = line_end; i < text.size() && depth > 0; ++i) {
            depth += text[i] == '[' ? 1 : text[i] == ']' ? -1 : 0;
            cut = i + 1;
        }
        text = text.substr(std::min(cut, text.size()));
    }
    text = collapse_whitespace(remove_citations(remove_brackets(text)));
    std::string out;
    for (char c : text)
        if (c != '{' && c != '}' && c != '\\' && c != '*') out += c;
    // Leading enumeration: "1. ", "(a) ".
    while (!out.empty()) {
        std::size_t i = 0;
        while (i < out.size() && std::isdigit(static_cast<unsigned char>(out[i]))) ++i;
        if (i > 0 && i + 1 < out.size() && out[i] == '.' && out[i + 1] == ' ') {
            out = out.substr(i + 2);
            continue;
        }
        if (out.size() > 4 && out[0] == '(' && out[2] == ')' && out[3] == ' ') {
            out = out.substr(4);
            continue;
        }
        break;
    }
    if (out.rfind("Syn:", 0) == 0 || out.rfind("Etym:", 0) == 0) return "";
    if (out.rfind("Note:", 0) == 0) out = out.substr(5);
    return out;
}

std::string gunzip(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error("corpus file missing (install the Debian package dict-gcide)", path);
    gzFile file = gzopen(path.c_str(), "rb");
    if (!file) throw Error("cannot open the gzip file", path);
    std::string text;
    char buffer[1 << 16];
    for (int read; (read = gzread(file, buffer, sizeof buffer)) > 0;) {
        text.append(buffer, static_cast<std::size_t>(read));
        if (text.size() > (1ull << 30)) {
            gzclose(file);
            throw Error("decompresses to more than 1 GiB", path);
        }
    }
    int error = Z_OK;
    const char* message = gzerror(file, &error);
    const std::string why = message ? message : "";
    gzclose(file);
    if (error != Z_OK && error != Z_STREAM_END) throw Error("corrupt gzip data (" + why + ")", path);
    return text;
}

}  // namespace

std::vector<CorpusText> read_wordnet_glosses(const std::string& wordnet_dir) {
    std::vector<CorpusText> out;
    for (const char* part : {"data.noun", "data.verb", "data.adj", "data.adv"}) {
        const std::string path = (std::filesystem::path(wordnet_dir) / part).string();
        const std::string text = read_whole(path, "wordnet-base");
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
            if (line.empty() || line[0] == ' ') continue;  // the licence header lines start with two spaces
            const std::size_t bar = line.find(" | ");
            if (bar == std::string::npos) continue;
            // "offset lex_filenum ss_type w_cnt word lex_id ...": the first word is the 5th field.
            std::istringstream fields(line.substr(0, bar));
            std::string offset, lex_file, type, count, lemma;
            if (!(fields >> offset >> lex_file >> type >> count >> lemma)) continue;
            std::replace(lemma.begin(), lemma.end(), '_', ' ');
            if (const auto paren = lemma.find('('); paren != std::string::npos) lemma = lemma.substr(0, paren);
            // The gloss: definitions and quoted examples separated by ';'.
            const std::string gloss = line.substr(bar + 3);
            std::string definition;
            std::size_t i = 0;
            while (i < gloss.size()) {
                while (i < gloss.size() && (gloss[i] == ' ' || gloss[i] == ';')) ++i;
                if (i >= gloss.size()) break;
                if (gloss[i] == '"') {
                    const std::size_t close = gloss.find('"', i + 1);
                    const std::size_t end = close == std::string::npos ? gloss.size() : close;
                    add_unit(out, gloss.substr(i + 1, end - i - 1), "wordnet");
                    i = end + 1;
                    continue;
                }
                const std::size_t end = std::min(gloss.find(';', i), gloss.size());
                const std::string piece = collapse_whitespace(gloss.substr(i, end - i));
                if (!piece.empty()) definition += (definition.empty() ? "" : "; ") + piece;
                i = end;
            }
            if (!definition.empty()) add_unit(out, lemma + ": " + definition, "wordnet");
        }
    }
    return out;
}

std::vector<CorpusText> read_fortunes(const std::string& fortunes_dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(fortunes_dir, ec))
        throw Error("corpus folder missing (install the Debian package fortunes)", fortunes_dir);
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(fortunes_dir)) {
        const auto name = entry.path().filename().string();
        // Text files have no extension (.dat is the index, .u8 a link); the art files are pictures, translate-me is
        // not English.
        if (!entry.is_regular_file() || entry.path().has_extension() || name == "art" || name == "ascii-art" ||
            name == "translate-me")
            continue;
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) throw Error("no fortune files (install the Debian package fortunes)", fortunes_dir);
    std::vector<CorpusText> out;
    for (const auto& file : files) {
        const std::string text = read_whole(file.string(), "fortunes");
        std::istringstream lines(text);
        std::string entry;
        for (std::string line; std::getline(lines, line);) {
            if (line == "%") {
                add_unit(out, entry, "fortunes");
                entry.clear();
            } else {
                entry += line + " ";
            }
        }
        add_unit(out, entry, "fortunes");
    }
    return out;
}

std::vector<CorpusText> read_gcide(const std::string& gcide_file) {
    const std::string text = gunzip(gcide_file);
    std::vector<CorpusText> out;
    std::istringstream lines(text);
    std::string paragraph;
    bool header = false, skip_entry = false;
    auto flush = [&] {
        if (!paragraph.empty() && !skip_entry) add_unit(out, clean_gcide_paragraph(paragraph, header), "gcide");
        paragraph.clear();
        header = false;
    };
    for (std::string line; std::getline(lines, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            flush();
            continue;
        }
        if (line[0] != ' ' && line[0] != '\t') {  // a headword line starts an entry
            flush();
            skip_entry = line.rfind("00-database", 0) == 0 || line.rfind("00database", 0) == 0;
            header = true;
        }
        paragraph += line + "\n";
    }
    flush();
    return out;
}

Corpus split_corpus(std::vector<CorpusText> units, double heldout_fraction) {
    Corpus corpus;
    const auto threshold = static_cast<std::uint64_t>(heldout_fraction * 1000000.0);
    for (auto& unit : units) (fnv1a(unit.text) % 1000000 < threshold ? corpus.heldout : corpus.train).push_back(std::move(unit));
    // The sources come one after another; in a hash order (deterministic, independent of the input order) every stretch
    // of either split mixes them, so the first samples of the held-out text are a fair sample of all of it.
    for (auto* split : {&corpus.train, &corpus.heldout})
        std::stable_sort(split->begin(), split->end(), [](const CorpusText& a, const CorpusText& b) {
            return fnv1a("order:" + a.text) < fnv1a("order:" + b.text);
        });
    return corpus;
}

Corpus read_builtin_corpus(const CorpusPaths& paths) {
    std::vector<CorpusText> units = read_wordnet_glosses(paths.wordnet_dir);
    auto fortunes = read_fortunes(paths.fortunes_dir);
    units.insert(units.end(), fortunes.begin(), fortunes.end());
    auto gcide = read_gcide(paths.gcide_file);
    units.insert(units.end(), gcide.begin(), gcide.end());
    const std::string rte = paths.rte_file.empty() ? default_rte_path() : paths.rte_file;
    if (rte.empty()) throw Error("the repository's RTE text (data/RTE/train.tsv) was not found", "data/RTE/train.tsv");
    for (const auto& sentence : read_sentences(rte)) add_unit(units, sentence, "rte");
    return split_corpus(std::move(units), 0.02);
}

Corpus read_corpus_files(const std::vector<std::string>& files) {
    std::vector<CorpusText> units;
    for (const auto& file : files)
        for (const auto& sentence : read_sentences(file)) add_unit(units, sentence, file);
    if (units.empty()) throw Error("no unit of at least 3 words of text in the corpus files", files.empty() ? "--corpus" : files.front());
    return split_corpus(std::move(units), 0.02);
}

nlohmann::json Corpus::summary() const {
    std::map<std::string, std::array<long, 4>> counts;  // train units, train words, held-out units, held-out words
    for (const auto& unit : train) {
        counts[unit.source][0] += 1;
        counts[unit.source][1] += word_count(unit.text);
    }
    for (const auto& unit : heldout) {
        counts[unit.source][2] += 1;
        counts[unit.source][3] += word_count(unit.text);
    }
    nlohmann::json sources = nlohmann::json::object();
    std::array<long, 4> total{};
    for (const auto& [source, c] : counts) {
        sources[source] = {{"train_units", c[0]}, {"train_words", c[1]}, {"heldout_units", c[2]}, {"heldout_words", c[3]}};
        for (int i = 0; i < 4; ++i) total[i] += c[i];
    }
    return {{"sources", sources},
            {"train_units", total[0]}, {"train_words", total[1]}, {"heldout_units", total[2]}, {"heldout_words", total[3]}};
}

}  // namespace rankscope
