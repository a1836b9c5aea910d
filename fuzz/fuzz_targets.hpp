#pragma once
// The parsers of outside input, driven by one byte string each. Shared by the libFuzzer programs (fuzz_<parser>.cpp,
// built with clang -fsanitize=fuzzer,address,undefined by scripts/fuzz.sh) and by the regression test
// (tests/unit/test_fuzz_corpus.cpp), which feeds every file of tests/fuzz_corpus/<parser>/ through the same function.
//
// Contract checked: a parser returns normally or throws rankscope::Error. Any other exception escapes (std::terminate:
// a finding), and so do crashes, hangs (libFuzzer -timeout) and memory growth (-rss_limit_mb).
//
//   rankscope::fuzz::run("npy", data, size);   // parsers: see kParsers
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "rankscope/array.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"
#include "rankscope/pretrain.hpp"
#include "rankscope/sweep.hpp"
#include "rankscope/tokenizer.hpp"
#include "rankscope/use_lite.hpp"

namespace rankscope::fuzz {

// A per-process scratch folder (tmpfs when there is one).
inline const std::filesystem::path& scratch() {
    static const std::filesystem::path dir = [] {
        const std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
        auto path = base / ("rankscope-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(path);
        return path;
    }();
    return dir;
}

inline std::string put(const std::string& name, const std::uint8_t* data, std::size_t size) {
    const auto path = scratch() / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path.string();
}
inline std::string put(const std::string& name, const std::string& text) {
    return put(name, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

// Touches every byte of a view, so a view pointing outside its file is caught (ASan, or a fault past the mapping).
inline std::uint64_t touch(const ArrayView& view) {
    std::uint64_t sum = 0;
    const std::size_t bytes = view.nbytes();
    for (std::size_t i = 0; i < bytes; ++i) sum += static_cast<std::uint8_t>(view.data[i]);
    return sum;
}

inline void npy(const std::uint8_t* data, std::size_t size) {
    const HostArray array = read_npy(put("x.npy", data, size));
    if (array.bytes.size() != static_cast<std::size_t>(shape_nbytes(array.shape, array.dtype, "fuzz")))
        throw std::logic_error("npy: bytes do not match the shape");
    touch(array.view());
}

inline void safetensors(const std::uint8_t* data, std::size_t size) {
    const SafetensorsFile file(put("x.safetensors", data, size));
    for (const auto& name : file.names()) touch(file.view(name));
}

inline void csv(const std::uint8_t* data, std::size_t size) {
    const HostArray array = read_csv_matrix(put("x.csv", data, size));
    if (array.shape.size() != 2 || array.bytes.size() != static_cast<std::size_t>(array.numel()) * 8)
        throw std::logic_error("csv: bytes do not match the shape");
}

inline void config(const std::uint8_t* data, std::size_t size) {
    const HfConfig c = read_hf_config(put("config.json", data, size));
    if (c.layers < 1 || c.layers > 1024 || c.hidden_size < 1 || c.heads < 1 || c.vocab_size < 1)
        throw std::logic_error("config: an accepted size is out of range");
}

inline void manifest(const std::uint8_t* data, std::size_t size) {
    // Fixed shards beside the fuzzed model.json: a (16 bytes), b (8 bytes), empty (0 bytes).
    static const bool shards = [] {
        put("tfjs/a", std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40", 16));
        put("tfjs/b", std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8));
        put("tfjs/empty", std::string());
        return true;
    }();
    (void)shards;
    put("tfjs/model.json", data, size);
    for (const auto& w : read_tfjs_weights((scratch() / "tfjs").string()))
        if (w.bytes.size() != static_cast<std::size_t>(shape_nbytes(w.shape, w.dtype, w.name)))
            throw std::logic_error("manifest: bytes do not match the shape");
}

inline const char* kSampleText = "Hello, World! naïve café 東京 don't ##ing [UNK] x\ty";

inline void vocab_txt(const std::uint8_t* data, std::size_t size) {
    const auto tokenizer = load_wordpiece(put("vocab.txt", data, size));
    for (int id : tokenizer->encode(kSampleText))
        if (id < 0 || id >= tokenizer->vocab_size()) throw std::logic_error("vocab.txt: id outside the vocabulary");
}

inline void vocab_json(const std::uint8_t* data, std::size_t size) {
    put("use/vocab.json", data, size);
    const auto tokenizer = load_use_lite_tokenizer((scratch() / "use").string());
    for (int id : tokenizer->encode(kSampleText))
        if (id < 0 || id >= tokenizer->vocab_size()) throw std::logic_error("vocab.json: id outside the vocabulary");
}

inline void text(const std::uint8_t* data, std::size_t size) {
    static const std::string vocab = put("text-vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\na\n,\n.\nhello\n##llo\nhe\n");
    static const auto tokenizer = load_wordpiece(vocab);
    // USE lite's tokenizer too: NFKC (utf8proc) and the best-score segmentation on arbitrary bytes.
    static const std::string use_vocab = put("text-use/vocab.json",
        R"([["\ufffd",0],["<s>",0],["</s>",0],["a",0],["b",0],["c",0],["\u2581",-1],["he",-2],["llo",-2],["1\u20442",-3]])");
    static const auto use_tokenizer = load_use_lite_tokenizer((scratch() / "text-use").string());
    for (const auto& sentence : read_sentences(put("text.txt", data, size)))
        for (const auto* t : {tokenizer.get(), use_tokenizer.get()})
            for (int id : t->encode(sentence))
                if (id < 0 || id >= t->vocab_size()) throw std::logic_error("text: id outside the vocabulary");
}

// 64 kB for the tokenizers' total work: one 32 kB word (BPE merges in one piece) and 32 kB of short words (a
// pattern that looks far ahead at every position). Quadratic work on it runs past the replay's time budget.
inline const std::string& long_text() {
    static const std::string text = [] {
        std::string t;
        for (int i = 0; i < 16384; ++i) t += "ab";
        for (int i = 0; i < 8192; ++i) t += " a b";
        return t;
    }();
    return text;
}

// tokenizer.json (byte-level BPE or WordPiece, by model.type): the loader's checks, then encoding a sample text and
// the long text with what it accepted.
inline void tokenizer_json(const std::uint8_t* data, std::size_t size) {
    const auto tokenizer = load_tokenizer_json(put("bpe/tokenizer.json", data, size));
    for (const std::string& text : {std::string(kSampleText), long_text()})
        for (int id : tokenizer->encode(text))
            if (id < 0 || id >= tokenizer->vocab_size()) throw std::logic_error("tokenizer.json: id outside the vocabulary");
    for (int id : tokenizer->prefix())
        if (id < 0 || id >= tokenizer->vocab_size()) throw std::logic_error("tokenizer.json: special id outside the vocabulary");
}

// Sweep grids (JSON, TOML): the reader's checks, then the expansion into cells and each cell's key and arguments.
inline void sweep_grid(const std::string& file_name, const std::uint8_t* data, std::size_t size) {
    const SweepGrid grid = read_sweep_grid(put(file_name, data, size));
    for (const auto& cell : expand_sweep_grid(grid, 4096)) {
        if (cell.key.size() != 16 || cell.arguments.empty() || cell.arguments.front() != grid.experiment)
            throw std::logic_error("sweep grid: a cell without a key or a command");
        const std::string merged = merge_cell_tables({&cell}, {"a,b\n1,2\n"}, "fuzz.csv");
        if (merged.find(cell.key) == std::string::npos) throw std::logic_error("sweep grid: merged rows lost the key");
    }
}
inline void sweep_json(const std::uint8_t* data, std::size_t size) { sweep_grid("grid.json", data, size); }
inline void sweep_toml(const std::uint8_t* data, std::size_t size) { sweep_grid("grid.toml", data, size); }

// The pretraining corpus readers on one fuzzed file each: a fortunes file ('%' separated), WordNet's data.noun (the
// other three parts fixed and empty), and GCIDE's dictionary text (gzip-compressed here, so the paragraph parser sees
// the fuzzed bytes), then the train/held-out split of all they accepted.
inline void pretrain_corpus(const std::uint8_t* data, std::size_t size) {
    std::vector<CorpusText> units;
    put("corpus/fortunes/quotes", data, size);
    for (auto& unit : read_fortunes((scratch() / "corpus/fortunes").string())) units.push_back(std::move(unit));
    put("corpus/wordnet/data.noun", data, size);
    for (const char* part : {"data.verb", "data.adj", "data.adv"}) put(std::string("corpus/wordnet/") + part, std::string());
    for (auto& unit : read_wordnet_glosses((scratch() / "corpus/wordnet").string())) units.push_back(std::move(unit));
    const std::string gcide = (scratch() / "corpus/gcide.dict.gz").string();
    if (gzFile out = gzopen(gcide.c_str(), "wb")) {
        if (size > 0) gzwrite(out, data, static_cast<unsigned>(size));
        gzclose(out);
    }
    for (auto& unit : read_gcide(gcide)) units.push_back(std::move(unit));
    for (const auto& unit : units)
        if (unit.text.empty() || unit.text.find('\n') != std::string::npos)
            throw std::logic_error("corpus: an empty unit or one with a line break");
    const Corpus split = split_corpus(units, 0.02);
    if (split.train.size() + split.heldout.size() != units.size()) throw std::logic_error("corpus: the split lost units");
}

using Parser = void (*)(const std::uint8_t*, std::size_t);
inline const std::map<std::string, Parser>& parsers() {
    static const std::map<std::string, Parser> table = {
        {"npy", npy},          {"safetensors", safetensors}, {"csv", csv},   {"config", config},
        {"manifest", manifest}, {"vocab_txt", vocab_txt},    {"vocab_json", vocab_json}, {"text", text},
        {"tokenizer_json", tokenizer_json}, {"sweep_json", sweep_json}, {"sweep_toml", sweep_toml}, {"pretrain_corpus", pretrain_corpus}};
    return table;
}

// Runs one input; rankscope::Error is the expected outcome for bad input and is swallowed.
inline void run(const std::string& parser, const std::uint8_t* data, std::size_t size) {
    try {
        parsers().at(parser)(data, size);
    } catch (const Error&) {
    }
}

}  // namespace rankscope::fuzz
