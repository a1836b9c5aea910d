// Run-time options of the sanitizer build (RANKSCOPE_SANITIZE=ON). Linked into every program of that build, so the
// options hold however a program is started (ctest, the Python smoke tests, a shell). ASAN_OPTIONS / UBSAN_OPTIONS /
// LSAN_OPTIONS in the environment still override them.
extern "C" {
// Stop at the first error with a non-zero exit status; report leaks at exit. An allocation ASan cannot make (above its
// 1 TiB maximum, or out of memory) returns null as malloc does, so the program's own out-of-memory path runs (the
// ErrorReport test asks libtorch for 1 PiB) instead of ASan ending the process.
const char* __asan_default_options() {
    return "detect_leaks=1:halt_on_error=1:exitcode=86:strict_string_checks=1:allocator_may_return_null=1";
}
const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1:exitcode=87"; }
// Not ours, and not a leak that grows: GLPK keeps one environment per thread (glp_init_env, 5 allocations, ~5 KB)
// that lives until the thread ends; the LP solves of the exact centre run on ATen's worker threads.
const char* __lsan_default_suppressions() { return "leak:glp_init_env\n"; }
}
