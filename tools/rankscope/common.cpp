#include "common.hpp"

#include "rankscope/device.hpp"

#include "rankscope/intra_op_threads.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "rankscope/error.hpp"
#include "rankscope/file_hash.hpp"
#include "rankscope/io.hpp"

namespace rankscope::cli {
namespace {
std::vector<std::string> command_line;
std::string subcommand_name;

std::string number_text(double value) {
    if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<long long>(value));
    return fmt::format("{}", value);
}
}  // namespace

void remember_command_line(int argc, const char* const* argv) { command_line.assign(argv, argv + argc); }
void remember_subcommand(const std::string& subcommand) { subcommand_name = subcommand; }

CLI::Validator IntRange(long long low, long long high) {
    return CLI::Validator(
        [low, high](std::string& text) -> std::string {
            std::size_t i = 0;
            if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
            if (i == text.size() || text.find_first_not_of("0123456789", i) != std::string::npos)
                return "'" + text + "' is not a whole decimal number";
            errno = 0;
            char* end = nullptr;
            const long long value = std::strtoll(text.c_str(), &end, 10);
            if (errno == ERANGE || value < low || value > high)
                return fmt::format("{} is outside [{}, {}]", text, low, high);
            text = std::to_string(value);  // canonical decimal: CLI11 would read "010" as octal
            return {};
        },
        fmt::format("in [{}, {}]", low, high));
}

CLI::Option* add_seed_count_option(CLI::App& command, int& count, const std::string& purpose, int most) {
    const CLI::Validator in_range = IntRange(1, most);
    const CLI::Validator count_not_list(
        [in_range](std::string& text) -> std::string {
            const auto comma = text.find(',');
            if (comma == std::string::npos) return in_range(text);
            const std::string what = fmt::format("'{}': --seeds is a count of consecutive seeds from --seed", text);
            // The same seeds in that spelling when they are consecutive and ascending; other sets have none.
            std::vector<long long> seeds;
            std::istringstream elements(text);
            for (std::string element; std::getline(elements, element, ',');) {
                if (!IntRange(0, std::numeric_limits<int>::max())(element).empty()) return what;
                seeds.push_back(std::stoll(element));
            }
            for (std::size_t i = 1; i < seeds.size(); ++i)
                if (seeds[i] != seeds[i - 1] + 1) return what + " (a set of seeds that are not consecutive cannot be given)";
            return fmt::format("{} (--seed {} --seeds {} runs seeds {} to {})", what, seeds.front(), seeds.size(),
                               seeds.front(), seeds.back());
        },
        fmt::format("in [1, {}]", most));
    return command.add_option("--seeds", count, "Number of seeds: --seed, --seed + 1, ... (" + purpose + ")")
        ->transform(count_not_list);
}

nlohmann::json output_file_records(const std::filesystem::path& folder, const std::vector<std::string>& left_out) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
        if (!entry.is_regular_file()) continue;
        const auto relative = std::filesystem::relative(entry.path(), folder);
        if (std::find(left_out.begin(), left_out.end(), relative.generic_string()) != left_out.end() ||
            relative.filename().string().find(".tmp-") != std::string::npos)
            continue;
        files.push_back(relative);
    }
    std::sort(files.begin(), files.end());
    nlohmann::json records = nlohmann::json::array();
    for (const auto& file : files)
        records.push_back({{"file", file.generic_string()},
                           {"bytes", std::filesystem::file_size(folder / file)},
                           {"sha256", sha256_file(folder / file)}});
    return records;
}

namespace {

// One record of a file: {key: its name or path, "bytes": unsigned, "sha256": string — or null, recorded unhashed,
// where `unhashed_allowed`}; nullopt when it is not that shape.
struct FileRecord {
    std::string name;
    std::uintmax_t bytes = 0;
    std::optional<std::string> sha256;  // nullopt: recorded unhashed
};
std::optional<FileRecord> file_record(const nlohmann::json& record, const char* key, bool unhashed_allowed) {
    if (!record.is_object()) return std::nullopt;
    const auto name = record.find(key), bytes = record.find("bytes"), sha256 = record.find("sha256");
    if (name == record.end() || !name->is_string() || bytes == record.end() || !bytes->is_number_unsigned() ||
        sha256 == record.end() || !(sha256->is_string() || (unhashed_allowed && sha256->is_null())))
        return std::nullopt;
    return FileRecord{name->get<std::string>(), bytes->get<std::uintmax_t>(),
                      sha256->is_string() ? std::optional<std::string>(sha256->get<std::string>()) : std::nullopt};
}

// How the file at `path` differs from its record now (`hashes`, when given, keeps each path's SHA-256 for the run).
struct FileDifference {
    enum Kind { None, Missing, NotRegular, Size, Content, Unreadable } kind = None;
    std::uintmax_t size = 0;  // the size now (Size)
    std::string why;          // Unreadable
};
FileDifference compare_with_record(const std::filesystem::path& path, const FileRecord& record,
                                   std::map<std::string, std::string>* hashes) {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) return {FileDifference::Missing, 0, ""};
    if (!std::filesystem::is_regular_file(path, error)) return {FileDifference::NotRegular, 0, ""};
    const auto size = std::filesystem::file_size(path, error);
    if (error || size != record.bytes) return {FileDifference::Size, size, ""};
    std::string hash;
    if (hashes)
        if (const auto found = hashes->find(path.string()); found != hashes->end()) hash = found->second;
    if (hash.empty()) {
        try {
            hash = sha256_file(path);
        } catch (const Error& failure) {  // unreadable now: the cell runs again (and fails alone, saying why)
            return {FileDifference::Unreadable, 0, failure.what()};
        }
        if (hashes) hashes->emplace(path.string(), hash);
    }
    return hash == record.sha256 ? FileDifference{} : FileDifference{FileDifference::Content, 0, ""};
}

}  // namespace

std::string changed_output_file(const std::filesystem::path& folder, const nlohmann::json& records) {
    if (!records.is_array()) return "output record is malformed";
    for (const auto& entry : records) {
        const auto record = file_record(entry, "file", false);
        if (!record || record->name.empty()) return "output record is malformed";
        const std::string& name = record->name;
        const FileDifference difference = compare_with_record(folder / name, *record, nullptr);
        switch (difference.kind) {
            case FileDifference::None: continue;
            case FileDifference::Missing:
            case FileDifference::NotRegular: return name + " was deleted";
            case FileDifference::Size:
                return fmt::format("{} has {} bytes, its record says {} (truncated or changed)", name, difference.size,
                                   record->bytes);
            case FileDifference::Unreadable: return name + " cannot be read: " + difference.why;
            case FileDifference::Content: return name + " changed since it was written (SHA-256 differs)";
        }
    }
    return "";
}

std::string changed_input_file(const nlohmann::json& records, const std::string& where,
                               std::map<std::string, std::string>& hashes) {
    if (!records.is_array()) return where + " is malformed";
    for (const auto& entry : records) {
        const auto record = file_record(entry, "path", true);
        if (!record) return where + " is malformed";
        const std::string& name = record->name;
        if (!record->sha256) return "input " + name + " changed while the cell ran";
        const FileDifference difference = compare_with_record(name, *record, &hashes);
        switch (difference.kind) {
            case FileDifference::None: continue;
            case FileDifference::Missing: return "input " + name + " is gone";
            case FileDifference::NotRegular: return "input " + name + " is no longer a regular file";
            case FileDifference::Size:
            case FileDifference::Content: return "input " + name + " changed since the cell ran";
            case FileDifference::Unreadable: return "input " + name + " cannot be read: " + difference.why;
        }
    }
    return "";
}

std::string moved_working_directory(const nlohmann::json& manifest) {
    const auto recorded = manifest.is_object() ? manifest.find("working_directory") : manifest.end();
    const auto argv = manifest.is_object() ? manifest.find("argv") : manifest.end();
    if (!manifest.is_object() || recorded == manifest.end() || !recorded->is_string() || argv == manifest.end() ||
        !argv->is_array())
        return "";
    std::error_code error;
    const std::filesystem::path here = std::filesystem::current_path(error), there = recorded->get<std::string>();
    if (error || there == here) return "";
    // Only a relative path names another file from here: an argument that names something from either directory.
    for (std::size_t i = 1; i < argv->size(); ++i) {
        const auto& word = (*argv)[i];
        if (!word.is_string() || word.get<std::string>().empty() || word.get<std::string>()[0] == '-') continue;
        const std::filesystem::path path = word.get<std::string>();
        if (path.is_relative() && (std::filesystem::exists(there / path, error) || std::filesystem::exists(here / path, error)))
            return "it ran in another working directory (" + printable(there.string(), 200) + "), where '" +
                   printable(path.string(), 200) + "' names another file";
    }
    return "";
}

void check_lists_name_values_once(const CLI::App& app) {
    for (const CLI::App* command = &app; command != nullptr;) {
        for (const CLI::Option* option : command->get_options()) {
            if (option->get_delimiter() != ',' || option->get_name() == "--alpha") continue;
            std::set<std::string> seen;
            for (const std::string& value : option->results())
                if (!seen.insert(value).second)
                    throw CLI::ValidationError(option->get_name(), fmt::format("'{}' is listed twice", value));
        }
        const auto chosen = command->get_subcommands();
        command = chosen.empty() ? nullptr : chosen.front();
    }
}

std::vector<std::uint64_t> consecutive_seeds(std::uint64_t first, int count) {
    check_consecutive_seeds(first, count, "--seeds");
    std::vector<std::uint64_t> seeds;
    for (int i = 0; i < count; ++i) seeds.push_back(first + std::uint64_t(i));
    return seeds;
}

CLI::Validator RealRange(double low, double high, bool low_open) {
    return CLI::Validator(
        [low, high, low_open](std::string& text) -> std::string {
            errno = 0;
            char* end = nullptr;
            const double value = std::strtod(text.c_str(), &end);
            if (text.empty() || end != text.c_str() + text.size()) return "'" + text + "' is not a number";
            // strtod sets ERANGE for a decimal that rounds to a subnormal, not for one written exactly (0x1p-1074).
            if ((errno == ERANGE && std::isfinite(value) && std::fabs(value) <= std::numeric_limits<double>::min()) ||
                std::fpclassify(value) == FP_SUBNORMAL)
                return "'" + text + "' is too close to zero for a double (smallest normal 2.2e-308)";
            if (!std::isfinite(value) || errno == ERANGE) return "'" + text + "' is not a finite number";
            if (value > high || value < low || (low_open && value == low))
                return fmt::format("{} is outside {}{}, {}]", text, low_open ? "(" : "[", number_text(low), number_text(high));
            return {};
        },
        fmt::format("in {}{}, {}]", low_open ? "(" : "[", number_text(low), number_text(high)));
}

CLI::Validator OneOf(std::vector<std::string> choices, const std::string& what) {
    std::string expected;
    for (std::size_t i = 0; i < choices.size(); ++i)
        expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    return CLI::Validator(
        [choices, what, expected](std::string& text) -> std::string {
            if (std::find(choices.begin(), choices.end(), text) != choices.end()) return {};
            return "unknown " + what + " '" + text + "' (expected " + expected + ")";
        },
        "one of: " + expected);
}

CLI::Validator ReadableFile(bool allow_tensor_suffix) {
    return CLI::Validator(
        [allow_tensor_suffix](std::string& text) -> std::string {
            std::string path = text;
            std::error_code ec;
            if (allow_tensor_suffix && !std::filesystem::exists(path, ec)) {
                // FILE.safetensors:tensor, split where the reader splits (read_matrix_file): at the first
                // ".safetensors:", so a tensor name may hold ':' itself.
                const auto marker = path.find(".safetensors:");
                if (marker != std::string::npos) path = path.substr(0, marker + 12);
            }
            const auto status = std::filesystem::status(path, ec);
            // A symbolic-link loop is not "no such file".
            if (ec && ec != std::errc::no_such_file_or_directory) return "cannot open: " + ec.message() + ": " + path;
            if (!std::filesystem::exists(status)) return "no such file: " + path;
            if (std::filesystem::is_directory(status)) return "is a directory, not a file: " + path;
            if (!std::filesystem::is_regular_file(status) && !std::filesystem::is_character_file(status) &&
                !std::filesystem::is_fifo(status))
                return "not a regular file: " + path;
            if (::access(path.c_str(), R_OK) != 0) return "cannot read (permission denied): " + path;
            return {};
        },
        "FILE");
}

CLI::Validator NonEmptyFolder(const std::string& name_what) {
    return CLI::Validator(
        [name_what](std::string& text) -> std::string { return text.empty() ? "an empty path: name " + name_what : ""; },
        "FOLDER");
}

CLI::Validator FolderOrNew() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            std::error_code error;
            const auto status = std::filesystem::status(text, error);
            if (std::filesystem::exists(status) && !std::filesystem::is_directory(status))
                return "exists and is not a folder: " + text;
            return {};
        },
        "FOLDER");
}

void check_size(const std::string& what, double value, double limit, const std::string& flags) {
    check_size_limit(what, value, limit, flags);
}

void check_finite(const CommonOptions& options, double value, const std::string& what, const std::string& where) {
    check_finite_result(value, what, where, options.allow_nonfinite);
}

void add_common_options(CLI::App& command, CommonOptions& options, const OutFolder& out_folder,
                        const std::vector<std::string>& other_formats) {
    const bool optional = out_folder.kind == OutFolder::Kind::Optional;
    auto* out = command.add_option("--out", options.out,
                                   optional ? "Directory for result files (created if missing); without it nothing is written"
                                            : "Directory for result files (created if missing)")
                    ->check(NonEmptyFolder("the folder for the results"));
    if (out_folder.kind == OutFolder::Kind::Required) out->required();
    if (out_folder.kind == OutFolder::Kind::Default) {
        // Shown in --help, and set once this command is the one parsed: `paths` check, count and sample share one
        // CommonOptions, and sample's default must not make the other two write files.
        out->default_str(out_folder.default_folder);
        command.parse_complete_callback([&options, folder = out_folder.default_folder] {
            if (options.out.empty()) options.out = folder;
        });
    }
    command.add_option("--seed", options.seed, "Seed for every random draw")
        ->capture_default_str()
        ->transform(CLI::Validator(
            [](std::string& text) -> std::string {
                if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
                    return "'" + text + "' is not a whole decimal number in [0, 18446744073709551615]";
                errno = 0;
                const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
                if (errno == ERANGE) return text + " is outside [0, 18446744073709551615]";
                text = std::to_string(value);
                return {};
            },
            "in [0, 2^64-1]"));
    command.add_option("--threads", options.threads, "Worker threads (0 = all cores)")
        ->capture_default_str()
        ->transform(IntRange(0, kMaxThreads));
    if (!other_formats.empty()) {
        std::vector<std::string> formats = {"table"};
        formats.insert(formats.end(), other_formats.begin(), other_formats.end());
        command.add_option("--format", options.format, "Standard output format")
            ->capture_default_str()
            ->check(CLI::IsMember(formats));
    }
    command.add_flag("--allow-nonfinite", options.allow_nonfinite,
                     "Write NaN/Inf results (e.g. a diverged network) instead of stopping with an error");
}

void remove_common_options(CLI::App& command, std::initializer_list<const char*> flags) {
    for (const char* flag : flags) command.remove_option(command.get_option(flag));
}

void add_device_option(CLI::App& command, CommonOptions& options) {
    command.add_option("--device", options.device,
                       "Where models run: cpu, cuda or cuda:N (needs a CUDA-enabled libtorch; Debian's is CPU-only). "
                       "Tensors are made on the CPU from the seed and moved once; measurements read them back")
        ->capture_default_str();
}

Provenance start_run(const CommonOptions& options) {
    // A bad --out is found now, not after the computation.
    std::error_code ec;
    if (!options.out.empty() && std::filesystem::exists(options.out, ec) && !std::filesystem::is_directory(options.out, ec))
        throw Error("exists and is not a directory", "--out " + options.out);
    // A folder (or, for a new one, the nearest existing folder above it) this process may not write into: said now,
    // not when the first result file is written after the computation. Tried by making (and removing) a folder in it:
    // access() says yes to root on a read-only file system or in /proc, where the run then failed on "cannot create
    // directories" without naming --out.
    if (!options.out.empty()) {
        std::filesystem::path existing = std::filesystem::absolute(options.out, ec);
        while (!existing.empty() && !std::filesystem::exists(existing, ec) && existing != existing.parent_path())
            existing = existing.parent_path();
        if (!existing.empty() && std::filesystem::is_directory(existing, ec)) {
            std::string probe = (existing / ".rankscope-write-test-XXXXXX").string();
            if (::mkdtemp(probe.data()) == nullptr) {
                const int reason = errno;
                throw Error(fmt::format("cannot write into {}: {}", existing.string(), std::strerror(reason)),
                            "--out " + options.out);
            }
            ::rmdir(probe.c_str());
        }
    }
    set_results_directory(options.out, subcommand_name);
    const at::Device device = parse_device(options.device);  // an unusable device is an error before any work
    const int threads = use_threads(options.threads);
    std::vector<const char*> argv;
    for (const auto& word : command_line) argv.push_back(word.c_str());
    Provenance provenance = make_provenance(static_cast<int>(argv.size()), argv.data(), options.seed, threads);
    provenance.device = device.str();
    provenance.subcommand = subcommand_name;
    return provenance;
}

nlohmann::json table_records(const Table& table) {
    nlohmann::json records = nlohmann::json::array();
    for (std::size_t r = 0; r < table.rows(); ++r) {
        nlohmann::json record = nlohmann::json::object();
        for (const auto& column : table.columns()) switch (column.kind) {
                case Table::Integer: record[column.name] = column.integers[r]; break;
                case Table::Unsigned: record[column.name] = column.unsigneds[r]; break;
                case Table::Real: record[column.name] = column.reals[r]; break;  // NaN when missing: dumped as null
                case Table::Text: record[column.name] = column.texts[r]; break;
            }
        records.push_back(std::move(record));
    }
    return records;
}

bool print_csv_or_json(const CommonOptions& options, const Table& table, const Findings& findings) {
    if (options.format == "csv") {
        std::cout << table.to_csv().to_string();
        return true;
    }
    if (options.format == "json") {
        nlohmann::json checks = nlohmann::json::array();
        for (const auto& c : findings.checks)
            checks.push_back({{"claim", c.claim}, {"measured", c.measured}, {"verdict", verdict_name(c.verdict)}});
        std::cout << json_text({{"checks", checks}, {"reading", findings.reading}}, 2) << "\n";
        return true;
    }
    return false;
}

// CLI11 says "--layers: 0 is outside [1, 100]"; rankscope puts the flag last: "0 is outside [1, 100] (--layers)".
// (The positional of `measure` is called "file": "is a directory, not a file: d (file)".)
std::string cli_error_line(std::string message) {
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    // "The following arguments were not expected: 3 --layrs" (CLI11 lists them last first): the option is the news.
    const std::string extras = "The following argument";
    if (message.rfind(extras, 0) == 0 && message.find(": ") != std::string::npos) {
        std::istringstream words(message.substr(message.find(": ") + 2));
        std::vector<std::string> unexpected;
        for (std::string word; words >> word;) unexpected.push_back(word);
        for (auto word = unexpected.rbegin(); word != unexpected.rend(); ++word)
            if (word->size() > 1 && (*word)[0] == '-')
                return fmt::format("unknown option '{}' (--help lists the options)", *word);
        if (!unexpected.empty()) return fmt::format("unexpected argument '{}' (--help lists the options)", unexpected.back());
    }
    // "--seed: At Most 1 required but received 2" (CLI11's words for a repeated single-value option).
    const std::string repeated = ": At Most 1 required but received ";
    if (const auto at = message.find(repeated); at != std::string::npos && at > 0 && message.find(' ') > at)
        return fmt::format("{} given {} times; it takes one value", message.substr(0, at), message.substr(at + repeated.size()));
    const auto colon = message.find(": ");
    // The part before ": " is an option ("--layers") or a positional's name ("file") when it holds no space.
    if (!message.empty() && colon != std::string::npos && colon > 0 && message.find(' ') > colon)
        return message.substr(colon + 2) + " (" + message.substr(0, colon) + ")";
    return message;
}

}  // namespace rankscope::cli
