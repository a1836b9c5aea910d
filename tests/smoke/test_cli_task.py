"""`rankscope task` and `rankscope width-depth` end to end at tiny settings: files, columns, figures, checkpoint reuse
and the errors a user meets first."""
import os
import shutil
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import RTE, load_json, read_csv, require, run  # noqa: E402



class TaskCommand(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="rankscope-task-")

    def tearDown(self):
        shutil.rmtree(self.out)

    def assert_svg(self, path):
        root = ElementTree.parse(path).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        self.assertGreater(os.path.getsize(path), 5000)

    def test_circle_draws_four_trajectories(self):
        run("task", "circle", "--out", self.out, "--epochs", "3", "--train-count", "200", "--steps", "40",
            "--seed", "1", "--seeds", "2")
        rows = read_csv(os.path.join(self.out, "circle_trajectories.csv"))
        self.assertEqual(list(rows[0].keys()), ["variant", "seed", "step", "token", "x", "y", "target_x", "target_y"])
        self.assertEqual({r["variant"] for r in rows}, {"SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"})
        self.assertEqual({r["seed"] for r in rows}, {"1", "2"})
        self.assertEqual(len(rows), 4 * 2 * 40 * 2)
        summary_rows = read_csv(os.path.join(self.out, "circle_summary.csv"))
        self.assertEqual(len(summary_rows), 4 * 2)
        for column in ("train_rmse", "heldout_rmse", "mean_distance_to_arcs", "merge_step", "bounded_steps"):
            self.assertIn(column, summary_rows[0])
        summary = load_json(os.path.join(self.out, "task.json"))
        self.assertEqual(summary["variants"], ["SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"])
        self.assertEqual(len(summary["runs"]), 8)
        # The manifest's settings are the shared ones with the variants named, not the SAN's skip/mlp as everyone's.
        manifest_settings = load_json(os.path.join(self.out, "manifest.json"))["settings"]
        self.assertEqual(manifest_settings["variants"], summary["variants"])
        self.assertNotIn("skip", manifest_settings)
        self.assertNotIn("mlp", manifest_settings)
        # "Really pure": the SAN model has no in-layer skip and no in-layer LayerNorm.
        models = {(r["variant"], r["seed"]): r["model"] for r in summary["runs"]}
        self.assertFalse(models[("SAN", 1)]["attention_skip"])
        self.assertEqual(models[("SAN", 1)]["layer_norm"], "none")
        self.assertTrue(models[("SAN+skip", 1)]["attention_skip"])
        self.assertFalse(models[("SAN+MLP", 1)]["mlp_skip"])
        self.assertTrue(models[("SAN+skip+MLP", 1)]["mlp_skip"])
        # Findings: 3 epochs on 200 points cannot judge the paper: no check may say "not reproduced".
        findings = load_json(os.path.join(self.out, "findings.json"))
        self.assertEqual(findings["experiment"], "E3")
        self.assertEqual(len(findings["checks"]), 5)
        for check in findings["checks"]:
            self.assertNotEqual(check["verdict"], "not reproduced", check)
        self.assertIn("SAN merged its two tokens in", findings["reading"])
        self.assert_svg(os.path.join(self.out, "circle.svg"))
        self.assertTrue(os.path.exists(os.path.join(self.out, "circle.gp")))

    def test_hull_paths_and_reuse(self):
        args = ["task", "hull", "--out", self.out, "--epochs", "2", "--train-count", "60", "--eval-count", "20",
                "--layers", "2", "--d-model", "12", "--repeats", "2", "--sub-path", "both"]
        first = run(*args)
        self.assertIn("whole-model token accuracy", first.stdout)
        rows = read_csv(os.path.join(self.out, "paths_effectiveness.csv"))
        self.assertEqual(list(rows[0].keys()), ["task", "seed", "sub_path", "k", "n_paths", "repeat", "metric", "value"])
        accuracy = [r for r in rows if r["metric"] == "token_accuracy"]
        self.assertEqual(len(accuracy), 3 * 2 * 2 * 2)  # k = 0..2, n in {5, 20}, 2 repeats, with/without sub-paths
        self.assertEqual({r["metric"] for r in rows} - {"token_accuracy"}, {"whole_model_accuracy", "majority_accuracy",
                                                                       "position_majority_accuracy"})
        for r in rows:
            self.assertTrue(0.0 <= float(r["value"]) <= 1.0)
        self.assert_svg(os.path.join(self.out, "paths_effectiveness.svg"))
        summary = load_json(os.path.join(self.out, "task.json"))
        self.assertFalse(summary["reused_checkpoint"])
        self.assertEqual(summary["settings"]["train_count"], 60)
        manifest = load_json(os.path.join(self.out, "manifest.json"))
        self.assertIn("task hull", manifest["command"])
        second = run(*args)
        self.assertIn("checkpoint reused", second.stdout)
        # A damaged checkpoint says that --retrain replaces it (it named the damage only).
        checkpoint = summary["checkpoint"]
        with open(checkpoint, "r+b") as f:
            f.truncate(os.path.getsize(checkpoint) // 2)
        damaged = run(*args, check=False)
        self.assertEqual(damaged.returncode, 2, damaged.stderr)
        self.assertIn("truncated safetensors file", damaged.stderr)
        self.assertIn("; --retrain (retrain=True from Python) trains the model again and replaces it", damaged.stderr)
        self.assertNotIn("checkpoint reused", run(*args, "--retrain").stdout)
        self.assertIn("checkpoint reused", run(*args).stdout)  # replaced whole

    def test_sort_over_seeds_trained_together(self):
        args = ["task", "sort", "--out", self.out, "--epochs", "2", "--train-count", "60", "--eval-count", "20",
                "--layers", "2", "--d-model", "16", "--repeats", "2", "--paths", "5", "--seed", "3", "--seeds", "3"]
        first = run(*args)
        self.assertIn("(mean over 3 seeds)", first.stdout)
        summary = load_json(os.path.join(self.out, "task.json"))
        self.assertEqual([s["seed"] for s in summary["seeds"]], [3, 4, 5])
        self.assertNotIn("seed", summary["settings"])
        self.assertNotIn("checkpoint", summary)  # one per seed, in "seeds"
        self.assertEqual(len({s["checkpoint"] for s in summary["seeds"]}), 3)
        self.assertEqual(summary["steps_per_model"], 2 * 2)  # 60 items in batches of 30, 2 epochs
        self.assertAlmostEqual(summary["whole_model_accuracy"],
                               sum(s["whole_model_accuracy"] for s in summary["seeds"]) / 3, places=12)
        for s in summary["seeds"]:
            self.assertEqual(s["eval_data"], f"eval_data_seed{s['seed']}.safetensors")
            self.assertTrue(os.path.exists(os.path.join(self.out, s["eval_data"])))
        rows = read_csv(os.path.join(self.out, "paths_effectiveness.csv"))
        self.assertEqual({r["seed"] for r in rows}, {"3", "4", "5"})
        self.assertEqual(len([r for r in rows if r["metric"] == "whole_model_accuracy"]), 3)
        self.assertEqual(len([r for r in rows if r["metric"] == "token_accuracy"]), 3 * 3 * 2)  # seeds, k = 0..2, repeats
        training = read_csv(os.path.join(self.out, "training.csv"))
        self.assertEqual([(r["task"], r["seed"], r["epoch"]) for r in training],
                         [("sort", s, e) for s in "345" for e in "12"])
        residual = read_csv(os.path.join(self.out, "residual.csv"))
        self.assertEqual(len(residual), 3 * 3)
        for row in read_csv(os.path.join(self.out, "paths_effectiveness_summary.csv")):
            self.assertEqual(row["n"], "6")  # 3 seeds x 2 repeats
        findings = load_json(os.path.join(self.out, "findings.json"))
        self.assertIn("over 3 seeds", findings["checks"][0]["measured"])
        with open(os.path.join(self.out, "paths_effectiveness.gp"), encoding="utf-8") as script:
            self.assertIn("over 3 seeds × repeats", script.read())
        # Again with a fourth seed: three checkpoints reused, one trained.
        second = run(*(args[:-1] + ["4"]))
        again = load_json(os.path.join(self.out, "task.json"))
        self.assertEqual([s["reused_checkpoint"] for s in again["seeds"]], [True, True, True, False])
        self.assertEqual(again["seeds"][0]["whole_model_accuracy"], summary["seeds"][0]["whole_model_accuracy"])
        self.assertIn("trained in", second.stdout)
        # A reused checkpoint brings its training along: training.csv keeps the reused seeds' epochs, as they were
        # (it was rewritten with the newly trained seed's only; a rerun of all reused seeds left just its header).
        again_training = read_csv(os.path.join(self.out, "training.csv"))
        self.assertEqual([(r["seed"], r["epoch"]) for r in again_training], [(s, e) for s in "3456" for e in "12"])
        self.assertEqual([r for r in again_training if r["seed"] != "6"], training)
        self.assertEqual([s["epochs"] for s in again["seeds"]], [2, 2, 2, 2])

    def test_memorize_tokenises_rte_pairs(self):
        require(RTE)
        run("task", "memorize", "--out", self.out, "--text", RTE, "--epochs", "1", "--train-count", "12",
            "--eval-count", "6", "--d-model", "16", "--layers", "2", "--repeats", "1", "--paths", "5")
        summary = load_json(os.path.join(self.out, "task.json"))
        self.assertEqual(summary["eval_sequences"], 6)
        self.assertTrue(os.path.exists(os.path.join(self.out, "tokenizer", "spiece.model")))
        self.assertIn("text_fnv1a", summary["settings"])
        # One seed, one repeat: each ensemble accuracy is one value, whose spread is undefined (nan), not 0; the figure
        # still draws the means.
        summary_rows = read_csv(os.path.join(self.out, "paths_effectiveness_summary.csv"))
        for row in summary_rows:
            self.assertEqual((row["n"], row["std"]), ("1", "nan"))
        with open(os.path.join(self.out, "paths_effectiveness.svg"), encoding="utf-8") as figure:
            markers = figure.read().count("href='#gpPt6'")  # the series' filled circles (pt 7), and one in the key
        self.assertEqual(markers, len(summary_rows) + 1)

    def test_width_depth_matches_parameter_counts(self):
        run("width-depth", "--task", "sort", "--out", self.out, "--depths", "1,4", "--epochs", "2",
            "--train-count", "60", "--eval-count", "20", "--layers", "2", "--d-model", "16")
        rows = read_csv(os.path.join(self.out, "width_depth.csv"))
        self.assertEqual([int(r["layers"]) for r in rows], [1, 4])
        counts = [int(r["parameters"]) for r in rows]
        target = load_json(os.path.join(self.out, "width_depth.json"))["target_parameters"]
        for count in counts:
            self.assertLess(abs(count - target) / target, 0.25)
        self.assertGreater(int(rows[0]["d_model"]), int(rows[1]["d_model"]))  # shallow is wider
        residual = read_csv(os.path.join(self.out, "width_depth_residual.csv"))
        self.assertEqual(len(residual), 2 + 5)  # layers 0..L per model
        self.assertEqual({r["n"] for r in residual}, {"20"})  # the evaluation sequences
        self.assert_svg(os.path.join(self.out, "width_depth.svg"))
        # No verdict: the mean path length is the count L·H/(H+1), which grows with L by construction.
        findings = load_json(os.path.join(self.out, "findings.json"))
        self.assertEqual(findings["checks"], [])
        self.assertTrue(any("not judged either" in note for note in findings["notes"]), findings["notes"])

    def test_bad_settings_fail_with_one_line(self):
        result = run("task", "sort", "--out", self.out, "--d-model", "7", "--heads", "2", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("not divisible", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        result = run("task", "memorize", "--out", self.out, "--text", "/nonexistent/rte.tsv", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("/nonexistent/rte.tsv", result.stderr)
        result = run("task", "sort", "--out", self.out, "--epochs", "many", check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--epochs", result.stderr)
        # --seeds is a count in every subcommand (it was a list in task and circle-regimes, where --seeds 5 meant seed
        # 5 alone); a list is refused with the spelling that runs the same consecutive seeds.
        for command in (["task", "circle"], ["circle-regimes"], ["theory"], ["trainability"], ["failure-modes"]):
            result = run(*command, "--seeds", "2,3,4", "--out", os.path.join(self.out, "never"), check=False)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("'2,3,4': --seeds is a count of consecutive seeds from --seed (--seed 2 --seeds 3 runs "
                          "seeds 2 to 4)", result.stderr)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn("--seeds INT:in [1, ", run(*command, "--help").stdout)
        self.assertFalse(os.path.exists(os.path.join(self.out, "never")))
        # Without a task, the task is what is said to be missing (it was "--out is required").
        for command, missing in ((["task"], "task"), (["width-depth"], "--task")):
            result = run(*command, check=False)
            self.assertEqual((result.returncode, result.stderr), (2, f"rankscope: error: {missing} is required\n"))
        # A flag only another task reads is refused, not ignored.
        for args, expected in [(["task", "sort", "--input-noise", "0.1"], "circle task only, not sort (--input-noise)"),
                               (["task", "hull", "--text", RTE], "memorize task only, not hull (--text)"),
                               (["width-depth", "--task", "sort", "--target-mse", "1e-3"],
                                "circle task only, not sort (--target-mse)"),
                               # ...and so are the circle's own options and the path ensembles' (each did nothing).
                               (["task", "sort", "--steps", "10"], "circle task only, not sort (--steps)"),
                               (["task", "hull", "--variants", "SAN"], "circle task only, not hull (--variants)"),
                               (["task", "circle", "--paths", "7"],
                                "applies to sort, hull and memorize (path ensembles), not circle (--paths)"),
                               (["task", "circle", "--sub-path", "yes"], "not circle (--sub-path)"),
                               # The circle's variants set the skip and the MLP, its layers have no LN, and it is
                               # evaluated on its own points: these were accepted and did nothing.
                               (["task", "circle", "--mlp"], "does not apply to the circle task: --variants sets the "
                                "skip and the MLP, and its layers have no LayerNorm (--mlp)"),
                               (["task", "circle", "--no-skip"], "and its layers have no LayerNorm (--no-skip)"),
                               (["task", "circle", "--layer-norm"], "its layers have no LayerNorm (--layer-norm)"),
                               (["task", "circle", "--no-layer-norm"], "(--no-layer-norm)"),
                               (["task", "circle", "--eval-count", "10"], "it is evaluated on its training points and "
                                "on a held-out set made from --train-count (--eval-count)"),
                               # A file where the checkpoint folder goes: the flag named (it was "cannot create
                               # directories: Not a directory (...)").
                               (["task", "sort", "--checkpoints", __file__],
                                f"exists and is not a folder: {__file__} (--checkpoints)"),
                               (["width-depth", "--checkpoints", __file__], "(--checkpoints)")]:
            result = run(*args, "--out", self.out, check=False)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(expected, result.stderr, args)
        self.assertIn("--lr FLOAT:in (0, 1]", run("task", "--help").stdout)

    def test_help_lists_the_defaults_of_the_tasks_it_trains(self):
        # The paper's run_sort.py / run_convex_hull.py / run_memorization.py settings and rankscope's circle recipe.
        task_help = run("task", "--help").stdout
        for line in ("Model width (sort 48, hull 84, memorize 250, circle 32)",
                     "Sequences per step (sort 30, hull 30, memorize 8, circle 50)",
                     "Adam learning rate (sort 0.001, hull 0.001, memorize 0.0003, circle 0.003)",
                     "Training epochs (sort 65, hull 70, memorize 50, circle 400; circle stops earlier at --target-mse)",
                     "--target-mse FLOAT", "--text TEXT:FILE",
                     "0 for all of them; sort 200, hull 300, memorize 50; not for circle: it is evaluated on its own points)",
                     "An MLP block in every layer (default no; not for circle: see --variants)",
                     "Post-LN layers (default yes; not for circle: its layers have none)"):
            self.assertIn(" ".join(line.split()), " ".join(task_help.split()))
        # width-depth trains sort or hull: the circle's and memorize's flags and defaults were listed, then refused.
        width_depth_help = run("width-depth", "--help").stdout
        for line in ("Model width (sort 48, hull 84)", "Training epochs (sort 65, hull 70)", "Sequences per step (default 30)"):
            self.assertIn(line, width_depth_help)
        for word in ("--target-mse", "--input-noise", "--embedding-layer-norm", "--text", "circle", "memorize"):
            self.assertNotIn(word, width_depth_help)
        # A switch and its negation: two lines, not "--skip,--no-skip{false}", and not both at once.
        for text in (task_help, width_depth_help):
            self.assertNotIn("{false}", text)
            self.assertIn("--no-skip", text)
        both = run("task", "sort", "--skip", "--no-skip", "--out", os.path.join(self.out, "never"), check=False)
        self.assertEqual(both.returncode, 2)
        self.assertIn("--skip excludes --no-skip", both.stderr)

    def test_without_skips_every_path_has_length_l(self):
        # Ensembles of length 0..L-1 were drawn through skips a --no-skip model does not have.
        run("task", "sort", "--no-skip", "--out", self.out, "--epochs", "1", "--train-count", "60", "--eval-count", "20",
            "--layers", "2", "--d-model", "16", "--repeats", "1", "--paths", "5")
        rows = read_csv(os.path.join(self.out, "paths_effectiveness_summary.csv"))
        self.assertEqual({row["k"] for row in rows}, {"2"})
        # Two seeds, then one, into the same folder: the first run's per-seed evaluation batches go.
        args = ["task", "sort", "--out", self.out, "--epochs", "1", "--train-count", "60", "--eval-count", "20",
                "--layers", "2", "--d-model", "16", "--repeats", "1", "--paths", "5"]
        run(*args, "--seeds", "2")
        self.assertIn("eval_data_seed1.safetensors", os.listdir(self.out))
        run(*args)
        self.assertEqual(sorted(n for n in os.listdir(self.out) if n.startswith("eval_data")), ["eval_data.safetensors"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
