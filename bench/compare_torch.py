"""Runs rankscope's measure benchmark and the same computation in python3-torch, in one run, and prints the ratios.

    /usr/bin/python3 bench/compare_torch.py [BUILD_DIR]

Workload: 384 matrices of 128 x 128 float32 (one BERT-base attention layer for 32 samples), both sides on the same
number of threads (2 unless RANKSCOPE_BENCH_THREADS says otherwise).
"""
import json
import os
import subprocess
import sys
import time

import torch

build = sys.argv[1] if len(sys.argv) > 1 else "build"
threads = int(os.environ.get("RANKSCOPE_BENCH_THREADS", "2"))
torch.set_num_threads(threads)


def composite(m):
    a = m.abs()
    return torch.sqrt(a.sum(-2).amax(-1).double() * a.sum(-1).amax(-1).double())


def relative_residual_mean(x):
    return composite(x - x.mean(-2, keepdim=True)) / composite(x)


def relative_residual_rank1(x):
    u, s, vh = torch.linalg.svd(x)
    return composite(x - s[:, 0, None, None] * u[:, :, :1] @ vh[:, :1, :]) / composite(x)


def time_torch(function, x, seconds=3.0):
    function(x)
    start, runs = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        function(x)
        runs += 1
    return (time.perf_counter() - start) / runs * 1e3


torch.manual_seed(0)
x = torch.randn(384, 128, 128)
torch_ms = {"CompositeRelativeResidualMean": time_torch(relative_residual_mean, x),
            "CompositeRelativeResidualRank1": time_torch(relative_residual_rank1, x)}

result = subprocess.run([os.path.join(build, "bench", "rankscope_bench"), "--benchmark_format=json",
                         f"--benchmark_filter=/{threads}/"], capture_output=True, text=True, check=True)
ours = {b["name"].split("/")[0]: b["real_time"] for b in json.loads(result.stdout)["benchmarks"]}

print(f"384 x 128 x 128 float32, {threads} threads, composite relative residual")
print(f"{'path':<34}{'rankscope ms':>14}{'torch ms':>12}{'speed-up':>10}")
for name, reference in torch_ms.items():
    print(f"{name:<34}{ours[name]:>14.2f}{reference:>12.2f}{reference / ours[name]:>9.2f}x")
