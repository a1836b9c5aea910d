// tokenizer.json post-processors: see post_processor.hpp.
#include "loaders/post_processor.hpp"

#include <fmt/format.h>

#include "loaders/added_tokens.hpp"  // kMaxTokenId
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope::detail {

namespace {
int checked_id(std::int64_t id, int vocab_size, const std::string& what, const std::string& path) {
    if (id < 0 || id >= vocab_size)
        throw Error(fmt::format("post_processor: {} has no id in the vocabulary of {}", what, vocab_size), path);
    return static_cast<int>(id);
}
}  // namespace

int framing_pair_id(const nlohmann::json& post, const char* key, int vocab_size, const std::string& path) {
    if (!post.contains(key) || !post[key].is_array() || post[key].size() != 2 || !post[key][0].is_string())
        throw Error(std::string("post_processor.") + key + " must be [token, id]", path);
    return checked_id(json_integer(post[key][1], 0, kMaxTokenId, std::string("post_processor.") + key + "'s id", path),
                      vocab_size, std::string("post_processor.") + key, path);
}

Framing template_framing(const nlohmann::json& post, const std::function<int(const std::string&)>& fallback,
                         int vocab_size, const std::string& path) {
    if (!post.contains("single") || !post["single"].is_array())
        throw Error("post_processor: TemplateProcessing without a \"single\" list", path);
    Framing framing;
    bool after = false;
    for (const auto& item : post["single"]) {
        if (item.is_object() && item.contains("Sequence")) {
            after = true;
            continue;
        }
        if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object() ||
            !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
            throw Error("post_processor.single holds " + printable(item.dump(), 60) +
                            " (expected SpecialToken or Sequence items)",
                        path);
        const std::string name = item["SpecialToken"]["id"].get<std::string>();
        const std::string what = "special token '" + printable(name) + "'";
        std::int64_t id = -1;
        if (post.contains("special_tokens") && post["special_tokens"].is_object() && post["special_tokens"].contains(name) &&
            post["special_tokens"][name].is_object() && post["special_tokens"][name].contains("ids") &&
            post["special_tokens"][name]["ids"].is_array() && post["special_tokens"][name]["ids"].size() == 1)
            id = json_integer(post["special_tokens"][name]["ids"][0], 0, kMaxTokenId, "post_processor: the id of " + what, path);
        else
            id = fallback(name);
        (after ? framing.suffix : framing.prefix).push_back(checked_id(id, vocab_size, what, path));
    }
    return framing;
}

}  // namespace rankscope::detail
