"""E4 sort training in plain python3-torch, written the way a user would, for bench/end_to_end.py.

    /usr/bin/python3 bench/e4_train_torch.py EPOCHS THREADS

The paper's sort configuration, the same model rankscope's `task sort` trains: token + learned position embeddings and
LayerNorm; 6 post-LN layers of 2-head self-attention (d = 48, biases) with the skip connection and no MLP; a linear
unembedding to the 10 classes. 1000 training sequences of length 8 with values in [0, 10), batches of 30 in order,
Adam at lr 1e-3, cross-entropy per token. Prints one JSON line: steps, training seconds (the loop only, as
rankscope's train_seconds) and the final training loss.
"""
import json
import math
import sys
import time

import torch
from torch import nn

epochs, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(2)
vocab, length, d_model, heads, layers, count, batch = 10, 8, 48, 2, 6, 1000, 30


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(d_model, heads, batch_first=True)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):
        return self.norm(x + self.attention(x, x, x, need_weights=False)[0])


class SortModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.positions = nn.Parameter(torch.randn(length, d_model))
        self.norm = nn.LayerNorm(d_model)
        self.layers = nn.ModuleList(Layer() for _ in range(layers))
        self.unembed = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        x = self.norm(self.embed(tokens) + self.positions)
        for layer in self.layers:
            x = layer(x)
        return self.unembed(x)


inputs = torch.randint(0, vocab, (count, length))
targets = inputs.sort(dim=1).values
model = SortModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_function = nn.CrossEntropyLoss()
steps = 0
start = time.perf_counter()
for epoch in range(epochs):
    for first in range(0, count, batch):
        x, y = inputs[first:first + batch], targets[first:first + batch]
        loss = loss_function(model(x).reshape(-1, vocab), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
seconds = time.perf_counter() - start
assert steps == epochs * math.ceil(count / batch)
print(json.dumps({"steps": steps, "train_seconds": seconds, "final_loss": loss.item()}))
