#pragma once
// The parts of the _rankscope extension, one function per area (bind_*.cpp), and what they share.
#include <ATen/ATen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "arrays.hpp"
#include "rankscope/interrupt.hpp"

namespace rankscope::python {

namespace py = pybind11;

void bind_measures(py::module_& module);
void bind_networks(py::module_& module);  // SAN stacks, path decomposition, path products, theory, path counts (E6)
void bind_models(py::module_& module);    // checkpoint folders, USE lite, E1/E2
void bind_findings(py::module_& module);
void bind_beyond(py::module_& module);    // beyond the paper: trainability, failure modes

// Ctrl-C while the library runs with the GIL released: the poll takes the GIL briefly on the calling thread, runs the
// interpreter's signal handlers (PyErr_CheckSignals) and throws py::error_already_set when one raised
// (KeyboardInterrupt), which stops the library call and reaches Python as that exception.
InterruptPoll python_interrupt();

// Restores the global torch CPU generator's state on exit: calls that seed torch (networks, random init, theory) leave
// the caller's torch random stream (python torch shares it: the same libtorch) as it was.
class TorchRandomStateGuard {
public:
    TorchRandomStateGuard();
    ~TorchRandomStateGuard();
    TorchRandomStateGuard(const TorchRandomStateGuard&) = delete;
    TorchRandomStateGuard& operator=(const TorchRandomStateGuard&) = delete;

private:
    at::Tensor state_;
};

}  // namespace rankscope::python
