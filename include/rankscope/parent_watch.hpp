#pragma once
// A child that must not outlive its parent (reproduce's cells, the SentencePiece helper).
//
// run_process puts RANKSCOPE_PARENT_PID=<our pid> into every child's environment. A rankscope program started that way
// calls stop_with_parent() first thing in main(): the kernel then sends it SIGTERM when the parent dies, even by
// SIGKILL (prctl PR_SET_PDEATHSIG), so a killed `reproduce` leaves no orphan cell computing on. If the parent is
// already gone when the child gets here (it died between spawn and prctl), the child exits at once with status 143.
// Header-only and torch-free: rankscope-spm cannot link the torch library (see CMakeLists.txt).
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace rankscope {

inline constexpr const char* kParentPidVariable = "RANKSCOPE_PARENT_PID";

inline void stop_with_parent() {
    const char* parent = std::getenv(kParentPidVariable);
    if (parent == nullptr || *parent == '\0') return;
    char* end = nullptr;
    const long expected = std::strtol(parent, &end, 10);
    if (*end != '\0' || expected <= 1) return;
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (static_cast<long>(::getppid()) != expected) std::_Exit(128 + SIGTERM);
}

}  // namespace rankscope
