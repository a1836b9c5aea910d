"""`rankscope model` on the built-in decoder configurations at random init (gpt2, pythia-160m, llama-gqa) end to end
(and `rankscope dynamics` on Pythia-style step folders): the
attention-sink tables, the causal vs bidirectional option and its refusal on an encoder."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, FIXTURES, RTE, read_csv, require, run  # noqa: E402


def write_byte_tokenizer(folder):
    """A byte-level BPE tokenizer.json with no merges: GPT-2's 256 byte symbols (ids 0-255) and <|endoftext|> (256)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    symbols, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            symbols[byte] = chr(byte)
        else:
            symbols[byte], extra = chr(256 + extra), extra + 1
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    document = {"version": "1.0", "truncation": None, "padding": None,
                "added_tokens": [{"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True}],
                "normalizer": None, "pre_tokenizer": level, "post_processor": level, "decoder": level,
                "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                          "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                          "vocab": {symbols[b]: b for b in range(256)}, "merges": []}}
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(document, f)


class DecoderModelCommand(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(RTE)
        cls.directory = tempfile.mkdtemp(prefix="rankscope-decoders-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.directory, ignore_errors=True)

    def model(self, name, *extra):
        out = os.path.join(self.directory, name + "-" + "-".join(extra).replace("-", ""))
        result = run("model", "--model", name, "--weights", "init", "--samples", "2", "--tokens", "24", "--draws", "3",
                     "--out", out, *extra)
        return out, result

    def test_gpt2_causal_writes_sink_tables(self):
        out, result = self.model("gpt2")
        heads = read_csv(os.path.join(out, "attention_heads.csv"))
        self.assertEqual(len(heads), 12 * 12)
        self.assertEqual({row["mask"] for row in heads}, {"causal"})
        for row in heads:
            share = float(row["first_token_share"])
            # Causal: the first real token attends only to itself, so every head's share is at least 1/n.
            self.assertGreaterEqual(share, 1 / 24 - 1e-9)
            self.assertLessEqual(share, 1.0)
            self.assertEqual(int(row["sink"]), int(share > 0.3))
        rates = read_csv(os.path.join(out, "sink_rate.csv"))
        self.assertEqual([int(r["layer"]) for r in rates], list(range(12)))
        with open(os.path.join(out, "findings.json")) as f:
            findings = json.load(f)
        self.assertIn("Attention sinks (init weights, causal mask)", findings["reading"])
        self.assertIn("sink rate", result.stdout)
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["mask"], "causal")

    def test_llama_gqa_bidirectional_labels_every_variant(self):
        out, _ = self.model("llama-gqa", "--mask", "bidirectional")
        variants = {row["variant"] for row in read_csv(os.path.join(out, "residual.csv"))}
        self.assertEqual(variants, {"SAN (bidirectional)", "SAN+MLP (bidirectional)", "SAN+skip (bidirectional)",
                                    "transformer (bidirectional)"})
        heads = read_csv(os.path.join(out, "attention_heads.csv"))
        self.assertEqual(len(heads), 12 * 12)  # query heads, not the 4 key/value heads
        self.assertEqual({row["mask"] for row in heads}, {"bidirectional"})

    def test_pythia_160m_parallel_blocks(self):
        out, _ = self.model("pythia-160m")
        rows = read_csv(os.path.join(out, "residual.csv"))
        self.assertEqual({row["variant"] for row in rows}, {"SAN", "SAN+MLP", "SAN+skip", "transformer"})
        last = {row["variant"]: float(row["mean"]) for row in rows if int(row["layer"]) == 12}
        self.assertEqual(len(last), 4)
        self.assertLess(last["SAN"], last["transformer"])  # pure attention collapses furthest
        self.assertEqual(len(read_csv(os.path.join(out, "attention_heads.csv"))), 12 * 12)
        with open(os.path.join(out, "findings.json")) as f:
            notes = " ".join(json.load(f)["notes"])
        self.assertIn("pythia-160m has parallel blocks (GPT-NeoX's use_parallel_residual)", notes)

    def test_dynamics_reads_pythia_style_step_folders(self):
        # Pythia's training checkpoints as the hub names its revisions (step0, step1000): `dynamics` reads any Hugging
        # Face architecture, and the pretrained-collapse check is not judged under a decoder's causal mask.
        from test_decoders_reference import gpt_neox_weights, save
        c = {"model_type": "gpt_neox", "vocab_size": 257, "hidden_size": 16, "intermediate_size": 24,
             "num_hidden_layers": 5, "num_attention_heads": 2, "rotary_pct": 0.25, "max_position_embeddings": 64}
        run_folder = os.path.join(self.directory, "pythia-run")
        for step, seed in (("step0", 1), ("step1000", 2)):
            folder = os.path.join(run_folder, step)
            save(folder, c, gpt_neox_weights(c, np.random.default_rng(seed)), prefix="gpt_neox.")
            write_byte_tokenizer(folder)
        out = os.path.join(self.directory, "pythia-dynamics")
        run("dynamics", "--checkpoints", run_folder, "--text", RTE, "--samples", "2", "--tokens", "16", "--draws", "0",
            "--out", out)
        self.assertEqual({int(r["step"]) for r in read_csv(os.path.join(out, "dynamics_residual.csv"))}, {0, 1000})
        with open(os.path.join(out, "findings.json")) as f:
            findings = json.load(f)
        self.assertIn("(gpt_neox, 5 layers), 2 checkpoints from step 0 to 1000", findings["subject"])
        [check] = [c for c in findings["checks"] if c["experiment"] == "dynamics"]
        self.assertEqual(check["verdict"], "not comparable at these settings")
        self.assertIn("not judged under a causal mask", check["criterion"])
        self.assertIn("pythia-run has parallel blocks", " ".join(findings["notes"]))
        # step-1000 beside step1000: one step, two folders.
        shutil.copytree(os.path.join(run_folder, "step1000"), os.path.join(run_folder, "step-1000"))
        failed = run("dynamics", "--checkpoints", run_folder, "--out", out + "-twice", check=False)
        self.assertEqual(failed.returncode, 2)
        self.assertIn("two checkpoint folders for step 1000", failed.stderr)

    def test_sliding_window_layers_have_their_own_uniform_baseline(self):
        # Qwen2 with a window of 5 keys from layer 1 on (max_window_layers 1), 24 tokens: a uniform head's first-token
        # share and entropy differ by layer, recomputed here by brute force on the mask (query i sees key j when
        # 0 <= i - j < window), and the reading's baselines are their mean over the layers.
        from test_decoders_reference import llama_weights, save
        c = {"model_type": "qwen2", "vocab_size": 257, "hidden_size": 16, "intermediate_size": 20,
             "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "use_sliding_window": True,
             "sliding_window": 5, "max_window_layers": 1}
        folder = os.path.join(self.directory, "qwen2-window")
        save(folder, c, llama_weights(c, np.random.default_rng(3), qkv_bias=True), prefix="model.")
        write_byte_tokenizer(folder)
        out = os.path.join(self.directory, "qwen2-window-out")
        run("model", "--model", folder, "--weights", "pretrained", "--text", RTE, "--samples", "2", "--tokens", "24",
            "--draws", "2", "--out", out)
        n = 24
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        expected = []
        for layer in range(3):
            seen = (j <= i) & ((i - j < 5) if layer >= 1 else True)
            uniform = seen / seen.sum(1, keepdims=True)
            entropy = -np.where(seen, uniform * np.log(np.where(seen, uniform, 1)), 0).sum(1).mean()
            expected.append((uniform[:, 0].mean(), entropy))
        rows = read_csv(os.path.join(out, "sink_rate.csv"))
        self.assertEqual(len(rows), 3)
        for row, (share, entropy) in zip(rows, expected):
            self.assertAlmostEqual(float(row["uniform_first_token_share"]), share, places=12)
            self.assertAlmostEqual(float(row["uniform_entropy"]), entropy, places=12)
        self.assertLess(expected[1][0], expected[0][0])  # past the window a query no longer sees the first token
        with open(os.path.join(out, "findings.json")) as f:
            reading = json.load(f)["reading"]
        self.assertIn("a uniform causal head over 24 tokens, with its sliding window of 5 keys on 2 of 3 layers: ", reading)
        quoted = float(reading.split("sliding window of 5 keys on 2 of 3 layers: ")[1].split(")")[0])
        self.assertAlmostEqual(quoted, np.mean([e for _, e in expected]), delta=0.005 * quoted)  # 3 significant digits
        import re
        share = float(re.search(r"the (\S+) of a uniform causal head", reading).group(1))
        self.assertAlmostEqual(share, np.mean([s for s, _ in expected]), delta=0.005 * share)

    def test_a_folder_named_like_a_built_in_hides_it_only_when_it_is_a_checkpoint(self):
        # An earlier `--out gpt2` in the working directory: no config.json, so `--model gpt2` is still the built-in,
        # and reproduce's plan still has the bidirectional decoder cell (it was left out silently).
        here = os.path.join(self.directory, "cwd")
        os.makedirs(os.path.join(here, "gpt2"))
        result = subprocess.run([BINARY, "model", "--model", "gpt2", "--weights", "init", "--samples", "2", "--tokens",
                                 "16", "--draws", "2", "--out", "out-gpt2"], cwd=here, capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(read_csv(os.path.join(here, "out-gpt2", "attention_heads.csv"))), 12 * 12)
        plan = subprocess.run([BINARY, "reproduce", "--cells", "no-such-cell", "--out", "r"], cwd=here,
                              capture_output=True, text=True)
        self.assertIn("e1_gpt2_bidirectional", plan.stderr)
        self.assertIn("e1_llama-12l_bidirectional", plan.stderr)
        # A folder of that name with a config.json is a checkpoint and is read first (as from_pretrained does): the
        # 3-layer BERT fixture under the name bert-base-cased (12 layers built in).
        shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), os.path.join(here, "bert-base-cased"))
        result = subprocess.run([BINARY, "model", "--model", "bert-base-cased", "--weights", "init", "--text", RTE,
                                 "--samples", "2", "--tokens", "12", "--draws", "2", "--out", "out-bert"], cwd=here,
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        layers = {int(row["layer"]) for row in read_csv(os.path.join(here, "out-bert", "residual.csv"))}
        self.assertEqual(max(layers), 3)

    def test_mask_on_an_encoder_is_an_error(self):
        result = run("model", "--model", "bert-base-cased", "--weights", "init", "--samples", "2", "--tokens", "16",
                     "--mask", "causal", "--out", os.path.join(self.directory, "bert"), check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--mask applies to decoders", result.stderr)
        self.assertTrue(result.stderr.rstrip().endswith("already bidirectional (--mask)"), result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
