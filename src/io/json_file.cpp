// JSON files from outside: bounded read (io.hpp's read_file_limited), bounded nesting, and one-line errors that name
// the file and the position instead of the JSON library's raw message.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

constexpr int kMaxJsonDepth = 64;

// "syntax error at line 3, column 7: unexpected end of input" from a parse error's byte position and message.
std::string describe_parse_error(const std::string& text, const nlohmann::json::parse_error& e) {
    std::size_t line = 1, column = 1;
    const std::size_t end = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (std::size_t i = 0; i < end; ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while
    // parsing value - invalid literal; last read: '...'": keep only the reason between " - " and ";".
    std::string reason = e.what();
    const auto dash = reason.find(" - ");
    reason = dash == std::string::npos ? std::string("syntax error") : reason.substr(dash + 3);
    const auto semicolon = reason.find(';');
    if (semicolon != std::string::npos) reason.resize(semicolon);
    return "syntax error at line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
           printable(reason, 100);
}

template <typename Json>
Json parse_checked(const std::string& text, const std::string& where) {
    // JSON allows no raw NUL (RFC 8259: control characters only escaped); nlohmann's parser took one for the end.
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
        const std::size_t line = 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + nul, '\n'));
        throw Error("not valid JSON: a NUL byte at line " + std::to_string(line) + " (byte " + std::to_string(nul + 1) + ")",
                    where);
    }
    const typename Json::parser_callback_t limit_depth = [&](int depth, typename Json::parse_event_t, Json&) {
        if (depth > kMaxJsonDepth)
            throw Error("not valid JSON here: nested more than " + std::to_string(kMaxJsonDepth) + " levels deep", where);
        return true;
    };
    try {
        return Json::parse(text, limit_depth);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error("not valid JSON: " + describe_parse_error(text, e), where);
    } catch (const nlohmann::json::exception& e) {
        throw Error("not valid JSON", where);
    }
}

}  // namespace

std::string json_text(const nlohmann::json& document, int indent) {
    return document.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_error_reason(const std::exception& error) {
    std::string what = error.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) what = what.substr(what.find("] ") + 2);
    return printable(what, 160);
}

void throw_json_content_error(const std::exception& error, const std::string& path) {
    throw Error("a field of the wrong type or value: " + json_error_reason(error), path);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
    return parse_checked<nlohmann::json>(text, where);
}

nlohmann::ordered_json parse_ordered_json_text(const std::string& text, const std::string& where) {
    return parse_checked<nlohmann::ordered_json>(text, where);
}

std::int64_t json_integer(const nlohmann::json& value, std::int64_t low, std::int64_t high, const std::string& field,
                          const std::string& where) {
    const bool fits = value.is_number_unsigned()  ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(high) &&
                                                       static_cast<std::int64_t>(value.get<std::uint64_t>()) >= low
                      : value.is_number_integer() ? value.get<std::int64_t>() >= low && value.get<std::int64_t>() <= high
                                                  : false;
    if (!fits)
        throw Error(field + " must be an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "], found " +
                        printable(value.dump(), 40),
                    where);
    return value.get<std::int64_t>();
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
    return parse_json_text(read_file_limited(path, kMaxJsonFileBytes, what), path);
}

}  // namespace rankscope
