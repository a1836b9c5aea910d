"""`rankscope pretrain` and `rankscope dynamics` end to end at tiny settings: a run killed with SIGKILL and started
again ends with the same weights as an uninterrupted one, and the errors a user meets first are one line, exit 2."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, RTE, read_safetensors, require, run  # noqa: E402

import numpy as np  # noqa: E402

TINY = ["--corpus", RTE, "--layers", "2", "--d-model", "32", "--heads", "2", "--vocab", "400", "--tokens", "32",
        "--batch", "8"]


class PretrainCommand(unittest.TestCase):
    def setUp(self):
        require(RTE)
        self.out = tempfile.mkdtemp(prefix="rankscope-pretrain-")

    def tearDown(self):
        shutil.rmtree(self.out)

    def assert_one_line_error(self, result, *fragments):
        self.assertEqual(result.returncode, 2, result.stderr)
        lines = result.stderr.strip().split("\n")
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("rankscope: error: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_sigkill_then_resume_equals_uninterrupted(self):
        whole = os.path.join(self.out, "whole")
        killed = os.path.join(self.out, "killed")
        run("pretrain", "--arch", "bert", *TINY, "--steps", "200", "--out", whole)
        process = subprocess.Popen([BINARY, "pretrain", "--arch", "bert", *TINY, "--steps", "200", "--out", killed],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill it once a checkpoint past step 0 exists, and before the end.
        deadline = time.time() + 120
        while time.time() < deadline and not os.path.exists(os.path.join(killed, "checkpoints", "step-000020")):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.assertFalse(os.path.exists(os.path.join(killed, "final")), "the run ended before it was killed")
        resumed = run("pretrain", "--arch", "bert", *TINY, "--steps", "200", "--out", killed)
        self.assertIn("resumed", resumed.stdout)
        a = read_safetensors(os.path.join(whole, "final", "model.safetensors"))
        b = read_safetensors(os.path.join(killed, "final", "model.safetensors"))
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(np.array_equal(np.array(a[name]), np.array(b[name])), name)
        # The folder's JSON files say which command made them (the Hugging Face-format ones stay in their format).
        for name in ("pretrain.json", "settings.json", os.path.join("corpus", "corpus.json")):
            for folder in (whole, killed):
                with open(os.path.join(folder, name)) as f:
                    provenance = json.load(f)["provenance"]
                self.assertIn(f"pretrain --arch bert --corpus {RTE}", provenance["command"], name)
                self.assertTrue(provenance["command"].endswith(f"--out {folder}"), (name, provenance["command"]))
                self.assertEqual(provenance["seed"], 0, name)
        # No half-written folder is left where a checkpoint belongs.
        self.assertEqual([n for n in os.listdir(os.path.join(killed, "checkpoints")) if not n.startswith("step-") or "." in n], [])

    def test_ctrl_c_says_where_the_run_resumes(self):
        # SIGINT ended the run without a word; it now says so, and from which saved step the same command resumes.
        out = os.path.join(self.out, "interrupted")
        process = subprocess.Popen([BINARY, "pretrain", "--arch", "bert", *TINY, "--steps", "100000", "--out", out],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while time.time() < deadline and not os.path.exists(os.path.join(out, "checkpoints", "step-000020")):
            time.sleep(0.05)
        time.sleep(0.5)  # past the save of step 20's state
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        self.assertEqual(process.returncode, -signal.SIGINT, stderr)
        last = stderr.strip().splitlines()[-1]
        self.assertRegex(last, r"^rankscope: interrupted by SIGINT; the training state is saved at step (\d+): run the "
                               r"same command again to resume from there$")
        with open(os.path.join(out, "state", "state.json")) as f:
            self.assertEqual(int(re.search(r"step (\d+)", last).group(1)), json.load(f)["step"])

    def test_stop_after_then_resume(self):
        # --stop-after N stops at step N, leaves no manifest (written last, for a finished run: it listed the missing
        # pretrain.json), and says how to go on: the same command stopped at once again, and it said "run the same
        # command again to resume".
        out = os.path.join(self.out, "stopped")
        command = ["pretrain", "--arch", "bert", *TINY, "--steps", "12", "--out", out]
        for _ in range(2):
            stopped = run(*command, "--stop-after", "7")
            self.assertIn("stopped at step 7 of 12 (--stop-after 7); run the command again without --stop-after, or with "
                          "a later step, to resume", stopped.stdout)
            self.assertFalse(os.path.exists(os.path.join(out, "manifest.json")))
        self.assertIn("resumed", run(*command).stdout)
        with open(os.path.join(out, "manifest.json")) as f:
            for name in json.load(f)["outputs"]:
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        with open(os.path.join(out, "pretrain.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["tokens_seen"], 12 * 8 * 32)  # steps x batch x tokens
        # log.csv: the command, seed and version as every CSV; step 0's loss and rate do not exist (empty, not nan).
        with open(os.path.join(out, "log.csv")) as f:
            lines = f.read().splitlines()
        self.assertTrue(lines[0].startswith("# produced by: rankscope"), lines[0])
        self.assertTrue(lines[1].startswith("# command: ") and lines[1].endswith("--out " + out), lines[1])
        header = [line for line in lines if not line.startswith("#")]
        columns = header[0].split(",")
        step0 = dict(zip(columns, header[1].split(",")))
        self.assertEqual((step0["step"], step0["train_loss"], step0["tokens_per_second"]), ("0", "", ""))
        self.assertNotIn("nan", "\n".join(header))
        # The run folder given to `model` is named as such, with its checkpoints (it said "no tokenizer ... --inputs").
        self.assert_one_line_error(run("model", "--model", out, "--out", os.path.join(self.out, "m"), check=False),
                                   "a pretraining run's folder, not a model", out + "/final")
        run("model", "--model", os.path.join(out, "final"), "--samples", "2", "--tokens", "16", "--draws", "0",
            "--out", os.path.join(self.out, "m"))

    def test_errors_are_one_line(self):
        # BERT's embeddings are d_model wide: --embedding-size was silently ignored for it.
        self.assert_one_line_error(run("pretrain", "--embedding-size", "16", "--out", self.out, check=False),
                                   "--arch bert has embeddings d_model wide (--embedding-size)")
        self.assert_one_line_error(run("pretrain", "--arch", "gpt2", "--out", self.out, check=False), "architecture", "gpt2")
        self.assert_one_line_error(run("pretrain", "--corpus", os.path.join(self.out, "missing.txt"), "--out", self.out,
                                       check=False), "missing.txt")
        empty = os.path.join(self.out, "empty.txt")
        with open(empty, "w") as f:
            f.write("\n\n  \n")
        self.assert_one_line_error(run("pretrain", "--corpus", empty, "--out", os.path.join(self.out, "e"), check=False),
                                   "empty.txt")
        self.assert_one_line_error(run("pretrain", "--corpus", RTE, "--d-model", "32", "--heads", "3", "--out",
                                       os.path.join(self.out, "h"), check=False),
                                   "multiple of heads")
        # SentencePiece's reason is on stderr, not only in its log (a vocabulary larger than the text allows).
        small = os.path.join(self.out, "small.txt")
        with open(small, "w") as f:
            f.write("".join(f"sentence number {i} is about the cat and the dog.\n\n" for i in range(300)))
        result = run("pretrain", "--layers", "1", "--d-model", "16", "--heads", "2", "--vocab", "5000", "--tokens", "8",
                     "--batch", "2", "--steps", "3", "--corpus", small, "--out", os.path.join(self.out, "v"), check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        last = result.stderr.strip().split("\n")[-1]  # after the corpus line
        self.assertTrue(last.startswith("rankscope: error: training a SentencePiece bpe model on the text failed (exited "
                                        "with status 2): Vocabulary size too high (5000). Please set it to a value <= "),
                        last)
        self.assertTrue(last.endswith("train.log)"), last)
        # A folder of one run refuses other settings instead of mixing them.
        folder = os.path.join(self.out, "run")
        run("pretrain", *TINY, "--steps", "3", "--out", folder)
        self.assert_one_line_error(run("pretrain", *TINY, "--steps", "4", "--out", folder, check=False), "other settings")
        # dynamics: no checkpoints, or not a pretraining architecture.
        self.assert_one_line_error(run("dynamics", "--checkpoints", empty, "--out", os.path.join(self.out, "d"), check=False))
        nothing = os.path.join(self.out, "nothing")
        os.makedirs(nothing)
        self.assert_one_line_error(run("dynamics", "--checkpoints", nothing, "--out", os.path.join(self.out, "d"),
                                       check=False), "no checkpoint folders")
        # One checkpoint folder is not a run: said, with the command that measures it.
        self.assert_one_line_error(run("dynamics", "--checkpoints", os.path.join(folder, "final"), "--out",
                                       os.path.join(self.out, "d"), check=False),
                                   "one checkpoint, not a run: `rankscope model --model` measures it")
        # Too few tokens for text beside the special tokens: the flag is named ("cannot pack 2 samples of 2 tokens").
        self.assert_one_line_error(run("dynamics", "--checkpoints", folder, "--tokens", "2", "--out",
                                       os.path.join(self.out, "d"), check=False),
                                   "2 tokens per sample leave no room for text beside the tokenizer's 2 special tokens "
                                   "(at least 3) (--tokens)")
        # dynamics measures on the run's held-out text; without it, on RTE (the default corpus: maybe the training
        # text), and a warning says so (it said nothing).
        quiet = run("dynamics", "--checkpoints", folder, "--samples", "2", "--tokens", "16", "--draws", "0", "--out",
                    os.path.join(self.out, "d_heldout"))
        self.assertNotIn("warning", quiet.stderr)
        os.remove(os.path.join(folder, "corpus", "heldout.txt"))
        said = run("dynamics", "--checkpoints", folder, "--samples", "2", "--tokens", "16", "--draws", "0", "--out",
                   os.path.join(self.out, "d_rte"))
        self.assertEqual(said.stderr, f"rankscope: warning: {folder} has no corpus/heldout.txt: measuring on {RTE}, "
                                      "which may be text the checkpoints were trained on (give --text a held-out text)\n")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
