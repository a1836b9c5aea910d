#pragma once
// Unicode normalisation through utf8proc (Debian's libutf8proc), for tokenizers whose reference normalises its input.
#include <string>

namespace rankscope::unicode {

// NFKC (compatibility decomposition, then canonical composition), as JavaScript's String.prototype.normalize("NFKC")
// that the USE lite package applies: "3½" → "31⁄2", "ﬁ" → "fi", U+00A0 → ' '. Throws rankscope::Error on invalid
// UTF-8, naming `source`.
std::string nfkc(const std::string& text, const std::string& source);
// NFC (canonical decomposition, then composition), the normalizer of Qwen2's tokenizer.json. Same errors.
std::string nfc(const std::string& text, const std::string& source);

}  // namespace rankscope::unicode
