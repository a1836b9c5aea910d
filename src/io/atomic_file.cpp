#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {

namespace {

struct ResultsDirectory {
    std::mutex mutex;
    std::filesystem::path folder;  // weakly canonical; empty: none
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
    std::filesystem::remove(state.folder / "manifest.json", ec);
}

}  // namespace

void set_results_directory(const std::string& directory) {
    ResultsDirectory& state = results_directory();
    std::lock_guard<std::mutex> lock(state.mutex);
    state.folder = directory.empty() ? std::filesystem::path() : comparable(directory);
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
