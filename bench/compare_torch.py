"""Runs rankscope's measure benchmark and the same computation in python3-torch, in one run, and prints the ratios.

    /usr/bin/python3 bench/compare_torch.py [BUILD_DIR]

Workloads, both sides on the same number of threads (2 unless RANKSCOPE_BENCH_THREADS says otherwise):
- measures: 384 matrices of 128 x 128 float32 (one BERT-base attention layer for 32 samples);
- forward: BERT-base at init, 32 x 128 tokens, every hidden state (and, on rankscope's side, attention pattern)
  kept; torch runs 12 nn.TransformerEncoderLayer (post-LN, GELU) on its fused inference path, with the same
  allocator settings as rankscope (mallopt through ctypes), and is timed from the embeddings on.
"""
import ctypes
import json
import os
import subprocess
import sys
import time

import torch

libc = ctypes.CDLL("libc.so.6")
libc.mallopt(-4, 0)  # M_MMAP_MAX, as rankscope's main() and bench do
libc.mallopt(-1, 2 ** 31 - 1)  # M_TRIM_THRESHOLD

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



def bert_base_stack():
    layers = [torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True).eval()
              for _ in range(12)]

    def forward(x):
        with torch.no_grad():
            hidden = [x]
            for layer in layers:
                hidden.append(layer(hidden[-1]))
        return hidden
    return forward


torch_ms["BertBaseForward"] = time_torch(bert_base_stack(), torch.randn(32, 128, 768), seconds=10.0)

result = subprocess.run([os.path.join(build, "bench", "rankscope_bench"), "--benchmark_format=json",
                         f"--benchmark_filter=/{threads}/"], capture_output=True, text=True, check=True)
ours, reference_linear = {}, None
for b in json.loads(result.stdout)["benchmarks"]:
    name = b["name"].split("/")[0]
    if name == "BertBaseForward" and b["name"].split("/")[2] == "0":
        reference_linear = b["real_time"]  # the at::linear reference path, for the fast path's own speed-up
        continue
    ours[name] = b["real_time"]

print(f"{threads} threads; measures: 384 x 128 x 128 float32, composite relative residual; forward: BERT-base 32 x 128")
print(f"{'path':<34}{'rankscope ms':>14}{'torch ms':>12}{'speed-up':>10}")
for name, reference in torch_ms.items():
    print(f"{name:<34}{ours[name]:>14.2f}{reference:>12.2f}{reference / ours[name]:>9.2f}x")
if reference_linear:
    # The row above forces oneDNN; rankscope's default is oneDNN only on a libtorch without MKL (src/models/common.cpp).
    print(f"BertBaseForward with at::linear instead of oneDNN: {reference_linear:.0f} ms "
          f"(oneDNN / at::linear time: {ours['BertBaseForward'] / reference_linear:.2f})")
