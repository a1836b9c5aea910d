"""The commands added for issue 29 end to end: `trainability`, `failure-modes` (files, figures, verdicts, the
--format outputs, one-line errors) and `circle-regimes` (four regimes on a tiny budget), and a sweep over a
trainability setting whose gathered table equals the cells run on their own."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import load_json, read_csv, run  # noqa: E402
from figure_layout import figure_layout, layout_problems, svg_page  # noqa: E402

SMALL_TRAINABILITY = ["--depths", "2,8", "--d-model", "16", "--heads", "2", "--tokens", "6", "--samples", "2", "--seeds", "2"]
SMALL_FAILURE = ["--query-key-scales", "0.25,4", "--layers", "6", "--d-model", "16", "--heads", "2", "--tokens", "8",
                 "--samples", "2", "--seeds", "2"]


class BeyondThePaper(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="rankscope-beyond-")

    def tearDown(self):
        shutil.rmtree(self.directory, ignore_errors=True)

    def test_trainability_writes_its_tables_figure_and_verdicts(self):
        out = os.path.join(self.directory, "t")
        run("trainability", *SMALL_TRAINABILITY, "--out", out)
        for name in ("trainability.csv", "trainability_runs.csv", "trainability_summary.csv", "findings.json",
                     "verdicts.csv", "manifest.json", "trainability.svg", "trainability.png"):
            self.assertTrue(os.path.isfile(os.path.join(out, name)), name)
        layers = read_csv(os.path.join(out, "trainability.csv"))
        self.assertEqual(len(layers), 2 * 2 * (2 + 8) * 2)  # placements x scalings x layers x seeds
        summary = read_csv(os.path.join(out, "trainability_summary.csv"))
        self.assertEqual({(r["layer_norm"], r["scaling"], r["depth"]) for r in summary},
                         {(ln, s, d) for ln in ("post", "pre") for s in ("plain", "inverse-sqrt-depth") for d in ("2", "8")})
        findings = load_json(os.path.join(out, "findings.json"))
        self.assertEqual(len(findings["checks"]), 2 + 1 + 4)
        for check in findings["checks"]:
            self.assertIn(check["verdict"], ("reproduced", "not reproduced", "not comparable at these settings"))
        # --format csv prints the summary table; json the checks.
        printed = run("trainability", *SMALL_TRAINABILITY, "--format", "csv").stdout.splitlines()
        self.assertEqual(printed[0].split(",")[:3], ["layer_norm", "scaling", "depth"])
        self.assertEqual(len(printed), 1 + len(summary))
        checks = json.loads(run("trainability", *SMALL_TRAINABILITY, "--format", "json").stdout)["checks"]
        self.assertEqual([c["claim"] for c in checks], [c["claim"] for c in findings["checks"]])

    def test_failure_modes_writes_the_phase_diagram(self):
        out = os.path.join(self.directory, "f")
        run("failure-modes", *SMALL_FAILURE, "--out", out)
        summary = read_csv(os.path.join(out, "failure_modes_summary.csv"))
        self.assertEqual(len(summary), 2 * 2 * 6)  # variants x scales x layers
        for row in summary:
            self.assertIn(row["regime"], ("rank collapse", "entropy collapse", "both", "neither"))
            self.assertTrue(0 <= float(row["normalized_entropy_mean"]) <= 1 + 1e-12)
        self.assertTrue(os.path.isfile(os.path.join(out, "failure_modes.svg")))
        # Pure attention at s = 0.25 collapses within 6 layers; at s = 4 layer 1 is near one-hot.
        san = {(r["query_key_scale"], r["layer"]): r for r in summary if r["variant"] == "SAN"}
        self.assertLess(float(san[("0.25", "6")]["relative_residual_mean"]), 1e-3)
        self.assertLess(float(san[("4", "1")]["normalized_entropy_mean"]), 0.2)

    def test_bad_settings_are_one_line_errors(self):
        for args, flag in ((["trainability", "--heads", "3", "--d-model", "16"], "d_model"),
                           (["trainability", "--scalings", "sqrt"], "--scalings"),
                           (["failure-modes", "--variants", "BERT"], "--variants"),
                           (["failure-modes", "--query-key-scales", "0"], "--query-key-scales"),
                           (["circle-regimes", "--noise", "0"], "--noise"),
                           (["circle-regimes", "--init", "xavier"], "--init"),
                           # 0 epochs once meant "the recipe's budget" in silence; the default is now printed instead
                           (["circle-regimes", "--epochs", "0"], "--epochs")):
            with self.subTest(args=args):
                out = os.path.join(self.directory, "bad")
                result = run(*args, "--out", out, check=False)
                self.assertEqual(result.returncode, 2, result.stderr)
                lines = result.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertIn(flag, lines[0])
                self.assertFalse(os.path.exists(out))

    def test_circle_regimes_runs_four_regimes(self):
        out = os.path.join(self.directory, "c")
        run("circle-regimes", "--variants", "SAN,SAN+skip", "--seeds", "2", "--epochs", "2", "--steps", "5", "--out", out)
        rows = read_csv(os.path.join(out, "circle_regimes.csv"))
        self.assertEqual([(r["regime"], r["variant"]) for r in rows],
                         [(regime, v) for regime in ("plain MSE / no input LN", "plain MSE / input LN",
                                                     "denoising σ = 0.005 / no input LN", "denoising σ = 0.005 / input LN")
                          for v in ("SAN", "SAN+skip")])
        for r in rows:
            self.assertEqual(r["seeds"], "2")
            self.assertLessEqual(int(r["on_arcs"]), int(r["on_circle"]))  # on the arcs implies on the circle
            # A median over no merges is no value, written as the other merge columns write it: an empty cell.
            if r["merged"] == "0":
                self.assertEqual((r["merge_steps"], r["median_merge_step"], r["median_time_to_merge"]), ("", "", ""))
        self.assertTrue(any(r["merged"] == "0" for r in rows))  # (SAN+skip does not merge in 5 steps here)
        trajectories = read_csv(os.path.join(out, "circle_regimes_trajectories.csv"))
        self.assertEqual(len(trajectories), 4 * 2 * 2 * 2 * 5)  # regimes x variants x seeds x tokens x steps
        findings = load_json(os.path.join(out, "findings.json"))
        self.assertEqual(len(findings["checks"]), 16)  # first, earliest, arcs, circle per regime
        for check in findings["checks"]:  # two seeds cannot give a rate
            self.assertEqual(check["verdict"], "not comparable at these settings")
        manifest = load_json(os.path.join(out, "manifest.json"))
        self.assertEqual([r["input_noise"] for r in manifest["regimes"]], [0, 0, 0.005, 0.005])
        self.assertEqual(layout_problems(figure_layout(svg_page([os.path.join(out, "circle_regimes.svg")]))), [])
        self.assertNotIn("input_noise", manifest["training"])
        self.assertEqual(manifest["training"]["init"], "uniform")  # the command's default draw

    def test_sweep_over_trainability_gathers_the_summaries(self):
        grid = os.path.join(self.directory, "grid.toml")
        with open(grid, "w") as f:
            f.write('experiment = "trainability"\n[fixed]\nd-model = 16\nheads = 2\ntokens = 6\nsamples = 2\nseeds = 1\n'
                    'layer-norms = "post"\n[axes]\ndepths = [2, 4]\n')
        out = os.path.join(self.directory, "sweep")
        run("sweep", grid, "--out", out, "--workers", "1")
        rows = read_csv(os.path.join(out, "sweep.csv"))
        self.assertEqual(sorted({r["cell_depths"] for r in rows}), ["2", "4"])
        alone = os.path.join(self.directory, "alone")
        run("trainability", "--d-model", "16", "--heads", "2", "--tokens", "6", "--samples", "2", "--seeds", "1",
            "--layer-norms", "post", "--depths", "4", "--out", alone)
        expected = read_csv(os.path.join(alone, "trainability_summary.csv"))
        gathered = [r for r in rows if r["cell_depths"] == "4"]
        self.assertEqual([r["last_cosine_mean"] for r in gathered], [r["last_cosine_mean"] for r in expected])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
