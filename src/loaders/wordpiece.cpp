// WordPiece tokenisation as Hugging Face's BertTokenizer (BasicTokenizer + WordpieceTokenizer) does it.
#include <unordered_map>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tokenizer.hpp"
#include "text_utf8.hpp"

namespace rankscope {
namespace {

class WordPiece : public Tokenizer {
public:
    WordPiece(const std::string& path, int lower_case) : path_(path) {
        // One piece per line, id = line index (as Hugging Face's load_vocab); a regular file of bounded size.
        const std::string text = read_file_limited(path, kMaxJsonFileBytes, "vocabulary");
        bool has_upper = false;
        int next_id = 0;
        for (std::size_t start = 0; start < text.size();) {
            std::size_t end = text.find('\n', start);
            if (end == std::string::npos) end = text.size();
            std::string line = text.substr(start, end - start);
            start = end + 1;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            ids_[line] = next_id++;  // a repeated piece keeps its last id, as in Hugging Face
            for (char c : line) has_upper = has_upper || (c >= 'A' && c <= 'Z');
        }
        if (ids_.size() < 5) throw Error("vocabulary has " + std::to_string(ids_.size()) + " entries (at least 5 expected)", path);
        for (const char* special : {"[CLS]", "[SEP]", "[UNK]"})
            if (!ids_.count(special)) throw Error(std::string("vocabulary has no ") + special, path);
        lower_case_ = lower_case >= 0 ? lower_case == 1 : !has_upper;
        size_ = next_id;
    }
    std::vector<int> encode(const std::string& text) const override {
        std::vector<int> out;
        for (const std::string& word : utf8::basic_split(text, lower_case_)) {
            if (utf8::length(word) > 100) {
                out.push_back(ids_.at("[UNK]"));
                continue;
            }
            // Greedy longest match.
            std::vector<int> pieces;
            const auto characters = utf8::characters(word);
            std::size_t start = 0;
            bool bad = false;
            while (start < characters.size()) {
                std::size_t end = characters.size();
                int found = -1;
                while (start < end) {
                    std::string piece = start > 0 ? "##" : "";
                    for (std::size_t i = start; i < end; ++i) piece += characters[i];
                    const auto it = ids_.find(piece);
                    if (it != ids_.end()) {
                        found = it->second;
                        break;
                    }
                    --end;
                }
                if (found < 0) {
                    bad = true;
                    break;
                }
                pieces.push_back(found);
                start = end;
            }
            if (bad) out.push_back(ids_.at("[UNK]"));
            else out.insert(out.end(), pieces.begin(), pieces.end());
        }
        return out;
    }
    std::vector<int> prefix() const override { return {ids_.at("[CLS]")}; }
    std::vector<int> suffix() const override { return {ids_.at("[SEP]")}; }
    int vocab_size() const override { return size_; }
    std::string source() const override { return path_; }

private:
    std::string path_;
    std::unordered_map<std::string, int> ids_;
    bool lower_case_ = false;
    int size_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_wordpiece(const std::string& vocab_path, int lower_case) {
    return std::make_unique<WordPiece>(vocab_path, lower_case);
}

}  // namespace rankscope
