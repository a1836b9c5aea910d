// libFuzzer entry for the pretraining corpus readers (see fuzz_targets.hpp, scripts/fuzz.sh).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rankscope::fuzz::run("pretrain_corpus", data, size);
    return 0;
}
