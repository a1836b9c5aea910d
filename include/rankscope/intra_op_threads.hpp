#pragma once
// ATen's intra-op threads (at::set_num_threads): rankscope's process-wide setting, and a count set for a scope:
//
//   use_threads(options.threads);            // --threads, rankscope.set_threads
//   { const IntraOpThreads single(1); ... }   // small models: per-op threading costs more than it gains
#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

#include "rankscope/blas_threads.hpp"

namespace rankscope {

// ATen's threads do the parallel work, `requested` of them (0 = one per core), and OpenBLAS's own pool is held at one
// thread: two pools on the same cores only wait on each other (blas_threads.hpp; the BERT-base E1 grid at 2 threads
// took 17.7 s with OpenBLAS at 2 threads, 15.9 s at 1). Process-wide: torch's own BLAS calls in the process are held
// too. Returns the count in use.
inline int use_threads(int requested) {
    const int threads = requested > 0 ? requested : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(threads);
    set_openblas_threads(1);
    return threads;
}

class IntraOpThreads {
public:
    explicit IntraOpThreads(int threads) : previous_(at::get_num_threads()) { at::set_num_threads(threads); }
    ~IntraOpThreads() { at::set_num_threads(previous_); }
    IntraOpThreads(const IntraOpThreads&) = delete;
    IntraOpThreads& operator=(const IntraOpThreads&) = delete;

private:
    int previous_;
};

}  // namespace rankscope
