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
    std::string body;     // gnuplot commands after the terminal/output lines and the style preamble: set ..., plot ...
    // Canvas size in SVG user units (the SVG keeps a viewBox and no fixed size, so it scales to its container); the PNG
    // is drawn at twice this size, the PDF at 1/100 inch per unit. Text is kFigureFontSize units high in all three, so
    // a builder that knows its panels sizes the canvas to them (include/rankscope/plots.hpp).
    int width = 900;
    int height = 560;
};

// Font size of every figure, in canvas units (the SVG's px): a one-panel figure (800 units wide) shown 480 px wide keeps
// 9.6 px text; its PDF, 8 inches wide, has 11.5 pt text (matplotlib's default proportions: 10 pt on 6.4 inches).
inline constexpr int kFigureFontSize = 16;

// The gnuplot commands every figure starts with (after `reset`, before its body): the CSV layout (',' separated, '#'
// comment lines, one header row read as column names, so that bodies select columns by name with column('name') and
// strcol('name')); one colour-blind-safe palette (Okabe-Ito) as linetypes 1-8, each with its own point type; a light
// grid; thicker lines. Linetype N is the Nth series of every figure.
std::string figure_style_preamble();

// The i-th colour of the palette (i from 0, cycling), as '#RRGGBB'.
const std::string& figure_palette_colour(int i);

// The <svg ...>...</svg> element of a gnuplot SVG file (XML declaration dropped), with every id="..." and every
// reference to one (url(#...), href="#...", xlink:href="#...") prefixed by `id_prefix`, so that several figures
// inlined in one HTML page have unique element ids. `id_prefix` must be a valid start of an XML name
// ([A-Za-z_][A-Za-z0-9_-]*); throws rankscope::Error otherwise, or when `svg_text` has no <svg element.
std::string inline_svg(const std::string& svg_text, const std::string& id_prefix);
// `text` as XML/HTML text: & < > escaped, and with `quotes` also " and ' (for attribute values and HTML; without,
// quotes stay as written, as gnuplot writes its own SVG text).
std::string xml_escape(const std::string& text, bool quotes);

// The narrowest width in CSS px at which the figure's text stays legible (kFigureFontSize units shown at >= 9.6 px):
// 9.6 / kFigureFontSize x the viewBox width. A one-panel figure (800 units) needs 480 px; wider ones should sit in a
// container that scrolls, e.g. <div style="overflow-x:auto"><div style="min-width:NNNpx">SVG</div></div>. 0 when the
// SVG has no viewBox.
int svg_min_display_width(const std::string& svg_text);
// The figure's title as render_figure writes it into the SVG's <title> (entities decoded), or "" when the SVG has
// gnuplot's own "Gnuplot" or no title.
std::string svg_title(const std::string& svg_text);
// `text` as a gnuplot single-quoted string literal, quotes included: ' doubled, control characters (a newline would end
// the command and start another, e.g. system(...)) replaced by spaces. Every piece of user text in a figure body (a
// model folder's name, a label) goes through it.
std::string gnuplot_quote(const std::string& text);
// `text` drawn as it is by gnuplot's enhanced text (every figure's terminal): the characters that are markup there
// (_ ^ @ & ~ { }, and the backslash, which starts an escape or an octal code) each preceded by a backslash, for a
// single-quoted string (gnuplot_quote), the whole in braces: the cairo terminals (PNG, PDF) parse enhanced text only
// when a string holds a markup character, and drew an escaped backslash as two without them. Figure titles go
// through it: they hold model names, and a folder "bert_base" was drawn as "bert" with the subscript "b".
std::string enhanced_text_literal(const std::string& text);

// Writes the script and runs gnuplot. Returns the files produced; warns on stderr (does not throw) when gnuplot is
// missing or fails, since the CSV data are the primary result.
std::vector<std::string> render_figure(const std::filesystem::path& directory, const Figure& figure,
                                       const std::string& provenance_comment);

}  // namespace rankscope
