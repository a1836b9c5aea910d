#pragma once
// Tokenizers of the Hugging Face folders rankscope reads, and packing of text into fixed-length samples.
//
//   auto tokenizer = load_tokenizer("path/to/model", config);   // vocab.txt, spiece.model, tokenizer.model or .json
//   std::vector<int> ids = tokenizer->encode("How old are you?");   // content ids, no special tokens
//   ModelBatch batch = pack_text(*tokenizer, sentences, 32, 128);   // 32 samples of exactly 128 real tokens
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace rankscope {

// Declared in models.hpp (torch): the tokenizers themselves stay torch-free.
struct HfConfig;
struct ModelBatch;

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    virtual std::vector<int> encode(const std::string& text) const = 0;
    virtual std::vector<std::vector<int>> encode_batch(const std::vector<std::string>& texts) const {
        std::vector<std::vector<int>> out;
        for (const auto& text : texts) out.push_back(encode(text));
        return out;
    }
    // Ids of the special tokens around one sample: BERT/ALBERT [CLS] x [SEP]; XLNet x <sep> <cls> (at the END).
    virtual std::vector<int> prefix() const = 0;
    virtual std::vector<int> suffix() const = 0;
    // Token type of the special tokens in `suffix` (XLNet gives <cls> its own segment, 2); content uses 0.
    virtual std::vector<int> suffix_types() const { return std::vector<int>(suffix().size(), 0); }
    virtual int vocab_size() const = 0;
    virtual std::string source() const = 0;  // the file it was read from
    // The id it gives a word it cannot spell ([UNK]); -1 when it has none or does not say.
    virtual int unknown_id() const { return -1; }
    // Special-token strings that this tokenizer reads as plain characters when the text holds them. The tokenizers of a
    // Hugging Face folder match their special and added tokens as single tokens, as transformers does ("[MASK]" is
    // [MASK]'s id): they list only those whose string is not in the vocabulary. USE lite matches none; a SentencePiece
    // model trained here matches its user-defined symbols ([CLS] [SEP] [MASK] <sep> <cls>, SentencePiece itself) only.
    virtual std::vector<std::string> special_tokens_read_as_text() const {
        return {"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<s>", "</s>", "<unk>", "<pad>", "<mask>", "<cls>", "<sep>"};
    }
};

// BertTokenizer's text settings, as tokenizer_config.json gives them, with transformers' defaults.
struct WordPieceSettings {
    bool lower_case = true;     // do_lower_case
    int strip_accents = -1;     // strip_accents: 1 true, 0 false, -1 null (= lower_case)
    bool split_chinese = true;  // tokenize_chinese_chars: each CJK character a word of its own
    bool lower_case_given = false;  // tokenizer_config.json set do_lower_case (else a cased-looking vocab is warned of)
};
// tokenizer_config.json's WordPiece settings (defaults where a key is absent; `tokenizer_config`: the parsed file, an
// empty object when there is none), and its tokenizer_class. Errors name `path`.
WordPieceSettings read_wordpiece_settings(const nlohmann::json& tokenizer_config, const std::string& path,
                                          std::string* tokenizer_class = nullptr);
// WordPiece from vocab.txt, as BERT's tokenizer does it: special tokens matched in the text first, then clean, split on
// whitespace and punctuation (CJK characters stand alone unless split_chinese is false), lower-case and strip accents
// as the settings say, then greedy longest-match with "##" continuations. A vocabulary with capitalised pieces
// lower-cased by default (no do_lower_case given) is warned of: transformers' BertTokenizer does the same, and most of
// it is then [UNK]. The special tokens are BertTokenizer's ([CLS] x [SEP], [UNK], [PAD], [MASK]) unless
// `tokenizer_config` (tokenizer_config.json, read from config_path) names others (*_token, additional_special_tokens,
// added_tokens_decoder).
std::unique_ptr<Tokenizer> load_wordpiece(const std::string& vocab_path, const WordPieceSettings& settings = {},
                                          const nlohmann::json* tokenizer_config = nullptr,
                                          const std::string& config_path = "tokenizer_config.json");
// Path of the rankscope-spm helper (beside the program, or $RANKSCOPE_SPM); SentencePiece runs there because
// libsentencepiece and libtorch cannot share a process on Debian 12 (both use libprotobuf).
std::string spm_helper_path();
// SentencePiece (libsentencepiece, in the helper) from spiece.model; ALBERT lower-cases first; XLNet puts <sep> <cls> at the end.
// keep_accents: tokenizer_config.json's (false by default: NFKD without combining characters). The special tokens of
// AlbertTokenizer / XLNetTokenizer (or `tokenizer_config`'s) are matched in the text, and the text between them is
// prepared and encoded piece by piece, as the slow tokenizers do.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path, const std::string& model_type,
                                              bool lower_case, bool keep_accents = false,
                                              const nlohmann::json* tokenizer_config = nullptr,
                                              const std::string& config_path = "tokenizer_config.json");
// A SentencePiece unigram model trained on `sentences` (in the helper) into `directory`/spiece.model, loaded as
// `model_type` ("bert"/"albert": [CLS] x [SEP]; "xlnet": x <sep> <cls>). Deterministic for the same text.
// For built-in configurations and trained tasks: realistic token statistics without the original vocabulary.
std::unique_ptr<Tokenizer> train_sentencepiece(const std::vector<std::string>& sentences, const std::string& directory,
                                               int vocab_size, const std::string& model_type);
// Special tokens (by content) that frame each sample in place of a tokenizer.json's post_processor, as
// GPTNeoXTokenizerFast's update_post_processor does: its bos_token first when add_bos_token, its eos_token last when
// add_eos_token (both false by default), whatever the json's post_processor says.
struct ReplacedFraming {
    std::vector<std::string> prefix, suffix;
};
// Byte-level BPE from a Hugging Face tokenizer.json (GPT-2, GPT-NeoX, Llama 3, Qwen2; byte_level_bpe.cpp lists what is read and
// what is refused): encode() gives the content ids; prefix()/suffix() the post-processor's special tokens (Llama 3:
// <|begin_of_text|> first; GPT-2: none), or `framing`'s when given.
std::unique_ptr<Tokenizer> load_byte_level_bpe(const std::string& tokenizer_json_path,
                                               const ReplacedFraming* framing = nullptr);
// A tokenizer.json by its model.type: WordPiece (BertTokenizerFast's form: BertNormalizer, BertPreTokenizer; the same
// tokenisation as vocab.txt) or byte-level BPE.
// `wordpiece_settings`, when given, replace a WordPiece json's normalizer settings, as BertTokenizerFast does with
// tokenizer_config.json's (load_tokenizer passes them unless its tokenizer_class is PreTrainedTokenizerFast).
// A WordPiece json's added_tokens are matched in the text, with BertTokenizerFast's special tokens (from
// `tokenizer_config` when given); a byte-level json's added_tokens alone.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& tokenizer_json_path,
                                               const WordPieceSettings* wordpiece_settings = nullptr,
                                               const nlohmann::json* tokenizer_config = nullptr,
                                               const std::string& config_path = "tokenizer_config.json",
                                               const ReplacedFraming* framing = nullptr);
// The tokenizer of a Hugging Face folder: for the Llama family (llama, mistral, qwen2) tokenizer.model if present
// (SentencePiece as LlamaTokenizer: <s> first unless tokenizer_config.json's add_bos_token is false, </s> last when
// add_eos_token is true, the text as it is); else spiece.model, else vocab.txt, else tokenizer.json (WordPiece or
// byte-level BPE; a GPT-NeoX folder's framed as GPTNeoXTokenizerFast frames it: ReplacedFraming).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& directory, const HfConfig& config);

// Sentences of a UTF-8 text file: for a GLUE-style .tsv with a header naming sentence1/sentence2, those columns;
// otherwise one sentence per non-empty line. Throws when the file is missing or has no text.
std::vector<std::string> read_sentences(const std::string& path);
// The tab-separated fields of one .tsv line, empty fields kept.
std::vector<std::string> split_tabs(const std::string& line);
// The repository's RTE training text (data/RTE/train.tsv, found from the working directory or from the program's
// build/bin folder), else "".
std::string default_rte_path();

// Tokenises sentences in order into one stream and cuts it into `samples` samples of exactly `tokens` real tokens
// each (special tokens included; no padding). Throws when the text is too short, naming how many samples it gives.
ModelBatch pack_text(const Tokenizer& tokenizer, const std::vector<std::string>& sentences, int samples, int tokens,
                     const std::string& text_path);

}  // namespace rankscope
