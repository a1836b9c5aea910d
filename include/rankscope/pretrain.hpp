#pragma once
// Masked-language-model pretraining of BERT and ALBERT on real English (issue 14), so that the paper's pretrained E1
// panels can be made here, and the checkpoints along the way for `rankscope dynamics`.
//
//   Corpus corpus = read_builtin_corpus();                   // WordNet glosses, fortunes, GCIDE, RTE (Debian packages)
//   PretrainSettings settings;  settings.arch = "albert";
//   PretrainResult result = pretrain(settings, corpus, "out/albert");   // resumable: run it again after a kill
//   // out/albert/checkpoints/step-000000 ... step-N: Hugging Face folders (config.json + model.safetensors + tokenizer)
//
// Dimension legend: B samples, n tokens per sample, d hidden size, V vocabulary, M masked tokens in a batch.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankscope {

// ---- corpus (src/pretrain/corpus.cpp) --------------------------------------------------------------------------------
// One unit of text ("sentence": a gloss, an example, a fortune, a dictionary paragraph, an RTE sentence), cleaned to
// one line of plain text, and where it came from.
struct CorpusText {
    std::string text;
    std::string source;  // "wordnet", "fortunes", "gcide", "rte", or the file it was read from
};
struct Corpus {
    std::vector<CorpusText> train, heldout;
    // Per source: units and words (whitespace-separated) in each split.
    nlohmann::json summary() const;
};
// Where the built-in corpus is read from (the Debian packages wordnet-base, fortunes, dict-gcide; RTE from the
// repository). Tests point it at small fixtures.
struct CorpusPaths {
    std::string wordnet_dir = "/usr/share/wordnet";          // data.noun, data.verb, data.adj, data.adv
    std::string fortunes_dir = "/usr/share/games/fortunes";  // fortune files: entries separated by "%" lines
    std::string gcide_file = "/usr/share/dictd/gcide.dict.dz";  // dictzip (gzip) text of the 1913 Webster + GCIDE
    std::string rte_file;                                    // "" = default_rte_path()
};
// The readers, one per source (documented in docs/pretraining.md), each returning cleaned units in file order:
//   WordNet: for each synset line of data.*, "lemma: definition" and each quoted example of its gloss.
//   fortunes: each "%"-separated entry of the text files (the ascii-art files and entries that are mostly not
//             letters are skipped), its lines joined.
//   GCIDE: each definition or note paragraph of an entry (headword, etymology, synonym lists, source tags such as
//          "[1913 Webster]" and citation tails such as "--Shak." removed; markup braces dropped).
//   RTE: the sentence1/sentence2 columns.
// Units shorter than 3 words are dropped; whitespace is collapsed. Missing files are an Error naming the file and the
// Debian package to install.
std::vector<CorpusText> read_wordnet_glosses(const std::string& wordnet_dir);
std::vector<CorpusText> read_fortunes(const std::string& fortunes_dir);
std::vector<CorpusText> read_gcide(const std::string& gcide_file);
// Splits units into train and held-out by a hash of the text (so the split does not depend on the order or the other
// units): about `heldout_fraction` of them held out. Identical texts land on the same side. Each split is then put in
// an order given by another hash of the text, so that the sources are mixed throughout it.
Corpus split_corpus(std::vector<CorpusText> units, double heldout_fraction);
// All four sources, split 98/2.
Corpus read_builtin_corpus(const CorpusPaths& paths = {});
// The user's files (read_sentences: one unit per line, or a GLUE .tsv's sentence columns), split 98/2.
Corpus read_corpus_files(const std::vector<std::string>& files);

// ---- tokenizers (src/pretrain/tokenizer_training.cpp) ------------------------------------------------------------------
// Trains `arch`'s tokenizer on the units (at most 200000, every k-th beyond) into `directory` with SentencePiece's
// trainer: ALBERT a unigram spiece.model on the lower-cased text; BERT a WordPiece vocab.txt made from a BPE model
// trained on the text as BertTokenizer splits it (wordpiece_vocabulary_from_bpe). Writes tokenizer_config.json
// (do_lower_case, model_max_length = `max_length`). Returns the files a model folder needs.
std::vector<std::string> train_pretraining_tokenizer(const std::string& arch, const std::vector<std::string>& units,
                                                     const std::filesystem::path& directory, int vocab, int max_length);
// [PAD] [UNK] [CLS] [SEP] [MASK], then each BPE piece ("▁x" → "x" starts a word, "x" → "##x" continues one), then
// every character of the pieces in both forms; duplicates and SentencePiece's own special pieces dropped.
std::vector<std::string> wordpiece_vocabulary_from_bpe(const std::vector<std::string>& bpe_pieces);

// ---- masking (src/pretrain/masking.cpp) -----------------------------------------------------------------------------
// BERT's masking: each token that is not special is selected with probability `rate`; a selected token becomes
// `mask_id` with probability 0.8, a token drawn uniformly from [random_low, random_high) with 0.1, and stays with 0.1.
// labels = the original id at selected positions, -100 elsewhere. When no token is selected, the first non-special
// token of the batch is (so every batch has a loss).
struct MaskedTokens {
    at::Tensor input_ids;  // [B, n] int64
    at::Tensor labels;     // [B, n] int64, -100 = not predicted
};
MaskedTokens mask_tokens(const at::Tensor& input_ids, const at::Tensor& special, int mask_id, int random_low,
                         int random_high, double rate, std::uint64_t seed);

// ---- pretraining (src/pretrain/mlm.cpp) -----------------------------------------------------------------------------
// The defaults fit one run in about 40 minutes on 2 cores (docs/pretraining.md): the paper's depth (12 layers) at a width
// the compute budget suits (d = 128: ~3500 tokens/s; d = 256 trains ~1250 tokens/s, a third of the tokens in the
// same time).
struct PretrainSettings {
    std::string arch = "bert";   // "bert" or "albert"
    int layers = 12;
    int d_model = 128;
    int heads = 4;
    int intermediate = 0;        // 0 = 4 d_model
    int embedding_size = 64;     // ALBERT's factorised embedding E
    int vocab = 8000;            // tokenizer pieces (BERT: WordPiece vocab.txt; ALBERT: SentencePiece unigram)
    int tokens = 128;            // tokens per sample, special tokens included (= max_position_embeddings)
    int batch = 32;              // samples per step
    long steps = 2000;
    double learning_rate = 1.5e-3;  // AdamW peak, reached after the warm-up, then linear decay to 0
    double warmup = 0.06;        // fraction of the steps
    double weight_decay = 0.01;  // on weights, not on biases, LayerNorm or the output bias
    double beta2 = 0.98, adam_eps = 1e-6;
    double clip = 1.0;           // gradient norm clipping
    double mask_rate = 0.15;
    std::uint64_t seed = 0;
    int eval_samples = 64;       // held-out samples for the masked-token loss and accuracy
    std::vector<std::string> corpus_files;  // empty = the built-in corpus
    // Not part of the run's identity:
    long stop_after = -1;        // stop (as if killed) after this many steps (tests of resuming); -1 = never
    double state_every_seconds = 120;  // the resume state is also written this often
    void validate() const;              // Error naming the flag: unknown arch, d_model not a multiple of heads
    nlohmann::json to_json() const;     // every setting that changes the result
    std::string key() const;            // hash of to_json()
};

// Log-spaced checkpoint steps: 0, then 1, 2, 5 × 10^k up to `steps`, and `steps` itself.
std::vector<long> checkpoint_steps(long steps);

struct PretrainLogRow {
    long step = 0;
    double learning_rate = 0, train_loss = 0;    // mean over the steps since the previous row
    double heldout_loss = 0, heldout_accuracy = 0;  // masked tokens of the held-out samples (fixed masks)
    double tokens_per_second = 0, seconds = 0;    // seconds: training time so far (summed over resumed runs)
};
struct PretrainResult {
    std::filesystem::path directory;
    std::vector<std::filesystem::path> checkpoints;  // in step order
    std::vector<PretrainLogRow> log;
    double unigram_loss = 0, unigram_accuracy = 0;   // baselines on the same held-out masked tokens
    long train_tokens = 0, heldout_tokens = 0;       // after tokenisation, in packed samples
    long step = 0;                                   // the step reached (= settings.steps when finished)
    bool finished = false;                           // false when stopped by stop_after
    bool resumed = false;
};

// Trains (or resumes: `directory`/state holds the last state; settings must match) and writes into `directory`:
// corpus/ (train.txt, heldout.txt, corpus.json), tokenizer/, checkpoints/step-NNNNNN/ (config.json,
// model.safetensors, the tokenizer files, tokenizer_config.json: a Hugging Face BertForMaskedLM / AlbertForMaskedLM
// folder), final -> the last checkpoint, log.csv, pretrain.json, heldout_masked.safetensors (the held-out batch the
// log's held-out loss and accuracy are computed on: input_ids after masking, labels = -100 where not predicted). `progress` is called after every step (step, loss).
// Error when `directory` holds a run of other settings (its settings.json); called by pretrain() and, before the corpus
// is read, by the command.
void check_pretrain_folder(const PretrainSettings& settings, const std::filesystem::path& directory);
// With `provenance`, settings.json, corpus/corpus.json and pretrain.json carry it (the command's; a resumed run keeps
// the settings.json of the run that made the folder).
struct Provenance;
PretrainResult pretrain(const PretrainSettings& settings, const Corpus& corpus, const std::filesystem::path& directory,
                        const std::function<void(long, double)>& progress = {}, const Provenance* provenance = nullptr);

// The MLM head's loss on a batch in memory (no gradients): reads `directory` (a checkpoint folder), masks `input_ids`
// with `seed`, returns mean cross-entropy and accuracy over the masked tokens. For tests: a saved checkpoint read back.
struct MaskedLmScore {
    double loss = 0, accuracy = 0;
    long masked = 0;
};
MaskedLmScore score_checkpoint(const std::filesystem::path& checkpoint, const at::Tensor& input_ids, std::uint64_t seed,
                               double mask_rate = 0.15);

}  // namespace rankscope
