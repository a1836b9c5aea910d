#pragma once
// UTF-8 handling for BERT's basic tokenizer, over the whole of Unicode through utf8proc's tables: control and format
// characters removed, whitespace and punctuation by general category, lower case with the Final_Sigma rule, accents
// stripped by canonical decomposition (NFD) without nonspacing marks, CJK Unified Ideographs on their own (as
// transformers' BertTokenizer and the `tokenizers` BertNormalizer; tests/transformers/ compares them).
#include <string>
#include <vector>

namespace rankscope::utf8 {

// The byte offset of the first invalid UTF-8 sequence (overlong forms, surrogates and code points above U+10FFFF
// included, as Python's strict decoder), or std::string::npos when `text` is valid.
std::size_t first_invalid(const std::string& text);
std::vector<std::string> characters(const std::string& text);  // one UTF-8 sequence per entry
std::size_t length(const std::string& text);
// BertTokenizer's BasicTokenizer settings (tokenizer_config.json): do_lower_case, strip_accents (null: as
// do_lower_case), tokenize_chinese_chars.
struct BasicOptions {
    bool lower_case = true;
    bool strip_accents = true;
    bool split_chinese = true;
};
// Clean, split on whitespace, lower-case and strip accents (as asked), split off punctuation and (as asked) CJK
// characters.
std::vector<std::string> basic_split(const std::string& text, const BasicOptions& options);
// The text as the `tokenizers` BertNormalizer gives it: cleaned (controls removed, whitespace a space), CJK
// characters spaced (as asked), lower-cased and accents stripped (as asked). basic_split of it gives the same words.
std::string basic_normalize(const std::string& text, const BasicOptions& options);
// Split on whitespace only.
std::vector<std::string> basic_split_whitespace(const std::string& text);
// Lower-case, then strip accents (NFD without nonspacing marks), as for uncased BERT.
std::string lower(const std::string& text);
// Lower case only (Unicode simple case mapping, one character at a time).
std::string lower_only(const std::string& text);
// NFKD without the characters of nonzero canonical combining class: AlbertTokenizer's and XLNetTokenizer's
// preprocess_text when keep_accents is false (their default).
std::string strip_combining_compatibility(const std::string& text);

}  // namespace rankscope::utf8
