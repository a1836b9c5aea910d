// Typed tables (table.hpp) and cooperative interruption (interrupt.hpp): what the command line and the Python module
// share.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rankscope/error_report.hpp"
#include "rankscope/interrupt.hpp"
#include "rankscope/intra_op_threads.hpp"
#include "rankscope/provenance.hpp"
#include "rankscope/table.hpp"

namespace rankscope {
namespace {

// How exceptions read to a user (error_report.hpp): libtorch's CPU allocator failing is out of memory (exit status 2,
// the request named), not "internal error (libtorch)"; a JSON type error is bad input without nlohmann's bracketed id.
TEST(ErrorReport, LibtorchOutOfMemoryAndJsonTypeErrors) {
    ErrorReport report;
    try {
        const at::Tensor huge = at::empty({std::int64_t{1} << 48}, at::kFloat);  // 1 PiB
        ADD_FAILURE() << "allocated " << huge.numel() << " floats";
    } catch (...) {
        report = describe_current_exception();
    }
    EXPECT_EQ(report.kind, ErrorReport::OutOfMemory) << report.message;
    EXPECT_NE(report.message.find("out of memory: libtorch asked for 1.13e+06 GB"), std::string::npos) << report.message;
    try {
        (void)nlohmann::json("text").get<bool>();
    } catch (...) {
        report = describe_current_exception();
    }
    EXPECT_EQ(report.kind, ErrorReport::BadInput);
    EXPECT_EQ(report.message, "unexpected JSON content: type must be boolean, but is string");
}

TEST(Table, WritesTypedCellsAsTheCsvDid) {
    Table table({{"variant", Table::Text}, {"seed", Table::Unsigned}, {"layer", Table::Integer}, {"value", Table::Real},
                 {"alpha", Table::Real}});
    table.add({"SAN, skip", std::numeric_limits<std::uint64_t>::max(), -3, 0.1, Table::Cell()});
    table.add({"x", std::uint64_t{0}, 7, NAN, 2.0});
    EXPECT_EQ(table.rows(), 2u);
    EXPECT_EQ(table.to_csv().to_string(),
              "variant,seed,layer,value,alpha\n"
              "\"SAN, skip\",18446744073709551615,-3,0.1,\n"
              "x,0,7,nan,2\n");
    // Reals round-trip exactly through the CSV text (format_number is the shortest round-trip spelling).
    const double third = 1.0 / 3.0;
    Table reals({{"v", Table::Real}});
    reals.add({third});
    const std::string text = reals.to_csv().to_string();
    EXPECT_EQ(std::strtod(text.substr(2).c_str(), nullptr), third);
    // A missing real is NaN in the column and flagged.
    const auto& alpha = table.column("alpha");
    EXPECT_TRUE(std::isnan(alpha.reals[0]));
    EXPECT_EQ(alpha.missing[0], 1);
    EXPECT_EQ(alpha.missing[1], 0);
}

TEST(Table, RejectsCellsOfTheWrongKindAndRowsOfTheWrongLength) {
    Table table({{"layer", Table::Integer}, {"name", Table::Text}});
    EXPECT_THROW(table.add({1.5, "a"}), std::logic_error);
    EXPECT_THROW(table.add({1, 2}), std::logic_error);
    EXPECT_THROW(table.add({1}), std::logic_error);
    EXPECT_THROW(table.add({Table::Cell(), "a"}), std::logic_error);  // missing only in Real columns
    EXPECT_EQ(table.rows(), 0u);  // a rejected row leaves nothing behind
    EXPECT_THROW(table.column("nope"), std::logic_error);
}

TEST(InterruptPoll, DefaultNeverInterrupts) {
    const InterruptPoll none;
    EXPECT_NO_THROW(none.poll());
}

TEST(InterruptPoll, TheOwnerRunsTheCheckAndOtherThreadsRethrowItsException) {
    int calls = 0;
    bool stop = false;
    const InterruptPoll interrupt([&] {
        ++calls;
        if (stop) throw std::runtime_error("stop requested");
    });
    interrupt.poll();
    EXPECT_EQ(calls, 1);
    // Another thread does not run the check (it may not talk to an interpreter) while nothing has stopped.
    std::thread([&] { EXPECT_NO_THROW(interrupt.poll()); }).join();
    EXPECT_EQ(calls, 1);
    stop = true;
    EXPECT_THROW(interrupt.poll(), std::runtime_error);
    // Now every thread stops with the owner's exception, without running the check again.
    std::string seen;
    std::thread([&] {
        try {
            interrupt.poll();
        } catch (const std::runtime_error& error) {
            seen = error.what();
        }
    }).join();
    EXPECT_EQ(seen, "stop requested");
    EXPECT_EQ(calls, 2);
}

TEST(InterruptPoll, StopsAParallelForAndReachesTheCaller) {
    const IntraOpThreads two(2);  // a worker thread beside the owner: it must stop too, not finish its half of the range
    std::atomic<int> after_stop{0};
    std::atomic<bool> stopped{false};
    int owner_calls = 0;
    const InterruptPoll interrupt([&] {
        if (++owner_calls == 3) throw std::runtime_error("interrupted");
    });
    // `stopped` is set where the exception leaves poll(), i.e. once the poll has recorded it for the other threads.
    // (Set inside the check, before poll() records the throw, it let a worker on a loaded machine count its whole
    // remaining half while the owner was descheduled between the two: 488 in one CI run.)
    EXPECT_THROW(at::parallel_for(0, 1000, 1,
                                  [&](std::int64_t begin, std::int64_t end) {
                                      for (std::int64_t i = begin; i < end; ++i) {
                                          try {
                                              interrupt.poll();
                                          } catch (...) {
                                              stopped = true;
                                              throw;
                                          }
                                          if (stopped) ++after_stop;
                                      }
                                  }),
                 std::runtime_error);
    // Each worker that polls after the stop leaves at once (without the shared rethrow the worker would run the ~500
    // items of its half past the stop).
    EXPECT_LT(after_stop.load(), 50);
}

}  // namespace
}  // namespace rankscope
