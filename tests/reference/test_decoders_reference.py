"""GPT-2, GPT-NeoX and the Llama family (Llama, Mistral, Qwen2) against a python3-torch reference written here from the
published equations (not the transformers package): tiny random checkpoints in the exact Hugging Face layouts
(bare and prefixed names, single-file and sharded, F32 / F16 / BF16, tied and untied heads, GQA, Qwen2's biases,
sliding windows), a batch with right and left padding, and every activation `rankscope model --dump` records
(hook_embed, blocks.{l}.hook_resid_pre / attn.hook_pattern / hook_attn_out / hook_resid_post,
ln_final.hook_normalized) compared to the reference in float64: max |rankscope − reference| / max |reference| at
most 1e-5 per tensor.

Equations (Radford et al. 2019; Black et al. 2022 GPT-NeoX-20B: rotary on a fraction of each head, parallel
attention and MLP; Touvron et al. 2023; Su et al. 2021 RoFormer; Zhang & Sennrich 2019 RMSNorm; Ainslie et al. 2023
GQA), with the conventions rankscope documents: positions count real tokens; padding keys are
masked; causal mask j <= i; sliding window i − j < w; the last layer's hook_resid_post is before the final norm."""
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import Bf16, read_safetensors, run, write_safetensors  # noqa: E402

RELATIVE = 1e-5
N = 8
# Sample 0 all real, sample 1 padded on the right (5 real), sample 2 padded on the left (6 real).
MASK = np.array([[1] * 8, [1] * 5 + [0] * 3, [0] * 2 + [1] * 6], dtype=np.int64)


# ---- the reference, in float64 ---------------------------------------------------------------------------------
def positions(mask):
    """Real tokens before each token (padding clamped at 0)."""
    return (mask.cumsum(1) - 1).clamp(min=0)


def allowed(mask, bidirectional, window):
    """[B, 1, n, n]: key j is real, and (causal) j <= i, (window) i − j < window."""
    B, n = mask.shape
    keys = mask.bool()[:, None, None, :]
    if bidirectional:
        return keys.expand(B, 1, n, n)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    ok = j <= i
    if window:
        ok = ok & (i - j < window)
    return keys & ok


def attention(q, k, v, heads, kv_heads, ok):
    """softmax(q kᵀ/√k + mask) v per head; query head h reads key/value head h // (heads / kv_heads)."""
    B, n, _ = q.shape
    size = q.shape[-1] // heads
    q = q.view(B, n, heads, size).transpose(1, 2)
    k = k.view(B, n, kv_heads, size).transpose(1, 2)
    v = v.view(B, n, kv_heads, size).transpose(1, 2)
    group = [h // (heads // kv_heads) for h in range(heads)]
    k, v = k[:, group], v[:, group]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(size)
    # A row with no allowed key (a left pad) has every score at the lowest value: uniform, as rankscope documents.
    scores = scores.masked_fill(~ok, torch.finfo(torch.float64).min)
    p = torch.softmax(scores, -1)
    return p, (p @ v).transpose(1, 2).reshape(B, n, heads * size)


def inverse_frequencies(c, size):
    """θ^(−2i/k), i < k/2, with rope_scaling: linear divides by the factor; llama3 (Meta's Llama 3.1 rule) divides
    the frequencies whose wavelength exceeds original / low_freq_factor, keeps those below original /
    high_freq_factor, and interpolates in between on (original / wavelength − low) / (high − low)."""
    theta = c.get("rope_theta", 10000.0)
    frequency = theta ** (-2.0 * torch.arange(size // 2, dtype=torch.float64) / size)
    scaling = c.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        return frequency / scaling["factor"]
    if kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        original = scaling["original_max_position_embeddings"]
        out = []
        for f in frequency.tolist():
            wavelength = 2 * math.pi / f
            if wavelength < original / high:
                out.append(f)
            elif wavelength > original / low:
                out.append(f / factor)
            else:
                smooth = (original / wavelength - low) / (high - low)
                out.append((1 - smooth) * f / factor + smooth * f)
        return torch.tensor(out, dtype=torch.float64)
    return frequency


def rotary(x, heads, pos, frequency):
    """RoFormer in the rotate-half pairing: features i and i + k/2 of each head turn by pos · frequency_i."""
    B, n, _ = x.shape
    size = x.shape[-1] // heads
    x = x.view(B, n, heads, size)
    half = size // 2
    angle = pos.double()[:, :, None, None] * frequency  # [B, n, 1, k/2]
    first, second = x[..., :half], x[..., half:]
    out = torch.cat([first * torch.cos(angle) - second * torch.sin(angle),
                     second * torch.cos(angle) + first * torch.sin(angle)], -1)
    return out.reshape(B, n, heads * size)


def real_mean(x, mask):
    """Mean over each sample's real tokens and all features, [B, 1, 1]."""
    rows = mask.double()[:, :, None]
    return (x * rows).sum((1, 2), keepdim=True) / (rows.sum((1, 2), keepdim=True) * x.shape[-1])


def layer_norm(x, weight, bias, eps, mode, mask):
    if mode == "remove":
        return x
    if mode == "freeze":
        mean = real_mean(x, mask)
        var = real_mean((x - mean) ** 2, mask)
    else:
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def rms_norm(x, weight, eps, mode, mask):
    if mode == "remove":
        return x
    mean_square = real_mean(x ** 2, mask) if mode == "freeze" else (x ** 2).mean(-1, keepdim=True)
    return x / torch.sqrt(mean_square + eps) * weight


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_reference(w, c, ids, mask, bidirectional=False, norm="keep"):
    d, H, eps = c["n_embd"], c["n_head"], c.get("layer_norm_epsilon", 1e-5)
    ln = lambda x, name: layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps, norm, mask)  # noqa: E731
    conv = lambda x, name: x @ w[name + ".weight"] + w[name + ".bias"]  # noqa: E731  Conv1D: weight [in, out]
    x = w["wte.weight"][ids] + w["wpe.weight"][positions(mask)]
    out = {"hook_embed": x}
    ok = allowed(mask, bidirectional, 0)
    for l in range(c["n_layer"]):
        p = f"h.{l}."
        out[f"blocks.{l}.hook_resid_pre"] = x
        q, k, v = conv(ln(x, p + "ln_1"), p + "attn.c_attn").split(d, -1)
        pattern, context = attention(q, k, v, H, H, ok)
        a = conv(context, p + "attn.c_proj")
        h = x + a
        x = h + conv(gelu_new(conv(ln(h, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
        out[f"blocks.{l}.attn.hook_pattern"], out[f"blocks.{l}.hook_attn_out"] = pattern, a
        out[f"blocks.{l}.hook_resid_post"] = x
    out["ln_final.hook_normalized"] = ln(x, "ln_f")
    return out


def llama_reference(w, c, ids, mask, bidirectional=False, norm="keep"):
    """Llama / Mistral / Qwen2 (model_type in c); biases present in `w` are added."""
    H = c["num_attention_heads"]
    G = c.get("num_key_value_heads", H)
    eps = c.get("rms_norm_eps", 1e-6)
    frequency = inverse_frequencies(c, c.get("head_dim") or c["hidden_size"] // H)
    window, from_layer = 0, 0
    if c["model_type"] == "mistral":
        window = c.get("sliding_window") or 0
    if c["model_type"] == "qwen2" and c.get("use_sliding_window"):
        window, from_layer = c.get("sliding_window") or 0, c.get("max_window_layers", 28)

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    rms = lambda x, name: rms_norm(x, w[name + ".weight"], eps, norm, mask)  # noqa: E731
    pos = positions(mask)
    x = w["embed_tokens.weight"][ids]
    out = {"hook_embed": x}
    for l in range(c["num_hidden_layers"]):
        p = f"layers.{l}."
        out[f"blocks.{l}.hook_resid_pre"] = x
        m = rms(x, p + "input_layernorm")
        q = rotary(linear(m, p + "self_attn.q_proj"), H, pos, frequency)
        k = rotary(linear(m, p + "self_attn.k_proj"), G, pos, frequency)
        v = linear(m, p + "self_attn.v_proj")
        ok = allowed(mask, bidirectional, window if l >= from_layer else 0)
        pattern, context = attention(q, k, v, H, G, ok)
        a = linear(context, p + "self_attn.o_proj")
        h = x + a
        u = rms(h, p + "post_attention_layernorm")
        gate = linear(u, p + "mlp.gate_proj")
        x = h + linear(gate * torch.sigmoid(gate) * linear(u, p + "mlp.up_proj"), p + "mlp.down_proj")
        out[f"blocks.{l}.attn.hook_pattern"], out[f"blocks.{l}.hook_attn_out"] = pattern, a
        out[f"blocks.{l}.hook_resid_post"] = x
    out["ln_final.hook_normalized"] = rms(x, "norm")
    return out


def gpt_neox_reference(w, c, ids, mask, bidirectional=False, norm="keep"):
    """GPT-NeoX: query_key_value's outputs are [H, 3, k] (head by head); rotary turns the first int(k · rotary_pct)
    features of each head; parallel: x + attn(LN_1 x) + mlp(LN_2 x), else GPT-2's order."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    size = d // H
    turned = int(size * c.get("rotary_pct", 0.25))
    eps = c.get("layer_norm_eps", 1e-5)
    frequency = inverse_frequencies({"rope_theta": c.get("rotary_emb_base", 10000.0),
                                     "rope_scaling": c.get("rope_scaling")}, turned)
    act = {"gelu": lambda x: torch.nn.functional.gelu(x), "gelu_fast": gelu_new}[c.get("hidden_act", "gelu")]
    ln = lambda x, name: layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps, norm, mask)  # noqa: E731

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def partial_rotary(x, pos):
        B, n, _ = x.shape
        heads = x.view(B, n, H, size)
        if turned == 0:
            return x
        first = rotary(heads[..., :turned].reshape(B, n, H * turned), H, pos, frequency).view(B, n, H, turned)
        return torch.cat([first, heads[..., turned:]], -1).reshape(B, n, d)

    pos = positions(mask)
    ok = allowed(mask, bidirectional, 0)
    x = w["embed_in.weight"][ids]
    out = {"hook_embed": x}
    B, n = ids.shape
    for l in range(c["num_hidden_layers"]):
        p = f"layers.{l}."
        out[f"blocks.{l}.hook_resid_pre"] = x
        qkv = linear(ln(x, p + "input_layernorm"), p + "attention.query_key_value").view(B, n, H, 3, size)
        q, k, v = (qkv[:, :, :, i].reshape(B, n, d) for i in range(3))
        pattern, context = attention(partial_rotary(q, pos), partial_rotary(k, pos), v, H, H, ok)
        a = linear(context, p + "attention.dense")
        mlp = lambda u: linear(act(linear(ln(u, p + "post_attention_layernorm"), p + "mlp.dense_h_to_4h")),  # noqa: E731
                               p + "mlp.dense_4h_to_h")
        if c.get("use_parallel_residual", True):
            x = x + a + mlp(x)
        else:
            h = x + a
            x = h + mlp(h)
        out[f"blocks.{l}.attn.hook_pattern"], out[f"blocks.{l}.hook_attn_out"] = pattern, a
        out[f"blocks.{l}.hook_resid_post"] = x
    out["ln_final.hook_normalized"] = ln(x, "final_layer_norm")
    return out


# ---- checkpoints in the Hugging Face layouts ----------------------------------------------------------------------
def gpt2_weights(c, rng):
    d, m, V, P = c["n_embd"], c["n_inner"] or 4 * c["n_embd"], c["vocab_size"], c["n_positions"]
    r = lambda *shape, s=0.3: rng.normal(0, s, shape).astype(np.float32)  # noqa: E731
    w = {"wte.weight": r(V, d, s=1.0), "wpe.weight": r(P, d, s=1.0), "ln_f.weight": 1 + r(d), "ln_f.bias": r(d)}
    for l in range(c["n_layer"]):
        p = f"h.{l}."
        w.update({p + "ln_1.weight": 1 + r(d), p + "ln_1.bias": r(d), p + "ln_2.weight": 1 + r(d), p + "ln_2.bias": r(d),
                  p + "attn.c_attn.weight": r(d, 3 * d), p + "attn.c_attn.bias": r(3 * d),
                  p + "attn.c_proj.weight": r(d, d), p + "attn.c_proj.bias": r(d),
                  p + "mlp.c_fc.weight": r(d, m), p + "mlp.c_fc.bias": r(m),
                  p + "mlp.c_proj.weight": r(m, d), p + "mlp.c_proj.bias": r(d)})
    return w


def llama_weights(c, rng, qkv_bias=False, o_bias=False, mlp_bias=False):
    d, m, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    H = c["num_attention_heads"]
    G = c.get("num_key_value_heads", H)
    k = c.get("head_dim") or d // H
    r = lambda *shape, s=0.3: rng.normal(0, s, shape).astype(np.float32)  # noqa: E731
    w = {"embed_tokens.weight": r(V, d, s=1.0), "norm.weight": 1 + r(d)}
    for l in range(c["num_hidden_layers"]):
        p = f"layers.{l}."
        w.update({p + "input_layernorm.weight": 1 + r(d), p + "post_attention_layernorm.weight": 1 + r(d),
                  p + "self_attn.q_proj.weight": r(H * k, d), p + "self_attn.k_proj.weight": r(G * k, d),
                  p + "self_attn.v_proj.weight": r(G * k, d), p + "self_attn.o_proj.weight": r(d, H * k),
                  p + "mlp.gate_proj.weight": r(m, d), p + "mlp.up_proj.weight": r(m, d),
                  p + "mlp.down_proj.weight": r(d, m)})
        if qkv_bias:
            w.update({p + "self_attn.q_proj.bias": r(H * k), p + "self_attn.k_proj.bias": r(G * k),
                      p + "self_attn.v_proj.bias": r(G * k)})
        if o_bias:
            w[p + "self_attn.o_proj.bias"] = r(d)
        if mlp_bias:
            w.update({p + "mlp.gate_proj.bias": r(m), p + "mlp.up_proj.bias": r(m), p + "mlp.down_proj.bias": r(d)})
    return w


def gpt_neox_weights(c, rng):
    d, m, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    bias = c.get("attention_bias", True)
    r = lambda *shape, s=0.3: rng.normal(0, s, shape).astype(np.float32)  # noqa: E731
    w = {"embed_in.weight": r(V, d, s=1.0), "final_layer_norm.weight": 1 + r(d), "final_layer_norm.bias": r(d)}
    for l in range(c["num_hidden_layers"]):
        p = f"layers.{l}."
        w.update({p + "input_layernorm.weight": 1 + r(d), p + "input_layernorm.bias": r(d),
                  p + "post_attention_layernorm.weight": 1 + r(d), p + "post_attention_layernorm.bias": r(d),
                  p + "attention.query_key_value.weight": r(3 * d, d), p + "attention.dense.weight": r(d, d),
                  p + "mlp.dense_h_to_4h.weight": r(m, d), p + "mlp.dense_h_to_4h.bias": r(m),
                  p + "mlp.dense_4h_to_h.weight": r(d, m), p + "mlp.dense_4h_to_h.bias": r(d)})
        if bias:
            w.update({p + "attention.query_key_value.bias": r(3 * d), p + "attention.dense.bias": r(d)})
    return w


def save(folder, config, weights, prefix="", extra=None, dtype="F32", shards=1):
    """config.json + model.safetensors (shards == 1) or model.safetensors.index.json + shards, names prefixed.
    Returns the weights as stored (after F16/BF16 rounding), bare names, float64 torch tensors."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    stored, reference = {}, {}
    for name, array in weights.items():
        if dtype == "BF16":
            value = Bf16(array)
            stored[prefix + name], reference[name] = value, value.values
        elif dtype == "F16":
            stored[prefix + name] = array.astype(np.float16)
            reference[name] = stored[prefix + name].astype(np.float32)
        else:
            stored[prefix + name], reference[name] = array, array
    stored.update(extra or {})
    names = list(stored)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), stored)
    else:
        weight_map = {}
        for s in range(shards):
            shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {name: stored[name] for name in names[s::shards]}
            write_safetensors(os.path.join(folder, shard), part)
            weight_map.update({name: shard for name in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    return {name: torch.from_numpy(np.array(value, dtype=np.float64)) for name, value in reference.items()}


class DecodersAgainstEquations(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="rankscope-decoders-")
        self.rng = np.random.default_rng(15)

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def ids(self, vocabulary):
        ids = self.rng.integers(0, vocabulary, MASK.shape).astype(np.int64)
        return ids * MASK  # padding ids 0

    def dump(self, model, ids, mask, *extra):
        inputs = os.path.join(self.folder, "inputs.safetensors")
        write_safetensors(inputs, {"input_ids": ids, "attention_mask": mask})
        path = os.path.join(self.folder, "dump.safetensors")
        run("model", "--model", model, "--inputs", inputs, "--weights", "pretrained", "--variants", "transformer",
            "--draws", "0", "--dump", path, "--out", os.path.join(self.folder, "out"), *extra)
        return read_safetensors(path)

    def compare(self, got, expected, layers):
        names = ["hook_embed", "ln_final.hook_normalized"] + [
            f"blocks.{l}.{hook}" for l in range(layers)
            for hook in ("hook_resid_pre", "attn.hook_pattern", "hook_attn_out", "hook_resid_post")]
        for name in names:
            self.assertIn(name, got, f"rankscope did not record {name}")
            g, e = got[name].astype(np.float64), expected[name].numpy()
            self.assertEqual(g.shape, e.shape, name)
            error = np.abs(g - e).max() / np.abs(e).max()
            if error > RELATIVE:
                where = np.unravel_index(np.abs(g - e).argmax(), g.shape)
                self.fail(f"{name}: max relative difference {error:.3g} > {RELATIVE} at {where}: "
                          f"rankscope {g[where]!r}, reference {e[where]!r}")

    def check(self, folder, reference, weights, config, layers, *extra, bidirectional=False, norm="keep"):
        ids = self.ids(config["vocab_size"])
        got = self.dump(folder, ids, MASK, *extra)
        expected = reference(weights, config, torch.from_numpy(ids), torch.from_numpy(MASK), bidirectional, norm)
        self.compare(got, expected, layers)
        return got, ids

    def test_gpt2_bare_names_f32_tied_with_legacy_buffers(self):
        c = {"model_type": "gpt2", "vocab_size": 50, "n_embd": 16, "n_layer": 2, "n_head": 4, "n_positions": 16,
             "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
        folder = os.path.join(self.folder, "gpt2")
        legacy = {f"h.{l}.attn.bias": np.tril(np.ones((16, 16), np.float32))[None, None] for l in range(2)}
        w = save(folder, c, gpt2_weights(c, self.rng), extra=legacy)
        got, ids = self.check(folder, gpt2_reference, w, c, 2)
        # The causal pattern is lower-triangular on the real tokens.
        pattern = got["blocks.1.attn.hook_pattern"][0]
        self.assertEqual(np.abs(np.triu(pattern, 1)).max(), 0.0)
        # Left padding leaves the real tokens' states unchanged: sample 2 run alone, unpadded.
        alone = self.dump(folder, ids[2:3, 2:], MASK[2:3, 2:])
        self.assertLess(np.abs(alone["blocks.1.hook_resid_post"][0] - got["blocks.1.hook_resid_post"][2, 2:]).max(), 1e-5)

    def test_gpt2_prefixed_f16_untied_bidirectional_frozen_norm(self):
        c = {"model_type": "gpt2", "vocab_size": 40, "n_embd": 12, "n_layer": 2, "n_head": 3, "n_positions": 8,
             "n_inner": 20, "tie_word_embeddings": False}
        folder = os.path.join(self.folder, "gpt2-prefixed")
        lm_head = {"lm_head.weight": self.rng.normal(0, 0.3, (40, 12)).astype(np.float16)}
        w = save(folder, c, gpt2_weights(c, self.rng), prefix="transformer.", extra=lm_head, dtype="F16")
        self.check(folder, gpt2_reference, w, c, 2, "--mask", "bidirectional", "--layer-norm", "freeze",
                   bidirectional=True, norm="freeze")
        # Streamed (each layer read from the checkpoint when reached): the same equations.
        self.check(folder, gpt2_reference, w, c, 2, "--stream", "on")

    def llama_config(self, **changes):
        c = {"model_type": "llama", "vocab_size": 60, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6, "rms_norm_eps": 1e-6,
             "rope_theta": 500.0, "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False}
        c.update(changes)
        return c

    def test_llama_gqa_sharded_bf16_untied_with_biases_and_head_dim(self):
        c = self.llama_config()
        folder = os.path.join(self.folder, "llama")
        lm_head = {"lm_head.weight": Bf16(self.rng.normal(0, 0.3, (60, 16)))}
        w = save(folder, c, llama_weights(c, self.rng, True, True, True), prefix="model.", extra=lm_head, dtype="BF16",
                 shards=3)
        got, _ = self.check(folder, llama_reference, w, c, 2)
        self.assertEqual(got["blocks.0.attn.hook_pattern"].shape, (3, 4, N, N))  # H = query heads
        # The same weights without the causal mask, and with RMSNorm removed.
        self.check(folder, llama_reference, w, c, 2, "--mask", "bidirectional", bidirectional=True)
        self.check(folder, llama_reference, w, c, 2, "--layer-norm", "remove", norm="remove")
        # Streamed from the three BF16 shards, causal and bidirectional.
        self.check(folder, llama_reference, w, c, 2, "--stream", "on")
        self.check(folder, llama_reference, w, c, 2, "--stream", "on", "--mask", "bidirectional", bidirectional=True)

    def test_llama_rms_freeze_tied_bare(self):
        c = self.llama_config(num_key_value_heads=1, head_dim=None, attention_bias=False, mlp_bias=False,
                              tie_word_embeddings=True)
        del c["head_dim"]
        folder = os.path.join(self.folder, "llama-tied")
        w = save(folder, c, llama_weights(c, self.rng))
        self.check(folder, llama_reference, w, c, 2, "--layer-norm", "freeze", norm="freeze")

    def test_llama3_rope_scaling(self):
        # head_dim 16: wavelengths 2π·10000^(i/8) = 6.3, 20, 63, 199, ... fall below, between and above the
        # thresholds original/high = 16 and original/low = 64.
        c = self.llama_config(hidden_size=32, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                              rope_theta=10000.0, attention_bias=False, mlp_bias=False,
                              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
        folder = os.path.join(self.folder, "llama3")
        w = save(folder, c, llama_weights(c, self.rng), prefix="model.", dtype="BF16")
        self.check(folder, llama_reference, w, c, 2)
        c["rope_scaling"] = {"type": "linear", "factor": 4.0}
        w = save(folder, c, llama_weights(c, self.rng), prefix="model.")
        self.check(folder, llama_reference, w, c, 2)

    def test_qwen2_biases_and_sliding_window_from_max_window_layers(self):
        c = {"model_type": "qwen2", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 20, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True,
             "use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1, "rope_theta": 1000000.0}
        folder = os.path.join(self.folder, "qwen2")
        w = save(folder, c, llama_weights(c, self.rng, qkv_bias=True), prefix="model.")
        got, _ = self.check(folder, llama_reference, w, c, 2)
        # Layer 0 is fully causal, layer 1 sees 3 keys at most (sample 0: all real).
        self.assertGreater(got["blocks.0.attn.hook_pattern"][0, :, 7, 0].min(), 0.0)
        self.assertEqual(got["blocks.1.attn.hook_pattern"][0, :, 7, :5].max(), 0.0)
        self.check(folder, llama_reference, w, c, 2, "--stream", "on")

    def test_mistral_sliding_window_f16(self):
        c = {"model_type": "mistral", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 20,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "sliding_window": 4}
        folder = os.path.join(self.folder, "mistral")
        w = save(folder, c, llama_weights(c, self.rng), prefix="model.", dtype="F16")
        self.check(folder, llama_reference, w, c, 2)


    def test_gpt_neox_parallel_prefixed_with_legacy_buffers_streamed(self):
        # Pythia's layout: gpt_neox. prefix, the LM head embed_out, the buffers older transformers saved; head size 8,
        # rotary_pct 0.25: 2 features turned per head.
        c = {"model_type": "gpt_neox", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24,
             "num_hidden_layers": 2, "num_attention_heads": 2, "rotary_pct": 0.25, "rotary_emb_base": 10000,
             "max_position_embeddings": 16, "use_parallel_residual": True}
        folder = os.path.join(self.folder, "gpt-neox")
        extra = {"embed_out.weight": self.rng.normal(0, 0.3, (50, 16)).astype(np.float32)}
        for l in range(2):
            extra[f"gpt_neox.layers.{l}.attention.bias"] = np.tril(np.ones((16, 16), np.float32))[None, None]
            extra[f"gpt_neox.layers.{l}.attention.masked_bias"] = np.array(-1e9, np.float32)
            extra[f"gpt_neox.layers.{l}.attention.rotary_emb.inv_freq"] = np.ones(1, np.float32)
        w = save(folder, c, gpt_neox_weights(c, self.rng), prefix="gpt_neox.", extra=extra)
        self.check(folder, gpt_neox_reference, w, c, 2)
        self.check(folder, gpt_neox_reference, w, c, 2, "--stream", "on")
        self.check(folder, gpt_neox_reference, w, c, 2, "--mask", "bidirectional", "--layer-norm", "freeze",
                   bidirectional=True, norm="freeze")

    def test_gpt_neox_sequential_whole_head_linear_scaling_bf16_sharded(self):
        c = {"model_type": "gpt_neox", "vocab_size": 50, "hidden_size": 24, "intermediate_size": 20,
             "num_hidden_layers": 2, "num_attention_heads": 3, "rotary_pct": 1.0, "rotary_emb_base": 500,
             "use_parallel_residual": False, "attention_bias": False, "hidden_act": "gelu_fast",
             "rope_scaling": {"type": "linear", "factor": 3.0}}
        folder = os.path.join(self.folder, "gpt-neox-sequential")
        w = save(folder, c, gpt_neox_weights(c, self.rng), dtype="BF16", shards=2)
        self.check(folder, gpt_neox_reference, w, c, 2)
        self.check(folder, gpt_neox_reference, w, c, 2, "--stream", "on", "--layer-norm", "remove", norm="remove")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
