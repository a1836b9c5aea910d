#pragma once
// ATen's float and double unary functions (tanh, exp, log, sqrt, sin, cos, erf, ...) call Intel oneMKL's vector math
// (VML) when libtorch is built with MKL, as PyTorch's wheels are: each intra-op thread calls it on its chunk of the
// tensor (split evenly between the threads, at least 2048 elements each). oneMKL picks each function's kernel on that
// function's first call; when the first calls come from two threads at once, one thread can run a low-accuracy kernel
// for its whole chunk although high accuracy is asked for (PyTorch issue 188792, reported for oneMKL 2024.2 and gone
// from 2025.0; PyTorch 2.13's CPU wheel bundles oneMKL 2024.2, build 20240605).
//
// Seen here: gpt2's gelu_new (a tanh) on a [30, 96] tensor at 2 threads; in 3 of 150 processes rows 15-29 of the
// layer's output were 4.2e-5 off against float64 (float32 rounding: 6e-7) and 2.1e-5 (relative) against transformers:
// the CI failure of stop 37 (tests/transformers). A standalone libtorch program: 26 of 900 processes wrong, 0 of 400
// after the warm-up; rankscope on that checkpoint: 0 of 300 after (docs/reliability.md, part 3).
//
// warm_up_vector_math() calls each of them once on one element of float32 and float64, on the calling thread, so the
// kernels are chosen before any parallel call. Every program of rankscope calls it first thing (the command line,
// the benchmark, the Python module on import, the unit tests); a program that embeds the library should too. Cheap,
// thread-safe, done once per process. Without MKL (Debian's libtorch uses OpenBLAS and SLEEF) it changes no result.
#include <vector>

namespace at {
class Tensor;
}

namespace rankscope {

void warm_up_vector_math();

// What the warm-up calls: every function ATen sends to oneMKL (IMPLEMENT_VML_MKL in aten/src/ATen/cpu/vml.h) and a
// few that it computes itself. The unit test checks each one's accuracy on both threads against its own reference.
struct VectorMathFunction {
    const char* name;
    at::Tensor (*function)(const at::Tensor&);
};
const std::vector<VectorMathFunction>& vector_math_functions();

}  // namespace rankscope
