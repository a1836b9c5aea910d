#pragma once
// What an experiment found, compared with what the paper claims (SPEC.md), as data: every check carries the claim, the
// paper's number or shape, the measured quantity quoted from the run, the criterion and a verdict COMPUTED from the
// measurement. The report's words come from here, never from canned text.
//
//   Findings f{"E1", "bert-base-cased (random init), 32 × 128 tokens"};
//   f.key("SAN relative residual after layer 1", 3e-7);
//   f.check({"E1", "Without skips the representation collapses",
//            "≈0 after 1 layer at init", fmt::format("{:.2g} after layer 1", r1), "< 0.05 after layer 1",
//            judge(true, r1 < 0.05), settings});
//   f.reading = ...;   // sentences built from the same numbers
//   write_findings(out, f, provenance);   // findings.json + verdicts.csv
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/provenance.hpp"
#include "rankscope/summary.hpp"

namespace rankscope {

enum class Verdict { Reproduced, NotReproduced, NotComparable };
// "reproduced", "not reproduced", "not comparable at these settings"
const char* verdict_name(Verdict verdict);
Verdict verdict_from_name(const std::string& name);  // throws Error on an unknown name

// comparable = the run's settings can show the claim at all (e.g. a 2-layer model cannot show collapse over 3–5
// layers); agrees = the criterion holds on the measurement.
Verdict judge(bool comparable, bool agrees);
// For claims about a trained model's level (accuracy): met → reproduced; not met at reduced settings (fewer epochs or
// data than the paper) → not comparable; not met at the paper's settings → not reproduced.
Verdict judge_at_scale(bool paper_scale, bool agrees);
// For a claim about a statistic known only to within an interval (summary.hpp: mean_interval, median_interval):
// reproduced when the criterion holds over the whole interval, not reproduced when it holds nowhere in it, and not
// comparable otherwise: the interval straddles the criterion's edge (these samples cannot decide) or is undefined
// (its NaN bounds make both comparisons false).
Verdict judge_interval(bool comparable, bool holds_everywhere, bool holds_nowhere);
inline constexpr double kVerdictLevel = 0.95;  // the level of every interval a verdict is judged on
// "0.0123 (95% interval 0.0110–0.0136)"; "0.0123 (1 value: no interval)" when `interval` is undefined.
std::string quote_with_interval(double value, const Interval& interval, int values);

struct Check {
    std::string experiment;  // "theory", "E1", ... "E6"
    std::string claim;       // the paper's claim, in SPEC.md's words
    std::string paper;       // the paper's number or shape
    std::string measured;    // this run's number(s)
    std::string criterion;   // the test applied to `measured`
    Verdict verdict = Verdict::NotComparable;
    std::string settings;    // the settings of this run that matter for the claim
    // What a "reproduced" rests on: "measurement" (the claim against this run's numbers), "computation" (a check of
    // rankscope's own arithmetic or of a closed form, e.g. the per-layer bound or E6's path count: it passes whenever
    // the code is right), "hypothesis" (rankscope's reading, not a claim the papers state). Reports count them apart.
    std::string basis = "measurement";
};

struct KeyNumber {
    std::string what, value;
};

struct Findings {
    std::string experiment;               // "E1"
    std::string subject;                  // "bert-base-cased (random init), 32 sequences × 128 tokens"
    std::vector<Check> checks;
    std::vector<KeyNumber> key_numbers;   // the cell's key-numbers table, formatted
    std::string reading;                  // sentences generated from the numbers above
    std::vector<std::string> notes;       // caveats: reduced settings, skipped parts, known deviations

    void check(Check c) { checks.push_back(std::move(c)); }
    void key(const std::string& what, const std::string& value) { key_numbers.push_back({what, value}); }
    void key(const std::string& what, double value, int significant = 3);
};

// "0.354", "3.5e-07", "nan": `significant` digits, fixed notation for 1e-3 ≤ |x| < 1e4.
std::string quote_number(double value, int significant = 3);
// "low–high" with as many significant digits beyond `significant` (up to 6) as the two need to differ in print
// (0.6116 and 0.6119 read "0.612–0.612" at 3); one value when they are equal.
std::string quote_range(double low, double high, int significant = 3);

// findings.json (everything) and verdicts.csv (experiment, claim, paper, measured, criterion, verdict, settings).
void write_findings(const std::filesystem::path& directory, const Findings& findings, const Provenance& provenance);
// An earlier run's findings.json and verdicts.csv in `directory`, removed by a run that writes none (paths count of
// one architecture after the built-in table: the old verdicts stood beside the new counts, read as theirs).
void remove_findings(const std::filesystem::path& directory);
Findings read_findings(const std::filesystem::path& file);  // findings.json; throws Error naming the file
// findings.json's content (without the provenance) as text, and back (Error naming `where` when malformed): the
// Python module's to_json() and pickling.
std::string findings_json_text(const Findings& findings);
Findings parse_findings_json(const std::string& text, const std::string& where);
// The tidy verdicts table of any number of findings (the columns of verdicts.csv).
CsvTable verdicts_table(const std::vector<Findings>& findings);

}  // namespace rankscope
