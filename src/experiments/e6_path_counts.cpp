#include "rankscope/e6_path_counts.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace rankscope {

std::vector<ArchitecturePaths> path_count_tables(const std::vector<NamedArchitecture>& architectures) {
    std::vector<ArchitecturePaths> tables;
    for (const auto& a : architectures) {
        ArchitecturePaths t{a, path_length_distribution(a.layers, a.heads), 0};
        t.mean_length = mean_path_length(t.rows, false);
        tables.push_back(std::move(t));
    }
    return tables;
}

ArchitecturePaths custom_path_counts(int layers, int heads, const std::vector<double>& alpha) {
    ArchitecturePaths t{{"custom", layers, heads}, path_length_distribution(layers, heads, alpha), 0};
    t.mean_length = mean_path_length(t.rows, false);
    return t;
}

Table path_counts_table(const std::vector<ArchitecturePaths>& tables, bool with_alpha) {
    Table table({{"architecture", Table::Text}, {"layers", Table::Integer}, {"heads", Table::Integer},
                 {"length", Table::Integer}, {"count", Table::Real}, {"share", Table::Real}, {"alpha_share", Table::Real}});
    for (const auto& t : tables)
        for (const auto& r : t.rows)
            table.add({t.architecture.name, t.architecture.layers, t.architecture.heads, r.length, r.count, r.share,
                       with_alpha ? Table::Cell(r.alpha_share) : Table::Cell()});
    return table;
}

namespace {

// The most common path length, "11", or the two tied ones, "11 and 12". N(k) = C(L,k)·H^k rises while
// N(k+1)/N(k) = (L − k)·H/(k + 1) > 1, so at most two neighbouring lengths share the largest count, exactly when
// (L − k)·H = k + 1: BERT-base's 11 and 12 (12·12^11 = 12^12), GPT-3's 95 and 96. Decided in integers, since the
// two counts as doubles may round apart.
std::string most_common_lengths(int layers, int heads, int mode) {
    const auto tie = [&](int k) { return static_cast<long long>(layers - k) * heads == k + 1; };
    if (mode < layers && tie(mode)) return fmt::format("{} and {}", mode, mode + 1);
    if (mode > 0 && tie(mode - 1)) return fmt::format("{} and {}", mode - 1, mode);
    return std::to_string(mode);
}

}  // namespace

Findings path_count_findings(const std::vector<ArchitecturePaths>& tables) {
    Findings f;
    f.experiment = "E6";
    f.subject = fmt::format("path-length tables of {} architectures", tables.size());
    constexpr double kPaperBertBase = 11.08;  // SPEC.md §3: "mean length LH/(H+1); BERT-base 11.08"
    std::string reading;
    for (const auto& t : tables) {
        double total = 0, mode_share = 0;
        int mode = 0;
        for (const auto& r : t.rows) {
            total += r.count;
            if (r.share > mode_share) mode_share = r.share, mode = r.length;
        }
        const std::string most_common = most_common_lengths(t.architecture.layers, t.architecture.heads, mode);
        f.key(fmt::format("{} (L = {}, H = {}): mean path length; most common length", t.architecture.name,
                          t.architecture.layers, t.architecture.heads),
              fmt::format("{}; {} ({} of the paths{})", quote_number(t.mean_length, 4), most_common, quote_number(mode_share),
                          most_common.find(' ') == std::string::npos ? "" : " each"));
        if (std::string(t.architecture.name) == "BERT-base") {
            f.check({"E6", "With skips, paths of length k number C(L,k)·H^k; their mean length is LH/(H+1)",
                     "BERT-base: mean path length 11.08 of 12", fmt::format("{} of {} ({} paths in all)",
                                                                            quote_number(t.mean_length, 4), t.architecture.layers,
                                                                            quote_number(total)),
                     "|measured − 11.08| < 0.005", judge(true, std::fabs(t.mean_length - kPaperBertBase) < 0.005),
                     fmt::format("L = {}, H = {}", t.architecture.layers, t.architecture.heads), "computation"});
            reading += fmt::format("Counted without weights, BERT-base's paths have mean length {} of {}: most paths are long "
                                   "(the most common length{} {}, with {} of all paths{}). ",
                                   quote_number(t.mean_length, 4), t.architecture.layers,
                                   most_common.find(' ') == std::string::npos ? " is" : "s are", most_common,
                                   quote_number(mode_share), most_common.find(' ') == std::string::npos ? "" : " each");
        }
    }
    reading += "The α-weighted distribution needs a measured skip ratio α_l per layer: it is computed, and judged, in the E1 "
               "cells (skip_ratio.csv), on the models run there.";
    f.notes.push_back("No weights of these architectures are available offline, so α is not measured for them here.");
    f.reading = reading;
    return f;
}

}  // namespace rankscope
