#pragma once
// rankscope::Error — the one exception type every user-facing failure becomes.
//
// A bad input (missing file, truncated weights, wrong dtype, NaN entries...) throws Error with the offending file (or
// tensor) named separately from the message, so the command-line program can print exactly one line:
//     rankscope: error: <what> (<where>)
// and exit with status 2.
#include <stdexcept>
#include <string>

namespace rankscope {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what, std::string where = {})
        : std::runtime_error(what), where_(std::move(where)) {}
    // The file, or file:tensor, the problem is about ("" when none).
    const std::string& where() const noexcept { return where_; }
    // "<what> (<where>)" or just "<what>".
    std::string one_line() const {
        return where_.empty() ? std::string(what()) : std::string(what()) + " (" + where_ + ")";
    }

private:
    std::string where_;
};

}  // namespace rankscope
