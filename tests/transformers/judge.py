"""Shared by the transformers suite: Hugging Face `transformers` itself is the judge.

Run with the project virtual environment's Python (.venv/bin/python: requirements/venv.txt pins torch, transformers,
tokenizers, safetensors). A missing package is a failure, never a skip: the import below raises with the fix."""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import safetensors.numpy
    import torch
    import transformers
except ImportError as error:  # a failure with the fix, never a skip
    raise SystemExit(f"the transformers suite needs the project venv ({error}); run scripts/install-deps.sh and use "
                     f".venv/bin/python (found {sys.executable})")

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/bin/rankscope")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RTE = os.path.join(REPO, "data", "RTE", "train.tsv")
PINNED_TRANSFORMERS = "4.57.6"
if transformers.__version__ != PINNED_TRANSFORMERS:
    raise SystemExit(f"transformers {transformers.__version__} is not the pinned {PINNED_TRANSFORMERS} "
                     "(requirements/venv.txt); run scripts/install-deps.sh")
# The reference runs on one thread: with several, oneMKL 2024.2's first-call race can give one thread's chunk of a tanh
# or exp a low-accuracy kernel (docs/reliability.md, part 3). ctest sets OMP_NUM_THREADS=1 already; this is for direct
# runs. Progress bars and load warnings off, so that a failure's message comes near the top of the output that CI shows.
torch.set_num_threads(1)
transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()


def run(*args):
    result = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"rankscope {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr}")
    return result


def rte_sentences(count):
    """The first `count` sentence1/sentence2 texts of the repository's GLUE RTE train.tsv, in file order."""
    sentences = []
    with open(RTE, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        first, second = header.index("sentence1"), header.index("sentence2")
        for line in f:
            fields = line.rstrip("\n").split("\t")
            sentences += [fields[first], fields[second]]
            if len(sentences) >= count:
                break
    return sentences[:count]


def relative_difference(got, expected):
    """max |got − expected| / max |expected| over the compared elements (float64)."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"shape {got.shape} != {expected.shape}")
    scale = np.abs(expected).max()
    return float(np.abs(got - expected).max() / (scale if scale > 0 else 1.0))


class Table:
    """Worst relative difference per (case, hook family), printed at the end and written as JSON when
    RANKSCOPE_TRANSFORMERS_TABLE names a file (the note's table comes from there)."""

    def __init__(self, title):
        self.title, self.rows = title, []

    def add(self, case, hook, worst, tolerance):
        self.rows.append({"case": case, "hook": hook, "worst_relative_difference": worst, "tolerance": tolerance})

    def emit(self):
        print(f"\n{self.title}")
        for row in self.rows:
            print(f"  {row['case']:<58} {row['hook']:<26} {row['worst_relative_difference']:.2e}"
                  f" (≤ {row['tolerance']:.0e})")
        target = os.environ.get("RANKSCOPE_TRANSFORMERS_TABLE")
        if target:
            existing = []
            if os.path.exists(target):
                with open(target) as f:
                    existing = json.load(f)
            existing = [row for row in existing if row.get("suite") != self.title]
            with open(target, "w") as f:
                json.dump(existing + [dict(row, suite=self.title) for row in self.rows], f, indent=1)
