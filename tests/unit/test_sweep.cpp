// Sweep grids: parsing (JSON and TOML agree), expansion order, keys, CSV records, table merging, collapse depth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rankscope/error.hpp"
#include "rankscope/sweep.hpp"

namespace rankscope {
namespace {

const char* kToml = R"(experiment = "theory"
[fixed]
tokens = 8
biases = true
init-scale = 0.5
[axes]
heads = [1, 4]
seed = [0, 1, 2]
)";
const char* kJson = R"({"axes": {"heads": [1, 4], "seed": [0, 1, 2]},
                        "fixed": {"init-scale": 0.5, "biases": true, "tokens": 8}, "experiment": "theory"})";

TEST(SweepGrid, TomlAndJsonGiveTheSameCellsAndKeys) {
    const auto toml = expand_sweep_grid(parse_sweep_grid(kToml, "toml", "g.toml"));
    const auto json = expand_sweep_grid(parse_sweep_grid(kJson, "json", "g.json"));
    ASSERT_EQ(toml.size(), 6u);
    ASSERT_EQ(json.size(), 6u);
    for (std::size_t i = 0; i < toml.size(); ++i) {
        EXPECT_EQ(toml[i].key, json[i].key);
        EXPECT_EQ(toml[i].arguments, json[i].arguments);
    }
    // Last axis fastest.
    EXPECT_EQ(toml[1].axes[0].value, "1");
    EXPECT_EQ(toml[1].axes[1].value, "1");
    EXPECT_EQ(toml[3].axes[0].value, "4");
    EXPECT_EQ(toml[3].axes[1].value, "0");
    // Arguments: settings sorted by name, a true boolean as the bare flag, floats in shortest round-trip form.
    EXPECT_EQ(toml[0].arguments, (std::vector<std::string>{"theory", "--biases", "--heads", "1", "--init-scale", "0.5",
                                                           "--seed", "0", "--tokens", "8"}));
    // The TOML file's order of fixed settings is kept for the table's columns.
    EXPECT_EQ(toml[0].fixed[0].name, "tokens");
    EXPECT_EQ(toml[0].fixed[2].name, "init-scale");
    // Keys differ between cells, and do not depend on the order of the settings.
    EXPECT_NE(toml[0].key, toml[1].key);
    EXPECT_EQ(toml[0].key.size(), 16u);
    auto reversed = toml[2].settings;
    std::reverse(reversed.begin(), reversed.end());
    EXPECT_EQ(sweep_cell_key("theory", reversed), toml[2].key);
    EXPECT_NE(sweep_cell_key("paths", toml[2].settings), toml[2].key);
}

TEST(SweepGrid, FalseBooleanIsLeftOut) {
    const auto cells = expand_sweep_grid(
        parse_sweep_grid(R"({"experiment": "theory", "axes": {"biases": [false, true]}})", "json", "g.json"));
    EXPECT_EQ(cells[0].arguments, std::vector<std::string>{"theory"});
    EXPECT_EQ(cells[1].arguments, (std::vector<std::string>{"theory", "--biases"}));
    EXPECT_NE(cells[0].key, cells[1].key);
    // The same command, the same key: a false boolean is no setting at all.
    EXPECT_EQ(cells[0].key, sweep_cell_key("theory", {}));
}

TEST(SweepGrid, BadGridsNameTheFileAndTheProblem) {
    auto message = [](const std::string& text, const std::string& format) {
        try {
            parse_sweep_grid(text, format, "grid." + format);
        } catch (const Error& error) {
            return error.one_line();
        }
        return std::string("no error");
    };
    EXPECT_NE(message(R"({"experiment": "sweep", "axes": {"a": [1]}})", "json").find("unknown experiment 'sweep'"),
              std::string::npos);
    EXPECT_NE(message(R"({"experiment": "theory"})", "json").find("no axes"), std::string::npos);
    EXPECT_NE(message(R"({"experiment": "theory", "axes": {"seed": []}})", "json").find("has no values"), std::string::npos);
    EXPECT_NE(message(R"({"experiment": "theory", "axes": {"--seed": [1]}})", "json").find("not a flag name"),
              std::string::npos);
    EXPECT_NE(message(R"({"experiment": "theory", "axes": {"threads": [1, 2]}})", "json").find("set by the sweep"),
              std::string::npos);
    EXPECT_NE(message(R"({"experiment": "theory", "axes": {"seed": [null]}})", "json").find("number, a string or a boolean"),
              std::string::npos);
    EXPECT_NE(message("experiment = \"theory\"\n[axes]\nseed = 3\n", "toml").find("must be a list"), std::string::npos);
    EXPECT_NE(message("experiment = \"theory\"\nbogus = 1\n[axes]\nseed = [3]\n", "toml").find("unknown key 'bogus'"),
              std::string::npos);
    EXPECT_NE(message("experiment = \n", "toml").find("not valid TOML"), std::string::npos);
    EXPECT_NE(message("{", "json").find("grid.json"), std::string::npos);
    // toml++ 3.3.0 reached __builtin_unreachable on U+02FF and U+03DC outside strings (found by fuzzing): it no longer
    // sees non-ASCII characters (stand-ins, mapped back). Invalid TOML is still refused; strings keep their text.
    EXPECT_EQ(message("\xcb\xbfn\x01" "1x", "toml").rfind("not valid TOML: ", 0), 0u);
    EXPECT_EQ(message("t = 0x)\"2e\"2e-x\"\xcf\x9cime\n", "toml").rfind("not valid TOML: ", 0), 0u);
    EXPECT_NE(message("experiment = \"theory\"\n[axes]\nseed = [1]\u00e9\n", "toml").find("(line 3)"), std::string::npos);
    EXPECT_NE(message("experiment = \"\"\"a\\\n  \u00e9\"\"\"\n", "toml").find("unknown experiment 'a\u00e9'"),
              std::string::npos);
    EXPECT_NE(message("experiment = \"theory\"\n[axes]\n\"s\u00e9ed\" = [1]\n", "toml").find("setting 's\u00e9ed' is not a flag name"),
              std::string::npos);
    EXPECT_EQ(message("x = \"\xff\"\n", "toml"), "not valid TOML: not UTF-8 at byte 6 (grid.toml)");
    // An escape that could decode to a stand-in is refused rather than mapped back to another character.
    EXPECT_NE(message("# \u00e9\nexperiment = \"\\U000F0000\"\n", "toml").find("private-use planes 15-16"), std::string::npos);
    EXPECT_NE(message("experiment = \"\\U0010fffd\"\n", "toml").find("private-use planes 15-16"), std::string::npos);
    const auto accents = parse_sweep_grid("# r\u00e9sum\u00e9\nexperiment = \"model\"\n[fixed]\nmodel = '/d/mod\u00e8les'\n"
                                          "text = \"\u00e9\\\"\u00e9\"\n[axes]\nseed = [1]\n",
                                          "toml", "g.toml");
    EXPECT_EQ(accents.fixed.at(0).value, "/d/mod\u00e8les");
    EXPECT_EQ(accents.fixed.at(1).value, "\u00e9\"\u00e9");
    const auto grid = parse_sweep_grid(R"({"experiment": "theory", "axes": {"a": [1, 2, 3], "b": [1, 2, 3]}})", "json", "g");
    EXPECT_THROW(expand_sweep_grid(grid, 8), Error);
    EXPECT_EQ(expand_sweep_grid(grid, 9).size(), 9u);
}

TEST(SweepTables, CsvRecordsKeepQuotedNewlinesAndDropComments) {
    const std::string text = "# produced by: x\r\na,b\r\n1,\"two, \"\"2\"\"\nlines\"\n\n3,4\n";
    const auto records = csv_records(text);
    ASSERT_EQ(records.size(), 3u);
    EXPECT_EQ(records[0], "a,b");
    EXPECT_EQ(records[1], "1,\"two, \"\"2\"\"\nlines\"");
    EXPECT_EQ(records[2], "3,4");
    EXPECT_EQ(csv_fields(records[1]), (std::vector<std::string>{"1", "two, \"2\"\nlines"}));
    EXPECT_THROW(csv_records("a\n\"open\n"), Error);
}

TEST(SweepTables, MergePrefixesEachRowWithItsCell) {
    const auto cells = expand_sweep_grid(
        parse_sweep_grid(R"({"experiment": "theory", "fixed": {"note": "a,b"}, "axes": {"heads": [1, 2]}})", "json", "g"));
    const std::vector<const SweepCell*> pointers = {&cells[0], &cells[1]};
    const std::string merged = merge_cell_tables(pointers, {"# c\nx,y\n1,2\n3,4\n", "x,y\n5,6\n"}, "t.csv");
    EXPECT_EQ(merged, "cell_key,cell_heads,cell_note,x,y\n" + cells[0].key + ",1,\"a,b\",1,2\n" + cells[0].key +
                          ",1,\"a,b\",3,4\n" + cells[1].key + ",2,\"a,b\",5,6\n");
    // A cell without the table contributes no rows; a cell with other columns is an error.
    EXPECT_EQ(merge_cell_tables(pointers, {"", "x,y\n5,6\n"}, "t.csv"),
              "cell_key,cell_heads,cell_note,x,y\n" + cells[1].key + ",2,\"a,b\",5,6\n");
    EXPECT_THROW(merge_cell_tables(pointers, {"x,y\n1,2\n", "x,z\n5,6\n"}, "t.csv"), Error);
}

TEST(SweepTables, CollapseDepthIsTheFirstLayerBelowTheThreshold) {
    // Two cells (d_model 8 and 16); SAN collapses at layer 2 in one run and never in the other; SAN/H=2 at layer 1.
    const std::string table =
        "cell_key,cell_d_model,variant,heads,seed,layer,relative_residual\n"
        "k1,8,SAN,1,0,0,1\nk1,8,SAN,1,0,1,0.01\nk1,8,SAN,1,0,2,1e-5\nk1,8,SAN,1,0,3,1e-4\n"
        "k1,8,SAN/H=2,2,0,0,1\nk1,8,SAN/H=2,2,0,1,5e-4\nk1,8,SAN/H=2,2,0,2,1e-9\nk1,8,SAN/H=2,2,0,3,0\n"
        "k2,16,SAN,1,0,0,1e-9\nk2,16,SAN,1,0,1,0.5\nk2,16,SAN,1,0,2,0.2\nk2,16,SAN,1,0,3,0.1\n";
    const CollapseDepthTables tables = collapse_depth_tables(table);
    EXPECT_EQ(tables.runs_csv,
              "cell_key,cell_d_model,variant,heads,seed,layers,collapse_depth,threshold\n"
              "k1,8,SAN,1,0,3,2,0.001\nk1,8,SAN/H=2,2,0,3,1,0.001\nk2,16,SAN,1,0,3,,0.001\n");
    ASSERT_EQ(tables.summary.size(), 3u);
    EXPECT_EQ(tables.summary[0].variant, "SAN");
    EXPECT_EQ(tables.summary[0].heads, 1);
    EXPECT_EQ(tables.summary[0].d_model, "8");
    EXPECT_DOUBLE_EQ(tables.summary[0].mean_depth, 2);
    EXPECT_EQ(tables.summary[1].heads, 2);  // sorted by variant, width, heads
    EXPECT_DOUBLE_EQ(tables.summary[1].mean_depth, 1);
    EXPECT_EQ(tables.summary[2].d_model, "16");
    EXPECT_EQ(tables.summary[2].collapsed, 0);
    EXPECT_TRUE(std::isnan(tables.summary[2].mean_depth));
    EXPECT_THROW(collapse_depth_tables("cell_key,variant\nk,SAN\n"), Error);

    // A run two cells both ran (the one-head SAN in a heads=2 and a heads=4 cell) counts once in the summary; a run
    // of the same variant, width and seed with other numbers (another depth or init scale) counts on its own.
    const std::string repeated =
        "cell_key,cell_d_model,variant,heads,seed,layer,relative_residual\n"
        "k1,8,SAN,1,0,0,1\nk1,8,SAN,1,0,1,1e-4\n"
        "k2,8,SAN,1,0,0,1\nk2,8,SAN,1,0,1,1e-4\n"
        "k3,8,SAN,1,0,0,1\nk3,8,SAN,1,0,1,0.5\n";
    const CollapseDepthTables deduplicated = collapse_depth_tables(repeated);
    EXPECT_EQ(std::count(deduplicated.runs_csv.begin(), deduplicated.runs_csv.end(), '\n'), 4);  // every cell's run listed
    ASSERT_EQ(deduplicated.summary.size(), 1u);
    EXPECT_EQ(deduplicated.summary[0].runs, 2);
    EXPECT_EQ(deduplicated.summary[0].collapsed, 1);
}

}  // namespace
}  // namespace rankscope
