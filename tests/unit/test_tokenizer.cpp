// WordPiece against hand-checked cases (the examples of BERT's own tokenizer tests), and text packing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "loaders/added_tokens.hpp"
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

TEST(AddedTokens, LeftmostLongestMatchWithLstripAndRstrip) {
    using rankscope::detail::AddedToken;
    using rankscope::detail::TextSegment;
    const rankscope::detail::AddedTokenSplitter splitter({{"<m>", 7, true, false}, {"<m><m>", 8}, {"</s>", 9, false, true}});
    const auto segments = splitter.split("a  <m> b<m><m>\xc2\xa0<m></s> \xe3\x80\x80" "c");
    // "a  " loses its spaces to <m>'s lstrip; <m><m> is one token (longest); U+00A0 is taken by the next <m>'s lstrip;
    // </s>'s rstrip takes " " and U+3000.
    const std::vector<std::pair<std::string, int>> expected = {{"a", -1}, {"", 7}, {" b", -1}, {"", 8}, {"", 7},
                                                               {"", 9}, {"c", -1}};
    ASSERT_EQ(segments.size(), expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        EXPECT_EQ(segments[k].text, expected[k].first) << k;
        EXPECT_EQ(segments[k].id, expected[k].second) << k;
    }
    // single_word: not where a word character (\w: letters, digits, marks, "_") touches it; the search goes on after.
    rankscope::detail::AddedToken word{"<w>", 5};
    word.single_word = true;
    const auto words = rankscope::detail::AddedTokenSplitter({word}).split("a<w> <w>b <w>, _<w> \xc3\xa9<w>");
    ASSERT_EQ(words.size(), 3u);
    EXPECT_EQ(words[0].text, "a<w> <w>b ");
    EXPECT_EQ(words[1].id, 5);
    EXPECT_EQ(words[2].text, ", _<w> \xc3\xa9<w>");  // "_" and "é" are word characters
    // As the regex crate's \w: "²" (category No) is not a word character, "Ⓐ" (Other_Alphabetic) is.
    const auto squared = rankscope::detail::AddedTokenSplitter({word}).split("x\xc2\xb2<w> \xe2\x92\xb6<w>");
    ASSERT_EQ(squared.size(), 3u);
    EXPECT_EQ(squared[1].id, 5);
    EXPECT_EQ(squared[2].text, " \xe2\x92\xb6<w>");
    // normalized: matched in the normalized text (here lower-cased), after the tokens matched as they are.
    rankscope::detail::AddedToken lower{"Ab", 6};
    lower.normalized = true;
    const auto lowered = rankscope::detail::AddedTokenSplitter(
        {lower, {"<M>", 7}}, [](const std::string& text) {
            std::string out = text;
            for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            return out;
        }).split("xAB<M>aB<m>");
    ASSERT_EQ(lowered.size(), 5u);
    EXPECT_EQ(lowered[0].text, "x");
    EXPECT_EQ(lowered[1].id, 6);
    EXPECT_EQ(lowered[2].id, 7);
    EXPECT_EQ(lowered[3].id, 6);
    EXPECT_EQ(lowered[4].text, "<m>");  // "<M>" is matched as it is only
    EXPECT_EQ(rankscope::detail::AddedTokenSplitter().split("x <m>").size(), 1u);  // no tokens: the whole text
    EXPECT_TRUE(rankscope::detail::AddedTokenSplitter({{"<m>", -1}}).empty());     // no id: not matched
}

TEST(AddedTokens, TokenizerConfigReplacesTheClassDefaults) {
    const auto config = nlohmann::json::parse(R"({
        "cls_token": "<s>", "mask_token": {"content": "<mask>", "lstrip": false, "rstrip": true}, "pad_token": null,
        "additional_special_tokens": ["<x>"],
        "added_tokens_decoder": {"42": {"content": "<y>", "lstrip": true, "special": true}}})");
    const auto configured = rankscope::detail::configured_special_tokens(rankscope::detail::albert_special_tokens(), config, "tc.json");
    EXPECT_EQ(configured.content("cls_token", "tc.json"), "<s>");
    EXPECT_EQ(configured.content("sep_token", "tc.json"), "[SEP]");  // the default
    EXPECT_THROW(configured.content("pad_token", "tc.json"), Error);  // null: none
    std::map<std::string, rankscope::detail::AddedToken> by_content;
    for (const auto& token : configured.tokens) by_content[token.content] = token;
    EXPECT_EQ(by_content.count("<pad>"), 0u);
    EXPECT_EQ(by_content.count("[CLS]"), 1u);  // still ALBERT's bos_token, as in AlbertTokenizer
    EXPECT_FALSE(by_content.at("<mask>").lstrip);  // an object's flags replace ALBERT's lstrip
    EXPECT_TRUE(by_content.at("<mask>").rstrip);
    EXPECT_EQ(by_content.at("<x>").id, -1);
    EXPECT_EQ(by_content.at("<y>").id, 42);
    EXPECT_TRUE(by_content.at("<y>").lstrip);
    // A string keeps the class's lstrip (AlbertTokenizer wraps its mask token).
    const auto string_mask = rankscope::detail::configured_special_tokens(
        rankscope::detail::albert_special_tokens(), nlohmann::json::parse(R"({"mask_token": "<m>"})"), "tc.json");
    const auto string_mask_token = std::find_if(string_mask.tokens.begin(), string_mask.tokens.end(),
                                                [](const auto& token) { return token.content == "<m>"; });
    ASSERT_NE(string_mask_token, string_mask.tokens.end());
    EXPECT_TRUE(string_mask_token->lstrip);
    // XLNet's default additional tokens are replaced by the config's list.
    const auto xlnet = rankscope::detail::configured_special_tokens(
        rankscope::detail::xlnet_special_tokens(), nlohmann::json::parse(R"({"additional_special_tokens": []})"), "tc.json");
    ASSERT_FALSE(xlnet.tokens.empty());
    for (const auto& token : xlnet.tokens) EXPECT_NE(token.content, "<eop>");
    for (const char* bad : {R"({"cls_token": 3})", R"({"cls_token": ""})", R"({"added_tokens_decoder": {"x": {"content": "a"}}})",
                            R"({"added_tokens_decoder": {"-1": {"content": "a"}}})", R"({"additional_special_tokens": "a"})",
                            R"({"mask_token": {"content": "<m>", "lstrip": "yes"}})"})
        EXPECT_THROW(rankscope::detail::configured_special_tokens(rankscope::detail::bert_special_tokens(), nlohmann::json::parse(bad), "tc.json"),
                     Error)
            << bad;
}

TEST(AddedTokens, FoldersSavedBeforeAddedTokensDecoderAreRead) {
    // transformers < 4.34 wrote special_tokens_map.json and added_tokens.json; tokenizer.json's added_tokens too.
    const fs::path folder = fs::temp_directory_path() / ("rankscope-legacy-" + std::to_string(::getpid()));
    fs::create_directories(folder);
    std::ofstream(folder / "special_tokens_map.json")
        << R"({"mask_token": {"content": "<m>", "lstrip": true}, "additional_special_tokens": ["<e1>"]})";
    std::ofstream(folder / "added_tokens.json") << R"({"<e1>": 30, "foo": 31})";
    std::ofstream(folder / "tokenizer.json") << R"({"added_tokens": [{"id": 32, "content": "<t>", "special": true}]})";
    const auto config = nlohmann::json::parse(R"({"cls_token": "<c>", "additional_special_tokens": ["<e0>"]})");
    const auto merged = rankscope::detail::with_legacy_token_files(config, folder.string(), true);
    EXPECT_EQ(merged["mask_token"]["content"], "<m>");
    EXPECT_EQ(merged["cls_token"], "<c>");
    EXPECT_EQ(merged["additional_special_tokens"], nlohmann::json::parse(R"(["<e0>", "<e1>"])"));
    const auto& decoder = merged["added_tokens_decoder"];
    EXPECT_EQ(decoder["30"]["special"], true);   // named by additional_special_tokens
    EXPECT_EQ(decoder["31"]["special"], false);  // a plain added token: normalized
    EXPECT_EQ(decoder["31"]["normalized"], true);
    EXPECT_EQ(decoder["32"]["content"], "<t>");
    EXPECT_EQ(decoder["32"]["special"], true);  // as the json says
    EXPECT_FALSE(rankscope::detail::with_legacy_token_files(config, folder.string(), false)["added_tokens_decoder"].contains("32"));
    // A config that has added_tokens_decoder is read as it is (transformers ignores the old files then).
    const auto modern = nlohmann::json::parse(R"({"added_tokens_decoder": {}})");
    EXPECT_EQ(rankscope::detail::with_legacy_token_files(modern, folder.string(), true), modern);
    std::ofstream(folder / "added_tokens.json") << R"({"<e1>": "x"})";
    EXPECT_THROW(rankscope::detail::with_legacy_token_files(config, folder.string(), true), Error);
    std::ofstream(folder / "special_tokens_map.json") << "[1]";
    EXPECT_THROW(rankscope::detail::with_legacy_token_files(config, folder.string(), true), Error);
    fs::remove_all(folder);
}

TEST(AddedTokens, SlowTokenizersLowerCaseAllButTheirSpecialStrings) {
    const auto configured = rankscope::detail::configured_special_tokens(
        rankscope::detail::albert_special_tokens(),
        nlohmann::json::parse(R"({"added_tokens_decoder": {"9": {"content": "NewSpecial", "special": true},
                                                            "8": {"content": "zzq", "special": false}}})"),
        "tc.json");
    // [MASK] (a role) and zzq (normalized, not special) keep their case; NewSpecial (named by no role) does not.
    EXPECT_EQ(rankscope::detail::lower_case_except("[MASK] <UNK> NewSpecial ZZQ zzq", configured.tokens),
              "[MASK] <unk> newspecial zzq zzq");
}

TEST(WordPiece, SpecialTokensInTheTextAreMatchedAndRenamedOnesAreRead) {
    const auto vocab = write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "[", "mask", "]", "x"});
    // "[MASK]" is [MASK]; "[mask]" is text; the words around are split as before.
    EXPECT_EQ(load_wordpiece(vocab)->encode("the [MASK]x [mask]"), (std::vector<int>{5, 4, 9, 6, 7, 8}));
    const auto renamed = write_vocab({"<pad>", "<unk>", "<s>", "</s>", "<mask>", "the", "x"});
    EXPECT_THROW(load_wordpiece(renamed), Error);  // BertTokenizer's [UNK], [CLS], [SEP] are not in it
    const auto config = nlohmann::json::parse(
        R"({"unk_token": "<unk>", "cls_token": "<s>", "sep_token": "</s>", "pad_token": "<pad>", "mask_token": "<mask>"})");
    const auto tokenizer = load_wordpiece(renamed, {}, &config);
    EXPECT_EQ(tokenizer->prefix(), std::vector<int>{2});
    EXPECT_EQ(tokenizer->suffix(), std::vector<int>{3});
    EXPECT_EQ(tokenizer->unknown_id(), 1);
    EXPECT_EQ(tokenizer->encode("the<mask> y"), (std::vector<int>{5, 4, 1}));
    EXPECT_TRUE(tokenizer->special_tokens_read_as_text().empty());
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
