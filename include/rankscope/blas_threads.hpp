#pragma once
// OpenBLAS's own thread pool. rankscope runs its parallel work on ATen's threads (OpenMP); when OpenBLAS starts its
// own workers beside them, the two pools spin and yield to each other (measured: 16-30% of a run in sched_yield,
// the BERT-base E1 grid 10% slower). OpenBLAS is looked up at run time, so with another BLAS these do nothing.
namespace rankscope {

// OpenBLAS's thread count, or 0 when the BLAS in use is not OpenBLAS.
int openblas_threads();
// Sets it (no-op without OpenBLAS).
void set_openblas_threads(int threads);

// Holds OpenBLAS at one thread for its lifetime, then restores the previous count.
class SingleThreadedBlas {
public:
    SingleThreadedBlas();
    ~SingleThreadedBlas();
    SingleThreadedBlas(const SingleThreadedBlas&) = delete;
    SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
    int previous_ = 0;
};

}  // namespace rankscope
