// JSON files from outside: bounded read (io.hpp's read_file_limited), bounded nesting, and one-line errors that name
// the file and the position instead of the JSON library's raw message.
#include <nlohmann/json.hpp>

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

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
    const nlohmann::json::parser_callback_t limit_depth = [&](int depth, nlohmann::json::parse_event_t,
                                                             nlohmann::json&) {
        if (depth > kMaxJsonDepth)
            throw Error("not valid JSON here: nested more than " + std::to_string(kMaxJsonDepth) + " levels deep", where);
        return true;
    };
    try {
        return nlohmann::json::parse(text, limit_depth);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error("not valid JSON: " + describe_parse_error(text, e), where);
    } catch (const nlohmann::json::exception& e) {
        throw Error("not valid JSON", where);
    }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
    return parse_json_text(read_file_limited(path, kMaxJsonFileBytes, what), path);
}

}  // namespace rankscope
