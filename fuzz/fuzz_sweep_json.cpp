// libFuzzer entry for the sweep_json reader (see fuzz_targets.hpp, scripts/fuzz.sh).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rankscope::fuzz::run("sweep_json", data, size);
    return 0;
}
