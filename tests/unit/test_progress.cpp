// The latest progress bar, as another thread (the Python module's) reads it, and the line both draw.
#include <gtest/gtest.h>

#include "rankscope/progress.hpp"

namespace rankscope {
namespace {

TEST(Progress, TheLatestBarIsReadableAndAnInnerBarHandsBackToItsOuter) {
    const std::uint64_t before = current_progress().serial;
    {
        Progress outer("outer", 3);
        outer.advance();
        ProgressSnapshot s = current_progress();
        EXPECT_EQ(s.serial, before + 1);
        EXPECT_EQ(s.label, "outer");
        EXPECT_EQ(s.done, 1);
        EXPECT_EQ(s.total, 3);
        EXPECT_FALSE(s.finished);
        {
            Progress inner("inner", 2);
            outer.advance();  // the inner bar is shown while it runs
            EXPECT_EQ(current_progress().label, "inner");
            inner.advance(2);
            EXPECT_EQ(current_progress().done, 2);
        }
        s = current_progress();
        EXPECT_EQ(s.label, "inner");
        EXPECT_TRUE(s.finished);
        outer.advance();  // ...then the outer one again, with what it counted meanwhile
        s = current_progress();
        EXPECT_EQ(s.serial, before + 1);
        EXPECT_EQ(s.done, 3);
        EXPECT_FALSE(s.finished);
    }
    EXPECT_TRUE(current_progress().finished);
    Progress next("next", 1);
    EXPECT_EQ(current_progress().serial, before + 3);  // a new number, never one seen before
}

TEST(Progress, LineReadsAsTheTerminalsBar) {
    ProgressSnapshot s;
    s.label = "theory";
    s.done = 12;
    s.total = 24;
    s.elapsed_seconds = 4;
    EXPECT_EQ(progress_line(s), "theory                       [###############...............] 12/24 3.0/s ETA 4s   ");
    s.total = 0;  // nothing to do: full, no rate
    s.done = 0;
    s.elapsed_seconds = 0;
    EXPECT_EQ(progress_line(s), "theory                       [##############################] 0/0 0.0/s ETA 0s   ");
}

}  // namespace
}  // namespace rankscope
