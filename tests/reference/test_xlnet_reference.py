"""XLNet's content stream against a reference written here, in float64 numpy, from the published equations:

  Transformer-XL's relative attention (Dai et al. 2019, section 3.3), for query i and key j,
      A_ij = (q_i + u)·k_j + (q_i + v)·(W_r R_{i-j})
  with R_δ = [sin(δ ω_t), cos(δ ω_t)], ω_t = 10000^(-2t/d) (δ clamped to ±clamp_len when clamp_len > 0), and
  XLNet's relative segment encoding (Yang et al. 2019, section 2.5)
      + (q_i + b)·s_ij,  s_ij = s_same if token types i and j are equal, else s_different,
  scaled by 1/sqrt(d_head); padding keys are excluded except a query's own position; then post-LN:
      a = LN(h + O(P V)),  h' = LN(a + W_2 act(W_1 a)).

The relative position is formed for every pair (i, j) explicitly, not through the "relative shift" of the
implementations, so an off-by-one there would show. Every layer's attention pattern and hidden state of
`rankscope model --inputs ... --dump` is compared: layer by layer (each layer recomputed from rankscope's previous hidden state) and
end to end (the reference run from the word embeddings alone)."""
import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import FIXTURES, read_csv, read_safetensors, require, run, write_safetensors  # noqa: E402

FIXTURE = os.path.join(FIXTURES, "xlnet-tiny")


def needs_fixture(test):
    """The fixture is in the repository: its absence fails the test (never a skip)."""
    def wrapped(self, *args, **kwargs):
        require(FIXTURE)
        return test(self, *args, **kwargs)
    wrapped.__name__, wrapped.__doc__ = test.__name__, test.__doc__
    return wrapped

erf = np.vectorize(math.erf)
ACTIVATIONS = {
    "gelu": lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
    "gelu_new": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "relu": lambda x: np.maximum(x, 0.0),
}


def layer_norm(x, gain, bias, eps, remove=False):
    if remove:
        return x
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gain + bias


def relative_encoding(delta, d_model, clamp_len):
    """R_δ for an integer array of distances δ: [..., d_model]."""
    if clamp_len > 0:
        delta = np.clip(delta, -clamp_len, clamp_len)
    omega = 1.0 / 10000.0 ** (np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    angles = delta[..., None].astype(np.float64) * omega
    return np.concatenate([np.sin(angles), np.cos(angles)], -1)


class XLNetReference:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        self.weights = {k: np.array(v, dtype=np.float64) for k, v in read_safetensors(os.path.join(folder, "model.safetensors")).items()}

    def embed(self, input_ids):
        return self.weights["word_embedding.weight"][input_ids]

    def layer(self, l, h, token_types, mask, remove_layer_norm=False):
        """One layer for one sample: h [n, d], token_types [n], mask [n] (1 = real). Returns (pattern [H, n, n], h')."""
        c, w = self.config, {k[len(f"layer.{l}."):]: v for k, v in self.weights.items() if k.startswith(f"layer.{l}.")}
        n = h.shape[0]
        positions = np.arange(n)
        delta = positions[:, None] - positions[None, :]  # i - j
        relative = relative_encoding(delta, c["d_model"], c.get("clamp_len", -1))  # [n, n, d]
        q = np.einsum("id,dhk->hik", h, w["rel_attn.q"])
        k = np.einsum("jd,dhk->hjk", h, w["rel_attn.k"])
        v = np.einsum("jd,dhk->hjk", h, w["rel_attn.v"])
        k_relative = np.einsum("ijd,dhk->hijk", relative, w["rel_attn.r"])  # W_r R_{i-j}, per head
        u, v_bias, b = (w[f"rel_attn.{name}"][:, None, :] for name in ("r_w_bias", "r_r_bias", "r_s_bias"))
        content = np.einsum("hik,hjk->hij", q + u, k)
        position = np.einsum("hik,hijk->hij", q + v_bias, k_relative)
        same = token_types[:, None] == token_types[None, :]
        segment_vectors = np.where(same[None, :, :, None], w["rel_attn.seg_embed"][0][:, None, None, :],
                                   w["rel_attn.seg_embed"][1][:, None, None, :])  # [H, n, n, k]
        segment = np.einsum("hik,hijk->hij", q + b, segment_vectors)
        score = (content + position + segment) / math.sqrt(c["d_head"])
        visible = (mask[None, :] == 1) | np.eye(n, dtype=bool)  # a padded query still sees itself
        score = np.where(visible[None], score, -np.inf)
        pattern = np.exp(score - score.max(-1, keepdims=True))
        pattern /= pattern.sum(-1, keepdims=True)
        attended = np.einsum("hij,hjk->ihk", pattern, v)
        out = np.einsum("ihk,dhk->id", attended, w["rel_attn.o"])
        eps, remove = c["layer_norm_eps"], remove_layer_norm
        a = layer_norm(h + out, w["rel_attn.layer_norm.weight"], w["rel_attn.layer_norm.bias"], eps, remove)
        inner = ACTIVATIONS[c.get("ff_activation", "gelu")](a @ w["ff.layer_1.weight"].T + w["ff.layer_1.bias"])
        return pattern, layer_norm(a + inner @ w["ff.layer_2.weight"].T + w["ff.layer_2.bias"],
                                   w["ff.layer_norm.weight"], w["ff.layer_norm.bias"], eps, remove)


def relative_residual(x):
    """Composite norm sqrt(||R||_1 ||R||_inf) of R = X - mean row, over that of X."""
    def composite(m):
        a = np.abs(m)
        return math.sqrt(a.sum(0).max() * a.sum(1).max())
    return composite(x - x.mean(0)) / composite(x)


def random_xlnet(folder, seed=3):
    """A random checkpoint in the Hugging Face layout with every XLNet option the reference covers switched on."""
    config = {"model_type": "xlnet", "architectures": ["XLNetModel"], "vocab_size": 50, "d_model": 24, "n_layer": 4,
              "n_head": 3, "d_head": 8, "d_inner": 40, "ff_activation": "gelu_new", "clamp_len": 5,
              "attn_type": "bi", "bi_data": False, "layer_norm_eps": 1e-12, "initializer_range": 0.3}
    rng = np.random.default_rng(seed)
    d, H, k, inner = config["d_model"], config["n_head"], config["d_head"], config["d_inner"]
    tensors = {"word_embedding.weight": rng.normal(0, 1, (config["vocab_size"], d)),
               "mask_emb": rng.normal(0, 0.02, (1, 1, d))}
    for l in range(config["n_layer"]):
        p = f"layer.{l}."
        for name in ("q", "k", "v", "o", "r"):
            tensors[p + "rel_attn." + name] = rng.normal(0, 0.3, (d, H, k))
        for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
            tensors[p + "rel_attn." + name] = rng.normal(0, 0.5, (H, k))
        tensors[p + "rel_attn.seg_embed"] = rng.normal(0, 0.5, (2, H, k))
        for ln in ("rel_attn.layer_norm", "ff.layer_norm"):
            tensors[p + ln + ".weight"] = rng.uniform(0.5, 1.5, d)
            tensors[p + ln + ".bias"] = rng.normal(0, 0.1, d)
        tensors[p + "ff.layer_1.weight"] = rng.normal(0, 0.3, (inner, d))
        tensors[p + "ff.layer_1.bias"] = rng.normal(0, 0.1, inner)
        tensors[p + "ff.layer_2.weight"] = rng.normal(0, 0.3, (d, inner))
        tensors[p + "ff.layer_2.bias"] = rng.normal(0, 0.1, d)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    write_safetensors(os.path.join(folder, "model.safetensors"), {n: t.astype(np.float32) for n, t in tensors.items()})
    return folder


def packed_batch(path, vocab_size, n=20):
    """The layout `rankscope model --text` gives XLNet: real tokens only, content of type 0, then <sep> (type 0) and
    <cls> (type 2) at the END (the fixture's vocabulary has <cls> = 3, <sep> = 4)."""
    rng = np.random.default_rng(7)
    input_ids = rng.integers(9, vocab_size, (3, n))
    input_ids[:, n - 2], input_ids[:, n - 1] = 4, 3
    token_type_ids = np.zeros((3, n), dtype=np.int64)
    token_type_ids[:, n - 1] = 2
    write_safetensors(path, {"input_ids": input_ids.astype(np.int64), "token_type_ids": token_type_ids})


def padded_batch(path, vocab_size, n=14):
    """Three samples: left padding (as XLNet's tokenizer pads), right padding, none; two segments and <cls>'s type."""
    rng = np.random.default_rng(11)
    input_ids = rng.integers(0, vocab_size, (3, n))
    attention_mask = np.ones((3, n), dtype=np.int64)
    attention_mask[0, :4] = 0
    attention_mask[1, n - 3:] = 0
    token_type_ids = np.zeros((3, n), dtype=np.int64)
    token_type_ids[0, 9:] = 1
    token_type_ids[1, 6:] = 1
    token_type_ids[2, 5:] = 1
    token_type_ids[:, n - 1] = 2
    write_safetensors(path, {"input_ids": input_ids.astype(np.int64), "attention_mask": attention_mask,
                             "token_type_ids": token_type_ids})


class XLNetAgainstPublishedEquations(unittest.TestCase):
    def compare(self, folder, batch_args, layer_norm="keep"):
        out = tempfile.mkdtemp(prefix="rankscope-xlnetref-")
        dump = os.path.join(out, "acts.safetensors")
        run("model", "--model", folder, *batch_args, "--weights", "pretrained", "--variants", "transformer",
            "--draws", "2", "--layer-norm", layer_norm, "--out", out, "--dump", dump)
        acts = read_safetensors(dump)
        reference = XLNetReference(folder)
        remove = layer_norm == "remove"
        ids, types, mask = acts["input_ids"], acts["token_type_ids"], acts["attention_mask"]
        residual = read_csv(os.path.join(out, "residual.csv"))
        for b in range(ids.shape[0]):
            hidden = reference.embed(ids[b])
            np.testing.assert_allclose(acts["hook_embed"][b], hidden, rtol=0, atol=1e-6)
            for l in range(reference.config["n_layer"]):
                got_pattern = acts[f"blocks.{l}.attn.hook_pattern"][b]
                got_hidden = acts[f"blocks.{l}.hook_resid_post"][b]
                previous = acts["hook_embed"][b] if l == 0 else acts[f"blocks.{l - 1}.hook_resid_post"][b]
                # Layer by layer, from rankscope's own input to the layer.
                pattern, expected = reference.layer(l, previous.astype(np.float64), types[b], mask[b], remove)
                scale = np.abs(expected).max()
                self.assertLess(np.abs(got_hidden - expected).max() / scale, 1e-5, f"sample {b} layer {l} hidden")
                self.assertLess(np.abs(got_pattern - pattern).max(), 1e-5, f"sample {b} layer {l} pattern")
                # End to end, from the embeddings alone.
                pattern, hidden = reference.layer(l, hidden, types[b], mask[b], remove)
                self.assertLess(np.abs(got_hidden - hidden).max() / np.abs(hidden).max(), 1e-4, f"sample {b} layer {l} end to end")
                self.assertLess(np.abs(got_pattern - pattern).max(), 1e-4, f"sample {b} layer {l} pattern end to end")
        # residual.csv: the mean over samples of each sample's relative residual over its real tokens.
        for l in range(reference.config["n_layer"] + 1):
            name = "hook_embed" if l == 0 else f"blocks.{l - 1}.hook_resid_post"
            values = [relative_residual(acts[name][b][mask[b] == 1].astype(np.float64)) for b in range(ids.shape[0])]
            row = next(r for r in residual if int(r["layer"]) == l)
            self.assertAlmostEqual(float(row["mean"]), np.mean(values), delta=1e-5 * max(1.0, np.mean(values)))
            self.assertEqual(int(row["n"]), ids.shape[0])
        return acts

    def batch(self, make, vocab_size):
        folder = tempfile.mkdtemp(prefix="rankscope-xlnetref-batch-")
        make(os.path.join(folder, "batch.safetensors"), vocab_size)
        return ["--inputs", os.path.join(folder, "batch.safetensors")]

    @needs_fixture
    def test_fixture_on_packed_layout(self):
        acts = self.compare(FIXTURE, self.batch(packed_batch, 64))
        self.assertTrue((acts["attention_mask"] == 1).all())

    @needs_fixture
    def test_fixture_with_layer_norm_removed(self):
        self.compare(FIXTURE, self.batch(packed_batch, 64), layer_norm="remove")

    @needs_fixture
    def test_fixture_on_padded_two_segment_ids(self):
        acts = self.compare(FIXTURE, self.batch(padded_batch, 64))
        # Hugging Face's content stream masks a padding key except on the diagonal: a padded query sees the real
        # tokens and itself, never the other padding.
        for l in range(3):
            pattern = acts[f"blocks.{l}.attn.hook_pattern"][0]
            for query in range(4):  # sample 0's left padding
                others = [j for j in range(4) if j != query]
                self.assertEqual(np.abs(pattern[:, query, others]).max(), 0.0)
                self.assertGreater(pattern[:, query, query].min(), 0.0)
            self.assertEqual(np.abs(pattern[:, 4:, :4]).max(), 0.0)  # real queries never see padding

    def test_random_checkpoint_with_clamped_positions_and_tanh_gelu(self):
        with tempfile.TemporaryDirectory() as folder:
            random_xlnet(os.path.join(folder, "xlnet-random"))
            self.compare(os.path.join(folder, "xlnet-random"), self.batch(padded_batch, 50))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
