#include "rankscope/figure.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "rankscope/io.hpp"
#include "rankscope/process.hpp"

namespace rankscope {

std::string gnuplot_quote(const std::string& text) {
    std::string quoted = "'";
    for (char c : text) {
        if (c == '\'') quoted += "''";
        else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) quoted += ' ';
        else quoted += c;
    }
    return quoted + "'";
}

std::vector<std::string> render_figure(const std::filesystem::path& directory, const Figure& figure,
                                       const std::string& provenance_comment) {
    std::string script = provenance_comment;
    // `gnuplot <stem>.gp` writes <stem>.svg etc.; rankscope passes -e "rankscope_suffix='.tmp-PID'" so that gnuplot
    // writes temporary names, renamed into place once gnuplot has succeeded (no half-written figure under the real name).
    script += fmt::format("# {} — re-run with: gnuplot {}.gp\nif (!exists(\"rankscope_suffix\")) rankscope_suffix = ''\n"
                          "set datafile separator ','\nset datafile commentschars '#'\n"
                          "set title \"{}\"\nset key outside right\nset grid\n",
                          figure.title, figure.stem, figure.title);
    const struct {
        const char* terminal;
        const char* extension;
    } outputs[] = {{"svg size 900,560 dynamic enhanced font 'Helvetica,12'", "svg"},
                   {"pngcairo size 1200,750 enhanced font 'Helvetica,12'", "png"},
                   {"pdfcairo size 7.5in,4.7in enhanced font 'Helvetica,10'", "pdf"}};
    for (const auto& output : outputs)
        script += fmt::format("set terminal {}\nset output '{}.{}'.rankscope_suffix\n{}\nunset output\n", output.terminal,
                              figure.stem, output.extension, figure.body);
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
        throw;
    } catch (const Error& error) {
        remove_temporaries();
        fmt::print(stderr, "rankscope: warning: gnuplot could not draw {}: {}\n", figure.stem, error.what());
        return produced;
    }
    if (!result.ok()) {
        remove_temporaries();
        fmt::print(stderr, "rankscope: warning: gnuplot could not draw {}: {} (see {})\n", figure.stem, result.describe(),
                   log.string());
        return produced;
    }
    std::filesystem::remove(log);
    for (const auto& output : outputs) {
        const auto temporary = directory / (figure.stem + "." + output.extension + suffix);
        const auto final_name = directory / (figure.stem + "." + output.extension);
        std::error_code ec;
        if (!std::filesystem::exists(temporary) || std::filesystem::file_size(temporary, ec) == 0 || ec) {
            std::filesystem::remove(temporary, ec);
            fmt::print(stderr, "rankscope: warning: gnuplot wrote no {} for {}\n", output.extension, figure.stem);
            continue;
        }
        std::filesystem::rename(temporary, final_name, ec);
        if (ec) throw Error("cannot rename into place: " + ec.message(), final_name.string());
        produced.push_back(figure.stem + "." + output.extension);
    }
    return produced;
}

}  // namespace rankscope
