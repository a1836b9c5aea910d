#include "rankscope/figure.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "rankscope/io.hpp"

namespace rankscope {

std::vector<std::string> render_figure(const std::filesystem::path& directory, const Figure& figure,
                                       const std::string& provenance_comment) {
    std::string script = provenance_comment;
    script += fmt::format("# {} — re-run with: gnuplot {}.gp\nset datafile separator ','\nset datafile commentschars '#'\n"
                          "set title \"{}\"\nset key outside right\nset grid\n",
                          figure.title, figure.stem, figure.title);
    const struct {
        const char* terminal;
        const char* extension;
    } outputs[] = {{"svg size 900,560 dynamic enhanced font 'Helvetica,12'", "svg"},
                   {"pngcairo size 1200,750 enhanced font 'Helvetica,12'", "png"},
                   {"pdfcairo size 7.5in,4.7in enhanced font 'Helvetica,10'", "pdf"}};
    for (const auto& output : outputs)
        script += fmt::format("set terminal {}\nset output '{}.{}'\n{}\nunset output\n", output.terminal, figure.stem,
                              output.extension, figure.body);
    write_file_atomically((directory / (figure.stem + ".gp")).string(), script);
    const std::string command = fmt::format("cd '{}' && gnuplot '{}.gp' 2> '{}.gnuplot.log'", directory.string(),
                                            figure.stem, figure.stem);
    std::vector<std::string> produced;
    if (std::system(command.c_str()) != 0) {
        fmt::print(stderr, "rankscope: warning: gnuplot could not draw {} (see {}/{}.gnuplot.log)\n", figure.stem,
                   directory.string(), figure.stem);
        return produced;
    }
    std::filesystem::remove(directory / (figure.stem + ".gnuplot.log"));
    for (const auto& output : outputs)
        if (std::filesystem::exists(directory / (figure.stem + "." + output.extension)))
            produced.push_back(figure.stem + "." + output.extension);
    return produced;
}

}  // namespace rankscope
