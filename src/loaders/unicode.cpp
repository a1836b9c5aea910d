#include "unicode.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "rankscope/error.hpp"

namespace rankscope::unicode {

namespace {

// utf8proc_map with the input's length given instead of NUL-terminated (text may hold NUL).
std::string normalize(const std::string& text, utf8proc_option_t options, const std::string& source) {
    utf8proc_uint8_t* output = nullptr;
    const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                                 static_cast<utf8proc_ssize_t>(text.size()), &output, options);
    if (length < 0) throw Error(std::string("text is not valid UTF-8 (") + utf8proc_errmsg(length) + ")", source);
    const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(output, &std::free);
    return std::string(reinterpret_cast<const char*>(output), static_cast<std::size_t>(length));
}

}  // namespace

// utf8proc_NFKC's and utf8proc_NFC's options.
std::string nfkc(const std::string& text, const std::string& source) {
    return normalize(text, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT), source);
}

std::string nfc(const std::string& text, const std::string& source) {
    return normalize(text, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE), source);
}

}  // namespace rankscope::unicode
