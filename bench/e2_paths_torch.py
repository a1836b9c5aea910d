"""E2 path sampling in plain python3-torch, written as a user would: for each length k = 1..L and each draw, k distinct
layers, one head each and one sample at random, the product of their attention maps in float64 (later layers on the
left), and its rank-1 relative residual in the composite and Frobenius norms from torch.linalg.svd.

    /usr/bin/python3 bench/e2_paths_torch.py PATTERNS.safetensors DRAWS THREADS

PATTERNS holds blocks.{l}.attn.hook_pattern [B, H, n, n] (what `rankscope model --dump` writes). The draws use
python's own generator, so they differ from rankscope's; the work is the same.
"""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from common import read_safetensors  # noqa: E402


def composite(m):
    a = m.abs()
    return torch.sqrt(a.sum(0).max() * a.sum(1).max())


def main():
    path, draws, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if threads > 0:
        torch.set_num_threads(threads)
    arrays = read_safetensors(path)
    patterns = []
    while f"blocks.{len(patterns)}.attn.hook_pattern" in arrays:
        patterns.append(torch.from_numpy(arrays[f"blocks.{len(patterns)}.attn.hook_pattern"].copy()))
    layers, (batch, heads) = len(patterns), patterns[0].shape[:2]
    generator = random.Random(0)
    results = []
    for k in range(1, layers + 1):
        for _ in range(draws):
            sample = generator.randrange(batch)
            product = None
            for layer in sorted(generator.sample(range(layers), k)):
                a = patterns[layer][sample, generator.randrange(heads)].double()
                product = a if product is None else a @ product
            u, s, vh = torch.linalg.svd(product)
            rest = product - s[0] * torch.outer(u[:, 0], vh[0])
            results.append((composite(rest) / composite(product)).item())
            results.append((rest.norm() / product.norm()).item())
    print(len(results) // 2, "products")


if __name__ == "__main__":
    main()
