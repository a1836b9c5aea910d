"""`rankscope reproduce --quick` end to end: every expected file exists and parses, the report's links resolve, a
second run reuses the finished cells, and headless Chromium renders report.html."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree


RTE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "RTE", "train.tsv")


@unittest.skipUnless(os.path.exists(RTE), "shared RTE data needed (the default text)")
class Reproduce(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = os.path.join(tempfile.mkdtemp(prefix="rankscope-reproduce-"), "run")
        # The model cell reads ../shared/data/RTE relative to the working directory: run from the repository root.
        cls.first = subprocess.run([os.path.abspath(sys.argv[1]), "reproduce", "--quick", "--out", cls.out],
                                   capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), "..", ".."))
        if cls.first.returncode != 0:
            raise AssertionError(cls.first.stdout + cls.first.stderr)

    def test_files_exist_and_parse(self):
        expected_csv = {"theory/theory.csv": ["variant", "layer", "residual", "bound_step"],
                        "e6_path_counts/path_counts.csv": ["architecture", "length", "count", "share"],
                        "e1_use-lite/residual.csv": ["model", "weights", "variant", "layer", "mean", "std"],
                        "e1_use-lite/paths.csv": ["length", "relative_residual"],
                        "e1_use-lite/iterate.csv": ["variant", "step", "mean"],
                        "e3_circle/circle_trajectories.csv": ["variant", "step", "token", "x", "y"],
                        "e4_sort/paths_effectiveness.csv": ["task", "sub_path", "k", "n_paths", "repeat", "metric", "value"],
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
        self.assertEqual(len(manifest["cells"]), 6)
        with open(os.path.join(self.out, "e4_sort", "task.json")) as f:
            task = json.load(f)
        self.assertGreater(task["whole_model_accuracy"], task["majority_accuracy"])
        for svg in ["theory/theory.svg", "e6_path_counts/path_counts.svg", "e1_use-lite/residual.svg",
                    "e1_use-lite/paths.svg", "e1_use-lite/iterate.svg", "e3_circle/circle.svg",
                    "e4_sort/paths_effectiveness.svg", "e5_width_depth_sort/width_depth.svg"]:
            root = ElementTree.parse(os.path.join(self.out, svg)).getroot()
            self.assertGreater(sum(1 for element in root.iter() if element.tag.endswith("path")), 10, svg)

    def test_report_links_resolve(self):
        with open(os.path.join(self.out, "report.html")) as f:
            html = f.read()
        links = re.findall(r'href="([^"#]+)"', html)
        self.assertGreater(len(links), 8)
        for link in links:
            self.assertTrue(os.path.exists(os.path.join(self.out, link)), link)
        self.assertNotRegex(html, r'(src|href)="https?://')  # works offline
        self.assertEqual(html.count("<svg"), 9)
        self.assertIn("measured here", html)  # the tables of key numbers

    def test_second_run_reuses_cells(self):
        again = subprocess.run([os.path.abspath(sys.argv[1]), "reproduce", "--quick", "--out", self.out],
                               capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), "..", ".."))
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.count("reused"), 6, again.stdout)

    @unittest.skipUnless(shutil.which("chromium"), "Debian's chromium package needed")
    def test_chromium_renders_the_report(self):
        profile = tempfile.mkdtemp(prefix="rankscope-chromium-")
        screenshot = os.path.join(self.out, "report-screenshot.png")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1280,2400", "--enable-logging=stderr", "--v=0"]
        url = "file://" + os.path.join(self.out, "report.html")
        shot = subprocess.run(["chromium", *flags, f"--screenshot={screenshot}", url], capture_output=True, text=True,
                              timeout=120)
        self.assertTrue(os.path.exists(screenshot), shot.stderr[-2000:])
        self.assertGreater(os.path.getsize(screenshot), 50_000)  # a blank page is a few kB
        self.assertNotIn("Uncaught", shot.stderr)
        self.assertNotIn(":CONSOLE(", shot.stderr)
        dom = subprocess.run(["chromium", *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
        self.assertIn("rank collapse in attention networks", dom.stdout)
        self.assertIn("<svg", dom.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
