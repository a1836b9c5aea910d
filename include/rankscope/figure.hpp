#pragma once
// Figures drawn by gnuplot from the CSV files a run wrote. Each figure gets a script `<stem>.gp` beside it (so a user
// can restyle and re-run it: `gnuplot <stem>.gp`) and is rendered to <stem>.svg and <stem>.png (and <stem>.pdf).
#include <filesystem>
#include <string>
#include <vector>

namespace rankscope {

struct Figure {
    std::string stem;     // file name without extension
    std::string title;
    std::string body;     // gnuplot commands after the terminal/output lines: set ..., plot ...
};
// `text` as a gnuplot single-quoted string literal, quotes included: ' doubled, control characters (a newline would end
// the command and start another, e.g. system(...)) replaced by spaces. Every piece of user text in a figure body (a
// model folder's name, a label) goes through it.
std::string gnuplot_quote(const std::string& text);

// Writes the script and runs gnuplot. Returns the files produced; warns on stderr (does not throw) when gnuplot is
// missing or fails, since the CSV data are the primary result.
std::vector<std::string> render_figure(const std::filesystem::path& directory, const Figure& figure,
                                       const std::string& provenance_comment);

}  // namespace rankscope
