#pragma once
// Child processes without a shell: gnuplot, the rankscope-spm helper, and reproduce's cells.
//
//   ProcessOptions options;
//   options.working_directory = out;                     // chdir in the child; no quoting anywhere
//   options.stderr_file = out / "theory.gnuplot.log";
//   const ProcessResult r = run_process({"gnuplot", "theory.gp"}, options);
//   if (!r.ok()) ... r.describe() ...                    // "exited with status 1" / "killed by signal 9"
//
// The program and its arguments go to the child as an argument vector (posix_spawn), so a path holding quotes, `$()`,
// backticks, spaces or newlines is just bytes. While children run (several threads may each run one), SIGINT/SIGTERM
// sent to this process are forwarded to every one of them; run_process then throws Interrupted once its child has
// exited. Each child's environment gets RANKSCOPE_PARENT_PID, with which rankscope's own programs stop when this
// process dies (parent_watch.hpp).
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/error.hpp"

namespace rankscope {

struct ProcessOptions {
    std::filesystem::path working_directory;  // "" = ours
    std::filesystem::path stdout_file;        // "" = inherit ours (unless capture_stdout); truncated, created 0644
    std::filesystem::path stderr_file;        // "" = inherit ours (unless capture_stderr); may equal stdout_file
    bool capture_stdout = false;              // collect the child's standard output into ProcessResult::out
    bool capture_stderr = false;              // collect its standard error into ProcessResult::err
    bool search_path = false;                 // look the program up in PATH (gnuplot); else argv[0] is a path
};

struct ProcessResult {
    int exit_code = -1;  // when the child exited normally, else -1
    int signal = 0;      // the signal that ended it, else 0
    std::string out, err;
    bool ok() const { return exit_code == 0; }
    std::string describe() const;  // "exited with status 3", "killed by signal 9 (Killed)"
};

// Thrown when SIGINT/SIGTERM arrived while a child ran (or, in deferred mode, at all): the child has been stopped.
class Interrupted : public Error {
public:
    explicit Interrupted(int signal_number, std::string where = {});
    int signal_number() const noexcept { return signal_; }

private:
    int signal_;
};

// Runs argv[0] with the arguments argv[1..] and waits for it. Throws Error when it cannot be started (no such program:
// "cannot run <program>: <reason>"), Interrupted when we were interrupted meanwhile; a non-zero exit is in the result.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Installs the SIGINT/SIGTERM handlers (once, from main), and a SIGBUS handler that names a memory-mapped input cut
// short under the run in one line (exit status 2). Default mode: a signal while a child runs is forwarded to it
// and run_process throws Interrupted; a signal while none runs ends this process as the default action would.
void install_interrupt_handlers();
// Deferred mode (reproduce): a signal is only recorded (and forwarded to a running child); the caller polls
// pending_interrupt() at safe points and stops cleanly.
void defer_interrupts(bool deferred);
int pending_interrupt();  // the signal received, or 0
// When a signal ends the process (default mode), one line on stderr first: "rankscope: interrupted by SIGINT" and this
// note (it ended without a word). pretrain sets "; the training state is saved at step 100: run the same command
// again to resume" at each save. At most 400 bytes kept; safe to call from any thread while a signal arrives.
void set_interrupt_note(const std::string& note);

}  // namespace rankscope
