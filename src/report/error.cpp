#include "rankscope/error.hpp"

#include <fmt/format.h>

#include <limits>

namespace rankscope {
namespace {

// 65536, not 65536.0; non-integers as fmt spells them.
std::string number_text(double value) {
    if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<long long>(value));
    return fmt::format("{}", value);
}

}  // namespace

void check_size_limit(const std::string& what, double value, double limit, const std::string& where) {
    if (value > limit)
        throw Error(fmt::format("{} = {} is too large (at most {})", what, number_text(value), number_text(limit)), where);
}

void check_consecutive_seeds(std::uint64_t first, long long count, const std::string& where) {
    constexpr std::uint64_t largest = std::numeric_limits<std::uint64_t>::max();
    if (count < 1 || static_cast<unsigned long long>(count - 1) <= largest - first) return;
    // The last seed as a decimal number past 2^64 − 1: the largest seed plus the overshoot.
    const unsigned long long overshoot = static_cast<unsigned long long>(count - 1) - (largest - first);
    const unsigned __int128 last = static_cast<unsigned __int128>(largest) + overshoot;
    const std::uint64_t room = largest - first + 1;  // ≥ 1: first ≤ largest
    throw Error(fmt::format("seeds {} to {} pass the largest seed, {} (at most {} seed{} from {})", first, last, largest,
                            room, room == 1 ? "" : "s", first),
                where);
}

}  // namespace rankscope
