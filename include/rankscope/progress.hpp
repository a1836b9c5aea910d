#pragma once
// A progress bar with rate and ETA on a terminal (stderr); silent when stderr is not a terminal.
//   Progress progress("theory", total);  ...  progress.advance();  // finishes itself on destruction
// The bar's state is also kept where another thread can read it (current_progress): the Python module draws it in a
// notebook's cell, which never shows what the engine writes to stderr.
#include <chrono>
#include <cstdint>
#include <string>

namespace rankscope {

class Progress {
public:
    Progress(std::string label, long total);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    void advance(long steps = 1);
    void set_label(std::string label);

private:
    void draw(bool final);
    void publish(bool finished);
    std::string label_;
    long total_, done_ = 0;
    bool enabled_;
    std::chrono::steady_clock::time_point start_, last_draw_;
    std::uint64_t serial_;  // which bar this is, in the order they were made
};

struct ProgressSnapshot {
    std::uint64_t serial = 0;  // 0: no bar yet in this process; each new bar takes the next number
    bool finished = false;     // its work is done (the object is gone)
    std::string label;
    long done = 0, total = 0;
    double elapsed_seconds = 0;
};
// The latest bar's state, from any thread.
ProgressSnapshot current_progress();
// How a bar reads: "theory                       [###############...............] 12/24 3.1/s ETA 4s   " (the label
// padded to 28, whole unless the line would not fit `columns` > 0, a terminal's width; "ETA ?" before any rate).
std::string progress_line(const ProgressSnapshot& snapshot, int columns = 0);

}  // namespace rankscope
