// File formats: round trips, published-format details, and the errors for bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

using namespace rankscope;
namespace fs = std::filesystem;

namespace {
fs::path temporary_dir() {
    const fs::path dir = fs::temp_directory_path() / ("rankscope-io-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir;
}
void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}
std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
// The error must name the file.
template <typename F>
void expect_error_naming(F&& f, const std::string& file, const std::string& words) {
    try {
        f();
        ADD_FAILURE() << "no error for " << file;
    } catch (const Error& e) {
        EXPECT_NE(e.one_line().find(file), std::string::npos) << e.one_line();
        EXPECT_NE(e.one_line().find(words), std::string::npos) << e.one_line();
    }
}
}  // namespace

TEST(Npy, RoundTripFloat32) {
    const fs::path path = temporary_dir() / "a.npy";
    std::vector<float> values = {1, 2, 3, 4, 5, 6};
    ArrayView view{DType::F32, {2, 3}, reinterpret_cast<const std::byte*>(values.data())};
    write_npy(path.string(), view);
    const std::string bytes = read_bytes(path);
    EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
    EXPECT_EQ((bytes.size() - values.size() * 4) % 64, 0u);  // header padded to 64 bytes
    const HostArray back = read_npy(path.string());
    EXPECT_EQ(back.dtype, DType::F32);
    EXPECT_EQ(back.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(to_double_vector(back.view()), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, FortranOrderIsTransposedToRowMajor) {
    // A 2 × 3 array [[1,2,3],[4,5,6]] stored column-major: 1 4 2 5 3 6.
    std::string header = "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }";
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
    for (double v : {1.0, 4.0, 2.0, 5.0, 3.0, 6.0}) bytes.append(reinterpret_cast<const char*>(&v), 8);
    const fs::path path = temporary_dir() / "fortran.npy";
    write_bytes(path, bytes);
    EXPECT_EQ(to_double_vector(read_npy(path.string()).view()), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, VersionTwoHeader) {
    std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
    header.append((64 - (12 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
    const std::uint32_t length = static_cast<std::uint32_t>(header.size());
    bytes.append(reinterpret_cast<const char*>(&length), 4);
    bytes += header;
    for (std::int64_t v : {7, -8, 9}) bytes.append(reinterpret_cast<const char*>(&v), 8);
    const fs::path path = temporary_dir() / "v2.npy";
    write_bytes(path, bytes);
    const HostArray a = read_npy(path.string());
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{3}));
    EXPECT_EQ(to_double_vector(a.view()), (std::vector<double>{7, -8, 9}));
}

TEST(Npy, Errors) {
    const fs::path dir = temporary_dir();
    std::vector<double> values(12, 1.0);
    write_npy((dir / "good.npy").string(), ArrayView{DType::F64, {3, 4}, reinterpret_cast<const std::byte*>(values.data())});
    const std::string good = read_bytes(dir / "good.npy");
    write_bytes(dir / "truncated.npy", good.substr(0, good.size() - 5));
    expect_error_naming([&] { read_npy((dir / "truncated.npy").string()); }, "truncated.npy", "truncated");
    write_bytes(dir / "notnpy.npy", "hello world, not numpy");
    expect_error_naming([&] { read_npy((dir / "notnpy.npy").string()); }, "notnpy.npy", "magic");
    std::string complex_header = good;
    complex_header.replace(complex_header.find("<f8"), 3, "<c8");
    write_bytes(dir / "complex.npy", complex_header);
    expect_error_naming([&] { read_npy((dir / "complex.npy").string()); }, "complex.npy", "dtype");
    expect_error_naming([&] { read_npy((dir / "missing.npy").string()); }, "missing.npy", "cannot open");
}

TEST(Safetensors, RoundTripWithMetadataAndAlignment) {
    const fs::path path = temporary_dir() / "t.safetensors";
    std::vector<float> a = {1, 2, 3, 4, 5, 6};
    std::vector<std::int64_t> b = {10, 20, 30};
    write_safetensors(path.string(),
                      {{"layer.a", {DType::F32, {2, 3}, reinterpret_cast<const std::byte*>(a.data())}},
                       {"ids", {DType::I64, {3}, reinterpret_cast<const std::byte*>(b.data())}}},
                      {{"format", "pt"}});
    const std::string bytes = read_bytes(path);
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, bytes.data(), 8);
    EXPECT_EQ(header_size % 8, 0u);
    SafetensorsFile file(path.string());
    EXPECT_EQ(file.names(), (std::vector<std::string>{"ids", "layer.a"}));
    EXPECT_EQ(file.metadata().at("format"), "pt");
    EXPECT_EQ(to_double_vector(file.view("layer.a")), (std::vector<double>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(to_double_vector(file.view("ids")), (std::vector<double>{10, 20, 30}));
    expect_error_naming([&] { file.view("nope"); }, "t.safetensors", "no tensor named 'nope'");
}

TEST(Safetensors, TruncatedAndBadHeaders) {
    const fs::path dir = temporary_dir();
    std::vector<float> a(100, 1.0f);
    write_safetensors((dir / "full.safetensors").string(),
                      {{"w", {DType::F32, {10, 10}, reinterpret_cast<const std::byte*>(a.data())}}});
    const std::string good = read_bytes(dir / "full.safetensors");
    write_bytes(dir / "cut.safetensors", good.substr(0, good.size() - 4));
    expect_error_naming([&] { SafetensorsFile f((dir / "cut.safetensors").string()); }, "cut.safetensors", "truncated");
    write_bytes(dir / "cuthead.safetensors", good.substr(0, 20));
    expect_error_naming([&] { SafetensorsFile f((dir / "cuthead.safetensors").string()); }, "cuthead.safetensors",
                        "truncated");
    write_bytes(dir / "tiny.safetensors", "abc");
    expect_error_naming([&] { SafetensorsFile f((dir / "tiny.safetensors").string()); }, "tiny.safetensors", "truncated");
    std::string bad = good;
    bad.replace(bad.find("F32"), 3, "C64");
    write_bytes(dir / "dtype.safetensors", bad);
    expect_error_naming([&] { SafetensorsFile f((dir / "dtype.safetensors").string()); }, "dtype.safetensors", "dtype");
}

TEST(Safetensors, ReadsTheFixtureCheckpoint) {
    const std::string path = std::string(RANKSCOPE_FIXTURES_DIR) + "/bert-tiny/model.safetensors";
    ASSERT_TRUE(fs::exists(path)) << "the repository's fixture is missing: " << path;
    SafetensorsFile file(path);
    const ArrayView word = file.view("embeddings.word_embeddings.weight");
    EXPECT_EQ(word.shape, (std::vector<std::int64_t>{64, 32}));
    EXPECT_EQ(word.dtype, DType::F32);
}

TEST(MatrixFile, CsvWithHeaderAndErrors) {
    const fs::path dir = temporary_dir();
    write_bytes(dir / "m.csv", "a,b,c\n1,2,3\n4,5,6\n");
    const HostArray m = read_matrix_file((dir / "m.csv").string());
    EXPECT_EQ(m.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(to_double_vector(m.view()), (std::vector<double>{1, 2, 3, 4, 5, 6}));
    write_bytes(dir / "ragged.csv", "1,2,3\n4,5\n");
    expect_error_naming([&] { read_matrix_file((dir / "ragged.csv").string()); }, "ragged.csv", "columns");
    write_bytes(dir / "empty.csv", "");
    expect_error_naming([&] { read_matrix_file((dir / "empty.csv").string()); }, "empty.csv", "no numeric rows");
    expect_error_naming([&] { read_matrix_file((dir / "nope.npy").string()); }, "nope.npy", "no such file");
    write_bytes(dir / "x.bin", "1");
    expect_error_naming([&] { read_matrix_file((dir / "x.bin").string()); }, "x.bin", "unknown matrix file type");
}

// A CSV cell strtod reads whole is still refused, with its line and column, when it is hexadecimal ("0x10" was read as
// 16), beyond float64 (1e400 was read as inf: "Inf at [1, 0]" of a file with no inf in it), or NaN/Inf (named by the
// data's [row, column], not the file's line). Underflow is rounding, and reads.
TEST(MatrixFile, CsvCellsAreDecimalAndFinite) {
    const fs::path dir = temporary_dir();
    for (const auto& [cell, words] : std::vector<std::pair<std::string, std::string>>{
             {"0x10", "line 3, column 2: '0x10' is hexadecimal (write it in decimal)"},
             {"-0X1p3", "line 3, column 2: '-0X1p3' is hexadecimal"},
             {"1e400", "line 3, column 2: '1e400' is beyond the float64 range"},
             {"-1e400", "line 3, column 2: '-1e400' is beyond the float64 range"},
             {"nan", "line 3, column 2: 'nan' is not finite (the measures take finite matrices)"},
             {"-inf", "line 3, column 2: '-inf' is not finite"}}) {
        write_bytes(dir / "c.csv", "# comment\n1,2\n3," + cell + "\n");
        expect_error_naming([&] { read_matrix_file((dir / "c.csv").string()); }, "c.csv", words);
    }
    write_bytes(dir / "tiny.csv", "1e-400,1\n0x,2\n");  // "0x" is no number at all
    expect_error_naming([&] { read_matrix_file((dir / "tiny.csv").string()); }, "tiny.csv", "'0x' is not a number");
    write_bytes(dir / "tiny.csv", "1e-400,1\n0,2\n");
    EXPECT_EQ(to_double_vector(read_matrix_file((dir / "tiny.csv").string()).view()), (std::vector<double>{0, 1, 0, 2}));
    // A header stays a header (its cells are no numbers), and "nan" is a number's spelling, not a header.
    write_bytes(dir / "nan_first.csv", "nan,nan\n1,2\n");
    expect_error_naming([&] { read_matrix_file((dir / "nan_first.csv").string()); }, "nan_first.csv", "line 1, column 1: 'nan' is not finite");
}

// FILE.safetensors:NAME selects a tensor; "FILE.safetensors:" the one named "" (the format allows an empty name; it
// was read as no name at all: "file holds 2 tensors; name one as FILE:tensor").
TEST(MatrixFile, SafetensorsTensorNamedEmptyIsSelectable) {
    const fs::path path = temporary_dir() / "named.safetensors";
    std::vector<float> empty_named = {1, 2, 3, 4}, other = {5, 6, 7, 8, 9, 10};
    write_safetensors(path.string(), {{"", {DType::F32, {2, 2}, reinterpret_cast<const std::byte*>(empty_named.data())}},
                                      {"a", {DType::F32, {2, 3}, reinterpret_cast<const std::byte*>(other.data())}}});
    EXPECT_EQ(to_double_vector(read_matrix_file(path.string() + ":").view()), (std::vector<double>{1, 2, 3, 4}));
    EXPECT_EQ(to_double_vector(read_matrix_file(path.string() + ":a").view()), (std::vector<double>{5, 6, 7, 8, 9, 10}));
    expect_error_naming([&] { read_matrix_file(path.string()); }, "named.safetensors", "file holds 2 tensors");
}

TEST(ArrayShape, EntryPositionIsTheRowMajorIndex) {
    EXPECT_EQ(entry_position_text({2, 4, 3}, 17), "[1, 1, 2] (flat index 17)");  // 1·12 + 1·3 + 2
    EXPECT_EQ(entry_position_text({3, 4}, 6), "[1, 2] (flat index 6)");
    EXPECT_EQ(entry_position_text({5}, 0), "[0] (flat index 0)");
}

TEST(AtomicWrite, LeavesNoTemporaryFiles) {
    const fs::path dir = temporary_dir() / "atomic";
    fs::create_directories(dir);
    write_file_atomically((dir / "out.txt").string(), "hello");
    EXPECT_EQ(read_bytes(dir / "out.txt"), "hello");
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
    EXPECT_EQ(files, 1);
    expect_error_naming([&] { write_file_atomically((dir / "no/such/dir/x").string(), "x"); }, "no/such/dir", "cannot open");
}
