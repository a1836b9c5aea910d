"""`rankscope theory` and `rankscope paths` end to end: files, columns, figures, reproducibility, errors."""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, read_csv, run  # noqa: E402
from figure_layout import figure_layout, layout_problems, svg_page  # noqa: E402


def read_csv_text(text):
    """The rows of a CSV printed on stdout (after its `# ` provenance lines), as dicts of strings."""
    import csv
    return list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))


class TheoryAndPaths(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="rankscope-theory-")

    def test_theory_outputs(self):
        out = os.path.join(self.directory, "theory")
        result = run("theory", "--layers", "5", "--seeds", "2", "--tokens", "12", "--d-model", "16", "--out", out)
        self.assertIn("bound violations: 0", result.stdout)
        rows = read_csv(os.path.join(out, "theory.csv"))
        self.assertEqual(len(rows), 12 * 2 * 6)  # variants x seeds x (layers + 1)
        for column in ["variant", "heads", "seed", "layer", "residual", "relative_residual", "gamma", "beta", "lambda",
                       "c", "bound_step", "bound_cumulative", "bound_theorem", "at_round_off"]:
            self.assertIn(column, rows[0])
        variants = {row["variant"] for row in rows}
        for name in ["SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP", "SAN+LN", "SAN+affine-LN", "SAN/H=4"]:
            self.assertIn(name, variants)
        # The bound's columns are empty where no bound exists (skips, plain LN, the input), numbers where one does.
        bound_columns = ["gamma", "beta", "lambda", "c", "bound_step", "bound_cumulative", "bound_theorem"]
        for row in rows:
            has_bound = row["variant"].split("/")[0] in ("SAN", "SAN+MLP", "SAN+affine-LN") and row["layer"] != "0"
            for column in bound_columns:
                self.assertEqual(row[column] != "", has_bound, (row["variant"], row["layer"], column))
                if has_bound:
                    float(row[column])  # a number (nan only where the computed bound is undefined)
        # The summary: one row per variant and layer, with each variant's head count as theory.csv has it.
        heads = {row["variant"]: row["heads"] for row in rows}
        summary = read_csv(os.path.join(out, "theory_summary.csv"))
        self.assertEqual(list(summary[0])[:3], ["variant", "heads", "layer"])
        self.assertEqual(len(summary), 12 * 6)
        for row in summary:
            self.assertEqual(row["heads"], heads[row["variant"]], row["variant"])
        self.assertEqual(heads["SAN/H=4"], "4")
        with open(os.path.join(out, "theory.json")) as f:
            document = json.load(f)
        self.assertIn("gamma", document["bound_definition"])
        self.assertEqual(document["bound_violations"], 0)
        self.assertIn("--layers", document["provenance"]["command"])
        self.assert_step_exponents_follow_their_definition(rows, document["variants"])
        for figure in ["theory.svg", "theory_bounds.svg"]:
            root = ElementTree.parse(os.path.join(out, figure)).getroot()
            self.assertTrue(root.tag.endswith("svg"))
            self.assertGreater(len(list(root.iter())), 100)
            self.assertTrue(os.path.exists(os.path.join(out, figure.replace(".svg", ".gp"))))
            self.assertGreater(os.path.getsize(os.path.join(out, figure.replace(".svg", ".png"))), 10000)
            # The figure says which run drew it: the SVG's <desc>, the PNG's "Comment" text (a real PNG reader's view).
            description = root.find("{http://www.w3.org/2000/svg}desc").text
            self.assertIn(document["provenance"]["command"], description)
            with Image.open(os.path.join(out, figure.replace(".svg", ".png"))) as image:
                image.load()
                self.assertIn("command: " + document["provenance"]["command"], image.text["Comment"])
                self.assertIn("seed: 0", image.text["Comment"])
            # ...and the PDF's document information, as poppler reads it.
            information = subprocess.run(["pdfinfo", "-enc", "UTF-8", os.path.join(out, figure.replace(".svg", ".pdf"))],
                                         check=True, capture_output=True, text=True).stdout
            self.assertIn("command: " + document["provenance"]["command"], information)
            self.assertRegex(information, r"Creator: +rankscope ")
        # Same seed, same numbers, whatever the thread count.
        again = os.path.join(self.directory, "again")
        run("theory", "--layers", "5", "--seeds", "2", "--tokens", "12", "--d-model", "16", "--out", again,
            "--threads", "1")
        self.assertEqual(read_csv(os.path.join(again, "theory.csv")), rows)
        # A deeper run with the same seed extends this one: its first layers are these (the input is drawn before the
        # blocks, which are drawn in order), and every variant of one width starts from the same input.
        deeper = os.path.join(self.directory, "deeper")
        run("theory", "--layers", "8", "--seeds", "2", "--tokens", "12", "--d-model", "16", "--out", deeper)
        self.assertEqual([row for row in read_csv(os.path.join(deeper, "theory.csv")) if int(row["layer"]) <= 5],
                         rows)
        for seed in ("0", "1"):
            first = {row["relative_residual"] for row in rows if row["layer"] == "0" and row["seed"] == seed}
            self.assertEqual(len(first), 1, first)

    def assert_step_exponents_follow_their_definition(self, rows, variants):
        """theory.json's step exponent, recomputed from theory.csv: per seed, the least-squares slope of log r_l on
        log r_(l-1) over the steps whose residual r falls, neither layer at round-off (3 or more steps);
        median, min and max over the seeds fitted; the largest root mean square misfit of a seed's line."""
        fitted_somewhere = False
        for variant in variants:
            exponents, misfits, counts = [], [], []
            seeds = sorted({row["seed"] for row in rows if row["variant"] == variant["variant"]})
            for seed in seeds:
                layers = sorted((row for row in rows if row["variant"] == variant["variant"] and row["seed"] == seed),
                                key=lambda row: int(row["layer"]))
                steps = [(math.log(float(before["residual"])), math.log(float(after["residual"])))
                         for before, after in zip(layers, layers[1:])
                         if before["at_round_off"] == "0" and after["at_round_off"] == "0"
                         and float(after["residual"]) < float(before["residual"])]
                if len(steps) >= 3:
                    line = statistics.linear_regression(*zip(*steps))
                    exponents.append(line.slope)
                    counts.append(len(steps))
                    misfits.append(math.sqrt(statistics.fmean(
                        (y - line.slope * x - line.intercept) ** 2 for x, y in steps)))
            self.assertEqual(variant["exponent_seeds_fitted"], len(exponents), variant)
            self.assertEqual((variant["exponent_steps_min"], variant["exponent_steps_max"]),
                             (min(counts), max(counts)) if counts else (0, 0), variant)
            if not exponents:
                self.assertIsNone(variant["fitted_exponent"], variant)
                self.assertIsNone(variant["fitted_exponent_rms_max"], variant)
                continue
            # The misfit in ln r: root mean square per seed, the largest over seeds (absolute tolerance: an exact
            # power law's is round-off).
            self.assertAlmostEqual(variant["fitted_exponent_rms_max"], max(misfits), delta=1e-9, msg=variant)
            fitted_somewhere = True
            for key, expected in (("fitted_exponent", statistics.median(exponents)),
                                  ("fitted_exponent_min", min(exponents)), ("fitted_exponent_max", max(exponents))):
                self.assertAlmostEqual(variant[key], expected, delta=1e-9 * abs(expected), msg=(variant, key))
        self.assertTrue(fitted_somewhere)

    def test_theory_on_a_given_input(self):
        import numpy as np
        x = np.random.default_rng(3).normal(size=(10, 8))
        path = os.path.join(self.directory, "x.npy")
        np.save(path, x)
        out = os.path.join(self.directory, "given")
        run("theory", "--layers", "3", "--seeds", "2", "--heads", "2", "--input", path, "--out", out)
        rows = read_csv(os.path.join(out, "theory.csv"))
        layer0 = [r for r in rows if r["layer"] == "0"]
        # Every variant and seed starts from the same X: the same layer-0 residual everywhere.
        self.assertEqual(len({r["relative_residual"] for r in layer0}), 1)
        unit = x - x.mean(0)
        composite = lambda m: np.sqrt(np.abs(m).sum(0).max() * np.abs(m).sum(1).max())
        self.assertAlmostEqual(float(layer0[0]["relative_residual"]), composite(unit) / composite(x), places=12)
        # The file sets n and d: flags that agree are fine, one that disagrees is named (it was silently overridden).
        run("theory", "--layers", "2", "--seeds", "1", "--input", path, "--tokens", "10", "--d-model", "8", "--out",
            os.path.join(self.directory, "agreeing"))
        for flag, value, words in (("--d-model", "4", "--d-model 4 disagrees with the input's 8 columns"),
                                   ("--tokens", "3", "--tokens 3 disagrees with the input's 10 rows")):
            result = run("theory", "--input", path, flag, value, "--out", os.path.join(self.directory, "never"),
                         check=False)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(words, result.stderr)
            self.assertIn("x.npy", result.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.directory, "never")))
        # An input already rank 1 tests none of the claims: every verdict is not comparable, and says why ("keeps its
        # rank" read "not reproduced", "does not stop the collapse" "reproduced"; the screen said "0 violations" of 0).
        rank1 = os.path.join(self.directory, "rank1.npy")
        np.save(rank1, np.outer(np.ones(10), np.random.default_rng(4).normal(size=8)))
        collapsed = os.path.join(self.directory, "collapsed")
        shown = run("theory", "--layers", "4", "--seeds", "2", "--input", rank1, "--out", collapsed).stdout
        self.assertIn("bound violations: 0 of 0 rows", shown)
        verdicts = read_csv(os.path.join(collapsed, "verdicts.csv"))
        self.assertGreater(len(verdicts), 4)
        self.assertEqual({v["verdict"] for v in verdicts}, {"not comparable at these settings"})
        for v in verdicts:
            if v["basis"] == "measurement":
                self.assertIn("not judged: the input is already rank 1", v["criterion"])
        with open(os.path.join(collapsed, "findings.json")) as f:
            self.assertTrue(any("already rank 1" in note for note in json.load(f)["notes"]))
        nan = x.copy()
        nan[2, 3] = np.nan
        np.save(path, nan)
        result = run("theory", "--input", path, "--out", out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("x.npy", result.stderr)

    def test_paths_check_count_sample(self):
        result = json.loads(run("paths", "check", "--layers", "3", "--heads", "2", "--skip", "--biases",
                                "--d-model", "8", "--tokens", "5", "--format", "json").stdout)
        self.assertEqual(result["paths"], 27)
        # The network's sizes are in the record (it had layers and heads only).
        self.assertEqual({key: result[key] for key in ("d_model", "tokens", "batch", "dtype")},
                         {"d_model": 8, "tokens": 5, "batch": 2, "dtype": "float64"})
        self.assertIsInstance(result["paths"], int)
        check_out = os.path.join(self.directory, "check")
        run("paths", "check", "--layers", "2", "--heads", "2", "--out", check_out)
        with open(os.path.join(check_out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["outputs"], ["paths_check.json"])
        refused = run("paths", "check", "--layers", "12", "--heads", "16", "--d-model", "16", "--skip", check=False)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("5.826e+14 paths ((H + 1)^L with skips, else H^L) are more than the 1000000 that are enumerated",
                      refused.stderr)
        self.assertLess(result["max_abs_error"], 1e-12 * max(1.0, result["max_abs_output"]))
        table = json.loads(run("paths", "count", "--format", "json").stdout)
        by_name = {entry["architecture"]: entry for entry in table}
        self.assertAlmostEqual(by_name["BERT-base"]["mean_length"], 12 * 12 / 13, places=9)
        # ...with the distribution the CSV has: exact integer counts, shares summing to 1.
        bert_large = by_name["BERT-large"]["lengths"]
        for row in bert_large:
            exact = math.comb(24, row["length"]) * 16 ** row["length"]
            if exact < 2 ** 53:
                self.assertEqual(row["count"], exact)
                self.assertIsInstance(row["count"], int)
            else:
                self.assertLess(abs(row["count"] - exact) / exact, 1e-12)
        self.assertAlmostEqual(sum(row["share"] for row in bert_large), 1.0, places=12)
        self.assertEqual(len(by_name), 9)
        # Every built-in count against Python's exact integers: equal as integers below 2^53 (exp of lgamma printed
        # BERT-large's k = 7 as 92906585063423, one less than C(24, 7)·16^7), within float64 rounding above.
        all_counts = read_csv_text(run("paths", "count", "--format", "csv").stdout)
        self.assertGreater(len(all_counts), 100)
        for row in all_counts:
            layers, heads, k = int(row["layers"]), int(row["heads"]), int(row["length"])
            exact = math.comb(layers, k) * heads ** k
            if exact < 2 ** 53:
                self.assertEqual(row["count"], str(exact), row)
            else:
                self.assertLess(abs(float(row["count"]) - exact) / exact, 1e-12, row)
        out = os.path.join(self.directory, "counts")
        run("paths", "count", "--layers", "3", "--heads", "2", "--alpha", "0.5,0.5,0.5", "--out", out)
        rows = read_csv(os.path.join(out, "path_counts.csv"))
        self.assertEqual([float(r["count"]) for r in rows], [1, 6, 12, 8])
        # alpha = 0.5 everywhere: Binomial(3, 0.5)
        self.assertEqual([float(r["alpha_share"]) for r in rows], [0.125, 0.375, 0.375, 0.125])
        # The manifest lists what the folder holds (it left out the figures, and the built-in table's findings).
        e6 = os.path.join(self.directory, "e6")
        self.assertIn("wrote ", run("paths", "count", "--out", e6).stdout)
        self.assertIn("paths_check.json, manifest.json",
                      run("paths", "check", "--out", os.path.join(self.directory, "check")).stdout)
        with open(os.path.join(e6, "manifest.json")) as f:
            manifest = json.load(f)
        for name in manifest["outputs"] + manifest["figures"]:
            self.assertTrue(os.path.exists(os.path.join(e6, name)), name)
        self.assertEqual(set(manifest["outputs"]) | set(manifest["figures"]) | {"manifest.json"},
                         {n for n in os.listdir(e6) if not n.endswith(".gp")})
        # One architecture into the same folder: the built-in table's verdicts go with it (they stood beside the new
        # counts, read as theirs).
        run("paths", "count", "--layers", "2", "--heads", "2", "--out", e6)
        self.assertFalse(os.path.exists(os.path.join(e6, "findings.json")))
        self.assertFalse(os.path.exists(os.path.join(e6, "verdicts.csv")))
        sample_out = os.path.join(self.directory, "sample")
        run("paths", "sample", "--layers", "4", "--heads", "2", "--draws", "10", "--out", sample_out)
        rows = read_csv(os.path.join(sample_out, "paths.csv"))
        self.assertEqual(len(rows), 40)
        self.assertTrue(os.path.exists(os.path.join(sample_out, "paths.svg")))
        # Without --out: check and count write nothing, sample writes to the folder its --help names (sample's
        # default once lived in its code, and --help did not say it; the three share their options).
        here = os.path.join(self.directory, "cwd")
        os.makedirs(here)
        self.assertIn("--out TEXT:FOLDER=out/paths", run("paths", "sample", "--help").stdout)
        for words in (["check", "--layers", "2", "--heads", "2"], ["count", "--layers", "2", "--heads", "2"],
                      ["sample", "--layers", "2", "--heads", "2", "--draws", "2", "--tokens", "6", "--d-model", "6"]):
            subprocess.run([BINARY, "paths", *words], cwd=here, check=True, capture_output=True)
            self.assertEqual(os.listdir(here), [] if words[0] != "sample" else ["out"], words[0])
        self.assertTrue(os.path.isfile(os.path.join(here, "out", "paths", "paths.csv")))
        # Figures the report does not draw (E6 with the alpha-weighted series, paths sample), laid out by Chromium.
        figures = [os.path.join(out, "path_counts.svg"), os.path.join(sample_out, "paths.svg")]
        self.assertEqual(layout_problems(figure_layout(svg_page(figures))), [])

    def test_paths_sample_leaves_padding_out(self):
        # A recorded run as `model --dump` writes it: sample 1 padded (3 of 5 tokens real), its padded rows and
        # columns holding values that would change every product. Each product must be the one over the real tokens.
        import numpy as np
        from common import Bf16, write_safetensors
        rng = np.random.default_rng(7)
        layers, batch, heads, n = 3, 2, 2, 5
        mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 1, 0]], dtype=np.int64)
        real = {b: np.flatnonzero(mask[b]) for b in range(batch)}
        patterns = {}
        for layer in range(layers):
            p = rng.uniform(0.1, 1.0, size=(batch, heads, n, n)).astype(np.float32)
            p /= p.sum(-1, keepdims=True)
            patterns[f"blocks.{layer}.attn.hook_pattern"] = p
        path = os.path.join(self.directory, "padded.safetensors")
        write_safetensors(path, {**patterns, "attention_mask": mask})
        out = os.path.join(self.directory, "padded")
        result = run("paths", "sample", "--patterns", path, "--draws", "20", "--out", out)
        # These rows put weight on the padded tokens (no mask when "recorded"): said, with the largest share.
        dropped = max(float((patterns[f"blocks.{layer}.attn.hook_pattern"][1][:, real[1]][..., mask[1] == 0]).sum(-1).max())
                      for layer in range(layers))
        import re
        said = re.search(r"real tokens' attention rows put up to ([0-9.e-]+) of their weight on padded tokens", result.stderr)
        self.assertIsNotNone(said, result.stderr)
        self.assertAlmostEqual(float(said.group(1)), dropped, delta=0.005 * dropped)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        rows = read_csv(os.path.join(out, "paths.csv"))
        # A bool mask (torch's `ids != pad`) is the same 0/1 mask: the same products.
        write_safetensors(path, {**patterns, "attention_mask": mask.astype(bool)})
        bool_out = os.path.join(self.directory, "padded-bool")
        run("paths", "sample", "--patterns", path, "--draws", "20", "--out", bool_out)
        self.assertEqual([r["relative_residual"] for r in read_csv(os.path.join(bool_out, "paths.csv"))],
                         [r["relative_residual"] for r in rows])
        # Rows recorded under the mask (no weight on padding): no warning.
        masked = {}
        for name, p in patterns.items():
            q = p * mask[:, None, None, :]
            masked[name] = (q / q.sum(-1, keepdims=True)).astype(np.float32)
        write_safetensors(path, {**masked, "attention_mask": mask})
        self.assertNotIn("padded tokens", run("paths", "sample", "--patterns", path, "--draws", "5",
                                              "--out", bool_out).stderr)
        write_safetensors(path, {**patterns, "attention_mask": mask})

        def composite(m):
            return np.sqrt(np.abs(m).sum(0).max() * np.abs(m).sum(1).max())

        checked = {0: 0, 1: 0}
        for row in rows:
            b = int(row["sample"])
            product = None
            for layer, head in zip(map(int, row["layers"].split()), map(int, row["heads"].split())):
                a = patterns[f"blocks.{layer}.attn.hook_pattern"][b, head].astype(np.float64)
                a = a[np.ix_(real[b], real[b])]
                product = a if product is None else a @ product  # later layer on the left
            u, s, vt = np.linalg.svd(product)
            rest = product - s[0] * np.outer(u[:, 0], vt[0])
            self.assertAlmostEqual(float(row["relative_residual"]), composite(rest) / composite(product), delta=1e-9)
            checked[b] += 1
        self.assertGreater(checked[1], 5)  # the padded sample was drawn
        self.assertGreater(checked[0], 5)
        # A mask that does not fit the patterns is an error naming it.
        write_safetensors(path, {**patterns, "attention_mask": mask[:, :4]})
        result = run("paths", "sample", "--patterns", path, "--out", out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("padded.safetensors:attention_mask", result.stderr)
        # ...and so are layers of different shapes.
        write_safetensors(path, {**patterns, "blocks.1.attn.hook_pattern": patterns["blocks.1.attn.hook_pattern"][:1]})
        result = run("paths", "sample", "--patterns", path, "--out", out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("shape [1, 2, 5, 5] differs from the first layer's [2, 2, 5, 5] (", result.stderr)
        self.assertIn("padded.safetensors:blocks.1.attn.hook_pattern)", result.stderr)
        # Half-precision patterns (a float16 or bfloat16 model's hooks) are read: the products are those of the stored
        # numbers, in float64, and the figure marks the stored dtype's epsilon (the coarsest layer's in a mixed file).
        half = {name: p.astype(np.float16) for name, p in patterns.items()}
        brain = {name: Bf16(p) for name, p in patterns.items()}
        for tensors, values, floor in [
                (half, {name: p.astype(np.float64) for name, p in half.items()}, "float16"),
                (brain, {name: p.values.astype(np.float64) for name, p in brain.items()}, "bfloat16"),
                ({**patterns, "blocks.2.attn.hook_pattern": half["blocks.2.attn.hook_pattern"]},
                 {name: p.astype(np.float64) for name, p in
                  {**patterns, "blocks.2.attn.hook_pattern": half["blocks.2.attn.hook_pattern"]}.items()},
                 "float16")]:
            write_safetensors(path, {**tensors, "attention_mask": mask})
            half_out = os.path.join(self.directory, "half")
            run("paths", "sample", "--patterns", path, "--draws", "8", "--out", half_out)
            half_rows = read_csv(os.path.join(half_out, "paths.csv"))
            self.assertEqual(len(half_rows), 8 * layers, half_rows[:2])  # draws × lengths (a sample each)
            for row in half_rows:
                b = int(row["sample"])
                product = None
                for layer, head in zip(map(int, row["layers"].split()), map(int, row["heads"].split())):
                    a = values[f"blocks.{layer}.attn.hook_pattern"][b, head][np.ix_(real[b], real[b])]
                    product = a if product is None else a @ product
                u, s, vt = np.linalg.svd(product)
                rest = product - s[0] * np.outer(u[:, 0], vt[0])
                self.assertAlmostEqual(float(row["relative_residual"]), composite(rest) / composite(product), delta=1e-9)
            with open(os.path.join(half_out, "paths.gp")) as script:
                key = floor + " eps (the patterns as stored; products in float64)"
                self.assertTrue(key in script.read(), f"no key '{key}' in {half_out}/paths.gp")
        # Integer patterns are named...
        write_safetensors(path, {**patterns, "blocks.2.attn.hook_pattern": patterns["blocks.2.attn.hook_pattern"].astype(
            np.int64)})
        result = run("paths", "sample", "--patterns", path, "--out", out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr, "rankscope: error: expected float16, bfloat16, float32 or float64 attention "
                                        f"patterns, found I64 ({path}:blocks.2.attn.hook_pattern)\n")
        # ...and float64 patterns get float64's floor in the figure (float32's "paper's floor" was drawn for them).
        write_safetensors(path, {name: p.astype(np.float64) for name, p in patterns.items()})
        run("paths", "sample", "--patterns", path, "--draws", "5", "--out", out)
        with open(os.path.join(out, "paths.gp")) as script:
            text = script.read()
        self.assertIn("float64 round-off", text)
        self.assertNotIn("float32 eps", text)
        # Matrices that are not attention (a row summing to 2 in a real token's row), a gap in the layers, a layer
        # index with a leading zero: each was sampled without a word.
        doubled = patterns["blocks.1.attn.hook_pattern"].copy()
        doubled[1, 0, 3] *= 2  # sample 1's token 3 is real
        cases = [({**patterns, "blocks.1.attn.hook_pattern": doubled},
                  "row 3 of head 0 of sample 1 is not an attention row (sum 2,"),
                 ({k: v for k, v in patterns.items() if k != "blocks.1.attn.hook_pattern"},
                  "no blocks.1.attn.hook_pattern before it: layers must run from blocks.0 without a gap "
                  f"({path}:blocks.2.attn.hook_pattern)"),
                 ({**patterns, "blocks.01.attn.hook_pattern": patterns["blocks.1.attn.hook_pattern"]},
                  "a layer index with a leading zero"),
                 # No blocks.0 (it read "no blocks.{l}.attn.hook_pattern tensors", beside three of them).
                 ({f"blocks.{layer + 1}.attn.hook_pattern": p for layer, p in enumerate(patterns.values())},
                  "no blocks.0.attn.hook_pattern before it: layers must run from blocks.0 without a gap")]
        padded_rows = patterns["blocks.1.attn.hook_pattern"].copy()
        padded_rows[1, 0, 2] = 7.0  # token 2 of sample 1 is padding: its row is not read
        for tensors, message in cases:
            write_safetensors(path, {**tensors, "attention_mask": mask})
            result = run("paths", "sample", "--patterns", path, "--out", out, check=False)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(message, result.stderr)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        write_safetensors(path, {**patterns, "blocks.1.attn.hook_pattern": padded_rows, "attention_mask": mask})
        run("paths", "sample", "--patterns", path, "--draws", "5", "--out", out)

    def test_errors(self):
        # paths count is a closed form: flags it would ignore are refused (--seed 3 was accepted and did nothing).
        for flag in (["--seed", "3"], ["--allow-nonfinite"]):
            refused = run("paths", "count", *flag, check=False)
            self.assertEqual(refused.returncode, 2, (flag, refused.stderr))
            self.assertIn(flag[0], refused.stderr)
        result = run("paths", "count", "--layers", "3", "--heads", "2", "--alpha", "0.5", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr, "rankscope: error: 1 values for 3 layers (one per layer) (--alpha)\n")
        result = run("theory", "--d-model", "10", "--heads", "4", "--out", self.directory, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("divisible", result.stderr)
        # ...and the widths the message asks for are flags theory has: the bounds hold with them.
        result = run("theory", "--d-model", "10", "--heads", "4", "--d-qk", "3", "--d-v", "2", "--layers", "3",
                     "--seeds", "1", "--tokens", "8", "--out", os.path.join(self.directory, "widths"))
        self.assertIn("bound violations: 0", result.stdout)
        result = run("paths", "sample", "--patterns", os.path.join(self.directory, "none.safetensors"), check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("none.safetensors", result.stderr)
        # Flags that were silently ignored or defaulted: each named.
        for args, message in ((["paths", "count", "--layers", "12"], "--layers needs --heads"),
                              (["paths", "count", "--alpha", "0.5"], "--alpha needs --layers"),
                              (["paths", "sample", "--patterns", os.path.abspath(__file__), "--skip"],
                               "--skip describes the random SAN, not a --patterns file")):
            result = run(*args, check=False)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(message, result.stderr, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
