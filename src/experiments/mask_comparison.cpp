// Decoders: the same weights run with their causal mask and bidirectionally (two `rankscope model` runs, e.g. the
// reproduce cells e1_gpt2 and e1_gpt2_bidirectional), compared. Not in the paper: Wu et al. 2024 show that a causal
// mask slows rank collapse. The measure is the paper's E1 curve of the SAN variant (no attention skip, no MLP), the
// one that collapses; the criterion is the first layer whose relative residual is below kCollapsedResidual ("≈ 0" in E1).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/sweep.hpp"  // csv_records, csv_fields

namespace rankscope {
namespace {

// "SAN (LN remove, bidirectional)" → "SAN"
std::string base_variant(const std::string& label) { return label.substr(0, label.find(" (")); }
bool is_bidirectional_label(const std::string& label) { return label.find("bidirectional") != std::string::npos; }

// The variant's mean relative residual by layer (index = layer), for one weights kind.
std::vector<double> curve(const std::vector<ResidualRow>& rows, const std::string& weights, const std::string& variant) {
    std::map<int, double> by_layer;
    for (const auto& r : rows)
        if (r.weights == weights && base_variant(r.variant) == variant) by_layer[r.layer] = r.mean;
    std::vector<double> values;
    for (const auto& [layer, mean] : by_layer) {
        if (layer != static_cast<int>(values.size())) return {};  // a gap: not a whole curve
        values.push_back(mean);
    }
    return values;
}

// The first layer >= 1 whose value is below kCollapsedResidual; nullopt when none is.
std::optional<int> collapse_layer(const std::vector<double>& values) {
    for (std::size_t l = 1; l < values.size(); ++l)
        if (values[l] < kCollapsedResidual) return static_cast<int>(l);
    return std::nullopt;
}

// Where the collapse layer can lie, from each layer's 95% interval of the mean (residual_interval): from the first
// layer whose interval reaches below kCollapsedResidual (`possible`) to the first wholly below it (`sure`); nullopt
// when no layer's does. `defined` is false when a layer has no interval (one sample).
struct CollapseRange {
    std::optional<int> possible, sure;
    bool defined = true;
};
CollapseRange collapse_range(const std::vector<ResidualRow>& rows, const std::string& weights) {
    std::map<int, Interval> by_layer;
    for (const auto& r : rows)
        if (r.weights == weights && base_variant(r.variant) == "SAN" && r.layer >= 1) by_layer[r.layer] = residual_interval(r);
    CollapseRange range;
    for (const auto& [layer, interval] : by_layer) {
        range.defined = range.defined && interval.defined();
        if (!range.possible && interval.low < kCollapsedResidual) range.possible = layer;
        if (!range.sure && interval.high < kCollapsedResidual) range.sure = layer;
    }
    return range;
}

// "layer 3", "layers 2–3", "layer 4 or later", "not within 5 layers" (a CollapseRange in words).
std::string range_text(const CollapseRange& range, int layers) {
    if (!range.possible) return fmt::format("not within {} layers", layers);
    if (!range.sure) return fmt::format("layer {} or later", *range.possible);
    return *range.possible == *range.sure ? fmt::format("layer {}", *range.sure)
                                          : fmt::format("layers {}–{}", *range.possible, *range.sure);
}

std::string depth_text(const std::optional<int>& layer, int layers) {
    return layer ? fmt::format("layer {}", *layer) : fmt::format("not within {} layers", layers);
}

}  // namespace

std::vector<ResidualRow> residual_rows_from_csv(const std::string& csv_text, const std::string& where) {
    const std::vector<std::string> records = csv_records(csv_text);
    if (records.empty()) throw Error("no header line in residual.csv", where);
    const std::vector<std::string> header = csv_fields(records.front());
    auto column = [&](const std::string& name) {
        for (std::size_t i = 0; i < header.size(); ++i)
            if (header[i] == name) return i;
        throw Error("residual.csv has no column '" + name + "'", where);
    };
    const std::size_t model = column("model"), weights = column("weights"), variant = column("variant"),
                      layer = column("layer"), mean = column("mean"), std = column("std"), min = column("min"),
                      max = column("max"), n = column("n");
    std::vector<ResidualRow> rows;
    for (std::size_t r = 1; r < records.size(); ++r) {
        const std::vector<std::string> fields = csv_fields(records[r]);
        if (fields.size() != header.size())
            throw Error(fmt::format("record {} has {} fields, the header {}", r + 1, fields.size(), header.size()), where);
        try {
            rows.push_back({fields[model], fields[weights], fields[variant], std::stoi(fields[layer]),
                            std::stod(fields[mean]), std::stod(fields[std]), std::stod(fields[min]),
                            std::stod(fields[max]), std::stoi(fields[n])});
        } catch (const std::logic_error&) {
            throw Error(fmt::format("record {}: a number that does not parse", r + 1), where);
        }
    }
    return rows;
}

Findings mask_comparison_findings(const std::vector<ResidualRow>& causal, const std::vector<ResidualRow>& bidirectional) {
    Findings f;
    f.experiment = "E1";
    const std::string model = causal.empty() ? "?" : causal.front().model;
    f.subject = model + ": the same weights with the causal mask and bidirectionally";
    for (const auto& r : causal)
        if (is_bidirectional_label(r.variant)) throw Error("the causal run's residual rows carry a bidirectional label: " + r.variant);
    for (const auto& r : bidirectional)
        if (!is_bidirectional_label(r.variant)) throw Error("the bidirectional run's residual rows lack the label: " + r.variant);
    std::vector<std::string> kinds;
    for (const auto& r : causal)
        if (std::find(kinds.begin(), kinds.end(), r.weights) == kinds.end()) kinds.push_back(r.weights);
    std::string reading;
    for (const auto& weights : kinds) {
        const std::vector<double> c = curve(causal, weights, "SAN"), b = curve(bidirectional, weights, "SAN");
        if (c.size() < 2 || c.size() != b.size()) continue;  // SAN not run on both, or different depths
        const int L = static_cast<int>(c.size()) - 1;
        const auto c_depth = collapse_layer(c), b_depth = collapse_layer(b);
        std::vector<int> shown = {1};
        if (L >= 3) shown.push_back(3);
        if (L > 3) shown.push_back(L);
        std::string c_text, b_text, layers_text;
        for (int l : shown) {
            c_text += (c_text.empty() ? "" : " / ") + quote_number(c[static_cast<std::size_t>(l)]);
            b_text += (b_text.empty() ? "" : " / ") + quote_number(b[static_cast<std::size_t>(l)]);
            layers_text += (layers_text.empty() ? "" : "/") + std::to_string(l);
        }
        // Judged over each layer's 95% interval, as `model`'s E1 verdicts: the bidirectional collapse layer B lies in
        // [possible, sure] of its range, the causal C in its own. B < C for certain when B's sure layer comes before
        // C's possible one; B ≥ C for certain when B's possible layer is at or after C's sure one; else undecided.
        const CollapseRange c_range = collapse_range(causal, weights), b_range = collapse_range(bidirectional, weights);
        Verdict verdict = Verdict::NotComparable;
        std::string outcome;
        const auto has_nan = [](const std::vector<double>& v) {
            return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
        };
        if (has_nan(c) || has_nan(b)) {
            outcome = "a relative residual is NaN (written under --allow-nonfinite), so nothing is decided";
        } else if (!b_range.defined || !c_range.defined) {
            outcome = "a run of one sample gives no interval of its means, so nothing is decided";
        } else if (!b_range.possible && !c_range.possible) {
            outcome = "neither collapses within the model's depth, so a delay cannot show";
        } else if (b_range.sure == 1 && c_range.sure == 1) {
            outcome = "both collapse at the first layer, so a delay shorter than a layer cannot show";
        } else if (b_range.sure && (!c_range.possible || *c_range.possible > *b_range.sure)) {
            verdict = Verdict::Reproduced;
            outcome = c_depth && b_depth && *c_depth > *b_depth
                          ? fmt::format("the causal mask delays collapse by {} layer{}", *c_depth - *b_depth,
                                        *c_depth - *b_depth == 1 ? "" : "s")
                          : "the causal mask keeps SAN from collapsing within the model's depth";
        } else if (c_range.sure && (!b_range.possible || *b_range.possible >= *c_range.sure)) {
            verdict = Verdict::NotReproduced;
            outcome = "the causal mask does not delay collapse here";
        } else {
            outcome = fmt::format("the 95% intervals over the samples cannot order the two (collapse at {} causal, {} "
                                  "bidirectional): more samples would decide",
                                  range_text(c_range, L), range_text(b_range, L));
        }
        f.check({"E1", fmt::format("Causal mask slows rank collapse (Wu et al. 2024; not in the paper), SAN, {} weights",
                                   weights),
                 "bidirectional SAN collapses earlier than causal",
                 fmt::format("first layer below {}: causal {}, bidirectional {} (over the 95% intervals of the means: "
                             "causal {}, bidirectional {}); after {} layers: causal {}, bidirectional {}",
                             kCollapsedResidual, depth_text(c_depth, L), depth_text(b_depth, L), range_text(c_range, L),
                             range_text(b_range, L), layers_text, c_text, b_text),
                 fmt::format("reproduced when the bidirectional SAN falls below {} at an earlier layer than the "
                             "causal one (or the causal one never does), over each layer's 95% interval of the mean; "
                             "not comparable when neither does, both do at the first layer, or the intervals cannot "
                             "order them",
                             kCollapsedResidual),
                 verdict, fmt::format("{} layers, same weights and batch", L)});
        f.key(fmt::format("{}, SAN after {} layers, causal", weights, layers_text), c_text);
        f.key(fmt::format("{}, SAN after {} layers, bidirectional", weights, layers_text), b_text);
        reading += fmt::format("Same {} weights, causal vs bidirectional mask: without skip connections (SAN) the "
                               "relative residual after {} layers is {} with the causal mask and {} without it; it "
                               "first falls below {} at {} causal and at {} bidirectional: {}. ",
                               weights, layers_text, c_text, b_text, kCollapsedResidual, depth_text(c_depth, L),
                               depth_text(b_depth, L), outcome);
        const std::vector<double> ct = curve(causal, weights, "transformer"), bt = curve(bidirectional, weights, "transformer");
        if (ct.size() == c.size() && bt.size() == c.size()) {
            f.key(fmt::format("{}, transformer after {} layers: causal / bidirectional", weights, L),
                  quote_number(ct.back()) + " / " + quote_number(bt.back()));
            reading += fmt::format("With skips and MLPs (transformer) after {} layers: {} causal, {} bidirectional. ", L,
                                   quote_number(ct.back()), quote_number(bt.back()));
        }
    }
    if (f.checks.empty())
        throw Error("no SAN curve of the same depth in both runs: nothing to compare (run both with the SAN variant)");
    f.reading = reading;
    return f;
}

}  // namespace rankscope
