// libFuzzer entry for the manifest parser (see fuzz_targets.hpp, scripts/fuzz.sh).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rankscope::fuzz::run("manifest", data, size);
    return 0;
}
