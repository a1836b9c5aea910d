// The process facts manifest.json records: the malloc in use and the peak resident memory.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "rankscope/allocator.hpp"

namespace {

// The kernel's own peak resident set, VmHWM of /proc/self/status, in bytes.
std::int64_t kernel_peak_resident_bytes() {
    std::ifstream status("/proc/self/status");
    std::string key;
    std::int64_t kilobytes = -1;
    std::string rest;
    while (status >> key) {
        if (key == "VmHWM:") {
            status >> kilobytes;
            return kilobytes * 1024;
        }
        std::getline(status, rest);
    }
    return -1;
}

}  // namespace

TEST(Allocator, PeakResidentBytesIsTheKernelsHighWaterMark) {
    // Touch 256 MB so that the peak is this test's and far above a page's worth of difference between the two reads.
    std::vector<char> block(256 << 20);
    std::memset(block.data(), 1, block.size());
    const std::int64_t ours = rankscope::peak_resident_bytes(), kernel = kernel_peak_resident_bytes();
    ASSERT_GT(kernel, std::int64_t{256} << 20);
    EXPECT_NEAR(static_cast<double>(ours), static_cast<double>(kernel), 1 << 20);
    EXPECT_EQ(block[block.size() - 1], 1);
}

TEST(Allocator, TheTestProgramRunsOnGlibcMallocOrAddressSanitizers) {
    // The unit tests do not link tcmalloc (only the command line and the benchmarks do: CMakeLists.txt); the command
    // line's side is checked end to end by tests/smoke/test_cli_model.py through manifest.json. Under make
    // test-sanitize, ASan's run time serves malloc and the manifest must say so.
#ifdef RANKSCOPE_SANITIZE  // the build option (CMakeLists.txt); the library decides from the compiler's own macro
    const std::string expected = "AddressSanitizer's allocator";
#else
    const std::string expected = "glibc malloc 2.";
#endif
    EXPECT_EQ(rankscope::allocator_in_use().rfind(expected, 0), 0u) << rankscope::allocator_in_use();
}
