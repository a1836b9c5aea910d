"""Checkpoint folders (BERT, ALBERT, XLNet fixtures; USE lite; a built-in configuration) and E1/E2: the binding's
tables against the command line's files on the same inputs, and against the conformance fixtures' expected hidden
states, attention maps and E1 numbers (computed by an independent implementation, tests/fixtures/README.md)."""
import collections
import json
import os
import shutil

import numpy as np
import pytest
import torch

import rankscope as rs
from conftest import FIXTURES, assert_table_equals_csv, cli_error, read_safetensors, relative_residual_reference, \
    run_cli, write_safetensors

FIXTURE_MODELS = ["bert-tiny", "albert-tiny", "xlnet-tiny"]


def fixture(name):
    path = os.path.join(FIXTURES, name)
    assert os.path.isfile(os.path.join(path, "model.safetensors")), f"fixture missing: {path}"
    return path


def assert_findings_equal(findings, path):
    with open(path) as f:
        document = json.load(f)
    assert findings.experiment == document["experiment"] and findings.subject == document["subject"]
    assert [(c.claim, c.paper, c.measured, c.criterion, c.verdict, c.settings) for c in findings.checks] == \
           [(c["claim"], c["paper"], c["measured"], c["criterion"], c["verdict"], c["settings"]) for c in document["checks"]]
    assert findings.reading == document["reading"]


def threads():
    """The command line's --threads for this process's thread count: float32 sums (oneDNN, BLAS) depend on it, so the
    two sides compare bit for bit only with the same number."""
    return ["--threads", rs.get_threads()]


def test_run_model_on_text_equals_the_commands_tables(tmp_path):
    # (The ALBERT and XLNet fixtures' word lists cannot tokenise text: they run on token ids below.)
    run_cli("model", "--model", fixture("bert-tiny"), "--samples", 4, "--tokens", 16, "--draws", 5, "--seed", 3,
            *threads(), "--out", tmp_path)
    run = rs.run_model(fixture("bert-tiny"), samples=4, tokens=16, draws=5, seed=3)  # default text: GLUE RTE train
    assert run.weights == ["init", "pretrained"] and run.model == "bert-tiny"
    assert_table_equals_csv(run.residual, tmp_path / "residual.csv")
    assert_table_equals_csv(run.paths, tmp_path / "paths.csv")
    assert_table_equals_csv(run.skip_ratio, tmp_path / "skip_ratio.csv")
    assert_findings_equal(run.findings, tmp_path / "findings.json")
    assert len(run.iterate["step"]) == 0  # USE lite only
    # Attention sinks are a decoder's tables: an encoder has none (they were filled and labelled "causal").
    assert run.attention_heads is None and run.sink_rate is None and run.mask == "bidirectional"
    assert not (tmp_path / "attention_heads.csv").exists()
    # One variant named as a string is that variant, not its letters.
    one = rs.run_model(fixture("bert-tiny"), samples=4, tokens=16, draws=5, seed=3, variants="SAN")
    assert set(one.residual["variant"]) == {"SAN"}
    np.testing.assert_array_equal(one.residual["mean"], run.residual["mean"][run.residual["variant"] == "SAN"])


@pytest.mark.parametrize("name", FIXTURE_MODELS)
def test_forward_and_e1_match_the_conformance_fixtures(name):
    for variant in ("SAN", "SAN+MLP", "SAN+skip", "transformer"):
        expected, _ = read_safetensors(os.path.join(fixture(name), f"expected-{variant}.safetensors"))
        inputs = {key: expected[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
        model = rs.load_model(fixture(name))
        last, hooks = model.forward(**inputs, variant=variant)
        real = expected["attention_mask"].astype(bool)
        layers = model.config["layers"]
        for layer in range(layers + 1):
            hook = "hook_embed" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
            got, want = hooks[hook][real], expected[f"hidden_states.{layer}"][real]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=f"{variant} {hook}")
        np.testing.assert_array_equal(last, hooks[f"blocks.{layers - 1}.hook_resid_post"])
        for layer in range(layers):
            got = hooks[f"blocks.{layer}.attn.hook_pattern"]
            want = expected[f"attentions.{layer}"]
            for b in range(got.shape[0]):  # rows and columns of real tokens
                keep = np.flatnonzero(real[b])
                np.testing.assert_allclose(got[b][:, keep][:, :, keep], want[b][:, keep][:, :, keep], atol=1e-5,
                                           err_msg=f"{variant} attentions.{layer}")
        run = rs.run_model(fixture(name), inputs=inputs, weights="pretrained", variants=[variant], draws=2)
        # As the C++ conformance test: 1e-5 absolute (float32 round-off of an O(1) ratio; collapsed rows are noise).
        np.testing.assert_allclose(run.residual["mean"], expected["e1_mean"], rtol=0, atol=1e-5, err_msg=variant)
        np.testing.assert_allclose(run.residual["std"], expected["e1_std"], rtol=0, atol=1e-5, err_msg=variant)
        # E1 from its definition on the recorded hidden states (real tokens of each sample).
        for layer in range(layers + 1):
            hook = "hook_embed" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
            values = [relative_residual_reference(hooks[hook][b][real[b]].astype(np.float64)) for b in range(len(real))]
            np.testing.assert_allclose(run.residual["mean"][layer], np.mean(values), rtol=1e-9)


def test_forward_of_a_sample_with_one_real_token_matches_transformers():
    # A forward of one token is well defined (only the measures need 2): Model.forward used to refuse it with the
    # measures' "the measures need at least 2". Judged by transformers on the same checkpoint, alone and padded.
    import transformers
    path = fixture("bert-tiny")
    reference = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    model = rs.load_model(path)
    ids = np.array([[5, 17, 9]], dtype=np.int64)
    for input_ids, mask in ((ids[:, :1], None), (ids, np.array([[1, 0, 0]], dtype=np.int64))):
        _, hooks = model.forward(input_ids, attention_mask=mask)
        with torch.no_grad():
            want = reference(input_ids=torch.from_numpy(input_ids),
                             attention_mask=None if mask is None else torch.from_numpy(mask), output_hidden_states=True)
        for layer, expected in enumerate(want.hidden_states):
            hook = "hook_embed" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
            np.testing.assert_allclose(hooks[hook][:, 0], expected[:, 0].numpy(), rtol=1e-5, atol=1e-5, err_msg=hook)
    with pytest.raises(rs.Error, match="sample 0 has no real token"):
        model.forward(ids, attention_mask=np.zeros((1, 3), dtype=np.int64))
    # The measures keep their 2.
    with pytest.raises(rs.Error, match="the measures need at least 2"):
        rs.run_model(path, inputs={"input_ids": ids, "attention_mask": np.array([[1, 0, 0]])}, weights="pretrained")


@pytest.mark.parametrize("name", FIXTURE_MODELS)
def test_token_id_inputs_with_padding_equal_the_commands_inputs_run(tmp_path, name):
    expected, _ = read_safetensors(os.path.join(fixture(name), "expected-transformer.safetensors"))
    inputs = {key: expected[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    write_safetensors(tmp_path / "batch.safetensors", inputs)
    run_cli("model", "--model", fixture(name), "--inputs", tmp_path / "batch.safetensors", "--draws", 4,
            "--layer-norm", "freeze", "--seed", 11, *threads(), "--out", tmp_path / "out")
    for given in (inputs, tmp_path / "batch.safetensors"):
        run = rs.run_model(fixture(name), inputs=given, draws=4, layer_norm="freeze", seed=11)
        assert_findings_equal(run.findings, tmp_path / "out" / "findings.json")
        assert_table_equals_csv(run.residual, tmp_path / "out" / "residual.csv")
        assert_table_equals_csv(run.paths, tmp_path / "out" / "paths.csv")
        assert_table_equals_csv(run.skip_ratio, tmp_path / "out" / "skip_ratio.csv")
        np.testing.assert_array_equal(run.batch["attention_mask"], inputs["attention_mask"])


def test_an_overflowing_checkpoint_needs_allow_nonfinite(tmp_path):
    # Query and key weights x 1e25: layer 0's scores overflow float32 and every later state is NaN. allow_nonfinite=True
    # was not passed to the hidden-state check, which stopped the run whatever it said.
    folder = tmp_path / "overflowing"
    shutil.copytree(fixture("bert-tiny"), folder)
    tensors, _ = read_safetensors(str(folder / "model.safetensors"))
    for name in tensors:
        if name.endswith(("attention.self.query.weight", "attention.self.key.weight")):
            tensors[name] = tensors[name] * np.float32(1e25)
    write_safetensors(str(folder / "model.safetensors"), tensors)
    expected, _ = read_safetensors(os.path.join(fixture("bert-tiny"), "expected-transformer.safetensors"))
    inputs = {key: expected[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    with pytest.raises(rs.Error, match=r"^non-finite hidden state at layer 1 \(SAN\) \(pass allow_nonfinite=True to "
                                       r"write it anyway\) \(overflowing pretrained\)$"):
        rs.run_model(str(folder), inputs=inputs, weights="pretrained", draws=3)
    run = rs.run_model(str(folder), inputs=inputs, weights="pretrained", draws=3, allow_nonfinite=True)
    layers = np.asarray(run.residual["layer"])
    assert np.isnan(np.asarray(run.residual["mean"])[layers >= 1]).all()
    assert np.isfinite(np.asarray(run.residual["mean"])[layers == 0]).all()
    assert np.isnan(np.asarray(run.paths["relative_residual"])).all()  # every map is NaN (they read 0)


def test_masked_measures_on_recorded_hidden_states_give_e1_of_a_padded_batch():
    # E1 measures each sample over its real tokens; the same from the recorded activations and the tokenizer's mask.
    expected, _ = read_safetensors(os.path.join(fixture("bert-tiny"), "expected-transformer.safetensors"))
    inputs = {key: expected[key].copy() for key in ("input_ids", "attention_mask", "token_type_ids")}
    inputs["attention_mask"][0, 7:] = 0
    run = rs.run_model(fixture("bert-tiny"), inputs=inputs, weights="pretrained", variants="transformer", draws=0,
                       record=True)
    layers = len(run.residual["layer"])
    for layer in range(layers):
        name = "blocks.0.hook_resid_pre" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
        values = rs.relative_residual(run.activations[name], attention_mask=inputs["attention_mask"])
        for column, value in (("mean", values.mean()), ("min", values.min()), ("max", values.max())):
            np.testing.assert_allclose(run.residual[column][layer], value, rtol=1e-12, err_msg=f"{name} {column}")
        unmasked = rs.relative_residual(run.activations[name])
        assert abs(unmasked.mean() - values.mean()) > 1e-4, "the padding rows change the measure"


def test_device_is_taken_as_the_command_lines_device():
    # device="cpu" is the default run; CUDA runs where this torch has it (gpu-check.sh on a lent GPU), and is
    # refused, naming the setting, where it has not (this CPU wheel).
    model = fixture("bert-tiny")
    ids = {"input_ids": np.arange(24, dtype=np.int64).reshape(2, 12) % 60 + 2}
    default = rs.run_model(model, inputs=ids, weights="init", draws=2)
    on_cpu = rs.run_model(model, inputs=ids, weights="init", draws=2, device="cpu")
    np.testing.assert_array_equal(on_cpu.residual["mean"], default.residual["mean"])
    theory = rs.run_theory(layers=2, d_model=8, tokens=5, seeds=1, device="cpu")
    np.testing.assert_array_equal(theory.rows["residual"],
                                  rs.run_theory(layers=2, d_model=8, tokens=5, seeds=1).rows["residual"])
    loaded = rs.load_model(model, weights="init", seed=1)
    hidden = loaded.forward(ids["input_ids"])[0]
    assert loaded.device == "cpu"
    np.testing.assert_array_equal(rs.load_model(model, weights="init", seed=1, device="cpu").forward(ids["input_ids"])[0],
                                  hidden)
    runs = ((lambda device: rs.run_model(model, inputs=ids, weights="init", draws=2, device=device).residual["mean"],
             default.residual["mean"]),
            (lambda device: rs.run_theory(layers=2, d_model=8, tokens=5, seeds=1, device=device).rows["residual"],
             theory.rows["residual"]),
            (lambda device: rs.load_model(model, weights="init", seed=1, device=device).forward(ids["input_ids"])[0],
             hidden))
    for call, on_the_cpu in runs:
        with pytest.raises(rs.Error, match=r"^unknown device 'gpu' \(expected cpu, cuda or cuda:N\) \(device\)$"):
            call("gpu")
        if torch.cuda.is_available():
            np.testing.assert_allclose(call("cuda"), on_the_cpu, rtol=1e-5, atol=1e-6)
        else:
            with pytest.raises(rs.Error, match=r"^device cuda: this libtorch has no CUDA or sees no GPU") as raised:
                call("cuda")
            assert raised.value.where == "device"
    if torch.cuda.is_available():  # the weights live on the GPU: no CPU views to hand out
        with pytest.raises(rs.Error, match=r"^parameters\(\) views the weights in CPU memory; this model is on cuda"):
            rs.load_model(model, weights="init", seed=1, device="cuda").parameters()


def test_use_lite_with_its_iterate_experiment_equals_the_command(tmp_path):
    run_cli("model", "--model", "use-lite", "--samples", 3, "--tokens", 24, "--draws", 4, "--iterate", 3, *threads(),
            "--out", tmp_path)
    run = rs.run_model("use-lite", samples=3, tokens=24, draws=4, iterate=3, record=True, frame=True)
    assert run.model_type == "use_lite"
    for name in ("residual", "paths", "skip_ratio", "iterate"):
        table = getattr(run, name)
        assert_table_equals_csv({column: table[column].to_numpy() for column in table.columns},
                                tmp_path / f"{name}.csv")
    assert_findings_equal(run.findings, tmp_path / "findings.json")
    # record=True keeps the unmodified pretrained model's activations: E1's transformer row from its definition.
    transformer = run.residual[(run.residual["weights"] == "pretrained") & (run.residual["variant"] == "transformer")]
    hidden = run.activations["blocks.1.hook_resid_post"].astype(np.float64)
    np.testing.assert_allclose(transformer["mean"].to_numpy()[2], relative_residual_reference(hidden).mean(), rtol=1e-9)


def test_inputs_in_memory_any_mapping_or_the_ids_alone_and_text_as_sentences(tmp_path):
    expected, _ = read_safetensors(os.path.join(fixture("bert-tiny"), "expected-transformer.safetensors"))
    inputs = {key: expected[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    settings = dict(draws=2, variants="SAN", weights="init")
    reference = rs.run_model(fixture("bert-tiny"), inputs=inputs, **settings)
    # A tokenizer's BatchEncoding is a Mapping, not a dict: it reached os.fspath ("expected str, bytes or os.PathLike").
    mapped = rs.run_model(fixture("bert-tiny"), inputs=collections.UserDict(inputs), **settings)
    np.testing.assert_array_equal(mapped.residual["mean"], reference.residual["mean"])
    # The ids alone: every token real, one segment.
    alone = rs.run_model(fixture("bert-tiny"), inputs=torch.from_numpy(inputs["input_ids"]), **settings)
    assert alone.batch["attention_mask"].all() and (alone.batch["token_type_ids"] == 0).all()
    # A misspelt key was ignored, and the padding measured as tokens.
    with pytest.raises(rs.Error, match=r"^unknown key 'attention_masks' \(expected input_ids, attention_mask, "
                                       r"token_type_ids\) \(inputs\)$"):
        rs.run_model(fixture("bert-tiny"), inputs={"input_ids": inputs["input_ids"],
                                                   "attention_masks": inputs["attention_mask"]}, **settings)
    with pytest.raises(rs.Error, match=r"^no input_ids \(inputs\)$"):
        rs.run_model(fixture("bert-tiny"), inputs={"attention_mask": inputs["attention_mask"]}, **settings)
    # A .npy where a .safetensors file goes: named as another format (it was "header size 3796... is above the limit").
    np.save(tmp_path / "ids.npy", inputs["input_ids"])
    with pytest.raises(rs.Error, match=r"^not a safetensors file \(a \.npy, \.pt or other format\?\): "):
        rs.run_model(fixture("bert-tiny"), inputs=tmp_path / "ids.npy", **settings)
    # Sentences in a list are the text file with one sentence per line (text= was a path only).
    sentences = ["The cat sat on the mat.", "A dog ran in the park today.", "It rained all day long."] * 4
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n")
    with pytest.warns(rs.RankscopeWarning) as said:  # (the fixture's 64 pieces spell no English word)
        from_list = rs.text_batch(fixture("bert-tiny"), text=sentences, samples=2, tokens=8)
    # The warning names the sentences, not the scratch file they were written to.
    assert [str(w.message).split("not the text of ")[1].split(" (")[0] for w in said] == ["the sentences given"]
    from_file = rs.text_batch(fixture("bert-tiny"), text=tmp_path / "sentences.txt", samples=2, tokens=8)
    for key in from_file:
        np.testing.assert_array_equal(from_list[key], from_file[key])
    for bad, message in (([], r"^no sentences given \(text\)$"), (["a b", " "], r"^sentence 2 is empty \(text\)$"),
                         (["one\ntwo"], r"^sentence 1 has a line break"), ([3], r"^sentence 1 is int, not text"),
                         ("", r"^an empty path: give a text file or a list of sentences \(text\)$"),
                         # (it named the scratch file the sentences were written to, and said "1 samples")
                         (["a b c d e f g h"], r"^text too short: it fills 1 sample of 8 tokens, 2 were asked for \(text\)$")):
        with pytest.raises(rs.Error, match=message):
            rs.run_model(fixture("bert-tiny"), text=bad, samples=2, tokens=8)


def test_builtin_configuration_trains_its_tokenizer_as_the_command_does(tmp_path):
    # (the default weights, auto: a built-in configuration has init weights only; the default "both" was refused)
    args = ["--model", "albert-base-v2", "--samples", 2, "--tokens", 16, "--variants", "SAN,transformer", "--draws", 2,
            *threads()]
    run_cli("model", *args, "--out", tmp_path)
    run = rs.run_model("albert-base-v2", samples=2, tokens=16, variants=["SAN", "transformer"], draws=2)
    assert run.weights == ["init"]
    assert_table_equals_csv(run.residual, tmp_path / "residual.csv")
    assert_table_equals_csv(run.paths, tmp_path / "paths.csv")
    batch = rs.text_batch("albert-base-v2", samples=2, tokens=16)
    np.testing.assert_array_equal(batch["input_ids"], run.batch["input_ids"])
    assert batch["input_ids"].shape == (2, 16) and batch["attention_mask"].all()


def test_model_api_torch_tensors_parameters_and_errors(tmp_path):
    model = rs.load_model(fixture("bert-tiny"), weights="init", seed=1)
    assert model.config["model_type"] == "bert" and model.source.kind == "huggingface"
    ids = torch.randint(0, 64, (2, 10))
    last, hooks = model.forward(ids, variant="SAN+skip")
    assert isinstance(last, torch.Tensor) and tuple(last.shape) == (2, 10, 32)
    assert isinstance(hooks["blocks.0.attn.hook_pattern"], torch.Tensor)
    # A boolean attention mask (True = a real token), as torch users write it, is the 0/1 mask.
    real = torch.ones(2, 10, dtype=torch.int64)
    real[1, 7:] = 0
    for same in (real.bool(), real.float()):  # 0/1 floats too, as the measures take them
        np.testing.assert_array_equal(model.forward(ids, same, variant="SAN")[0].numpy(),
                                      model.forward(ids, real, variant="SAN")[0].numpy())
    with pytest.raises(rs.Error, match=r"^entries other than 0 and 1 .*\(attention_mask\)$"):
        model.forward(ids, real * 2)
    first, second = model.parameters(), model.parameters()
    assert "encoder.layer.0.attention.self.query.weight" in first
    assert np.shares_memory(first["embeddings.word_embeddings.weight"], second["embeddings.word_embeddings.weight"])
    # Writing into those views changes the model; a NaN written there is refused at the next forward, by name.
    first["encoder.layer.1.attention.output.dense.weight"][0, 0] = float("nan")
    with pytest.raises(rs.Error, match=r"^has NaN or Inf entries \(encoder\.layer\.1\.attention\.output\.dense\.weight\)$"):
        model.forward(ids)
    # The same messages as the command line.
    # A name that is no folder says what a model argument takes (it said "cannot open config file: ... (bert-large-
    # cased/config.json)"); a folder without config.json names the file.
    unknown = ("no such model folder, and not a built-in configuration (bert-base-cased, albert-base-v2, xlnet-base-cased, "
               "gpt2, pythia-160m, llama-12l, llama-gqa) or use-lite: point it at a downloaded Hugging Face folder (bert-large-cased)")
    assert cli_error("model", "--model", "bert-large-cased", "--weights", "init") == unknown
    with pytest.raises(rs.Error) as raised:
        rs.load_model("bert-large-cased")
    assert str(raised.value) == unknown and raised.value.where == "bert-large-cased"
    (tmp_path / "empty").mkdir()
    empty_config = f"cannot open config file: No such file or directory ({tmp_path / 'empty' / 'config.json'})"
    assert cli_error("model", "--model", tmp_path / "empty", "--weights", "init") == empty_config
    with pytest.raises(rs.Error) as raised:
        rs.run_model(tmp_path / "empty", weights="init")
    assert str(raised.value) == empty_config
    assert raised.value.where == str(tmp_path / "empty" / "config.json")
    # A file named as the model is said to be one (it read as "cannot open config file: Not a directory").
    (tmp_path / "weights.bin").write_bytes(b"x")
    a_file = f"a file, not a model folder: name the folder that holds config.json and the weights ({tmp_path / 'weights.bin'})"
    assert cli_error("model", "--model", tmp_path / "weights.bin", "--weights", "init") == a_file
    with pytest.raises(rs.Error, match="^a file, not a model folder"):
        rs.load_model(tmp_path / "weights.bin")
    message = cli_error("model", "--model", "bert-base-cased", "--weights", "both")
    assert message.endswith(" (--weights)")
    with pytest.raises(rs.Error) as raised:
        rs.run_model("bert-base-cased", weights="both")
    assert str(raised.value) == message.replace(" (--weights)", " (weights)")
    write_safetensors(tmp_path / "ids.safetensors", {"input_ids": np.full((1, 4), 99, dtype=np.int64)})
    message = cli_error("model", "--model", fixture("bert-tiny"), "--inputs", tmp_path / "ids.safetensors")
    assert message == f"values 99..99 outside the model's vocabulary [0, 64) ({tmp_path / 'ids.safetensors'}:input_ids)"
    with pytest.raises(rs.Error) as raised:
        rs.run_model(fixture("bert-tiny"), inputs=tmp_path / "ids.safetensors")
    assert str(raised.value) == message
    with pytest.raises(rs.Error, match=r"^values 99\.\.99 outside the model's vocabulary \[0, 64\) \(input_ids\)$"):
        model.forward(np.full((1, 4), 99))
    with pytest.raises(rs.Error, match=r"^unknown variant 'MLP' .*\(variant\)$"):
        model.forward(ids, variant="MLP")
    with pytest.raises(rs.Error, match=r"^unknown variant 'MLP' \(expected SAN, SAN\+MLP, SAN\+skip, transformer\) "
                                       r"\(variants\)$"):
        rs.run_model(fixture("bert-tiny"), variants=["SAN", "MLP"])


def tiny_llama(folder, rng):
    """A Llama-layout folder (grouped-query attention, 2 layers) with random weights large enough that attention is
    far from uniform."""
    os.makedirs(folder, exist_ok=True)
    config = {"model_type": "llama", "vocab_size": 40, "hidden_size": 16, "intermediate_size": 24,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    shapes = {"embed_tokens.weight": (40, 16), "norm.weight": (16,)}
    for l in range(2):
        shapes.update({f"layers.{l}.input_layernorm.weight": (16,), f"layers.{l}.post_attention_layernorm.weight": (16,),
                       f"layers.{l}.self_attn.q_proj.weight": (16, 16), f"layers.{l}.self_attn.k_proj.weight": (8, 16),
                       f"layers.{l}.self_attn.v_proj.weight": (8, 16), f"layers.{l}.self_attn.o_proj.weight": (16, 16),
                       f"layers.{l}.mlp.gate_proj.weight": (24, 16), f"layers.{l}.mlp.up_proj.weight": (24, 16),
                       f"layers.{l}.mlp.down_proj.weight": (16, 24)})
    weights = {"model." + name: rng.normal(0, 0.6, shape).astype(np.float32) for name, shape in shapes.items()}
    write_safetensors(os.path.join(folder, "model.safetensors"), weights)
    return folder


def test_decoder_mask_sinks_and_streaming_equal_the_command(tmp_path, rng):
    folder = tiny_llama(tmp_path / "llama", rng)
    ids = rng.integers(0, 40, (3, 10)).astype(np.int64)
    real = np.ones((3, 10), np.int64)
    real[2, :3] = 0  # left padding
    write_safetensors(tmp_path / "ids.safetensors", {"input_ids": ids, "attention_mask": real})
    for mask in ("causal", "bidirectional"):
        out = tmp_path / mask
        run_cli("model", "--model", folder, "--inputs", tmp_path / "ids.safetensors", "--weights", "pretrained",
                "--mask", mask, "--sink-threshold", 0.2, "--draws", 3, *threads(), "--out", out)
        for stream in ("off", "on"):
            run = rs.run_model(folder, inputs=tmp_path / "ids.safetensors", weights="pretrained", mask=mask,
                               sink_threshold=0.2, draws=3, stream=stream, record=True)
            assert run.mask == mask and run.streamed == (stream == "on")
            for name in ("residual", "paths", "skip_ratio", "attention_heads", "sink_rate"):
                assert_table_equals_csv(getattr(run, name), out / f"{name}.csv")
            # The head statistics from the recorded attention maps: the mean over samples of the mean over real
            # queries of the attention paid to the first real token.
            heads = run.attention_heads
            for layer in range(2):
                pattern = run.activations[f"blocks.{layer}.attn.hook_pattern"].astype(np.float64)  # [B, H, n, n]
                shares = np.mean([pattern[b][:, real[b] == 1][:, :, np.argmax(real[b])].mean(axis=1)
                                  for b in range(3)], axis=0)
                rows = heads["layer"] == layer
                np.testing.assert_allclose(heads["first_token_share"][rows], shares, rtol=1e-5)
                masked = rs.attention_measures(pattern, attention_mask=real)["first_token_share"]  # [B, H]
                np.testing.assert_allclose(heads["first_token_share"][rows], masked.mean(0), rtol=1e-5)
                rate = run.sink_rate["sink_rate"][run.sink_rate["layer"] == layer][0]
                assert rate == np.mean(shares > 0.2)
                # A uniform head on the same masks: a sample's k-th real query spreads evenly over the k real keys up
                # to it (causal) or over all m of them; averaged like the measured means (queries, then samples), so
                # the left-padded sample counts its own 7 tokens.
                seen = [np.arange(1, m + 1) if mask == "causal" else np.full(m, m) for m in real.sum(1)]
                row = run.sink_rate["layer"] == layer
                np.testing.assert_allclose(run.sink_rate["uniform_first_token_share"][row][0],
                                           np.mean([np.mean(1 / k) for k in seen]), rtol=1e-12)
                np.testing.assert_allclose(run.sink_rate["uniform_entropy"][row][0],
                                           np.mean([np.mean(np.log(k)) for k in seen]), rtol=1e-12)
            if mask == "causal":  # the causal map is lower triangular on the real tokens
                assert np.triu(run.activations["blocks.1.attn.hook_pattern"][0], 1).max() == 0.0
            else:
                assert np.triu(run.activations["blocks.1.attn.hook_pattern"][0], 1).max() > 0.01
    # A streamed model: the same forward, and no parameters to hand out.
    streamed, whole = rs.load_model(folder, stream="on"), rs.load_model(folder, stream="off")
    assert streamed.streamed and not whole.streamed and streamed.config["decoder"]
    for variant in ("SAN", "transformer"):
        a, hooks_a = streamed.forward(ids, real, variant=variant, mask="bidirectional")
        b, hooks_b = whole.forward(ids, real, variant=variant, mask="bidirectional")
        np.testing.assert_array_equal(a, b)
        assert hooks_a.keys() == hooks_b.keys()
    with pytest.raises(rs.Error, match="holds one layer at a time"):
        streamed.parameters()
    # Encoders have no causal mask to change: the command line's message.
    assert "applies to decoders" in cli_error("model", "--model", fixture("bert-tiny"), "--weights", "init", "--mask",
                                              "causal")
    with pytest.raises(rs.Error, match=r"^mask applies to decoders \(gpt2, gpt_neox, llama, mistral, qwen2\); bert is an encoder"):
        rs.run_model(fixture("bert-tiny"), weights="init", mask="causal", samples=2, tokens=8)
    # The messages name settings as keyword arguments (they said "--stream on", "--tokens 600", "use --weights init").
    with pytest.raises(rs.Error, match=r"^streaming reads a decoder checkpoint's layers .*; bert-tiny is a bert model "
                                       r"\(stream on\)$"):
        rs.run_model(fixture("bert-tiny"), weights="pretrained", stream="on", samples=2, tokens=8)
    with pytest.raises(rs.Error, match=r"^600 tokens per sample are more than the model allows \(512, "
                                       r"max_position_embeddings in .*config.json\) \(tokens\)$"):
        rs.run_model(fixture("bert-tiny"), tokens=600, samples=1)
    with pytest.warns(rs.RankscopeWarning, match=r"^seed 5 is not used: pretrained weights are read, not drawn"):
        rs.load_model(fixture("bert-tiny"), seed=5)


def test_gpt2_batches_carry_token_types_only_when_given(tmp_path):
    # transformers' GPT2Model adds wte(token_type_ids) when they are given: a batch from text has none (it held
    # zeros, which read back as given would have changed the input), one given them keeps them, and they count.
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 40, "n_embd": 8, "n_layer": 1,
                                                      "n_head": 2, "n_positions": 16}))
    source = str(tmp_path)
    ids = np.arange(3, 11)[None, :]
    model = rs.load_model(source, weights="init")
    plain = model.forward(ids)[1]["hook_embed"]
    typed = model.forward(ids, token_type_ids=np.zeros_like(ids))[1]["hook_embed"]
    np.testing.assert_allclose(typed - plain, np.broadcast_to(model.parameters()["wte.weight"][0], plain.shape), atol=1e-6)
    run = rs.run_model(source, weights="init", inputs={"input_ids": np.repeat(ids, 2, 0)}, draws=0)
    assert "token_type_ids" not in run.batch
    run = rs.run_model(source, weights="init", inputs={"input_ids": np.repeat(ids, 2, 0),
                                                       "token_type_ids": np.ones((2, 8), np.int64)}, draws=0)
    assert (run.batch["token_type_ids"] == 1).all()


def test_roberta_positions_limit_the_tokens(tmp_path):
    # RoBERTa numbers positions from pad_token_id + 1: 18 position embeddings hold 16 tokens (config says so, and a
    # 17-token batch is refused naming the offset); a random init of it runs.
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "roberta", "vocab_size": 40, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 18, "type_vocab_size": 1}))
    model = rs.load_model(str(tmp_path), weights="init")
    assert {key: model.config[key] for key in ("pad_token_id", "position_offset", "max_tokens")} == \
        {"pad_token_id": 1, "position_offset": 2, "max_tokens": 16}
    assert model.forward(np.arange(3, 19)[None, :])[0].shape == (1, 16, 8)
    with pytest.raises(rs.Error, match=r"^17 tokens per sample; the model allows 16 \(max_position_embeddings 18 less "
                                       r"RoBERTa's offset 2\) \(input_ids\)$"):
        model.forward(np.arange(3, 20)[None, :])
    with pytest.raises(rs.Error, match=r"^the built-in configuration 'gpt2' has no pretrained weights, only a random "
                                       r"init \(init\); a downloaded Hugging Face folder has both \(weights\)$"):
        rs.load_model("gpt2")


def test_engine_warnings_are_python_warnings_at_the_callers_line(capfd):
    """The engine's warnings reach Python's `warnings` as RankscopeWarning (a C++ write to stderr never shows in a
    notebook's cell, and no filter could catch it): bert-tiny's 64-piece vocabulary makes RTE's words [UNK]."""
    import warnings
    with pytest.warns(rs.RankscopeWarning, match=r"^\d+ of the \d+ text tokens \(\d+%\) are the unknown token of "
                                                 r".*bert-tiny.*\(a vocabulary that does not fit the text\?\)$") as warned:
        batch = rs.text_batch(fixture("bert-tiny"), samples=2, tokens=12)
    assert len(warned) == 1 and warned[0].filename == __file__  # the caller's line, not the package's wrapper
    assert batch["input_ids"].shape == (2, 12)
    assert "warning" not in capfd.readouterr().err  # said once, in Python only
    # The filter "error" raises it out of the call, as Python's own warnings are raised.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(rs.RankscopeWarning, match="are the unknown token of"):
            rs.text_batch(fixture("bert-tiny"), samples=2, tokens=12)
    assert issubclass(rs.RankscopeWarning, UserWarning)
