// A batch of token ids from a .safetensors file (`rankscope model --inputs`), checked against the model's config.
#include <fmt/ranges.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <limits>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"
#include "rankscope/tensor_file.hpp"

namespace rankscope {
namespace {

bool is_integer(DType dtype) {
    return dtype == DType::I8 || dtype == DType::I16 || dtype == DType::I32 || dtype == DType::I64 || dtype == DType::U8;
}

// The [B, n] integer tensor `name` as int64, or `fallback` filled when the file does not hold it. A given `shape` is
// checked; `shape_of` names where it comes from.
// `bool_as_integers`: a bool tensor is read as 0/1 (a mask), not refused.
at::Tensor read_ids(const SafetensorsFile& file, const std::string& name, const std::vector<std::int64_t>& shape,
                    std::int64_t fallback, const std::string& shape_of = "input_ids'", bool bool_as_integers = false) {
    const std::string where = file.path() + ":" + name;
    if (!file.contains(name)) {
        if (shape.empty()) throw Error("no tensor named '" + name + "' (a [batch, tokens] integer tensor)", file.path());
        return torch::full(shape, fallback, torch::kLong);
    }
    const ArrayView view = file.view(name);
    if (!is_integer(view.dtype) && !(bool_as_integers && view.dtype == DType::Bool))
        throw Error("must hold integers, found " + dtype_name(view.dtype), where);
    if (view.shape.size() != 2 || view.shape[0] == 0 || view.shape[1] == 0)
        throw Error("must be a non-empty [batch, tokens] tensor", where);
    if (!shape.empty() && view.shape != shape)
        throw Error(fmt::format("shape [{}] differs from {} [{}]", fmt::join(view.shape, ", "), shape_of, fmt::join(shape, ", ")),
                    where);
    return read_tensor(file, name).to(torch::kLong);
}

// The [B, n] attention mask as int64, all ones when the file holds none. A bool mask (torch's own, `ids != pad`) is the
// 0/1 mask (it was refused as "must hold integers, found BOOL").
at::Tensor read_mask(const SafetensorsFile& file, const std::vector<std::int64_t>& shape, const std::string& shape_of) {
    return read_ids(file, "attention_mask", shape, 1, shape_of, true);
}

void check_range(const at::Tensor& values, std::int64_t low, std::int64_t high, const std::string& what,
                 const std::string& where) {
    const std::int64_t min = values.min().item<std::int64_t>(), max = values.max().item<std::int64_t>();
    if (min < low || max >= high)
        throw Error(fmt::format("values {}..{} outside {} [{}, {})", min, max, what, low, high), where);
}

// The size limits of --samples/--tokens, on a batch's shape, before it is converted or run.
void check_batch_shape(const std::vector<std::int64_t>& shape, const std::string& where) {
    if (shape.size() != 2) return;  // the shape checks that follow name the problem
    const double samples = double(shape[0]), tokens = double(shape[1]);
    check_size_limit("samples x tokens", samples * tokens, kMaxBatchTokens, where);
    check_size_limit("samples x tokens^2", samples * tokens * tokens, kMaxBatchAttentionEntries, where);
}

}  // namespace

void check_attention_mask(const at::Tensor& mask, const std::string& where, const std::string& where_unmasked,
                          std::int64_t min_real_tokens) {
    // "values 0..2 outside a 0/1 mask [0, 2)" read as a riddle: name the value and what a mask holds.
    if (const at::Tensor bad = mask.ne(0).logical_and(mask.ne(1)); bad.any().item<bool>()) {
        const at::Tensor index = bad.nonzero()[0];
        throw Error(fmt::format("holds {} (sample {}, token {}): an attention mask holds only 0 (padding) and 1 (a real "
                                "token)",
                                mask.index({index[0], index[1]}).item<std::int64_t>(), index[0].item<std::int64_t>(),
                                index[1].item<std::int64_t>()),
                    where);
    }
    const at::Tensor real_per_sample = mask.sum(1);
    if (const std::int64_t fewest = real_per_sample.min().item<std::int64_t>(); fewest < min_real_tokens)
        throw Error(min_real_tokens > 1
                        ? fmt::format("sample {} has {} real token{}; the measures need at least {} (one row has no spread)",
                                      real_per_sample.argmin().item<std::int64_t>(), fewest, fewest == 1 ? "" : "s",
                                      min_real_tokens)
                        : fmt::format("sample {} has no real token (attention over nothing)",
                                      real_per_sample.argmin().item<std::int64_t>()),
                    fewest == mask.size(1) ? where_unmasked : where);  // too short, or too much masked
}

ModelBatch read_model_batch(const std::string& path, const HfConfig& config) {
    const SafetensorsFile file(path);
    const at::Tensor input_ids = read_ids(file, "input_ids", {}, 0);
    const std::vector<std::int64_t> shape(input_ids.sizes().begin(), input_ids.sizes().end());
    // Absent token_type_ids stay undefined: checked_model_batch fills zeros and records that none were given.
    return checked_model_batch(input_ids, read_mask(file, shape, "input_ids'"),
                               file.contains("token_type_ids") ? read_ids(file, "token_type_ids", shape, 0) : at::Tensor(),
                               config, path);
}

at::Tensor read_attention_mask(const SafetensorsFile& file, const std::vector<std::int64_t>& shape) {
    if (!file.contains("attention_mask")) return {};
    const at::Tensor mask = read_mask(file, shape, "the [batch, tokens] of the file's other tensors,");
    const std::string where = file.path() + ":attention_mask";
    check_attention_mask(mask, where, where);
    return mask;
}

ModelBatch checked_model_batch(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                               const at::Tensor& token_type_ids, const HfConfig& config, const std::string& where,
                               std::int64_t min_real_tokens) {
    auto name = [&](const std::string& tensor) { return where.empty() ? tensor : where + ":" + tensor; };
    check_batch_shape(std::vector<std::int64_t>(input_ids.sizes().begin(), input_ids.sizes().end()), name("input_ids"));
    auto check_ids = [&](const at::Tensor& ids, const std::string& tensor) {
        if (at::isFloatingType(ids.scalar_type()) || at::isComplexType(ids.scalar_type()) || ids.scalar_type() == at::kBool)
            throw Error("must hold integers, found " + std::string(c10::toString(ids.scalar_type())), name(tensor));
        if (ids.dim() != 2 || ids.size(0) == 0 || ids.size(1) == 0)
            throw Error("must be a non-empty [batch, tokens] tensor", name(tensor));
        if (ids.sizes() != input_ids.sizes())
            throw Error(fmt::format("shape [{}] differs from input_ids' [{}]", fmt::join(ids.sizes(), ", "),
                                    fmt::join(input_ids.sizes(), ", ")),
                        name(tensor));
        return ids.to(torch::kLong).contiguous().clone();
    };
    ModelBatch batch;
    batch.input_ids = check_ids(input_ids, "input_ids");
    const std::vector<std::int64_t> shape(input_ids.sizes().begin(), input_ids.sizes().end());
    batch.attention_mask = attention_mask.defined() ? check_ids(attention_mask, "attention_mask")
                                                    : torch::ones(shape, torch::kLong);
    batch.token_type_ids = token_type_ids.defined() ? check_ids(token_type_ids, "token_type_ids")
                                                    : torch::zeros(shape, torch::kLong);
    batch.token_types_given = token_type_ids.defined();
    check_range(batch.input_ids, 0, config.vocab_size, "the model's vocabulary", name("input_ids"));
    check_attention_mask(batch.attention_mask, name("attention_mask"), name("input_ids"), min_real_tokens);
    // DistilBERT reads no token types: its tokenizer gives none and its forward takes none (a BERT tokenizer's are
    // ignored); its positions are limited as BERT's.
    const bool reads_types = config.model_type == "bert" || config.model_type == "roberta" || config.model_type == "albert";
    if (reads_types || config.model_type == "distilbert") {
        if (reads_types)
            check_range(batch.token_type_ids, 0, config.type_vocab_size, "the model's token types", name("token_type_ids"));
        if (shape[1] > config.max_tokens())
            throw Error(fmt::format("{} tokens per sample; the model allows {}{}", shape[1], config.max_tokens(),
                                    config.position_offset > 0
                                        ? " (max_position_embeddings" + config.position_offset_note() + ")"
                                        : ""),
                        name("input_ids"));
    } else if (config.model_type == "gpt2" && shape[1] > config.max_position_embeddings) {
        throw Error(fmt::format("{} tokens per sample; the model allows {} (n_positions)", shape[1],
                                config.max_position_embeddings),
                    name("input_ids"));
    } else {
        // XLNet reads token types; the decoders ignore them.
        check_range(batch.token_type_ids, 0, std::numeric_limits<std::int64_t>::max(), "token types", name("token_type_ids"));
    }
    return batch;
}

}  // namespace rankscope

namespace rankscope {

bool records_token_types(const ModelBatch& batch, const HfConfig& config) {
    return batch.token_types_given || config.model_type != "gpt2";
}

ModelBatch batch_on(const ModelBatch& batch, const at::Device& device) {
    auto on = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
    return {on(batch.input_ids), on(batch.attention_mask), on(batch.token_type_ids), batch.token_types_given};
}

}  // namespace rankscope
