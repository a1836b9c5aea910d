// files_read_records (io.hpp): the inputs a result came from, for manifest.json. The list itself is kept by InputFile
// (src/io/input_file.cpp, which the SentencePiece helper links without JSON); here each file outside the result folder
// gets its SHA-256, once per process.
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>
#include <nlohmann/json.hpp>

#include "rankscope/error.hpp"
#include "rankscope/file_hash.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

std::string utc_time(std::int64_t nanoseconds) {
    const std::time_t seconds = static_cast<std::time_t>(nanoseconds / 1'000'000'000);
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return text;
}

// Whether `path` lies in `folder` (canonical: symlinks resolved), both absolute; `folder` is already canonical.
bool inside(const std::string& path, const std::string& folder) {
    if (folder.empty()) return false;
    std::error_code error;
    std::string resolved = std::filesystem::weakly_canonical(path, error).string();
    if (error) resolved = path;
    const std::string prefix = folder.back() == '/' ? folder : folder + "/";
    return resolved.rfind(prefix, 0) == 0;
}

}  // namespace

nlohmann::json files_read_records(const std::string& result_folder) {
    // (path, bytes, modified) -> hex: a file is hashed once however many manifests list it (reproduce writes one per
    // cell), and again only if it changed.
    static std::mutex mutex;
    static std::map<std::tuple<std::string, std::uint64_t, std::int64_t>, std::string> hashes;
    std::error_code error;
    std::string folder;
    if (!result_folder.empty()) {
        folder = std::filesystem::weakly_canonical(std::filesystem::absolute(result_folder, error), error).string();
        if (error) folder = std::filesystem::absolute(result_folder, error).lexically_normal().string();
        while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
    }
    nlohmann::json records = nlohmann::json::array();
    for (const FileRead& file : files_read()) {
        if (inside(file.path, folder)) continue;  // the run's own outputs read back (a report reading its cells)
        nlohmann::json record = {{"path", file.path}, {"what", file.what}, {"bytes", file.bytes},
                                 {"modified", utc_time(file.modified_ns)}, {"sha256", nullptr}};
        struct stat now {};
        const bool same = ::stat(file.path.c_str(), &now) == 0 && static_cast<std::uint64_t>(now.st_size) == file.bytes &&
                          static_cast<std::int64_t>(now.st_mtim.tv_sec) * 1'000'000'000 + now.st_mtim.tv_nsec ==
                              file.modified_ns &&
                          static_cast<std::uint64_t>(now.st_dev) == file.device &&
                          static_cast<std::uint64_t>(now.st_ino) == file.inode &&
                          static_cast<std::int64_t>(now.st_ctim.tv_sec) * 1'000'000'000 + now.st_ctim.tv_nsec ==
                              file.status_changed_ns;
        if (!same) {
            record["note"] = "changed or removed after it was read: not hashed";
        } else {
            const std::lock_guard<std::mutex> lock(mutex);
            const auto key = std::make_tuple(file.path, file.bytes, file.modified_ns);
            auto found = hashes.find(key);
            try {
                if (found == hashes.end()) found = hashes.emplace(key, sha256_file(file.path)).first;
                record["sha256"] = found->second;
            } catch (const Error& failure) {
                record["note"] = std::string("not hashed: ") + failure.what();
            }
        }
        records.push_back(std::move(record));
    }
    return records;
}

}  // namespace rankscope
