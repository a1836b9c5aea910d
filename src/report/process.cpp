// Child processes by posix_spawn with an argument vector: no shell, no quoting (see rankscope/process.hpp).
#include "rankscope/process.hpp"

#include "rankscope/parent_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

extern char** environ;

namespace rankscope {
namespace {

// The running children, one slot each: several threads may each run one (sweep workers).
constexpr int kMaxChildren = 256;
std::atomic<pid_t> g_children[kMaxChildren];
volatile sig_atomic_t g_signal = 0;
std::atomic<bool> g_deferred{false};
// set_interrupt_note's text, double-buffered: the handler reads the buffer `g_note_current` names, which the writer
// switches only after filling the other one.
char g_notes[2][401] = {{0}, {0}};
std::atomic<int> g_note_current{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the note index");
static_assert(std::atomic<pid_t>::is_always_lock_free, "the signal handler reads the child pid");

// A free slot for a child about to start (throws when kMaxChildren run at once); released by ChildSlot's destructor.
class ChildSlot {
public:
    ChildSlot() {
        for (auto& slot : g_children) {
            pid_t expected = 0;
            if (slot.compare_exchange_strong(expected, -1)) {  // -1: reserved, no child yet
                slot_ = &slot;
                return;
            }
        }
        throw Error("run_process: more than " + std::to_string(kMaxChildren) + " children at once");
    }
    ~ChildSlot() { slot_->store(0); }
    void set(pid_t pid) { slot_->store(pid); }
    ChildSlot(const ChildSlot&) = delete;
    ChildSlot& operator=(const ChildSlot&) = delete;

private:
    std::atomic<pid_t>* slot_ = nullptr;
};

// Async-signal-safe: records the signal, forwards it to the running child; with no child (and not deferred) ends this
// process as the default action would.
void on_interrupt(int signal_number) {
    g_signal = signal_number;
    bool forwarded = false;
    for (auto& slot : g_children) {
        const pid_t child = slot.load();
        if (child > 0) ::kill(child, signal_number), forwarded = true;
    }
    if (forwarded) return;
    if (!g_deferred.load()) {
        // Async-signal-safe: write only. The default action then ends the process (status 128 + signal).
        const char* name = signal_number == SIGINT ? "SIGINT" : signal_number == SIGTERM ? "SIGTERM" : "a signal";
        const char* note = g_notes[g_note_current.load()];
        for (const char* part : {"\nrankscope: interrupted by ", name, note, "\n"})
            [[maybe_unused]] const auto written = ::write(STDERR_FILENO, part, std::strlen(part));
        ::signal(signal_number, SIG_DFL);
        ::raise(signal_number);
    }
}

const char* signal_name(int signal_number) {
    const char* name = ::strsignal(signal_number);
    return name ? name : "unknown signal";
}

struct Fd {
    int fd = -1;
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

struct SpawnActions {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    SpawnActions() {
        posix_spawn_file_actions_init(&actions);
        posix_spawnattr_init(&attributes);
    }
    ~SpawnActions() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attributes);
    }
};

void check(int code, const std::string& what, const std::string& program) {
    if (code != 0) throw Error("cannot run " + program + ": " + what + ": " + std::strerror(code));
}

}  // namespace

std::string ProcessResult::describe() const {
    if (signal != 0) return "killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
    return "exited with status " + std::to_string(exit_code);
}

Interrupted::Interrupted(int signal_number, std::string where)
    : Error(std::string("interrupted by ") + (signal_number == SIGINT ? "SIGINT" : signal_number == SIGTERM ? "SIGTERM"
                                                                                                         : signal_name(signal_number)),
            std::move(where)),
      signal_(signal_number) {}

namespace {

// SIGBUS: a page of a memory-mapped input (a safetensors checkpoint, read in place) is gone because the file shrank
// under the run. One line and exit status 2 instead of "Bus error" (async-signal-safe: write and _exit only); the
// run's files are written atomically and its manifest last, so the folder shows no finished run.
void on_mapped_file_fault(int) {
    static const char message[] = "rankscope: error: an input file mapped into memory (a checkpoint) was truncated or "
                                  "replaced while this run read it (SIGBUS); run again when it is stable\n";
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(2);
}

}  // namespace

void install_interrupt_handlers() {
    // SIGBUS first: test_cli_limits.py waits until SIGTERM is caught (/proc/<pid>/status) to know that every handler
    // is in place (under the sanitizers SIGBUS is caught from the start, by ASan).
    struct sigaction fault {};
    fault.sa_handler = on_mapped_file_fault;
    sigemptyset(&fault.sa_mask);
    fault.sa_flags = SA_RESETHAND;
    ::sigaction(SIGBUS, &fault, nullptr);
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
}

void defer_interrupts(bool deferred) { g_deferred.store(deferred); }

void set_interrupt_note(const std::string& note) {
    static std::mutex writers;
    std::lock_guard<std::mutex> lock(writers);
    const int next = 1 - g_note_current.load();
    const std::size_t length = std::min<std::size_t>(note.size(), sizeof g_notes[next] - 1);
    std::memcpy(g_notes[next], note.data(), length);
    g_notes[next][length] = '\0';
    g_note_current.store(next);
}

int pending_interrupt() { return g_signal; }

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
    if (argv.empty()) throw Error("run_process: no program");
    const std::string& program = argv.front();
    SpawnActions spawn;
    auto& actions = spawn.actions;
    check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "stdin", program);
    // Absolute paths, so that the order of chdir and open does not matter.
    const std::string out_file = options.stdout_file.empty() ? "" : std::filesystem::absolute(options.stdout_file).string();
    const std::string err_file = options.stderr_file.empty() ? "" : std::filesystem::absolute(options.stderr_file).string();
    const std::string directory =
        options.working_directory.empty() ? "" : std::filesystem::absolute(options.working_directory).string();
    Fd out_read, out_write, err_read, err_write;
    auto make_pipe = [&](Fd& read_end, Fd& write_end) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno), program);
        read_end.fd = fds[0];
        write_end.fd = fds[1];
    };
    if (options.capture_stdout) {
        make_pipe(out_read, out_write);
        check(posix_spawn_file_actions_adddup2(&actions, out_write.fd, 1), "stdout", program);
    } else if (!out_file.empty()) {
        check(posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), "stdout",
              program);
    }
    if (options.capture_stderr) {
        make_pipe(err_read, err_write);
        check(posix_spawn_file_actions_adddup2(&actions, err_write.fd, 2), "stderr", program);
    } else if (!err_file.empty() && err_file == out_file && !options.capture_stdout) {
        check(posix_spawn_file_actions_adddup2(&actions, 1, 2), "stderr", program);
    } else if (!err_file.empty()) {
        check(posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), "stderr",
              program);
    }
    if (!directory.empty())
        check(posix_spawn_file_actions_addchdir_np(&actions, directory.c_str()), "working directory", program);

    sigset_t defaults, empty;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT}) sigaddset(&defaults, s);
    check(posix_spawnattr_setsigmask(&spawn.attributes, &empty), "signal mask", program);
    check(posix_spawnattr_setsigdefault(&spawn.attributes, &defaults), "signal defaults", program);
    check(posix_spawnattr_setflags(&spawn.attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF), "flags", program);

    std::vector<char*> arguments;
    for (const auto& word : argv) arguments.push_back(const_cast<char*>(word.c_str()));
    arguments.push_back(nullptr);
    // Our environment plus RANKSCOPE_PARENT_PID, so that a rankscope child stops when we die (parent_watch.hpp).
    const std::string variable_prefix = std::string(kParentPidVariable) + "=";
    const std::string parent_pid = variable_prefix + std::to_string(::getpid());
    std::vector<char*> environment;
    for (char** entry = environ; *entry != nullptr; ++entry)
        if (std::strncmp(*entry, variable_prefix.c_str(), variable_prefix.size()) != 0) environment.push_back(*entry);
    environment.push_back(const_cast<char*>(parent_pid.c_str()));
    environment.push_back(nullptr);
    ChildSlot slot;
    pid_t pid = 0;
    const int spawned = options.search_path
                            ? ::posix_spawnp(&pid, program.c_str(), &actions, &spawn.attributes, arguments.data(), environment.data())
                            : ::posix_spawn(&pid, program.c_str(), &actions, &spawn.attributes, arguments.data(), environment.data());
    if (spawned != 0) {
        if (spawned == ENOENT && !directory.empty() && !std::filesystem::is_directory(directory))
            throw Error("cannot run " + program + ": no such working directory", directory);
        throw Error("cannot run " + program + ": " + std::strerror(spawned));
    }
    slot.set(pid);
    if (g_signal != 0) ::kill(pid, g_signal);  // a signal that came between spawn and here
    out_write.reset();
    err_write.reset();

    // Read the pipes (if any) and reap the child; a child that ignores a forwarded signal for 10 s gets SIGKILL.
    ProcessResult result;
    int status = 0;
    bool reaped = false;
    std::chrono::steady_clock::time_point signalled{};
    char buffer[65536];
    while (!reaped || out_read.fd >= 0 || err_read.fd >= 0) {
        if (out_read.fd >= 0 || err_read.fd >= 0) {
            pollfd fds[2];
            nfds_t count = 0;
            Fd* owners[2];
            std::string* sinks[2];
            if (out_read.fd >= 0) fds[count] = {out_read.fd, POLLIN, 0}, owners[count] = &out_read, sinks[count++] = &result.out;
            if (err_read.fd >= 0) fds[count] = {err_read.fd, POLLIN, 0}, owners[count] = &err_read, sinks[count++] = &result.err;
            if (::poll(fds, count, 100) > 0)
                for (nfds_t i = 0; i < count; ++i) {
                    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                    const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
                    if (got > 0) sinks[i]->append(buffer, static_cast<std::size_t>(got));
                    else if (got == 0 || errno != EINTR) owners[i]->reset();
                }
        } else if (!reaped) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (!reaped) {
            const pid_t done = ::waitpid(pid, &status, WNOHANG);
            if (done == pid || (done < 0 && errno != EINTR)) reaped = true;
        }
        if (!reaped && g_signal != 0) {
            const auto now = std::chrono::steady_clock::now();
            if (signalled == std::chrono::steady_clock::time_point{}) signalled = now;
            else if (now - signalled > std::chrono::seconds(10)) ::kill(pid, SIGKILL);
        }
    }
    slot.set(0);
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    if (g_signal != 0) throw Interrupted(g_signal, program);
    return result;
}

}  // namespace rankscope
