#pragma once
// The process's malloc. The command line links tcmalloc (gperftools; CMake option RANKSCOPE_TCMALLOC): on the BERT-base
// E1 grid it peaks at half the RSS (925 against 1859 MB) of glibc's malloc kept from returning memory, at the same
// speed (docs/performance.md, "tenth session: peak memory"). Without it (the Python module, RANKSCOPE_TCMALLOC=OFF)
// glibc's malloc serves, and configure_allocator() keeps its freed memory in the process; in sanitizer builds
// AddressSanitizer's run time serves malloc.
#include <cstdint>
#include <string>

namespace rankscope {

// "tcmalloc (gperftools 2.10)" when tcmalloc serves this process's malloc (it is loaded and `malloc` resolves to it),
// "AddressSanitizer's allocator" in a -fsanitize=address build, else "glibc malloc 2.36".
std::string allocator_in_use();

// glibc's malloc: keep freed memory (no mmap'd blocks, no trimming), since freshly touched pages cost ~8 µs each on
// these VMs (LIBTORCH.md). tcmalloc keeps freed memory by design: nothing to do.
void configure_allocator();

// The process's peak resident set so far (getrusage's ru_maxrss), in bytes.
std::int64_t peak_resident_bytes();

}  // namespace rankscope
