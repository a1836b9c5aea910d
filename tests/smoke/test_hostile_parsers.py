"""Hostile input files through the real command line (issue 12, the parsers' half).

Table-driven: each case builds a bad file, runs one `rankscope` command on it and requires
- exit status 2 (a negative status is a signal: a crash), within TIMEOUT seconds (longer is a hang),
- exactly one line on stderr, `rankscope: error: ...`, naming the file and the problem,
- no output file in the --out folder (an error must not leave a folder that looks complete).
Self-contained: the tiny BERT checkpoint, vocabulary and text are written here, no ../shared needed.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, write_safetensors  # noqa: E402

TIMEOUT = 20


def npy_bytes(header_dict, data=b"", version=1):
    """A .npy file with a given header text (padded as numpy pads it)."""
    prefix = 10 if version == 1 else 12
    header = header_dict.encode()
    header += b" " * ((64 - (prefix + len(header) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


def safetensors_bytes(header, data):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


BERT_CONFIG = {"model_type": "bert", "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1,
               "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32,
               "type_vocab_size": 2, "hidden_act": "gelu", "pad_token_id": 0}
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", "a", "dog", "ran",
         "##s", "and"]


def bert_weights(config, rng):
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    shapes = {"embeddings.word_embeddings.weight": [v, h],
              "embeddings.position_embeddings.weight": [config["max_position_embeddings"], h],
              "embeddings.token_type_embeddings.weight": [config["type_vocab_size"], h],
              "embeddings.LayerNorm.weight": [h], "embeddings.LayerNorm.bias": [h]}
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        for name in ["query", "key", "value"]:
            shapes[p + f"attention.self.{name}.weight"] = [h, h]
            shapes[p + f"attention.self.{name}.bias"] = [h]
        shapes[p + "attention.output.dense.weight"] = [h, h]
        shapes[p + "attention.output.dense.bias"] = [h]
        shapes[p + "attention.output.LayerNorm.weight"] = [h]
        shapes[p + "attention.output.LayerNorm.bias"] = [h]
        shapes[p + "intermediate.dense.weight"] = [i, h]
        shapes[p + "intermediate.dense.bias"] = [i]
        shapes[p + "output.dense.weight"] = [h, i]
        shapes[p + "output.dense.bias"] = [h]
        shapes[p + "output.LayerNorm.weight"] = [h]
        shapes[p + "output.LayerNorm.bias"] = [h]
    return {name: (rng.standard_normal(shape) * 0.02).astype(np.float32) for name, shape in shapes.items()}


class HostileParsers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="rankscope-hostile-")
        cls.rng = np.random.default_rng(0)
        cls.text = cls.path("text.txt")
        with open(cls.text, "w") as f:
            f.write("the cat sat on the mat .\na dog ran and the cats sat .\n" * 20)
        cls.batch = cls.path("batch.safetensors")
        write_safetensors(cls.batch, {"input_ids": np.array([[2, 5, 6, 7, 8, 5, 9, 3]] * 2, dtype=np.int64)})
        cls.good_model = cls.bert_folder("good")

    @classmethod
    def path(cls, name):
        return os.path.join(cls.root, name)

    @classmethod
    def bert_folder(cls, name, config=None, weights=None, vocab=None):
        folder = cls.path(name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(config if isinstance(config, str) else json.dumps(config or BERT_CONFIG))
        write_safetensors(os.path.join(folder, "model.safetensors"), weights or bert_weights(BERT_CONFIG, cls.rng))
        with open(os.path.join(folder, "vocab.txt"), "w") as f:
            f.write("\n".join(vocab or VOCAB) + "\n")
        return folder

    def write(self, name, data):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def symlink_to_dev_zero(self, name):
        path = self.path(name)
        if not os.path.lexists(path):
            os.symlink("/dev/zero", path)
        return path

    def fifo(self, name):
        path = self.path(name)
        if not os.path.exists(path):
            os.mkfifo(path)
        return path

    def check(self, args, file_word, problem_word, out=None):
        """Runs rankscope with args (+ --out OUT) and checks the hostile-input contract."""
        out = out or self.path("out-" + str(abs(hash(tuple(args)))))
        command = [BINARY, *map(str, args), "--out", out]
        started = time.monotonic()
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, errors="replace")
            elapsed = time.monotonic() - started
        except subprocess.TimeoutExpired:
            self.fail(f"hang: no answer within {TIMEOUT} s: {' '.join(command)}")
        self.assertGreaterEqual(result.returncode, 0, f"killed by signal {-result.returncode}: {result.stderr[-500:]}")
        self.assertEqual(result.returncode, 2, result.stderr[-2000:])
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr[-2000:])
        self.assertTrue(lines[0].startswith("rankscope: error: "), lines[0])
        self.assertIn(file_word, lines[0])
        self.assertIn(problem_word, lines[0])
        self.assertLess(len(lines[0]), 600, lines[0])
        if os.environ.get("RANKSCOPE_HOSTILE_LOG"):  # the table of docs/reliability.md
            with open(os.environ["RANKSCOPE_HOSTILE_LOG"], "a") as log:
                log.write(json.dumps({"command": args[0], "rc": result.returncode, "error": lines[0],
                                      "seconds": round(elapsed, 2)}) + "\n")
        if os.path.isdir(out):
            written = [os.path.join(d, f) for d, _, files in os.walk(out) for f in files]
            self.assertEqual(written, [], "output files left after an error")
        return lines[0]

    # ---- the table -------------------------------------------------------------------------------------------------
    def test_matrix_files(self):
        zeros = np.zeros(32).tobytes()
        dict_ = "{{'descr': '<f8', 'fortran_order': False, 'shape': {}, }}"
        empty_st = self.path("empty.safetensors")
        write_safetensors(empty_st, {"x": np.zeros((0, 4, 4))})
        good = np.arange(16, dtype=np.float32).tobytes()
        nan = self.path("nan.npy")
        np.save(nan, np.array([[1.0, np.nan], [2.0, 3.0]]))
        cut_st = self.path("cut.safetensors")
        write_safetensors(cut_st, {"x": np.ones((4, 4))})
        with open(cut_st, "rb") as f:
            cut_bytes = f.read()[:-9]
        empty_npy = self.path("empty.npy")
        np.save(empty_npy, np.zeros((0, 4, 4)))
        cases = [
            # (class, args, file word, problem words)
            ("empty batch (npy)", [empty_npy], "empty.npy", "empty array: shape [0, 4, 4]"),
            ("empty batch (safetensors)", [empty_st + ":x"], "empty.safetensors:x", "empty array"),
            ("zero tokens", [self.write("zero-n.npy", npy_bytes(dict_.format("(3, 0, 4)")))], "zero-n.npy",
             "empty array"),
            ("overflowing shape (npy)",
             [self.write("overflow.npy", npy_bytes(dict_.format("(4294967296, 4294967296)")))], "overflow.npy",
             "more elements than fit in 64 bits"),
            ("overflowing bytes (npy)",
             [self.write("overflow2.npy", npy_bytes(dict_.format("(2305843009213693952,)")))], "overflow2.npy",
             "more bytes than fit in 64 bits"),
            ("overflowing shape (safetensors)",
             [self.write("overflow.safetensors",
                         safetensors_bytes({"x": entry("F32", [2**32, 2**32], 0, 0)}, b"")) + ":x"],
             "overflow.safetensors:x", "more elements than fit in 64 bits"),
            ("long npy header",
             [self.write("long.npy", npy_bytes(dict_.format("(" + " " * 300000 + "4, 8)"), zeros, version=2))],
             "long.npy", "longer than numpy's limit of 10000"),
            ("npy shape grammar", [self.write("grammar.npy", npy_bytes(dict_.format("(4- 16, 8)"), zeros))],
             "grammar.npy", "bad .npy header"),
            ("npy shape not a tuple", [self.write("notuple.npy", npy_bytes(dict_.format("(32)"), zeros))],
             "notuple.npy", "is not a tuple"),
            ("npy unknown key",
             [self.write("key.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 8), 'x': 0}",
                                              zeros))], "key.npy", "unexpected key"),
            ("npy truncated data", [self.write("cut.npy", npy_bytes(dict_.format("(4, 8)"), zeros[:-3]))], "cut.npy",
             "truncated .npy data"),
            ("npy trailing data", [self.write("trail.npy", npy_bytes(dict_.format("(4, 8)"), zeros + b"x"))],
             "trail.npy", "1 bytes after the data"),
            ("npy bad magic", [self.write("magic.npy", b"\x93NUMPX" + b"\0" * 200)], "magic.npy", "bad magic"),
            ("/dev/zero as .npy", [self.symlink_to_dev_zero("zero.npy")], "zero.npy",
             "must be a regular file, this is a character device"),
            ("/dev/zero as .csv", [self.symlink_to_dev_zero("zero.csv")], "zero.csv", "must be a regular file"),
            ("/dev/zero as .safetensors", [self.symlink_to_dev_zero("zero.safetensors") + ":x"], "zero.safetensors",
             "must be a regular file"),
            ("FIFO as .npy", [self.fifo("pipe.npy")], "pipe.npy", "this is a FIFO"),
            ("directory as .npy", [self.make_dir("dir.npy")], "dir.npy", "is a directory"),
            ("safetensors reversed offsets",
             [self.write("reversed.safetensors", safetensors_bytes({"x": entry("F32", [2], 2056, 8)}, good)) + ":x"],
             "reversed.safetensors:x", "end before begin"),
            ("safetensors overlapping offsets",
             [self.write("overlap.safetensors",
                         safetensors_bytes({"x": entry("F32", [2, 2], 0, 16), "y": entry("F32", [2, 2], 8, 24)},
                                           good[:24])) + ":x"], "overlap.safetensors:y", "overlap tensor 'x'"),
            ("safetensors gap",
             [self.write("gap.safetensors",
                         safetensors_bytes({"x": entry("F32", [2], 0, 8), "y": entry("F32", [2], 16, 24)},
                                           good[:24])) + ":x"], "gap.safetensors:y", "belong to no tensor"),
            ("safetensors out of bounds",
             [self.write("oob.safetensors", safetensors_bytes({"x": entry("F32", [2, 2], 64, 80)}, good)) + ":x"],
             "oob.safetensors:x", "truncated safetensors file"),
            ("safetensors size mismatch",
             [self.write("size.safetensors", safetensors_bytes({"x": entry("F32", [3, 3], 0, 64)}, good)) + ":x"],
             "size.safetensors:x", "needs 36"),
            ("safetensors truncated", [self.write("cut.safetensors", cut_bytes) + ":x"], "cut.safetensors",
             "truncated"),
            ("safetensors header length beyond the file",
             [self.write("head.safetensors", struct.pack("<Q", 10**12) + b"{}") + ":x"], "head.safetensors",
             "above the format's limit"),
            ("safetensors bad JSON",
             [self.write("json.safetensors", struct.pack("<Q", 9) + b'{"x": [}]') + ":x"], "json.safetensors",
             "not valid JSON: syntax error at line 1"),
            ("csv empty first cell", [self.write("gap.csv", "1,,3\n4,5,6\n")], "gap.csv",
             "line 1, column 2: empty cell"),
            ("csv text in data", [self.write("text.csv", "a,b\n1,2\n3,x\n")], "text.csv",
             "line 3, column 2: 'x' is not a number"),
            ("NaN entries", [nan], "nan.npy", "NaN"),
        ]
        for name, args, file_word, problem in cases:
            with self.subTest(name):
                self.check(["measure", *args], file_word, problem)
        with self.subTest("theory --input, empty"):
            self.check(["theory", "--input", self.write("theory-empty.npy", npy_bytes(dict_.format("(0, 4)")))],
                       "theory-empty.npy", "empty array")
        with self.subTest("theory --input, /dev/zero"):
            self.check(["theory", "--input", self.symlink_to_dev_zero("theory-zero.npy")], "theory-zero.npy",
                       "regular file")
        with self.subTest("theory --input, bad grammar"):
            self.check(["theory", "--input", self.path("grammar.npy")], "grammar.npy", "bad .npy header")
        for name, path, problem in [("task memorize --text, /dev/zero", self.symlink_to_dev_zero("pairs-zero.tsv"),
                                     "character device"),
                                    ("task memorize --text, FIFO", self.fifo("pairs-pipe.tsv"), "FIFO")]:
            with self.subTest(name):
                self.check(["task", "memorize", "--text", path, "--epochs", "1"], path, problem)

    def make_dir(self, name):
        os.makedirs(self.path(name), exist_ok=True)
        return self.path(name)

    def test_model_configs_and_weights(self):
        def config(**changes):
            c = dict(BERT_CONFIG)
            c.update(changes)
            return c

        weights = bert_weights(BERT_CONFIG, self.rng)
        weights["encoder.layer.0.attention.self.query.weight"][1, 2] = np.nan
        cases = [
            ("10^9 layers", self.bert_folder("layers", config(num_hidden_layers=10**9)), "config.json",
             "'num_hidden_layers' = 1000000000 is outside the supported range 1..1024"),
            ("2^40 hidden", self.bert_folder("hidden", config(hidden_size=2**40)), "config.json",
             "'hidden_size' = 1099511627776 is outside"),
            ("negative size", self.bert_folder("negative", config(intermediate_size=-16)), "config.json",
             "'intermediate_size' = -16 is outside"),
            ("heads not dividing hidden", self.bert_folder("heads", config(num_attention_heads=3)), "config.json",
             "hidden_size 8 is not divisible by num_attention_heads 3"),
            ("float size", self.bert_folder("float", config(vocab_size=16.5)), "config.json",
             "'vocab_size' must be an integer"),
            ("huge model", self.bert_folder("budget", config(vocab_size=9000000, hidden_size=4096,
                                                             num_attention_heads=4)), "config.json",
             "parameters, more than the limit"),
            ("config not JSON", self.bert_folder("badjson", '{"model_type": "bert",,}'), "config.json",
             "not valid JSON: syntax error at line 1, column 23"),
            ("config nested 100000 deep", self.bert_folder("deep", "[" * 100000 + "]" * 100000), "config.json",
             "nested more than 64 levels"),
            ("NaN weights", self.bert_folder("nan", weights=weights), "model.safetensors:encoder.layer.0.attention",
             "NaN"),
            # Sizes that disagree with the checkpoint are compared before the model is built (below: the memory).
            ("config wider than its checkpoint", self.bert_folder("wider", config(hidden_size=2048, num_attention_heads=16,
                                                                                  intermediate_size=8192,
                                                                                  num_hidden_layers=24)),
             "model.safetensors:embeddings.word_embeddings.weight", "shape [16, 8] does not match"),
            ("config deeper than its checkpoint", self.bert_folder("deeper", config(num_hidden_layers=500)),
             "config.json says num_hidden_layers: 500", "but the checkpoint holds"),
        ]
        for name, folder, file_word, problem in cases:
            with self.subTest(name):
                self.check(["model", "--model", folder, "--weights", "pretrained", "--inputs", self.batch],
                           file_word, problem)
        # The wide config describes 1.4e9 parameters (5.6 GB of float32): it was built in full before the first shape
        # was compared. Now the refusal costs what the program's start costs.
        wide = self.path("wider")
        measured = subprocess.run(
            [sys.executable, "-c", "import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
             BINARY, "model", "--model", wide, "--weights", "pretrained", "--inputs", self.batch, "--out",
             self.path("out-wide-rss")], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertLess(int(measured.stdout.strip()), 1_000_000, "peak RSS (kB) of a refused wide config")
        zero_config = self.bert_folder("zero-config")
        os.remove(os.path.join(zero_config, "config.json"))
        os.symlink("/dev/zero", os.path.join(zero_config, "config.json"))
        fifo_config = self.bert_folder("fifo-config")
        os.remove(os.path.join(fifo_config, "config.json"))
        os.mkfifo(os.path.join(fifo_config, "config.json"))
        for name, folder, problem in [("/dev/zero config", zero_config, "character device"),
                                      ("FIFO config", fifo_config, "FIFO")]:
            with self.subTest(name):
                self.check(["model", "--model", folder, "--weights", "pretrained", "--inputs", self.batch],
                           "config.json", problem)
        cut = self.bert_folder("cut-weights")
        weights_path = os.path.join(cut, "model.safetensors")
        with open(weights_path, "rb") as f:
            data = f.read()
        with open(weights_path, "wb") as f:
            f.write(data[:-100])
        with self.subTest("truncated model.safetensors"):
            self.check(["model", "--model", cut, "--weights", "pretrained", "--inputs", self.batch],
                       "model.safetensors", "truncated")

    def test_model_inputs_and_text(self):
        base = ["model", "--model", self.good_model, "--weights", "pretrained"]
        empty = self.path("empty-batch.safetensors")
        write_safetensors(empty, {"input_ids": np.zeros((0, 8), dtype=np.int64)})
        overlap = self.write("overlap-batch.safetensors", safetensors_bytes(
            {"input_ids": entry("I64", [1, 2], 0, 16), "attention_mask": entry("I64", [1, 2], 8, 24)},
            np.ones(3, np.int64).tobytes()))
        big_word = self.path("one-word.txt")
        with open(big_word, "wb") as f:
            f.write(b"a" * (50 << 20))
        cases = [
            ("empty batch", ["--inputs", empty], "empty-batch.safetensors:input_ids", "non-empty"),
            ("overlapping offsets", ["--inputs", overlap], "overlap-batch.safetensors", "overlap"),
            ("50 MB one-word text", ["--text", big_word], "one-word.txt", "bytes long, more than the limit"),
            ("/dev/zero text", ["--text", self.symlink_to_dev_zero("zero.txt")], "zero.txt", "character device"),
            ("FIFO text", ["--text", self.fifo("pipe.txt")], "pipe.txt", "FIFO"),
            ("empty text", ["--text", self.write("blank.txt", "\n\n  \n")], "blank.txt", "no text in file"),
        ]
        for name, extra, file_word, problem in cases:
            with self.subTest(name):
                self.check(base + extra + ["--samples", "2", "--tokens", "8"], file_word, problem)
        zero_vocab = self.bert_folder("zero-vocab")
        os.remove(os.path.join(zero_vocab, "vocab.txt"))
        os.symlink("/dev/zero", os.path.join(zero_vocab, "vocab.txt"))
        bad_tokenizer_config = self.bert_folder("bad-tokenizer-config")
        with open(os.path.join(bad_tokenizer_config, "tokenizer_config.json"), "w") as f:
            f.write('{"do_lower_case": yes}')
        for name, folder, file_word, problem in [
                ("/dev/zero vocab.txt", zero_vocab, "vocab.txt", "character device"),
                ("bad tokenizer_config.json", bad_tokenizer_config, "tokenizer_config.json", "not valid JSON")]:
            with self.subTest(name):
                self.check(["model", "--model", folder, "--weights", "pretrained", "--text", self.text,
                            "--samples", "2", "--tokens", "8"], file_word, problem)

    def test_paths_patterns(self):
        reversed_ = self.write("patterns.safetensors", safetensors_bytes(
            {"blocks.0.attn.hook_pattern": entry("F32", [1, 1, 2, 2], 4096, 16)}, b"\0" * 16))
        self.check(["paths", "sample", "--patterns", reversed_], "patterns.safetensors:blocks.0.attn.hook_pattern",
                   "end before begin")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
