// libFuzzer entry for the tokenizer.json (byte-level BPE, WordPiece) loader (see fuzz_targets.hpp, scripts/fuzz.sh).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rankscope::fuzz::run("tokenizer_json", data, size);
    return 0;
}
