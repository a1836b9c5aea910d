// Warnings and where they go (see warnings.hpp).
#include "rankscope/warnings.hpp"

#include <cstdio>
#include <mutex>
#include <utility>

namespace rankscope {
namespace {

// The sink and its mutex, function-local so that a warning said while static objects are made (an environment variable
// read at load time) finds them made.
struct Sink {
    std::mutex mutex;
    WarningSink sink;
};
Sink& current() {
    static Sink state;
    return state;
}

}  // namespace

void print_warning(const std::string& message) {
    std::fprintf(stderr, "rankscope: warning: %s\n", message.c_str());
    std::fflush(stderr);
}

void warn(const std::string& message) {
    WarningSink sink;
    {
        const std::lock_guard<std::mutex> lock(current().mutex);
        sink = current().sink;
    }
    // Called outside the lock: Python's sink waits for the interpreter, and may warn again (a filter, a logger).
    if (sink)
        sink(message);
    else
        print_warning(message);
}

WarningSink set_warning_sink(WarningSink sink) {
    const std::lock_guard<std::mutex> lock(current().mutex);
    return std::exchange(current().sink, std::move(sink));
}

}  // namespace rankscope
