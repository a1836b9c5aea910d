"""`rankscope reproduce --quick` end to end (into a folder whose name holds quotes, `$()` and backticks): every expected
file exists and parses, the report's links resolve, a second run reuses the finished cells after verifying their
hashes, tampered cells are recomputed with a message, SIGINT midway stops the whole run and leaves it marked
incomplete, a re-run completes it, and headless Chromium renders report.html."""
import csv
import math
import json
import hashlib
import os
import pathlib
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ElementTree

import numpy
from PIL import Image


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import RTE, read_safetensors, require, write_safetensors  # noqa: E402
from figure_layout import chromium, figure_layout, layout_problems  # noqa: E402


# The default model cell (use-lite) and a decoder, whose causal and bidirectional cells the report compares.
MODELS = ["--model", "use-lite", "--model", "llama-gqa"]


class Reproduce(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(RTE)  # the model cell's default text
        cls.sandbox = tempfile.mkdtemp(prefix="rankscope-reproduce-")
        cls.out = os.path.join(cls.sandbox, "run 'q' $(touch PWNED1) `touch PWNED2`")
        # The model cell's default text is the repository's data/RTE/train.tsv.
        cls.first = subprocess.run([os.path.abspath(sys.argv[1]), "reproduce", "--quick", *MODELS, "--out", cls.out],
                                   capture_output=True, text=True, cwd=cls.sandbox)
        if cls.first.returncode != 0:
            raise AssertionError(cls.first.stdout + cls.first.stderr)
        for root, _, files in os.walk(cls.sandbox):
            if any(name.startswith("PWNED") for name in files):
                raise AssertionError("a path was executed as a shell command: " + root)

    def test_files_exist_and_parse(self):
        expected_csv = {"theory/theory.csv": ["variant", "layer", "residual", "bound_step"],
                        "e6_path_counts/path_counts.csv": ["architecture", "length", "count", "share"],
                        "e1_use-lite/residual.csv": ["model", "weights", "variant", "layer", "mean", "std"],
                        "e1_use-lite/paths.csv": ["length", "relative_residual"],
                        "e1_use-lite/iterate.csv": ["variant", "step", "mean"],
                        "e3_circle/circle_trajectories.csv": ["variant", "step", "token", "x", "y"],
                        "e4_sort/paths_effectiveness.csv": ["task", "seed", "sub_path", "k", "n_paths", "repeat", "metric",
                                                            "value"],
                        "e5_width_depth_sort/width_depth_residual.csv": ["layers", "d_model", "layer", "mean"]}
        for path, columns in expected_csv.items():
            with open(os.path.join(self.out, path)) as f:
                rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
            self.assertGreater(len(rows), 5, path)
            for column in columns:
                self.assertIn(column, rows[0], path)
        with open(os.path.join(self.out, "theory", "theory.json")) as f:
            self.assertIn("variants", json.load(f))
        with open(os.path.join(self.out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(len(manifest["cells"]), 10)  # 8 of the paper, 2 beyond it
        self.assertTrue(manifest["complete"])
        self.assertEqual(manifest["status"], "complete")
        # The report read its cells' findings back: those are its own files, not inputs in files_read.
        inside = os.path.abspath(self.out) + os.sep
        self.assertFalse([r["path"] for r in manifest["files_read"] if r["path"].startswith(inside)], manifest["files_read"])
        # Each cell's manifest lists every output with its size and SHA-256.
        with open(os.path.join(self.out, "theory", "manifest.json")) as f:
            cell = json.load(f)
        self.assertTrue(cell["complete"])
        listed = {entry["file"]: entry for entry in cell["files"]}
        for name in ["theory.csv", "theory_summary.csv", "theory.json", "theory.svg", "theory.png", "theory.gp"]:
            self.assertIn(name, listed)
        with open(os.path.join(self.out, "theory", "theory.csv"), "rb") as f:
            data = f.read()
        self.assertEqual(listed["theory.csv"]["bytes"], len(data))
        self.assertEqual(listed["theory.csv"]["sha256"], hashlib.sha256(data).hexdigest())
        with open(os.path.join(self.out, "e4_sort", "task.json")) as f:
            task = json.load(f)
        self.assertGreater(task["whole_model_accuracy"], task["majority_accuracy"])
        for svg in ["theory/theory.svg", "e6_path_counts/path_counts.svg", "e1_use-lite/residual.svg",
                    "e1_use-lite/paths.svg", "e1_use-lite/iterate.svg", "e3_circle/circle.svg",
                    "e4_sort/paths_effectiveness.svg", "e5_width_depth_sort/width_depth.svg"]:
            root = ElementTree.parse(os.path.join(self.out, svg)).getroot()
            self.assertGreater(sum(1 for element in root.iter() if element.tag.endswith("path")), 10, svg)

    def test_figure_scripts_select_columns_by_name(self):
        positional = re.compile(r"\$\(?[0-9]|\b(column|strcol|stringcolumn)\(\s*[0-9]|\busing\s+[0-9]")
        scripts = sorted(p.relative_to(self.out).as_posix() for p in pathlib.Path(self.out).rglob("*.gp"))
        self.assertGreaterEqual(len(scripts), 9, scripts)
        for script in scripts:
            with open(os.path.join(self.out, script)) as f:
                text = f.read()
            uses_position = [line for line in text.splitlines() if not line.startswith("#") and positional.search(line)]
            self.assertEqual(uses_position, [], script)
            self.assertIn("set datafile columnheaders", text, script)
            self.assertRegex(text, r"set multiplot[^\n]* title", script)  # an overall title

    def test_report_links_resolve(self):
        with open(os.path.join(self.out, "report.html")) as f:
            html = f.read()
        links = re.findall(r'href="([^"#]+)"', html)
        self.assertGreater(len(links), 8)
        for link in links:
            self.assertTrue(os.path.exists(os.path.join(self.out, link)), link)
        self.assertNotRegex(html, r'(src|href)="https?://')  # works offline
        # 9, residual + paths of the two llama-gqa cells, and the two beyond-the-paper cells' figures
        self.assertEqual(html.count("<svg"), 15)
        self.assertIn("measured here", html)  # the tables of key numbers
        # Every figure numbered in order (a reader can cite "Figure 7"; #figure-7 links to it), its caption the
        # figure's own title as its SVG <title> holds it (gnuplot wrote "Gnuplot" there).
        import html as html_module
        figures = re.findall(r'<figure class="figure" id="figure-(\d+)">(.*?)</figure>', html, re.S)
        self.assertEqual([int(number) for number, _ in figures], list(range(1, 16)))
        for number, body in figures:
            caption = re.search(r'<figcaption class="meta"><a href="#figure-(\d+)">Figure \1</a>\. (.*?)\. <a', body, re.S)
            self.assertEqual(caption.group(1), number)
            title = re.search(r"<title>(.*?)</title>", body).group(1)
            self.assertNotEqual(title, "Gnuplot")
            self.assertEqual(html_module.unescape(caption.group(2)), html_module.unescape(title))

    def test_report_words_come_from_the_findings(self):
        import html as html_module
        with open(os.path.join(self.out, "report.html")) as f:
            page = f.read()
        with open(os.path.join(self.out, "verdicts.csv")) as f:
            verdicts = list(csv.DictReader(line for line in f if not line.startswith("#")))
        allowed = {"reproduced", "not reproduced", "not comparable at these settings"}
        self.assertGreater(len(verdicts), 10)
        cells = set()
        for row in verdicts:
            self.assertIn(row["verdict"], allowed, row)
            for column in ["claim", "paper", "measured", "criterion", "settings"]:
                self.assertTrue(row[column], (column, row))
            # The report's opening table quotes each check as the cell measured it.
            self.assertIn(html_module.escape(row["measured"]), page, row["measured"])
            self.assertEqual(row["part"], "beyond the paper" if row["cell"].startswith("beyond_") else "paper", row)
            cells.add(row["cell"])
        # E5 has no verdict: its path lengths are the count's L·H/(H+1), reported, not judged.
        self.assertEqual(cells, {"theory", "e6_path_counts", "e1_use-lite", "e1_llama-gqa", "e1_llama-gqa_bidirectional",
                                 "e3_circle", "e4_sort", "beyond_trainability", "beyond_failure_modes"})
        # The beyond-the-paper checks have their own section and count, after the paper's cells.
        beyond = [r for r in verdicts if r["part"] == "beyond the paper"]
        self.assertTrue(beyond)
        # --quick has no E3 regimes cell, so the section's opening does not name it.
        self.assertIn("Claims of the follow-up literature (each section names its source)", page)
        self.assertLess(page.index('id="e5_width_depth_sort"'), page.index('id="beyond-the-paper"'))
        self.assertLess(page.index('id="beyond-the-paper"'), page.index('id="beyond_trainability"'))
        # Every cell's reading in the report is the one its findings.json holds (generated from its numbers).
        for cell in cells:
            with open(os.path.join(self.out, cell, "findings.json")) as f:
                findings = json.load(f)
            self.assertTrue(findings["reading"], cell)
            self.assertIn(html_module.escape(findings["reading"], quote=True), page, cell)
            self.assertTrue(findings["key_numbers"], cell)  # every cell has a key-numbers table
        # Stated claims, checks of rankscope's own computation (the bound, E6's closed form) and rankscope's hypotheses
        # are counted apart in the opening sentences, from verdicts.csv's basis column, and the table says "holds" and
        # "supported" where a claim would say "reproduced" (a hypothesis read "reproduced").
        def count(part, basis, verdict):
            return sum(r["part"] == part and r["basis"] == basis and r["verdict"] == verdict for r in verdicts)
        for part, opening in (("paper", "what this run measured</h2>\n<p>"), ("beyond the paper", "Here: ")):
            claims = [count(part, "measurement", v) for v in ("reproduced", "not reproduced", "not comparable at these settings")]
            self.assertIn(f"{opening}{sum(claims)} checks of stated claims: {claims[0]} reproduced, {claims[1]} not "
                          f"reproduced, {claims[2]} not comparable at these settings", page)
        computation = count("paper", "computation", "reproduced")
        self.assertGreaterEqual(computation, 2)  # the per-layer bound, E6's mean path length
        self.assertEqual(sum(r["basis"] == "computation" for r in verdicts), computation)  # all hold
        self.assertIn(f"; besides, {computation} checks of rankscope's computation or a closed form ({computation} hold).",
                      page)
        self.assertEqual(count("beyond the paper", "hypothesis", "reproduced"), 1)  # larger query/key weights delay it
        self.assertIn("; besides, 1 hypothesis of rankscope's own (1 supported).", page)
        # The terms the tables use are defined once, before them (composite norm, exact centre, α_l, c_l were not).
        definitions = page[page.index('<details id="definitions">'):page.index('id="verdicts"')]
        for term in ("Composite norm", "exact centre", "Relative residual", "Skip ratio", "Per-layer bound",
                     "c<sub>l</sub> = 4γβHλ", "<em>holds</em>", "<em>supported</em>"):
            self.assertIn(term, definitions)
        # (each check is in the opening table and again under its cell)
        self.assertEqual(page.count('<td class="ok" data-label="verdict">supported</td>'), 2)
        self.assertEqual(page.count('<td class="ok" data-label="verdict">holds</td>'), 2 * computation)
        # On a narrow screen the verdict tables stack each row, the verdict first, every cell after its column's name
        # (they scrolled sideways with the verdict off-screen at 420 px).
        self.assertIn("@media (max-width:640px){table.verdicts tr:first-child{display:none}", page)
        self.assertIn('<td data-label="claim">', page)
        # Under each cell's verdicts, the settings they were judged at (verdicts.csv's column).
        for row in verdicts:
            self.assertIn("Judged at: " + html_module.escape(row["settings"]), page, row["settings"])
        # --quick says so at the top, listing what it reduced or skipped (computed from the full plan).
        self.assertIn('id="reduced-settings"', page)
        self.assertIn("e4_hull: not run (the full run only)", page)
        # A flag the full run leaves out is shown with the value it takes there (the task's default), not "default".
        self.assertIn("e4_sort: --epochs 15 (full run: 65), --repeats 2 (full run: 5)", page)
        self.assertIn("e3_circle: --epochs 60 (full run: 400)", page)
        self.assertNotIn("(full run: default)", page)
        self.assertNotIn("(full run: its default)", page)
        self.assertLess(page.index('id="verdicts"'), page.index('id="theory"'))

    def test_decoder_cells_are_compared_causal_vs_bidirectional(self):
        # The verdict recomputed here from the two cells' residual.csv: where the SAN's relative residual can first be
        # below 0.05 (a layer's 95% interval of the mean reaches below it) and where it surely is (wholly below),
        # causal against bidirectional. Student-t quantiles t_{0.975, n-1} from a printed table.
        t_table = {7: 2.3646242516, 31: 2.0395134464}

        def collapse_range(cell, variant):
            with open(os.path.join(self.out, cell, "residual.csv")) as f:
                rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))
                        if r["variant"] == variant and r["weights"] == "init"]
            by_layer = {int(r["layer"]): r for r in rows}
            self.assertEqual(sorted(by_layer), list(range(13)))
            n = int(rows[0]["n"])
            half = {l: t_table[n - 1] * float(r["std"]) / math.sqrt(n) for l, r in by_layer.items()}
            possible = next((l for l in range(1, 13) if float(by_layer[l]["mean"]) - half[l] < 0.05), None)
            sure = next((l for l in range(1, 13) if float(by_layer[l]["mean"]) + half[l] < 0.05), None)
            return possible, sure
        causal = collapse_range("e1_llama-gqa", "SAN")
        bidirectional = collapse_range("e1_llama-gqa_bidirectional", "SAN (bidirectional)")
        if causal[0] is None and bidirectional[0] is None or causal[1] == bidirectional[1] == 1:
            expected = "not comparable at these settings"
        elif bidirectional[1] is not None and (causal[0] is None or causal[0] > bidirectional[1]):
            expected = "reproduced"
        elif causal[1] is not None and (bidirectional[0] is None or bidirectional[0] >= causal[1]):
            expected = "not reproduced"
        else:
            expected = "not comparable at these settings"
        with open(os.path.join(self.out, "verdicts.csv")) as f:
            rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))
                    if r["claim"].startswith("Causal mask slows rank collapse")]
        self.assertEqual([r["cell"] for r in rows], ["e1_llama-gqa_bidirectional"])
        self.assertEqual(rows[0]["verdict"], expected, rows[0])
        with open(os.path.join(self.out, "report.html")) as f:
            page = f.read()
        self.assertIn("Compared with the causal cell e1_llama-gqa: Same init weights, causal vs bidirectional mask", page)

    def test_second_run_reuses_cells(self):
        again = subprocess.run([os.path.abspath(sys.argv[1]), "reproduce", "--quick", *MODELS, "--out", self.out],
                               capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), "..", ".."))
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.count("reused"), 10, again.stdout)
        with open(os.path.join(self.out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertTrue(all(c["status"] == "reused" for c in manifest["cells"]), manifest["cells"])

    def test_tampered_cells_are_recomputed(self):
        """Runs after test_second_run_reuses_cells (alphabetical order)."""
        theory_csv = os.path.join(self.out, "theory", "theory.csv")
        with open(theory_csv, "r+b") as f:
            f.truncate(os.path.getsize(theory_csv) // 2)
        os.remove(os.path.join(self.out, "e6_path_counts", "path_counts.json"))
        trajectories = os.path.join(self.out, "e3_circle", "circle_trajectories.csv")
        with open(trajectories, "r+b") as f:  # same size, one byte changed
            f.seek(os.path.getsize(trajectories) - 3)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(b"7" if byte != b"7" else b"3")
        again = subprocess.run([os.path.abspath(sys.argv[1]), "reproduce", "--quick", *MODELS, "--out", self.out],
                               capture_output=True, text=True, cwd=self.sandbox)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("recomputing theory: theory.csv has", again.stderr)
        self.assertIn("recomputing e6_path_counts: path_counts.json was deleted", again.stderr)
        self.assertIn("recomputing e3_circle: circle_trajectories.csv changed", again.stderr)
        self.assertEqual(again.stdout.count("reused"), 7, again.stdout)  # 10 cells, 3 tampered
        self.assertEqual(len(read_rows(theory_csv)), 12 * 2 * 9)  # complete again: 12 variants x 2 seeds x 9 layers
        self.assertTrue(os.path.exists(os.path.join(self.out, "e6_path_counts", "path_counts.json")))

    def test_chromium_renders_the_report(self):
        screenshot = os.path.join(self.out, "report-screenshot.png")
        url = pathlib.Path(self.out, "report.html").as_uri()
        shot = chromium(f"--screenshot={screenshot}", url)
        self.assertTrue(os.path.exists(screenshot), shot.stderr[-2000:])
        self.assertGreater(os.path.getsize(screenshot), 50_000)  # a blank page is a few kB
        self.assertNotIn("Uncaught", shot.stderr)
        self.assertNotIn(":CONSOLE(", shot.stderr)
        dom = chromium("--dump-dom", url)
        self.assertIn("rank collapse in attention networks", dom.stdout)
        self.assertIn("<svg", dom.stdout)

    def test_figure_text_stays_inside_and_apart(self):
        # Every figure of the report as Chromium lays it out, with the fonts this machine has (DejaVu Sans for
        # gnuplot's Helvetica, wider than Helvetica itself): no text outside its figure, no two texts over each other,
        # no key entry (sample and title) over another. E6's key once drew "BERT-base" over MobileBERT's sample.
        with open(os.path.join(self.out, "report.html")) as f:
            report = f.read()
        figures = figure_layout(report)
        self.assertEqual(len(figures), len(re.findall(r"<svg", report)))
        self.assertGreater(sum(len(figure["entries"]) for figure in figures), 40)  # the keys were found
        self.assertEqual(layout_problems(figures), [])
        # The PNG (drawn at twice the size) and the PDF (rasterised by poppler at 200 dpi: 2 pixels per unit, as the
        # PNG) have the SVG's proportions: a title's ink is as wide as the title's box in Chromium, within 3% (the
        # side bearings). Cairo draws a font of size s at 4/3 s; before the PNG's fontscale allowed for it, the PNG's
        # text was 4/3 the SVG's, and a key laid out for one overlapped in the other.
        by_title = {figure["title"]: figure for figure in figures}
        for figure, title in [("e6_path_counts/path_counts", "Distribution of path lengths"),
                              ("theory/theory", "Rank collapse of random SAN variants (mean over seeds, float64)")]:
            raster = os.path.join(self.sandbox, figure.replace("/", "-") + "-pdf")
            subprocess.run(["pdftoppm", "-r", "200", "-png", "-singlefile", os.path.join(self.out, figure + ".pdf"),
                            raster], check=True, capture_output=True, timeout=120)
            for image_file in (os.path.join(self.out, figure + ".png"), raster + ".png"):
                image = numpy.asarray(Image.open(image_file).convert("RGB")).astype(int)
                ink = image[:80].sum(axis=2) < 3 * 128  # the title's rows
                columns = numpy.flatnonzero(ink.any(axis=0))
                self.assertGreater(len(columns), 0, f"{image_file}: no title ink")
                box = by_title[title]["texts"][0]
                self.assertAlmostEqual((columns[-1] - columns[0] + 1) / 2 / (box["x1"] - box["x0"]), 1.0, delta=0.03,
                                       msg=image_file)
                # Likewise the key's first marker (a filled circle in the first colour, 9.6 units across in the SVG):
                # the pixels of its colour in the key's rows around it (only the first entry's sample has that colour
                # there) span as many rows as its box within 15% (the PNG's and PDF's points were 0.53 and 0.66 of
                # the SVG's before their pointscale allowed for it).
                marker = by_title[title]["entries"][0]["marker"]
                around = image[int(2 * marker["y0"]) - 8:int(2 * marker["y1"]) + 8]
                first_colour = numpy.abs(around - numpy.array([0x00, 0x72, 0xB2])).sum(axis=2) < 60  # the palette's
                ink_rows = numpy.flatnonzero(first_colour.any(axis=1))
                self.assertGreater(len(ink_rows), 0, f"{image_file}: no marker of the first colour in the key's rows")
                self.assertAlmostEqual((ink_rows[-1] - ink_rows[0] + 1) / 2 / (marker["y1"] - marker["y0"]), 1.0,
                                       delta=0.15, msg=image_file)

def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def processes_mentioning(text):
    """Pids of running processes whose command line contains `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


class InterruptAndResume(unittest.TestCase):
    def start_and_wait_for_e1_cell(self, sandbox, out):
        """Starts `reproduce --quick --seed 1` and returns (process, args, cell pids) once the e1_use-lite cell's process
        runs, with that process stopped (SIGSTOP): the quick cell takes about 1.2 s, so a signal sent "while it
        computes" raced with its end (a CI run once found its manifest written). The caller signals the parent, then
        continues the cell (SIGCONT), which then meets the signal before it can finish."""
        args = [os.path.abspath(sys.argv[1]), "reproduce", "--quick", "--seed", "1", "--out", out]
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sandbox)
        manifest_path = os.path.join(out, "manifest.json")
        deadline = time.time() + 300
        running = None
        while time.time() < deadline and process.poll() is None:
            try:
                with open(manifest_path) as f:
                    cells = {c["cell"]: c["status"] for c in json.load(f)["cells"]}
                if cells.get("e1_use-lite") == "running":
                    running = cells
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        self.assertIsNotNone(running, "the run never reached the e1_use-lite cell")
        cell = []
        while time.time() < deadline and not cell:
            cell = processes_mentioning(os.path.join(out, "e1_use-lite"))
            time.sleep(0.005)
        self.assertTrue(cell, "no cell process")
        for pid in cell:
            os.kill(pid, signal.SIGSTOP)
        return process, args, cell

    @staticmethod
    def continue_cell(pids):
        time.sleep(0.3)  # the parent's signal (forwarded, or the kernel's on its death) reaches the stopped cell
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def test_sigkill_of_the_parent_stops_the_cell(self):
        # SIGKILL cannot be caught or forwarded: the cell asked the kernel for SIGTERM when its parent dies.
        require(RTE)
        sandbox = tempfile.mkdtemp(prefix="rankscope-kill-")
        out = os.path.join(sandbox, "killed run")
        process, _, cell = self.start_and_wait_for_e1_cell(sandbox, out)
        process.kill()
        process.communicate(timeout=60)
        self.continue_cell(cell)
        self.assertEqual(process.returncode, -signal.SIGKILL)
        deadline = time.time() + 15
        while time.time() < deadline and processes_mentioning(out):
            time.sleep(0.1)
        self.assertEqual(processes_mentioning(out), [], "the cell outlived its killed parent")
        self.assertFalse(os.path.exists(os.path.join(out, "e1_use-lite", "manifest.json")),
                         "the stopped cell must not look finished")
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertFalse(json.load(f)["complete"])
        shutil.rmtree(sandbox)

    def test_sigint_midway_then_resume(self):
        require(RTE)
        sandbox = tempfile.mkdtemp(prefix="rankscope-resume-")
        out = os.path.join(sandbox, "resume run")
        manifest_path = os.path.join(out, "manifest.json")
        process, args, cell = self.start_and_wait_for_e1_cell(sandbox, out)
        process.send_signal(signal.SIGINT)  # to the parent alone, as `kill -INT` would
        self.continue_cell(cell)
        stdout, stderr = process.communicate(timeout=60)
        self.assertEqual(process.returncode, 130, stderr)
        self.assertIn("interrupted by SIGINT", stderr)
        self.assertEqual(len(stderr.strip().split("\n")), 1, stderr)
        time.sleep(0.5)
        self.assertEqual(processes_mentioning(out), [], "a child of the interrupted run is still running")
        with open(manifest_path) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["status"], "interrupted")
        self.assertFalse(manifest["complete"])
        self.assertEqual(manifest["seed"], 1)
        statuses = {c["cell"]: c["status"] for c in manifest["cells"]}
        self.assertEqual(statuses["theory"], "ran")
        self.assertEqual(statuses["e6_path_counts"], "ran")
        self.assertEqual(statuses["e1_use-lite"], "interrupted")
        self.assertEqual(statuses["e5_width_depth_sort"], "pending")
        self.assertFalse(os.path.exists(os.path.join(out, "e1_use-lite", "manifest.json")))
        with open(os.path.join(out, "report.html")) as f:
            html = f.read()
        self.assertIn("INCOMPLETE (interrupted)", html)
        self.assertIn("seed 1", html)
        self.assertIn("--seed 1", html)
        # Resume: the finished cells are verified and reused, the rest run, the run is complete.
        again = subprocess.run(args, capture_output=True, text=True, cwd=sandbox)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.count("reused"), 2, again.stdout)
        with open(manifest_path) as f:
            manifest = json.load(f)
        self.assertTrue(manifest["complete"])
        self.assertEqual({c["status"] for c in manifest["cells"]}, {"reused", "ran"})
        with open(os.path.join(out, "report.html")) as f:
            self.assertNotIn("INCOMPLETE", f.read())
        shutil.rmtree(sandbox)


class PretrainedHereCells(unittest.TestCase):
    """A `rankscope pretrain` run under --pretrained gives the full plan an E1/E2 cell (init beside pretrained) and a
    dynamics cell; --cells runs only those, and the report says what was left out."""

    def test_pretrained_run_becomes_two_cells(self):
        require(RTE)
        binary = os.path.abspath(sys.argv[1])
        sandbox = tempfile.mkdtemp(prefix="rankscope-reproduce-pretrained-")
        run_dir = os.path.join(sandbox, "pretrain", "tiny")
        trained = subprocess.run([binary, "pretrain", "--arch", "albert", "--corpus", RTE, "--layers", "2",
                                  "--d-model", "32", "--heads", "2", "--embedding-size", "16", "--vocab", "400",
                                  "--tokens", "32", "--batch", "8", "--steps", "10", "--out", run_dir],
                                 capture_output=True, text=True)
        self.assertEqual(trained.returncode, 0, trained.stderr)
        out = os.path.join(sandbox, "report")
        args = [binary, "reproduce", "--pretrained", os.path.join(sandbox, "pretrain"), "--cells", "e1_pretrained_tiny",
                "--cells", "dynamics_tiny", "--out", out]
        result = subprocess.run(args, capture_output=True, text=True, cwd=sandbox)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual([c["cell"] for c in manifest["cells"]], ["e1_pretrained_tiny", "dynamics_tiny"])
        rows = read_rows(os.path.join(out, "e1_pretrained_tiny", "residual.csv"))
        self.assertEqual({r["weights"] for r in rows}, {"init", "pretrained"})
        steps = {int(r["step"]) for r in read_rows(os.path.join(out, "dynamics_tiny", "dynamics_residual.csv"))}
        self.assertEqual(steps, {0, 1, 2, 5, 10})
        with open(os.path.join(out, "report.html")) as f:
            html = f.read()
        for text in ("only the cells e1_pretrained_tiny, dynamics_tiny ran (--cells)", "dynamics_tiny/dynamics_heatmap.png",
                     "e1_pretrained_tiny/residual.png"):
            self.assertTrue(text in html, text)
        verdicts = read_rows(os.path.join(out, "verdicts.csv"))
        self.assertIn("dynamics", {r["experiment"] for r in verdicts})
        # An unknown cell name is an error naming the cells there are.
        wrong = subprocess.run(args[:-2] + ["--cells", "e1_nothing", "--out", out], capture_output=True, text=True, cwd=sandbox)
        self.assertEqual(wrong.returncode, 2)
        self.assertIn("no cell 'e1_nothing'", wrong.stderr)
        self.assertIn("dynamics_tiny", wrong.stderr)
        # The run retrained in place (here: its final weights rewritten): the cells that read them run again, though
        # their command and outputs are unchanged (each cell's manifest lists the files it read, with SHA-256).
        weights = os.path.join(run_dir, "final", "model.safetensors")
        tensors = read_safetensors(weights)
        name = sorted(n for n in tensors if n.endswith("query.weight"))[0]
        tensors[name] = tensors[name] * 2
        write_safetensors(weights, tensors)
        again = subprocess.run(args, capture_output=True, text=True, cwd=sandbox)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn(f"recomputing e1_pretrained_tiny: its input {weights} changed since the cell ran", again.stderr)
        shutil.rmtree(sandbox)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
