// rankscope reproduce — the paper's experiments that rankscope implements so far, one folder ("cell") each, plus a
// self-contained report.html. Each cell runs this same program as a subcommand, so every cell folder carries its
// own manifest.json with the exact command; a re-run skips cells whose manifest records the same command.
//
// Cells today: theory checks (§3), E6 path counts, E1 + E2 on the built-in BERT/ALBERT/XLNet configurations at
// random init. Not yet: E1/E2 on pretrained weights (needs a --model folder), E3–E5 (trained tasks).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/progress.hpp"

namespace rankscope::cli {
namespace {

struct ReproduceOptions {
    CommonOptions common;
    bool quick = false;
    std::vector<std::string> models;
};

struct Cell {
    std::string name, title, reading, paper;
    std::vector<std::string> arguments;  // after the program name; --out is appended
    std::vector<std::string> figures;
    std::vector<std::string> data;
};

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::string html_escape(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '&') out += "&amp;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

std::vector<Cell> plan(const ReproduceOptions& options) {
    const std::string seed = std::to_string(options.common.seed);
    std::vector<Cell> cells;
    cells.push_back({"theory", "Theory: doubly exponential collapse and the bounds (§3)",
                     "Pure self-attention loses rank within a few layers and never recovers; skip connections keep the "
                     "relative residual of order 0.1–1. The measured residual stays below the per-layer bound c·r³ in "
                     "every row above round-off.",
                     "Theorems 2.2/2.3 and Corollary 3.2: doubly exponential convergence without skips; skips stop it.",
                     {"theory", "--layers", options.quick ? "8" : "12", "--seeds", options.quick ? "2" : "5", "--seed", seed},
                     {"theory.svg", "theory_bounds.svg"},
                     {"theory.csv", "theory_summary.csv", "theory.json"}});
    cells.push_back({"e6_path_counts", "E6: how many paths of each length",
                     "With skips, a depth-L network with H heads has C(L,k)·H^k paths of length k; most paths are long, "
                     "yet the α-weighted (skip-ratio) distribution favours short ones.",
                     "BERT-base: mean path length 11.08 of 12.",
                     {"paths", "count", "--seed", seed},
                     {"path_counts.svg"},
                     {"path_counts.csv", "path_counts.json"}});
    std::vector<std::string> models = options.models;
    if (models.empty()) models = options.quick ? std::vector<std::string>{"bert-base-cased"}
                                               : std::vector<std::string>{"bert-base-cased", "albert-base-v2", "xlnet-base-cased"};
    for (const auto& model : models) {
        const bool builtin = !std::filesystem::exists(model);
        const std::string name = std::filesystem::path(model).filename().string();
        cells.push_back({"e1_" + name, "E1/E2: " + name + (builtin ? " (random init)" : ""),
                         "Removing the attention skip (SAN, SAN+MLP) collapses the representation within one or two "
                         "layers; with skips the relative residual stays high. Products of attention matrices along "
                         "paths lose rank exponentially in the path length.",
                         "Fig. 2: without skips ≈0 after 1 layer at init and after 3–5 pretrained; transformer 0.3–0.5. "
                         "E2: init reaches the float32 floor (~1e-6) by depth 4.",
                         {"model", "--model", model, "--weights", builtin ? "init" : "both", "--samples",
                          options.quick ? "8" : "32", "--tokens", options.quick ? "64" : "128", "--draws",
                          options.quick ? "20" : "100", "--seed", seed},
                         {"residual.svg", "paths.svg"},
                         {"residual.csv", "paths.csv"}});
    }
    return cells;
}

bool cell_is_done(const std::filesystem::path& directory, const std::vector<std::string>& arguments) {
    const auto manifest = directory / "manifest.json";
    if (!std::filesystem::exists(manifest)) return false;
    try {
        const auto json = nlohmann::json::parse(read_text(manifest));
        const auto argv = json.at("argv").get<std::vector<std::string>>();
        return std::vector<std::string>(argv.begin() + 1, argv.end()) == arguments;
    } catch (const std::exception&) {
        return false;
    }
}

std::string shell_quote(const std::string& word) {
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

void write_report(const std::filesystem::path& out, const std::vector<Cell>& cells,
                  const std::vector<std::pair<std::string, double>>& timings, const Provenance& provenance) {
    std::string html = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rankscope report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:Georgia,'DejaVu Serif',serif;max-width:980px;margin:2rem auto;padding:0 1.2rem;color:#222;line-height:1.5}
h1,h2{font-family:'Helvetica Neue',Helvetica,Arial,sans-serif;font-weight:600}
h1{font-size:1.9rem;margin-bottom:.2rem} h2{font-size:1.3rem;margin-top:2.4rem;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9rem} code{background:#f4f4f4;padding:0 .25em;border-radius:3px;font-size:.88em}
.figure svg{width:100%;height:auto;border:1px solid #eee;margin:.6rem 0}
.paper{background:#f7f7fb;border-left:3px solid #7570b3;padding:.4rem .8rem;font-size:.93rem}
table{border-collapse:collapse;font-size:.9rem;margin:.6rem 0} td,th{padding:.2rem .7rem;border-bottom:1px solid #eee;text-align:left}
a{color:#1b6e9e}
</style></head><body>
<h1>rankscope: rank collapse in attention networks</h1>
)";
    html += fmt::format("<p class=\"meta\">{} · command <code>{}</code> · seed {} · {} threads · started {}</p>\n",
                        html_escape(version_string()), html_escape(provenance.command), provenance.seed,
                        provenance.threads, provenance.started_at);
    html += "<table><tr><th>experiment</th><th>seconds</th><th>status</th></tr>\n";
    for (const auto& [name, seconds] : timings)
        html += fmt::format("<tr><td><a href=\"#{0}\">{0}</a></td><td>{1:.1f}</td><td>{2}</td></tr>\n", name,
                            seconds < 0 ? 0.0 : seconds, seconds < 0 ? "reused" : "ran");
    html += "</table>\n";
    for (const auto& cell : cells) {
        html += fmt::format("<h2 id=\"{}\">{}</h2>\n<p>{}</p>\n<p class=\"paper\">Paper: {}</p>\n", cell.name,
                            html_escape(cell.title), html_escape(cell.reading), html_escape(cell.paper));
        for (const auto& figure : cell.figures) {
            const auto path = out / cell.name / figure;
            if (!std::filesystem::exists(path)) continue;
            std::string svg = read_text(path);
            const auto start = svg.find("<svg");
            html += "<div class=\"figure\">" + (start == std::string::npos ? std::string() : svg.substr(start)) + "</div>\n";
        }
        html += "<p class=\"meta\">Data: ";
        for (const auto& file : cell.data)
            html += fmt::format("<a href=\"{0}/{1}\">{1}</a> · ", cell.name, file);
        html += fmt::format("<a href=\"{}/manifest.json\">manifest.json</a></p>\n", cell.name);
    }
    html += "</body></html>\n";
    write_file_atomically((out / "report.html").string(), html);
}

void run_reproduce(const ReproduceOptions& options) {
    Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out.empty() ? "out/reproduce" : options.common.out;
    std::filesystem::create_directories(out);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const auto cells = plan(options);
    std::vector<std::pair<std::string, double>> timings;
    Progress progress("reproduce", static_cast<long>(cells.size()));
    for (const auto& cell : cells) {
        progress.set_label("reproduce " + cell.name);
        const auto directory = out / cell.name;
        auto arguments = cell.arguments;
        arguments.insert(arguments.end(), {"--threads", std::to_string(provenance.threads), "--out", directory.string()});
        if (cell_is_done(directory, arguments)) {
            timings.emplace_back(cell.name, -1.0);
            progress.advance();
            continue;
        }
        std::string command = shell_quote(self);
        for (const auto& argument : arguments) command += " " + shell_quote(argument);
        command += " > " + shell_quote((out / (cell.name + ".log")).string()) + " 2>&1";
        const auto start = std::chrono::steady_clock::now();
        if (std::system(command.c_str()) != 0)
            throw Error("experiment " + cell.name + " failed; see its log", (out / (cell.name + ".log")).string());
        timings.emplace_back(cell.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        progress.advance();
    }
    write_report(out, cells, timings, provenance);
    nlohmann::json cell_list = nlohmann::json::array();
    for (const auto& [name, seconds] : timings) cell_list.push_back({{"cell", name}, {"seconds", seconds}, {"reused", seconds < 0}});
    write_manifest(out, provenance, {{"cells", cell_list}, {"outputs", {"report.html"}}});
    fmt::print("{:<28} {:>9}\n", "experiment", "seconds");
    for (const auto& [name, seconds] : timings)
        fmt::print("{:<28} {:>9}\n", name, seconds < 0 ? std::string("reused") : fmt::format("{:.1f}", seconds));
    fmt::print("report: {}\n", (out / "report.html").string());
}

}  // namespace

std::function<void()> setup_reproduce(CLI::App& command) {
    auto options = std::make_shared<ReproduceOptions>();
    command.add_flag("--quick", options->quick, "Small settings (about a minute): 8-layer theory, one model, 8 samples");
    command.add_option("--model", options->models,
                       "Hugging Face folders (pretrained + init panels) or built-in configurations for E1/E2");
    add_common_options(command, options->common, false);
    return [options] { run_reproduce(*options); };
}

}  // namespace rankscope::cli
