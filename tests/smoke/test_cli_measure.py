"""The command-line program end to end: help, version, outputs, and one-line errors with exit code 2 on bad input."""
import csv
import json
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import run, write_safetensors  # noqa: E402


class CommandLine(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="rankscope-smoke-")

    def path(self, name):
        return os.path.join(self.directory, name)

    def expect_error(self, args, file_word, problem_word):
        result = run(*args, check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("rankscope: error: "), lines[0])
        self.assertIn(file_word, lines[0])
        self.assertIn(problem_word, lines[0])
        self.assertEqual(result.stdout, "")

    def test_help_and_version(self):
        self.assertIn("measure", run("--help").stdout)
        help_text = run("measure", "--help").stdout
        for option in ["--out", "--seed", "--threads", "--format", "--centers"]:
            self.assertIn(option, help_text)
        self.assertRegex(run("--version").stdout, r"rankscope \d+\.\d+\.\d+")

    def test_builtin_example_and_outputs(self):
        out = self.path("run")
        result = run("measure", "--out", out, "--seed", "5")
        self.assertIn("relative_residual composite mean", result.stdout)
        with open(os.path.join(out, "measures.csv")) as f:
            lines = [line for line in f if not line.startswith("#")]
        rows = list(csv.DictReader(lines))
        self.assertEqual(list(rows[0].keys()), ["matrix", "measure", "norm", "center", "index", "value"])
        self.assertGreater(len(rows), 40)
        with open(os.path.join(out, "measures.json")) as f:
            document = json.load(f)
        self.assertEqual(document["provenance"]["seed"], 5)
        self.assertIn("measure", document["provenance"]["command"])
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertIn("git_sha", json.load(f))
        self.assertFalse([name for name in os.listdir(out) if ".tmp-" in name])
        # Same seed, same numbers.
        again = run("measure", "--seed", "5", "--format", "csv").stdout
        first = [line for line in open(os.path.join(out, "measures.csv")) if not line.startswith("#")]
        self.assertEqual([line for line in again.splitlines(True) if not line.startswith("#")], first)

    def test_skipped_exact_centre_is_said_in_every_format(self):
        np.save(self.path("big.npy"), np.random.default_rng(2).normal(size=(80, 60)))  # 4800 entries > 4096
        document = json.loads(run("measure", self.path("big.npy"), "--format", "json").stdout)
        self.assertEqual(document["centers"], ["mean", "median", "rank1"])
        self.assertIn("exact centre (an LP) is skipped", document["note"])
        # No advice to ask for it: asked for, it is refused at this size (the note once said to pass --centers ...exact).
        self.assertNotIn("--centers", document["note"])
        result = run("measure", self.path("big.npy"), "--format", "csv")
        self.assertIn("exact centre (an LP) is skipped", result.stderr)
        self.assertNotIn("note", result.stdout)
        out = self.path("big-out")
        run("measure", self.path("big.npy"), "--out", out)
        with open(os.path.join(out, "measures.json")) as f:
            self.assertIn("skipped", json.load(f)["note"])

    def test_attention_stored_in_float16(self):
        """A softmax stored in float16 sums to 1 per row only within float16's epsilon: its attention measures are
        measured (they were left out silently), and equal those of the same float16 values held in float64."""
        logits = np.random.default_rng(4).normal(size=(12, 12))
        softmax = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        half = softmax.astype(np.float16)
        self.assertGreater(np.abs(half.astype(np.float64).sum(1) - 1).max(), 1e-4)  # the case: off by more than 1e-4
        np.save(self.path("p16.npy"), half)
        np.save(self.path("p64.npy"), half.astype(np.float64) / half.astype(np.float64).sum(1, keepdims=True))
        measured = {}
        for name in ("p16", "p64"):
            rows = json.loads(run("measure", self.path(name + ".npy"), "--format", "json").stdout)["matrices"][0]["measures"]
            measured[name] = {r["measure"]: r["value"] for r in rows if r["measure"].startswith("attention_")}
        self.assertEqual(len(measured["p16"]), 5, measured)
        for key, value in measured["p64"].items():
            self.assertAlmostEqual(measured["p16"][key], value, delta=2e-3)

    def test_bad_inputs(self):
        self.expect_error(["measure", self.path("missing.npy")], "missing.npy", "no such file")
        np.save(self.path("good.npy"), np.ones((4, 4), np.float32))
        data = open(self.path("good.npy"), "rb").read()
        open(self.path("cut.npy"), "wb").write(data[:-7])
        self.expect_error(["measure", self.path("cut.npy")], "cut.npy", "truncated")
        np.save(self.path("strings.npy"), np.array([["a", "b"], ["c", "d"]]))
        self.expect_error(["measure", self.path("strings.npy")], "strings.npy", "dtype")
        np.save(self.path("complex.npy"), np.ones((2, 2), np.complex64))
        self.expect_error(["measure", self.path("complex.npy")], "complex.npy", "dtype")
        nan = np.ones((3, 3))
        nan[1, 2] = np.nan
        np.save(self.path("nan.npy"), nan)
        self.expect_error(["measure", self.path("nan.npy")], "nan.npy", "NaN")
        inf = np.ones((3, 3))
        inf[0, 0] = np.inf
        np.save(self.path("inf.npy"), inf)
        self.expect_error(["measure", self.path("inf.npy")], "inf.npy", "Inf")
        np.save(self.path("vector.npy"), np.ones(5))
        self.expect_error(["measure", self.path("vector.npy")], "vector.npy", "rank")
        write_safetensors(self.path("t.safetensors"), {"a": np.ones((3, 3), np.float32),
                                                       "b": np.ones((2, 2), np.float32)})
        self.expect_error(["measure", self.path("t.safetensors") + ":zzz"], "t.safetensors", "no tensor named 'zzz'")
        self.expect_error(["measure", self.path("t.safetensors")], "t.safetensors", "name one")
        data = open(self.path("t.safetensors"), "rb").read()
        open(self.path("cut.safetensors"), "wb").write(data[:-5])
        self.expect_error(["measure", self.path("cut.safetensors") + ":b"], "cut.safetensors", "truncated")
        (length,) = struct.unpack("<Q", data[:8])
        open(self.path("head.safetensors"), "wb").write(data[: 8 + length // 2])
        self.expect_error(["measure", self.path("head.safetensors") + ":a"], "head.safetensors", "truncated")
        open(self.path("empty.csv"), "w").write("")
        self.expect_error(["measure", self.path("empty.csv")], "empty.csv", "no numeric rows")
        # A failed run leaves no result files behind.
        self.expect_error(["measure", self.path("nan.npy"), "--out", self.path("never")], "nan.npy", "NaN")
        self.assertFalse(os.path.exists(os.path.join(self.path("never"), "measures.csv")))

    def test_unknown_option_value_exits_2(self):
        result = run("measure", "--format", "xml", check=False)
        self.assertEqual(result.returncode, 2)
        result = run("measure", "--centers", "mode", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("unknown centre", result.stderr)

    def test_an_empty_folder_path_is_an_error_not_an_abort(self):
        # `--out "$UNSET"`: std::filesystem threw out of main (terminate, exit 134) in every command with --out.
        for args in (["measure", "--out", ""], ["theory", "--out", ""], ["embed", "a", "b", "--out", ""],
                     ["dynamics", "--checkpoints", "x", "--out", ""], ["sweep", __file__, "--out", ""]):
            result = run(*args, check=False)
            self.assertEqual(result.returncode, 2, args)
            self.assertEqual(result.stderr, "rankscope: error: an empty path: name the folder for the results (--out)\n")
        result = run("reproduce", "--pretrained", "", check=False)  # ran as if no runs were there
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr,
                         "rankscope: error: an empty path: name the folder of `rankscope pretrain` runs (--pretrained)\n")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
