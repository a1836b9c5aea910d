#pragma once
// ATen's intra-op threads (at::set_num_threads) set for a scope, and the previous count restored at its end, also when
// the scope is left by an exception:
//
//   { const IntraOpThreads single(1); ... }   // small models: per-op threading costs more than it gains
#include <ATen/Parallel.h>

namespace rankscope {

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
