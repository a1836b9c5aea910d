// Real architectures (SPEC.md §4 E1/E2): what a model argument names, loading its weights, batches from text or token
// ids, a forward with the paper's surgery, and one `rankscope model` run returning the tables the command writes.
#include <fmt/format.h>
#include <torch/torch.h>

#include "bindings.hpp"
#include "rankscope/device.hpp"
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/models.hpp"
#include "rankscope/tokenizer.hpp"

namespace rankscope::python {
namespace {

using namespace pybind11::literals;

const char* kind_name(ModelSource::Kind kind) {
    switch (kind) {
        case ModelSource::HuggingFace: return "huggingface";
        case ModelSource::UseLite: return "use_lite";
        case ModelSource::BuiltIn: return "builtin";
    }
    return "";
}

py::dict config_dict(const HfConfig& c) {
    return py::dict("model_type"_a = c.model_type, "path"_a = c.path, "vocab_size"_a = c.vocab_size,
                    "hidden_size"_a = c.hidden_size, "embedding_size"_a = c.embedding_size, "layers"_a = c.layers,
                    "heads"_a = c.heads, "head_size"_a = c.head_size, "intermediate_size"_a = c.intermediate_size,
                    "max_position_embeddings"_a = c.max_position_embeddings, "max_tokens"_a = c.max_tokens(),
                    "position_offset"_a = c.position_offset, "sinusoidal_positions"_a = c.sinusoidal_positions,
                    "type_vocab_size"_a = c.type_vocab_size,
                    "layer_norm_eps"_a = c.layer_norm_eps, "initializer_range"_a = c.initializer_range,
                    "activation"_a = c.activation, "clamp_len"_a = c.clamp_len, "pad_token_id"_a = c.pad_token_id,
                    "kv_heads"_a = c.kv_heads, "rope_theta"_a = c.rope_theta, "rope_type"_a = c.rope_type,
                    "sliding_window"_a = c.sliding_window, "tie_word_embeddings"_a = c.tie_word_embeddings,
                    "decoder"_a = is_decoder(c));
}

py::dict batch_dict(const ModelBatch& batch, const HfConfig& config) {
    py::dict out("input_ids"_a = to_numpy(batch.input_ids), "attention_mask"_a = to_numpy(batch.attention_mask));
    if (records_token_types(batch, config)) out["token_type_ids"] = to_numpy(batch.token_type_ids);
    return out;
}

// A batch from arrays (None for the optional ones), checked against the model's config. `min_real_tokens`: 2 for a
// batch to be measured, 1 for Model.forward (a forward of one token is well defined; its measures are not).
ModelBatch batch_from_arrays(const py::object& input_ids, const py::object& attention_mask,
                             const py::object& token_type_ids, const HfConfig& config,
                             std::int64_t min_real_tokens = kMinRealTokens) {
    auto tensor = [](const py::object& object, const std::string& name) {
        return object.is_none() ? at::Tensor() : tensor_view(array_of(object, name), name);
    };
    if (input_ids.is_none()) throw Error("no input_ids", "input_ids");
    return checked_model_batch(tensor(input_ids, "input_ids"), tensor(attention_mask, "attention_mask"),
                               tensor(token_type_ids, "token_type_ids"), config, "", min_real_tokens);
}

LayerNormSurgery parse_layer_norm_option(const std::string& name) {
    if (name != "keep" && name != "remove" && name != "freeze")
        throw Error("unknown layer_norm '" + name + "' (expected keep, remove or freeze)", "layer_norm");
    return parse_layer_norm_surgery(name);
}

// "" (the model's own), "causal" or "bidirectional" → Surgery::bidirectional; decoders only, as --mask.
bool parse_mask_option(const std::string& mask, const HfConfig& config) {
    if (mask.empty()) return false;
    if (mask != "causal" && mask != "bidirectional")
        throw Error("unknown mask '" + mask + "' (expected causal or bidirectional)", "mask");
    if (!is_decoder(config))
        throw Error("mask applies to decoders (gpt2, gpt_neox, llama, mistral, qwen2); " + config.model_type +
                        " is an encoder, its attention is already bidirectional",
                    "mask");
    return mask == "bidirectional";
}

// A loaded model (pretrained or random init) with the source it came from.
struct LoadedModel {
    ModelSource source;
    std::string weights;
    std::unique_ptr<EncoderModel> model;
    at::Device device = at::kCPU;  // where the weights live and the forward runs (its arrays come back to the CPU)
    // parameters() hands out writable views: from then on the weights are checked at each forward (the loaders
    // checked them once).
    bool views_handed_out = false;

    py::tuple forward(const py::object& input_ids, const py::object& attention_mask, const py::object& token_type_ids,
                      const std::string& variant, const std::string& layer_norm, bool official_compat,
                      const std::string& mask, bool record) {
        const ModelBatch batch = batch_from_arrays(input_ids, attention_mask, token_type_ids, model->config(), 1);
        Surgery surgery = surgery_for_variant(variant, official_compat);
        surgery.layer_norm = parse_layer_norm_option(layer_norm);
        surgery.bidirectional = parse_mask_option(mask, model->config());
        if (views_handed_out)
            for (const auto& [name, value] : model->parameters())
                if (!torch::isfinite(value).all().item<bool>()) throw Error("has NaN or Inf entries", name);
        Recorder recorder;
        at::Tensor last;
        {
            py::gil_scoped_release release;
            torch::NoGradGuard no_grad;
            recorder.set_interrupt(python_interrupt());
            last = model->forward(batch_on(batch, device), surgery, &recorder);
            recorder.set_interrupt({});
        }
        py::dict hooks;
        if (record)
            for (const auto& [name, value] : recorder.all()) hooks[name.c_str()] = to_numpy(value);
        return py::make_tuple(to_numpy(last), hooks);
    }

    py::dict parameters() {
        if (!device.is_cpu())
            throw Error("parameters() views the weights in CPU memory; this model is on " + device.str() +
                            " (load it with device='cpu' to read or edit them)",
                        "device");
        views_handed_out = true;
        py::dict result;
        for (const auto& [name, value] : model->parameters()) result[name.c_str()] = to_numpy(value.detach());
        return result;
    }
};

}  // namespace

void bind_models(py::module_& m) {
    py::class_<ModelSource>(m, "ModelSource", "What a model argument names (a Hugging Face folder, USE lite, a built-in config).")
        .def(py::init(&resolve_model_source), "argument"_a)
        .def_property_readonly("kind", [](const ModelSource& s) { return kind_name(s.kind); })
        .def_readonly("argument", &ModelSource::argument)
        .def_readonly("name", &ModelSource::name)
        .def_readonly("directory", &ModelSource::directory)
        .def_property_readonly("model_type", &ModelSource::model_type)
        .def_property_readonly("config", [](const ModelSource& s) { return config_dict(s.config); })
        .def("__repr__", [](const ModelSource& s) {
            return fmt::format("ModelSource('{}': {} {}, {} layers, {} heads)", s.argument, kind_name(s.kind),
                               s.model_type(), s.config.layers, s.config.heads);
        });

    py::class_<LoadedModel>(m, "Model", "A model (BERT, RoBERTa, DistilBERT, ALBERT, XLNet, USE lite; GPT-2 and the Llama family) with pretrained or random weights.")
        .def(py::init([](const ModelSource& source, const std::string& weights, std::uint64_t seed,
                         const std::string& stream, const std::string& device) {
                 TorchRandomStateGuard random_state;
                 LoadedModel loaded{source, weights, nullptr, parse_device(device, "device")};
                 const Streaming streaming = parse_streaming(stream);
                 py::gil_scoped_release release;
                 loaded.model = make_model(source, weights, seed, streaming);  // on the CPU, then moved once
                 loaded.model->to(loaded.device);
                 return loaded;
             }),
             "source"_a, "weights"_a, "seed"_a, "stream"_a, "device"_a)
        .def_property_readonly("device", [](const LoadedModel& l) { return l.device.str(); })
        .def_property_readonly("streamed", [](const LoadedModel& l) { return l.model->streamed(); })
        .def_readonly("source", &LoadedModel::source)
        .def_readonly("weights", &LoadedModel::weights)
        .def_property_readonly("config", [](const LoadedModel& l) { return config_dict(l.model->config()); })
        .def("forward", &LoadedModel::forward, "input_ids"_a, "attention_mask"_a, "token_type_ids"_a, "variant"_a,
             "layer_norm"_a, "official_compat"_a, "mask"_a, "record"_a)
        .def("parameters", &LoadedModel::parameters,
             "{checkpoint name: array} viewing the model's weights (no copy: writing into them changes the model).");

    m.def(
        "text_batch",
        [](const ModelSource& source, const std::string& text, int samples, int tokens, const std::string& tokenizer_dir) {
            if (samples < 1 || samples > 4096) throw Error(std::to_string(samples) + " is outside [1, 4096]", "samples");
            if (tokens < 4 || tokens > 4096) throw Error(std::to_string(tokens) + " is outside [4, 4096]", "tokens");
            ModelBatch batch;
            {
                py::gil_scoped_release release;
                batch = text_batch(source, text, samples, tokens, tokenizer_dir);
            }
            return batch_dict(batch, source.config);
        },
        "source"_a, "text"_a, "samples"_a, "tokens"_a, "tokenizer_dir"_a,
        "Sentences of a text file packed into samples x tokens real tokens with the model's tokenizer.");
    m.def(
        "checked_batch",
        [](const ModelSource& source, const py::object& input_ids, const py::object& attention_mask,
           const py::object& token_type_ids) {
            return batch_dict(batch_from_arrays(input_ids, attention_mask, token_type_ids, source.config), source.config);
        },
        "source"_a, "input_ids"_a, "attention_mask"_a, "token_type_ids"_a,
        "Token ids checked against the model's config (as --inputs), int64 copies.");
    m.def(
        "read_model_batch",
        [](const ModelSource& source, const std::string& path) {
            return batch_dict(read_model_batch(path, source.config), source.config);
        },
        "source"_a, "path"_a, "A --inputs .safetensors file (input_ids, optional attention_mask, token_type_ids).");
    m.def("default_text", &default_rte_path, "The repository's data/RTE/train.tsv when found from here, else ''.");

    m.def(
        "run_model",
        [](const ModelSource& source, const py::dict& batch_arrays, const std::string& weights,
           const std::vector<std::string>& variants, bool official_compat, const std::string& layer_norm, int draws,
           int iterate, std::uint64_t seed, bool allow_nonfinite, bool record, const std::string& mask,
           double sink_threshold, const std::string& stream, const std::string& device) {
            if (!(sink_threshold >= 0.0 && sink_threshold <= 1.0))
                throw Error(fmt::format("{} is outside [0, 1]", sink_threshold), "sink_threshold");
            if (draws < 0 || draws > 100000) throw Error(std::to_string(draws) + " is outside [0, 100000]", "draws");
            if (iterate < 0 || iterate > 1000) throw Error(std::to_string(iterate) + " is outside [0, 1000]", "iterate");
            for (const auto& variant : variants) surgery_for_variant(variant, official_compat);
            const ModelBatch batch = batch_from_arrays(batch_arrays["input_ids"], batch_arrays["attention_mask"],
                                                       batch_arrays["token_type_ids"], source.config);
            const std::vector<std::string> kinds = weight_kinds(source, weights);
            RealModelSettings settings;
            settings.variants = variants;
            settings.official_compat = official_compat;
            settings.layer_norm = parse_layer_norm_option(layer_norm);
            settings.draws = draws;
            settings.iterate_steps = iterate;
            settings.seed = seed;
            settings.bidirectional = parse_mask_option(mask, source.config);
            settings.sink_threshold = sink_threshold;
            settings.stream = parse_streaming(stream);
            settings.device = parse_device(device, "device");
            settings.allow_nonfinite = allow_nonfinite;
            Recorder recorder;
            RealModelResult result;
            {
                py::gil_scoped_release release;
                TorchRandomStateGuard random_state;
                result = run_real_model_experiment(source, batch, kinds, settings, record ? &recorder : nullptr,
                                                   python_interrupt());
            }
            check_real_model_finite(result, allow_nonfinite);
            py::dict out;
            out["residual"] = table_columns(residual_table(result));
            out["paths"] = table_columns(path_products_table(result));
            out["skip_ratio"] = table_columns(skip_ratio_table(result));
            out["iterate"] = table_columns(iterate_table(result));
            // Decoders only, as the command line writes them (an encoder's maps are not a causal model's).
            const bool decoder = source.kind != ModelSource::UseLite && is_decoder(source.config);
            out["attention_heads"] = decoder ? py::object(table_columns(attention_heads_table(result))) : py::none();
            out["sink_rate"] = decoder ? py::object(table_columns(sink_rate_table(result))) : py::none();
            out["findings"] = real_model_findings(result);
            out["batch"] = batch_dict(batch, source.config);
            py::dict activations;
            for (const auto& [name, value] : recorder.all()) activations[name.c_str()] = to_numpy(value);
            out["activations"] = activations;
            out["model"] = result.model;
            out["model_type"] = result.model_type;
            out["weights"] = kinds;
            out["mask"] = decoder ? (settings.bidirectional ? "bidirectional" : "causal") : "bidirectional";
            bool streamed = false;
            for (const auto& run : result.runs) streamed = streamed || run.streamed;
            out["streamed"] = streamed;
            return out;
        },
        "source"_a, "batch"_a, "weights"_a, "variants"_a, "official_compat"_a, "layer_norm"_a, "draws"_a, "iterate"_a,
        "seed"_a, "allow_nonfinite"_a, "record"_a, "mask"_a, "sink_threshold"_a, "stream"_a, "device"_a,
        "One `rankscope model` run: E1 (residual.csv), E2 (paths.csv), skip_ratio.csv, iterate.csv (USE lite), "
        "attention_heads.csv and sink_rate.csv (decoders), findings.");
}

}  // namespace rankscope::python
