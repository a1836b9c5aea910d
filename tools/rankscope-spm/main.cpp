// rankscope-spm: SentencePiece in its own process.
//
// Debian 12's libsentencepiece and libtorch both use libprotobuf; loaded into one process after torch, sentencepiece's
// static initialisation crashes before main(). rankscope therefore runs SentencePiece here, in a helper without torch:
//   rankscope-spm encode MODEL TEXT_FILE     one line of space-separated ids per input line
//   rankscope-spm info MODEL PIECE...        "<vocab size>", the id of each piece (-1 when absent), then the id of
//                                            the unknown piece (-1 when the model has none)
//   rankscope-spm train INPUT PREFIX VOCAB [unigram|bpe]   trains a model on INPUT (one sentence per line)
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <iostream>
#include <string>
#include <unordered_map>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/parent_watch.hpp"

int main(int argc, char** argv) {
    rankscope::stop_with_parent();
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "train" && (argc == 5 || argc == 6)) {
        const std::string model_type = argc == 6 ? argv[5] : "unigram";
        if (model_type != "unigram" && model_type != "bpe") {
            std::cerr << "unknown model type " << model_type << " (expected unigram or bpe)\n";
            return 2;
        }
        // Options as a map, not one "--input=... --model_prefix=..." string: that string is split at spaces, so a path
        // holding a space would be cut in two.
        const std::unordered_map<std::string, std::string> options = {
            {"input", argv[2]}, {"model_prefix", argv[3]}, {"vocab_size", argv[4]}, {"model_type", model_type},
            {"character_coverage", "1.0"}, {"minloglevel", "2"},
            {"user_defined_symbols", "[CLS],[SEP],[MASK],<sep>,<cls>"}, {"pad_id", "0"}, {"unk_id", "1"},
            {"bos_id", "-1"}, {"eos_id", "-1"}, {"pad_piece", "<pad>"}, {"unk_piece", "<unk>"}};
        const auto status = sentencepiece::SentencePieceTrainer::Train(options);
        if (!status.ok()) {
            std::cerr << status.ToString() << "\n";
            return 2;
        }
        return 0;
    }
    if ((command != "encode" || argc != 4) && (command != "info" || argc < 3)) {
        std::cerr << "usage: rankscope-spm encode MODEL TEXT_FILE | info MODEL PIECE... | train INPUT PREFIX VOCAB [unigram|bpe]\n";
        return 2;
    }
    // The model is read as every outside file is (io.hpp): a regular file of bounded size, checked before a byte is
    // read (SentencePiece's own Load reads a FIFO forever or /dev/zero until memory runs out).
    std::string serialized;
    try {
        serialized = rankscope::read_file_limited(argv[2], rankscope::kMaxSentencePieceModelBytes, "SentencePiece model");
    } catch (const rankscope::Error& error) {
        std::cerr << error.one_line() << "\n";
        return 2;
    }
    sentencepiece::SentencePieceProcessor processor;
    const auto status = processor.LoadFromSerializedProto(serialized);
    if (!status.ok()) {
        std::cerr << status.ToString() << "\n";
        return 2;
    }
    if (command == "info") {
        std::cout << processor.GetPieceSize() << "\n";
        for (int i = 3; i < argc; ++i) {
            const int id = processor.PieceToId(argv[i]);
            std::cout << (processor.IdToPiece(id) == argv[i] ? id : -1) << "\n";
        }
        const int unknown = processor.unk_id();
        std::cout << (unknown >= 0 && processor.IsUnknown(unknown) ? unknown : -1) << "\n";
        return 0;
    }
    std::ifstream in(argv[3]);
    if (!in) {
        std::cerr << "cannot open " << argv[3] << "\n";
        return 2;
    }
    std::string line;
    std::vector<int> ids;
    while (std::getline(in, line)) {
        processor.Encode(line, &ids);
        for (std::size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
        std::cout << "\n";
    }
    return 0;
}
