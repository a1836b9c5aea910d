// rankscope pretrain: the corpus readers on hand-written fixtures, BERT's masking statistics, the WordPiece vocabulary
// made from BPE pieces, and tiny pretraining runs (the loss falls; a saved checkpoint read back gives the in-memory
// model's held-out loss; a killed and resumed run ends bit-identical to an uninterrupted one).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <fstream>

#include "decoder_checkpoints.hpp"
#include "rankscope/dynamics.hpp"
#include "rankscope/error.hpp"
#include "rankscope/pretrain.hpp"
#include "rankscope/tensor_file.hpp"
#include "rankscope/models.hpp"  // ModelBatch, HfConfig
#include "rankscope/tokenizer.hpp"

namespace rankscope {
namespace {

using test::TempFolder;
namespace fs = std::filesystem;

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> texts(const std::vector<CorpusText>& units) {
    std::vector<std::string> out;
    for (const auto& unit : units) out.push_back(unit.text);
    return out;
}

TEST(PretrainCorpus, WordNetGlossesAndExamples) {
    TempFolder folder("wordnet");
    write_text(folder.path / "data.noun",
               "  1 This software and database is being provided to you, the LICENSEE, by\n"
               "00217499 04 n 01 disaster 0 001 @ 00217014 n 0000 | an act that has disastrous consequences  \n"
               "00217593 04 n 01 kill 1 002 @ 00217014 n 0000 | the destruction of an enemy plane or ship; "
               "\"the pilot reported two kills during the mission\"; \"ok\"  \n");
    write_text(folder.path / "data.verb", "01 02 v 01 run_away 0 000 | flee; take to one's heels  \n");
    write_text(folder.path / "data.adj", "02 00 a 01 good(a) 0 000 | having desirable qualities  \n");
    write_text(folder.path / "data.adv", "");
    const auto units = read_wordnet_glosses(folder.path.string());
    EXPECT_EQ(texts(units), (std::vector<std::string>{
                                "disaster: an act that has disastrous consequences",
                                "the pilot reported two kills during the mission",  // "ok" has fewer than 3 words
                                "kill: the destruction of an enemy plane or ship",
                                "run away: flee; take to one's heels",
                                "good: having desirable qualities"}));
    for (const auto& unit : units) EXPECT_EQ(unit.source, "wordnet");
}

TEST(PretrainCorpus, FortunesSkipArtAndSymbols) {
    TempFolder folder("fortunes");
    write_text(folder.path / "wisdom", "A penny saved\nis a penny earned.\n%\n  (-: :-) <=> ||| ### !!!\n%\nLook before you leap.\n");
    write_text(folder.path / "wisdom.dat", "binary index");
    write_text(folder.path / "art", "Pictures made of letters are skipped\n%\n");
    const auto units = read_fortunes(folder.path.string());
    EXPECT_EQ(texts(units), (std::vector<std::string>{"A penny saved is a penny earned.", "Look before you leap."}));
}

TEST(PretrainCorpus, GcideParagraphsCleaned) {
    TempFolder folder("gcide");
    const std::string text =
        "00-database-info\n   This file was converted from the original database\n\n"
        "Coagulate \\Co*ag\"u*late\\, v. t. [imp. & p. p. {Coagulated}; p.\n"
        "   pr. & vb. n. {Coagulating}.]\n"
        "   To cause (a liquid) to change into a curdlike or semisolid\n"
        "   state; as, rennet coagulates milk. --Boyle.\n"
        "   [1913 Webster]\n\n"
        "   Syn: To thicken; concrete; curdle.\n        [1913 Webster]\n\n"
        "Coagulation \\Co*ag`u*la\"tion\\, n. [L. coagulatio.]\n"
        "   1. The change from a liquid to a {thickened} state.\n      [1913 Webster]\n";
    const fs::path path = folder.path / "gcide.dict.dz";
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_TRUE(file);
    gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
    gzclose(file);
    EXPECT_EQ(texts(read_gcide(path.string())),
              (std::vector<std::string>{"To cause (a liquid) to change into a curdlike or semisolid state; as, rennet coagulates milk.",
                                        "The change from a liquid to a thickened state."}));
    write_text(folder.path / "broken.dz", "not gzip at all, but also not empty");
    EXPECT_NO_THROW(read_gcide((folder.path / "broken.dz").string()));  // gzread passes plain text through
    EXPECT_THROW(read_gcide((folder.path / "missing.dz").string()), Error);
}

TEST(PretrainCorpus, SplitIsByTextAndStable) {
    std::vector<CorpusText> units;
    for (int i = 0; i < 5000; ++i) units.push_back({"sentence number " + std::to_string(i) + " here", "x"});
    const Corpus corpus = split_corpus(units, 0.02);
    EXPECT_EQ(corpus.train.size() + corpus.heldout.size(), 5000u);
    EXPECT_NEAR(double(corpus.heldout.size()) / 5000, 0.02, 0.01);
    std::vector<CorpusText> reversed(units.rbegin(), units.rend());
    const Corpus again = split_corpus(reversed, 0.02);
    auto held = texts(corpus.heldout), held_again = texts(again.heldout);
    std::sort(held.begin(), held.end());
    std::sort(held_again.begin(), held_again.end());
    EXPECT_EQ(held, held_again);
    EXPECT_EQ(corpus.summary()["train_words"].get<long>() + corpus.summary()["heldout_words"].get<long>(), 5000 * 4);
}

TEST(PretrainMasking, RatesAsSpecified) {
    const int B = 256, n = 128, low = 5, high = 1005, mask_id = 4;
    at::Tensor ids = at::randint(low, high, {B, n}, at::kLong);
    ids.select(1, 0).fill_(2);
    ids.select(1, n - 1).fill_(3);
    const at::Tensor special = ids.lt(low);
    const MaskedTokens masked = mask_tokens(ids, special, mask_id, low, high, 0.15, 11);
    const at::Tensor selected = masked.labels.ne(-100);
    const double candidates = B * (n - 2);
    const double count = selected.sum().item<double>();
    EXPECT_NEAR(count / candidates, 0.15, 0.01);                                  // 4.4 standard deviations
    EXPECT_FALSE(selected.logical_and(special).any().item<bool>());               // never a special token
    EXPECT_TRUE(masked.labels.index({selected}).equal(ids.index({selected})));    // labels = original ids
    EXPECT_TRUE(masked.input_ids.index({selected.logical_not()}).equal(ids.index({selected.logical_not()})));
    const at::Tensor now = masked.input_ids.index({selected}), before = ids.index({selected});
    const double as_mask = now.eq(mask_id).sum().item<double>() / count;
    const double unchanged = now.eq(before).sum().item<double>() / count;
    const double replaced = now.ne(mask_id).logical_and(now.ne(before)).sum().item<double>() / count;
    // 0.8 / 0.1 / 0.1; a random draw equals the original with probability 1/1000 (counted as unchanged).
    EXPECT_NEAR(as_mask, 0.8, 0.025);
    EXPECT_NEAR(unchanged, 0.1 + 0.1 / 1000, 0.02);
    EXPECT_NEAR(replaced, 0.1 - 0.1 / 1000, 0.02);
    const at::Tensor random_ids = now.index({now.ne(mask_id).logical_and(now.ne(before))});
    EXPECT_GE(random_ids.min().item<std::int64_t>(), low);
    EXPECT_LT(random_ids.max().item<std::int64_t>(), high);
    EXPECT_NEAR(random_ids.to(at::kDouble).mean().item<double>(), (low + high - 1) / 2.0, 60.0);  // sd of the mean ~11
    // Reproducible from the seed, different for another.
    EXPECT_TRUE(mask_tokens(ids, special, mask_id, low, high, 0.15, 11).input_ids.equal(masked.input_ids));
    EXPECT_FALSE(mask_tokens(ids, special, mask_id, low, high, 0.15, 12).input_ids.equal(masked.input_ids));
    // A batch too small to be selected by chance still gets one masked token.
    const at::Tensor tiny = at::tensor({2, 77, 3}, at::kLong).unsqueeze(0);
    for (std::uint64_t seed = 0; seed < 20; ++seed)
        EXPECT_EQ(mask_tokens(tiny, tiny.lt(low), mask_id, low, high, 0.15, seed).labels.ne(-100).sum().item<int>(), 1);
    EXPECT_THROW(mask_tokens(at::full({1, 3}, 2, at::kLong), at::ones({1, 3}, at::kBool), mask_id, low, high, 0.15, 0), Error);
}

TEST(PretrainTokenizer, WordPieceVocabularyFromBpePieces) {
    const std::string start = "\xE2\x96\x81";
    const auto vocabulary = wordpiece_vocabulary_from_bpe({"<unk>", "[CLS]", start + "th", "e", start + "the", "th", start});
    EXPECT_EQ(vocabulary, (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "th", "##e", "the",
                                                    "##th", "e", "h", "##h", "t", "##t"}));
}

TEST(PretrainSchedule, CheckpointStepsLogSpaced) {
    EXPECT_EQ(checkpoint_steps(1500), (std::vector<long>{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 1500}));
    EXPECT_EQ(checkpoint_steps(10), (std::vector<long>{0, 1, 2, 5, 10}));
    EXPECT_EQ(checkpoint_steps(1), (std::vector<long>{0, 1}));
}

PretrainSettings tiny_settings(const std::string& arch) {
    PretrainSettings s;
    s.arch = arch;
    s.layers = 2;
    s.d_model = 32;
    s.heads = 2;
    s.embedding_size = 16;
    s.vocab = 400;
    s.tokens = 32;
    s.batch = 16;
    s.steps = 100;
    s.learning_rate = 1e-2;
    s.eval_samples = 16;
    s.seed = 5;
    return s;
}

Corpus rte_corpus() {
    const std::string rte = default_rte_path();
    if (rte.empty()) throw Error("data/RTE/train.tsv not found");
    return read_corpus_files({rte});
}

void expect_tiny_run_learns(const std::string& arch) {
    TempFolder folder("pretrain-" + arch);
    const PretrainSettings s = tiny_settings(arch);
    const PretrainResult result = pretrain(s, rte_corpus(), folder.path);
    ASSERT_TRUE(result.finished);
    ASSERT_EQ(result.checkpoints.size(), checkpoint_steps(s.steps).size());
    const auto& first = result.log.front();
    const auto& last = result.log.back();
    EXPECT_EQ(first.step, 0);
    EXPECT_EQ(last.step, s.steps);
    // The loss falls from about ln V at init to about the unigram baseline (this tiny model on 50k tokens gets no
    // further; the default run does: docs/pretraining.md).
    EXPECT_NEAR(first.heldout_loss, std::log(double(read_hf_config((folder.path / "final" / "config.json").string()).vocab_size)), 0.3) << arch;
    EXPECT_LT(last.heldout_loss, first.heldout_loss - 0.5) << arch;
    EXPECT_LT(last.heldout_loss, result.unigram_loss + 0.3) << arch;
    EXPECT_LT(last.train_loss, result.log[1].train_loss - 0.5) << arch;
    // The final checkpoint, read back as a Hugging Face folder, gives the in-memory model's held-out loss on the same
    // masked tokens.
    SafetensorsFile packed((folder.path / "corpus" / "packed.safetensors").string());
    const at::Tensor heldout = read_tensor(packed, "heldout").slice(0, 0, s.eval_samples);
    const MaskedLmScore score = score_checkpoint(folder.path / "final", heldout, s.seed ^ 0xe7a1ULL, s.mask_rate);
    EXPECT_NEAR(score.loss, last.heldout_loss, 1e-5 * last.heldout_loss);
    EXPECT_NEAR(score.accuracy, last.heldout_accuracy, 1e-9);
    // Hugging Face names: the MLM head beside the prefixed encoder, the tied decoder not stored.
    SafetensorsFile weights((folder.path / "final" / "model.safetensors").string());
    const std::string head = arch == "bert" ? "cls.predictions.transform.dense.weight" : "predictions.dense.weight";
    EXPECT_TRUE(weights.contains(head));
    EXPECT_TRUE(weights.contains(arch + ".embeddings.word_embeddings.weight"));
    EXPECT_FALSE(weights.contains(arch == "bert" ? "cls.predictions.decoder.weight" : "predictions.decoder.weight"));
    EXPECT_TRUE(fs::exists(folder.path / "final" / (arch == "bert" ? "vocab.txt" : "spiece.model")));
    // The tokenizer the folder carries is the one the run used: its ids are the packed ids.
    HfConfig config = read_hf_config((folder.path / "final" / "config.json").string());
    EXPECT_EQ(config.model_type, arch);
    const auto tokenizer = load_tokenizer((folder.path / "final").string(), config);
    EXPECT_EQ(tokenizer->vocab_size(), config.vocab_size);
}

TEST(Pretrain, TinyBertLearnsAndItsCheckpointMatches) { expect_tiny_run_learns("bert"); }
TEST(Pretrain, TinyAlbertLearnsAndItsCheckpointMatches) { expect_tiny_run_learns("albert"); }

TEST(Pretrain, KilledAndResumedEqualsUninterrupted) {
    TempFolder whole("pretrain-whole"), resumed("pretrain-resumed");
    PretrainSettings s = tiny_settings("bert");
    s.steps = 12;
    const Corpus corpus = rte_corpus();
    pretrain(s, corpus, whole.path);
    PretrainSettings first = s;
    first.stop_after = 7;  // stops after step 7 without saving (as a kill): the resume starts from the state of step 5
    const PretrainResult stopped = pretrain(first, corpus, resumed.path);
    EXPECT_FALSE(stopped.finished);
    const PretrainResult finished = pretrain(s, corpus, resumed.path);
    EXPECT_TRUE(finished.finished);
    EXPECT_TRUE(finished.resumed);
    SafetensorsFile a((whole.path / "final" / "model.safetensors").string());
    SafetensorsFile b((resumed.path / "final" / "model.safetensors").string());
    ASSERT_EQ(a.names(), b.names());
    for (const auto& name : a.names()) EXPECT_TRUE(read_tensor(a, name).equal(read_tensor(b, name))) << name;
    // Another setting in the same folder is refused, not mixed in.
    PretrainSettings other = s;
    other.learning_rate = 1e-3;
    EXPECT_THROW(pretrain(other, corpus, resumed.path), Error);
}

}  // namespace
}  // namespace rankscope

// ---- rankscope dynamics ------------------------------------------------------------------------------------------
namespace rankscope {
namespace {

TEST(Dynamics, FindsCheckpointsByStep) {
    TempFolder folder("dynamics-find");
    for (const char* name : {"step-000100", "step-000002", "step-010000", "notes", "step-000200.partial"}) {
        fs::create_directories(folder.path / "checkpoints" / name);
        std::ofstream(folder.path / "checkpoints" / name / "config.json") << "{}";
    }
    const auto found = find_checkpoints(folder.path);
    ASSERT_EQ(found.size(), 3u);
    EXPECT_EQ(found[0].step, 2);
    EXPECT_EQ(found[1].step, 100);
    EXPECT_EQ(found[2].step, 10000);
    EXPECT_EQ(find_checkpoints(folder.path / "checkpoints").size(), 3u);  // the folder itself, too
    TempFolder empty("dynamics-empty");
    EXPECT_THROW(find_checkpoints(empty.path), Error);
    EXPECT_THROW(find_checkpoints(empty.path / "missing"), Error);
    // A step-* entry that is not a checkpoint is an error naming it, never a point silently left out.
    auto refused = [&](const std::string& name, bool folder_with_config, const std::string& message) {
        TempFolder bad("dynamics-bad");
        fs::create_directories(bad.path / "step-000001");
        std::ofstream(bad.path / "step-000001" / "config.json") << "{}";
        if (folder_with_config) {
            fs::create_directories(bad.path / name);
            std::ofstream(bad.path / name / "config.json") << "{}";
        } else if (name == "step-000005") {
            fs::create_directories(bad.path / name);
        } else {
            std::ofstream(bad.path / name) << "x";
        }
        try {
            find_checkpoints(bad.path);
            ADD_FAILURE() << name << " was accepted";
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
        }
    };
    refused("step-x", true, "is not a checkpoint name step-N");
    refused("step-000005", false, "without a config.json");
    refused("step-000007", false, "must be a folder, this is a file");
    refused("step-1", true, "two checkpoint folders for step 1: step-");
    refused("step12x", true, "is not a checkpoint name step-N or stepN");
    refused("step1", true, "two checkpoint folders for step 1");
    // Pythia's revision names (step0 ... step143000) beside pretrain's; "steps" and "stepping" are not checkpoints.
    TempFolder pythia("dynamics-pythia");
    for (const char* name : {"step143000", "step0", "step-000512", "steps", "stepping"}) {
        fs::create_directories(pythia.path / name);
        std::ofstream(pythia.path / name / "config.json") << "{}";
    }
    std::vector<long> steps;
    for (const auto& checkpoint : find_checkpoints(pythia.path)) steps.push_back(checkpoint.step);
    EXPECT_EQ(steps, (std::vector<long>{0, 512, 143000}));
}

TEST(Dynamics, AUniformHeadsEntropyFollowsTheMask) {
    EXPECT_DOUBLE_EQ(uniform_head(4, false).entropy, std::log(4.0));
    EXPECT_NEAR(uniform_head(3, true).entropy, (std::log(2.0) + std::log(3.0)) / 3, 1e-15);  // rows see 1, 2, 3 keys
    EXPECT_EQ(uniform_head(1, true).entropy, 0.0);
}

TEST(Dynamics, SelectsStepsSpreadOverTheRun) {
    const std::vector<long> steps = {0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 1200};
    EXPECT_EQ(select_steps(steps, 6), (std::vector<long>{0, 2, 10, 100, 500, 1200}));  // evenly over the log-spaced list
    EXPECT_EQ(select_steps({0, 5}, 6), (std::vector<long>{0, 5}));
}

// A result built by hand: the verdict and the sentences follow the numbers.
DynamicsResult hand_made_dynamics(double final_san_at_5) {
    DynamicsResult result;
    result.model = "hand";
    result.model_type = "bert";
    result.layers = 6;
    result.samples = 2;
    result.tokens = 10;
    result.text = "t.txt";
    for (long step : {0L, 100L}) {
        WeightsRun run;
        for (const std::string variant : {"SAN", "SAN+MLP", "SAN+skip", "transformer"})
            for (int layer = 0; layer <= 6; ++layer) {
                ResidualRow row;
                row.variant = variant;
                row.layer = layer;
                row.mean = variant == "SAN" && layer >= 5 ? (step == 0 ? 1e-9 : final_san_at_5) : 0.4;
                row.std = 0.001, row.n = 2;  // the verdict's interval: ± t_{0.975,1} · 0.001/√2 = ± 0.009
                run.residual.push_back(row);
            }
        HeadAttentionStats heads;
        heads.entropy = {step == 0 ? 2.3 : 1.0, step == 0 ? 2.3 : 2.0};
        heads.first_token_share = {0.1, step == 0 ? 0.1 : 0.9};
        run.heads.assign(6, heads);
        result.steps.push_back(step);
        result.runs.push_back(run);
    }
    return result;
}

TEST(Dynamics, FindingsFollowTheNumbers) {
    const Findings collapsed = dynamics_findings(hand_made_dynamics(0.01));
    ASSERT_EQ(collapsed.checks.size(), 1u);
    EXPECT_EQ(collapsed.checks[0].verdict, Verdict::Reproduced);
    EXPECT_NE(collapsed.reading.find("from step 0 on"), std::string::npos) << collapsed.reading;
    EXPECT_NE(collapsed.reading.find("from 2.3 to 1.5 nats"), std::string::npos) << collapsed.reading;
    const Findings kept = dynamics_findings(hand_made_dynamics(0.2));
    EXPECT_EQ(kept.checks[0].verdict, Verdict::NotReproduced);
    EXPECT_NE(kept.reading.find("above 0.05 after layer 5 at the last checkpoint"), std::string::npos) << kept.reading;
    // Collapsed already after layer 1, as at init: not the pretrained shape.
    DynamicsResult init_speed = hand_made_dynamics(0.01);
    for (auto& row : init_speed.runs.back().residual)
        if (row.variant == "SAN" && row.layer >= 1) row.mean = 0.01;
    EXPECT_EQ(dynamics_findings(init_speed).checks[0].verdict, Verdict::NotReproduced);
    // A 1-layer model is not comparable, and its criterion is the claim's, not "after layer 1, and above it after
    // layer 1"; the subject says "1 layer".
    DynamicsResult shallow = hand_made_dynamics(0.01);
    shallow.layers = 1;
    const Findings one = dynamics_findings(shallow);
    EXPECT_EQ(one.checks[0].verdict, Verdict::NotComparable);
    EXPECT_EQ(one.checks[0].criterion, "≤ 0.05 after layer 5, and above it after layer 1, over the whole 95% interval of "
                                       "each mean over samples (needs 5 layers; this model has 1)");
    EXPECT_NE(one.subject.find("(bert, 1 layer)"), std::string::npos) << one.subject;
    EXPECT_EQ(collapsed.checks[0].criterion,
              "≤ 0.05 after layer 5, and above it after layer 1, over the whole 95% interval of each mean over samples");
    EXPECT_NE(collapsed.checks[0].measured.find("after layer 5: 0.0100 (95% interval 0.00102–0.0190)"), std::string::npos)
        << collapsed.checks[0].measured;
    // One sample a checkpoint gives no interval: no verdict either way.
    DynamicsResult single = hand_made_dynamics(0.01);
    for (auto& run : single.runs)
        for (auto& row : run.residual) row.std = NAN, row.n = 1;
    EXPECT_EQ(dynamics_findings(single).checks[0].verdict, Verdict::NotComparable);
    const Table attention = dynamics_attention_table(hand_made_dynamics(0.01));
    ASSERT_EQ(attention.rows(), 12u);
    EXPECT_DOUBLE_EQ(attention.column("entropy_mean").reals[6], 1.5);
    EXPECT_DOUBLE_EQ(attention.column("first_token_share_max").reals[6], 0.9);
    EXPECT_DOUBLE_EQ(attention.column("first_token_share_mean").reals[6], 0.5);
    EXPECT_DOUBLE_EQ(attention.column("uniform_entropy").reals[0], std::log(10.0));
    // Blocks from 0, as attention_heads.csv, paths.csv's layers and --dump's blocks.{l} (it counted from 1).
    EXPECT_EQ(attention.column("layer").integers,
              (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
    // A decoder whose layers 3-5 have a sliding window of 4 keys over the 10 tokens: causal baselines, per layer, and
    // the reading's mean over layers names the window.
    DynamicsResult windowed = hand_made_dynamics(0.01);
    windowed.model_type = "mistral";
    windowed.attention_windows = {0, 0, 0, 4, 4, 4};
    const Table causal = dynamics_attention_table(windowed);
    EXPECT_NEAR(causal.column("uniform_entropy").reals[0], uniform_head(10, true).entropy, 1e-15);
    EXPECT_NEAR(causal.column("uniform_entropy").reals[9], (std::log(2.0) + std::log(3.0) + 7 * std::log(4.0)) / 10,
                1e-15);  // rows see 1, 2, 3, then 4 keys
    const double mean = (uniform_head(10, true).entropy + uniform_head(10, true, 4).entropy) / 2;
    EXPECT_NE(dynamics_findings(windowed).reading.find(
                  fmt::format("a uniform causal head over 10 tokens, with its sliding window of 4 keys on 3 of 6 layers: {:.3g})", mean)),
              std::string::npos)
        << dynamics_findings(windowed).reading;
}

TEST(Dynamics, TinyRunTablesAgreeWithOneModelRun) {
    TempFolder folder("dynamics-run");
    PretrainSettings s = tiny_settings("albert");
    s.steps = 20;
    pretrain(s, rte_corpus(), folder.path);
    DynamicsSettings settings;
    settings.samples = 4;
    settings.model.draws = 5;
    const auto checkpoints = find_checkpoints(folder.path);
    ASSERT_EQ(checkpoints.size(), checkpoint_steps(20).size());
    const DynamicsResult result = run_dynamics(checkpoints, settings);
    EXPECT_EQ(result.steps, checkpoint_steps(20));
    EXPECT_EQ(result.text, (folder.path / "corpus" / "heldout.txt").string());
    const Table residual = dynamics_residual_table(result);
    EXPECT_EQ(residual.rows(), result.steps.size() * 4 * 3);  // 4 variants × (embeddings + 2 layers)
    // The last checkpoint's rows are what one `rankscope model` run of that folder computes on the same batch.
    const ModelSource source = resolve_model_source(checkpoints.back().path.string());
    const ModelBatch batch = text_batch(source, result.text, 4, 32, "");
    auto model = make_model(source, "pretrained", 0);
    const WeightsRun direct = run_real_model(*model, batch, result.model, "pretrained", settings.model);
    ASSERT_EQ(direct.residual.size(), result.runs.back().residual.size());
    for (std::size_t i = 0; i < direct.residual.size(); ++i)
        EXPECT_DOUBLE_EQ(direct.residual[i].mean, result.runs.back().residual[i].mean);
    const Table attention = dynamics_attention_table(result);
    for (std::size_t r = 0; r < attention.rows(); ++r) {
        EXPECT_GT(attention.column("entropy_mean").reals[r], 0.0);
        EXPECT_LE(attention.column("entropy_mean").reals[r], std::log(32.0) + 1e-9);
        EXPECT_GE(attention.column("first_token_share_mean").reals[r], 0.0);
        EXPECT_LE(attention.column("first_token_share_max").reals[r], 1.0);
    }
    const Table paths = dynamics_paths_table(result);
    EXPECT_EQ(paths.rows(), result.steps.size() * 2);  // lengths 1 and 2
}

}  // namespace
}  // namespace rankscope
