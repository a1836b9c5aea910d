"""Whole analyses, rankscope against plain PyTorch in the same run (make bench), with the ratios.

    .venv/bin/python bench/end_to_end.py [BUILD_DIR] [REPEATS]

The baseline is the torch of the Python that runs this script (make bench: the project venv's PyPI torch 2.13.0, the
torch users have; /usr/bin/python3 gives Debian's python3-torch 1.13, the baseline of the runs before 2026-12-04's
fifth session). Every torch process runs with OpenBLAS held at its thread count (`at_threads`: Debian's torch
uses OpenBLAS, whose own pool torch.set_num_threads does not bound; before 2026-12-05 its "1 thread" runs used both
cores for their matrix products).

1. The E1 grid: BERT-base at init, 32 x 128 token ids, the four surgeries, the composite relative residual of every
   layer (`rankscope model --weights init --inputs ... --draws 0`) at 1 and at 2 threads against
   bench/e1_grid_torch.py at the same thread counts (the ratios compare equal threads). Wall time and peak RSS of
   each process.
2. E2 path sampling: 12 lengths x 100 draws of attention products of BERT-base at init and their rank-1 residuals
   (`rankscope paths sample --patterns`) against bench/e2_paths_torch.py.
3. Training steps per second: E4 sort in the paper's configuration (6 post-LN attention layers, 2 heads, d = 48,
   batches of 30, Adam), `rankscope task sort --epochs 20 --retrain` (its task.json's train_seconds: the training loop
   only) for one seed and for five seeds trained together (`--seed 2 --seeds 5`, one stacked model; per model) against
   bench/e4_train_torch.py (nn.MultiheadAttention, the same loop, timed the same way), at 1 and 2 threads.
4. The machine's single-precision GEMM peak, measured here at 1 and 2 threads with the baseline torch's BLAS (MKL
   in PyPI's torch) and with Debian's python3-torch (OpenBLAS, held at the same thread count), the best of both; the
   share of it that the E1 grid's matrix products reach over the whole rankscope run at the same thread count (a
   lower bound: the run's wall time includes everything else).
Each command runs REPEATS times (default 3), the commands in turn; medians are reported.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from common import write_safetensors  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else "build"
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
rankscope = os.path.join(build, "bin", "rankscope")
python = sys.executable
default_threads = torch.get_num_threads()


def timed(command):
    """Wall seconds and peak RSS (MB) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    error = process.stderr.read().decode()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{error}")
    return seconds, usage.ru_maxrss / 1024


def compare(commands):
    """{name: (median seconds, max peak MB)}, the commands run in turn `repeats` times."""
    runs = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            runs[name].append(timed(command))
    return {name: (statistics.median(s for s, _ in r), max(m for _, m in r)) for name, r in runs.items()}


GEMM_PROBE = ("import sys, time, torch\n"
              "torch.set_num_threads(int(sys.argv[1])); a, b = torch.randn(4096, 768), torch.randn(768, 3072)\n"
              "[a @ b for _ in range(3)]\n"
              "start, count = time.perf_counter(), 0\n"
              "while time.perf_counter() - start < 2.0:\n"
              "    a @ b; count += 1\n"
              "print(2.0 * 4096 * 768 * 3072 * count / (time.perf_counter() - start) / 1e9)\n")


def at_threads(threads, command):
    """`command` with OpenBLAS held at `threads`: OpenBLAS keeps its own thread pool, which torch.set_num_threads does
    not bound (without it, Debian's python3-torch at "1 thread" ran its products on both cores: 143 GFLOP/s against 83,
    2026-12-05). PyPI's torch (MKL) is bounded by torch.set_num_threads alone."""
    return ["env", f"OPENBLAS_NUM_THREADS={threads}", *command]


def gemm_gflops(interpreter, threads):
    """SGEMM 4096 x 768 x 3072 GFLOP/s of `interpreter`'s torch at `threads`, in its own process; None on failure."""
    probe = subprocess.run(at_threads(threads, [interpreter, "-c", GEMM_PROBE, str(threads)]), capture_output=True,
                           text=True)
    return float(probe.stdout) if probe.returncode == 0 else None


def e1_grid_flops(batch=32, tokens=128, d=768, ffn=3072, layers=12):
    """Multiply-adds x 2 of the grid's matrix products: SAN and SAN+skip run attention only, the others the MLP too."""
    rows = batch * tokens
    attention = 4 * 2 * rows * d * d + 2 * 2 * rows * tokens * d  # q, k, v, output projections; scores and mixing
    mlp = 2 * 2 * rows * d * ffn
    return layers * (2 * attention + 2 * (attention + mlp))


work = tempfile.mkdtemp(prefix="rankscope-bench-")
rng = np.random.default_rng(0)
inputs = os.path.join(work, "inputs.safetensors")
write_safetensors(inputs, {"input_ids": rng.integers(1000, 28996, size=(32, 128)).astype(np.int64)})
small = os.path.join(work, "small.safetensors")
write_safetensors(small, {"input_ids": rng.integers(1000, 28996, size=(4, 128)).astype(np.int64)})

# 1. The E1 grid.
grid = compare({
    "rankscope (1 thread)": [rankscope, "model", "--model", "bert-base-cased", "--weights", "init", "--inputs", inputs,
                             "--draws", "0", "--threads", "1", "--out", os.path.join(work, "e1")],
    "rankscope (2 threads)": [rankscope, "model", "--model", "bert-base-cased", "--weights", "init", "--inputs", inputs,
                              "--draws", "0", "--threads", "2", "--out", os.path.join(work, "e1")],
    "torch, 1 thread": at_threads(1, [python, os.path.join(HERE, "e1_grid_torch.py"), inputs, "1",
                                      os.path.join(work, "e1_torch.csv")]),
    "torch, 2 threads": at_threads(2, [python, os.path.join(HERE, "e1_grid_torch.py"), inputs, "2",
                                       os.path.join(work, "e1_torch.csv")]),
})

# 2. E2 on BERT-base's attention maps at init (4 samples: the work per product does not depend on the batch).
patterns = os.path.join(work, "patterns.safetensors")
subprocess.run([rankscope, "model", "--model", "bert-base-cased", "--weights", "init", "--inputs", small, "--draws", "1",
                "--variants", "transformer", "--dump", patterns, "--out", os.path.join(work, "dump")],
               check=True, capture_output=True)
paths = compare({
    "rankscope (2 threads)": [rankscope, "paths", "sample", "--patterns", patterns, "--draws", "100", "--threads", "2",
                              "--out", os.path.join(work, "e2")],
    "torch, 1 thread": at_threads(1, [python, os.path.join(HERE, "e2_paths_torch.py"), patterns, "100", "1"]),
    "torch, 2 threads": at_threads(2, [python, os.path.join(HERE, "e2_paths_torch.py"), patterns, "100", "2"]),
})

# 3. Training steps per second (E4 sort, the paper's configuration), the runs in turn. rankscope trains one model, and
# five seeds together as one stacked model (`--seeds`, model-steps per second: 5 x steps / the run's training time);
# torch trains one model (five seeds one after another have its one-model rate).
train_epochs, steps = 20, 20 * 34  # 1000 sequences in batches of 30: 34 steps per epoch
together = [2, 3, 4, 5, 6]
training_runs = {"rankscope, 1 seed": [], f"rankscope, {len(together)} seeds together": [],
                 "torch, 1 thread": [], "torch, 2 threads": []}
for _ in range(repeats):
    out = os.path.join(work, "e4")
    for name, seeds in (("rankscope, 1 seed", [2]), (f"rankscope, {len(together)} seeds together", together)):
        subprocess.run([rankscope, "task", "sort", "--epochs", str(train_epochs), "--retrain", "--paths", "1", "--repeats",
                        "1", "--sub-path", "no", "--threads", "2", "--seed", str(seeds[0]), "--seeds", str(len(seeds)),
                        "--out", out],
                       check=True, capture_output=True)
        with open(os.path.join(out, "task.json")) as f:
            summary = json.load(f)
        assert summary["steps_per_model"] == steps, summary["steps_per_model"]
        training_runs[name].append(len(seeds) * steps / summary["train_seconds"])
    for threads, name in ((1, "torch, 1 thread"), (2, "torch, 2 threads")):
        result = subprocess.run(at_threads(threads, [python, os.path.join(HERE, "e4_train_torch.py"), str(train_epochs),
                                                     str(threads)]), check=True, capture_output=True, text=True)
        measured = json.loads(result.stdout)
        assert measured["steps"] == steps, measured
        training_runs[name].append(steps / measured["train_seconds"])
training = {name: statistics.median(rates) for name, rates in training_runs.items()}

# 4. The GEMM peak at 1 and at 2 threads and the grid's share of it at each: the best of this torch's BLAS (PyPI's:
# MKL) and Debian's python3-torch's (OpenBLAS), each count in its own process with OpenBLAS held at it (at_threads).
peak = {threads: gemm_gflops(python, threads) for threads in (1, 2)}
openblas_peak = {}
if os.path.exists("/usr/bin/python3") and not torch.__file__.startswith("/usr/lib/python3/"):  # not Debian's torch
    for threads in (1, 2):
        gflops = gemm_gflops("/usr/bin/python3", threads)
        if gflops is not None:
            openblas_peak[threads] = gflops
best_peak = {threads: max(peak[threads] or 0.0, openblas_peak.get(threads, 0.0)) for threads in (1, 2)}
grid_seconds = {1: grid["rankscope (1 thread)"][0], 2: grid["rankscope (2 threads)"][0]}
share = {threads: e1_grid_flops() / grid_seconds[threads] / 1e9 / best_peak[threads] for threads in (1, 2)}

report = {"repeats": repeats, "e1_grid": grid, "e2_paths": paths, "training_steps_per_second": training,
          "gemm_peak_gflops": peak, "gemm_peak_gflops_openblas": openblas_peak,
          "e1_grid_gflop": e1_grid_flops() / 1e9, "e1_grid_share_of_peak": share}
print(f"rankscope against plain PyTorch {torch.__version__} ({python}, default {default_threads} threads); "
      f"medians of {repeats} runs each, commands in turn; 2 cores")
for title, table in [("E1 grid: BERT-base init, 32 x 128 tokens, 4 surgeries x 12 layers", grid),
                     ("E2 sampling: 12 lengths x 100 draws, rank-1 residual of each product (ratios against rankscope "
                      "at 2 threads)", paths)]:
    print(f"\n{title}")
    print(f"{'':<28}{'wall s':>8}{'peak MB':>9}{'rankscope faster by':>21}")
    for name, (seconds, megabytes) in table.items():
        # At equal threads where rankscope ran at that count; E2 runs rankscope at 2 threads only, so its torch rows
        # are both against that.
        ours_name = "rankscope (1 thread)" if "1 thread" in name else "rankscope (2 threads)"
        ours = table.get(ours_name, table["rankscope (2 threads)"])[0]
        ratio = "" if name.startswith("rankscope") else f"{seconds / ours:.2f}x"
        print(f"{name:<28}{seconds:>8.2f}{megabytes:>9.0f}{ratio:>21}")
print(f"\nE4 sort training, the paper's configuration, {steps} steps ({train_epochs} epochs) per model")
print(f"{'':<32}{'model-steps/s':>14}{'1 seed faster by':>18}{'5 seeds faster by':>19}")
for name, rate in training.items():
    if name.startswith("rankscope"):
        print(f"{name:<32}{rate:>14.1f}")
    else:
        print(f"{name:<32}{rate:>14.1f}{training['rankscope, 1 seed'] / rate:>17.2f}x"
              f"{training[f'rankscope, {len(together)} seeds together'] / rate:>18.2f}x")
print(f"\nSGEMM 4096 x 768 x 3072 (torch {torch.__version__}'s BLAS): {peak[1]:.0f} GFLOP/s at 1 thread, {peak[2]:.0f} at 2")
if openblas_peak:
    print(f"SGEMM 4096 x 768 x 3072 (Debian's python3-torch, OpenBLAS): " +
          ", ".join(f"{gflops:.0f} GFLOP/s at {threads} thread{'s' if threads > 1 else ''}"
                    for threads, gflops in openblas_peak.items()) + "; the peak below is the best of both")
for threads in (1, 2):
    print(f"E1 grid at {threads} thread{'s' if threads > 1 else ''}: {e1_grid_flops() / 1e9:.0f} GFLOP of matrix products "
          f"in {grid_seconds[threads]:.2f} s = {e1_grid_flops() / grid_seconds[threads] / 1e9:.0f} GFLOP/s, "
          f"{100 * share[threads]:.0f}% of the {best_peak[threads]:.0f} GFLOP/s peak at that count, over the whole run")
with open(os.path.join(work, "bench.json"), "w") as f:
    json.dump(report, f, indent=1)
print(f"(raw numbers: {os.path.join(work, 'bench.json')})")
