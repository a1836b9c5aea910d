#pragma once
// Cooperative interruption of long library calls (the theory experiment, model runs, batched measures).
//
// The caller (e.g. the Python module, whose check looks at pending Ctrl-C) builds an InterruptPoll around a check that
// THROWS to stop; the library calls poll() at safe points: between theory jobs, between measured matrices, at every
// recorded activation of a model's forward. The check runs only on the thread that built the poll (the one that may
// talk to an interpreter); once it has thrown, poll() on any other thread (e.g. an at::parallel_for worker) rethrows
// the same exception, so the workers stop at their next safe point too.
//
//   InterruptPoll interrupt([] { if (stop_requested()) throw Error("interrupted"); });
//   TheoryResult result = run_theory_experiment(settings, nullptr, interrupt);
//
// A default-constructed poll never interrupts (what the command-line program passes: it stops on signals itself).
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <thread>

namespace rankscope {

class InterruptPoll {
public:
    InterruptPoll() = default;
    explicit InterruptPoll(std::function<void()> check);
    void poll() const;
    void operator()() const { poll(); }

private:
    struct State {
        std::function<void()> check;
        std::thread::id owner;
        std::atomic<bool> stopped{false};
        std::exception_ptr reason;  // written once by the owner before `stopped` is set
    };
    std::shared_ptr<State> state_;
};

}  // namespace rankscope
