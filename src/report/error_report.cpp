#include "rankscope/error_report.hpp"

#include <c10/util/Exception.h>

#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <ios>
#include <new>
#include <nlohmann/json.hpp>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/process.hpp"

namespace rankscope {
namespace {

std::string one_line(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    return text;
}

ErrorReport report(ErrorReport::Kind kind, const std::string& message, std::string where = {}, int signal = 0) {
    return {kind, one_line(message), std::move(where), signal};
}

// "you tried to allocate 8589934592 bytes" -> "libtorch asked for 8.6 GB" (the request in the allocator's message).
std::string allocation_request(const std::string& what) {
    const std::string marker = "tried to allocate ";
    const auto at = what.find(marker);
    if (at != std::string::npos) {
        const double bytes = std::strtod(what.c_str() + at + marker.size(), nullptr);
        if (bytes > 0) return fmt::format("libtorch asked for {:.3g} GB", bytes / 1e9);
    }
    return "a libtorch allocation";
}

}  // namespace

ErrorReport describe_current_exception() {
    try {
        throw;
    } catch (const rankscope::Interrupted& interrupted) {
        return report(ErrorReport::Interrupted, interrupted.one_line(), interrupted.where(), interrupted.signal_number());
    } catch (const rankscope::Error& error) {
        return report(ErrorReport::BadInput, error.one_line(), error.where());
    } catch (const std::bad_alloc&) {
        return report(ErrorReport::OutOfMemory, "out of memory: the request is too large for this machine; use smaller sizes");
    } catch (const std::filesystem::filesystem_error& error) {
        // libstdc++: "filesystem error: cannot create directories: Not a directory [out]" -> "cannot create directories:
        // Not a directory (out)"
        std::string what = error.what();
        if (what.rfind("filesystem error: ", 0) == 0) what = what.substr(18);
        if (const auto bracket = what.find(" ["); bracket != std::string::npos) what = what.substr(0, bracket);
        return report(ErrorReport::BadInput, what + (error.path1().empty() ? "" : " (" + error.path1().string() + ")"),
                      error.path1().string());
    } catch (const nlohmann::json::exception& error) {
        return report(ErrorReport::BadInput, "unexpected JSON content: " + json_error_reason(error));
    } catch (const std::ios_base::failure& error) {
        // e.g. libstdc++'s "basic_filebuf::underflow error reading the file: Is a directory"
        const std::string what = error.what();
        return report(ErrorReport::BadInput,
                      "cannot read an input file: " +
                          what.substr(what.rfind(": ") == std::string::npos ? 0 : what.rfind(": ") + 2));
    } catch (const c10::OutOfMemoryError& error) {  // CUDA's caching allocator
        const std::string what = error.what_without_backtrace();
        return report(ErrorReport::OutOfMemory, "out of memory on the device: " + what.substr(0, what.find('\n')) +
                                                    "; use smaller sizes or the CPU");
    } catch (const c10::Error& error) {
        // libtorch's message carries a multi-line C++ backtrace: keep its first line.
        const std::string what = error.what_without_backtrace();
        // The CPU allocator's failure is a plain c10::Error ("[enforce fail at alloc_cpu.cpp:127] err == 0.
        // DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. Error code 12" in torch 2.13;
        // "not enough memory" in other versions): out of memory, exit status 2, not an internal error.
        if (what.find("DefaultCPUAllocator") != std::string::npos &&
            (what.find("not enough memory") != std::string::npos || what.find("can't allocate memory") != std::string::npos))
            return report(ErrorReport::OutOfMemory, "out of memory: " + allocation_request(what) +
                                                        " is more than this machine can give; use smaller sizes");
        return report(ErrorReport::Internal, "internal error (libtorch): " + what.substr(0, what.find('\n')));
    } catch (const std::exception& error) {
        return report(ErrorReport::Internal, std::string("internal error: ") + error.what());
    } catch (...) {
        return report(ErrorReport::Internal, "internal error: an unknown exception");
    }
}

}  // namespace rankscope
