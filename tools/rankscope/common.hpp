#pragma once
// Options every subcommand shares, and the subcommand registry used by main.cpp.
#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/provenance.hpp"
#include "rankscope/table.hpp"

namespace rankscope::cli {

struct CommonOptions {
    std::string out;          // --out DIR: where result files go ("" = print only, where the command allows it)
    std::uint64_t seed = 0;   // --seed N: every random draw derives from it, 0..2^64-1
    int threads = 0;          // --threads N: 0 = all cores, at most kMaxThreads
    std::string format = "table";  // --format table|csv|json: what goes to standard output
    bool allow_nonfinite = false;  // --allow-nonfinite: write NaN/Inf results instead of stopping with an error
    std::string device = "cpu";    // --device cpu|cuda|cuda:N (commands that run models: add_device_option)
};

constexpr int kMaxThreads = 256;

// ---- limits on flags ------------------------------------------------------------------------------------------------
// Every numeric flag gets one of these: its range appears in --help, and a value outside it (or not a plain decimal
// number, or not finite) is a parse error naming the flag, before anything is computed or written. Integers are read
// as decimal only ("010" is ten, not eight; "0x10", "1e3", "-1" for an unsigned value and 2^64 are rejected).
CLI::Validator IntRange(long long low, long long high);
CLI::Validator RealRange(double low, double high, bool low_open = false);
// --seeds N: the N consecutive seeds --seed, --seed + 1, ..., in every subcommand that takes it (a count, never a
// list; "2,3,4" is refused with the --seed/--seeds spelling of the same seeds). `purpose` ends the help text.
CLI::Option* add_seed_count_option(CLI::App& command, int& count, const std::string& purpose, int most);
std::vector<std::uint64_t> consecutive_seeds(std::uint64_t first, int count);
// After parsing: a list flag names each value once ("--centers median,median" measured median twice and doubled its
// rows in the std; "--variants SAN,SAN" ran SAN twice); --alpha, one value per layer, may repeat. Throws
// CLI::ValidationError "--variants: 'SAN' is listed twice". Run by main and by sweep's check of every cell.
void check_lists_name_values_once(const CLI::App& app);

// What sweep's and reproduce's cell_reuse_problem answer for a cell with no earlier run: a cell to run, but no reason
// to report ("running ... again", "recomputing ...").
inline constexpr char kNotRunYet[] = "not run yet";

// A CLI11 parse error as rankscope's one line: "0 is outside [1, 100] (--layers)", "unknown option '--layrs' (--help
// lists the options)".
std::string cli_error_line(std::string message);

// Every regular file below `folder` but the top-level names in `left_out` and temporaries ("<name>.tmp-<pid>"), sorted,
// each as {"file": relative path, "bytes", "sha256"}: what reproduce seals into a cell's manifest and sweep into its
// cell.json, so that a file changed since is found before the cell is reused.
nlohmann::json output_file_records(const std::filesystem::path& folder, const std::vector<std::string>& left_out);
// "" when every record (as output_file_records wrote them) still holds; else the first difference: "theory.csv was
// deleted", "theory.csv has 10 bytes, its record says 12 (truncated or changed)", "theory.csv changed since it was
// written (SHA-256 differs)", "... cannot be read: <why>", or "output record is malformed". Never throws.
std::string changed_output_file(const std::filesystem::path& folder, const nlohmann::json& records);
// The same for input files recorded as {"path", "bytes", "sha256"} (a manifest's files_read; sweep's fingerprints of
// its settings' files): "input <path> is gone", "... is no longer a regular file", "... changed since the cell ran",
// "... changed while the cell ran" (recorded unhashed), "... cannot be read: <why>", or "<where> is malformed"
// (`where` names the records: "files_read in manifest.json"). `hashes` keeps each path's SHA-256 for the rest of the
// run, so a checkpoint that many cells read is hashed once.
std::string changed_input_file(const nlohmann::json& records, const std::string& where,
                               std::map<std::string, std::string>& hashes);
// "" unless a cell's manifest ran in another working directory and its command holds a relative path that names
// something from either directory (from here it would name another file: a relative --model, a measured file); then
// why it must run again. An older build's manifest, which records no directory, passes.
std::string moved_working_directory(const nlohmann::json& manifest);
// One of `choices` (for list flags: each element): "unknown <what> 'x' (expected a, b or c)".
CLI::Validator OneOf(std::vector<std::string> choices, const std::string& what);
// A size computed from several flags (e.g. samples x tokens), checked before allocating: throws rankscope::Error
// "<what> = <value> is too large (at most <limit>)" naming the flags that set it.
void check_size(const std::string& what, double value, double limit, const std::string& flags);
// NaN/Inf in a result: throws rankscope::Error "<what> is <NaN|Inf> (<where>)" unless --allow-nonfinite.
void check_finite(const CommonOptions& options, double value, const std::string& what, const std::string& where);

// A file flag must name a readable regular file: "no such file", "is a directory", "cannot read" (named, exit 2).
// A ':' suffix (file.safetensors:tensor) is allowed when `allow_tensor_suffix`.
CLI::Validator ReadableFile(bool allow_tensor_suffix = false);
// A folder flag: any path but the empty one ("" from an unset shell variable: --out "" made std::filesystem throw, an
// abort; --pretrained "" ran as if no runs were there). `name_what` completes "an empty path: name ...".
CLI::Validator NonEmptyFolder(const std::string& name_what);
// A folder flag that may name a folder to be made (--checkpoints): a file there is refused now, naming the flag (it
// failed later on "cannot create directories: Not a directory (PATH)").
CLI::Validator FolderOrNew();

// What a command does without --out: refuse to run (`required`: training commands), write nothing and print only
// (`optional`: measure, embed), or write to a default folder that --help shows (`defaults_to("out/model")`; it used
// to be chosen in the command's code, and --help did not say where the files would go).
struct OutFolder {
    enum class Kind { Required, Optional, Default } kind = Kind::Optional;
    std::string default_folder;
    static OutFolder required() { return {Kind::Required, {}}; }
    static OutFolder optional() { return {Kind::Optional, {}}; }
    static OutFolder defaults_to(std::string folder) { return {Kind::Default, std::move(folder)}; }
};

// Adds --out (by `out_folder`'s rule), --seed, --threads, --allow-nonfinite with their defaults shown in --help, and
// --format with the standard-output formats the command prints besides "table" (none: no --format; a format a command
// did not print was once accepted and ignored).
void add_common_options(CLI::App& command, CommonOptions& options, const OutFolder& out_folder,
                        const std::vector<std::string>& other_formats = {});

// Removes common options that `command` would accept and ignore (--seed where nothing is drawn, --allow-nonfinite
// where no result can be NaN/Inf or a non-finite one always stops the run): refused as unknown, not silently ignored.
void remove_common_options(CLI::App& command, std::initializer_list<const char*> flags);

// Adds --device (cpu, cuda, cuda:N) to a command that runs models; start_run checks it before any work.
void add_device_option(CLI::App& command, CommonOptions& options);

// --format csv: `table` as CSV on standard output; --format json: the findings' checks (claim, measured, verdict) and
// reading. Returns false for --format table (the command prints its own table).
bool print_csv_or_json(const CommonOptions& options, const Table& table, const Findings& findings);

// `table` as JSON records, one object per row keyed by column name (Real cells as numbers, NaN written as null).
nlohmann::json table_records(const Table& table);

// Fills the provenance once the command line has been parsed.
Provenance start_run(const CommonOptions& options);

// Remembered by main() for provenance: the words, and the command parsed ("model", "paths sample", "task": a task
// run after another in one folder takes the other's files, as a re-run of the same command does).
void remember_command_line(int argc, const char* const* argv);
void remember_subcommand(const std::string& subcommand);

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
std::function<void()> setup_trainability(CLI::App& command);
std::function<void()> setup_circle_regimes(CLI::App& command);
std::function<void()> setup_failure_modes(CLI::App& command);
std::function<void()> setup_embed(CLI::App& command);
std::function<void()> setup_sweep(CLI::App& command);
std::function<void()> setup_tokenize(CLI::App& command);
std::function<void()> setup_pretrain(CLI::App& command);
std::function<void()> setup_dynamics(CLI::App& command);

// The subcommand called `name` (main.cpp's table), or nullptr.
const Subcommand* find_subcommand(const std::string& name);

}  // namespace rankscope::cli
