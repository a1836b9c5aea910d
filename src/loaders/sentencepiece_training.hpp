#pragma once
// SentencePiece's trainer, run in the rankscope-spm helper: the one place that writes the training text and starts it
// (train_sentencepiece for built-in configurations and tasks, the pretraining tokenizers).
#include <filesystem>
#include <string>
#include <vector>

namespace rankscope::detail {

// Writes `lines` to `folder`/corpus.txt and trains `folder`/spiece.model and spiece.vocab with `vocab_size` pieces;
// `algorithm` is "unigram" or "bpe". The trainer's output goes to `folder`/train.log, which a failure names.
void train_sentencepiece_model(const std::vector<std::string>& lines, const std::filesystem::path& folder, int vocab_size,
                               const std::string& algorithm);

}  // namespace rankscope::detail
