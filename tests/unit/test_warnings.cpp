// warn() goes through the sink the program sets (the Python module's: Python's `warnings`), else to stderr.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rankscope/warnings.hpp"

namespace rankscope {
namespace {

TEST(Warnings, GoThroughTheSinkSetAndToStderrWithout) {
    std::vector<std::string> said;
    const WarningSink previous = set_warning_sink([&](const std::string& message) { said.push_back(message); });
    warn("one");
    std::thread([] { warn("two, from another thread"); }).join();
    EXPECT_EQ(said, (std::vector<std::string>{"one", "two, from another thread"}));
    // A sink that throws (Python's filter "error") throws out of warn().
    set_warning_sink([](const std::string& message) { throw std::runtime_error(message); });
    EXPECT_THROW(warn("raised"), std::runtime_error);
    // The default: the command line's line on stderr.
    set_warning_sink({});
    testing::internal::CaptureStderr();
    warn("three");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "rankscope: warning: three\n");
    set_warning_sink(previous);
}

}  // namespace
}  // namespace rankscope
