#pragma once
// A progress bar with rate and ETA on a terminal (stderr); silent when stderr is not a terminal.
//   Progress progress("theory", total);  ...  progress.advance();  // finishes itself on destruction
#include <chrono>
#include <string>

namespace rankscope {

class Progress {
public:
    Progress(std::string label, long total);
    ~Progress();
    void advance(long steps = 1);
    void set_label(std::string label);

private:
    void draw(bool final);
    std::string label_;
    long total_, done_ = 0;
    bool enabled_;
    std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace rankscope
