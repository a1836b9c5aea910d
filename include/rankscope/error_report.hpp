#pragma once
// How any exception reads to a user: one line, and whether it is bad input, an internal failure, an interruption or
// an exhausted machine. The command-line program prints "rankscope: error: <message>" with the matching exit status;
// the Python module raises the matching exception class with the same message.
//
//   try { ... } catch (...) { const ErrorReport report = describe_current_exception(); ... }
#include <string>

namespace rankscope {

struct ErrorReport {
    enum Kind {
        BadInput,     // rankscope::Error, filesystem, JSON content, unreadable input: exit status 2
        OutOfMemory,  // std::bad_alloc: exit status 2
        Interrupted,  // rankscope::Interrupted (SIGINT/SIGTERM): exit status 128 + signal
        Internal,     // libtorch or anything unexpected: exit status 1
    };
    Kind kind = Internal;
    std::string message;  // one line, newlines replaced by spaces
    std::string where;    // rankscope::Error's file or flag ("" otherwise); already part of `message`
    int signal = 0;       // Interrupted: the signal number
};

// Call inside a catch block: describes the exception being handled (rethrows nothing).
ErrorReport describe_current_exception();

}  // namespace rankscope
