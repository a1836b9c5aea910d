// rankscope sweep — a grid of one experiment's settings (sweep.hpp), each cell run as that experiment's own command
// into DIR/cells/<key>/, on local workers or MPI ranks; the cells' tables gathered into DIR/sweep.csv and DIR/tables/.
//
// A cell is done when DIR/cells/<key>/cell.json says "ok", this build wrote it, its input files are as they were and
// its main table is there: a re-run (after a kill, or with more axis values) runs only the cells that are not done. A
// failed cell is recorded in cell.json and cells.csv and does not stop the others; the sweep then ends with exit status
// 2 after writing the tables of the cells that succeeded.
#include <fmt/ranges.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/file_hash.hpp"
#include "rankscope/io.hpp"
#include "rankscope/process.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/sweep.hpp"
#include "sweep_collapse_depth.hpp"
#include "sweep_scheduler.hpp"

namespace rankscope::cli {
namespace {

struct SweepOptions {
    std::string grid;
    std::string out;
    int workers = 1;
    int cell_threads = 1;
    bool dry_run = false;
    bool reuse_other_builds = false;  // reuse cells another rankscope build wrote (said on stderr, in cells.csv)
};

std::string read_text(const std::filesystem::path& path) {
    return read_file_if_present(path.string(), kNoSizeLimit, "sweep file");
}

// The experiment's own command-line parser, as `rankscope <experiment>` builds it.
struct ExperimentParser {
    explicit ExperimentParser(const Subcommand& subcommand)
        : command(app->add_subcommand(subcommand.name, subcommand.description)), keeps_the_options(subcommand.setup(*command)) {}
    std::unique_ptr<CLI::App> app = std::make_unique<CLI::App>("rankscope", "rankscope");
    CLI::App* command;
    std::function<void()> keeps_the_options;  // owns the options the parser writes into: it must outlive the parse
};

const Subcommand& experiment_subcommand(const SweepGrid& grid) {
    const Subcommand* subcommand = find_subcommand(sweep_command_words(grid.experiment).at(0));
    if (subcommand == nullptr) throw Error("unknown experiment '" + grid.experiment + "'", grid.path);
    return *subcommand;
}

// Every cell's command line must parse before anything runs: an unknown flag or a bad value is one error naming the
// grid file and the first cell it appears in.
void check_cells_parse(const SweepGrid& grid, const std::vector<SweepCell>& cells) {
    const Subcommand& subcommand = experiment_subcommand(grid);
    std::set<std::string> checked;  // cells differing only in values already seen need no second parse
    for (const auto& cell : cells) {
        std::string signature;
        for (const auto& word : cell.arguments) signature += word + '\0';
        if (!checked.insert(signature).second) continue;
        ExperimentParser parser(subcommand);
        std::vector<std::string> words = {"rankscope"};
        words.insert(words.end(), cell.arguments.begin(), cell.arguments.end());
        words.insert(words.end(), {"--out", "sweep-check"});
        std::vector<const char*> argv;
        for (const auto& word : words) argv.push_back(word.c_str());
        try {
            parser.app->parse(static_cast<int>(argv.size()), argv.data());
            check_lists_name_values_once(*parser.app);
        } catch (const CLI::ParseError& error) {
            std::string message = cli_error_line(error.what());
            const std::string help = "(--help lists the options)";  // the sweep's own --help does not
            if (const auto at = message.find(help); at != std::string::npos)
                message.replace(at, help.size(), fmt::format("(rankscope {} --help lists them)", grid.experiment));
            throw Error(fmt::format("cell {} ({}): {}", cell.index, fmt::join(cell.arguments, " "), message), grid.path);
        }
    }
}

// A setting named as one of the experiment's positional arguments (measure's `file`) is passed as that argument
// (sweep_cell_arguments); the command has no --file, and the key still hashes the setting.
void pass_positional_settings(const SweepGrid& grid, std::vector<SweepCell>& cells) {
    const ExperimentParser parser(experiment_subcommand(grid));
    std::set<std::string> positionals;
    for (const CLI::Option* option : parser.command->get_options())
        if (!option->nonpositional()) positionals.insert(option->get_name());
    if (positionals.empty()) return;
    for (auto& cell : cells) cell.arguments = sweep_cell_arguments(grid.experiment, cell.settings, positionals);
}

// The settings whose value names a file (measure's file, --input, --text, --inputs) with its size and SHA-256 when
// the cell ran: a cell whose input changed since runs again. (A --model folder's files are in the cell's own
// manifest.json, files_read, which cell_reuse_problem checks too.)
nlohmann::json input_fingerprints(const SweepCell& cell) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& setting : cell.settings) {
        std::error_code error;
        if (setting.boolean || !std::filesystem::is_regular_file(setting.value, error)) continue;
        inputs.push_back({{"setting", setting.name}, {"path", setting.value},
                          {"bytes", std::filesystem::file_size(setting.value, error)}, {"sha256", sha256_file(setting.value)}});
    }
    return inputs;
}

// A string field of a record ("" when it is missing or not a string: a cell.json edited by hand must not stop the sweep).
std::string text_field(const nlohmann::json& record, const char* name) {
    const auto found = record.find(name);
    return found != record.end() && found->is_string() ? found->get<std::string>() : std::string();
}

// "" when the cell's earlier run can be reused: its cell.json says "ok" for this key, was written by this rankscope
// build (the same version and git SHA: another build may compute, or lay out its tables, differently, and sweep.csv
// records one version; any build with `any_build`, whose older cells may record no inputs), every input file it read
// still has its recorded size and SHA-256 (`hashes` remembers the files hashed so far in this sweep), and its main
// table is there. Otherwise why not (kNotRunYet when it has no cell.json). `written_by`: the build cell.json names.
std::string cell_reuse_problem(const SweepGrid& grid, const SweepCell& cell, const std::filesystem::path& folder,
                               std::map<std::string, std::string>& hashes, bool any_build, std::string& written_by) {
    const std::string text = read_text(folder / "cell.json");
    if (text.empty()) return kNotRunYet;
    nlohmann::json record = nlohmann::json::parse(text, nullptr, false);
    if (record.is_discarded() || !record.is_object() || text_field(record, "key") != cell.key)
        return "its cell.json is not this cell's record";
    if (text_field(record, "status") != "ok") return "it failed before";
    const std::string version = written_by = text_field(record, "version");
    if (version != version_string() && !any_build)
        return "it was written by another build: " + (version.empty() ? std::string("no version recorded") : version);
    // Where it ran first: from another directory the same relative paths may name other files.
    const nlohmann::json manifest = nlohmann::json::parse(read_text(folder / "manifest.json"), nullptr, false);
    if (const std::string moved = moved_working_directory(manifest); !moved.empty()) return moved;
    const auto inputs = record.find("inputs");
    const bool recorded = inputs != record.end() && inputs->is_array();
    if (!recorded && !any_build) return "its cell.json records no inputs";
    if (recorded)
        if (const std::string changed = changed_input_file(*inputs, "the inputs record in cell.json", hashes); !changed.empty())
            return "its " + changed;
    // Every file the cell's own process read (its manifest's files_read: a --model folder's weights and config too,
    // which the settings above do not fingerprint). This build always writes it: without it, the cell runs again.
    const bool listed = manifest.is_object() && manifest.contains("files_read");
    if (!listed && !any_build) return "its manifest.json lists no inputs read (files_read)";
    if (listed)
        if (const std::string changed = changed_input_file(manifest["files_read"], "files_read in manifest.json", hashes);
            !changed.empty())
            return "its " + changed;
    // Every file the cell wrote is as it was when the cell ended (a table cut short was merged as it stood).
    const auto outputs = record.find("outputs");
    if (outputs == record.end() || !outputs->is_array()) {
        if (!any_build) return "its cell.json records no outputs";
    } else if (const std::string changed = changed_output_file(folder, *outputs); !changed.empty()) {
        return "its " + changed;
    }
    for (const auto& table : sweep_primary_tables(grid.experiment))
        if (std::filesystem::exists(folder / table)) return "";
    return "its main table is missing";
}

// The line of a failed cell's log that says what went wrong: its last "rankscope: error:" line, else its last line.
std::string failure_line(const std::string& log, const std::string& exit_description) {
    std::string last, error;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
        last = line;
        if (line.find("rankscope: error:") != std::string::npos) error = line;
    }
    std::string reason = !error.empty() ? error : last;
    if (reason.size() > 400) reason = reason.substr(0, 400) + "...";
    return exit_description + (reason.empty() ? "" : ": " + reason);
}

nlohmann::json settings_json(const SweepCell& cell) {
    nlohmann::json settings = nlohmann::json::object();
    for (const auto& setting : cell.settings) settings[setting.name] = setting.value;
    return settings;
}

class CellRun {
public:
    CellRun(const SweepGrid& grid, const std::vector<SweepCell>& cells, std::filesystem::path out, int cell_threads)
        : grid_(grid), cells_(cells), out_(std::move(out)), cell_threads_(cell_threads) {}

    CellOutcome operator()(int index) const {
        const SweepCell& cell = cells_.at(static_cast<std::size_t>(index));
        const std::filesystem::path folder = out_ / "cells" / cell.key;
        std::filesystem::create_directories(folder);
        std::filesystem::remove(folder / "cell.json");
        std::vector<std::string> argv = {"/proc/self/exe"};
        argv[0] = std::filesystem::read_symlink("/proc/self/exe").string();
        argv.insert(argv.end(), cell.arguments.begin(), cell.arguments.end());
        argv.insert(argv.end(), {"--out", folder.string(), "--threads", std::to_string(cell_threads_)});
        ProcessOptions options;
        options.stdout_file = folder / "cell.log";
        options.stderr_file = folder / "cell.log";
        const nlohmann::json inputs = input_fingerprints(cell);  // before the run: what it reads
        const auto start = std::chrono::steady_clock::now();
        const ProcessResult result = run_process(argv, options);
        CellOutcome outcome;
        outcome.index = index;
        outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        outcome.ok = result.ok();
        if (!outcome.ok) outcome.error = failure_line(read_text(folder / "cell.log"), result.describe());
        std::vector<std::string> command = {"rankscope"};
        command.insert(command.end(), argv.begin() + 1, argv.end());
        nlohmann::json record = {{"key", cell.key},
                                 {"index", cell.index},
                                 {"experiment", grid_.experiment},
                                 {"settings", settings_json(cell)},
                                 {"argv", command},
                                 {"status", outcome.ok ? "ok" : "failed"},
                                 {"seconds", outcome.seconds},
                                 {"version", version_string()},
                                 {"inputs", inputs}};
        if (!outcome.ok) record["error"] = outcome.error;
        else record["outputs"] = output_file_records(folder, {"cell.json", "cell.log"});  // what the cell wrote
        write_file_atomically((folder / "cell.json").string(), json_text(record, 2) + "\n");
        return outcome;
    }

private:
    const SweepGrid& grid_;
    const std::vector<SweepCell>& cells_;
    std::filesystem::path out_;
    int cell_threads_;
};

// The names of the CSV files the done cells wrote (their own top-level tables), sorted.
std::vector<std::string> cell_table_names(const std::vector<SweepCell>& cells, const std::vector<bool>& done,
                                          const std::filesystem::path& out) {
    std::set<std::string> names;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        if (!done[i]) continue;
        for (const auto& entry : std::filesystem::directory_iterator(out / "cells" / cells[i].key))
            if (entry.is_regular_file() && entry.path().extension() == ".csv") names.insert(entry.path().filename().string());
    }
    return {names.begin(), names.end()};
}

// Returns the files written, as the manifest lists them (the "wrote" line names the same).
// `versions`: the build that wrote each done cell (cells.csv's version column).
std::vector<std::string> write_sweep_tables(const SweepGrid& grid, const std::vector<SweepCell>& cells, const std::vector<bool>& done,
                        const std::vector<std::string>& versions, const std::vector<CellOutcome>& outcomes, const std::filesystem::path& out,
                        const Provenance& provenance, const MpiSession& mpi, int workers, double seconds) {
    const std::string comment = csv_provenance_lines(provenance);
    std::vector<const SweepCell*> done_cells;
    for (std::size_t i = 0; i < cells.size(); ++i)
        if (done[i]) done_cells.push_back(&cells[i]);
    auto tables_of = [&](const std::string& name) {
        std::vector<std::string> tables;
        for (const SweepCell* cell : done_cells) tables.push_back(read_text(out / "cells" / cell->key / name));
        return tables;
    };
    std::filesystem::create_directories(out / "tables");
    const std::vector<std::string> names = cell_table_names(cells, done, out);
    // An earlier run's tables that this run does not write go (with no cell done — every one re-run and failed —
    // that is all of them): they would show the old cells' numbers beside this run's cells.csv and manifest.
    for (const auto& entry : std::filesystem::directory_iterator(out / "tables"))
        if (entry.is_regular_file() && std::find(names.begin(), names.end(), entry.path().filename().string()) == names.end())
            std::filesystem::remove(entry.path());
    std::vector<std::string> written;
    for (const auto& name : names) {
        write_file_atomically((out / "tables" / name).string(), comment + merge_cell_tables(done_cells, tables_of(name), name));
        written.push_back("tables/" + name);
    }
    std::string primary_name;
    for (const auto& name : sweep_primary_tables(grid.experiment))
        if (std::find(names.begin(), names.end(), name) != names.end()) {
            primary_name = name;
            break;
        }
    if (!primary_name.empty()) {
        write_file_atomically((out / "sweep.csv").string(), read_text(out / "tables" / primary_name));
        written.push_back("sweep.csv");
    } else {
        std::filesystem::remove(out / "sweep.csv");
    }

    // cells.csv: one row per cell, done or not.
    std::map<int, const CellOutcome*> outcome_of;
    for (const auto& outcome : outcomes) outcome_of[outcome.index] = &outcome;
    CsvTable cell_table;
    cell_table.columns = {"cell_index", "cell_key"};
    for (const auto& axis : grid.axes) cell_table.columns.push_back(sweep_setting_column(axis.name));
    cell_table.columns.insert(cell_table.columns.end(), {"status", "seconds", "rank", "folder", "error", "version"});
    int failed = 0, ran = 0;
    std::map<std::string, int> version_counts;  // of the cells in the tables: one, unless --reuse-other-builds
    for (std::size_t i = 0; i < cells.size(); ++i) {
        std::vector<std::string> row = {std::to_string(cells[i].index), cells[i].key};
        for (const auto& setting : cells[i].axes) row.push_back(setting.value);
        const auto found = outcome_of.find(cells[i].index);
        std::string status = done[i] ? "reused" : "not run";
        std::string seconds_text, rank, error;
        if (found != outcome_of.end()) {
            status = found->second->ok ? "ran" : "failed";
            seconds_text = format_number(found->second->seconds);
            rank = std::to_string(found->second->rank);
            error = found->second->error;
            ++(found->second->ok ? ran : failed);
        }
        const std::string version = done[i] ? versions[i] : std::string();
        if (done[i]) ++version_counts[version];
        row.insert(row.end(), {status, seconds_text, rank, "cells/" + cells[i].key, error, version});
        cell_table.add(row);
    }
    write_csv_atomically(out / "cells.csv", cell_table, provenance);
    written.push_back("cells.csv");

    const auto figures = write_collapse_depth(grid, done_cells, out, provenance);
    written.insert(written.end(), figures.begin(), figures.end());

    nlohmann::json axes = nlohmann::json::object();
    for (const auto& axis : grid.axes) {
        nlohmann::json values = nlohmann::json::array();
        for (const auto& value : axis.values) values.push_back(value.value);
        axes[axis.name] = values;
    }
    nlohmann::json fixed = nlohmann::json::object();
    for (const auto& setting : grid.fixed) fixed[setting.name] = setting.value;
    const long done_count = std::count(done.begin(), done.end(), true);
    nlohmann::json document = {
        {"grid_file", grid.path},
        {"experiment", grid.experiment},
        {"fixed", fixed},
        {"axes", axes},
        {"cells", cells.size()},
        {"cells_done", done_count},
        {"cells_ran_now", ran},
        {"cells_reused", done_count - ran},
        {"cells_failed", failed},
        {"workers_per_rank", workers},
        {"mpi_ranks", mpi.size()},
        {"mpi_library", mpi_library_version()},
        {"wall_seconds", seconds},
        {"primary_table", primary_name},
        {"cell_versions", version_counts},
    };
    write_json_atomically(out / "sweep.json", document, provenance);
    written.push_back("sweep.json");
    write_manifest(out, provenance, {{"outputs", written}});
    written.push_back("manifest.json");
    return written;
}

void run_sweep(const SweepOptions& options) {
    MpiSession mpi(main_argc(), main_argv());
    // Every rank reads and expands the grid (the same file on a shared file system) and so knows every cell; only
    // rank 0 decides what runs, writes tables and prints.
    const SweepGrid grid = read_sweep_grid(options.grid);
    std::vector<SweepCell> cells = expand_sweep_grid(grid);
    pass_positional_settings(grid, cells);
    const std::filesystem::path out = options.out;
    std::vector<bool> done(cells.size(), false);
    std::vector<std::string> reasons(cells.size());  // why a cell runs (again): cell_reuse_problem
    std::vector<std::string> versions(cells.size());  // the build that wrote each cell's folder
    std::vector<int> pending;
    std::string problem;
    if (mpi.rank() == 0) {
        try {
            check_cells_parse(grid, cells);
            if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
                throw Error("exists and is not a directory", "--out " + options.out);
            std::map<std::string, std::string> hashes;
            for (std::size_t i = 0; i < cells.size(); ++i) {
                reasons[i] = cell_reuse_problem(grid, cells[i], out / "cells" / cells[i].key, hashes, options.reuse_other_builds,
                                                versions[i]);
                done[i] = reasons[i].empty();
                if (!done[i]) pending.push_back(static_cast<int>(i));
            }
            if (!options.dry_run) std::filesystem::create_directories(out / "cells");
        } catch (const std::exception& error) {
            if (mpi.size() == 1) throw;
            const auto* named = dynamic_cast<const Error*>(&error);
            problem = named ? named->one_line() : error.what();
        }
    }
    // Every rank stops with rank 0's error (e.g. a bad flag in the grid), before any cell runs.
    problem = mpi.broadcast(problem);
    if (!problem.empty()) {
        if (mpi.rank() == 0) throw Error(problem);
        return;
    }
    if (options.dry_run) {
        if (mpi.rank() != 0) return;
        fmt::print("{} cells of `rankscope {}`, {} done, {} to run:\n", cells.size(), grid.experiment,
                   cells.size() - pending.size(), pending.size());
        for (int index : pending)
            fmt::print("  {} {}{}\n", cells[index].key, fmt::join(cells[index].arguments, " "),
                       reasons[index] == kNotRunYet ? "" : " (again: " + reasons[index] + ")");
        return;
    }
    if (mpi.rank() == 0) {
        // Cells that ran before but run again, one line per reason (a grid an older build wrote: one line, not one
        // per cell).
        std::map<std::string, int> again;
        for (int index : pending)
            if (reasons[index] != kNotRunYet) ++again[reasons[index]];
        for (const auto& [reason, count] : again)
            fmt::print(stderr, "rankscope: sweep: running {} cell{} again: {}\n", count, count == 1 ? "" : "s", reason);
        std::map<std::string, int> other_builds;
        for (std::size_t i = 0; i < cells.size(); ++i)
            if (done[i] && versions[i] != version_string()) ++other_builds[versions[i]];
        for (const auto& [version, count] : other_builds)
            fmt::print(stderr, "rankscope: sweep: reusing {} cell{} another build wrote ({}): --reuse-other-builds\n", count,
                       count == 1 ? "" : "s", version.empty() ? "no version recorded" : version);
    }

    CommonOptions common;
    common.out = options.out;
    common.threads = options.cell_threads;
    const Provenance provenance = start_run(common);
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<Progress> progress;
    int running = 0, failed = 0;
    if (mpi.rank() == 0) progress = std::make_unique<Progress>("sweep", static_cast<long>(pending.size()));
    auto event = [&](int /*index*/, const CellOutcome* finished) {
        if (finished == nullptr) ++running;
        else {
            --running;
            if (!finished->ok) ++failed;
        }
        progress->set_label(fmt::format("sweep {} running {} failed", running, failed));
        if (finished != nullptr) progress->advance();
    };
    const CellRun run(grid, cells, out, options.cell_threads);
    const std::vector<CellOutcome> outcomes = mpi.run_cells(pending, options.workers, run, event);
    if (mpi.rank() != 0) return;
    progress.reset();
    for (const auto& outcome : outcomes) {
        if (outcome.ok) {
            done[static_cast<std::size_t>(outcome.index)] = true;
            versions[static_cast<std::size_t>(outcome.index)] = version_string();  // CellRun's cell.json says so
        }
        else fmt::print(stderr, "rankscope: sweep: cell {} ({}) failed: {}\n", cells[outcome.index].key,
                        fmt::join(cells[outcome.index].arguments, " "), outcome.error);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<std::string> written = write_sweep_tables(grid, cells, done, versions, outcomes, out, provenance, mpi,
                                                           options.workers, seconds);
    // tables/<name> for every table: "tables/" once.
    written.erase(std::remove_if(written.begin(), written.end(), [](const std::string& name) { return name.rfind("tables/", 0) == 0; }),
                  written.end());
    written.insert(written.begin() + std::min<std::ptrdiff_t>(1, static_cast<std::ptrdiff_t>(written.size())), "tables/");
    const long done_count = std::count(done.begin(), done.end(), true);
    fmt::print("sweep: {} cells of `rankscope {}`: {} ran now, {} reused, {} failed; {:.1f} s on {} rank{} x {} worker{}\n"
               "wrote {}/{}\n",
               cells.size(), grid.experiment, outcomes.size() - failed, done_count - (outcomes.size() - failed), failed,
               seconds, mpi.size(), mpi.size() == 1 ? "" : "s", options.workers, options.workers == 1 ? "" : "s",
               out.string(), fmt::join(written, ", "));
    if (failed > 0)
        throw Error(fmt::format("{} of {} cells failed (their errors are in cells.csv; a re-run retries only them)", failed,
                                cells.size()),
                    out.string());
}

}  // namespace

std::function<void()> setup_sweep(CLI::App& command) {
    auto options = std::make_shared<SweepOptions>();
    command.add_option("grid", options->grid, "The grid: a .json or .toml file (experiment, fixed settings, axes)")
        ->required()
        ->check(ReadableFile(false));
    command.add_option("--out", options->out, "Output folder: cells/<key>/, sweep.csv, tables/, cells.csv, sweep.json")
        ->check(NonEmptyFolder("the folder for the results"))
        ->required();
    command.add_option("--workers", options->workers, "Cells run at once on this machine (per MPI rank under mpirun)")
        ->capture_default_str()
        ->transform(IntRange(1, 64));
    command.add_option("--cell-threads", options->cell_threads,
                       "Threads of each cell (its --threads); results do not depend on --workers or the MPI ranks")
        ->capture_default_str()
        ->transform(IntRange(1, kMaxThreads));
    command.add_flag("--dry-run", options->dry_run, "List the cells still to run and stop");
    command.add_flag("--reuse-other-builds", options->reuse_other_builds,
                     "Reuse cells another rankscope build wrote (e.g. before a docs-only commit) instead of running them "
                     "again; stderr, cells.csv and sweep.json say which builds the tables mix");
    return [options] { run_sweep(*options); };
}

}  // namespace rankscope::cli
