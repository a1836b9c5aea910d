"""`rankscope sweep` end to end: grid files, cell keys, the tidy tables against the experiment run on its own, resume
after a kill, failed cells, bad grids, and the same sweep under `mpirun -np 2` compared cell by cell with the local run.

RANKSCOPE_EXPECT_MPI (set by CMake) says whether this build has MPI: with it, the mpirun comparison must pass; without
it (the sanitizer build), running under mpirun must stop with the one-line "built without MPI" error."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, FIXTURES, RTE, load_json, read_csv, read_safetensors, run, write_safetensors  # noqa: E402
from figure_layout import figure_layout, layout_problems, svg_page  # noqa: E402

GRID_TOML = """# a small theory sweep
experiment = "theory"
[fixed]
layers = 3
tokens = 8
seeds = 1
[axes]
d-model = [8, 16]
heads = [1, 2]
seed = [0, 1]
"""
# The same grid in JSON, fixed settings and axes in another order: the same cells, the same keys.
GRID_JSON = {"experiment": "theory", "axes": {"d-model": [8, 16], "heads": [1, 2], "seed": [0, 1]},
             "fixed": {"seeds": 1, "tokens": 8, "layers": 3}}


def data_lines(path):
    """The CSV file's lines without its '#' provenance comments."""
    with open(path) as f:
        return [line for line in f if not line.startswith("#")]


def mpi_environment():
    env = dict(os.environ)
    # CI runs as root in a container: OpenMPI refuses root without these, and cannot use cross-memory attach there.
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return env


class Sweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="rankscope-sweep-")
        cls.grid = os.path.join(cls.directory, "grid.toml")
        with open(cls.grid, "w") as f:
            f.write(GRID_TOML)
        cls.local = os.path.join(cls.directory, "local")
        cls.first = run("sweep", cls.grid, "--out", cls.local, "--workers", "2")

    def test_tables_match_the_experiment_run_on_its_own(self):
        self.assertIn("8 cells of `rankscope theory`: 8 ran now, 0 reused, 0 failed", self.first.stdout)
        # The "wrote" line names what the manifest lists (it left out the collapse-depth files and the manifest).
        wrote = self.first.stdout.strip().splitlines()[-1]
        self.assertTrue(wrote.startswith(f"wrote {self.local}/"), wrote)
        with open(os.path.join(self.local, "manifest.json")) as f:
            manifest = json.load(f)
        listed = {name for name in manifest["outputs"] if not name.startswith("tables/")} | {"tables/", "manifest.json"}
        self.assertEqual(set(wrote[len(f"wrote {self.local}/"):].split(", ")), listed)
        self.assertIn("collapse_depth_summary.csv", listed)
        cells = read_csv(os.path.join(self.local, "cells.csv"))
        self.assertEqual(len(cells), 8)
        self.assertEqual({c["status"] for c in cells}, {"ran"})
        # Last axis fastest, as in the grid file.
        self.assertEqual([(c["cell_d_model"], c["cell_heads"], c["cell_seed"]) for c in cells[:3]],
                         [("8", "1", "0"), ("8", "1", "1"), ("8", "2", "0")])
        rows = read_csv(os.path.join(self.local, "sweep.csv"))
        self.assertEqual(list(rows[0])[:8], ["cell_key", "cell_d_model", "cell_heads", "cell_seed", "cell_layers",
                                             "cell_tokens", "cell_seeds", "variant"])
        # One cell, recomputed by `rankscope theory` itself with the cell's flags: the same rows, value for value.
        cell = cells[5]
        alone = os.path.join(self.directory, "alone")
        run("theory", "--layers", "3", "--tokens", "8", "--seeds", "1", "--d-model", cell["cell_d_model"],
            "--heads", cell["cell_heads"], "--seed", cell["cell_seed"], "--threads", "1", "--out", alone)
        expected = read_csv(os.path.join(alone, "theory.csv"))
        got = [{k: v for k, v in r.items() if not k.startswith("cell_")} for r in rows if r["cell_key"] == cell["cell_key"]]
        self.assertEqual(got, expected)
        for r in rows:
            if r["cell_key"] == cell["cell_key"]:
                self.assertEqual((r["cell_d_model"], r["cell_heads"], r["cell_seed"]),
                                 (cell["cell_d_model"], cell["cell_heads"], cell["cell_seed"]))
        self.assertEqual(len(rows), sum(len(read_csv(os.path.join(self.local, c["folder"], "theory.csv"))) for c in cells))
        # Every table the cells wrote is gathered the same way.
        for name in ["theory.csv", "theory_summary.csv", "verdicts.csv"]:
            self.assertTrue(os.path.exists(os.path.join(self.local, "tables", name)), name)
        document = load_json(os.path.join(self.local, "sweep.json"))
        self.assertEqual(document["cells"], 8)
        self.assertEqual(document["axes"]["heads"], ["1", "2"])
        record = load_json(os.path.join(self.local, cells[0]["folder"], "cell.json"))
        self.assertEqual(record["status"], "ok")
        self.assertIn("--d-model", record["argv"])

    def test_collapse_depth_from_the_rows(self):
        rows = read_csv(os.path.join(self.local, "sweep.csv"))
        depths = read_csv(os.path.join(self.local, "collapse_depth.csv"))
        self.assertEqual(len(depths), len({(r["cell_key"], r["variant"], r["seed"]) for r in rows}))
        for depth in depths:
            run_rows = [r for r in rows if (r["cell_key"], r["variant"], r["seed"]) == (depth["cell_key"], depth["variant"],
                                                                                        depth["seed"])]
            below = [int(r["layer"]) for r in run_rows if int(r["layer"]) >= 1 and float(r["relative_residual"]) < 1e-3]
            self.assertEqual(depth["collapse_depth"], str(min(below)) if below else "")
        summary = read_csv(os.path.join(self.local, "collapse_depth_summary.csv"))
        san = [s for s in summary if s["variant"] == "SAN" and s["heads"] == "1" and s["d_model"] == "8"]
        self.assertEqual(len(san), 1)
        # The single-head SAN runs in every cell of width 8 (heads 1 and 2) for both seeds: the same two networks twice,
        # counted once each.
        self.assertEqual(len([d for d in depths if d["variant"] == "SAN" and d["cell_d_model"] == "8"]), 2 * 2)
        self.assertEqual(int(san[0]["runs"]), 2)
        self.assertTrue(os.path.getsize(os.path.join(self.local, "collapse_depth.svg")) > 1000)
        self.assertEqual(layout_problems(figure_layout(svg_page([os.path.join(self.local, "collapse_depth.svg")]))), [])

    def test_json_grid_gives_the_same_cells_and_keys(self):
        path = os.path.join(self.directory, "grid.json")
        with open(path, "w") as f:
            json.dump(GRID_JSON, f)
        result = run("sweep", path, "--out", self.local, "--dry-run")
        self.assertIn("8 cells of `rankscope theory`, 8 done, 0 to run", result.stdout)

    def test_a_rerun_reuses_every_cell(self):
        copy = os.path.join(self.directory, "rerun")
        shutil.copytree(self.local, copy)
        again = run("sweep", self.grid, "--out", copy)
        self.assertIn("0 ran now, 8 reused, 0 failed", again.stdout)
        self.assertEqual({c["status"] for c in read_csv(os.path.join(copy, "cells.csv"))}, {"reused"})
        self.assertEqual(data_lines(os.path.join(copy, "sweep.csv")), data_lines(os.path.join(self.local, "sweep.csv")))

    def test_a_cell_another_build_wrote_runs_again(self):
        # Its tables may have other columns or numbers than this build's, and sweep.csv records one version.
        copy = os.path.join(self.directory, "older-build")
        shutil.copytree(self.local, copy)
        key = sorted(os.listdir(os.path.join(copy, "cells")))[0]
        record_path = os.path.join(copy, "cells", key, "cell.json")
        record = load_json(record_path)
        record["version"] = "rankscope 0.0.1 (git 000000000000)"
        del record["inputs"]  # an older build recorded none
        with open(record_path, "w") as f:
            json.dump(record, f)
        listed = run("sweep", self.grid, "--out", copy, "--dry-run")
        self.assertIn("8 cells of `rankscope theory`, 7 done, 1 to run", listed.stdout)
        self.assertIn(f"  {key} ", listed.stdout)
        self.assertIn("(again: it was written by another build: rankscope 0.0.1 (git 000000000000))", listed.stdout)
        # Asked to, the sweep reuses it, says so, and records which builds the tables mix.
        mixed = os.path.join(self.directory, "older-build-reused")
        shutil.copytree(copy, mixed)
        reused = run("sweep", self.grid, "--out", mixed, "--reuse-other-builds")
        self.assertIn("0 ran now, 8 reused, 0 failed", reused.stdout)
        self.assertIn("rankscope: sweep: reusing 1 cell another build wrote (rankscope 0.0.1 (git 000000000000)): "
                      "--reuse-other-builds", reused.stderr)
        versions = {c["cell_key"]: c["version"] for c in read_csv(os.path.join(mixed, "cells.csv"))}
        self.assertEqual(versions[key], "rankscope 0.0.1 (git 000000000000)")
        self.assertEqual(len(set(versions.values())), 2)
        self.assertEqual(sorted(load_json(os.path.join(mixed, "sweep.json"))["cell_versions"].values()), [1, 7])
        again = run("sweep", self.grid, "--out", copy)
        self.assertIn("1 ran now, 7 reused, 0 failed", again.stdout)
        self.assertIn("rankscope: sweep: running 1 cell again: it was written by another build: "
                      "rankscope 0.0.1 (git 000000000000)", again.stderr)
        self.assertNotEqual(load_json(record_path)["version"], record["version"])
        self.assertEqual(data_lines(os.path.join(copy, "sweep.csv")), data_lines(os.path.join(self.local, "sweep.csv")))
        # A cell.json edited into nonsense (a version that is not a string) is a reason to run the cell, not an error.
        record = load_json(record_path)
        record["version"] = None
        with open(record_path, "w") as f:
            json.dump(record, f)
        listed = run("sweep", self.grid, "--out", copy, "--dry-run")
        self.assertIn("(again: it was written by another build: no version recorded)", listed.stdout)

    def test_a_cell_whose_files_changed_runs_again(self):
        # cell.json records every file the cell wrote (size, SHA-256): a table cut short was reused and merged as it
        # stood, and sweep.csv got a row of 15 fields under 20 columns.
        copy = os.path.join(self.directory, "cut")
        shutil.copytree(self.local, copy)
        key = sorted(os.listdir(os.path.join(copy, "cells")))[0]
        table = os.path.join(copy, "cells", key, "theory.csv")
        with open(table) as f:
            text = f.read()
        cut = text[:len(text) - 40]
        with open(table, "w") as f:
            f.write(cut)
        again = run("sweep", self.grid, "--out", copy)
        self.assertIn("1 ran now, 7 reused, 0 failed", again.stdout)
        self.assertIn(f"running 1 cell again: its theory.csv has {len(cut.encode())} bytes, its record says "
                      f"{len(text.encode())} (truncated or changed)", again.stderr)
        self.assertEqual(data_lines(os.path.join(copy, "sweep.csv")), data_lines(os.path.join(self.local, "sweep.csv")))
        # A cell reused without that record (another build's, --reuse-other-builds): the cut table is named, and no
        # merged table is written from it.
        with open(table, "w") as f:
            f.write(cut)
        record_path = os.path.join(copy, "cells", key, "cell.json")
        record = load_json(record_path)
        del record["outputs"]
        record["version"] = "rankscope 0.0.1 (git 000000000000)"
        with open(record_path, "w") as f:
            json.dump(record, f)
        os.remove(os.path.join(copy, "sweep.csv"))
        result = run("sweep", self.grid, "--out", copy, "--reuse-other-builds", check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertRegex(result.stderr.strip().splitlines()[-1],
                         rf"^rankscope: error: row \d+ has \d+ fields for the \d+ columns of its header "
                         rf"\(cells/{key}/theory.csv\)$")
        self.assertFalse(os.path.exists(os.path.join(copy, "sweep.csv")))

    def test_killed_sweep_resumes(self):
        grid = os.path.join(self.directory, "slow.toml")
        with open(grid, "w") as f:
            f.write(GRID_TOML.replace("layers = 3", "layers = 6"))
        out = os.path.join(self.directory, "killed")
        cells_dir = os.path.join(out, "cells")

        def finished():
            if not os.path.isdir(cells_dir):
                return []
            return [k for k in os.listdir(cells_dir) if os.path.exists(os.path.join(cells_dir, k, "cell.json"))]

        process = subprocess.Popen([BINARY, "sweep", grid, "--out", out, "--workers", "1"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while time.time() < deadline and not finished() and process.poll() is None:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        reused = len(finished())  # counted after the kill: a cell may have ended meanwhile
        self.assertGreaterEqual(reused, 1, "no cell finished before the kill")
        self.assertLess(reused, 8, "the sweep ended before it could be killed")
        self.assertFalse(os.path.exists(os.path.join(out, "sweep.csv")))
        resumed = run("sweep", grid, "--out", out, "--workers", "2")
        self.assertIn(f"{8 - reused} ran now, {reused} reused, 0 failed", resumed.stdout)
        clean = os.path.join(self.directory, "clean")
        run("sweep", grid, "--out", clean, "--workers", "2")
        for name in ["sweep.csv", "tables/theory_summary.csv"]:
            self.assertEqual(data_lines(os.path.join(out, name)), data_lines(os.path.join(clean, name)), name)

    def test_sigterm_says_the_sweep_resumes(self):
        # The message named the program a cell ran ("interrupted by SIGTERM (/.../rankscope)"), not the sweep.
        grid = os.path.join(self.directory, "slow-term.toml")
        with open(grid, "w") as f:
            f.write(GRID_TOML.replace("layers = 3", "layers = 6"))
        out = os.path.join(self.directory, "terminated")
        process = subprocess.Popen([BINARY, "sweep", grid, "--out", out, "--workers", "1"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while time.time() < deadline and not os.path.isdir(os.path.join(out, "cells")) and process.poll() is None:
            time.sleep(0.02)
        time.sleep(0.3)  # a cell's process is running
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
        self.assertEqual(process.returncode, 128 + signal.SIGTERM, stderr)
        self.assertEqual(stderr, "rankscope: error: interrupted by SIGTERM (sweep: the cells done are kept, and the "
                                 "same command resumes)\n")

    def test_a_failed_cell_does_not_stop_the_others(self):
        import numpy as np
        good = os.path.join(self.directory, "x.npy")
        np.save(good, np.random.default_rng(0).normal(size=(6, 4)))
        bad = os.path.join(self.directory, "truncated.npy")
        with open(good, "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[:-7])
        grid = os.path.join(self.directory, "inputs.json")
        with open(grid, "w") as f:
            json.dump({"experiment": "theory", "fixed": {"layers": 2, "seeds": 1},
                       "axes": {"input": [good, bad], "heads": [1, 2]}}, f)
        out = os.path.join(self.directory, "failing")
        result = run("sweep", grid, "--out", out, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("2 of 4 cells failed", result.stderr)
        cells = read_csv(os.path.join(out, "cells.csv"))
        self.assertEqual([c["status"] for c in cells], ["ran", "ran", "failed", "failed"])
        self.assertIn("truncated.npy", cells[2]["error"])
        rows = read_csv(os.path.join(out, "sweep.csv"))
        self.assertEqual({r["cell_input"] for r in rows}, {good})

    def test_task_and_paths_sweep_with_their_second_word(self):
        """`task` and `paths` need a positional (the task, the paths subcommand) that no flag sets: the experiment
        names it, and every cell runs it."""
        for experiment, axes, table in (("task sort", '[axes]\nlayers = [1, 2]\n', "residual.csv"),
                                        ("paths count", '[axes]\nlayers = [2, 3]\n', "path_counts.csv")):
            fixed = ('[fixed]\nepochs = 1\ntrain-count = 60\neval-count = 20\nd-model = 16\nrepeats = 1\npaths = 5\n'
                     if experiment == "task sort" else '[fixed]\nheads = 2\n')
            path = os.path.join(self.directory, experiment.replace(" ", "-") + ".toml")
            with open(path, "w") as f:
                f.write(f'experiment = "{experiment}"\n{fixed}{axes}')
            out = os.path.join(self.directory, experiment.replace(" ", "-"))
            run("sweep", path, "--out", out)
            cells = read_csv(os.path.join(out, "cells.csv"))
            self.assertEqual([c["status"] for c in cells], ["ran", "ran"], experiment)
            rows = read_csv(os.path.join(out, "sweep.csv"))
            self.assertEqual({r["cell_layers"] for r in rows}, {"1", "2"} if experiment == "task sort" else {"2", "3"})
            self.assertTrue(all(os.path.exists(os.path.join(out, "cells", c["cell_key"], table)) for c in cells), experiment)
        result = run("sweep", self.write_grid("bare.toml", 'experiment = "task"\n[axes]\nlayers = [1, 2]\n'),
                     "--out", os.path.join(self.directory, "bare"), check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("unknown experiment 'task' (expected theory, model, paths count, paths sample, task sort", result.stderr)

    def test_measure_sweeps_over_files(self):
        """measure's input is its positional `file`: a `file` setting is passed as that argument, one cell per file,
        and each cell's rows are the measure of its own file."""
        import numpy as np
        files = []
        for seed in (0, 1):
            files.append(os.path.join(self.directory, f"matrix-{seed}.npy"))
            np.save(files[-1], np.random.default_rng(seed).normal(size=(6, 4)))
        grid = self.write_grid("measure.json", json.dumps({"experiment": "measure", "axes": {"file": files},
                                                           "fixed": {"centers": "mean,exact"}}))
        out = os.path.join(self.directory, "measure-sweep")
        listed = run("sweep", grid, "--out", out, "--dry-run")
        self.assertIn(f"measure {files[0]} --centers mean,exact", listed.stdout)
        run("sweep", grid, "--out", out)
        rows = read_csv(os.path.join(out, "sweep.csv"))
        for path in files:
            alone = os.path.join(self.directory, "measure-" + os.path.basename(path))
            run("measure", path, "--centers", "mean,exact", "--out", alone)
            expected = read_csv(os.path.join(alone, "measures.csv"))
            mine = [{k: v for k, v in r.items() if not k.startswith("cell_")} for r in rows if r["cell_file"] == path]
            self.assertEqual(mine, expected, path)
        # The cell key hashes the path, not the file: a file that changed since makes its cell run again (cell.json
        # records each input's size and SHA-256), and the others are reused.
        np.save(files[0], np.random.default_rng(7).normal(size=(6, 4)))
        again = run("sweep", grid, "--out", out)
        self.assertIn("1 ran now, 1 reused, 0 failed", again.stdout)
        self.assertIn(f"running 1 cell again: its input {files[0]} changed since the cell ran", again.stderr)
        alone = os.path.join(self.directory, "measure-changed")
        run("measure", files[0], "--centers", "mean,exact", "--out", alone)
        mine = [{k: v for k, v in r.items() if not k.startswith("cell_")}
                for r in read_csv(os.path.join(out, "sweep.csv")) if r["cell_file"] == files[0]]
        self.assertEqual(mine, read_csv(os.path.join(alone, "measures.csv")))
        # A measure grid run into a theory sweep's folder leaves none of the theory sweep's results beside its own
        # (collapse_depth.* stayed, their provenance naming the other grid; tables/ and sweep.csv were replaced).
        mixed = os.path.join(self.directory, "theory-then-measure")
        shutil.copytree(self.local, mixed)
        run("sweep", grid, "--out", mixed)
        left = sorted(name for name in os.listdir(mixed) if name.startswith("collapse_depth"))
        self.assertEqual(left, [])
        self.assertEqual(sorted(os.listdir(os.path.join(mixed, "tables"))), ["measures.csv"])
        # A relative path that starts with '-' is a file, not an option.
        dashed = self.write_grid("dashed.json", json.dumps({"experiment": "measure", "axes": {"file": ["-m.npy"]}}))
        np.save(os.path.join(self.directory, "-m.npy"), np.random.default_rng(3).normal(size=(5, 3)))
        result = subprocess.run([BINARY, "sweep", dashed, "--out", "dashed-out"], cwd=self.directory,
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual({r["cell_file"] for r in read_csv(os.path.join(self.directory, "dashed-out", "sweep.csv"))},
                         {"-m.npy"})


    def test_a_model_folder_with_new_weights_runs_again(self):
        import numpy as np
        """A --model folder is no setting's file (cell.json fingerprints none), but each cell's own manifest.json lists
        what its process read (files_read): new weights in the same folder make its cells run again."""
        folder = os.path.join(self.directory, "bert-tiny")
        shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), folder)
        grid = self.write_grid("model.json", json.dumps({"experiment": "model", "axes": {"seed": [0, 1]}, "fixed": {
            "model": folder, "text": RTE, "samples": 2, "tokens": 16, "weights": "pretrained", "draws": 0}}))
        out = os.path.join(self.directory, "model-sweep")
        run("sweep", grid, "--out", out)
        self.assertIn("0 ran now, 2 reused, 0 failed", run("sweep", grid, "--out", out).stdout)
        weights = os.path.join(folder, "model.safetensors")
        tensors = read_safetensors(weights)
        tensors["encoder.layer.0.attention.self.query.weight"] = tensors["encoder.layer.0.attention.self.query.weight"] * 2
        write_safetensors(weights, tensors)
        again = run("sweep", grid, "--out", out)
        self.assertIn("2 ran now, 0 reused, 0 failed", again.stdout)
        self.assertIn(f"its input {weights} changed since the cell ran", again.stderr)
        # Weights that now fail every cell (a NaN): no table is left that shows the earlier weights' numbers.
        tensors["encoder.layer.0.attention.self.query.weight"][0, 0] = np.nan
        write_safetensors(weights, tensors)
        failed = run("sweep", grid, "--out", out, check=False)
        self.assertEqual(failed.returncode, 2, failed.stderr)
        self.assertIn("0 ran now, 0 reused, 2 failed", failed.stdout)
        self.assertFalse(os.path.exists(os.path.join(out, "sweep.csv")))
        self.assertEqual(os.listdir(os.path.join(out, "tables")), [])

    def test_a_cell_run_from_another_directory_runs_again(self):
        """A relative path names another file from another working directory: the same grid and --out from a second
        directory reused the first directory's cell (the manifest's working_directory now decides)."""
        import numpy as np
        grid = self.write_grid("relative.json", json.dumps({"experiment": "measure", "axes": {"file": ["m.npy"]}}))
        out = os.path.join(self.directory, "relative-out")
        for name, seed in (("first", 0), ("second", 1)):
            os.makedirs(os.path.join(self.directory, name))
            np.save(os.path.join(self.directory, name, "m.npy"), np.random.default_rng(seed).normal(size=(5, 3)))
        first = subprocess.run([os.path.abspath(BINARY), "sweep", grid, "--out", out], capture_output=True, text=True,
                               cwd=os.path.join(self.directory, "first"))
        self.assertEqual(first.returncode, 0, first.stderr)
        second = subprocess.run([os.path.abspath(BINARY), "sweep", grid, "--out", out], capture_output=True, text=True,
                                cwd=os.path.join(self.directory, "second"))
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("1 ran now, 0 reused", second.stdout)
        self.assertIn("it ran in another working directory (" + os.path.join(self.directory, "first") +
                      "), where 'm.npy' names another file", second.stderr)

    def write_grid(self, name, text):
        path = os.path.join(self.directory, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_bad_grids_stop_before_any_cell(self):
        cases = {
            "unknown.toml": ('experiment = "theory"\n[axes]\nlayerz = [1, 2]\n',
                             "unknown option '--layerz' (rankscope theory --help lists them)"),
            "reserved.toml": ('experiment = "theory"\n[axes]\nout = ["a", "b"]\n', "set by the sweep itself"),
            "experiment.json": ('{"experiment": "reproduce", "axes": {"seed": [1]}}', "unknown experiment 'reproduce'"),
            "repeat.json": ('{"experiment": "theory", "axes": {"seed": [1, 1]}}', "repeats the value 1"),
            "both.json": ('{"experiment": "theory", "fixed": {"seed": 1}, "axes": {"seed": [1, 2]}}', "both fixed and an axis"),
            "syntax.toml": ('experiment = "theory"\n[axes\n', "not valid TOML"),
            "range.json": ('{"experiment": "theory", "axes": {"layers": [2, 1000]}}', "1000"),
            "nested.json": ('{"experiment": "theory", "axes": {"layers": [[2]]}}', "setting 'layers' is a list here"),
            # A list flag written as a list: said how to write it (it said "must be a number, a string or a boolean").
            "list.toml": ('experiment = "measure"\n[fixed]\ncenters = ["mean", "rank1"]\n[axes]\nseed = [1, 2]\n',
                          "setting 'centers' is a list here: a flag's list is one string (\"mean,rank1\"), and values to "
                          "sweep over go under [axes]"),
            "format.toml": ('experiment = "theory"\n[fixed]\nformat = "json"\n[axes]\nseed = [1, 2]\n',
                            "setting 'format' changes only what a cell prints, which the sweep does not keep"),
            "twice.json": ('{"experiment": "trainability", "axes": {"depths": ["2,4", "2,2"]}}', "'2' is listed twice"),
        }
        for name, (text, message) in cases.items():
            path = os.path.join(self.directory, name)
            with open(path, "w") as f:
                f.write(text)
            out = os.path.join(self.directory, "bad-" + name)
            result = run("sweep", path, "--out", out, check=False)
            self.assertEqual(result.returncode, 2, name)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn(message, result.stderr, name)
            self.assertIn(name, result.stderr)
            self.assertFalse(os.path.exists(out), name)

    def test_mpirun_gives_the_local_tables(self):
        expect_mpi = os.environ.get("RANKSCOPE_EXPECT_MPI")
        self.assertIn(expect_mpi, ["0", "1"], "RANKSCOPE_EXPECT_MPI must be set by CMake")
        mpirun = shutil.which("mpirun")
        self.assertIsNotNone(mpirun, "mpirun is missing (scripts/install-deps.sh installs openmpi-bin)")
        out = os.path.join(self.directory, "mpi")
        result = subprocess.run([mpirun, "-np", "2", BINARY, "sweep", self.grid, "--out", out, "--workers", "1"],
                                capture_output=True, text=True, env=mpi_environment(), timeout=600)
        if expect_mpi == "0":
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("built without MPI", result.stderr)
            return
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("on 2 ranks", result.stdout)
        document = load_json(os.path.join(out, "sweep.json"))
        self.assertEqual(document["mpi_ranks"], 2)
        self.assertIn("Open MPI", document["mpi_library"])
        cells = read_csv(os.path.join(out, "cells.csv"))
        self.assertEqual({c["status"] for c in cells}, {"ran"})
        self.assertEqual({c["rank"] for c in cells}, {"0", "1"}, "both ranks ran cells")
        local = os.listdir(os.path.join(self.local, "tables"))
        self.assertEqual(sorted(os.listdir(os.path.join(out, "tables"))), sorted(local))
        for name in ["sweep.csv", "collapse_depth.csv"] + ["tables/" + t for t in local]:
            got, expected = data_lines(os.path.join(out, name)), data_lines(os.path.join(self.local, name))
            self.assertEqual(len(got), len(expected), name)
            for g, e in zip(got, expected):
                self.assertEqual(g, e, name)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
