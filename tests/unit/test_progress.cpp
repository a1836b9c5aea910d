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
    // A long label is whole ("sort epoch 1 loss 2.08 acc 0" hid the accuracy 0.243), cut only to a terminal's width;
    // before any rate the ETA is unknown, not 0 s.
    s.label = "sort epoch 1 loss 2.08 acc 0.243 lr 0.001";
    s.done = 0, s.total = 102, s.elapsed_seconds = 0.5;
    EXPECT_EQ(progress_line(s), "sort epoch 1 loss 2.08 acc 0.243 lr 0.001 [..............................] 0/102 0.0/s ETA ?   ");
    const std::string narrow = progress_line(s, 80);
    EXPECT_LT(narrow.size(), 80u) << narrow;
    EXPECT_EQ(narrow.substr(0, 20), "sort epoch 1 loss 2.");
    // Never cut inside a UTF-8 character: at 70 columns the 54-character bar leaves 15 bytes, the second byte of é.
    s.label = std::string(14, 'x') + "é" + std::string(40, 'y');
    EXPECT_EQ(progress_line(s, 70), std::string(14, 'x') + " [..............................] 0/102 0.0/s ETA ?   ");
}

}  // namespace
}  // namespace rankscope
