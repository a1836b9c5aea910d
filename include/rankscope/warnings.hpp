#pragma once
// Warnings: what a user should know that is not an error (a vocabulary that does not fit the text, tensors of a
// checkpoint that the model does not read, a figure gnuplot could not draw). Code says them with warn(); the program
// decides where they go. The command line prints "rankscope: warning: <message>" on stderr (the default sink); the
// Python module raises each as a rankscope.RankscopeWarning through Python's `warnings`, which a notebook shows (a C++
// write to stderr never reaches a notebook's cell) and a test or a warnings filter can catch.
//
//   warn(fmt::format("{} of the {} text tokens are [UNK]", unknown, total));
#include <functional>
#include <string>

namespace rankscope {

// Says `message` (one line, without a "warning:" prefix) through the current sink, from any thread. Throws what the
// sink throws: under Python's warnings filter "error", the warning itself.
void warn(const std::string& message);

// Replaces the process-wide sink and returns the previous one; an empty function restores the default (stderr).
using WarningSink = std::function<void(const std::string& message)>;
WarningSink set_warning_sink(WarningSink sink);

// The default sink: "rankscope: warning: <message>\n" on stderr.
void print_warning(const std::string& message);

}  // namespace rankscope
