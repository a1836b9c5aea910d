// libFuzzer entry for the vocab_txt parser (see fuzz_targets.hpp, scripts/fuzz.sh).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rankscope::fuzz::run("vocab_txt", data, size);
    return 0;
}
