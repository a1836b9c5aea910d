// The causal vs bidirectional comparison of a decoder (mask_comparison_findings) on hand-made E1 curves, and the
// residual.csv reader it is fed by in the report (round trip through the table `rankscope model` writes).
#include <gtest/gtest.h>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/provenance.hpp"

using namespace rankscope;

namespace {

// One weights kind's rows: SAN and transformer curves over layers 0..L.
std::vector<ResidualRow> rows(const std::string& weights, const std::vector<double>& san, const std::vector<double>& transformer,
                              bool bidirectional) {
    std::vector<ResidualRow> out;
    const std::string suffix = bidirectional ? " (bidirectional)" : "";
    for (std::size_t l = 0; l < san.size(); ++l)
        out.push_back({"tiny", weights, "SAN" + suffix, static_cast<int>(l), san[l], 0.01, san[l], san[l], 8});
    for (std::size_t l = 0; l < transformer.size(); ++l)
        out.push_back({"tiny", weights, "transformer" + suffix, static_cast<int>(l), transformer[l], 0.01, 0, 1, 8});
    return out;
}

}  // namespace

TEST(MaskComparison, VerdictFollowsTheCollapseLayers) {
    const std::vector<double> slow = {0.9, 0.7, 0.5, 0.3, 0.04, 0.01}, fast = {0.9, 0.2, 0.01, 0.0, 0.0, 0.0},
                              never = {0.9, 0.8, 0.7, 0.6, 0.5, 0.4}, transformer = {0.9, 0.8, 0.7, 0.6, 0.6, 0.55};
    // Causal collapses at layer 4, bidirectional at 2: reproduced, with every number in the reading.
    Findings f = mask_comparison_findings(rows("init", slow, transformer, false), rows("init", fast, transformer, true));
    ASSERT_EQ(f.checks.size(), 1u);
    EXPECT_EQ(f.checks[0].verdict, Verdict::Reproduced);
    EXPECT_NE(f.checks[0].measured.find("causal layer 4, bidirectional layer 2"), std::string::npos) << f.checks[0].measured;
    EXPECT_NE(f.reading.find("0.700 / 0.300 / 0.0100"), std::string::npos) << f.reading;  // causal after 1/3/5 layers
    EXPECT_NE(f.reading.find("0.200 / 0 / 0"), std::string::npos) << f.reading;
    EXPECT_NE(f.reading.find("delays collapse by 2 layers"), std::string::npos) << f.reading;
    EXPECT_NE(f.reading.find("0.550 causal, 0.550 bidirectional"), std::string::npos) << f.reading;
    // Swapped: the causal run collapses first: not reproduced; the same layer: not reproduced either.
    EXPECT_EQ(mask_comparison_findings(rows("init", fast, transformer, false), rows("init", slow, transformer, true))
                  .checks[0].verdict,
              Verdict::NotReproduced);
    EXPECT_EQ(mask_comparison_findings(rows("init", fast, transformer, false), rows("init", fast, transformer, true))
                  .checks[0].verdict,
              Verdict::NotReproduced);
    // The causal run never collapses, the bidirectional one does: reproduced. Neither does: not comparable.
    EXPECT_EQ(mask_comparison_findings(rows("init", never, transformer, false), rows("init", fast, transformer, true))
                  .checks[0].verdict,
              Verdict::Reproduced);
    const Findings neither =
        mask_comparison_findings(rows("init", never, transformer, false), rows("init", never, transformer, true));
    EXPECT_EQ(neither.checks[0].verdict, Verdict::NotComparable);
    EXPECT_NE(neither.checks[0].measured.find("not within 5 layers"), std::string::npos);
    // A NaN curve (a run under --allow-nonfinite) decides nothing and says so (it read "a run of one sample").
    const std::vector<double> broken = {0.9, NAN, NAN, NAN, NAN, NAN};
    const Findings with_nan =
        mask_comparison_findings(rows("init", broken, transformer, false), rows("init", fast, transformer, true));
    EXPECT_EQ(with_nan.checks[0].verdict, Verdict::NotComparable);
    EXPECT_NE(with_nan.reading.find("a relative residual is NaN"), std::string::npos) << with_nan.reading;
    // Both below the threshold at the first layer: a delay shorter than a layer cannot show.
    const std::vector<double> at_once = {0.9, 0.01, 0.0, 0.0, 0.0, 0.0};
    const Findings saturated =
        mask_comparison_findings(rows("init", at_once, transformer, false), rows("init", at_once, transformer, true));
    EXPECT_EQ(saturated.checks[0].verdict, Verdict::NotComparable);
    EXPECT_NE(saturated.reading.find("both collapse at the first layer"), std::string::npos) << saturated.reading;
    // Judged over each layer's 95% interval (std 0.01 over 8 samples: ± 0.0084). A causal curve at 0.045 from layer 2
    // (its interval reaches 0.053) against the bidirectional collapse at 2: not ordered, not comparable.
    const std::vector<double> borderline = {0.9, 0.2, 0.045, 0.045, 0.045, 0.045};
    const Findings undecided =
        mask_comparison_findings(rows("init", borderline, transformer, false), rows("init", fast, transformer, true));
    EXPECT_EQ(undecided.checks[0].verdict, Verdict::NotComparable);
    EXPECT_NE(undecided.checks[0].measured.find("over the 95% intervals of the means: causal layer 2 or later, "
                                                "bidirectional layer 2"),
              std::string::npos)
        << undecided.checks[0].measured;
    EXPECT_NE(undecided.reading.find("more samples would decide"), std::string::npos) << undecided.reading;
    // Slow against fast, but one sample a run: no intervals, no verdict.
    auto single_causal = rows("init", slow, transformer, false), single_bidirectional = rows("init", fast, transformer, true);
    for (auto* run : {&single_causal, &single_bidirectional})
        for (auto& r : *run) r.n = 1, r.std = NAN;
    const Findings single = mask_comparison_findings(single_causal, single_bidirectional);
    EXPECT_EQ(single.checks[0].verdict, Verdict::NotComparable);
    EXPECT_NE(single.reading.find("one sample gives no interval"), std::string::npos) << single.reading;
    // Two weights kinds: one check each.
    auto causal = rows("init", slow, transformer, false), bidirectional = rows("init", fast, transformer, true);
    for (const auto& r : rows("pretrained", fast, transformer, false)) causal.push_back(r);
    for (const auto& r : rows("pretrained", slow, transformer, true)) bidirectional.push_back(r);
    const Findings both = mask_comparison_findings(causal, bidirectional);
    ASSERT_EQ(both.checks.size(), 2u);
    EXPECT_EQ(both.checks[1].verdict, Verdict::NotReproduced);
    // Runs that cannot be compared, or were passed the wrong way round, are errors.
    EXPECT_THROW(mask_comparison_findings(rows("init", slow, transformer, true), rows("init", fast, transformer, true)),
                 Error);
    EXPECT_THROW(mask_comparison_findings(rows("init", slow, {}, false), rows("init", {0.9, 0.1}, {}, true)), Error);
}

TEST(MaskComparison, ResidualCsvRoundTrip) {
    RealModelResult result;
    result.model = "tiny";
    WeightsRun run;
    run.weights = "init";
    run.residual = rows("init", {0.9, 0.123456789012345, 1e-7}, {}, true);
    run.residual.front().variant = "SAN (LN remove, bidirectional)";  // a label holding a comma: quoted in the CSV
    result.runs.push_back(run);
    const std::string text = "# command: rankscope model\n" + residual_table(result).to_csv().to_string();
    const auto read = residual_rows_from_csv(text, "residual.csv");
    ASSERT_EQ(read.size(), run.residual.size());
    for (std::size_t i = 0; i < read.size(); ++i) {
        EXPECT_EQ(read[i].variant, run.residual[i].variant);
        EXPECT_EQ(read[i].layer, run.residual[i].layer);
        EXPECT_EQ(read[i].mean, run.residual[i].mean);  // shortest round-trip spelling: exact
        EXPECT_EQ(read[i].n, 8);
    }
    EXPECT_THROW(residual_rows_from_csv("model,weights\ntiny,init\n", "bad.csv"), Error);
    EXPECT_THROW(residual_rows_from_csv("", "empty.csv"), Error);
}
