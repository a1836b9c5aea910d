#pragma once
// Minimal UTF-8 handling for BERT's basic tokenizer. Unicode coverage: ASCII fully; accent stripping and lower-casing
// for Latin-1 Supplement and Latin Extended-A (enough for English text such as RTE); punctuation for ASCII, Latin-1
// and the General Punctuation / CJK Symbols blocks; CJK Unified Ideographs stand alone as in BERT.
#include <string>
#include <vector>

namespace rankscope::utf8 {

std::vector<std::string> characters(const std::string& text);  // one UTF-8 sequence per entry
std::size_t length(const std::string& text);
// Clean, split on whitespace, lower-case + strip accents (when asked), split off punctuation and CJK characters.
std::vector<std::string> basic_split(const std::string& text, bool lower_case);
// Split on whitespace only.
std::vector<std::string> basic_split_whitespace(const std::string& text);
// Lower-case (with accents stripped, as for uncased BERT/ALBERT).
std::string lower(const std::string& text);

}  // namespace rankscope::utf8
