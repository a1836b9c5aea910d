#include "rankscope/error.hpp"

#include <fmt/format.h>

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

}  // namespace rankscope
