// rankscope pretrain — masked-language-model pretraining of BERT or ALBERT on real English (docs/pretraining.md):
// the corpus from Debian packages (or --corpus files), a tokenizer trained on it, checkpoints at log-spaced steps in
// the Hugging Face layout, resumable (run the same command again after a kill).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/pretrain.hpp"
#include "rankscope/progress.hpp"

namespace rankscope::cli {
namespace {

struct PretrainOptions {
    CommonOptions common;
    PretrainSettings settings;
};

void run_pretrain(PretrainOptions& options) {
    const Provenance provenance = start_run(options.common);
    PretrainSettings& s = options.settings;
    s.seed = options.common.seed;
    s.validate();  // before the corpus is read
    check_pretrain_folder(s, options.common.out);
    const auto start = std::chrono::steady_clock::now();
    const Corpus corpus = s.corpus_files.empty() ? read_builtin_corpus() : read_corpus_files(s.corpus_files);
    const auto summary = corpus.summary();
    fmt::print(stderr, "pretrain {}: corpus {} units / {} words for training, {} / {} held out\n", s.arch,
               summary["train_units"].get<long>(), summary["train_words"].get<long>(),
               summary["heldout_units"].get<long>(), summary["heldout_words"].get<long>());
    Progress bar("pretrain " + s.arch, s.steps);
    long shown = -1;
    const long tokens_per_step = static_cast<long>(s.batch) * s.tokens;
    auto progress = [&](long step, double loss) {
        if (shown < 0) {
            shown = step - 1;  // a resumed run starts the bar where it left off
            bar.advance(shown);
        }
        bar.advance(step - shown);
        shown = step;
        if (step % 10 == 0) bar.set_label(fmt::format("pretrain {} loss {:.3f} ({} tokens/step)", s.arch, loss, tokens_per_step));
    };
    const std::filesystem::path out = options.common.out;
    const PretrainResult result = pretrain(s, corpus, out, progress, &provenance);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.finished) {
        // No manifest: it is written last, for a finished run (README; this run's first write removed an earlier one);
        // a stopped run has no pretrain.json, which the manifest listed. The same --stop-after again would stop at
        // once, so the message says how to go on.
        fmt::print("pretrain {}: stopped at step {} of {} (--stop-after {}); run the command again without --stop-after, "
                   "or with a later step, to resume\n",
                   s.arch, result.step, s.steps, s.stop_after);
        return;
    }
    write_manifest(out, provenance, {{"inputs", s.corpus_files}, {"settings", s.to_json()},
                                     {"outputs", {"config.json", "log.csv", "pretrain.json", "checkpoints", "tokenizer", "corpus"}}});
    const auto& last = result.log.back();
    fmt::print("pretrain {}: {} step{}, {:.0f} s training ({:.0f} s in this run{}), {} checkpoints in {}\n", s.arch, s.steps, s.steps == 1 ? "" : "s",
               last.seconds, wall, result.resumed ? ", resumed" : "", result.checkpoints.size(), (out / "checkpoints").string());
    fmt::print("held-out masked tokens: loss {:.3f} nats, accuracy {:.3f}; unigram baseline: loss {:.3f}, accuracy {:.3f}\n",
               last.heldout_loss, last.heldout_accuracy, result.unigram_loss, result.unigram_accuracy);
}

}  // namespace

std::function<void()> setup_pretrain(CLI::App& command) {
    auto options = std::make_shared<PretrainOptions>();
    PretrainSettings& s = options->settings;
    command.add_option("--arch", s.arch, "bert or albert")->check(OneOf({"bert", "albert"}, "architecture"))->capture_default_str();
    command.add_option("--layers", s.layers, "Encoder layers")->check(IntRange(1, 48))->capture_default_str();
    command.add_option("--d-model", s.d_model, "Hidden size d")->check(IntRange(8, 2048))->capture_default_str();
    command.add_option("--heads", s.heads, "Attention heads (d_model must be a multiple)")->check(IntRange(1, 64))->capture_default_str();
    command.add_option("--intermediate", s.intermediate, "MLP width (0 = 4 d_model)")->check(IntRange(0, 16384))->capture_default_str();
    auto* embedding_size = command.add_option("--embedding-size", s.embedding_size, "ALBERT's factorised embedding size E")
                               ->check(IntRange(8, 2048))
                               ->capture_default_str();
    command.add_option("--vocab", s.vocab, "Tokenizer pieces to train")->check(IntRange(200, 64000))->capture_default_str();
    command.add_option("--tokens", s.tokens, "Tokens per sample, [CLS] and [SEP] included (= max positions)")->check(IntRange(8, 512))->capture_default_str();
    command.add_option("--batch", s.batch, "Samples per step")->check(IntRange(1, 4096))->capture_default_str();
    command.add_option("--steps", s.steps, "Optimiser steps")->check(IntRange(1, 10000000))->capture_default_str();
    command.add_option("--learning-rate", s.learning_rate, "AdamW peak learning rate")->check(RealRange(0, 1, true))->capture_default_str();
    command.add_option("--warmup", s.warmup, "Warm-up, as a fraction of the steps")->check(RealRange(0, 1))->capture_default_str();
    command.add_option("--weight-decay", s.weight_decay, "AdamW weight decay (weights only)")->check(RealRange(0, 1))->capture_default_str();
    command.add_option("--clip", s.clip, "Gradient-norm clipping")->check(RealRange(0, 1e6, true))->capture_default_str();
    command.add_option("--corpus", s.corpus_files, "Text files instead of the built-in corpus (one unit per line, or a GLUE .tsv)")
        ->check(ReadableFile());
    command.add_option("--stop-after", s.stop_after, "Stop after this many steps, as if killed (run again to resume)")
        ->check(IntRange(0, 10000000));
    add_common_options(command, options->common, OutFolder::required());
    // A NaN/Inf training loss always stops the run (naming the step): the flag was accepted and ignored.
    remove_common_options(command, {"--allow-nonfinite"});
    return [options, embedding_size] {
        // BERT's embeddings are d_model wide: the flag was silently ignored.
        if (embedding_size->count() > 0 && options->settings.arch != "albert")
            throw Error("ALBERT's factorised embedding size; --arch " + options->settings.arch + " has embeddings d_model wide",
                        "--embedding-size");
        run_pretrain(*options);
    };
}

}  // namespace rankscope::cli
