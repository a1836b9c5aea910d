// _rankscope: the C++ engine for Python. Errors become Python exceptions carrying the command line's one-line
// message: rankscope.Error (a ValueError, with .where) for bad input, MemoryError, KeyboardInterrupt, RuntimeError for
// internal failures.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cctype>
#include <string>

#include "bindings.hpp"
#include "rankscope/allocator.hpp"
#include "rankscope/error.hpp"
#include "rankscope/error_report.hpp"
#include "rankscope/intra_op_threads.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/provenance.hpp"
#include "rankscope/vector_math.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope::python {

InterruptPoll python_interrupt() {
    return InterruptPoll([] {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    });
}

TorchRandomStateGuard::TorchRandomStateGuard() : state_(at::detail::getDefaultCPUGenerator().get_state()) {}
TorchRandomStateGuard::~TorchRandomStateGuard() {
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
    generator.set_state(state_);
}

namespace {

// rankscope.Error, created once at import and kept for the life of the process.
PyObject* g_error_type = nullptr;

// The library names some settings by their command-line flags ("... (--tokens, --d-model)"); in Python they are
// keyword arguments. The setting an error names (.where, and the message's closing "(where)") is given in Python's
// spelling: "--d-model" becomes "d_model". The message's prose is the command line's, word for word.
std::string python_setting_names(const std::string& where) {
    std::string out;
    for (std::size_t i = 0; i < where.size();) {
        const bool word_start = i == 0 || where[i - 1] == ' ' || where[i - 1] == ',';
        if (word_start && where.compare(i, 2, "--") == 0 && i + 2 < where.size() &&
            std::islower(static_cast<unsigned char>(where[i + 2]))) {
            std::size_t end = i + 2;
            while (end < where.size() && (std::islower(static_cast<unsigned char>(where[end])) ||
                                          std::isdigit(static_cast<unsigned char>(where[end])) || where[end] == '-'))
                ++end;
            for (std::size_t k = i + 2; k < end; ++k) out += where[k] == '-' ? '_' : where[k];
            i = end;
            continue;
        }
        out += where[i++];
    }
    return out;
}

std::string with_python_setting_names(std::string message, const std::string& where) {
    // The one piece of advice that names a flag: the keyword argument that does the same.
    const std::string flag = "pass --allow-nonfinite", keyword = "pass allow_nonfinite=True";
    if (const auto at = message.find(flag); at != std::string::npos) message.replace(at, flag.size(), keyword);
    const std::string suffix = " (" + where + ")";
    if (where.empty() || message.size() < suffix.size() ||
        message.compare(message.size() - suffix.size(), suffix.size(), suffix) != 0)
        return message;
    return message.substr(0, message.size() - suffix.size()) + " (" + python_setting_names(where) + ")";
}

// The package's function that says a warning (rankscope._warnings.warn: a RankscopeWarning at the user's line),
// registered at import and kept for the life of the process; until then, warnings go to stderr.
PyObject* g_warning_handler = nullptr;

// The engine's warnings (warnings.hpp), said through Python's `warnings`: a notebook shows them, a filter or
// pytest.warns catches them, and the filter "error" raises one out of the call that said it.
void say_in_python(const std::string& message) {
    // A thread of the engine's own has no Python thread state; calling into Python from it could wait forever on an
    // interpreter that its caller holds while waiting for it. Its warnings go to stderr, as the command line's do.
    if (!PyGILState_Check() && PyGILState_GetThisThreadState() == nullptr) return print_warning(message);
    py::gil_scoped_acquire gil;
    if (!g_warning_handler) return print_warning(message);
    const py::handle handler(g_warning_handler);
    handler(message);  // error_already_set when the warnings filter makes it an error
}

void translate_exceptions() {
    // Local: tried before the global translators, so that torch's (registered when torch is imported after rankscope)
    // does not turn libtorch's out-of-memory into a bare RuntimeError for the calls of this module.
    py::register_local_exception_translator([](std::exception_ptr pointer) {
        try {
            if (pointer) std::rethrow_exception(pointer);
        } catch (const py::builtin_exception&) {
            throw;  // pybind11's own (TypeError for wrong arguments...): its default translation
        } catch (...) {
            const ErrorReport report = describe_current_exception();
            switch (report.kind) {
                case ErrorReport::BadInput: {
                    py::gil_scoped_acquire gil;
                    py::object instance = py::handle(g_error_type)(with_python_setting_names(report.message, report.where));
                    instance.attr("where") = python_setting_names(report.where);
                    PyErr_SetObject(g_error_type, instance.ptr());
                    return;
                }
                case ErrorReport::OutOfMemory: PyErr_SetString(PyExc_MemoryError, report.message.c_str()); return;
                case ErrorReport::Interrupted: PyErr_SetString(PyExc_KeyboardInterrupt, report.message.c_str()); return;
                case ErrorReport::Internal: PyErr_SetString(PyExc_RuntimeError, report.message.c_str()); return;
            }
        }
    });
}

}  // namespace
}  // namespace rankscope::python

PYBIND11_MODULE(_rankscope, module) {
    namespace py = pybind11;
    using namespace rankscope::python;
    module.doc() = "rankscope's C++ engine (internal: use the `rankscope` package)";
    // oneMKL's vector math picks its kernels now, before rankscope's parallel calls (and torch's later ones in this
    // Python process): vector_math.hpp.
    rankscope::warm_up_vector_math();

    // The exception class of bad input: a ValueError whose message is the command line's one-line error, with the
    // offending file, tensor or setting in .where.
    g_error_type = PyErr_NewExceptionWithDoc("rankscope.Error",
                                  "Bad input to rankscope (a missing or malformed file, an unknown option, NaN data, a "
                                  "size out of range). str(e) is the command line's one-line message; e.where names "
                                  "the file, tensor or setting ('' when none).",
                                  PyExc_ValueError, nullptr);
    if (!g_error_type) throw py::error_already_set();
    module.attr("Error") = py::handle(g_error_type);
    translate_exceptions();
    rankscope::set_warning_sink(say_in_python);
    module.def(
        "_set_warning_handler",
        [](const py::object& handler) {
            if (!PyCallable_Check(handler.ptr())) throw rankscope::Error("not callable", "handler");
            Py_XDECREF(g_warning_handler);
            g_warning_handler = handler.inc_ref().ptr();
        },
        py::arg("handler"), "The function the engine's warnings are said through (rankscope._warnings.warn).");

    module.def("version", &rankscope::version_string, "rankscope's version and git commit, as `rankscope --version`.");
    module.attr("source_dir") = RANKSCOPE_SOURCE_DIR_TEXT;
    module.def(
        "set_threads",
        [](int threads) {
            if (threads < 0 || threads > 256) throw rankscope::Error(std::to_string(threads) + " is outside [0, 256]", "threads");
            return rankscope::use_threads(threads);  // as --threads (intra_op_threads.hpp); process-wide
        },
        py::arg("threads"),
        "Sets ATen's intra-op threads (0 = all cores) and holds OpenBLAS's own pool at one thread, as --threads does; "
        "returns the number in use. Process-wide (torch's BLAS calls in this process are affected too).");
    module.def("get_threads", [] { return at::get_num_threads(); }, "ATen's intra-op threads in use.");
    module.def(
        "_progress",
        [] {
            const rankscope::ProgressSnapshot s = rankscope::current_progress();
            return py::make_tuple(s.serial, s.finished, rankscope::progress_line(s));
        },
        "The latest progress bar: (serial, finished, the line the command line draws); serial 0: none yet. Read from "
        "a thread while a call runs (rankscope._progress).");
    module.def("configure_allocator", &rankscope::configure_allocator,
               "Keeps freed memory in the process (glibc mallopt), as the command line does at start when glibc's "
               "malloc serves it: freshly touched pages cost ~8 us each on these VMs (LIBTORCH.md). Affects the whole "
               "Python process; nothing under tcmalloc (LD_PRELOAD), which keeps freed memory by design.");
    module.def(
        "_data_address",
        [](const py::array& array) { return reinterpret_cast<std::uintptr_t>(tensor_view(array).data_ptr()); },
        py::arg("array"), "The address the engine reads an array at (tests check that no copy was made).");

    bind_measures(module);
    bind_networks(module);
    bind_models(module);
    bind_findings(module);
    bind_beyond(module);
}
