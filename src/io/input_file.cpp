// Bounded reading of outside files (see io.hpp): only regular files, their size checked against a limit before a byte
// is read, and never more read than the size promised. /dev/zero, a FIFO, a directory or a terminal is refused up
// front instead of hanging or filling memory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

std::string byte_count(std::uint64_t bytes) {
    if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
    return std::to_string(bytes) + " bytes";
}

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

}  // namespace

namespace {

std::mutex files_read_mutex;
std::vector<FileRead>& files_read_list() {
    static std::vector<FileRead> list;
    return list;
}

void note_file_read(const std::string& path, const std::string& what, const struct stat& info) {
    std::error_code error;
    std::string absolute = std::filesystem::absolute(path, error).lexically_normal().string();
    if (error) absolute = path;
    const std::lock_guard<std::mutex> lock(files_read_mutex);
    auto& list = files_read_list();
    for (const auto& entry : list)
        if (entry.path == absolute) return;
    list.push_back({absolute, what, static_cast<std::uint64_t>(info.st_size),
                    static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec,
                    static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino),
                    static_cast<std::int64_t>(info.st_ctim.tv_sec) * 1'000'000'000 + info.st_ctim.tv_nsec});
}

}  // namespace

std::vector<FileRead> files_read() {
    const std::lock_guard<std::mutex> lock(files_read_mutex);
    return files_read_list();
}

InputFile::InputFile(const std::string& path, const std::string& what, FileUse use) : path_(path) {
    // O_NONBLOCK: opening a FIFO without a writer must not block; it is refused below anyway.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
        const int error = errno;
        throw Error("cannot open " + what + ": " + std::strerror(error), path);
    }
    struct stat info {};
    if (::fstat(fd_, &info) != 0) {
        ::close(fd_);
        throw Error("cannot stat " + what, path);
    }
    if (!S_ISREG(info.st_mode)) {
        ::close(fd_);
        throw Error(what + " must be a regular file, this is " + kind_of(info.st_mode), path);
    }
    size_ = static_cast<std::uint64_t>(info.st_size);
    if (use == FileUse::Input) note_file_read(path, what, info);
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, void* buffer, std::uint64_t count, const std::string& what) const {
    if (offset > size_ || count > size_ - offset)
        throw Error("truncated file: " + what + " needs bytes " + std::to_string(offset) + ".." +
                        std::to_string(offset + count) + ", the file has " + std::to_string(size_),
                    path_);
    auto* out = static_cast<char*>(buffer);
    while (count > 0) {
        const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(count, 1u << 30));
        const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw Error("read error in " + what + ": " + std::strerror(errno), path_);
        if (got == 0) throw Error("file shrank while reading " + what, path_);
        out += got;
        offset += static_cast<std::uint64_t>(got);
        count -= static_cast<std::uint64_t>(got);
    }
}

namespace {

void check_size(const InputFile& file, std::uint64_t limit, const std::string& what) {
    if (file.size() > limit)
        throw Error(what + " is " + std::to_string(file.size()) + " bytes, more than the limit of " + byte_count(limit),
                    file.path());
}

}  // namespace

void check_input_file(const std::string& path, std::uint64_t limit, const std::string& what) {
    const InputFile file(path, what);
    check_size(file, limit, what);
}

namespace {

std::string read_whole_file(const std::string& path, std::uint64_t limit, const std::string& what, FileUse use) {
    const InputFile file(path, what, use);
    check_size(file, limit, what);
    std::string contents(static_cast<std::size_t>(file.size()), '\0');
    file.read_at(0, contents.data(), contents.size(), what);
    return contents;
}

}  // namespace

std::string read_file_limited(const std::string& path, std::uint64_t limit, const std::string& what) {
    return read_whole_file(path, limit, what, FileUse::Input);
}

std::string read_file_if_present(const std::string& path, std::uint64_t limit, const std::string& what) {
    struct stat status {};
    if (::lstat(path.c_str(), &status) != 0 && errno == ENOENT) return {};
    return read_whole_file(path, limit, what, FileUse::OwnOutput);  // rankscope's own outputs read back: not inputs
}

std::string control_characters_as_spaces(const std::string& text) {
    std::string line = text;
    for (char& c : line)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return line;
}

std::string printable(const std::string& text, std::size_t max_length) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        // Cut only between characters: a UTF-8 continuation byte finishes the character it belongs to.
        if (out.size() >= max_length && (c & 0xC0) != 0x80) {
            out += "...";
            break;
        }
        if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
            continue;
        }
        // Controls a terminal acts on beyond ASCII: C1 (U+0080–U+009F, e.g. U+009B, CSI) and the bidirectional
        // overrides and isolates (U+202A–U+202E, U+2066–U+2069) that reorder what is shown. As \uNNNN.
        const auto next = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0; };
        unsigned code = 0;
        std::size_t length = 0;
        if (c == 0xC2 && next(1) >= 0x80 && next(1) <= 0x9F) code = next(1), length = 2;
        if (c == 0xE2 && next(1) == 0x80 && next(2) >= 0xAA && next(2) <= 0xAE) code = 0x2000 + next(2) - 0x80, length = 3;
        if (c == 0xE2 && next(1) == 0x81 && next(2) >= 0xA6 && next(2) <= 0xA9) code = 0x2040 + next(2) - 0x80, length = 3;
        if (length > 0) {
            out += "\\u";
            for (int shift = 12; shift >= 0; shift -= 4) out += hex[(code >> shift) & 15];
            i += length - 1;
            continue;
        }
        out += static_cast<char>(c);
    }
    return out;
}

}  // namespace rankscope
