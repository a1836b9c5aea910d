// format_number (provenance.hpp): how every real number is written into CSV cells and sweep settings. Torch-free and
// on its own, so that the parsers' fuzz build (the sweep grid reader) links it without the rest of src/report.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "rankscope/provenance.hpp"

namespace rankscope {

std::string format_number(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    return fmt::format("{}", value);  // shortest representation that round-trips
}

}  // namespace rankscope
