// Findings: each experiment's checks against the paper with computed verdicts (findings.hpp), read-only.
#include <tuple>

#include "bindings.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/provenance.hpp"

namespace rankscope::python {
namespace {

using namespace pybind11::literals;

// verdicts.csv's columns (all text).
py::dict csv_columns(const CsvTable& table) {
    py::dict columns;
    for (std::size_t c = 0; c < table.columns.size(); ++c) {
        py::list cells;
        for (const auto& row : table.rows) cells.append(row[c]);
        columns[table.columns[c].c_str()] = py::module_::import("numpy").attr("array")(cells, "dtype"_a = "object");
    }
    return columns;
}

}  // namespace

void bind_findings(py::module_& m) {
    py::class_<Check>(m, "Check", "One claim of the paper checked on this run; the verdict is computed from `measured`.")
        .def_readonly("experiment", &Check::experiment)
        .def_readonly("claim", &Check::claim)
        .def_readonly("paper", &Check::paper)
        .def_readonly("measured", &Check::measured)
        .def_readonly("criterion", &Check::criterion)
        .def_property_readonly("verdict", [](const Check& c) { return std::string(verdict_name(c.verdict)); },
                               "'reproduced', 'not reproduced' or 'not comparable at these settings'")
        .def_readonly("settings", &Check::settings)
        .def_readonly("basis", &Check::basis, "measurement, computation (rankscope's own arithmetic or a closed form) or "
                                              "hypothesis (rankscope's reading, not a stated claim)")
        .def("__repr__", [](const Check& c) { return "Check(" + c.claim + ": " + verdict_name(c.verdict) + ")"; })
        // By value (the README said so; it was identity): every field. Unhashable, as a mutable-looking value.
        .def("__eq__", [](const Check& a, const Check& b) {
            return std::tie(a.experiment, a.claim, a.paper, a.measured, a.criterion, a.verdict, a.settings, a.basis) ==
                   std::tie(b.experiment, b.claim, b.paper, b.measured, b.criterion, b.verdict, b.settings, b.basis);
        }, py::is_operator());

    py::class_<Findings>(m, "Findings", "What an experiment found, compared with what the paper claims (findings.json).")
        .def_readonly("experiment", &Findings::experiment)
        .def_readonly("subject", &Findings::subject)
        .def_readonly("checks", &Findings::checks)
        .def_property_readonly("key_numbers",
                               [](const Findings& f) {
                                   py::list list;
                                   for (const auto& k : f.key_numbers) list.append(py::make_tuple(k.what, k.value));
                                   return list;
                               },
                               "[(what, value)] as the report's key-numbers table")
        .def_readonly("reading", &Findings::reading)
        .def_readonly("notes", &Findings::notes)
        .def("to_json", &findings_json_text, "findings.json's content as JSON text (what read_findings reads)")
        .def(py::pickle([](const Findings& f) { return findings_json_text(f); },
                        [](const std::string& text) { return parse_findings_json(text, "a pickled Findings"); }))
        .def("__repr__", [](const Findings& f) {
            return "Findings(" + f.experiment + ", " + f.subject + ", " + std::to_string(f.checks.size()) + " checks)";
        })
        // By value, as findings.json holds them (read twice, pickled or copied: equal; it compared identity).
        .def("__eq__", [](const Findings& a, const Findings& b) { return findings_json_text(a) == findings_json_text(b); },
             py::is_operator());

    m.def(
        "read_findings", [](const std::string& path) { return read_findings(path); }, "path"_a, "A findings.json written by any rankscope command or reproduce cell.");
    m.def(
        "verdicts_table", [](const std::vector<Findings>& findings) { return csv_columns(verdicts_table(findings)); },
        "findings"_a, "verdicts.csv's columns for any number of findings.");
}

}  // namespace rankscope::python
