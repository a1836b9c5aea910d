#include "rankscope/interrupt.hpp"

namespace rankscope {

InterruptPoll::InterruptPoll(std::function<void()> check) : state_(std::make_shared<State>()) {
    state_->check = std::move(check);
    state_->owner = std::this_thread::get_id();
}

void InterruptPoll::poll() const {
    if (!state_ || !state_->check) return;
    if (state_->stopped.load(std::memory_order_acquire)) std::rethrow_exception(state_->reason);
    if (std::this_thread::get_id() != state_->owner) return;
    try {
        state_->check();
    } catch (...) {
        state_->reason = std::current_exception();
        state_->stopped.store(true, std::memory_order_release);
        throw;
    }
}

}  // namespace rankscope
