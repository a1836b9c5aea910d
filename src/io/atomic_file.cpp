#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {

void write_file_atomically(const std::string& path, const std::string& contents) {
    const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) throw Error("cannot open for writing", temporary);
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
