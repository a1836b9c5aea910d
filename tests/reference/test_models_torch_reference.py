"""BERT layers against python3-torch's own torch.nn.TransformerEncoderLayer (post-LN, GELU) loaded with the
same weights: every recorded hidden state of `rankscope model --dump` is recomputed from the previous one."""
import json
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import read_safetensors, run  # noqa: E402

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared")
FIXTURES = os.path.join(SHARED, "fixtures")
RTE = os.path.join(SHARED, "data", "RTE", "train.tsv")


def encoder_layer(weights, prefix, names, config):
    d, heads = config["hidden_size"], config["num_attention_heads"]
    layer = torch.nn.TransformerEncoderLayer(d, heads, config["intermediate_size"], dropout=0.0, activation="gelu",
                                             layer_norm_eps=config["layer_norm_eps"], batch_first=True, norm_first=False)
    w = {key: torch.from_numpy(np.array(weights[prefix + name])) for key, name in names.items()}
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([w["q"], w["k"], w["v"]]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([w["qb"], w["kb"], w["vb"]]))
        layer.self_attn.out_proj.weight.copy_(w["o"])
        layer.self_attn.out_proj.bias.copy_(w["ob"])
        layer.norm1.weight.copy_(w["ln1"])
        layer.norm1.bias.copy_(w["ln1b"])
        layer.linear1.weight.copy_(w["f1"])
        layer.linear1.bias.copy_(w["f1b"])
        layer.linear2.weight.copy_(w["f2"])
        layer.linear2.bias.copy_(w["f2b"])
        layer.norm2.weight.copy_(w["ln2"])
        layer.norm2.bias.copy_(w["ln2b"])
    return layer.eval()


BERT_NAMES = {"q": "attention.self.query.weight", "qb": "attention.self.query.bias",
              "k": "attention.self.key.weight", "kb": "attention.self.key.bias",
              "v": "attention.self.value.weight", "vb": "attention.self.value.bias",
              "o": "attention.output.dense.weight", "ob": "attention.output.dense.bias",
              "ln1": "attention.output.LayerNorm.weight", "ln1b": "attention.output.LayerNorm.bias",
              "f1": "intermediate.dense.weight", "f1b": "intermediate.dense.bias",
              "f2": "output.dense.weight", "f2b": "output.dense.bias",
              "ln2": "output.LayerNorm.weight", "ln2b": "output.LayerNorm.bias"}


@unittest.skipUnless(os.path.isdir(FIXTURES) and os.path.exists(RTE), "shared fixtures and RTE data needed")
class AgainstTorchEncoderLayer(unittest.TestCase):
    def check(self, name, prefix_of_layer, names):
        folder = os.path.join(FIXTURES, name)
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        out = tempfile.mkdtemp(prefix="rankscope-torchref-")
        dump = os.path.join(out, "acts.safetensors")
        run("model", "--model", folder, "--text", RTE, "--samples", "3", "--tokens", "20", "--weights", "pretrained",
            "--variants", "transformer", "--draws", "1", "--out", out, "--dump", dump)
        activations = read_safetensors(dump)
        weights = read_safetensors(os.path.join(folder, "model.safetensors"))
        hidden = torch.from_numpy(np.array(activations["hook_embed"]))
        for layer_index in range(config["num_hidden_layers"]):
            layer = encoder_layer(weights, prefix_of_layer(layer_index), names, config)
            with torch.no_grad():
                expected = layer(hidden)
            got = torch.from_numpy(np.array(activations[f"blocks.{layer_index}.hook_resid_post"]))
            difference = ((got - expected).abs().max() / expected.abs().max()).item()
            self.assertLess(difference, 1e-4, f"{name} layer {layer_index}: relative difference {difference}")
            hidden = got

    def test_bert(self):
        self.check("bert-tiny", lambda l: f"encoder.layer.{l}.", BERT_NAMES)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
