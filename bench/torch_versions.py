"""Which torch for the default build: the E1 grid (BERT-base at init, 32 x 128 token ids, the four surgeries, every
layer's composite relative residual) by rankscope built against each torch, and by the plain PyTorch script
(bench/e1_grid_torch.py) under each torch, in one run, the commands in turn, medians of REPEATS runs each.

    .venv/bin/python bench/torch_versions.py BUILD_VENV BUILD_SYSTEM [REPEATS]

BUILD_VENV: a build against the project venv's PyPI torch 2.13.0 (make build); BUILD_SYSTEM: one against Debian's
libtorch-dev 1.13 (make TORCH=system BUILD=build-system build, or only its rankscope target). The plain script runs
under .venv/bin/python (torch 2.13.0) and /usr/bin/python3 (python3-torch 1.13) at 1 and 2 threads; rankscope at 2.
Also prints how far rankscope's two builds (the same init from the seed) and the script under the two torches differ.
"""
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from common import write_safetensors  # noqa: E402

venv_build, system_build = sys.argv[1], sys.argv[2]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
VENV_PYTHON = os.path.join(HERE, "..", ".venv", "bin", "python")


def timed(command):
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()}")
    return seconds, usage.ru_maxrss / 1024


work = tempfile.mkdtemp(prefix="rankscope-torch-versions-")
inputs = os.path.join(work, "inputs.safetensors")
write_safetensors(inputs, {"input_ids": np.random.default_rng(0).integers(1000, 28996, size=(32, 128)).astype(np.int64)})
commands = {}
for label, build in (("rankscope on torch 2.13.0 (venv)", venv_build), ("rankscope on libtorch 1.13 (Debian)", system_build)):
    out = os.path.join(work, label.split()[3])
    commands[label] = ([os.path.join(build, "bin", "rankscope"), "model", "--model", "bert-base-cased", "--weights",
                        "init", "--inputs", inputs, "--draws", "0", "--threads", "2", "--out", out],
                       os.path.join(out, "residual.csv"))
for python, version in ((VENV_PYTHON, "2.13.0 (venv)"), ("/usr/bin/python3", "1.13 (Debian)")):
    for threads in (1, 2):
        out = os.path.join(work, f"torch_{version.split()[0]}_{threads}.csv")
        commands[f"plain PyTorch {version}, {threads} thread{'s' if threads > 1 else ''}"] = (
            [python, os.path.join(HERE, "e1_grid_torch.py"), inputs, str(threads), out], out)

runs = {name: [] for name in commands}
for _ in range(repeats):
    for name, (command, _) in commands.items():
        runs[name].append(timed(command))


def means(path):
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return {(row["variant"], int(row["layer"])): float(row["mean"]) for row in rows
            if row.get("norm", "composite") == "composite" and row.get("center", "mean") == "mean"}


def worst_difference(first, second):
    a, b = means(commands[first][1]), means(commands[second][1])
    return max(abs(a[key] - value) / max(abs(value), 1e-12) for key, value in b.items() if value > 1e-3)


# Same work on both torches: rankscope's two builds draw the same init from the seed; the plain script under each torch
# (its own init, nn.Linear's, so not comparable with rankscope's numbers).
print("rankscope 2.13 vs 1.13 build, worst relative difference of the mean residual (> 1e-3): "
      f"{worst_difference('rankscope on torch 2.13.0 (venv)', 'rankscope on libtorch 1.13 (Debian)'):.1e}")
print("plain PyTorch 2.13 vs 1.13: "
      f"{worst_difference('plain PyTorch 2.13.0 (venv), 1 thread', 'plain PyTorch 1.13 (Debian), 1 thread'):.1e}")
print(f"E1 grid, BERT-base at init, 32 x 128 tokens, 4 surgeries; medians of {repeats} runs, commands in turn; 2 cores")
print(f"{'':46s} {'seconds':>8s} {'peak MB':>8s}")
medians = {name: (statistics.median(s for s, _ in r), max(m for _, m in r)) for name, r in runs.items()}
for name, (seconds, megabytes) in medians.items():
    print(f"{name:46s} {seconds:8.2f} {megabytes:8.0f}")
for engine in ("rankscope on torch 2.13.0 (venv)", "rankscope on libtorch 1.13 (Debian)"):
    for baseline in [name for name in medians if name.startswith("plain")]:
        print(f"{engine} vs {baseline}: {medians[baseline][0] / medians[engine][0]:.2f}x")
