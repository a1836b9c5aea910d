// WordPiece against hand-checked cases (the examples of BERT's own tokenizer tests), and text packing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rankscope/error.hpp"
#include "rankscope/models.hpp"  // ModelBatch, HfConfig
#include "rankscope/tokenizer.hpp"

using namespace rankscope;
namespace fs = std::filesystem;

namespace {
std::string write_vocab(const std::vector<std::string>& tokens) {
    const fs::path path = fs::temp_directory_path() / ("rankscope-vocab-" + std::to_string(::getpid()) + ".txt");
    std::ofstream out(path);
    for (const auto& token : tokens) out << token << "\n";
    return path.string();
}
}  // namespace

TEST(WordPiece, UncasedSplitsPunctuationStripsAccentsAndMatchesGreedily) {
    const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un",
                                            "runn", "##ing", ",", "low", "lowest"};
    auto tokenizer = load_wordpiece(write_vocab(vocab));  // transformers' defaults: lower case, strip accents
    // "UNwantéd,running" → un ##want ##ed , runn ##ing   (é → e when uncased)
    EXPECT_EQ(tokenizer->encode("UNwant\xc3\xa9" "d,running"), (std::vector<int>{8, 5, 6, 11, 9, 10}));
    EXPECT_EQ(tokenizer->encode("unwantedX running"), (std::vector<int>{1, 9, 10}));  // no piece covers "x": [UNK]
    EXPECT_EQ(tokenizer->encode("  \t lowest\n"), (std::vector<int>{13}));
    EXPECT_EQ(tokenizer->prefix(), (std::vector<int>{2}));
    EXPECT_EQ(tokenizer->suffix(), (std::vector<int>{3}));
}

TEST(WordPiece, CasedKeepsCaseAndBadVocabIsAnError) {
    WordPieceSettings cased;
    cased.lower_case = false;
    cased.lower_case_given = true;
    auto tokenizer = load_wordpiece(write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "Hello", "hello"}), cased);
    EXPECT_EQ(tokenizer->encode("Hello hello"), (std::vector<int>{4, 5}));
    // Without do_lower_case, transformers' BertTokenizer lower-cases whatever the vocabulary (a warning says so).
    EXPECT_EQ(load_wordpiece(write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "Hello", "hello"}))->encode("Hello hello"),
              (std::vector<int>{5, 5}));
    try {
        load_wordpiece(write_vocab({"a", "b", "c", "d", "e", "f"}));
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_NE(e.one_line().find("[CLS]"), std::string::npos);
    }
}

// BertTokenizer's strip_accents (null: as do_lower_case) and tokenize_chinese_chars, by hand: "Café 北京" with
// accents kept or stripped, the CJK characters split or kept as one word.
TEST(WordPiece, StripAccentsAndChineseCharactersFollowTheSettings) {
    const std::string vocab = write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "cafe", "caf\xc3\xa9", "\xe5\x8c\x97",
                                           "\xe4\xba\xac", "\xe5\x8c\x97\xe4\xba\xac"});
    const std::string text = "Caf\xc3\xa9 \xe5\x8c\x97\xe4\xba\xac";
    WordPieceSettings settings;
    EXPECT_EQ(load_wordpiece(vocab, settings)->encode(text), (std::vector<int>{4, 6, 7}));  // stripped, split
    settings.strip_accents = 0;
    EXPECT_EQ(load_wordpiece(vocab, settings)->encode(text), (std::vector<int>{5, 6, 7}));  // café kept
    settings.split_chinese = false;
    EXPECT_EQ(load_wordpiece(vocab, settings)->encode(text), (std::vector<int>{5, 8}));  // 北京 one word
    settings = {};
    settings.lower_case = false;
    settings.strip_accents = 1;
    EXPECT_EQ(load_wordpiece(vocab, settings)->encode("caf\xc3\xa9"), (std::vector<int>{4}));  // cased, accents stripped
}

TEST(WordPiece, LineSeparatorsSplitAndPrivateUseCharactersAreRemoved) {
    const auto vocab = write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "x", "y", "xy"});
    const auto tokenizer = load_wordpiece(vocab);
    EXPECT_EQ(tokenizer->encode("x\xe2\x80\xa8y"), (std::vector<int>{4, 5}));  // U+2028
    EXPECT_EQ(tokenizer->encode("x\xe2\x80\xa9y"), (std::vector<int>{4, 5}));  // U+2029
    EXPECT_EQ(tokenizer->encode("x\xee\x80\x80y"), (std::vector<int>{6}));     // U+E000 removed: "xy"
}

TEST(PackText, ExactlyTokensPerSampleWithSpecialTokens) {
    auto tokenizer = load_wordpiece(write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"}));
    const ModelBatch batch = pack_text(*tokenizer, {"a b a", "b b", "a a a a"}, 2, 5, "text");
    EXPECT_EQ(batch.input_ids.sizes(), (std::vector<std::int64_t>{2, 5}));
    EXPECT_EQ(batch.input_ids[0][0].item<std::int64_t>(), 2);
    EXPECT_EQ(batch.input_ids[0][4].item<std::int64_t>(), 3);
    EXPECT_EQ(batch.input_ids[1][1].item<std::int64_t>(), 5);  // the stream continues: a b a | b b a ...
    EXPECT_TRUE(batch.attention_mask.eq(1).all().item<bool>());
    EXPECT_THROW(pack_text(*tokenizer, {"a"}, 3, 5, "text"), Error);
}
