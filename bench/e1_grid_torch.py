"""The E1 grid in plain python3-torch, written as a user would: BERT-base (bert-base-cased's configuration) at random
init, the batch of token ids from a .safetensors file, the paper's four surgeries, and the composite relative
residual (mean centre) of every sample after the embeddings and after each layer.

    /usr/bin/python3 bench/e1_grid_torch.py INPUTS.safetensors THREADS OUT.csv [DEVICE]

DEVICE (default cpu) may be cuda: the model is made on the CPU (the same draw) and moved; TF32 off, float32 as
rankscope. The compute alone (forward + measures, synchronised) is printed as `compute_seconds=…` on stderr.

The model follows Hugging Face's BertModel (post-LN, erf GELU, LayerNorm eps 1e-12); the surgeries follow SPEC.md
E1: SAN drops the attention skip and the MLP block, SAN+MLP drops the attention skip, SAN+skip drops the MLP block.
"""
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from common import read_safetensors  # noqa: E402

D, HEADS, FFN, LAYERS, VOCAB, POSITIONS = 768, 12, 3072, 12, 28996, 512


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.query, self.key, self.value = (torch.nn.Linear(D, D) for _ in range(3))
        self.attention_output, self.attention_norm = torch.nn.Linear(D, D), torch.nn.LayerNorm(D, eps=1e-12)
        self.intermediate, self.output = torch.nn.Linear(D, FFN), torch.nn.Linear(FFN, D)
        self.output_norm = torch.nn.LayerNorm(D, eps=1e-12)

    def forward(self, x, skip, mlp):
        b, n, _ = x.shape
        split = lambda t: t.view(b, n, HEADS, D // HEADS).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        pattern = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // HEADS), dim=-1)
        mixed = (pattern @ v).transpose(1, 2).reshape(b, n, D)
        attended = self.attention_output(mixed)
        x = self.attention_norm(attended + x if skip else attended)
        if mlp:
            x = self.output_norm(self.output(torch.nn.functional.gelu(self.intermediate(x))) + x)
        return x


class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.words, self.positions, self.types = (torch.nn.Embedding(VOCAB, D), torch.nn.Embedding(POSITIONS, D),
                                                  torch.nn.Embedding(2, D))
        self.norm = torch.nn.LayerNorm(D, eps=1e-12)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))

    def forward(self, ids, skip, mlp):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.words(ids) + self.positions(positions) + self.types(torch.zeros_like(ids)))
        hidden = [x]
        for layer in self.layers:
            hidden.append(layer(hidden[-1], skip, mlp))
        return hidden


def composite(m):
    a = m.abs()
    return torch.sqrt(a.sum(-2).amax(-1) * a.sum(-1).amax(-1))


def relative_residual(h):
    h = h.double()
    return composite(h - h.mean(-2, keepdim=True)) / composite(h)


def main():
    inputs, threads, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    device = torch.device(sys.argv[4] if len(sys.argv) > 4 else "cpu")
    if threads > 0:
        torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    ids = torch.from_numpy(read_safetensors(inputs)["input_ids"].copy()).to(device)
    model = Bert().eval().to(device)
    rows = []
    synchronise = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    synchronise()
    start = time.perf_counter()
    with torch.no_grad():
        for variant, skip, mlp in [("SAN", False, False), ("SAN+MLP", False, True), ("SAN+skip", True, False),
                                   ("transformer", True, True)]:
            for layer, h in enumerate(model(ids, skip, mlp)):
                r = relative_residual(h)
                rows.append(f"{variant},{layer},{r.mean().item():.6g},{r.std().item():.6g}")
    synchronise()
    print(f"compute_seconds={time.perf_counter() - start:.3f}", file=sys.stderr)
    with open(out, "w") as f:
        f.write("variant,layer,mean,std\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
