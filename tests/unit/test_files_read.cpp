// manifest.json's "files_read" (io.hpp: files_read, files_read_records): every input opened through InputFile, once,
// with its size, time and SHA-256 (compared with sha256_file and the FIPS 180-4 test vector); the result folder's own
// files and the outputs hashed for reuse are left out; a file changed after it was read is not hashed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "rankscope/file_hash.hpp"
#include "rankscope/io.hpp"

namespace fs = std::filesystem;
using namespace rankscope;

namespace {

const nlohmann::json* record_of(const nlohmann::json& records, const fs::path& path) {
    for (const auto& record : records)
        if (record.at("path") == fs::absolute(path).lexically_normal().string()) return &record;
    return nullptr;
}

}  // namespace

TEST(FilesRead, InputsAreListedOnceWithTheirHash) {
    const fs::path folder = fs::temp_directory_path() / ("rankscope-files-read-" + std::to_string(::getpid()));
    fs::remove_all(folder);
    fs::create_directories(folder / "result");
    const fs::path input = folder / "input.txt", own = folder / "result" / "table.csv", hashed = folder / "output.csv",
                   changed = folder / "changed.txt", replaced = folder / "replaced.txt";
    std::ofstream(input) << "abc";
    std::ofstream(own) << "x";
    std::ofstream(hashed) << "y";
    std::ofstream(changed) << "before";
    read_file_limited(input.string(), 100, "text file");
    read_file_limited((folder / "." / "input.txt").string(), 100, "text file");  // the same file: listed once
    read_file_limited(own.string(), 100, "table");
    read_file_if_present(hashed.string(), kNoSizeLimit, "reproduction file");  // rankscope's own output read back
    sha256_file(hashed);
    read_file_limited(changed.string(), 100, "text file");
    std::ofstream(changed) << "after, and longer";
    // Replaced under its name by a file of the same size and modification time (`cp -p`, `rsync -a`): another inode.
    std::ofstream(replaced) << "old";
    read_file_limited(replaced.string(), 100, "text file");
    std::ofstream(folder / "new.txt") << "new";
    fs::last_write_time(folder / "new.txt", fs::last_write_time(replaced));
    fs::rename(folder / "new.txt", replaced);

    const nlohmann::json records = files_read_records((folder / "result").string());
    const nlohmann::json* abc = record_of(records, input);
    ASSERT_NE(abc, nullptr) << records.dump(1);
    EXPECT_EQ(abc->at("sha256"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // FIPS 180-4 "abc"
    EXPECT_EQ(abc->at("bytes"), 3);
    EXPECT_EQ(abc->at("what"), "text file");
    EXPECT_TRUE(std::regex_match(abc->at("modified").get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
    int listed = 0;
    for (const auto& record : records) listed += record.at("path") == abc->at("path");
    EXPECT_EQ(listed, 1);
    EXPECT_EQ(record_of(records, own), nullptr);     // inside the result folder
    EXPECT_EQ(record_of(records, hashed), nullptr);  // an output, hashed or read back
    const nlohmann::json* later = record_of(records, changed);
    ASSERT_NE(later, nullptr);
    EXPECT_TRUE(later->at("sha256").is_null());
    EXPECT_EQ(later->at("note"), "changed or removed after it was read: not hashed");
    const nlohmann::json* swapped = record_of(records, replaced);
    ASSERT_NE(swapped, nullptr);
    EXPECT_TRUE(swapped->at("sha256").is_null()) << swapped->dump();
    // The same folder as the result folder's parent: its own table is an input there.
    EXPECT_NE(record_of(files_read_records(folder.string() + "/other"), own), nullptr);
    fs::remove_all(folder);
}

// printable (io.hpp), used for every name in an error or a table: C0 controls as \xNN, C1 controls and the
// bidirectional overrides as \uNNNN (a terminal acts on U+009B, CSI, and U+202E reverses what follows), and a cut
// after max_length bytes that never splits a UTF-8 character (a warning ended in half an "é").
TEST(Printable, ControlsAreShownAndCutsKeepCharactersWhole) {
    EXPECT_EQ(printable("a\x1b[2Jb\tc"), "a\\x1b[2Jb\\x09c");
    EXPECT_EQ(printable("x\xc2\x9b" "31m\xc2\x85y"), "x\\u009b31m\\u0085y");
    EXPECT_EQ(printable("txt.\xe2\x80\xae" "exe\xe2\x81\xa6"), "txt.\\u202eexe\\u2066");
    EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x80\x94 ok"), "caf\xc3\xa9 \xe2\x80\x94 ok");  // é and an em dash stay
    std::string long_name = "1";
    for (int i = 0; i < 100; ++i) long_name += "\xc3\xa9";
    const std::string cut = printable(long_name, 80);
    ASSERT_GE(cut.size(), 3u);
    EXPECT_EQ(cut.substr(cut.size() - 3), "...");
    EXPECT_EQ((cut.size() - 3 - 1) % 2, 0u) << cut;  // whole two-byte characters after the "1"
}
