#include "rankscope/progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
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

std::string progress_line(const ProgressSnapshot& s, int columns) {
    const double fraction = s.total > 0 ? static_cast<double>(s.done) / static_cast<double>(s.total) : 1.0;
    const int width = 30, filled = static_cast<int>(fraction * width);
    const double rate = s.elapsed_seconds > 0 ? static_cast<double>(s.done) / s.elapsed_seconds : 0.0;
    // No ETA before a rate is known (it read "ETA 0s" at 0 of 102).
    const std::string eta = s.done >= s.total ? "0s"
                            : rate > 0        ? fmt::format("{:.0f}s", static_cast<double>(s.total - s.done) / rate)
                                              : "?";
    const std::string bar = fmt::format(" [{}{}] {}/{} {:.1f}/s ETA {}   ", std::string(filled, '#'),
                                        std::string(width - filled, '.'), s.done, s.total, rate, eta);
    // The label whole (it was cut at 28 characters: "sort epoch 1 loss 2.08 acc 0" hid the accuracy 0.243), padded
    // to 28; cut only where the terminal is narrower than the line, so that "\r" redraws one line.
    std::string label = s.label;
    if (label.size() < 28) label.resize(28, ' ');
    if (columns > 0 && label.size() + bar.size() >= static_cast<std::size_t>(columns)) {
        std::size_t keep = static_cast<std::size_t>(std::max(8, columns - 1 - static_cast<int>(bar.size())));
        while (keep > 0 && keep < label.size() && (static_cast<unsigned char>(label[keep]) & 0xC0) == 0x80) --keep;  // UTF-8
        label.resize(std::min(keep, label.size()));
    }
    return label + bar;
}

void Progress::draw(bool final) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    winsize size{};
    const int columns = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
    // "\x1b[K" clears what a longer earlier line left to the right.
    fmt::print(stderr, "\r{}\x1b[K", progress_line(ProgressSnapshot{serial_, final, label_, done_, total_, elapsed}, columns));
    if (final) fmt::print(stderr, "\n");
    std::fflush(stderr);
}

}  // namespace rankscope
