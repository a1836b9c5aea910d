// Masked-language-model pretraining of BERT / ALBERT (rankscope pretrain). The encoder is rankscope's own module
// (src/models/bert.cpp, albert.cpp: the forward every measurement uses), trained with autograd; the MLM head is
// Hugging Face's, with its names:
//   BERT   (BertForMaskedLM):   t = LN(act(h W_tᵀ + b_t))      cls.predictions.transform.{dense,LayerNorm}   [M, d]
//   ALBERT (AlbertForMaskedLM): t = LN(act(h W_tᵀ + b_t))      predictions.{dense,LayerNorm}                 [M, E]
//   logits = t W_Eᵀ + b                                        W_E = the word embeddings (tied), b = *.bias  [M, V]
// computed on the M masked positions only. Loss: mean cross-entropy over them. AdamW (decoupled weight decay on the
// weights), linear warm-up then linear decay to 0, gradient-norm clipping. No dropout: config.json says 0.0, so the
// saved folder describes exactly what was trained.
#include <torch/torch.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "rankscope/file_hash.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"
#include "rankscope/pretrain.hpp"
#include "rankscope/process.hpp"
#include "rankscope/provenance.hpp"
#include "rankscope/tensor_file.hpp"
#include "rankscope/tokenizer.hpp"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---- the model's files --------------------------------------------------------------------------------------------
nlohmann::json config_json(const PretrainSettings& s, int vocab_size) {
    const int intermediate = s.intermediate > 0 ? s.intermediate : 4 * s.d_model;
    nlohmann::json c = {{"model_type", s.arch},
                        {"vocab_size", vocab_size},
                        {"hidden_size", s.d_model},
                        {"num_hidden_layers", s.layers},
                        {"num_attention_heads", s.heads},
                        {"intermediate_size", intermediate},
                        {"hidden_dropout_prob", 0.0},
                        {"attention_probs_dropout_prob", 0.0},
                        {"max_position_embeddings", s.tokens},
                        {"type_vocab_size", 2},
                        {"initializer_range", 0.02},
                        {"layer_norm_eps", 1e-12},
                        {"pad_token_id", 0},
                        {"position_embedding_type", "absolute"},
                        {"torch_dtype", "float32"}};
    if (s.arch == "bert") {
        c["architectures"] = {"BertForMaskedLM"};
        c["hidden_act"] = "gelu";
    } else {
        c["architectures"] = {"AlbertForMaskedLM"};
        c["hidden_act"] = "gelu_new";
        c["embedding_size"] = s.embedding_size;
        c["num_hidden_groups"] = 1;
        c["inner_group_num"] = 1;
        c["classifier_dropout_prob"] = 0.0;
        c["bos_token_id"] = 2;
        c["eos_token_id"] = 3;
    }
    return c;
}

// The MLM head's parameters, with their checkpoint names (the decoder weight is tied to the word embeddings and, as
// Hugging Face saves tied weights, not stored).
struct MlmHead {
    std::string prefix;  // "bert." / "albert."
    std::string dense_weight, dense_bias, norm_weight, norm_bias, bias;
    at::Tensor W, b, gamma, beta, output_bias;
    at::Tensor word_embeddings;  // the encoder's, shared
    std::string activation;
    double eps = 1e-12;
    NamedTensors named() const {
        return {{dense_weight, W}, {dense_bias, b}, {norm_weight, gamma}, {norm_bias, beta}, {bias, output_bias}};
    }
    at::Tensor logits(const at::Tensor& hidden) const {  // [M, d] → [M, V]
        at::Tensor t = at::linear(hidden, W, b);
        t = activation == "gelu" ? at::gelu(t) : 0.5 * t * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (t + 0.044715 * at::pow(t, 3.0))));
        t = at::layer_norm(t, {t.size(-1)}, gamma, beta, eps);
        return at::linear(t, word_embeddings, output_bias);
    }
};

MlmHead make_head(const HfConfig& config, EncoderModel& model, std::uint64_t seed) {
    MlmHead head;
    const bool bert = config.model_type == "bert";
    const std::string p = bert ? "cls.predictions." : "predictions.";
    head.prefix = bert ? "bert." : "albert.";
    head.dense_weight = p + (bert ? "transform.dense.weight" : "dense.weight");
    head.dense_bias = p + (bert ? "transform.dense.bias" : "dense.bias");
    head.norm_weight = p + (bert ? "transform.LayerNorm.weight" : "LayerNorm.weight");
    head.norm_bias = p + (bert ? "transform.LayerNorm.bias" : "LayerNorm.bias");
    head.bias = p + "bias";
    head.activation = config.activation;
    head.eps = config.layer_norm_eps;
    const int d = config.hidden_size, out = bert ? config.hidden_size : config.embedding_size;
    at::Generator generator = at::detail::createCPUGenerator(seed ^ 0x6d6c6d68656164ULL);  // "mlmhead"
    head.W = at::normal(0.0, config.initializer_range, {out, d}, generator);
    head.b = at::zeros({out});
    head.gamma = at::ones({out});
    head.beta = at::zeros({out});
    head.output_bias = at::zeros({config.vocab_size});
    for (const auto& [name, tensor] : model.parameters())
        if (name == "embeddings.word_embeddings.weight") head.word_embeddings = tensor;
    if (!head.word_embeddings.defined()) throw Error("the model has no embeddings.word_embeddings.weight");
    return head;
}

// Every trainable tensor by checkpoint name: the encoder's (prefixed) and the head's.
NamedTensors all_parameters(EncoderModel& model, const MlmHead& head) {
    NamedTensors out;
    for (const auto& [name, tensor] : model.parameters()) out.emplace_back(head.prefix + name, tensor);
    for (const auto& item : head.named()) out.push_back(item);
    return out;
}

void copy_into(const NamedTensors& parameters, const SafetensorsFile& file) {
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : parameters) {
        const at::Tensor stored = read_tensor(file, name);
        if (stored.sizes() != tensor.sizes()) throw Error("tensor " + name + " has another shape than the model's", file.path());
        tensor.copy_(stored);
    }
}

// ---- data ---------------------------------------------------------------------------------------------------------
// Units tokenised in order into one stream, cut into samples of [CLS] + (n − 2) tokens + [SEP].
at::Tensor pack_samples(const Tokenizer& tokenizer, const std::vector<CorpusText>& units, int tokens) {
    std::vector<std::string> texts;
    texts.reserve(units.size());
    for (const auto& unit : units) texts.push_back(unit.text);
    const auto encoded = tokenizer.encode_batch(texts);
    const auto prefix = tokenizer.prefix(), suffix = tokenizer.suffix();
    const std::size_t content = static_cast<std::size_t>(tokens) - prefix.size() - suffix.size();
    std::vector<std::int64_t> stream;
    for (const auto& ids : encoded) stream.insert(stream.end(), ids.begin(), ids.end());
    const std::size_t samples = stream.size() / content;
    at::Tensor out = at::empty({static_cast<std::int64_t>(samples), tokens}, at::kLong);
    auto* data = out.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < samples; ++i) {
        std::int64_t* row = data + i * tokens;
        std::size_t k = 0;
        for (int id : prefix) row[k++] = id;
        for (std::size_t j = 0; j < content; ++j) row[k++] = stream[i * content + j];
        for (int id : suffix) row[k++] = id;
    }
    return out;
}

struct SpecialIds {
    int mask = 0, regular_from = 0;  // ids below regular_from are special ([PAD] [UNK] [CLS] [SEP] [MASK] ...)
};
// Both trained vocabularies put their special pieces first: vocab.txt [PAD] [UNK] [CLS] [SEP] [MASK]; spiece.model
// <pad> <unk> [CLS] [SEP] [MASK] <sep> <cls>.
SpecialIds special_ids(const std::string& model_type) { return {4, model_type == "albert" ? 7 : 5}; }

at::Tensor special_positions(const at::Tensor& ids, const SpecialIds& special) {
    return ids.lt(special.regular_from);
}

ModelBatch model_batch(const at::Tensor& ids) {
    return {ids, at::ones_like(ids), at::zeros_like(ids)};
}

// ---- state --------------------------------------------------------------------------------------------------------
struct TrainingState {
    long step = 0;
    double seconds = 0;
    std::vector<PretrainLogRow> log;
};

// JSON has no NaN (the first row has no training loss yet): NaN is stored as null.
nlohmann::json number_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }
double number_from(const nlohmann::json& value) { return value.is_null() ? std::nan("") : value.get<double>(); }

nlohmann::json log_row_json(const PretrainLogRow& r) {
    return {{"step", r.step}, {"learning_rate", r.learning_rate}, {"train_loss", number_or_null(r.train_loss)},
            {"heldout_loss", r.heldout_loss}, {"heldout_accuracy", r.heldout_accuracy},
            {"tokens_per_second", number_or_null(r.tokens_per_second)}, {"seconds", r.seconds}};
}
PretrainLogRow log_row_from_json(const nlohmann::json& j) {
    PretrainLogRow r;
    r.step = j.at("step");
    r.learning_rate = j.at("learning_rate");
    r.train_loss = number_from(j.at("train_loss"));
    r.heldout_loss = j.at("heldout_loss");
    r.heldout_accuracy = j.at("heldout_accuracy");
    r.tokens_per_second = number_from(j.at("tokens_per_second"));
    r.seconds = j.at("seconds");
    return r;
}

double learning_rate_at(const PretrainSettings& s, long step) {
    const double warm = std::max(1.0, std::round(s.warmup * s.steps));
    if (step < warm) return s.learning_rate * (step + 1) / warm;
    return s.learning_rate * std::max(0.0, double(s.steps - step) / std::max(1.0, s.steps - warm));
}

void write_log_csv(const fs::path& path, const std::vector<PretrainLogRow>& log, const std::string& header) {
    std::string text = header + "step,learning_rate,train_loss,heldout_loss,heldout_accuracy,tokens_per_second,seconds\n";
    // Step 0 has no training loss and no rate: values that do not exist, an empty cell (README), not "nan".
    auto existing = [](double value) { return std::isnan(value) ? std::string() : format_number(value); };
    for (const auto& r : log)
        text += fmt::format("{},{},{},{},{},{},{}\n", r.step, format_number(r.learning_rate), existing(r.train_loss),
                            format_number(r.heldout_loss), format_number(r.heldout_accuracy),
                            existing(r.tokens_per_second), format_number(r.seconds));
    write_file_atomically(path.string(), text);
}

// Writes a folder atomically: filled under <path>.partial, then renamed over <path>.
template <typename Fill>
void write_folder(const fs::path& path, Fill fill) {
    const fs::path partial = path.string() + ".partial";
    fs::remove_all(partial);
    fs::create_directories(partial);
    fill(partial);
    const fs::path old = path.string() + ".old";
    fs::remove_all(old);
    if (fs::exists(path)) fs::rename(path, old);
    fs::rename(partial, path);
    fs::remove_all(old);
}

}  // namespace

nlohmann::json PretrainSettings::to_json() const {
    return {{"arch", arch}, {"layers", layers}, {"d_model", d_model}, {"heads", heads},
            {"intermediate", intermediate > 0 ? intermediate : 4 * d_model},
            {"embedding_size", arch == "albert" ? embedding_size : 0}, {"vocab", vocab}, {"tokens", tokens},
            {"batch", batch}, {"steps", steps}, {"learning_rate", learning_rate}, {"warmup", warmup},
            {"weight_decay", weight_decay}, {"beta2", beta2}, {"adam_eps", adam_eps}, {"clip", clip},
            {"mask_rate", mask_rate}, {"seed", seed}, {"eval_samples", eval_samples}, {"corpus_files", corpus_files}};
}

void PretrainSettings::validate() const {
    if (arch != "bert" && arch != "albert") throw Error("unknown architecture '" + arch + "' (expected bert or albert)", "--arch");
    if (heads <= 0 || d_model % heads != 0) throw Error(fmt::format("d_model {} is not a multiple of heads {}", d_model, heads), "--d-model");
    if (tokens < 3 || batch < 1 || steps < 1) throw Error("tokens ≥ 3, batch ≥ 1 and steps ≥ 1 expected", "--tokens");
}

std::string PretrainSettings::key() const { return fmt::format("{:016x}", fnv1a(to_json().dump())); }

std::vector<long> checkpoint_steps(long steps) {
    std::vector<long> out = {0};
    for (long scale = 1; scale <= steps; scale *= 10)
        for (long m : {1L, 2L, 5L})
            if (m * scale < steps) out.push_back(m * scale);
    if (steps > 0) out.push_back(steps);
    return out;
}

void check_pretrain_folder(const PretrainSettings& s, const fs::path& directory) {
    const fs::path settings_path = directory / "settings.json";
    if (!fs::exists(settings_path)) return;
    const nlohmann::json stored = read_json_file(settings_path.string(), "pretraining settings");
    if (!stored.is_object() || stored.value("key", "") != s.key())
        throw Error("the folder holds a run with other settings (" +
                        (stored.is_object() ? stored.value("key", std::string("?")) : std::string("?")) + " ≠ " + s.key() +
                        "); use another --out or delete it",
                    settings_path.string());
}

PretrainResult pretrain(const PretrainSettings& s, const Corpus& corpus, const fs::path& directory,
                        const std::function<void(long, double)>& progress, const Provenance* provenance) {
    s.validate();
    auto write_json = [provenance](const fs::path& path, const nlohmann::json& document) {
        if (provenance) write_json_atomically(path, document, *provenance);
        else write_file_atomically(path.string(), json_text(document, 2) + "\n");
    };
    if (corpus.train.empty() || corpus.heldout.empty()) throw Error("the corpus has no training or no held-out text", "--corpus");
    fs::create_directories(directory);
    PretrainResult result;
    result.directory = directory;
    const std::string key = s.key();

    // The settings this folder belongs to: a folder of other settings is refused rather than mixed.
    check_pretrain_folder(s, directory);
    const fs::path settings_path = directory / "settings.json";
    if (!fs::exists(settings_path)) {
        nlohmann::json stored = s.to_json();
        stored["key"] = key;
        write_json(settings_path, stored);
    }

    // Corpus and tokenizer (kept: a resumed run reuses them).
    const nlohmann::json corpus_summary = corpus.summary();  // corpus.json and pretrain.json
    const fs::path corpus_dir = directory / "corpus";
    if (!fs::exists(corpus_dir / "corpus.json")) {
        write_folder(corpus_dir, [&](const fs::path& dir) {
            for (const auto& [name, units] : {std::pair{"train.txt", &corpus.train}, std::pair{"heldout.txt", &corpus.heldout}}) {
                std::string text;
                for (const auto& unit : *units) text += unit.text + "\n";
                write_file_atomically((dir / name).string(), text);
            }
            write_json(dir / "corpus.json", corpus_summary);
        });
    }
    const fs::path tokenizer_dir = directory / "tokenizer";
    std::vector<std::string> tokenizer_files = s.arch == "albert" ? std::vector<std::string>{"spiece.model", "tokenizer_config.json"}
                                                                   : std::vector<std::string>{"vocab.txt", "tokenizer_config.json"};
    if (!fs::exists(tokenizer_dir / tokenizer_files.front())) {
        std::vector<std::string> texts;
        for (const auto& unit : corpus.train) texts.push_back(unit.text);
        write_folder(tokenizer_dir, [&](const fs::path& dir) { train_pretraining_tokenizer(s.arch, texts, dir, s.vocab, s.tokens); });
    }
    HfConfig probe;
    probe.model_type = s.arch;
    const auto tokenizer = load_tokenizer(tokenizer_dir.string(), probe);
    const int vocab_size = tokenizer->vocab_size();
    const std::string config_text = config_json(s, vocab_size).dump(2) + "\n";
    write_file_atomically((directory / "config.json").string(), config_text);
    const HfConfig config = read_hf_config((directory / "config.json").string());

    // Packed samples (cached: tokenising the corpus again on resume would give the same ids).
    const fs::path packed_path = directory / "corpus" / "packed.safetensors";
    at::Tensor train_ids, heldout_ids;
    if (fs::exists(packed_path)) {
        SafetensorsFile packed(packed_path.string());
        train_ids = read_tensor(packed, "train");
        heldout_ids = read_tensor(packed, "heldout");
    } else {
        train_ids = pack_samples(*tokenizer, corpus.train, s.tokens);
        heldout_ids = pack_samples(*tokenizer, corpus.heldout, s.tokens);
        write_tensors(packed_path.string(), {{"train", train_ids}, {"heldout", heldout_ids}}, {{"settings", key}});
    }
    if (train_ids.size(0) < s.batch) throw Error(fmt::format("the corpus gives {} training samples of {} tokens, fewer than one batch of {}", train_ids.size(0), s.tokens, s.batch), "--corpus");
    if (heldout_ids.size(0) < 1) throw Error("the held-out text gives no sample of " + std::to_string(s.tokens) + " tokens", "--corpus");
    result.train_tokens = train_ids.numel();
    result.heldout_tokens = heldout_ids.numel();

    const SpecialIds special = special_ids(s.arch);

    // Model, head, optimiser.
    auto model = make_hf_model(config, s.seed);
    MlmHead head = make_head(config, *model, s.seed);
    NamedTensors parameters = all_parameters(*model, head);
    std::vector<at::Tensor> decay, no_decay;
    for (auto& [name, tensor] : parameters) {
        tensor.requires_grad_(true);
        const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
        const bool is_norm = name.find("LayerNorm") != std::string::npos || name.find("layer_norm") != std::string::npos;
        (is_bias || is_norm ? no_decay : decay).push_back(tensor);
    }
    std::vector<at::Tensor> parameter_list;  // for clipping
    for (const auto& item : parameters) parameter_list.push_back(item.second);
    torch::optim::AdamW optimizer(
        {torch::optim::OptimizerParamGroup(decay, std::make_unique<torch::optim::AdamWOptions>(
                                                      torch::optim::AdamWOptions(s.learning_rate).betas({0.9, s.beta2}).eps(s.adam_eps).weight_decay(s.weight_decay))),
         torch::optim::OptimizerParamGroup(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                                         torch::optim::AdamWOptions(s.learning_rate).betas({0.9, s.beta2}).eps(s.adam_eps).weight_decay(0.0)))});

    // Resume.
    TrainingState state;
    const fs::path state_dir = directory / "state";
    for (const fs::path& candidate : {state_dir, fs::path(state_dir.string() + ".old")}) {
        if (!fs::exists(candidate / "state.json")) continue;
        const nlohmann::json stored = read_json_file((candidate / "state.json").string(), "training state");
        if (stored.value("key", "") != key) throw Error("the training state belongs to other settings", (candidate / "state.json").string());
        copy_into(parameters, SafetensorsFile((candidate / "parameters.safetensors").string()));
        torch::load(optimizer, (candidate / "optimizer.pt").string());
        state.step = stored.at("step");
        state.seconds = stored.at("seconds");
        for (const auto& row : stored.at("log")) state.log.push_back(log_row_from_json(row));
        result.resumed = true;
        break;
    }
    auto save_state = [&] {
        write_folder(state_dir, [&](const fs::path& dir) {
            write_tensors((dir / "parameters.safetensors").string(), parameters, {{"settings", key}});
            torch::save(optimizer, (dir / "optimizer.pt").string());
            nlohmann::json log = nlohmann::json::array();
            for (const auto& row : state.log) log.push_back(log_row_json(row));
            write_file_atomically((dir / "state.json").string(),
                                  nlohmann::json{{"key", key}, {"step", state.step}, {"seconds", state.seconds}, {"log", log}}.dump() + "\n");
        });
        // What Ctrl-C leaves (process.hpp): it ended the run without a word.
        set_interrupt_note(fmt::format("; the training state is saved at step {}: run the same command again to resume "
                                       "from there",
                                       state.step));
    };

    // Held-out evaluation: the first eval_samples samples, masked once with a fixed seed.
    const at::Tensor eval_ids = heldout_ids.slice(0, 0, std::min<std::int64_t>(s.eval_samples, heldout_ids.size(0)));
    const MaskedTokens eval_masked = mask_tokens(eval_ids, special_positions(eval_ids, special), special.mask,
                                                 special.regular_from, vocab_size, s.mask_rate, s.seed ^ 0xe7a1ULL);
    // The evaluation batch, so that the held-out numbers can be recomputed outside rankscope from a checkpoint.
    write_tensors((directory / "heldout_masked.safetensors").string(),
                  {{"input_ids", eval_masked.input_ids}, {"labels", eval_masked.labels}}, {{"settings", key}});
    auto evaluate = [&](double& loss, double& accuracy) {
        torch::NoGradGuard no_grad;
        const at::Tensor hidden = model->forward(model_batch(eval_masked.input_ids), Surgery{}, nullptr);
        const at::Tensor selected = eval_masked.labels.ne(-100);
        const at::Tensor logits = head.logits(hidden.index({selected}));
        const at::Tensor labels = eval_masked.labels.index({selected});
        loss = at::cross_entropy_loss(logits, labels).item<double>();
        accuracy = logits.argmax(-1).eq(labels).to(at::kDouble).mean().item<double>();
    };
    // Unigram baseline on the same masked tokens: add-one smoothed training frequencies of the regular pieces.
    {
        const at::Tensor counts = at::bincount(train_ids.flatten(), {}, vocab_size).to(at::kDouble);
        counts.slice(0, 0, special.regular_from).zero_();
        const at::Tensor probability = (counts + 1.0) / (counts.sum() + vocab_size);
        const at::Tensor labels = eval_masked.labels.index({eval_masked.labels.ne(-100)});
        result.unigram_loss = -probability.index({labels}).log().mean().item<double>();
        result.unigram_accuracy = labels.eq(counts.argmax()).to(at::kDouble).mean().item<double>();
    }

    const fs::path checkpoints_dir = directory / "checkpoints";
    fs::create_directories(checkpoints_dir);
    const std::vector<long> checkpoint_at = checkpoint_steps(s.steps);
    auto checkpoint_path = [&](long step) { return checkpoints_dir / fmt::format("step-{:06d}", step); };
    auto write_checkpoint = [&](long step) {
        write_folder(checkpoint_path(step), [&](const fs::path& dir) {
            write_file_atomically((dir / "config.json").string(), config_text);
            NamedTensors stored;
            for (const auto& [name, tensor] : parameters) stored.emplace_back(name, tensor.detach());
            write_tensors((dir / "model.safetensors").string(), stored,
                          {{"format", "pt"}, {"step", std::to_string(step)}, {"settings", key}, {"version", version_string()}});
            for (const auto& file : tokenizer_files) fs::copy_file(tokenizer_dir / file, dir / file);
        });
    };
    std::uint64_t epoch_order_seed = s.seed ^ 0x0de7ULL;
    auto sample_order = [&](long epoch) {  // a permutation of the training samples per epoch
        at::Generator generator = at::detail::createCPUGenerator(epoch_order_seed + static_cast<std::uint64_t>(epoch));
        return at::randperm(train_ids.size(0), generator, at::kLong);
    };

    const long per_epoch = train_ids.size(0) / s.batch;
    const long log_every = std::max(1L, s.steps / 40);
    double loss_sum = 0;
    long loss_count = 0;
    auto last_state = Clock::now();
    auto segment_start = Clock::now();
    long segment_tokens = 0;
    long cached_epoch = -1;
    at::Tensor order;
    auto add_log_row = [&](long step, double lr) {
        PretrainLogRow row;
        row.step = step;
        row.learning_rate = lr;
        row.train_loss = loss_count ? loss_sum / loss_count : std::nan("");
        const double elapsed = std::chrono::duration<double>(Clock::now() - segment_start).count();
        evaluate(row.heldout_loss, row.heldout_accuracy);
        row.tokens_per_second = elapsed > 0 && segment_tokens > 0 ? segment_tokens / elapsed : std::nan("");
        row.seconds = state.seconds;
        state.log.push_back(row);
        loss_sum = 0;
        loss_count = 0;
        segment_tokens = 0;
        segment_start = Clock::now();
    };
    if (state.step == 0 && state.log.empty()) {
        add_log_row(0, 0.0);
        write_checkpoint(0);
        save_state();
    }
    // The command, seed and version, as every CSV's (it had the version and settings key only).
    const std::string csv_header =
        (provenance ? csv_provenance_lines(*provenance) : "# produced by: " + version_string() + "\n") + "# settings key: " + key + "\n";
    while (state.step < s.steps) {
        if (s.stop_after >= 0 && state.step >= s.stop_after) break;
        const auto step_start = Clock::now();
        const long step = state.step;
        const long epoch = step / per_epoch;
        if (epoch != cached_epoch) {
            order = sample_order(epoch);
            cached_epoch = epoch;
        }
        const long first = (step % per_epoch) * s.batch;
        const at::Tensor ids = train_ids.index({order.slice(0, first, first + s.batch)});
        const MaskedTokens masked = mask_tokens(ids, special_positions(ids, special), special.mask, special.regular_from,
                                                vocab_size, s.mask_rate, s.seed * 1000003ULL + static_cast<std::uint64_t>(step));
        const double lr = learning_rate_at(s, step);
        for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
        optimizer.zero_grad();
        const at::Tensor hidden = model->forward_for_training(model_batch(masked.input_ids));
        const at::Tensor selected = masked.labels.ne(-100);
        const at::Tensor loss = at::cross_entropy_loss(head.logits(hidden.index({selected})), masked.labels.index({selected}));
        loss.backward();
        torch::nn::utils::clip_grad_norm_(parameter_list, s.clip);
        optimizer.step();
        const double loss_value = loss.item<double>();
        if (!std::isfinite(loss_value))
            throw Error(fmt::format("the training loss became {} at step {} (try a lower --learning-rate)", loss_value, step + 1),
                        directory.string());
        loss_sum += loss_value;
        ++loss_count;
        segment_tokens += ids.numel();
        state.step = step + 1;
        state.seconds += std::chrono::duration<double>(Clock::now() - step_start).count();
        const bool at_checkpoint = std::find(checkpoint_at.begin(), checkpoint_at.end(), state.step) != checkpoint_at.end();
        if (at_checkpoint || state.step % log_every == 0) {
            add_log_row(state.step, lr);
            write_log_csv(directory / "log.csv", state.log, csv_header);
        }
        if (at_checkpoint) write_checkpoint(state.step);
        if (at_checkpoint || std::chrono::duration<double>(Clock::now() - last_state).count() > s.state_every_seconds) {
            save_state();
            last_state = Clock::now();
        }
        if (progress) progress(state.step, loss_value);
    }
    write_log_csv(directory / "log.csv", state.log, csv_header);
    result.log = state.log;
    result.step = state.step;
    result.finished = state.step >= s.steps;
    for (long step : checkpoint_at)
        if (step <= state.step && fs::exists(checkpoint_path(step))) result.checkpoints.push_back(checkpoint_path(step));
    if (result.finished) {
        const fs::path link = directory / "final";
        fs::remove(link);
        fs::create_directory_symlink(fs::path("checkpoints") / checkpoint_path(s.steps).filename(), link);
        nlohmann::json summary = {{"settings", s.to_json()}, {"key", key}, {"steps", state.step},
                                  {"train_seconds", state.seconds}, {"train_tokens", result.train_tokens},
                                  // train_tokens is the training set's size; the tokens the model was trained on:
                                  {"tokens_seen", state.step * static_cast<long>(s.batch) * s.tokens},
                                  {"heldout_tokens", result.heldout_tokens}, {"vocab_size", vocab_size},
                                  {"parameters", 0}, {"unigram_loss", result.unigram_loss},
                                  {"unigram_accuracy", result.unigram_accuracy}, {"corpus", corpus_summary}};
        long count = 0;
        for (const auto& item : parameters) count += item.second.numel();
        summary["parameters"] = count;
        if (!state.log.empty()) {
            summary["final_heldout_loss"] = state.log.back().heldout_loss;
            summary["final_heldout_accuracy"] = state.log.back().heldout_accuracy;
            summary["final_train_loss"] = state.log.back().train_loss;
        }
        write_json(directory / "pretrain.json", summary);
    }
    return result;
}

MaskedLmScore score_checkpoint(const fs::path& checkpoint, const at::Tensor& input_ids, std::uint64_t seed, double mask_rate) {
    auto model = load_hf_model(checkpoint.string());
    const HfConfig& config = model->config();
    MlmHead head = make_head(config, *model, 0);
    SafetensorsFile file((checkpoint / "model.safetensors").string());
    copy_into(head.named(), file);
    const SpecialIds special = special_ids(config.model_type);
    const MaskedTokens masked = mask_tokens(input_ids, special_positions(input_ids, special), special.mask,
                                            special.regular_from, config.vocab_size, mask_rate, seed);
    torch::NoGradGuard no_grad;
    const at::Tensor hidden = model->forward(model_batch(masked.input_ids), Surgery{}, nullptr);
    const at::Tensor selected = masked.labels.ne(-100);
    const at::Tensor logits = head.logits(hidden.index({selected}));
    const at::Tensor labels = masked.labels.index({selected});
    MaskedLmScore score;
    score.loss = at::cross_entropy_loss(logits, labels).item<double>();
    score.accuracy = logits.argmax(-1).eq(labels).to(at::kDouble).mean().item<double>();
    score.masked = labels.numel();
    return score;
}

}  // namespace rankscope
