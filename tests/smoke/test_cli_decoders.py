"""`rankscope model` on the built-in decoder configurations at random init (gpt2, pythia-160m, llama-gqa) end to end: the
attention-sink tables, the causal vs bidirectional option and its refusal on an encoder."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, FIXTURES, RTE, read_csv, require, run  # noqa: E402


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
