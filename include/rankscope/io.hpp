#pragma once
// Readers and writers for the matrix and checkpoint formats rankscope uses.
//
// Every reader validates against the published format and throws rankscope::Error naming the file and the problem
// (truncated data, unsupported dtype, bad header, missing tensor). Every writer is atomic: it writes "<path>.tmp-<pid>"
// and renames it over <path>, so a crash never leaves a half-written result.
#include <nlohmann/json_fwd.hpp>

#include "rankscope/array.hpp"

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rankscope {

// ---- bounded reading of outside input --------------------------------------------------------------------------------
// Size limits, checked against the file's size before anything is read (documented in docs/reliability.md).
constexpr std::uint64_t kMaxJsonFileBytes = 64ull << 20;        // config.json, model.json, vocab.json, manifests
constexpr std::uint64_t kMaxTextFileBytes = 256ull << 20;       // text for tokenisation (.txt, .tsv), vocab.txt
constexpr std::uint64_t kMaxCsvFileBytes = 256ull << 20;        // .csv matrices
constexpr std::uint64_t kMaxNpyHeaderBytes = 10000;             // numpy's own limit (format.py _MAX_HEADER_SIZE)
constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100000000; // the safetensors reference implementation's limit

// A regular file opened for reading. Anything else (a directory, /dev/zero, a FIFO — opened without blocking — a
// socket) throws Error("<what> must be a regular file, this is a FIFO", path).
// Every file opened for its contents is noted in the process's record of files read (files_read below), unless the
// caller says it is rankscope's own output read back or hashed (FileUse::OwnOutput).
enum class FileUse { Input, OwnOutput };
class InputFile {
public:
    InputFile(const std::string& path, const std::string& what, FileUse use = FileUse::Input);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
    std::uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }
    int fd() const { return fd_; }
    // Exactly `count` bytes at `offset`; throws Error("truncated file: <what> needs bytes a..b, the file has n").
    void read_at(std::uint64_t offset, void* buffer, std::uint64_t count, const std::string& what) const;

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// The files this process has opened as input (weights, configs, tokenizers, texts, arrays), each once, in the order
// of first opening, with the size and modification time they had then. write_manifest lists those outside the result
// folder as "files_read", each with its SHA-256 (the hash the Hugging Face hub shows for a weight file), so a result
// names the exact checkpoint it came from.
struct FileRead {
    std::string path;  // absolute
    std::string what;  // "safetensors file", "config.json", ...
    std::uint64_t bytes = 0;
    std::int64_t modified_ns = 0;  // since the epoch, as stat gave it when the file was first opened
    // The file's identity and status-change time then: a file replaced under the same name with the same size and
    // modification time (`cp -p`, `rsync -a`, `mv` of a `touch -r` copy) or rewritten in place has another inode or a
    // later ctime.
    std::uint64_t device = 0, inode = 0;
    std::int64_t status_changed_ns = 0;
};
std::vector<FileRead> files_read();
// The records of files_read() outside `result_folder`, as JSON: [{path, what, bytes, modified (UTC, ISO 8601),
// sha256}], the hash computed once per file and process (about 250 MB/s); a file changed or removed since it was read
// has "sha256": null and a "note" saying so.
nlohmann::json files_read_records(const std::string& result_folder);

// The whole file, after checking it is a regular file of at most `limit` bytes.
std::string read_file_limited(const std::string& path, std::uint64_t limit, const std::string& what);

// The checks of read_file_limited without the read: for files another library or process opens by name.
void check_input_file(const std::string& path, std::uint64_t limit, const std::string& what);

// The same, or "" when nothing exists at `path` (rankscope's own outputs read back: a cell's record, a log, a table;
// their callers pass kNoSizeLimit, since a valid sweep of 100,000 cells may gather more than any input limit).
// Something that exists but is not a regular file (or is over `limit`) is still an error.
constexpr std::uint64_t kNoSizeLimit = ~std::uint64_t{0};
std::string read_file_if_present(const std::string& path, std::uint64_t limit, const std::string& what);

// A SentencePiece model (spiece.model, tokenizer.model): the real ones are 0.2-5 MB.
constexpr std::uint64_t kMaxSentencePieceModelBytes = 64ull << 20;

// `text` for an error message: control characters as \xNN, cut to about `max_length` characters with "...".
std::string printable(const std::string& text, std::size_t max_length = 80);
// (printable: C0 controls and DEL as \xNN, C1 controls and the bidirectional overrides/isolates as \uNNNN, cut after
// about max_length bytes but never inside a UTF-8 character.)
// `text` on one line: every control character (a newline would end a script's command or comment line and start
// another) replaced by a space. For names shown in tables, titles and scripts.
std::string control_characters_as_spaces(const std::string& text);

// ---- .npy (NumPy format versions 1.0, 2.0, 3.0) -----------------------------------------------------------------
// The header must be numpy's dict literal with exactly the keys 'descr', 'fortran_order' and 'shape' (strict grammar,
// at most kMaxNpyHeaderBytes), and the file exactly as long as header + data.
HostArray read_npy(const std::string& path);
void write_npy(const std::string& path, const ArrayView& array);

// ---- .csv: numeric rows, comma- or whitespace-separated ------------------------------------------------------------
// Blank lines and lines starting with '#' are skipped. The first remaining line is a header if and only if EVERY one of
// its cells is non-empty and not a number; otherwise it is data. Every data line must have the same number of cells,
// each a number (strtod syntax, surrounding spaces and one pair of double quotes allowed): anything else is an error naming the line and column, so a
// data row is never dropped silently.
HostArray read_csv_matrix(const std::string& path);

// ---- .safetensors --------------------------------------------------------------------------------------------------
// Memory-maps the file; views stay valid while the SafetensorsFile lives.
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    std::vector<std::string> names() const;  // sorted
    bool contains(const std::string& name) const { return entries_.count(name) != 0; }
    // Throws Error("no tensor named ...", path) listing a few available names.
    ArrayView view(const std::string& name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // Hands the tensor's pages back (madvise MADV_DONTNEED): they leave this process's resident memory and are read
    // again from the file (or the page cache) if the tensor is viewed later. For loaders that copy a tensor once.
    void release(const std::string& name) const;

private:
    std::string path_;
    const std::byte* mapping_ = nullptr;
    std::size_t mapping_size_ = 0;
    std::map<std::string, ArrayView> entries_;
    std::map<std::string, std::string> metadata_;
};

struct NamedArray {
    std::string name;
    ArrayView array;
};
void write_safetensors(const std::string& path, const std::vector<NamedArray>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// ---- any matrix file -----------------------------------------------------------------------------------------------
// "x.npy", "x.csv", "model.safetensors:name" (or "model.safetensors" holding exactly one tensor). An array with a zero
// extent (an empty batch) is an error here, naming the file and the shape.
HostArray read_matrix_file(const std::string& spec);

// ---- JSON files ----------------------------------------------------------------------------------------------------
// The parsed file (a regular file of at most kMaxJsonFileBytes, nested at most 64 deep); throws one-line Errors:
// "cannot open <what>: ...", "not valid JSON: syntax error at line 3, column 7", naming the file.
nlohmann::json read_json_file(const std::string& path, const std::string& what);
// The same for JSON text already in memory (`where` names its source in errors). A NUL byte anywhere is an error
// (nlohmann's parser stops at it and ignored what followed).
nlohmann::json parse_json_text(const std::string& text, const std::string& where);
// The same, keeping object keys in the file's order (sweep grids: the order of axes).
nlohmann::ordered_json parse_ordered_json_text(const std::string& text, const std::string& where);
// For readers of outside JSON: a nlohmann type or range error met while interpreting the file at `path` (a field of
// the wrong type: `"ignore_merges": "yes"`) becomes Error("a field of the wrong type or value: type must be boolean,
// but is string", path) instead of the library's bracketed text naming no file.
//   try { ... } catch (const nlohmann::json::exception& e) { throw_json_content_error(e, path); }
[[noreturn]] void throw_json_content_error(const std::exception& error, const std::string& path);
// JSON text of a document rankscope writes (`indent` < 0: one line). Text that is not UTF-8 — a path or argument
// holding a byte such as 0xFF, which JSON cannot carry — is written with U+FFFD in its place (nlohmann's dump threw,
// after the results were written and before their manifest).
std::string json_text(const nlohmann::json& document, int indent = -1);
// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_reason(const std::exception& error);
// A JSON integer in [low, high], whether nlohmann stored it signed or unsigned; anything else (a float, a string, a
// value outside the range: 2^32 + 7 is not narrowed to 7) throws Error("<field> must be an integer in [low, high],
// found <value>", where).
std::int64_t json_integer(const nlohmann::json& value, std::int64_t low, std::int64_t high, const std::string& field,
                          const std::string& where);

// ---- TensorFlow.js weights (model.json + binary shards) --------------------------------------------------------------
// Every weight of the manifest's weightsManifest groups, checked: shard paths are plain file names in `directory`, the
// shards' total size equals what the weights describe (float32/int32 only; checked arithmetic) before any shard is
// read, names are unique.
struct TfjsWeight {
    std::string name;
    DType dtype = DType::F32;  // F32 or I32
    std::vector<std::int64_t> shape;
    std::vector<std::byte> bytes;
};
std::vector<TfjsWeight> read_tfjs_weights(const std::string& directory);

// ---- atomic text output --------------------------------------------------------------------------------------------
// Writes "<path>.tmp-<pid>" and renames it into place. An error names `path` and the system's reason.
void write_file_atomically(const std::string& path, const std::string& contents);
// The folder of this process's results (the command line's --out, set by start_run). A manifest.json is written last,
// so a folder without one holds no finished run; the first file this process writes into that folder or below it
// (other than the manifest itself) removes a manifest.json an earlier run left there, so that a run interrupted
// part-way never leaves its new files beside an old run's manifest. Only that folder's own manifest.json: the
// manifests of sweep's and reproduce's cells (each written by its own process) are left to them. Empty: none.
// When that manifest was written by the same `subcommand` ("model", "paths sample"; its provenance says), the files it
// lists directly in the folder go with it (outputs, figures with their gnuplot scripts, a --dump): a re-run with other
// settings left an earlier run's paths.csv or sink_rate.csv beside its own, unlisted but read as its results. Another
// command's files (a `dynamics --out` into a pretrain run's folder) are left alone.
void set_results_directory(const std::string& directory, const std::string& subcommand = "");

}  // namespace rankscope
