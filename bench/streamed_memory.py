"""Peak memory of a decoder read whole against the same decoder streamed layer by layer (issue 15), in one run.

    /usr/bin/python3 bench/streamed_memory.py [BUILD_DIR] [LAYERS] [HIDDEN]

Writes a Llama-layout checkpoint with random weights into a temporary folder: BF16 in four shards with
model.safetensors.index.json (default 16 layers, d = 2048, SwiGLU 5632, 16 query heads sharing 4 key/value heads,
vocabulary 32000, untied head: 0.85e9 parameters, 3.4 GB in float32, 1.7 GB on disk). Then runs
`rankscope model --weights pretrained --inputs ids --draws 10` (4 samples x 64 tokens, the four surgeries, E2) with
`--stream off` (the whole model converted to float32 in memory) and `--stream on` (one layer at a time), reports each
process's wall time and peak RSS (getrusage of the child), and checks that the two residual.csv and paths.csv hold the
same rows. The page cache is warm for both runs (the checkpoint was just written).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from common import Bf16, write_safetensors  # noqa: E402

# (Internal: `streamed_memory.py --write FOLDER LAYERS HIDDEN` writes the checkpoint in a child process, so that this
# process stays small: a child's ru_maxrss counts the memory of the process it was forked from.)
writing = len(sys.argv) > 1 and sys.argv[1] == "--write"
arguments = sys.argv[2:] if writing else sys.argv[1:]
build = "" if writing else arguments[0] if arguments else "build"
layers = int(arguments[-2]) if writing else int(arguments[1]) if len(arguments) > 1 else 16
hidden = int(arguments[-1]) if writing else int(arguments[2]) if len(arguments) > 2 else 2048
rankscope = os.path.join(build, "bin", "rankscope")
heads, kv_heads, vocabulary = 16, 4, 32000
intermediate = int(round(hidden * 2.75 / 256)) * 256  # 5632 at d = 2048
head_size = hidden // heads


def layer_shapes(l):
    p = f"model.layers.{l}."
    return {p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
            p + "self_attn.q_proj.weight": (hidden, hidden), p + "self_attn.k_proj.weight": (kv_heads * head_size, hidden),
            p + "self_attn.v_proj.weight": (kv_heads * head_size, hidden), p + "self_attn.o_proj.weight": (hidden, hidden),
            p + "mlp.gate_proj.weight": (intermediate, hidden), p + "mlp.up_proj.weight": (intermediate, hidden),
            p + "mlp.down_proj.weight": (hidden, intermediate)}


def write_checkpoint(folder):
    rng = np.random.default_rng(0)
    config = {"model_type": "llama", "vocab_size": vocabulary, "hidden_size": hidden, "intermediate_size": intermediate,
              "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
              "rms_norm_eps": 1e-5, "max_position_embeddings": 2048, "tie_word_embeddings": False}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    shapes = {"model.embed_tokens.weight": (vocabulary, hidden)}
    for l in range(layers):
        shapes.update(layer_shapes(l))
    shapes.update({"model.norm.weight": (hidden,), "lm_head.weight": (vocabulary, hidden)})
    names = list(shapes)
    shards, weight_map, total = 4, {}, 0
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {}
        for name in names[s * len(names) // shards:(s + 1) * len(names) // shards]:
            shape = shapes[name]
            values = np.ones(shape, np.float32) if name.endswith("norm.weight") else \
                rng.standard_normal(shape, dtype=np.float32) * 0.02
            part[name] = Bf16(values)
            weight_map[name] = file
            total += values.size
        write_safetensors(os.path.join(folder, file), part)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 2 * total}, "weight_map": weight_map}, f)
    one_layer = sum(int(np.prod(shape)) for shape in layer_shapes(0).values())
    return total, one_layer


def timed(command):
    """Wall seconds and peak RSS (MB) of one process (getrusage of the child)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()}")
    return seconds, usage.ru_maxrss / 1024


def rows(path):
    with open(path) as f:
        return [line for line in f if not line.startswith("#")]


def main():
    scratch = tempfile.mkdtemp(prefix="rankscope-stream-bench-")
    try:
        folder = os.path.join(scratch, "llama")
        os.makedirs(folder)
        started = time.perf_counter()
        written = subprocess.run([sys.executable, os.path.abspath(__file__), "--write", folder, str(layers), str(hidden)],
                                 check=True, capture_output=True, text=True)
        total, one_layer = json.loads(written.stdout)
        print(f"checkpoint: {layers} layers, d = {hidden}, {total / 1e9:.2f}e9 parameters ({4 * total / 1e9:.2f} GB in "
              f"float32, {2 * total / 1e9:.2f} GB BF16 on disk in 4 shards); one layer {4 * one_layer / 1e6:.0f} MB in "
              f"float32; written in {time.perf_counter() - started:.0f} s")
        ids = np.random.default_rng(1).integers(0, vocabulary, (4, 64)).astype(np.int64)
        write_safetensors(os.path.join(scratch, "ids.safetensors"), {"input_ids": ids})
        results = {}
        for mode in ("off", "on"):
            out = os.path.join(scratch, "out-" + mode)
            results[mode] = timed([rankscope, "model", "--model", folder, "--weights", "pretrained", "--inputs",
                                   os.path.join(scratch, "ids.safetensors"), "--draws", "10", "--stream", mode,
                                   "--out", out])
        same = all(rows(os.path.join(scratch, "out-off", name)) == rows(os.path.join(scratch, "out-on", name))
                   for name in ("residual.csv", "paths.csv", "sink_rate.csv"))
        print(f"{'--stream':<10} {'seconds':>8} {'peak RSS MB':>12}")
        for mode, (seconds, peak) in results.items():
            print(f"{mode:<10} {seconds:>8.1f} {peak:>12.0f}")
        print(f"streamed peak / whole peak = {results['on'][1] / results['off'][1]:.2f}; "
              f"tables identical: {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit("the streamed run's tables differ from the whole model's")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if writing:
    print(json.dumps(write_checkpoint(arguments[0])))
else:
    main()
