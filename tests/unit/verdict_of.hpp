#pragma once
// The verdict of the first check whose claim contains `part` (tests of the findings' judges).
#include <string>

#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"

namespace rankscope::test_support {

inline Verdict verdict_of(const Findings& findings, const std::string& part) {
    for (const auto& c : findings.checks)
        if (c.claim.find(part) != std::string::npos) return c.verdict;
    throw Error("no check mentions '" + part + "'");
}

}  // namespace rankscope::test_support
