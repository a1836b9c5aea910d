"""BERT layers against python3-torch's own torch.nn.TransformerEncoderLayer (post-LN, GELU) loaded with the
same weights: every recorded hidden state of `rankscope model --dump` is recomputed from the previous one."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import FIXTURES, RTE, read_safetensors, require, run  # noqa: E402



class NoNorm(torch.nn.LayerNorm):
    """A removed LayerNorm (identity) that still answers the encoder layer's eps checks."""

    def forward(self, x):
        return x


def encoder_layer(weights, prefix, names, config, remove_layer_norm=False):
    d, heads = config["hidden_size"], config["num_attention_heads"]
    # gelu_new (ALBERT) is GELU's tanh approximation.
    activation = (lambda x: torch.nn.functional.gelu(x, approximate="tanh")) if config["hidden_act"] == "gelu_new" else "gelu"
    layer = torch.nn.TransformerEncoderLayer(d, heads, config["intermediate_size"], dropout=0.0, activation=activation,
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
    if remove_layer_norm:
        layer.norm1, layer.norm2 = NoNorm(d, eps=config["layer_norm_eps"]), NoNorm(d, eps=config["layer_norm_eps"])
        # train() (dropout is 0) keeps torch off its fused inference path, which reads the norms' weights directly.
        return layer.train()
    return layer.eval()


BERT_NAMES = {"q": "attention.self.query.weight", "qb": "attention.self.query.bias",
              "k": "attention.self.key.weight", "kb": "attention.self.key.bias",
              "v": "attention.self.value.weight", "vb": "attention.self.value.bias",
              "o": "attention.output.dense.weight", "ob": "attention.output.dense.bias",
              "ln1": "attention.output.LayerNorm.weight", "ln1b": "attention.output.LayerNorm.bias",
              "f1": "intermediate.dense.weight", "f1b": "intermediate.dense.bias",
              "f2": "output.dense.weight", "f2b": "output.dense.bias",
              "ln2": "output.LayerNorm.weight", "ln2b": "output.LayerNorm.bias"}


ALBERT_NAMES = {"q": "attention.query.weight", "qb": "attention.query.bias",
                "k": "attention.key.weight", "kb": "attention.key.bias",
                "v": "attention.value.weight", "vb": "attention.value.bias",
                "o": "attention.dense.weight", "ob": "attention.dense.bias",
                "ln1": "attention.LayerNorm.weight", "ln1b": "attention.LayerNorm.bias",
                "f1": "ffn.weight", "f1b": "ffn.bias", "f2": "ffn_output.weight", "f2b": "ffn_output.bias",
                "ln2": "full_layer_layer_norm.weight", "ln2b": "full_layer_layer_norm.bias"}


class AgainstTorchEncoderLayer(unittest.TestCase):
    def check(self, name, prefix_of_layer, names, layer_norm="keep"):
        require(FIXTURES, RTE)
        folder = os.path.join(FIXTURES, name)
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        out = tempfile.mkdtemp(prefix="rankscope-torchref-")
        with open(os.path.join(folder, "vocab.txt")) as f:
            vocabulary = f.read().split("\n")
        if "[UNK]" not in vocabulary:
            # The ALBERT fixture lists SentencePiece-style specials; WordPiece needs [UNK]/[CLS]/[SEP] by name.
            copy = os.path.join(out, name)
            shutil.copytree(folder, copy)
            with open(os.path.join(copy, "vocab.txt"), "w") as f:
                f.write("\n".join({"<unk>": "[UNK]", "<pad>": "[PAD]"}.get(v, v) for v in vocabulary))
            folder = copy
        dump = os.path.join(out, "acts.safetensors")
        run("model", "--model", folder, "--text", RTE, "--samples", "3", "--tokens", "20", "--weights", "pretrained",
            "--variants", "transformer", "--draws", "1", "--out", out, "--dump", dump, "--layer-norm", layer_norm)
        activations = read_safetensors(dump)
        weights = read_safetensors(os.path.join(folder, "model.safetensors"))
        hidden = torch.from_numpy(np.array(activations["hook_embed"]))
        if hidden.shape[-1] != config["hidden_size"]:  # ALBERT: the factorised embedding's projection comes first
            mapping = "encoder.embedding_hidden_mapping_in."
            hidden = hidden @ torch.from_numpy(np.array(weights[mapping + "weight"])).T + \
                torch.from_numpy(np.array(weights[mapping + "bias"]))
        for layer_index in range(config["num_hidden_layers"]):
            layer = encoder_layer(weights, prefix_of_layer(layer_index), names, config, layer_norm == "remove")
            with torch.no_grad():
                expected = layer(hidden)
            got = torch.from_numpy(np.array(activations[f"blocks.{layer_index}.hook_resid_post"]))
            difference = ((got - expected).abs().max() / expected.abs().max()).item()
            self.assertLess(difference, 1e-4, f"{name} layer {layer_index}: relative difference {difference}")
            hidden = got

    def test_bert(self):
        self.check("bert-tiny", lambda l: f"encoder.layer.{l}.", BERT_NAMES)

    def test_bert_with_layer_norm_removed(self):
        self.check("bert-tiny", lambda l: f"encoder.layer.{l}.", BERT_NAMES, layer_norm="remove")

    def test_albert_shared_layer(self):
        # One layer's weights serve every layer.
        self.check("albert-tiny", lambda l: "encoder.albert_layer_groups.0.albert_layers.0.", ALBERT_NAMES)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
