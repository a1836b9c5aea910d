#pragma once
// The special tokens a tokenizer.json post_processor puts around one sequence, shared by the WordPiece and the
// byte-level BPE readers. Torch-free.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankscope::detail {

struct Framing {
    std::vector<int> prefix, suffix;  // ids before and after the text
};

// BertProcessing / RobertaProcessing: `key` ("cls", "sep") is [token, id]; the id, checked to lie below vocab_size.
int framing_pair_id(const nlohmann::json& post, const char* key, int vocab_size, const std::string& path);

// TemplateProcessing's "single": SpecialToken items before the Sequence go to the prefix, after it to the suffix. A
// special token's id comes from the processor's special_tokens (one id), else from `fallback` (-1: none); it must lie
// below vocab_size. Items of another kind are refused naming `path`.
Framing template_framing(const nlohmann::json& post, const std::function<int(const std::string&)>& fallback,
                         int vocab_size, const std::string& path);

}  // namespace rankscope::detail
