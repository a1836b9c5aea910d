#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>
#include <vector>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {

namespace {

struct ResultsDirectory {
    std::mutex mutex;
    std::filesystem::path folder;  // weakly canonical; empty: none
    std::string subcommand;        // of this run: an earlier manifest of the same one takes its files with it
    bool touched = false;          // this process has written into it
};
ResultsDirectory& results_directory() {
    static ResultsDirectory state;
    return state;
}

std::filesystem::path comparable(const std::filesystem::path& path) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    return ec ? path.lexically_normal() : canonical;
}

// The regular files directly in `folder` that an earlier run's manifest lists, when that run was `subcommand`'s:
// "outputs", "figures" (each with its <stem>.gp), "dump". Names with a folder part, and folders (pretrain's
// checkpoints/), are not listed, nor a file this run has read (an earlier --dump given as this run's --inputs). A
// manifest that cannot be read lists nothing.
std::vector<std::filesystem::path> earlier_run_files(const std::filesystem::path& folder, const std::string& subcommand) {
    std::vector<std::filesystem::path> files;
    if (subcommand.empty()) return files;
    nlohmann::json manifest;
    try {
        std::ifstream in(folder / "manifest.json", std::ios::binary);
        if (!in) return files;
        manifest = nlohmann::json::parse(in);
    } catch (const std::exception&) {
        return files;
    }
    if (!manifest.is_object() || !manifest.contains("subcommand") || manifest["subcommand"] != subcommand) return files;
    const std::vector<FileRead> inputs = files_read();
    auto add = [&](const nlohmann::json& name) {
        if (!name.is_string() || name.get<std::string>().find('\0') != std::string::npos) return;  // "a.txt\0x" is a.txt
        const std::filesystem::path file(name.get<std::string>());
        if (file.empty() || file.has_parent_path() || file.filename() != file || file == "." || file == ".." ||
            file == "manifest.json")
            return;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(folder / file, ec))) return;
        for (const FileRead& input : inputs)
            if (std::filesystem::equivalent(folder / file, input.path, ec)) return;
        files.push_back(folder / file);
    };
    for (const char* key : {"outputs", "figures"})
        if (manifest.contains(key) && manifest[key].is_array())
            for (const auto& name : manifest[key]) {
                add(name);
                if (std::string(key) == "figures" && name.is_string())
                    add(std::filesystem::path(name.get<std::string>()).replace_extension(".gp").string());
            }
    // --dump: a path as given, relative to the earlier run's working directory (not this one's); only a file it names
    // in this folder goes. The folder part's links are resolved, the file's own name is not followed (a link there
    // could name any file of this folder).
    if (manifest.contains("dump") && manifest["dump"].is_string() && !manifest["dump"].get<std::string>().empty()) {
        std::filesystem::path dump(manifest["dump"].get<std::string>());
        if (dump.is_relative()) {
            const auto directory = manifest.find("working_directory");
            if (directory == manifest.end() || !directory->is_string() || directory->get<std::string>().empty())
                return files;  // an older manifest: where it was is unknown
            dump = std::filesystem::path(directory->get<std::string>()) / dump;
        }
        dump = dump.lexically_normal();
        if (!dump.filename().empty() && comparable(dump.parent_path()) == folder) add(dump.filename().string());
    }
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    return files;
}

// Before the first write into the results folder: an earlier run's manifest goes (see io.hpp).
void before_writing(const std::string& path) {
    ResultsDirectory& state = results_directory();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.folder.empty() || state.touched) return;
    const std::filesystem::path target(path);
    const std::filesystem::path parent = comparable(target.parent_path().empty() ? "." : target.parent_path());
    // In the folder or below it (sweep's tables/ and cells/<key>/cell.json are the sweep's results too).
    const auto [end, _] = std::mismatch(state.folder.begin(), state.folder.end(), parent.begin(), parent.end());
    if (end != state.folder.end()) return;
    state.touched = true;
    if (target.filename() == "manifest.json" && parent == state.folder) return;  // it replaces the old one
    std::error_code ec;
    for (const auto& file : earlier_run_files(state.folder, state.subcommand)) std::filesystem::remove(file, ec);
    std::filesystem::remove(state.folder / "manifest.json", ec);
}

}  // namespace

void set_results_directory(const std::string& directory, const std::string& subcommand) {
    ResultsDirectory& state = results_directory();
    std::lock_guard<std::mutex> lock(state.mutex);
    state.folder = directory.empty() ? std::filesystem::path() : comparable(directory);
    state.subcommand = subcommand;
    state.touched = false;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
    before_writing(path);
    const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) {
            const int reason = errno;
            throw Error(std::string("cannot open for writing: ") + std::strerror(reason), path);
        }
        out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
        out.flush();
        if (!out) {
            out.close();
            std::remove(temporary.c_str());
            throw Error("write failed (disk full?)", temporary);
        }
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec) {
        std::remove(temporary.c_str());
        throw Error("cannot rename into place: " + ec.message(), path);
    }
}

}  // namespace rankscope
