#include "rankscope/findings.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {

const char* verdict_name(Verdict verdict) {
    switch (verdict) {
        case Verdict::Reproduced: return "reproduced";
        case Verdict::NotReproduced: return "not reproduced";
        case Verdict::NotComparable: return "not comparable at these settings";
    }
    return "?";
}

Verdict verdict_from_name(const std::string& name) {
    for (Verdict v : {Verdict::Reproduced, Verdict::NotReproduced, Verdict::NotComparable})
        if (name == verdict_name(v)) return v;
    throw Error("unknown verdict '" + name + "'");
}

Verdict judge(bool comparable, bool agrees) {
    if (!comparable) return Verdict::NotComparable;
    return agrees ? Verdict::Reproduced : Verdict::NotReproduced;
}

Verdict judge_at_scale(bool paper_scale, bool agrees) {
    if (agrees) return Verdict::Reproduced;
    return paper_scale ? Verdict::NotReproduced : Verdict::NotComparable;
}

Verdict judge_interval(bool comparable, bool holds_everywhere, bool holds_nowhere) {
    if (!comparable || holds_everywhere == holds_nowhere) return Verdict::NotComparable;
    return holds_everywhere ? Verdict::Reproduced : Verdict::NotReproduced;
}

std::string quote_with_interval(double value, const Interval& interval, int values) {
    if (!interval.defined())
        return fmt::format("{} ({} value{}: no interval)", quote_number(value), values, values == 1 ? "" : "s");
    return fmt::format("{} ({:g}% interval {})", quote_number(value), 100 * kVerdictLevel,
                       quote_range(interval.low, interval.high));
}

std::string quote_range(double low, double high, int significant) {
    if (low == high) return quote_number(low, significant);
    int digits = significant;
    while (digits < 6 && quote_number(low, digits) == quote_number(high, digits)) ++digits;
    return quote_number(low, digits) + "–" + quote_number(high, digits);
}

std::string quote_number(double value, int significant) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    if (value == 0) return "0";
    const double magnitude = std::fabs(value);
    if (magnitude >= 1e-3 && magnitude < 1e4) {
        const int digits_before = magnitude >= 1 ? static_cast<int>(std::floor(std::log10(magnitude))) + 1 : 0;
        int decimals = significant - digits_before;
        if (magnitude < 1) decimals = significant - 1 - static_cast<int>(std::floor(std::log10(magnitude)));
        // Rounding up to the next power of ten gains a digit: 0.99996 is "1.00" as 1.0 is, not "1.000" (one table
        // row read "1.000; 1.00"), 9.9996 is "10.0".
        const double next_power_scaled = std::pow(10.0, std::floor(std::log10(magnitude)) + 1 + decimals);
        if (decimals > 0 && std::round(magnitude * std::pow(10.0, decimals)) >= next_power_scaled) --decimals;
        return fmt::format("{:.{}f}", value, std::max(0, decimals));
    }
    return fmt::format("{:.{}e}", value, std::max(0, significant - 1));
}

void Findings::key(const std::string& what, double value, int significant) {
    key_numbers.push_back({what, quote_number(value, significant)});
}

namespace {

nlohmann::json to_json(const Check& c) {
    return {{"experiment", c.experiment}, {"claim", c.claim},     {"paper", c.paper},
            {"measured", c.measured},     {"criterion", c.criterion}, {"verdict", verdict_name(c.verdict)},
            {"settings", c.settings}, {"basis", c.basis}};
}

}  // namespace

CsvTable verdicts_table(const std::vector<Findings>& findings) {
    CsvTable table;
    table.columns = {"experiment", "subject", "claim", "paper", "measured", "criterion", "verdict", "settings", "basis"};
    for (const auto& f : findings)
        for (const auto& c : f.checks)
            table.add({c.experiment, f.subject, c.claim, c.paper, c.measured, c.criterion, verdict_name(c.verdict), c.settings,
                       c.basis});
    return table;
}

namespace {

nlohmann::json findings_document(const Findings& findings) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : findings.checks) checks.push_back(to_json(c));
    nlohmann::json numbers = nlohmann::json::array();
    for (const auto& k : findings.key_numbers) numbers.push_back({{"what", k.what}, {"value", k.value}});
    return {{"experiment", findings.experiment}, {"subject", findings.subject}, {"checks", checks},
            {"key_numbers", numbers},           {"reading", findings.reading}, {"notes", findings.notes}};
}

Findings findings_from_document(const nlohmann::json& document, const std::string& where) {
    try {
        Findings f;
        f.experiment = document.at("experiment").get<std::string>();
        f.subject = document.at("subject").get<std::string>();
        for (const auto& c : document.at("checks"))
            f.checks.push_back({c.at("experiment").get<std::string>(), c.at("claim").get<std::string>(),
                                c.at("paper").get<std::string>(), c.at("measured").get<std::string>(),
                                c.at("criterion").get<std::string>(), verdict_from_name(c.at("verdict").get<std::string>()),
                                c.at("settings").get<std::string>(), c.value("basis", std::string("measurement"))});
        for (const auto& k : document.at("key_numbers"))
            f.key_numbers.push_back({k.at("what").get<std::string>(), k.at("value").get<std::string>()});
        f.reading = document.at("reading").get<std::string>();
        f.notes = document.at("notes").get<std::vector<std::string>>();
        return f;
    } catch (const Error& error) {
        throw Error(error.what(), where);
    } catch (const std::exception& error) {
        throw Error("malformed findings: " + json_error_reason(error), where);
    }
}

}  // namespace

void write_findings(const std::filesystem::path& directory, const Findings& findings, const Provenance& provenance) {
    write_json_atomically(directory / "findings.json", findings_document(findings), provenance);
    write_csv_atomically(directory / "verdicts.csv", verdicts_table({findings}), provenance);
}

std::string findings_json_text(const Findings& findings) { return findings_document(findings).dump(2); }

Findings parse_findings_json(const std::string& text, const std::string& where) {
    return findings_from_document(parse_json_text(text, where), where);
}

void remove_findings(const std::filesystem::path& directory) {
    std::error_code ignored;
    std::filesystem::remove(directory / "findings.json", ignored);
    std::filesystem::remove(directory / "verdicts.csv", ignored);
}

Findings read_findings(const std::filesystem::path& file) {
    return findings_from_document(read_json_file(file.string(), "the findings"), file.string());
}

}  // namespace rankscope
