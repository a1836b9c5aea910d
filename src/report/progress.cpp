#include "rankscope/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace rankscope {

Progress::Progress(std::string label, long total)
    : label_(std::move(label)), total_(total), enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {
    draw(false);
}

Progress::~Progress() {
    if (enabled_) draw(true);
}

void Progress::set_label(std::string label) { label_ = std::move(label); }

void Progress::advance(long steps) {
    done_ += steps;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ > std::chrono::milliseconds(100) || done_ >= total_) {
        last_draw_ = now;
        draw(false);
    }
}

void Progress::draw(bool final) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
    const int width = 30, filled = static_cast<int>(fraction * width);
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
    fmt::print(stderr, "\r{:<28.28} [{}{}] {}/{} {:.1f}/s ETA {:.0f}s   ", label_, std::string(filled, '#'),
               std::string(width - filled, '.'), done_, total_, rate, eta);
    if (final) fmt::print(stderr, "\n");
    std::fflush(stderr);
}

}  // namespace rankscope
