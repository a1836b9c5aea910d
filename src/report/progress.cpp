#include "rankscope/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

namespace rankscope {
namespace {

// The latest bar as other threads read it, and how many bars this process made, under one mutex.
struct Published {
    std::mutex mutex;
    ProgressSnapshot latest;
    std::uint64_t bars_made = 0;
};
Published& published() {
    static Published state;
    return state;
}

}  // namespace

Progress::Progress(std::string label, long total)
    : label_(std::move(label)), total_(total), enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {
    {
        Published& state = published();
        const std::lock_guard<std::mutex> lock(state.mutex);
        serial_ = ++state.bars_made;
    }
    publish(false);
    draw(false);
}

Progress::~Progress() {
    publish(true);
    if (enabled_) draw(true);
}

void Progress::set_label(std::string label) {
    label_ = std::move(label);
    publish(false);
}

void Progress::advance(long steps) {
    done_ += steps;
    publish(false);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ > std::chrono::milliseconds(100) || done_ >= total_) {
        last_draw_ = now;
        draw(false);
    }
}

// A bar made inside another (the streamed loader's layers inside `model`'s runs) is shown until it finishes; then the
// outer one is again.
void Progress::publish(bool finished) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    Published& state = published();
    const std::lock_guard<std::mutex> lock(state.mutex);
    ProgressSnapshot& snapshot = state.latest;
    if (snapshot.serial > serial_ && !snapshot.finished) return;
    snapshot = ProgressSnapshot{serial_, finished, label_, done_, total_, elapsed};
}

ProgressSnapshot current_progress() {
    Published& state = published();
    const std::lock_guard<std::mutex> lock(state.mutex);
    return state.latest;
}

std::string progress_line(const ProgressSnapshot& s) {
    const double fraction = s.total > 0 ? static_cast<double>(s.done) / static_cast<double>(s.total) : 1.0;
    const int width = 30, filled = static_cast<int>(fraction * width);
    const double rate = s.elapsed_seconds > 0 ? static_cast<double>(s.done) / s.elapsed_seconds : 0.0;
    const double eta = rate > 0 ? static_cast<double>(s.total - s.done) / rate : 0.0;
    return fmt::format("{:<28.28} [{}{}] {}/{} {:.1f}/s ETA {:.0f}s   ", s.label, std::string(filled, '#'),
                       std::string(width - filled, '.'), s.done, s.total, rate, eta);
}

void Progress::draw(bool final) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    fmt::print(stderr, "\r{}", progress_line(ProgressSnapshot{serial_, final, label_, done_, total_, elapsed}));
    if (final) fmt::print(stderr, "\n");
    std::fflush(stderr);
}

}  // namespace rankscope
