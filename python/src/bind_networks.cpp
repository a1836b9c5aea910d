// The SAN laboratory (SPEC.md §1, §3): configurable self-attention stacks, the path decomposition, attention products
// along random paths, the theory experiment, and path counts (E6).
#include <ATen/Parallel.h>
#include <fmt/ranges.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "bindings.hpp"
#include "rankscope/device.hpp"
#include "rankscope/e6_path_counts.hpp"
#include "rankscope/error.hpp"
#include "rankscope/paths.hpp"
#include "rankscope/san.hpp"
#include "rankscope/theory.hpp"

namespace rankscope::python {
namespace {

using namespace pybind11::literals;

std::string activation_name(Activation activation) { return activation == Activation::GELU ? "gelu" : "relu"; }
Activation parse_activation(const std::string& name) {
    if (name == "relu") return Activation::ReLU;
    if (name == "gelu") return Activation::GELU;
    throw Error("unknown activation '" + name + "' (expected relu or gelu)", "activation");
}

at::ScalarType parse_float_dtype(const std::string& name) {
    if (name == "float64") return at::kDouble;
    if (name == "float32") return at::kFloat;
    throw Error("unknown dtype '" + name + "' (expected float64 or float32)", "dtype");
}

std::string nonfinite_problem(at::ScalarType dtype) {
    return dtype == at::kFloat ? "has NaN or Inf entries or entries beyond float32's range" : "has NaN or Inf entries";
}

// A SAN with its own weights: built from a config and a seed (the caller's torch random state is left as it was).
struct SanNetwork {
    San network{nullptr};
    at::ScalarType dtype = at::kDouble;

    SanNetwork(const SanConfig& config, std::uint64_t seed, const std::string& dtype_name) {
        config.validate();
        dtype = parse_float_dtype(dtype_name);
        TorchRandomStateGuard random_state;
        torch::manual_seed(seed);
        network = San(config);
        network->to(dtype);
        network->eval();
        if (const std::string name = nonfinite_weight(); !name.empty())  // an init_scale that overflows the dtype
            throw Error(fmt::format("init_scale {} draws NaN or Inf weights in {}", config.init_scale, dtype_name), name);
    }

    // The name of the first weight with a NaN or Inf entry; "" when every one is finite.
    std::string nonfinite_weight() const {
        for (const auto& item : network->named_parameters())
            if (!torch::isfinite(item.value()).all().item<bool>()) return item.key();
        return "";
    }

    // x [B, n, d] (or [n, d]) in the network's dtype (a copy only when the dtype differs).
    at::Tensor input(const py::array& array) const {
        at::Tensor x = tensor_view(array, "x");
        if (x.dim() == 2) x = x.unsqueeze(0);
        if (x.dim() != 3 || x.size(-1) != network->config.d_model)
            throw Error(fmt::format("expected [batch, tokens, {}] (or [tokens, {}]), got shape [{}]", network->config.d_model,
                                    network->config.d_model, fmt::join(x.sizes(), ", ")),
                        "x");
        if (x.size(0) == 0 || x.size(1) == 0) throw Error("empty input", "x");
        x = x.to(dtype);
        if (!torch::isfinite(x).all().item<bool>()) throw Error(nonfinite_problem(dtype), "x");
        return x;
    }

    // parameters() hands out writable views: from then on the weights are checked at each use (load_parameters
    // checks what it copies).
    bool views_handed_out = false;
    void check_weights_finite() const {
        if (!views_handed_out) return;
        if (const std::string name = nonfinite_weight(); !name.empty()) throw Error("has NaN or Inf entries", name);
    }

    py::tuple forward(const py::array& array, bool record) {
        const at::Tensor x = input(array);
        check_weights_finite();
        Recorder recorder;
        at::Tensor y;
        {
            py::gil_scoped_release release;
            torch::NoGradGuard no_grad;
            recorder.set_interrupt(python_interrupt());
            y = network->forward(x, record ? &recorder : nullptr);
            recorder.set_interrupt({});
        }
        py::dict hooks;
        for (const auto& [name, value] : recorder.all()) hooks[name.c_str()] = to_numpy(value);
        return py::make_tuple(to_numpy(y), hooks);
    }

    py::dict parameters() {
        views_handed_out = true;
        py::dict result;
        for (const auto& item : network->named_parameters()) result[item.key().c_str()] = to_numpy(item.value().detach());
        return result;
    }

    // All or nothing: every value is checked (name, shape, finite in the network's dtype) before any is copied.
    void load_parameters(const py::dict& values) {
        auto parameters = network->named_parameters();
        std::vector<py::array> arrays;  // keep the viewed memory alive until the copies
        std::vector<std::pair<at::Tensor*, at::Tensor>> copies;
        for (const auto& [key, value] : values) {
            const std::string name = py::cast<std::string>(key);
            at::Tensor* target = parameters.find(name);
            if (!target) throw Error("no parameter named '" + name + "'", name);
            arrays.push_back(array_of(value, name));
            const at::Tensor source = tensor_view(arrays.back(), name);
            if (source.sizes() != target->sizes())
                throw Error(fmt::format("shape [{}] differs from the parameter's [{}]", fmt::join(source.sizes(), ", "),
                                        fmt::join(target->sizes(), ", ")),
                            name);
            if (!torch::isfinite(source.to(dtype)).all().item<bool>()) throw Error(nonfinite_problem(dtype), name);
            copies.emplace_back(target, source);
        }
        torch::NoGradGuard no_grad;
        for (auto& [target, source] : copies) target->copy_(source);
    }
};

py::dict path_count_result(const std::vector<ArchitecturePaths>& tables, bool with_alpha, bool builtin) {
    py::dict result;
    result["table"] = table_columns(path_counts_table(tables, with_alpha));
    py::dict mean_lengths, alpha_mean_lengths;
    for (const auto& t : tables) {
        mean_lengths[t.architecture.name] = t.mean_length;
        if (with_alpha) alpha_mean_lengths[t.architecture.name] = mean_path_length(t.rows, true);
    }
    result["mean_lengths"] = mean_lengths;
    result["alpha_mean_lengths"] = alpha_mean_lengths;
    result["findings"] = builtin ? py::cast(path_count_findings(tables)) : py::none();
    return result;
}

// A configuration's fields as a tuple: pickling, copy.deepcopy and == (every field compared).
py::tuple block_state(const BlockConfig& b) {
    return py::make_tuple(b.attention_skip, b.mlp, b.mlp_skip, activation_name(b.activation), b.mlp_width,
                          to_string(b.layer_norm), b.residual_scale);
}

BlockConfig block_from_state(const py::tuple& t) {
    if (t.size() != 7) throw Error("a BlockConfig state has 7 fields, got " + std::to_string(t.size()));
    BlockConfig b;
    b.attention_skip = t[0].cast<bool>();
    b.mlp = t[1].cast<bool>();
    b.mlp_skip = t[2].cast<bool>();
    b.activation = parse_activation(t[3].cast<std::string>());
    b.mlp_width = t[4].cast<int>();
    b.layer_norm = parse_layer_norm(t[5].cast<std::string>());
    b.residual_scale = t[6].cast<double>();
    return b;
}

py::tuple san_state(const SanConfig& c) {
    py::list per_layer;
    for (const auto& b : c.per_layer) per_layer.append(block_state(b));
    return py::make_tuple(c.layers, c.heads, c.d_model, c.d_qk, c.d_v, c.tokens, c.biases, c.init_scale,
                          c.query_key_scale, block_state(c.block), py::tuple(per_layer));
}

SanConfig san_from_state(const py::tuple& t) {
    if (t.size() != 11) throw Error("a SanConfig state has 11 fields, got " + std::to_string(t.size()));
    SanConfig c;
    c.layers = t[0].cast<int>();
    c.heads = t[1].cast<int>();
    c.d_model = t[2].cast<int>();
    c.d_qk = t[3].cast<int>();
    c.d_v = t[4].cast<int>();
    c.tokens = t[5].cast<int>();
    c.biases = t[6].cast<bool>();
    c.init_scale = t[7].cast<double>();
    c.query_key_scale = t[8].cast<double>();
    c.block = block_from_state(t[9].cast<py::tuple>());
    for (const auto& b : t[10].cast<py::tuple>()) c.per_layer.push_back(block_from_state(b.cast<py::tuple>()));
    return c;
}

// Copies that Python holds but must not edit. `net.config` is the configuration the network was built from (it does
// not read it again), and `per_layer`'s items are copies of the vector's blocks: `net.config.layers = 7` and
// `cfg.per_layer[0].mlp = True` changed a copy and said nothing. Every attribute set on one now raises, naming what to
// do instead; copy.copy, copy.deepcopy and pickle give a plain, editable configuration.
struct ReadOnlyBlockConfig : BlockConfig {
    std::string copy_of;  // "net.config.block", "per_layer[2]"
    std::string instead;  // what edits it
};
struct ReadOnlySanConfig : SanConfig {};

constexpr const char* kEditNetworkConfig =
    "the network was built from it and does not read it again; edit a copy (cfg = copy.copy(net.config)) and build "
    "San(cfg, seed)";

ReadOnlyBlockConfig read_only_block(const BlockConfig& block, std::string copy_of, std::string instead) {
    ReadOnlyBlockConfig copy;
    static_cast<BlockConfig&>(copy) = block;
    copy.copy_of = std::move(copy_of);
    copy.instead = std::move(instead);
    return copy;
}

py::tuple read_only_per_layer(const SanConfig& c, bool of_network) {
    py::tuple blocks(c.per_layer.size());
    for (std::size_t i = 0; i < c.per_layer.size(); ++i)
        blocks[i] = py::cast(read_only_block(
            c.per_layer[i], fmt::format("{}per_layer[{}]", of_network ? "net.config." : "", i),
            of_network ? kEditNetworkConfig : "per_layer hands out copies of its blocks; assign a new list (cfg.per_layer = [...])"));
    return blocks;
}

py::object plain_config(const char* factory, py::tuple state) {
    return py::make_tuple(py::module_::import("rankscope._rankscope").attr(factory), py::make_tuple(std::move(state)));
}

}  // namespace

void bind_networks(py::module_& m) {
    py::class_<BlockConfig>(m, "BlockConfig", "One layer's architecture (san.hpp BlockConfig).")
        .def(py::init([](bool attention_skip, bool mlp, bool mlp_skip, const std::string& activation, int mlp_width,
                         const std::string& layer_norm, double residual_scale) {
                 BlockConfig block;
                 block.attention_skip = attention_skip;
                 block.mlp = mlp;
                 block.mlp_skip = mlp_skip;
                 block.activation = parse_activation(activation);
                 block.mlp_width = mlp_width;
                 block.layer_norm = parse_layer_norm(layer_norm);
                 block.residual_scale = residual_scale;
                 return block;
             }),
             "attention_skip"_a = false, "mlp"_a = false, "mlp_skip"_a = false, "activation"_a = "relu", "mlp_width"_a = 0,
             "layer_norm"_a = "none", "residual_scale"_a = 1.0)
        .def_readwrite("attention_skip", &BlockConfig::attention_skip, "X + SA(X)")
        .def_readwrite("mlp", &BlockConfig::mlp, "a per-token MLP after attention")
        .def_readwrite("mlp_skip", &BlockConfig::mlp_skip, "M + MLP(M)")
        .def_property(
            "activation", [](const BlockConfig& b) { return activation_name(b.activation); },
            [](BlockConfig& b, const std::string& name) { b.activation = parse_activation(name); }, "relu or gelu")
        .def_readwrite("mlp_width", &BlockConfig::mlp_width, "0 = 4 * d_model")
        .def_property(
            "layer_norm", [](const BlockConfig& b) { return to_string(b.layer_norm); },
            [](BlockConfig& b, const std::string& name) { b.layer_norm = parse_layer_norm(name); },
            "none, post (BERT), pre (GPT-2), affine (the paper's model: one mean and std per sample)")
        .def_readwrite("residual_scale", &BlockConfig::residual_scale, "alpha of the skips: X + alpha * branch")
        .def(py::pickle(&block_state, &block_from_state))
        .def("__eq__", [](const BlockConfig& a, const py::object& b) {
            return py::isinstance<BlockConfig>(b) && block_state(a).equal(block_state(b.cast<BlockConfig>()));
        })
        .def("__repr__", [](const BlockConfig& b) {
            return fmt::format("BlockConfig(attention_skip={}, mlp={}, mlp_skip={}, activation='{}', mlp_width={}, "
                               "layer_norm='{}', residual_scale={})",
                               b.attention_skip ? "True" : "False", b.mlp ? "True" : "False", b.mlp_skip ? "True" : "False",
                               activation_name(b.activation), b.mlp_width, to_string(b.layer_norm), b.residual_scale);
        });

    py::class_<SanConfig>(m, "SanConfig", "A self-attention network's sizes and layers (san.hpp SanConfig).")
        .def(py::init([](int layers, int heads, int d_model, int d_qk, int d_v, int tokens, bool biases, double init_scale,
                         const BlockConfig& block, const std::vector<BlockConfig>& per_layer, double query_key_scale) {
                 SanConfig config;
                 config.layers = layers;
                 config.heads = heads;
                 config.d_model = d_model;
                 config.d_qk = d_qk;
                 config.d_v = d_v;
                 config.tokens = tokens;
                 config.biases = biases;
                 config.init_scale = init_scale;
                 config.block = block;
                 config.per_layer = per_layer;
                 config.query_key_scale = query_key_scale;
                 config.validate();
                 return config;
             }),
             "layers"_a = 6, "heads"_a = 1, "d_model"_a = 32, "d_qk"_a = 0, "d_v"_a = 0, "tokens"_a = 32, "biases"_a = false,
             "init_scale"_a = 1.0, "block"_a = BlockConfig(), "per_layer"_a = std::vector<BlockConfig>(),
             "query_key_scale"_a = 1.0)
        .def_readwrite("layers", &SanConfig::layers)
        .def_readwrite("heads", &SanConfig::heads)
        .def_readwrite("d_model", &SanConfig::d_model)
        .def_readwrite("d_qk", &SanConfig::d_qk, "per head; 0 = d_model / heads")
        .def_readwrite("d_v", &SanConfig::d_v, "per head; 0 = d_model / heads")
        .def_readwrite("tokens", &SanConfig::tokens, "n of random inputs")
        .def_readwrite("biases", &SanConfig::biases,
                       "True: b_Q, b_K, b_V, b_O, b_in, b_out drawn N(0, 0.1^2); False: they start at 0 (still parameters, "
                       "as in TransformerLens: a value written into them is used)")
        .def_readwrite("init_scale", &SanConfig::init_scale, "weights ~ N(0, init_scale^2 / fan_in)")
        .def_readwrite("query_key_scale", &SanConfig::query_key_scale, "W_Q, W_K ~ N(0, (init_scale * query_key_scale)^2 / fan_in)")
        .def_readwrite("block", &SanConfig::block)
        // A tuple, not a list: pybind11 hands out a copy of the vector, so per_layer.append(...) changed nothing and said
        // nothing; a tuple has no append. Assign a whole list instead.
        .def_property(
            "per_layer", [](const SanConfig& c) { return read_only_per_layer(c, false); },
            [](SanConfig& c, const std::vector<BlockConfig>& blocks) { c.per_layer = blocks; },
            "one BlockConfig per layer, or empty for `block` in every layer (a tuple of read-only copies: assign a new "
            "list to change it)")
        .def("validate", &SanConfig::validate)
        .def(py::pickle(&san_state, &san_from_state))
        .def("__eq__", [](const SanConfig& a, const py::object& b) {
            return py::isinstance<SanConfig>(b) && san_state(a).equal(san_state(b.cast<SanConfig>()));
        })
        .def("__repr__", [](const SanConfig& c) {
            return fmt::format("SanConfig(layers={}, heads={}, d_model={}, d_qk={}, d_v={}, tokens={}, biases={}, "
                               "init_scale={}, ...)",
                               c.layers, c.heads, c.d_model, c.d_qk, c.d_v, c.tokens, c.biases ? "True" : "False",
                               c.init_scale);
        });

    m.def("_block_config_from_state", &block_from_state, "copy.copy / pickle of a read-only BlockConfig: a plain one");
    m.def("_san_config_from_state", &san_from_state, "copy.copy / pickle of a read-only SanConfig: a plain one");
    py::class_<ReadOnlyBlockConfig, BlockConfig>(
        m, "ReadOnlyBlockConfig", "A BlockConfig that is a copy (net.config.block, per_layer[i]): reading only.")
        .def("__setattr__",
             [](const ReadOnlyBlockConfig& b, const std::string& name, const py::object&) {
                 throw py::attribute_error(fmt::format("{}.{} cannot be set: {}", b.copy_of, name, b.instead));
             })
        .def("__reduce__", [](const ReadOnlyBlockConfig& b) { return plain_config("_block_config_from_state", block_state(b)); });
    py::class_<ReadOnlySanConfig, SanConfig>(
        m, "ReadOnlySanConfig", "net.config: the SanConfig a network was built from, reading only (copy.copy edits).")
        .def("__setattr__",
             [](const ReadOnlySanConfig&, const std::string& name, const py::object&) {
                 throw py::attribute_error(fmt::format("net.config.{} cannot be set: {}", name, kEditNetworkConfig));
             })
        .def_property_readonly("block",
                               [](const ReadOnlySanConfig& c) { return read_only_block(c.block, "net.config.block", kEditNetworkConfig); })
        .def_property_readonly("per_layer", [](const ReadOnlySanConfig& c) { return read_only_per_layer(c, true); })
        .def("__reduce__", [](const ReadOnlySanConfig& c) { return plain_config("_san_config_from_state", san_state(c)); });

    py::class_<SanNetwork>(m, "San", "A self-attention network with TransformerLens names (a torch::nn module).")
        .def(py::init<const SanConfig&, std::uint64_t, const std::string&>(), "config"_a, "seed"_a = 0,
             "dtype"_a = "float64")
        .def_property_readonly("config",
                               [](const SanNetwork& s) {
                                   ReadOnlySanConfig config;
                                   static_cast<SanConfig&>(config) = s.network->config;
                                   return config;
                               },
                               "The configuration the network was built from, reading only (copy.copy(net.config) is "
                               "a plain SanConfig to edit and build a new San from).")
        .def("forward", &SanNetwork::forward, "x"_a, "record"_a = true,
             "(output [B, n, d], {hook name: activation}) for x [B, n, d] or [n, d].")
        .def("parameters", &SanNetwork::parameters,
             "{name: array} viewing the network's weights (no copy: writing into them changes the network).")
        .def("load_parameters", &SanNetwork::load_parameters, "values"_a, "Copies arrays into parameters by name.")
        .def(
            "check_path_decomposition",
            [](SanNetwork& s, const py::array& array, double max_paths) {
                const at::Tensor x = s.input(array);
                s.check_weights_finite();
                PathCheck check;
                {
                    py::gil_scoped_release release;
                    torch::NoGradGuard no_grad;
                    check = check_path_decomposition(s.network, x, max_paths);
                }
                return py::dict("paths"_a = check.paths, "max_abs_error"_a = check.max_abs_error,
                                "max_abs_output"_a = check.max_abs_output);
            },
            "x"_a, "max_paths"_a = 1e6, "Sum over every path (Theorem 2.1) against the forward output.");

    m.def(
        "sample_path_products",
        [](const std::vector<py::array>& patterns, const std::vector<double>& stored_epsilons, int draws,
           std::uint64_t seed, const py::object& attention_mask, bool allow_nonfinite) {
            if (patterns.empty()) throw Error("no attention patterns", "patterns");
            if (draws < 1) throw Error(std::to_string(draws) + " is outside [1, 100000]", "draws");
            std::vector<at::Tensor> tensors;
            for (std::size_t l = 0; l < patterns.size(); ++l) {
                const std::string name = "patterns[" + std::to_string(l) + "]";
                const at::Tensor p = tensor_view(patterns[l], name);
                if (p.dim() != 4 || !at::isFloatingType(p.scalar_type()))
                    throw Error("expected a float [batch, heads, n, n] tensor", name);
                tensors.push_back(p);  // float32 stays float32, as the command reads a recorded run
            }
            at::Tensor mask;
            if (!attention_mask.is_none()) mask = tensor_view(array_of(attention_mask, "attention_mask"), "attention_mask").to(at::kLong);
            // Rows stored in bfloat16 sum to 1 within its epsilon, not that of the float32 they reach the engine in.
            check_attention_patterns(tensors, mask, [](std::size_t l) { return "patterns[" + std::to_string(l) + "]"; },
                                     "attention_mask", stored_epsilons);
            std::vector<PathProductSample> samples;
            {
                py::gil_scoped_release release;
                samples = sample_path_products(tensors, draws, seed, mask);
            }
            for (const auto& s : samples)
                check_finite_result(s.relative_residual, "a path product's relative residual",
                                    fmt::format("patterns, path length {}, draw {}, layers {}", s.length, s.draw,
                                                join_indices(s.layers)),
                                    allow_nonfinite);
            return table_columns(path_samples_table(samples));
        },
        "patterns"_a, "stored_epsilons"_a, "draws"_a, "seed"_a, "attention_mask"_a, "allow_nonfinite"_a,
        "E2 products A_{l_k}...A_{l_1} along random paths (paths sample's paths.csv columns).");

    m.def(
        "run_theory",
        [](const SanConfig& network, int heads, int seeds, std::uint64_t seed, const py::object& input,
           bool allow_nonfinite, const std::string& device) {
            if (seeds < 1 || seeds > 1000) throw Error(std::to_string(seeds) + " is outside [1, 1000]", "seeds");
            if (heads < 1 || heads > 64) throw Error(std::to_string(heads) + " is outside [1, 64]", "heads");
            TheorySettings settings;
            settings.network = network;
            settings.heads = heads;
            settings.seeds = seeds;
            settings.seed = seed;
            settings.device = parse_device(device, "device");
            at::Tensor given;
            py::array contiguous;
            if (!input.is_none())
                given = theory_input(array_view_of(array_of(input, "input"), contiguous, "input"), "input", settings);
            check_theory_settings(settings);
            TheoryResult result;
            {
                py::gil_scoped_release release;
                TorchRandomStateGuard random_state;
                result = run_theory_experiment(settings, given.defined() ? &given : nullptr, python_interrupt());
            }
            check_theory_finite(result, allow_nonfinite);
            py::dict out;
            out["rows"] = table_columns(theory_table(result));
            out["summary"] = table_columns(theory_summary_table(result));
            out["variants"] = table_columns(theory_variants_table(result));
            out["bound_rows_checked"] = result.bound_rows_checked;
            out["bound_violations"] = result.bound_violations;
            out["bound_definition"] = theory_bound_definition();
            out["findings"] = theory_findings(result, settings);
            out["network"] = settings.network;
            return out;
        },
        "network"_a, "heads"_a, "seeds"_a, "seed"_a, "input"_a, "allow_nonfinite"_a, "device"_a,
        "The theory experiment: every variant x seed, summaries, bound checks and findings.");

    m.def(
        "path_counts",
        [](int layers, int heads, const std::vector<double>& alpha) {
            if (layers == 0) return path_count_result(path_count_tables(known_architectures()), false, true);
            if (layers < 1 || layers > 100) throw Error(std::to_string(layers) + " is outside [1, 100]", "layers");
            if (heads < 1 || heads > 128) throw Error(std::to_string(heads) + " is outside [1, 128]", "heads");
            for (double a : alpha)
                if (!(a >= 0 && a <= 1)) throw Error(fmt::format("{} is outside [0, 1]", a), "alpha");
            return path_count_result({custom_path_counts(layers, heads, alpha)}, !alpha.empty(), false);
        },
        "layers"_a, "heads"_a, "alpha"_a,
        "Path-length table (path_counts.csv columns): layers = 0 for the built-in E6 architectures.");
    m.def(
        "known_architectures",
        [] {
            py::list list;
            for (const auto& a : known_architectures()) list.append(py::make_tuple(a.name, a.layers, a.heads));
            return list;
        },
        "(name, layers, heads) of the E6 architectures.");
}

}  // namespace rankscope::python
