// Hostile input to every parser of outside files (issue 12): each case must end in one rankscope::Error that names the
// file and the problem — never a crash, a hang, a raw library message, or a silently wrong array.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loaders/text_utf8.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/file_hash.hpp"
#include "rankscope/models.hpp"
#include "rankscope/sweep.hpp"
#include "rankscope/tokenizer.hpp"
#include "rankscope/use_lite.hpp"

using namespace rankscope;
namespace fs = std::filesystem;

namespace {
fs::path dir() {
    static const fs::path d = [] {
        const fs::path p = fs::temp_directory_path() / ("rankscope-hostile-" + std::to_string(::getpid()));
        fs::create_directories(p);
        return p;
    }();
    return d;
}
std::string file(const std::string& name, const std::string& bytes) {
    const fs::path path = dir() / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
}
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.one_line();
    }
    return "<no error>";
}
#define EXPECT_ERROR(call, where, words)                                             \
    do {                                                                             \
        const std::string message = error_of([&] { call; });                         \
        EXPECT_NE(message.find(where), std::string::npos) << message;                \
        EXPECT_NE(message.find(words), std::string::npos) << message;                \
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;                 \
        EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;     \
    } while (0)

std::string npy_bytes(const std::string& dict, const std::string& data, char version = 1) {
    std::string header = dict;
    const std::size_t prefix = version == 1 ? 10 : 12;
    header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY", 6) + version + '\0';
    const std::uint32_t length = static_cast<std::uint32_t>(header.size());
    bytes.append(reinterpret_cast<const char*>(&length), version == 1 ? 2 : 4);
    return bytes + header + data;
}
std::string npy_dict(const std::string& shape, const std::string& descr = "'<f8'") {
    return "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
}

std::string safetensors_bytes(const nlohmann::json& header, const std::string& data) {
    const std::string text = header.dump();
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>((text.size() >> (8 * b)) & 0xff);
    return bytes + text + data;
}
nlohmann::json entry(const std::string& dtype, const nlohmann::json& shape, nlohmann::json offsets) {
    return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", std::move(offsets)}};
}

std::string fifo(const std::string& name) {
    const std::string path = (dir() / name).string();
    ::unlink(path.c_str());
    ::mkfifo(path.c_str(), 0600);
    return path;
}
}  // namespace

TEST(CheckedSizes, OverflowAndNegativeExtentsThrow) {
    EXPECT_EQ(shape_numel({2, 3, 4}, "x"), 24);
    EXPECT_EQ(shape_numel({0, 1LL << 62}, "x"), 0);
    EXPECT_ERROR(shape_numel({1LL << 32, 1LL << 32}, "f.npy"), "f.npy", "more elements than fit in 64 bits");
    EXPECT_ERROR(shape_nbytes({1LL << 61, 1}, DType::F64, "f.npy"), "f.npy", "more bytes than fit");
    EXPECT_ERROR(shape_numel({3, -1}, "f.npy"), "f.npy", "negative extent");
    const ArrayView view{DType::F32, {1LL << 40, 1LL << 40}, nullptr};
    EXPECT_THROW(view.numel(), Error);
}

TEST(HostileNpy, ShapeGrammarIsStrict) {
    const std::string data(4 * 8 * 8, '\0');
    // numpy rejects every one of these (ast.literal_eval or its key checks); rankscope did read "(4- 16, 8)" as 4 x 8.
    for (const char* shape : {"(4- 16, 8)", "(4 16, 8)", "(4, 8", "(4)", "(-4, 8)", "(4, 8.0)", "(04, 8)",
                                     "(4, 8,,)", "[4, 8]", "(4, 0x8)", "(4, 8) + (1,)", "(,)", "(True, 8)"})
        EXPECT_ERROR(read_npy(file("shape.npy", npy_bytes(npy_dict(shape), data))), "shape.npy", "bad .npy header");
    EXPECT_ERROR(read_npy(file("dup.npy", npy_bytes("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (4, 8)}", data))),
                 "dup.npy", "'descr' appears twice");
    EXPECT_ERROR(read_npy(file("extra.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 8), 'x': 1}", data))),
                 "extra.npy", "unexpected key 'x'");
    EXPECT_ERROR(read_npy(file("nokey.npy", npy_bytes("{'descr': '<f8', 'shape': (4, 8)}", data))), "nokey.npy",
                 "no 'fortran_order'");
    EXPECT_ERROR(read_npy(file("after.npy", npy_bytes(npy_dict("(4, 8)") + " x", data))), "after.npy",
                 "unexpected text after");
    EXPECT_ERROR(read_npy(file("fortran.npy", npy_bytes("{'descr': '<f8', 'fortran_order': Falsey, 'shape': (4, 8)}", data))),
                 "fortran.npy", "True or False");
    // What numpy accepts: double quotes, no trailing comma, spaces anywhere, '+', 1-d and 0-d shapes.
    EXPECT_EQ(read_npy(file("ok1.npy", npy_bytes("{\"descr\":\"<f8\",\"fortran_order\":False,\"shape\":( 4 ,+8 )}", data))).shape,
              (std::vector<std::int64_t>{4, 8}));
    EXPECT_EQ(read_npy(file("ok2.npy", npy_bytes(npy_dict("(32,)"), data))).shape, (std::vector<std::int64_t>{32}));
    EXPECT_EQ(read_npy(file("ok3.npy", npy_bytes(npy_dict("()"), std::string(8, '\0')))).shape, (std::vector<std::int64_t>{}));
}

TEST(HostileNpy, SizesAreCheckedAgainstTheFile) {
    // Overflowing shape: element count, then bytes.
    EXPECT_ERROR(read_npy(file("huge.npy", npy_bytes(npy_dict("(4294967296, 4294967296)"), ""))), "huge.npy",
                 "more elements than fit in 64 bits");
    EXPECT_ERROR(read_npy(file("huge2.npy", npy_bytes(npy_dict("(2305843009213693952,)"), ""))), "huge2.npy",
                 "more bytes than fit");
    EXPECT_ERROR(read_npy(file("big.npy", npy_bytes(npy_dict("(99999999999, 8)"), ""))), "big.npy", "truncated .npy data");
    EXPECT_ERROR(read_npy(file("trail.npy", npy_bytes(npy_dict("(2,)"), std::string(17, '\0')))), "trail.npy",
                 "1 bytes after the data");
    EXPECT_ERROR(read_npy(file("ext.npy", npy_bytes(npy_dict("(99999999999999999999,)"), ""))), "ext.npy",
                 "does not fit in 64 bits");
    // Header length: numpy's limit of 10000 bytes; a long header never reaches a regex (that overflowed the stack).
    const std::string long_dict = npy_dict("(" + std::string(200000, ' ') + "2,)");
    EXPECT_ERROR(read_npy(file("long.npy", npy_bytes(long_dict, std::string(16, '\0'), 2))), "long.npy",
                 "longer than numpy's limit of 10000");
    EXPECT_ERROR(read_npy(file("cuthead.npy", npy_bytes(npy_dict("(2,)"), "").substr(0, 40))), "cuthead.npy",
                 "truncated .npy header");
    EXPECT_ERROR(read_npy(file("v9.npy", std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' '))), "v9.npy",
                 "unsupported .npy version 9.0");
    // A zero extent is a valid .npy file, but never a matrix: read_matrix_file says so (it crashed `measure`).
    const std::string empty = file("empty.npy", npy_bytes(npy_dict("(0, 4, 4)"), ""));
    EXPECT_EQ(read_npy(empty).shape, (std::vector<std::int64_t>{0, 4, 4}));
    EXPECT_ERROR(read_matrix_file(empty), "empty.npy", "empty array: shape [0, 4, 4]");
}

TEST(HostileFiles, DevicesFifosAndDirectoriesAreRefusedWithoutReading) {
    EXPECT_ERROR(read_npy("/dev/zero"), "/dev/zero", "must be a regular file, this is a character device");
    EXPECT_ERROR(read_matrix_file("/dev/zero"), "/dev/zero", "unknown matrix file type");
    EXPECT_ERROR(read_csv_matrix("/dev/zero"), "/dev/zero", "must be a regular file");
    EXPECT_ERROR(SafetensorsFile("/dev/zero"), "/dev/zero", "must be a regular file");
    EXPECT_ERROR(read_json_file("/dev/zero", "config"), "/dev/zero", "must be a regular file");
    EXPECT_ERROR(read_sentences("/dev/zero"), "/dev/zero", "must be a regular file");
    EXPECT_ERROR(load_wordpiece("/dev/zero"), "/dev/zero", "must be a regular file");
    const std::string pipe = fifo("pipe.npy");
    EXPECT_ERROR(read_npy(pipe), "pipe.npy", "this is a FIFO");
    EXPECT_ERROR(read_sentences(fifo("pipe.txt")), "pipe.txt", "this is a FIFO");
    EXPECT_ERROR(read_json_file(dir().string(), "config"), dir().string(), "this is a directory");
}

// Issue 31: the readers that skipped these checks (sweep grids, SentencePiece models, hashed files) have them now.
TEST(HostileFiles, EveryReaderChecksTheFileBeforeReading) {
    EXPECT_ERROR(read_sweep_grid(fifo("pipe.toml")), "pipe.toml", "grid file must be a regular file, this is a FIFO");
    EXPECT_ERROR(read_sweep_grid(fifo("pipe.json")), "pipe.json", "this is a FIFO");
    const fs::path zero_grid = dir() / "zero.json";
    fs::remove(zero_grid);
    fs::create_symlink("/dev/zero", zero_grid);
    EXPECT_ERROR(read_sweep_grid(zero_grid), "zero.json", "this is a character device");
    // A sparse file: 1 TiB by its size, no blocks on disk. Refused by its size, never read.
    const std::string sparse = file("sparse.toml", "");
    ASSERT_EQ(::truncate(sparse.c_str(), 1ll << 40), 0);
    EXPECT_ERROR(read_sweep_grid(sparse), "sparse.toml", "bytes, more than the limit of 64 MiB");
    const std::string sparse_model = file("sparse/spiece.model", "");
    ASSERT_EQ(::truncate(sparse_model.c_str(), 1ll << 40), 0);
    EXPECT_ERROR(check_input_file(sparse_model, kMaxSentencePieceModelBytes, "SentencePiece model"), "spiece.model",
                 "SentencePiece model is 1099511627776 bytes, more than the limit of 64 MiB");
    EXPECT_ERROR(check_input_file(fifo("tokenizer.model"), kMaxSentencePieceModelBytes, "SentencePiece model"),
                 "tokenizer.model", "SentencePiece model must be a regular file, this is a FIFO");
    EXPECT_ERROR(sha256_file(fifo("hashed.bin")), "hashed.bin", "must be a regular file, this is a FIFO");
    EXPECT_EQ(read_file_if_present((dir() / "absent.txt").string(), 100, "file"), "");
    EXPECT_ERROR(read_file_if_present(fifo("present.txt"), 100, "file"), "present.txt", "this is a FIFO");
}

// Values that slipped through: NUL ended JSON parsing, get<int>() narrowed 2^32 + 7 to 7, wrong-typed fields reached
// the user as nlohmann's bracketed message.
TEST(HostileJson, NulBytesNarrowingAndWrongTypes) {
    EXPECT_ERROR(read_json_file(file("nul.json", std::string("{\"a\": 1}\0{\"b\": 2}", 17)), "config"), "nul.json",
                 "not valid JSON: a NUL byte at line 1 (byte 9)");
    EXPECT_ERROR(parse_sweep_grid(std::string("experiment = \"theory\"\0", 22), "toml", "g.toml"), "g.toml", "not valid TOML");
    EXPECT_ERROR(parse_sweep_grid(std::string("{\"experiment\": \"theory\"}\0junk", 27), "json", "g.json"), "g.json",
                 "a NUL byte");
    const nlohmann::json big = std::uint64_t{(1ull << 32) + 7};
    EXPECT_ERROR(json_integer(big, 0, 1000, "the id", "t.json"), "t.json", "the id must be an integer in [0, 1000], found 4294967303");
    EXPECT_ERROR(json_integer(nlohmann::json(7.5), 0, 1000, "the id", "t.json"), "t.json", "found 7.5");
    EXPECT_EQ(json_integer(nlohmann::json(7), 0, 1000, "the id", "t.json"), 7);
    nlohmann::json bpe = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}},
                                     {"ignore_merges", "yes"}}},
                          {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}}};
    EXPECT_ERROR(load_tokenizer_json(file("typed/tokenizer.json", bpe.dump())), "typed/tokenizer.json",
                 "a field of the wrong type or value: type must be boolean, but is string");
}

// Invalid UTF-8 is the text's fault: read_sentences names the text file and the line.
TEST(HostileText, InvalidUtf8NamesTheTextFile) {
    EXPECT_ERROR(read_sentences(file("latin1.txt", "first\ncaf\xe9 au lait\n")), "latin1.txt",
                 "line 2 is not valid UTF-8 (byte 4 of the line: 0xe9)");
    EXPECT_ERROR(read_sentences(file("surrogate.txt", "x \xed\xa0\x80 y\n")), "surrogate.txt", "not valid UTF-8");
    EXPECT_ERROR(read_sentences(file("overlong.txt", "x \xc0\xaf y\n")), "overlong.txt", "not valid UTF-8");
    EXPECT_EQ(read_sentences(file("fine.txt", "caf\xc3\xa9 \xf0\x9f\x91\x8d\n")).size(), 1u);
}

TEST(HostileSafetensors, OffsetsMustTileTheDataExactly) {
    const std::string data(32, '\x01');
    auto open = [&](const std::string& name, const nlohmann::json& header, const std::string& bytes) {
        SafetensorsFile f(file(name, safetensors_bytes(header, bytes)));
    };
    EXPECT_ERROR(open("reversed.safetensors", {{"a", entry("F32", {2}, {2056, 8})}}, data), "reversed.safetensors:a",
                 "end before begin");
    EXPECT_EQ(error_of([&] { open("reversed.safetensors", {{"a", entry("F32", {2}, {2056, 8})}}, data); })
                  .find("18446744073709"),
              std::string::npos);
    EXPECT_ERROR(open("overlap.safetensors", {{"a", entry("F32", {4}, {0, 16})}, {"b", entry("F32", {4}, {8, 24})}},
                      data.substr(0, 24)),
                 "overlap.safetensors:b", "overlap tensor 'a'");
    EXPECT_ERROR(open("gap.safetensors", {{"a", entry("F32", {2}, {0, 8})}, {"b", entry("F32", {2}, {16, 24})}},
                      data.substr(0, 24)),
                 "gap.safetensors:b", "bytes 8..16 that belong to no tensor");
    EXPECT_ERROR(open("trail.safetensors", {{"a", entry("F32", {2}, {0, 8})}}, data.substr(0, 12)), "trail.safetensors",
                 "4 bytes after the last tensor");
    EXPECT_ERROR(open("oob.safetensors", {{"a", entry("F32", {2}, {24, 32})}}, data.substr(0, 16)), "oob.safetensors:a",
                 "truncated safetensors file");
    EXPECT_ERROR(open("size.safetensors", {{"a", entry("F32", {3}, {0, 8})}}, data.substr(0, 8)), "size.safetensors:a",
                 "needs 12");
    EXPECT_ERROR(open("overflow.safetensors", {{"a", entry("F32", {4294967296ULL, 4294967296ULL}, {0, 0})}}, ""),
                 "overflow.safetensors:a", "more elements than fit in 64 bits");
    EXPECT_ERROR(open("negative.safetensors", {{"a", entry("F32", {-1, 2}, {0, 0})}}, ""), "negative.safetensors:a",
                 "non-negative");
    EXPECT_ERROR(open("float.safetensors", {{"a", entry("F32", {2}, {0.0, 8.0})}}, data.substr(0, 8)),
                 "float.safetensors:a", "non-negative integers");
    EXPECT_ERROR(open("dtype.safetensors", {{"a", {{"dtype", 7}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}, data.substr(0, 8)),
                 "dtype.safetensors:a", "dtype: not a string");
    EXPECT_ERROR(open("meta.safetensors", {{"__metadata__", {{"k", {{"deep", 1}}}}}}, ""), "meta.safetensors",
                 "not a string");
    EXPECT_ERROR(open("name.safetensors", {{"a\nb", entry("F32", {2}, {0, 9})}}, data.substr(0, 9)),
                 "name.safetensors:a\\x0ab", "needs 8");
    EXPECT_ERROR(SafetensorsFile(file("json.safetensors", std::string("\x08\0\0\0\0\0\0\0{\"a\": }x", 16))),
                 "json.safetensors", "not valid JSON: syntax error at line 1, column 7");
    std::string header_size(8, '\0');
    header_size[4] = 1;  // 2^32 bytes of header
    EXPECT_ERROR(SafetensorsFile(file("hugehead.safetensors", header_size + "{}")), "hugehead.safetensors",
                 "above the format's limit");
    // Zero-size tensors are valid safetensors, but not a matrix.
    const std::string empty = file("empty.safetensors", safetensors_bytes({{"a", entry("F32", {0, 4, 4}, {0, 0})}}, ""));
    EXPECT_EQ(SafetensorsFile(empty).view("a").shape, (std::vector<std::int64_t>{0, 4, 4}));
    EXPECT_ERROR(read_matrix_file(empty + ":a"), "empty.safetensors:a", "empty array");
}

TEST(HostileCsv, HeaderRuleNeverDropsARow) {
    EXPECT_ERROR(read_csv_matrix(file("gap.csv", "1,,3\n4,5,6\n")), "gap.csv", "line 1, column 2: empty cell");
    EXPECT_ERROR(read_csv_matrix(file("index.csv", ",a,b\n0,1,2\n")), "index.csv", "line 1, column 1: empty cell");
    EXPECT_ERROR(read_csv_matrix(file("mixed.csv", "a,1\n2,3\n")), "mixed.csv", "line 1, column 1: 'a' is not a number");
    EXPECT_ERROR(read_csv_matrix(file("late.csv", "1,2\nx,y\n")), "late.csv", "line 2, column 1: 'x' is not a number");
    EXPECT_ERROR(read_csv_matrix(file("cell.csv", "a,b\n1,2\n3,\n")), "cell.csv", "line 3, column 2: empty cell");
    EXPECT_ERROR(read_csv_matrix(file("ragged.csv", "a,b\n1,2,3\n")), "ragged.csv", "line 2 has 3 columns, expected 2");
    const HostArray header = read_csv_matrix(file("header.csv", "# note\n\nx, y\n1, 2\n3 ,4\n"));
    EXPECT_EQ(header.shape, (std::vector<std::int64_t>{2, 2}));
    const HostArray data = read_csv_matrix(file("data.csv", "1 2\n3\t4\n"));
    EXPECT_EQ(to_double_vector(data.view()), (std::vector<double>{1, 2, 3, 4}));
    // Quoted cells: a quoted first row of numbers is data (it was read as a header and dropped), quoted names a header.
    const HostArray quoted = read_csv_matrix(file("quoted.csv", "\"1\",\"2\"\n3,4\n5,7\n"));
    EXPECT_EQ(to_double_vector(quoted.view()), (std::vector<double>{1, 2, 3, 4, 5, 7}));
    const HostArray named = read_csv_matrix(file("named.csv", "\"a\", \"b\"\n\"1\",2\n"));
    EXPECT_EQ(to_double_vector(named.view()), (std::vector<double>{1, 2}));
    EXPECT_ERROR(read_csv_matrix(file("blank.csv", "1,\"\"\n")), "blank.csv", "line 1, column 2: empty cell");
}

TEST(HostileJson, OneLineErrorsAndBoundedNesting) {
    EXPECT_ERROR(read_json_file(file("bad.json", "{\n  \"a\": tru\n}"), "config"), "bad.json",
                 "not valid JSON: syntax error at line 2");
    EXPECT_ERROR(read_json_file(file("deep.json", std::string(100000, '[') + std::string(100000, ']')), "config"),
                 "deep.json", "nested more than 64 levels");
    EXPECT_ERROR(read_json_file((dir() / "absent.json").string(), "config"), "absent.json", "cannot open config");
}

TEST(HostileConfig, SizesAreLimitedAndConsistent) {
    auto config = [&](nlohmann::json changes) {
        nlohmann::json c = {{"model_type", "bert"},        {"vocab_size", 100},       {"hidden_size", 8},
                            {"num_hidden_layers", 2},      {"num_attention_heads", 2}, {"intermediate_size", 16}};
        for (auto& [k, v] : changes.items()) c[k] = v;
        return read_hf_config(file("cfg/config.json", c.dump()));
    };
    EXPECT_EQ(config({}).head_size, 4);
    EXPECT_ERROR(config({{"num_hidden_layers", 1000000000}}), "config.json",
                 "'num_hidden_layers' = 1000000000 is outside the supported range 1..1024");
    EXPECT_ERROR(config({{"num_hidden_layers", 1099511627776LL}}), "config.json", "outside the supported range");
    EXPECT_ERROR(config({{"hidden_size", -8}}), "config.json", "'hidden_size' = -8 is outside");
    EXPECT_ERROR(config({{"num_attention_heads", 3}}), "config.json", "hidden_size 8 is not divisible by num_attention_heads 3");
    EXPECT_ERROR(config({{"vocab_size", 2.5}}), "config.json", "'vocab_size' must be an integer");
    EXPECT_ERROR(config({{"hidden_act", 1}}), "config.json", "'hidden_act' must be a string");
    EXPECT_ERROR(config({{"hidden_act", "swish"}}), "config.json", "unsupported activation 'swish'");
    EXPECT_ERROR(config({{"layer_norm_eps", -1}}), "config.json", "'layer_norm_eps' = -1 is outside");
    EXPECT_ERROR(config({{"pad_token_id", 100}}), "config.json", "'pad_token_id' = 100 is outside the supported range 0..99");
    EXPECT_ERROR(config({{"vocab_size", 9000000}, {"hidden_size", 4096}, {"num_attention_heads", 4}}), "config.json",
                 "parameters, more than the limit");
    EXPECT_ERROR(config({{"model_type", "xlnet"}, {"d_model", 8}, {"n_layer", 2}, {"n_head", 2}, {"d_head", 3}, {"d_inner", 4}}),
                 "config.json", "d_head 3 must equal d_model 8 / n_head 2");
    EXPECT_ERROR(read_hf_config(file("cfg2/config.json", "[1, 2]")), "config.json", "must hold a JSON object");
    // RoBERTa: pad 1 by default (RobertaConfig's), positions from pad + 1: 514 embeddings hold 512 tokens, and a
    // table that leaves no position after the pad is refused.
    const HfConfig roberta = config({{"model_type", "roberta"}, {"max_position_embeddings", 514}});
    EXPECT_EQ(roberta.pad_token_id, 1);
    EXPECT_EQ(roberta.position_offset, 2);
    EXPECT_EQ(roberta.max_tokens(), 512);
    EXPECT_EQ(config({{"model_type", "roberta"}, {"pad_token_id", 0}, {"max_position_embeddings", 40}}).max_tokens(), 39);
    EXPECT_EQ(config({{"max_position_embeddings", 514}}).max_tokens(), 514);  // BERT: no offset
    EXPECT_ERROR(config({{"model_type", "roberta"}, {"pad_token_id", 7}, {"max_position_embeddings", 8}}), "config.json",
                 "max_position_embeddings 8 leaves no position after pad_token_id 7");
    EXPECT_ERROR(config({{"model_type", "robrta"}}), "config.json",
                 "unknown model_type 'robrta' (expected bert, roberta, distilbert, albert, xlnet, gpt2, gpt_neox, llama, "
                 "mistral or qwen2)");
    // DistilBERT's own names (dim, n_layers, n_heads, hidden_dim), no token types, LayerNorm eps 1e-12.
    const HfConfig distilbert = config({{"model_type", "distilbert"}, {"dim", 12}, {"n_layers", 3}, {"n_heads", 4},
                                        {"hidden_dim", 20}, {"sinusoidal_pos_embds", true}, {"activation", "relu"}});
    EXPECT_EQ(distilbert.hidden_size, 12);
    EXPECT_EQ(distilbert.layers, 3);
    EXPECT_EQ(distilbert.head_size, 3);
    EXPECT_EQ(distilbert.intermediate_size, 20);
    EXPECT_EQ(distilbert.type_vocab_size, 0);
    EXPECT_TRUE(distilbert.sinusoidal_positions);
    EXPECT_EQ(distilbert.activation, "relu");
    EXPECT_ERROR(config({{"model_type", "distilbert"}, {"dim", 12}, {"n_layers", 3}, {"n_heads", 5}, {"hidden_dim", 20}}),
                 "config.json", "dim 12 is not divisible by n_heads 5");
    EXPECT_ERROR(config({{"model_type", "distilbert"}, {"dim", 12}, {"n_heads", 4}, {"hidden_dim", 20}}), "config.json",
                 "'n_layers'");
    // Settings that change transformers' forward are read or refused, never ignored (a helper's sweep against
    // transformers 4.57.6, docs/reliability.md Part 12).
    EXPECT_EQ(config({{"model_type", "albert"}, {"embedding_size", 4}}).activation, "gelu_new");  // AlbertConfig's
    EXPECT_EQ(config({}).activation, "gelu");
    EXPECT_ERROR(config({{"position_embedding_type", nullptr}}), "config.json",
                 "position_embedding_type null (no position embeddings) is not supported (only \"absolute\")");
    EXPECT_ERROR(config({{"position_embedding_type", "none"}}), "config.json",
                 "position_embedding_type \"none\" is not supported (only \"absolute\")");
    EXPECT_ERROR(config({{"model_type", "roberta"}, {"is_decoder", true}}), "config.json",
                 "is_decoder true (a causal RoBERTa, as its ForCausalLM) is not supported");
    EXPECT_EQ(config({{"model_type", "albert"}, {"embedding_size", 4}, {"is_decoder", true}}).layers, 2);  // ignored there
    const auto xlnet = [&](nlohmann::json changes) {
        nlohmann::json c = {{"model_type", "xlnet"}, {"vocab_size", 100}, {"d_model", 8}, {"n_layer", 2}, {"n_head", 2},
                            {"d_inner", 16}};
        for (auto& [k, v] : changes.items()) c[k] = v;
        return read_hf_config(file("cfg/config.json", c.dump()));
    };
    EXPECT_EQ(xlnet({}).head_size, 4);  // XLNetConfig's d_model / n_head
    EXPECT_ERROR(xlnet({{"n_head", 3}}), "config.json", "d_model 8 is not divisible by n_head 3");
    const auto qwen2 = [&](nlohmann::json changes) {
        nlohmann::json c = {{"model_type", "qwen2"}, {"vocab_size", 100}, {"hidden_size", 8}, {"intermediate_size", 16},
                            {"num_hidden_layers", 3}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}};
        for (auto& [k, v] : changes.items()) c[k] = v;
        return read_hf_config(file("cfg/config.json", c.dump()));
    };
    EXPECT_ERROR(qwen2({{"partial_rotary_factor", 0.5}}), "config.json",
                 "partial_rotary_factor 0.5 is not supported (rotary positions on the whole head only)");
    const HfConfig window_by_rule = qwen2({{"use_sliding_window", true}, {"sliding_window", 4}, {"max_window_layers", 1}});
    EXPECT_FALSE(window_by_rule.sliding_at(0));
    EXPECT_TRUE(window_by_rule.sliding_at(2));
    const HfConfig window_by_type = qwen2({{"use_sliding_window", true}, {"sliding_window", 4}, {"max_window_layers", 0},
                                           {"layer_types", {"full_attention", "sliding_attention", "full_attention"}}});
    EXPECT_FALSE(window_by_type.sliding_at(0));
    EXPECT_TRUE(window_by_type.sliding_at(1));
    EXPECT_FALSE(window_by_type.sliding_at(2));
    EXPECT_ERROR(qwen2({{"layer_types", {"full_attention", "sliding_attention", "full_attention"}}}), "config.json",
                 "layer_types makes layer 1 sliding_attention, but there is no window");
    EXPECT_ERROR(qwen2({{"layer_types", {"full_attention"}}}), "config.json", "layer_types must list one type per layer (3)");
    EXPECT_ERROR(qwen2({{"layer_types", {"full_attention", "chunked_attention", "full_attention"}}}), "config.json",
                 "layer_types holds 'chunked_attention' (expected full_attention or sliding_attention)");
    // A size left out takes the class's default, and the error it leads to says so.
    EXPECT_ERROR(qwen2({{"num_attention_heads", nullptr}}), "config.json",
                 "hidden_size 8 is not divisible by num_attention_heads 32 (and no head_dim is given) (absent or null in config.json, "
                 "so their defaults: num_attention_heads)");
}

TEST(HostileManifest, ShardsAreNamedFilesOfTheRightSize) {
    const std::string shard(16, '\0');
    auto manifest = [&](const std::string& name, const nlohmann::json& weights_manifest) {
        file(name + "/s1", shard);
        file(name + "/model.json", nlohmann::json{{"weightsManifest", weights_manifest}}.dump());
        return read_tfjs_weights((dir() / name).string());
    };
    auto group = [](nlohmann::json paths, nlohmann::json shape, std::string name = "w") {
        return nlohmann::json::array({{{"paths", paths}, {"weights", {{{"name", name}, {"shape", shape}, {"dtype", "float32"}}}}}});
    };
    EXPECT_EQ(manifest("m0", group({"s1"}, {2, 2})).front().bytes.size(), 16u);
    EXPECT_ERROR(manifest("m1", group({"../m0/s1"}, {2, 2})), "model.json", "is not a file name in the model folder");
    EXPECT_ERROR(manifest("m2", group({"/dev/zero"}, {2, 2})), "model.json", "is not a file name");
    EXPECT_ERROR(manifest("m3", group({"s1"}, {4, 2})), "s1", "weight shards are truncated: they hold 16 bytes");
    EXPECT_ERROR(manifest("m4", group({"s1"}, {3})), "model.json", "weight shards hold 16 bytes, the manifest describes 12");
    EXPECT_ERROR(manifest("m5", group({"s1"}, {4294967296ULL, 4294967296ULL})), "weight 'w'", "more elements than fit");
    EXPECT_ERROR(manifest("m6", group({"nope"}, {2, 2})), "nope", "missing weight shard");
    nlohmann::json twice = group({"s1"}, {2});
    twice[0]["weights"].push_back({{"name", "w"}, {"shape", {2}}, {"dtype", "float32"}});
    EXPECT_ERROR(manifest("m7", twice), "weight 'w'", "appears twice");
    EXPECT_ERROR(manifest("m8", nlohmann::json::object()), "model.json", "weightsManifest is not a list");
}

TEST(HostileText, HugeLinesAndWordsAreBounded) {
    // A one-word line beyond 1 MiB is refused before any tokenizer sees it (a 50 MB one took 4 GB before).
    EXPECT_ERROR(read_sentences(file("word.txt", std::string(2u << 20, 'a'))), "word.txt",
                 "line 1 is 2097152 bytes long, more than the limit");
    // Inside the limit, WordPiece's 100-character rule: [UNK], and the length is counted without copying.
    const auto tokenizer = load_wordpiece(file("v/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##a\n"));
    EXPECT_EQ(tokenizer->encode(std::string(500000, 'a')), std::vector<int>{1});
    EXPECT_EQ(utf8::length("na\xc3\xafve \xe6\x9d\xb1"), 7u);
    EXPECT_ERROR(read_sentences(file("blank.txt", "\n \n\t\n")), "blank.txt", "no text in file");
}

TEST(HostileVocabulary, LimitsAndTypes) {
    EXPECT_ERROR(load_wordpiece(file("v1/vocab.txt", "[CLS]\n[SEP]\n")), "vocab.txt", "2 entries");
    nlohmann::json pieces = nlohmann::json::array();
    for (int i = 0; i < 7; ++i) pieces.push_back({"p" + std::to_string(i), -1.0});
    pieces.push_back({std::string(300, 'x'), -1.0});
    file("u1/vocab.json", pieces.dump());
    EXPECT_ERROR(load_use_lite_tokenizer((dir() / "u1").string()), "vocab.json", "piece of 300 characters");
    file("u2/vocab.json", "[[\"a\", 1], [\"b\"]]");
    EXPECT_ERROR(load_use_lite_tokenizer((dir() / "u2").string()), "vocab.json", "more than 6");
}
