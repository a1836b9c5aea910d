#pragma once
// rankscope::Error — the one exception type every user-facing failure becomes.
//
// A bad input (missing file, truncated weights, wrong dtype, NaN entries...) throws Error with the offending file (or
// tensor) named separately from the message, so the command-line program can print exactly one line:
//     rankscope: error: <what> (<where>)
// and exit with status 2.
#include <cmath>
#include <cstdint>
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

// A size computed from several settings (e.g. samples × tokens), checked before allocating: throws
// Error("<what> = <value> is too large (at most <limit>)", where) — `where` names the flags or file that set it.
void check_size_limit(const std::string& what, double value, double limit, const std::string& where);

// `count` consecutive seeds from `first` (first, first + 1, ...) must not pass the largest seed, 2^64 − 1 (they wrapped
// to 0, 1, ... before): throws Error("seeds 18446744073709551614 to 18446744073709551616 pass the largest seed,
// 18446744073709551615 (at most 2 seeds from 18446744073709551614)", where).
void check_consecutive_seeds(std::uint64_t first, long long count, const std::string& where);

// A NaN/Inf result (a diverged network, an overflowing norm) is an error naming what and where, unless the caller
// allows non-finite results (the command line's --allow-nonfinite, the Python module's allow_nonfinite=True):
//   "<what> is NaN (pass --allow-nonfinite to write it anyway) (<where>)"
inline void check_finite_result(double value, const std::string& what, const std::string& where, bool allow_nonfinite) {
    if (std::isfinite(value) || allow_nonfinite) return;
    throw Error(what + " is " + (std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf") +
                    " (pass --allow-nonfinite to write it anyway)",
                where);
}

}  // namespace rankscope
