#include "rankscope/figure.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/process.hpp"
#include "rankscope/warnings.hpp"
#include "report/pdf_information.hpp"

namespace rankscope {

std::string gnuplot_quote(const std::string& text) {
    std::string quoted = "'";
    for (char c : control_characters_as_spaces(text)) {
        if (c == '\'') quoted += "''";
        else quoted += c;
    }
    return quoted + "'";
}

std::string enhanced_text_literal(const std::string& text) {
    std::string literal = "{";
    for (char c : text) {
        if (c != '\0' && std::strchr("_^@&~{}\\", c) != nullptr) literal += '\\';
        literal += c;
    }
    return literal + "}";
}

namespace {

struct Style {
    const char* colour;
    int point_type;
};
// Okabe & Ito's colour-blind-safe palette, the yellow (hard to see on white) late; each colour with its own point
// type: filled circle, square, triangle, diamond, inverted triangle, then open ones.
const Style kStyles[] = {{"#0072B2", 7}, {"#D55E00", 5}, {"#009E73", 9},  {"#CC79A7", 13},
                         {"#E69F00", 11}, {"#56B4E9", 6}, {"#F0E442", 4}, {"#000000", 8}};

}  // namespace

const std::string& figure_palette_colour(int i) {
    static const std::vector<std::string> colours = [] {
        std::vector<std::string> c;
        for (const auto& style : kStyles) c.emplace_back(style.colour);
        return c;
    }();
    const int n = static_cast<int>(colours.size());
    return colours[static_cast<std::size_t>(((i % n) + n) % n)];
}

std::string figure_style_preamble() {
    std::string preamble =
        "set datafile separator ','\nset datafile commentschars '#'\nset datafile columnheaders\n"
        "set datafile missing NaN\nset encoding utf8\n";
    int n = 0;
    // ps 0.8: markers 9.6 units across, 0.6 of the font (matplotlib's default proportions: 6 pt markers, 10 pt text).
    for (const auto& style : kStyles)
        preamble += fmt::format("set linetype {} lc rgb '{}' lw 2 pt {} ps 0.8 dt solid\n", ++n, style.colour,
                                style.point_type);
    // Series 9-16: the same colours, dashed, with other point types (open ones, plus, cross, star), so that up to 16
    // series keep a distinct line and marker.
    const int second_round_points[] = {12, 10, 1, 2, 3, 14, 15, 4};
    for (int i = 0; i < n; ++i)
        preamble += fmt::format("set linetype {} lc rgb '{}' lw 2 pt {} ps 0.8 dt 2\n", n + i + 1, kStyles[i].colour,
                                second_round_points[i]);
    preamble += fmt::format("set linetype cycle {}\n", 2 * n);
    preamble += "set grid lc rgb '#dddddd' lw 1 dt solid\nset border lw 1\nset tics nomirror out scale 0.6\n"
                "set style fill transparent solid 0.18 noborder\nset key noautotitle\n";
    return preamble;
}

namespace {

// The provenance comment ("# produced by: ...\n# command: ...") as plain lines, control characters as spaces.
std::string provenance_text(const std::string& comment) {
    std::string text;
    std::size_t at = 0;
    while (at < comment.size()) {
        std::size_t end = comment.find('\n', at);
        if (end == std::string::npos) end = comment.size();
        const std::size_t start = std::min(end, comment.compare(at, 2, "# ") == 0 ? at + 2 : at);
        if (end > start) {
            if (!text.empty()) text += '\n';
            text += control_characters_as_spaces(comment.substr(start, end - start));
        }
        at = end + 1;
    }
    return text;
}

constexpr const char* kGnuplotSvgTitle = "<title>Gnuplot</title>";

// The run's provenance inside the figure itself, so that a figure copied into a paper's folder still says which command,
// seed and version drew it: the SVG's <desc> (gnuplot's "Produced by GNUPLOT ..." kept after it), a PNG iTXt chunk
// "Comment" (UTF-8) after IHDR, and the PDF's document information (pdf_information.hpp). The SVG's <title> (gnuplot
// writes "Gnuplot") becomes the figure's title: a browser's tooltip and a screen reader's name for it, and the
// report's caption (svg_title).
void stamp_provenance(const std::filesystem::path& file, const std::string& extension, const std::string& text,
                      const std::string& title) {
    if (text.empty() && (extension != "svg" || title.empty())) return;
    std::string bytes = read_file_limited(file.string(), kNoSizeLimit, "figure");
    if (extension == "svg") {
        const std::size_t gnuplot_title = bytes.find(kGnuplotSvgTitle);
        if (!title.empty() && gnuplot_title != std::string::npos)
            bytes.replace(gnuplot_title, std::string(kGnuplotSvgTitle).size(),
                          "<title>" + xml_escape(control_characters_as_spaces(title), false) + "</title>");
        const std::size_t desc = bytes.find("<desc>");
        if (!text.empty() && desc != std::string::npos) bytes.insert(desc + 6, xml_escape(text, false) + "\n");
    } else if (extension == "png") {
        constexpr std::size_t kSignature = 8, kIhdrEnd = 8 + 8 + 13 + 4;
        if (bytes.size() < kIhdrEnd || bytes.compare(kSignature + 4, 4, "IHDR") != 0) return;
        // iTXt: keyword, NUL, compression flag 0, method 0, empty language tag and translated keyword (NUL each), text.
        const std::string data = std::string("Comment") + '\0' + '\0' + '\0' + '\0' + '\0' + text;
        const std::string type_and_data = "iTXt" + data;
        const auto crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(type_and_data.data()),
                               static_cast<uInt>(type_and_data.size()));
        bytes.insert(kIhdrEnd, big_endian(data.size(), 4) + type_and_data + big_endian(crc, 4));
    } else if (extension == "pdf") {
        std::string creator = text.substr(0, text.find('\n'));  // "produced by: rankscope 0.1.0 (git ...)"
        if (creator.rfind("produced by: ", 0) == 0) creator = creator.substr(13);
        bytes = pdf_with_document_information(std::move(bytes), creator, text);
    } else {
        return;
    }
    write_file_atomically(file.string(), bytes);
}

}  // namespace

std::vector<std::string> render_figure(const std::filesystem::path& directory, const Figure& figure,
                                       const std::string& provenance_comment) {
    std::string script = provenance_comment;
    // `gnuplot <stem>.gp` writes <stem>.svg etc.; rankscope passes -e "rankscope_suffix='.tmp-PID'" so that gnuplot
    // writes temporary names, renamed into place once gnuplot has succeeded (no half-written figure under the real name).
    // The title holds a model folder's name, which may hold a newline: in this comment line it would end the comment
    // and start a command ("!touch x" runs a shell).
    script += fmt::format("# {} — re-run with: gnuplot {}.gp\n# Data are selected by CSV column name (column('name'), "
                          "strcol('name')), never by position.\n"
                          "if (!exists(\"rankscope_suffix\")) rankscope_suffix = ''\n",
                          control_characters_as_spaces(figure.title), figure.stem);
    // The cairo terminals scale every font (also those a body sets, e.g. ',23') by `fontscale`, and draw a font of
    // size s at 4/3 s (measured: 16 at fontscale 0.72 is 15.36 pt in the PDF, not 11.52; 'MobileBERT' is as wide in
    // a 1600-pixel PNG at 16 and fontscale 1.5 as in the 800-unit SVG at 16 shown 1600 px wide, 183 px). The PNG is
    // drawn at twice the canvas size: fontscale 2 * 3/4. The PDF has 1/100 inch per canvas unit and 1/72 inch per
    // point: 0.72 * 3/4.
    constexpr double kPngFontScale = 1.5, kPdfFontScale = 0.54;
    // Lines and points to the SVG's sizes too (the SVG has no scale options: its lines are lw units wide, its points
    // 6 * ps units in radius at a 16-unit font). Measured on one line of lw 2 and one filled circle of ps 1.1, in
    // canvas units: the PNG's line at linewidth 2 is 2.0 wide (the SVG's 2), its circle at pointscale 4 is 14.5
    // across (the SVG's 14.0, ink measured in Chromium at 1600 px), hence 3.85; the PDF's line at linewidth 1 is 1 pt,
    // 1.39 units, and its circle at pointscale 1.44 is 13.2 across plus its outline, 13.9.
    constexpr double kPngPointScale = 3.85, kPdfLineScale = 1.44, kPdfPointScale = 1.44;
    // The SVG keeps gnuplot's viewBox and no fixed width/height ("dynamic"): it scales to its container. The PNG is
    // drawn at twice the canvas size, the PDF at 1/100 inch per canvas unit, so all three have the same proportions.
    const int font = kFigureFontSize;
    const std::string terminals[] = {
        fmt::format("svg size {},{} dynamic enhanced font 'Helvetica,{}' background '#ffffff'", figure.width,
                    figure.height, font),
        fmt::format("pngcairo size {},{} enhanced font 'Helvetica,{}' fontscale {} linewidth 2 pointscale {} "
                    "background '#ffffff'",
                    2 * figure.width, 2 * figure.height, font, kPngFontScale, kPngPointScale),
        fmt::format("pdfcairo size {:.2f}in,{:.2f}in enhanced font 'Helvetica,{}' fontscale {} linewidth {} pointscale {}",
                    figure.width / 100.0, figure.height / 100.0, font, kPdfFontScale, kPdfLineScale, kPdfPointScale)};
    const struct {
        const std::string& terminal;
        const char* extension;
    } outputs[] = {{terminals[0], "svg"}, {terminals[1], "png"}, {terminals[2], "pdf"}};
    // Each terminal starts from `reset` (the body's settings, e.g. a log scale, must not leak into the next output).
    for (const auto& output : outputs)
        script += fmt::format("\n# ---- {}\nreset\nset terminal {}\nset output '{}.{}'.rankscope_suffix\n{}{}\nunset output\n",
                              output.extension, output.terminal, figure.stem, output.extension, figure_style_preamble(),
                              figure.body);
    write_file_atomically((directory / (figure.stem + ".gp")).string(), script);
    const std::string suffix = ".tmp-" + std::to_string(::getpid());
    const auto log = directory / (figure.stem + ".gnuplot.log");
    ProcessOptions options;
    options.working_directory = directory;
    options.stderr_file = log;
    options.search_path = true;
    std::vector<std::string> produced;
    // On failure the temporaries go, and so do figures of an earlier run under the final names: the CSV beside them
    // has just been rewritten, so they would show other data.
    auto remove_temporaries = [&] {
        std::error_code ignored;
        for (const auto& output : outputs) {
            std::filesystem::remove(directory / (figure.stem + "." + output.extension + suffix), ignored);
            std::filesystem::remove(directory / (figure.stem + "." + output.extension), ignored);
        }
    };
    ProcessResult result;
    try {
        result = run_process({"gnuplot", "-e", "rankscope_suffix='" + suffix + "'", figure.stem + ".gp"}, options);
    } catch (const Interrupted&) {
        remove_temporaries();
        std::error_code ignored;
        std::filesystem::remove(log, ignored);  // what an interrupted gnuplot said (nothing, mostly) explains nothing
        throw;
    } catch (const Error& error) {
        remove_temporaries();
        std::error_code ignored;
        if (std::filesystem::file_size(log, ignored) == 0) std::filesystem::remove(log, ignored);  // gnuplot never ran
        warn(fmt::format("gnuplot could not draw {}: {}", figure.stem, error.what()));
        return produced;
    }
    if (!result.ok()) {
        remove_temporaries();
        warn(fmt::format("gnuplot could not draw {}: {} (see {})", figure.stem, result.describe(), log.string()));
        return produced;
    }
    std::filesystem::remove(log);
    for (const auto& output : outputs) {
        const auto temporary = directory / (figure.stem + "." + output.extension + suffix);
        const auto final_name = directory / (figure.stem + "." + output.extension);
        std::error_code ec;
        if (!std::filesystem::exists(temporary) || std::filesystem::file_size(temporary, ec) == 0 || ec) {
            std::filesystem::remove(temporary, ec);
            warn(fmt::format("gnuplot wrote no {} for {}", output.extension, figure.stem));
            continue;
        }
        stamp_provenance(temporary, output.extension, provenance_text(provenance_comment), figure.title);
        std::filesystem::rename(temporary, final_name, ec);
        if (ec) throw Error("cannot rename into place: " + ec.message(), final_name.string());
        produced.push_back(figure.stem + "." + output.extension);
    }
    return produced;
}

namespace {

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':'; }

// Prefixes the fragment of every "url(#name" in `value`.
std::string prefix_urls(const std::string& value, const std::string& prefix) {
    std::string result;
    std::size_t at = 0;
    for (std::size_t hit; (hit = value.find("url(#", at)) != std::string::npos; at = hit + 5)
        result += value.substr(at, hit + 5 - at) + prefix;
    return result + value.substr(at);
}

}  // namespace

std::string xml_escape(const std::string& text, bool quotes) {
    std::string escaped;
    for (char c : text) {
        if (c == '&') escaped += "&amp;";
        else if (c == '<') escaped += "&lt;";
        else if (c == '>') escaped += "&gt;";
        else if (quotes && c == '"') escaped += "&quot;";
        else if (quotes && c == '\'') escaped += "&#x27;";
        else escaped += c;
    }
    return escaped;
}

std::string svg_title(const std::string& svg_text) {
    const std::size_t start = svg_text.find("<title>"), svg = svg_text.find("<svg");
    if (start == std::string::npos || svg == std::string::npos || start < svg) return {};
    const std::size_t end = svg_text.find("</title>", start);
    if (end == std::string::npos) return {};
    const std::string escaped = svg_text.substr(start + 7, end - start - 7);
    if (escaped == "Gnuplot") return {};  // gnuplot's own: a figure drawn before titles were written
    std::string text;
    for (std::size_t i = 0; i < escaped.size();) {
        bool replaced = false;
        for (const auto& [entity, character] : {std::pair{"&amp;", '&'}, std::pair{"&lt;", '<'}, std::pair{"&gt;", '>'},
                                                std::pair{"&quot;", '"'}, std::pair{"&apos;", '\''}})
            if (escaped.compare(i, std::strlen(entity), entity) == 0) {
                text += character;
                i += std::strlen(entity);
                replaced = true;
                break;
            }
        if (!replaced) text += escaped[i++];
    }
    return text;
}

int svg_min_display_width(const std::string& svg_text) {
    const std::size_t at = svg_text.find("viewBox=");
    if (at == std::string::npos || at + 9 >= svg_text.size()) return 0;
    double x = 0, y = 0, width = 0;
    if (std::sscanf(svg_text.c_str() + at + 9, "%lf %lf %lf", &x, &y, &width) != 3 || !(width > 0)) return 0;
    return static_cast<int>(std::lround(9.6 * width / kFigureFontSize));
}

std::string inline_svg(const std::string& svg_text, const std::string& id_prefix) {
    if (id_prefix.empty() || !is_name_start(id_prefix[0]) ||
        !std::all_of(id_prefix.begin(), id_prefix.end(), [](char c) { return is_name_char(c) && c != ':' && c != '.'; }))
        throw Error("an SVG id prefix must match [A-Za-z_][A-Za-z0-9_-]*: '" + id_prefix + "'");
    const std::size_t start = svg_text.find("<svg");
    if (start == std::string::npos) throw Error("not an SVG document (no <svg element)");
    std::size_t end = svg_text.rfind("</svg>");
    end = end == std::string::npos || end < start ? svg_text.size() : end + 6;
    const std::string svg = svg_text.substr(start, end - start);
    // A small scanner over the markup: inside a tag, attribute values are rewritten (id, *href="#...", url(#...));
    // text, comments and CDATA are copied unchanged.
    std::string out;
    out.reserve(svg.size() + svg.size() / 8);
    std::size_t i = 0;
    while (i < svg.size()) {
        if (svg[i] != '<') {
            const std::size_t next = svg.find('<', i);
            out += svg.substr(i, next == std::string::npos ? std::string::npos : next - i);
            i = next == std::string::npos ? svg.size() : next;
            continue;
        }
        for (const char* skip_to : {"<!--", "<![CDATA[", "<?"}) {
            const std::string opening = skip_to;
            if (svg.compare(i, opening.size(), opening) == 0) {
                const std::string closing = opening == "<!--" ? "-->" : opening == "<?" ? "?>" : "]]>";
                const std::size_t close = svg.find(closing, i);
                const std::size_t stop = close == std::string::npos ? svg.size() : close + closing.size();
                out += svg.substr(i, stop - i);
                i = stop;
                goto next_markup;
            }
        }
        {
            // A tag: copy its name, then attribute by attribute.
            std::size_t j = i + 1;
            while (j < svg.size() && svg[j] != '>' && !std::isspace(static_cast<unsigned char>(svg[j])) && svg[j] != '/') ++j;
            out += svg.substr(i, j - i);
            while (j < svg.size() && svg[j] != '>') {
                if (std::isspace(static_cast<unsigned char>(svg[j])) || svg[j] == '/') {
                    out += svg[j++];
                    continue;
                }
                std::size_t name_end = j;
                while (name_end < svg.size() && svg[name_end] != '=' && svg[name_end] != '>' &&
                       !std::isspace(static_cast<unsigned char>(svg[name_end])))
                    ++name_end;
                const std::string name = svg.substr(j, name_end - j);
                std::size_t k = name_end;
                while (k < svg.size() && std::isspace(static_cast<unsigned char>(svg[k]))) ++k;
                if (k >= svg.size() || svg[k] != '=') {  // an attribute without a value
                    out += name;
                    j = name_end;
                    continue;
                }
                ++k;
                while (k < svg.size() && std::isspace(static_cast<unsigned char>(svg[k]))) ++k;
                if (k >= svg.size() || (svg[k] != '"' && svg[k] != '\'')) throw Error("malformed SVG attribute " + name);
                const char quote = svg[k];
                const std::size_t value_end = svg.find(quote, k + 1);
                if (value_end == std::string::npos) throw Error("unterminated SVG attribute " + name);
                std::string value = svg.substr(k + 1, value_end - k - 1);
                const bool is_href = name == "href" || (name.size() > 5 && name.compare(name.size() - 5, 5, ":href") == 0);
                if (name == "id") value = id_prefix + value;
                else if (is_href && !value.empty() && value[0] == '#') value = "#" + id_prefix + value.substr(1);
                else value = prefix_urls(value, id_prefix);
                out += svg.substr(j, k + 1 - j) + value + quote;  // name, '=' and spacing as written
                j = value_end + 1;
            }
            if (j < svg.size()) out += svg[j++];
            i = j;
        }
    next_markup:;
    }
    return out;
}

}  // namespace rankscope
