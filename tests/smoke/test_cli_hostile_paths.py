"""No shell anywhere: every path flag (--out, --input, --text, --model, --inputs, --dump, --patterns, --checkpoints,
the measured file) holds quotes, spaces, `$()`, backticks, a comma and newlines, and gnuplot's own `system(...)` call.
Nothing may be executed (no PWNED* file appears anywhere), and every output lands inside the oddly named folder."""
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, FIXTURES, RTE, read_csv, require  # noqa: E402

import subprocess  # noqa: E402

# One folder name with every trick: shell quoting breaks, command substitution, backticks, a comment, newlines (a
# gnuplot script or a '#' comment line would end there), gnuplot's system() and a comma (SentencePiece's --input list).
HOSTILE = ("a b'; touch PWNED1; echo '$(touch PWNED2)`touch PWNED3`\"; touch PWNED4 #\n touch PWNED5\n"
           "'); system('touch PWNED6'); print('x,y")


class HostilePaths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(FIXTURES, RTE)
        cls.sandbox = tempfile.mkdtemp(prefix="rankscope-hostile-")
        cls.weird = os.path.join(cls.sandbox, HOSTILE)
        os.makedirs(cls.weird)
        cls.matrix = os.path.join(cls.weird, "x " + HOSTILE.replace("\n", "_")[:40] + ".npy")
        np.save(cls.matrix, np.random.default_rng(1).normal(size=(6, 8)))
        cls.text = os.path.join(cls.weird, "text $(touch PWNED7).tsv")
        shutil.copy(RTE, cls.text)
        cls.model = os.path.join(cls.weird, "bert-tiny '; system('touch PWNED8') #")
        shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), cls.model)
        # The model's own name with a newline: it reaches the figure titles, and a figure script's '#' comment line
        # once ended there and ran the next line ('!' is gnuplot's shell escape).
        cls.model_newline = os.path.join(cls.weird, "bert-tiny\n!touch PWNED11 #")
        shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), cls.model_newline)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.sandbox)

    def run_in_sandbox(self, *args):
        result = subprocess.run([os.path.abspath(BINARY), *args], capture_output=True, text=True, cwd=self.sandbox)
        self.assertEqual(result.returncode, 0, f"{args}: {result.stderr}")
        return result

    def assert_nothing_executed(self):
        for root, _, files in os.walk(self.sandbox):
            for name in files:
                self.assertFalse(name.startswith("PWNED"), os.path.join(root, name))
        self.assertFalse(any(name.startswith("PWNED") for name in os.listdir(os.getcwd())))

    def assert_files(self, folder, *names):
        for name in names:
            path = os.path.join(folder, name)
            self.assertTrue(os.path.isfile(path), path)
            self.assertGreater(os.path.getsize(path), 0, path)

    def test_theory_and_measure(self):
        out = os.path.join(self.weird, "theory")
        self.run_in_sandbox("theory", "--layers", "2", "--seeds", "1", "--heads", "2", "--input", self.matrix,
                            "--out", out)
        self.assert_files(out, "theory.csv", "theory.svg", "theory.png", "theory.pdf", "theory_bounds.svg", "theory.gp",
                          "manifest.json")
        self.assertFalse(any(".tmp-" in name for name in os.listdir(out)))
        # The recorded command stays on one '#' line: the CSV parses, the gnuplot script ran (figures exist above).
        with open(os.path.join(out, "theory.csv")) as f:
            lines = f.read().split("\n")
        header = next(i for i, line in enumerate(lines) if not line.startswith("#"))
        self.assertTrue(lines[header].startswith("variant,"), lines[:header + 1])
        self.assertEqual(len(read_csv(os.path.join(out, "theory.csv"))), 12 * 3)
        measured = os.path.join(self.weird, "measure")
        self.run_in_sandbox("measure", self.matrix, "--out", measured)
        self.assert_files(measured, "measures.csv", "measures.json")
        counts = os.path.join(self.weird, "counts")
        self.run_in_sandbox("paths", "count", "--layers", "3", "--heads", "2", "--out", counts)
        self.assert_files(counts, "path_counts.csv", "path_counts.svg")
        self.assert_nothing_executed()

    def test_model_dump_patterns(self):
        out = os.path.join(self.weird, "model out")
        dump = os.path.join(self.weird, "acts `touch PWNED9`.safetensors")
        self.run_in_sandbox("model", "--model", self.model, "--text", self.text, "--samples", "2", "--tokens", "16",
                            "--draws", "5", "--dump", dump, "--out", out)
        self.assert_files(out, "residual.csv", "paths.csv", "residual.svg", "paths.svg", "manifest.json")
        self.assert_files(self.weird, os.path.basename(dump))
        newline_out = os.path.join(self.weird, "model newline")
        self.run_in_sandbox("model", "--model", self.model_newline, "--text", self.text, "--samples", "2", "--tokens",
                            "8", "--draws", "2", "--out", newline_out)
        self.assert_files(newline_out, "residual.svg", "paths.svg")
        sample = os.path.join(self.weird, "sample")
        self.run_in_sandbox("paths", "sample", "--patterns", dump, "--draws", "5", "--out", sample)
        self.assert_files(sample, "paths.csv", "paths.svg")
        # The SentencePiece helper: a built-in configuration trains its tokenizer into OUT/tokenizer.
        albert = os.path.join(self.weird, "albert")
        self.run_in_sandbox("model", "--model", "albert-base-v2", "--weights", "init", "--text", self.text,
                            "--samples", "2", "--tokens", "16", "--draws", "5", "--variants", "SAN", "--out", albert)
        self.assert_files(albert, "residual.csv", "residual.svg", os.path.join("tokenizer", "spiece.model"))
        self.assert_nothing_executed()

    def gnuplot_stand_in(self, folder, on_paths_figure):
        """The environment of a run whose gnuplot is a stand-in first in PATH: for paths.gp it runs the Python lines
        `on_paths_figure` (with os, sys, time and `args` at hand); every other script goes to the real gnuplot."""
        fake_bin = os.path.join(self.sandbox, folder)
        os.makedirs(fake_bin, exist_ok=True)
        real = shutil.which("gnuplot")
        self.assertIsNotNone(real, "gnuplot is needed by the figures")
        with open(os.path.join(fake_bin, "gnuplot"), "w") as f:
            f.write("#!/usr/bin/python3\nimport os, sys, time\nargs = sys.argv[1:]\nif args and args[-1] == 'paths.gp':\n" +
                    "".join("    " + line + "\n" for line in on_paths_figure.split("\n")) +
                    f"os.execv({real!r}, [{real!r}] + args)\n")
        os.chmod(os.path.join(fake_bin, "gnuplot"), 0o755)
        return dict(os.environ, PATH=fake_bin + os.pathsep + os.environ.get("PATH", ""))

    def test_a_figure_gnuplot_fails_on_leaves_no_file(self):
        # gnuplot fails on one figure (here a stand-in gnuplot first in PATH that, for paths.gp only, writes half an
        # output file and exits 1, as gnuplot does when a plot command fails after `set output`; every other script goes
        # to the real gnuplot). The figure is drawn under a temporary name, so no 0-byte or partial paths.svg is left
        # behind (and an older paths.svg under the real name is removed, since the CSV beside it has just changed).
        out = os.path.join(self.weird, "failing gnuplot")
        os.makedirs(out)
        with open(os.path.join(out, "paths.svg"), "w") as f:
            f.write("<svg>stale</svg>")
        env = self.gnuplot_stand_in("fake-bin", """suffix = args[args.index("-e") + 1].split("=", 1)[1].strip("'")
open("paths.svg" + suffix, "w").write("<svg")
sys.exit("x range is invalid")""")
        result = subprocess.run([os.path.abspath(BINARY), "model", "--model", self.model, "--text", self.text,
                                 "--samples", "2", "--tokens", "16", "--draws", "3", "--out", out],
                                capture_output=True, text=True, cwd=self.sandbox, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("gnuplot could not draw paths", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "paths.svg")))
        self.assertFalse(any(".tmp-" in name for name in os.listdir(out)), os.listdir(out))
        self.assert_files(out, "residual.svg", "paths.csv", "paths.gnuplot.log")

    def test_interrupted_figure_leaves_no_log(self):
        # SIGINT while gnuplot draws (a stand-in that announces itself and waits): exit 130, and neither a partial
        # figure nor an empty paths.gnuplot.log is left beside the CSV.
        out = os.path.join(self.weird, "interrupted gnuplot")
        started = os.path.join(self.sandbox, "gnuplot started")
        env = self.gnuplot_stand_in("slow-bin", f"open({started!r}, 'w').close()\ntime.sleep(120)")
        process = subprocess.Popen([os.path.abspath(BINARY), "model", "--model", self.model, "--text", self.text,
                                    "--samples", "2", "--tokens", "16", "--draws", "3", "--out", out],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=self.sandbox, env=env)
        deadline = time.monotonic() + 300
        while not os.path.exists(started) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(started), "the stand-in gnuplot never ran for paths.gp")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        self.assertEqual(process.returncode, 130, stderr)
        names = os.listdir(out)
        self.assertIn("paths.csv", names)
        self.assertNotIn("paths.gnuplot.log", names)
        self.assertFalse(any(".tmp-" in name or name.startswith("paths.") and name != "paths.csv" and not
                             name.endswith(".gp") for name in names), names)

    def test_task_checkpoints(self):
        out = os.path.join(self.weird, "task")
        checkpoints = os.path.join(self.weird, "ckpt $(touch PWNED10)")
        self.run_in_sandbox("task", "sort", "--epochs", "1", "--train-count", "20", "--eval-count", "10", "--layers", "1",
                            "--d-model", "8", "--repeats", "1", "--paths", "5", "--checkpoints", checkpoints,
                            "--out", out)
        self.assert_files(out, "paths_effectiveness.csv", "paths_effectiveness.svg", "task.json")
        self.assertEqual(len([n for n in os.listdir(checkpoints) if n.endswith(".safetensors")]), 1)
        self.assert_nothing_executed()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
