#include "rankscope/allocator.hpp"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <sys/resource.h>

#include <climits>

namespace rankscope {
namespace {

// gperftools' tc_version(major, minor, patch) -> "gperftools 2.10", looked up at run time: the library is linked into
// the command line only, and this file is shared with the Python module.
using TcVersion = const char* (*)(int*, int*, const char**);

bool tcmalloc_serves_malloc() {
    void* tc_malloc = ::dlsym(RTLD_DEFAULT, "tc_malloc");
    return tc_malloc && tc_malloc == ::dlsym(RTLD_DEFAULT, "malloc");
}

}  // namespace

std::string allocator_in_use() {
#if defined(__SANITIZE_ADDRESS__)  // g++ -fsanitize=address (make test-sanitize): its run time replaces malloc
    return "AddressSanitizer's allocator";
#endif
    if (tcmalloc_serves_malloc()) {
        const auto version = reinterpret_cast<TcVersion>(::dlsym(RTLD_DEFAULT, "tc_version"));
        int major = 0, minor = 0;
        const char* patch = nullptr;
        return std::string("tcmalloc (") + (version ? version(&major, &minor, &patch) : "gperftools") + ")";
    }
    return std::string("glibc malloc ") + gnu_get_libc_version();
}

void configure_allocator() {
    if (tcmalloc_serves_malloc()) return;
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

std::int64_t peak_resident_bytes() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
}

}  // namespace rankscope
