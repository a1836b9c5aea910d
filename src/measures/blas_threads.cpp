#include "rankscope/blas_threads.hpp"

#include <dlfcn.h>

namespace rankscope {
namespace {

using SetThreads = void (*)(int);
using GetThreads = int (*)();

SetThreads openblas_set() { return reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }
GetThreads openblas_get() { return reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }

}  // namespace

int openblas_threads() {
    const GetThreads get = openblas_get();
    return get ? get() : 0;
}

void set_openblas_threads(int threads) {
    if (const SetThreads set = openblas_set(); set && threads > 0) set(threads);
}

SingleThreadedBlas::SingleThreadedBlas() : previous_(openblas_threads()) { set_openblas_threads(1); }

SingleThreadedBlas::~SingleThreadedBlas() { set_openblas_threads(previous_); }

}  // namespace rankscope
