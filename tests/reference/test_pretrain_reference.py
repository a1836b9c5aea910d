"""`rankscope pretrain` checkpoints against python3-torch: the final checkpoint (Hugging Face layout, read by name
from model.safetensors) run by torch.nn.TransformerEncoderLayer plus the MLM head written out here (BertForMaskedLM /
AlbertForMaskedLM: dense, activation, LayerNorm, decoder tied to the word embeddings) gives the held-out loss and
accuracy that log.csv reports, on the masked batch the run saved. Then `rankscope model` and `rankscope dynamics`
read the run."""
import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import RTE, read_csv, read_safetensors, require, run  # noqa: E402
from figure_layout import figure_layout, layout_problems, svg_page  # noqa: E402
from test_models_torch_reference import ALBERT_NAMES, BERT_NAMES, encoder_layer  # noqa: E402


def tensor(weights, name):
    return torch.from_numpy(np.array(weights[name])).to(torch.float64)


def mlm_reference(folder, input_ids, labels):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    weights = read_safetensors(os.path.join(folder, "model.safetensors"))
    arch = config["model_type"]
    p = arch + "."
    ids = torch.from_numpy(np.array(input_ids)).long()
    n = ids.shape[1]
    e = lambda name: tensor(weights, p + "embeddings." + name)  # noqa: E731
    x = e("word_embeddings.weight")[ids] + e("position_embeddings.weight")[:n] + e("token_type_embeddings.weight")[0]
    x = torch.nn.functional.layer_norm(x, (x.shape[-1],), e("LayerNorm.weight"), e("LayerNorm.bias"), config["layer_norm_eps"])
    if arch == "albert":
        x = x @ tensor(weights, p + "encoder.embedding_hidden_mapping_in.weight").T + \
            tensor(weights, p + "encoder.embedding_hidden_mapping_in.bias")
    double_weights = {name: np.array(value, dtype=np.float64) for name, value in weights.items()}
    for layer_index in range(config["num_hidden_layers"]):
        if arch == "bert":
            layer = encoder_layer(double_weights, f"{p}encoder.layer.{layer_index}.", BERT_NAMES, config)
        else:
            layer = encoder_layer(double_weights, p + "encoder.albert_layer_groups.0.albert_layers.0.", ALBERT_NAMES, config)
        layer = layer.double().train()  # dropout 0; train() keeps torch off its fused float32 inference path
        with torch.no_grad():
            x = layer(x)
    h = "cls.predictions.transform." if arch == "bert" else "predictions."
    t = x @ tensor(weights, h + "dense.weight").T + tensor(weights, h + "dense.bias")
    t = torch.nn.functional.gelu(t, approximate="tanh" if config["hidden_act"] == "gelu_new" else "none")
    t = torch.nn.functional.layer_norm(t, (t.shape[-1],), tensor(weights, h + "LayerNorm.weight"),
                                       tensor(weights, h + "LayerNorm.bias"), config["layer_norm_eps"])
    bias = tensor(weights, ("cls.predictions." if arch == "bert" else "predictions.") + "bias")
    logits = t @ e("word_embeddings.weight").T + bias
    labels = torch.from_numpy(np.array(labels)).long()
    selected = labels != -100
    loss = torch.nn.functional.cross_entropy(logits[selected], labels[selected]).item()
    accuracy = (logits[selected].argmax(-1) == labels[selected]).double().mean().item()
    return loss, accuracy


class PretrainAgainstTorch(unittest.TestCase):
    def check(self, arch):
        require(RTE)
        out = tempfile.mkdtemp(prefix=f"rankscope-pretrain-{arch}-")
        run("pretrain", "--arch", arch, "--corpus", RTE, "--layers", "2", "--d-model", "32", "--heads", "2",
            *(["--embedding-size", "16"] if arch == "albert" else []), "--vocab", "400", "--tokens", "32", "--batch", "16", "--steps", "100",
            "--learning-rate", "1e-2", "--out", out)
        log = read_csv(os.path.join(out, "log.csv"))
        self.assertEqual(int(log[0]["step"]), 0)
        self.assertEqual(int(log[-1]["step"]), 100)
        batch = read_safetensors(os.path.join(out, "heldout_masked.safetensors"))
        for row in (log[0], log[-1]):
            folder = os.path.join(out, "checkpoints", "step-%06d" % int(row["step"]))
            loss, accuracy = mlm_reference(folder, batch["input_ids"], batch["labels"])
            self.assertAlmostEqual(loss, float(row["heldout_loss"]), delta=1e-4 * loss, msg=f"{arch} step {row['step']}")
            self.assertAlmostEqual(accuracy, float(row["heldout_accuracy"]), delta=1.5 / np.sum(np.array(batch["labels"]) != -100))
        self.assertLess(float(log[-1]["heldout_loss"]), float(log[0]["heldout_loss"]) - 0.5)
        # At init the loss is about ln V (the logits are small).
        with open(os.path.join(out, "final", "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        self.assertAlmostEqual(float(log[0]["heldout_loss"]), math.log(vocab), delta=0.5)
        # The final folder is a model folder for `rankscope model`, and the run one for `rankscope dynamics`.
        model_out = os.path.join(out, "model")
        run("model", "--model", os.path.join(out, "final"), "--weights", "pretrained", "--text", RTE, "--samples", "4",
            "--tokens", "32", "--draws", "5", "--out", model_out)
        self.assertTrue(read_csv(os.path.join(model_out, "residual.csv")))
        dynamics_out = os.path.join(out, "dynamics")
        run("dynamics", "--checkpoints", out, "--samples", "4", "--draws", "5", "--out", dynamics_out)
        rows = read_csv(os.path.join(dynamics_out, "dynamics_residual.csv"))
        steps = sorted({int(r["step"]) for r in rows})
        self.assertEqual(steps, [0, 1, 2, 5, 10, 20, 50, 100])
        # 4 variants x (embeddings + 2 layers) per checkpoint; attention per layer.
        self.assertEqual(len(rows), len(steps) * 4 * 3)
        attention = read_csv(os.path.join(dynamics_out, "dynamics_attention.csv"))
        self.assertEqual(len(attention), len(steps) * 2)
        for r in attention:
            self.assertGreater(float(r["entropy_mean"]), 0.0)
            self.assertLessEqual(float(r["entropy_mean"]), float(r["uniform_entropy"]) + 1e-9)
        self.assertEqual([int(r["layer"]) for r in attention[:2]], [0, 1])  # blocks from 0, as attention_heads.csv
        figures = [os.path.join(dynamics_out, name + ".svg")
                   for name in ("dynamics_heatmap", "dynamics_curves", "dynamics_attention")]
        self.assertEqual(layout_problems(figure_layout(svg_page(figures))), [])

    def test_bert(self):
        self.check("bert")

    def test_albert(self):
        self.check("albert")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
