"""`rankscope model` end to end on small random checkpoints in the Hugging Face layout, with a SentencePiece model
trained on RTE text (ALBERT, XLNet) and the fixture's WordPiece list (BERT)."""
import json
import struct
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, FIXTURES, RTE, read_csv, read_safetensors, require, run, write_safetensors  # noqa: E402

SPM = os.path.join(os.path.dirname(BINARY), "rankscope-spm")


class ModelCommand(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(FIXTURES, RTE)
        cls.directory = tempfile.mkdtemp(prefix="rankscope-model-")
        sentences = os.path.join(cls.directory, "sentences.txt")
        with open(RTE) as f, open(sentences, "w") as out:
            next(f)
            for line in f:
                fields = line.rstrip("\n").split("\t")
                out.write(fields[1] + "\n" + fields[2] + "\n")
        cls.spiece = os.path.join(cls.directory, "spiece")
        subprocess.run([SPM, "train", sentences, cls.spiece, "600"], check=True)

    def make_checkpoint(self, name, word_embedding):
        """The fixture's weights with a 600-row word embedding and the RTE SentencePiece model."""
        folder = os.path.join(self.directory, name)
        os.makedirs(folder, exist_ok=True)
        tensors = dict(read_safetensors(os.path.join(FIXTURES, name, "model.safetensors")))
        rng = np.random.default_rng(0)
        tensors[word_embedding] = (rng.normal(size=(600, tensors[word_embedding].shape[1])) * 0.1).astype(np.float32)
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        with open(os.path.join(FIXTURES, name, "config.json")) as f:
            config = json.load(f)
        config["vocab_size"] = 600
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        shutil.copy(self.spiece + ".model", os.path.join(folder, "spiece.model"))
        return folder

    def check_run(self, folder, layers):
        out = os.path.join(folder, "out")
        dump = os.path.join(out, "acts.safetensors")
        result = run("model", "--model", folder, "--text", RTE, "--samples", "4", "--tokens", "24", "--draws", "5",
                     "--out", out, "--dump", dump)
        self.assertIn("transformer", result.stdout)
        rows = read_csv(os.path.join(out, "residual.csv"))
        self.assertEqual(list(rows[0].keys()),
                         ["model", "weights", "variant", "layer", "norm", "center", "mean", "std", "min", "max", "n"])
        self.assertEqual(len(rows), 2 * 4 * (layers + 1))
        san = [float(r["mean"]) for r in rows if r["variant"] == "SAN" and r["weights"] == "init"]
        self.assertLess(san[-1], san[0])
        self.assertEqual(len(read_csv(os.path.join(out, "paths.csv"))), 2 * 5 * layers)
        for figure in ["residual.svg", "paths.svg"]:
            ElementTree.parse(os.path.join(out, figure))
        activations = read_safetensors(dump)
        self.assertEqual(activations[f"blocks.{layers - 1}.attn.hook_pattern"].shape, (4, 4, 24, 24))
        self.assertEqual(activations["hook_embed"].shape, (4, 24, 32))
        np.testing.assert_allclose(activations["blocks.0.attn.hook_pattern"].sum(-1), 1.0, atol=1e-5)
        self.assertTrue((activations["attention_mask"] == 1).all())  # packed text: no padding
        return activations

    def test_albert_with_sentencepiece(self):
        folder = self.make_checkpoint("albert-tiny", "embeddings.word_embeddings.weight")
        self.check_run(folder, 3)
        # Greek text through a model trained on English: SentencePiece gives its letters <unk>, and a warning says so,
        # as it does for WordPiece's [UNK] (no SentencePiece model said it).
        greek = os.path.join(self.directory, "greek.txt")
        with open(greek, "w") as f:
            f.write("".join("αλφα βητα γαμμα δελτα εψιλον ζητα ητα θητα ιωτα καππα λαμβδα μυ\n" for _ in range(4)))
        result = run("model", "--model", folder, "--text", greek, "--samples", "2", "--tokens", "16", "--draws", "0",
                     "--variants", "SAN", "--out", os.path.join(self.directory, "greek"))
        warnings = [line for line in result.stderr.splitlines() if line.startswith("rankscope: warning: ")]
        self.assertEqual(len(warnings), 1, result.stderr)
        self.assertRegex(warnings[0], r"of the 28 text tokens \(\d+%\) are the unknown token of .*spiece\.model")

    def test_xlnet_with_sentencepiece(self):
        activations = self.check_run(self.make_checkpoint("xlnet-tiny", "word_embedding.weight"), 3)
        # XLNet's layout: content (type 0), then <sep> (type 0) and <cls> (its own type 2) at the END.
        types = activations["token_type_ids"]
        self.assertTrue((types[:, :-1] == 0).all() and (types[:, -1] == 2).all())
        self.assertEqual(len(set(activations["input_ids"][:, -1])), 1)
        self.assertEqual(len(set(activations["input_ids"][:, -2])), 1)

    def test_bert_with_wordpiece_fixture(self):
        out = os.path.join(self.directory, "bert-out")
        result = run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--samples", "3",
                     "--tokens", "16", "--weights", "pretrained", "--variants", "SAN,transformer", "--out", out)
        self.assertEqual(len(read_csv(os.path.join(out, "residual.csv"))), 2 * 4)
        # Fewer or shorter samples than the paper's 32 x 128 are said in the findings (only the settings column showed
        # it); at the paper's size nothing is said.
        with open(os.path.join(out, "findings.json")) as f:
            self.assertIn("Measured on 3 samples × 16 tokens, fewer or shorter than the paper's 32 × 128", json.load(f)["notes"][0])
        full = os.path.join(self.directory, "bert-full")
        run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--weights", "pretrained", "--draws",
            "0", "--variants", "SAN", "--out", full)
        with open(os.path.join(full, "findings.json")) as f:
            self.assertFalse(any("fewer or shorter" in note for note in json.load(f)["notes"]))
        # The fixture's 64 pieces (tok5, tok6, ...) spell no English word: every text token is [UNK], the samples are
        # identical, and a warning says so (nothing did).
        warnings = [line for line in result.stderr.splitlines() if line.startswith("rankscope: warning: ")]
        self.assertEqual(len(warnings), 1, result.stderr)
        self.assertIn("of the 42 text tokens (100%) are the unknown token of", warnings[0])
        self.assertIn(os.path.join(FIXTURES, "bert-tiny", "vocab.txt"), warnings[0])
        # Text in its own pieces: no warning.
        own = os.path.join(self.directory, "pieces.txt")
        with open(own, "w") as f:
            f.write("\n".join(" ".join(f"tok{i}" for i in range(5 + line, 30 + line)) for line in range(6)) + "\n")
        result = run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", own, "--samples", "2",
                     "--tokens", "16", "--weights", "pretrained", "--draws", "0", "--out", os.path.join(self.directory, "own"))
        self.assertNotIn("unknown token", result.stderr)
        # tokenize says the same of the same text (it showed the [UNK] ids without a word), and nothing of its own.
        said = run("tokenize", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE).stderr
        self.assertRegex(said, r"rankscope: warning: \d+ of the \d+ text tokens \(100%\) are the unknown token of")
        self.assertNotIn("unknown token", run("tokenize", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", own).stderr)
        # A special token's string in the text is that token, as transformers matches it ([MASK] is id 4, [SEP] 3;
        # vocab.txt lines 5 and 4), and nothing is said.
        masked = os.path.join(self.directory, "masked.txt")
        with open(masked, "w") as f:
            f.write("tok5 tok6\ntok7 [MASK] tok8 [SEP] <extra>\n")
        result = run("tokenize", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", masked, "--format", "json")
        ids = [sentence["token_ids"] for sentence in json.loads(result.stdout)["sentences"]]
        self.assertEqual(ids[1][:4], [7, 4, 8, 3])
        self.assertNotIn("warning", result.stderr)
        # A special token the configuration names and the vocabulary lacks is read as characters: said once, naming
        # the sentence.
        folder = os.path.join(self.directory, "bert-tiny-extra")
        shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), folder)
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"additional_special_tokens": ["<extra>"]}, f)
        said = run("tokenize", "--model", folder, "--text", masked).stderr
        warning = (f"rankscope: warning: sentence 2 of {masked} holds \"<extra>\": "
                   f"{os.path.join(folder, 'vocab.txt')} reads it as plain characters, not as a special token (it has "
                   "no such token in its vocabulary)\n")
        self.assertTrue(said.endswith(warning) and said.count("<extra>") == 1, said)

    def test_draws_zero_skips_e2(self):
        # --draws 0: E1 and the skip ratio as usual, no path products, no paths.csv, no E2 figure, no E2 verdict.
        out = os.path.join(self.directory, "no-e2")
        result = run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--samples", "3",
                     "--tokens", "16", "--weights", "pretrained", "--draws", "0", "--out", out)
        self.assertIn("residual.csv, skip_ratio.csv", result.stdout)
        self.assertEqual(len(read_csv(os.path.join(out, "residual.csv"))), 4 * 4)
        self.assertEqual(len(read_csv(os.path.join(out, "skip_ratio.csv"))), 3)
        self.assertFalse(os.path.exists(os.path.join(out, "paths.csv")))
        self.assertFalse(os.path.exists(os.path.join(out, "paths.svg")))
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertNotIn("paths.csv", json.load(f)["outputs"])
        with open(os.path.join(out, "verdicts.csv")) as f:
            self.assertNotIn("E2,", f.read())

    def test_network_changes_are_recorded_with_each_verdict(self):
        # A LayerNorm surgery is in manifest.json and in every verdict row's settings (they judge that network, not
        # the paper's); --compat official is for ALBERT only.
        out = os.path.join(self.directory, "ln-remove")
        run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--samples", "3", "--tokens", "16",
            "--weights", "pretrained", "--draws", "0", "--layer-norm", "remove", "--out", out)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["layer_norm"], manifest["compat"], manifest["samples"], manifest["tokens"]),
                         ("remove", "none", 3, 16))
        rows = read_csv(os.path.join(out, "verdicts.csv"))
        self.assertTrue(rows)
        for row in rows:
            self.assertIn("LayerNorm remove", row["settings"])
        compat_out = os.path.join(self.directory, "compat")
        result = run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--samples", "3",
                     "--tokens", "16", "--compat", "official", "--out", compat_out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--compat official reproduces the official code's ALBERT no-MLP defect; ", result.stderr)
        self.assertTrue(result.stderr.rstrip().endswith(" is bert (--compat)"), result.stderr)
        self.assertFalse(os.path.exists(compat_out))
        # The batch shape as run: an --inputs file of 2 x 6 ids (the --samples/--tokens defaults are 32 x 128), and the
        # --dump file named.
        ids = os.path.join(self.directory, "ids.safetensors")
        write_safetensors(ids, {"input_ids": np.arange(12, dtype=np.int64).reshape(2, 6) + 5})
        inputs_out = os.path.join(self.directory, "inputs")
        dump = os.path.join(inputs_out, "acts.safetensors")
        run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--inputs", ids, "--weights", "pretrained",
            "--draws", "0", "--dump", dump, "--out", inputs_out)
        with open(os.path.join(inputs_out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["samples"], manifest["tokens"], manifest["dump"]), (2, 6, dump))
        # Its metadata says which weights the activations are of: the last kind run (with both, pretrained; it did
        # not say).
        def dump_weights(path):
            with open(path, "rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                return json.loads(f.read(length))["__metadata__"]["weights"]
        self.assertEqual(dump_weights(dump), "pretrained")
        run("model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--inputs", ids, "--weights", "init",
            "--draws", "0", "--dump", dump, "--out", inputs_out)
        self.assertEqual(dump_weights(dump), "init")

    def test_manifest_records_peak_memory_and_malloc(self):
        # The reference for manifest.json's peak resident memory is the child's ru_maxrss as the parent reads it
        # (os.wait4): the manifest is written last, so it holds at most that and nearly all of it. Its malloc is the
        # one this build links; tests/CMakeLists.txt says which (tcmalloc; glibc's without it; ASan's under the
        # sanitizers).
        expected = {"tcmalloc": "tcmalloc (gperftools ", "glibc": "glibc malloc ",
                    "asan": "AddressSanitizer's allocator"}[os.environ["RANKSCOPE_EXPECT_ALLOCATOR"]]
        out = os.path.join(self.directory, "manifest-memory")
        with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: wait4 cannot stall on a full pipe
            process = subprocess.Popen([BINARY, "model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE,
                                        "--samples", "3", "--tokens", "16", "--weights", "pretrained", "--draws", "0",
                                        "--out", out], stdout=subprocess.DEVNULL, stderr=stderr)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            stderr.seek(0)
            self.assertEqual(process.returncode, 0, stderr.read().decode())
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        peak = usage.ru_maxrss * 1024
        self.assertLessEqual(manifest["peak_resident_bytes"], peak)
        self.assertGreater(manifest["peak_resident_bytes"], 0.9 * peak)
        self.assertTrue(manifest["allocator"].startswith(expected), manifest["allocator"])

    def test_manifest_names_every_input_file_with_its_hash(self):
        # files_read: the config, vocabulary, weights and text the run read, each with its size and SHA-256 (hashlib's
        # here), none from the result folder itself (the --inputs ids written into it are its own).
        import hashlib
        folder = os.path.join(FIXTURES, "bert-tiny")
        out = os.path.join(self.directory, "files-read")
        run("model", "--model", folder, "--text", RTE, "--samples", "2", "--tokens", "16", "--weights", "pretrained",
            "--draws", "0", "--out", out)
        with open(os.path.join(out, "manifest.json")) as f:
            records = {r["path"]: r for r in json.load(f)["files_read"]}
        for path in [os.path.join(folder, name) for name in ("config.json", "vocab.txt", "model.safetensors")] + [RTE]:
            record = records.get(os.path.normpath(os.path.abspath(path)))
            self.assertIsNotNone(record, (path, sorted(records)))
            with open(path, "rb") as f:
                data = f.read()
            self.assertEqual((record["bytes"], record["sha256"]), (len(data), hashlib.sha256(data).hexdigest()), path)
        self.assertFalse([p for p in records if p.startswith(os.path.abspath(out) + os.sep)], sorted(records))

    def test_bad_inputs(self):
        folder = os.path.join(self.directory, "broken")
        os.makedirs(folder, exist_ok=True)
        result = run("model", "--model", folder, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("config.json", result.stderr)
        albert = self.make_checkpoint("albert-tiny", "embeddings.word_embeddings.weight")
        broken = os.path.join(self.directory, "albert-badvocab")
        shutil.copytree(albert, broken, dirs_exist_ok=True)
        with open(os.path.join(broken, "spiece.model"), "wb") as f:
            f.write(b"not a sentencepiece model")
        result = run("model", "--model", broken, "--text", RTE, "--samples", "2", "--tokens", "16", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("spiece.model", result.stderr)
        result = run("model", "--model", albert, "--text", RTE, "--tokens", "600", "--samples", "1", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("600 tokens per sample are more than the model allows (512, max_position_embeddings in ", result.stderr)
        self.assertTrue(result.stderr.strip().endswith("config.json) (--tokens)"), result.stderr)
        short = os.path.join(self.directory, "short.txt")
        with open(short, "w") as f:
            f.write("Only a few words here.\n")
        result = run("model", "--model", albert, "--text", short, "--samples", "4", "--tokens", "24", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("text too short", result.stderr)
        empty = os.path.join(self.directory, "empty.txt")
        open(empty, "w").close()
        result = run("model", "--model", albert, "--text", empty, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("no text", result.stderr)
        # A --dump into a folder that does not exist fails before the run (it once failed after it, naming a temp file,
        # and the results went with it), and leaves no --out folder.
        out = os.path.join(self.directory, "dump-out")
        dump = os.path.join(self.directory, "no-such-folder", "acts.safetensors")
        result = run("model", "--model", albert, "--text", RTE, "--samples", "2", "--tokens", "16", "--dump", dump,
                     "--out", out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("does not exist (--dump " + dump + ")", result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_bad_token_id_inputs(self):
        """--inputs: each broken batch file fails with exit code 2 and names the file's tensor."""
        bert = os.path.join(FIXTURES, "bert-tiny")  # vocab 64 (fixture), 2 token types
        with open(os.path.join(bert, "config.json")) as f:
            config = json.load(f)
        ids = np.arange(12, dtype=np.int64).reshape(2, 6) + 5
        cases = [  # (tensors, message, the tensor the error names)
            ({"attention_mask": np.ones((2, 6), np.int64)}, "no tensor named 'input_ids'", ""),
            ({"input_ids": ids.astype(np.float32)}, "must hold integers", ":input_ids"),
            ({"input_ids": ids, "attention_mask": np.ones((2, 5), np.int64)}, "shape [2, 5] differs", ":attention_mask"),
            ({"input_ids": ids + config["vocab_size"]}, "outside the model's vocabulary", ":input_ids"),
            ({"input_ids": ids, "attention_mask": np.array([[1] * 6, [0] * 6])}, "sample 1 has 0 real tokens; the measures need at least 2",
             ":attention_mask"),
            ({"input_ids": ids, "attention_mask": np.full((2, 6), 2)}, "holds 2 (sample 0, token 0): an attention mask holds only 0 (padding) and 1 (a real token)", ":attention_mask"),
            ({"input_ids": ids, "token_type_ids": np.full((2, 6), 2)}, "outside the model's token types", ":token_type_ids"),
            ({"input_ids": np.zeros((1, config["max_position_embeddings"] + 1), np.int64)}, "the model allows", ":input_ids"),
            # One token per sample: a trivial residual of 0, refused as --text refuses --tokens below 4.
            ({"input_ids": ids[:, :1]}, "sample 0 has 1 real token; the measures need at least 2", ":input_ids"),
            # The --samples/--tokens limits hold for --inputs too, checked on the shape before anything runs.
            ({"input_ids": np.zeros((600, 120), np.int64)}, "samples x tokens = 72000 is too large (at most 65536)",
             ":input_ids"),
            ({"input_ids": np.zeros((40, 300), np.int64)}, "samples x tokens^2 = 3600000 is too large (at most 2097152)",
             ":input_ids"),
        ]
        path = os.path.join(self.directory, "batch.safetensors")
        for tensors, message, tensor in cases:
            write_safetensors(path, tensors)
            out = os.path.join(self.directory, "inputs-out")
            result = run("model", "--model", bert, "--inputs", path, "--weights", "pretrained", "--out", out, check=False)
            self.assertEqual(result.returncode, 2, message)
            self.assertIn(message, result.stderr)
            self.assertIn(f"({path}{tensor})", result.stderr)
            self.assertEqual(result.stderr.count("\n"), 1, result.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "residual.csv")))
        result = run("model", "--model", bert, "--inputs", path, "--text", RTE, check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("excludes", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
