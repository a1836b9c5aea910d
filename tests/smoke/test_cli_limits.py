"""Hostile flags: every numeric flag has a documented range (shown in --help), non-finite numbers and sizes that would
exhaust the machine are rejected before anything is written, NaN/Inf results are errors unless --allow-nonfinite, and
every error is ONE line `rankscope: error: <what> (<flag or file>)` with exit status 2."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from common import BINARY, FIXTURES, RTE, read_csv, read_safetensors, run, write_safetensors  # noqa: E402

def wait_until_caught(process, signals, timeout=300):
    """Waits until `process` has a handler for each of `signals` (SigCgt in /proc/<pid>/status): a signal sent before
    met the default action or a start-up that a busy machine or the sanitizers make longer than any fixed sleep."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            with open(f"/proc/{process.pid}/status") as status:
                caught = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended between poll() and open(): poll() says so next
        if all(caught >> (int(number) - 1) & 1 for number in signals):
            return
        time.sleep(0.01)
    raise AssertionError(f"no handler for {[signal.Signals(number).name for number in signals]} "
                         f"(exit status {process.poll()})")


# (arguments, text the error must name). --out is appended: the folder must not be created.
REJECTED = [
    # before the text is read (it tokenised it first and warned of [UNK] before the error)
    (["model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--stream", "on"], "bert-tiny is a bert model (--stream on)"),
    (["theory", "--seeds", "0"], "--seeds"),
    (["theory", "--seeds", "-3"], "--seeds"),
    (["theory", "--layers", "1000000000"], "--layers"),
    (["theory", "--tokens", "100000000"], "--tokens"),
    (["theory", "--init-scale", "nan"], "--init-scale"),
    (["theory", "--init-scale", "inf"], "--init-scale"),
    (["theory", "--init-scale", "1e308"], "--init-scale"),
    (["theory", "--init-scale", "0"], "--init-scale"),
    (["theory", "--threads", "1000000"], "--threads"),
    (["theory", "--seed", "18446744073709551616"], "--seed"),
    (["theory", "--seed", "-1"], "--seed"),
    (["theory", "--seed", "0x10"], "--seed"),
    (["theory", "--layers", "1e3"], "--layers"),
    (["theory", "--heads", "64", "--tokens", "512", "--layers", "100"], "--heads, --tokens, --layers"),
    (["paths", "sample", "--draws", "-1"], "--draws"),
    (["paths", "sample", "--draws", "0"], "--draws"),
    (["paths", "sample", "--tokens", "1"], "--tokens"),  # a 1 x 1 product: residual 0 at every length
    (["paths", "sample", "--layers", "64", "--heads", "64", "--tokens", "512"], "--layers, --heads, --tokens"),
    (["paths", "count", "--layers", "-1"], "--layers"),
    (["paths", "count", "--alpha", "0.5"], "--alpha needs --layers"),
    (["paths", "count", "--layers", "4"], "--layers needs --heads"),
    (["paths", "count", "--layers", "2", "--alpha", "0.5,nan"], "--alpha"),
    (["paths", "check", "--layers", "40"], "--layers"),
    (["measure", "--rank-tol", "-1"], "--rank-tol"),
    (["measure", "--rank-tol", "nan"], "--rank-tol"),
    (["measure", "--centers", "mean,bogus"], "--centers"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--samples", "100000000"], "--samples"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--tokens", "100000000"], "--tokens"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--samples", "4096", "--tokens", "4096"],
     "--samples, --tokens"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--variants", "SAN,evil"], "--variants"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--draws", "-5"], "--draws"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--sink-threshold", "nan"], "--sink-threshold"),
    (["task", "sort", "--lr", "1e308"], "--lr"),
    (["task", "sort", "--lr", "nan"], "--lr"),
    (["task", "sort", "--lr", "-0.1"], "--lr"),
    (["task", "sort", "--epochs", "-1"], "--epochs"),
    (["task", "sort", "--layers", "1000000000"], "--layers"),
    (["task", "sort", "--layers", "48", "--d-model", "2048"], "--layers, --d-model"),
    (["task", "sort", "--eval-count", "0"], "--eval-count"),
    (["task", "circle", "--variants", "SAN+skip'; system('touch PWNED') #"], "--variants"),
    (["task", "sort", "--repeats", "0"], "--repeats"),
    (["width-depth", "--task", "sort", "--depths", "0"], "--depths"),
    (["reproduce", "--threads", "-1"], "--threads"),
    # --device: a spelling that is no device, and CUDA on Debian's CPU-only libtorch (the test suite's build)
    (["theory", "--device", "gpu"], "--device"),
    (["theory", "--device", "cuda:x"], "--device"),
    (["theory", "--device", "cuda"], "--device"),
    (["model", "--model", "bert-base-cased", "--weights", "init", "--device", "cuda:0"], "--device"),
    (["task", "sort", "--device", "cuda:1"], "--device"),
    (["width-depth", "--task", "sort", "--device", "cuda"], "--device"),
    (["reproduce", "--quick", "--device", "cuda"], "--device"),
    # A list flag names each value once (duplicates ran or counted one thing twice); --alpha, one per layer, may repeat.
    (["model", "--model", "bert-base-cased", "--weights", "init", "--variants", "SAN,SAN"], "'SAN' is listed twice (--variants)"),
    (["task", "sort", "--paths", "5,05"], "'5' is listed twice (--paths)"),
    (["trainability", "--depths", "2,4,2"], "'2' is listed twice (--depths)"),
    (["failure-modes", "--query-key-scales", "1,1.0"], "a scale is listed twice"),  # (equal as numbers)
    (["embed", "a sentence", "  "], "empty text: every sentence needs a word (sentence 2)"),
    # --dump writes safetensors: another name misled readers, or was replaced by a result file of that name.
    (["model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--dump", "acts.npy"], "its name must end in .safetensors"),
    (["model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--dump", "residual.csv"], "(--dump residual.csv)"),
    # theory measures every layer at its exact composite centre, a linear program: 128 x 128 ran for over 10 minutes.
    (["theory", "--tokens", "128", "--d-model", "128"], "tokens x d_model = 16384 is too large (at most 4096) (--tokens, --d-model)"),
    # Bytes that are not UTF-8 on the command line: the sentence is named (the error named USE lite's vocab.json).
    (["embed", os.fsdecode(b"\xff\xfe"), "c"], "not valid UTF-8 (byte 1: 0xff) (sentence 1)"),
    (["task", "circle", "--seeds", "0,5,9"], "(a set of seeds that are not consecutive cannot be given) (--seeds)"),
    # --seed, --seed + 1, ... stop at the largest seed, 2^64 - 1 (they wrapped to 0, 1, ... before).
    (["theory", "--seed", "18446744073709551614", "--seeds", "3"],
     "seeds 18446744073709551614 to 18446744073709551616 pass the largest seed, 18446744073709551615 "
     "(at most 2 seeds from 18446744073709551614) (--seeds)"),
    (["trainability", "--seed", "18446744073709551615", "--seeds", "2"], "(at most 1 seed from 18446744073709551615) (--seeds)"),
    (["failure-modes", "--seed", "18446744073709551600", "--seeds", "17"], "to 18446744073709551616 pass the largest seed"),
    (["task", "circle", "--seed", "18446744073709551615"], "seeds 18446744073709551615 to 18446744073709551617 pass"),
    (["circle-regimes", "--seed", "18446744073709551610", "--seeds", "7"], "(at most 6 seeds from 18446744073709551610) (--seeds)"),
    # CLI11's "The following arguments were not expected: 3 --layrs", the mistyped option named first.
    (["theory", "--layrs", "3"], "unknown option '--layrs' (--help lists the options)"),
    (["theory", "7"], "unexpected argument '7' (--help lists the options)"),
    # Common options a command would accept and ignore are not its options: nothing is drawn in tokenize or embed,
    # tokenize and paths check give no NaN/Inf, and a NaN/Inf training loss always stops pretrain.
    (["tokenize", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--seed", "3"], "unknown option '--seed'"),
    (["tokenize", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", RTE, "--allow-nonfinite"],
     "unknown option '--allow-nonfinite'"),
    (["embed", "a sentence", "--seed", "3"], "unknown option '--seed'"),
    (["paths", "check", "--allow-nonfinite"], "unknown option '--allow-nonfinite'"),
    (["paths", "sample", "--draws", "2", "--allow-nonfinite"], "unknown option '--allow-nonfinite'"),
    (["pretrain", "--steps", "1", "--allow-nonfinite"], "unknown option '--allow-nonfinite'"),
    # CLI11's "--seed: At Most 1 required but received 2" for a repeated single-value option.
    (["theory", "--seed", "1", "--seed", "2"], "error: --seed given 2 times; it takes one value"),
    (["task", "sort", "--lr", "0.1", "--lr", "0.2", "--lr", "0.3"], "error: --lr given 3 times; it takes one value"),
    # An underflow is not "not a finite number" (it said so for 1e-400).
    (["task", "sort", "--lr", "1e-400"], "'1e-400' is too close to zero for a double (smallest normal 2.2e-308) (--lr)"),
    # A subnormal written exactly (hexadecimal) is no ERANGE for strtod: refused alike (it was accepted).
    (["task", "sort", "--lr", "0x1p-1074"], "'0x1p-1074' is too close to zero for a double (smallest normal 2.2e-308) (--lr)"),
]


class Limits(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="rankscope-limits-")

    def tearDown(self):
        shutil.rmtree(self.directory)

    def assert_one_line_error(self, result, names, status=2):
        self.assertEqual(result.returncode, status, result.stderr)
        lines = result.stderr.rstrip("\n").split("\n")
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("rankscope: error: "), lines[0])
        self.assertIn(names, lines[0])
        return lines[0]

    def test_flags_out_of_range_are_rejected_before_any_output(self):
        for args, names in REJECTED:
            with self.subTest(args=args):
                out = os.path.join(self.directory, "out")
                result = run(*args, "--out", out, check=False)
                self.assert_one_line_error(result, names)
                self.assertFalse(os.path.exists(out), f"{args} created {out}")

    def test_every_ranged_flag_of_every_command_rejects_nan(self):
        """NaN compares false, so a range check written as `value < low || value > high` lets it through (it did for
        --sink-threshold). Every flag whose --help shows a range, in every command, must refuse nan."""
        import re
        commands = [["measure"], ["theory"], ["paths", "sample"], ["paths", "count"], ["paths", "check"], ["model"],
                    ["tokenize"], ["embed"], ["task", "sort"], ["task", "circle"], ["circle-regimes"], ["width-depth"],
                    ["trainability"], ["failure-modes"], ["pretrain"], ["dynamics"], ["reproduce"], ["sweep"]]
        # Every subcommand the program lists is in this list (a new command cannot slip past the check).
        top = run("--help").stdout
        listed = set(re.findall(r"^\s{2}([a-z][a-z0-9-]*)\s{2,}", top.split("SUBCOMMANDS")[-1].split("Subcommands")[-1], re.M))
        self.assertGreater(len(listed), 10, top)
        self.assertEqual(listed - {c[0] for c in commands}, set())
        checked = 0
        for command in commands:
            help_text = run(*command, "--help").stdout
            for flag in sorted(set(re.findall(r"^\s+(--[a-z0-9-]+)\s[^\n]*\bin [\[(]", help_text, re.M))):
                with self.subTest(command=command, flag=flag):  # (inf fails any range check; NaN only isfinite)
                    out = os.path.join(self.directory, "out")
                    result = run(*command, flag, "nan", "--out", out, check=False)
                    line = self.assert_one_line_error(result, flag)
                    self.assertFalse(os.path.exists(out), line)
                    checked += 1
        self.assertGreater(checked, 30)  # the help texts were read: about 40 ranged flags over the commands

    def test_device_cpu_is_the_default_and_is_recorded(self):
        def table(out):
            with open(os.path.join(out, "theory.csv")) as f:
                return [line for line in f if not line.startswith("#")]
        small = ["theory", "--layers", "3", "--d-model", "8", "--tokens", "6", "--seeds", "1", "--threads", "1"]
        default, explicit = os.path.join(self.directory, "default"), os.path.join(self.directory, "cpu")
        run(*small, "--out", default)
        run(*small, "--device", "cpu", "--out", explicit)
        self.assertEqual(table(default), table(explicit))
        for out in (default, explicit):
            with open(os.path.join(out, "manifest.json")) as f:
                self.assertEqual(json.load(f)["device"], "cpu")

    def test_help_shows_ranges(self):
        help_text = run("theory", "--help").stdout
        for shown in ["in [1, 1000]", "in [1, 100]", "in (0, 100]", "in [0, 256]"]:
            self.assertIn(shown, help_text)
        self.assertIn("in (0, 1]", run("task", "sort", "--help").stdout)

    def test_a_mistyped_or_missing_subcommand_is_named_with_the_choices(self):
        for args, expected in [(["thoery", "--layers", "3"], "unknown subcommand 'thoery' of rankscope (one of: "),
                               (["paths", "smaple"], "unknown subcommand 'smaple' of rankscope paths (one of: check, "
                                                     "count, sample)"),
                               (["paths"], "rankscope paths needs a subcommand (one of: check, count, sample)"),
                               ([], "rankscope needs a subcommand (one of: ")]:
            result = run(*args, check=False)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(expected, result.stderr, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("theory", run("thoery", check=False).stderr)

    def test_format_only_where_the_output_has_that_format(self):
        # A --format a command would not honour is refused (it was once accepted and ignored by most commands).
        for args in [["theory", "--format", "json"], ["paths", "sample", "--format", "csv"],
                     ["paths", "check", "--format", "csv"]]:
            result = run(*args, check=False)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn("--format", result.stderr, args)
        self.assertEqual(json.loads(run("measure", "--format", "json").stdout)["shape"], [16, 8])

    def test_a_run_that_fails_part_way_leaves_no_earlier_manifest(self):
        # manifest.json is written last: a folder holding one pairs it with the files of that run. A re-run that fails
        # after its first file (here: findings.json is a directory) must not leave the old manifest beside new files.
        out = os.path.join(self.directory, "part-way")
        small = ["theory", "--layers", "2", "--d-model", "4", "--tokens", "3", "--seeds", "1", "--threads", "1"]
        run(*small, "--out", out)
        self.assertTrue(os.path.isfile(os.path.join(out, "manifest.json")))
        os.remove(os.path.join(out, "findings.json"))
        os.mkdir(os.path.join(out, "findings.json"))
        line = self.assert_one_line_error(run(*small, "--seed", "5", "--out", out, check=False), "findings.json")
        self.assertIn("cannot rename into place", line)
        self.assertFalse(os.path.exists(os.path.join(out, "manifest.json")), os.listdir(out))
        with open(os.path.join(out, "theory.csv")) as f:  # the new run's first file is there, with its own seed
            self.assertIn("--seed 5", f.read())

    def test_a_rerun_takes_the_earlier_runs_files_with_its_manifest(self):
        # A re-run of the same command into a folder removes what the earlier manifest lists: `model --draws 0` after
        # a run with E2 left its paths.csv and paths figures beside the new tables, unlisted but read as results.
        # Another command's files stay (a `dynamics --out` in a pretraining run's folder), and so do the user's own.
        out = os.path.join(self.directory, "rerun")
        bert = os.path.join(FIXTURES, "bert-tiny")
        model = ["model", "--model", bert, "--weights", "pretrained", "--threads", "1", "--out", out]
        dump = os.path.join(out, "acts.safetensors")
        run(*model, "--inputs", os.path.join(bert, "expected-transformer.safetensors"), "--draws", "3", "--dump", dump)
        for name in ("paths.csv", "paths.svg", "paths.gp"):
            self.assertTrue(os.path.isfile(os.path.join(out, name)), name)
        with open(os.path.join(out, "notes.txt"), "w") as f:
            f.write("mine\n")
        # The earlier run's --dump, read by this one as its --inputs, stays.
        run(*model, "--inputs", dump, "--draws", "0")
        left = set(os.listdir(out))
        self.assertTrue({"residual.csv", "residual.svg", "residual.gp", "manifest.json", "notes.txt", "acts.safetensors"} <= left,
                        left)
        self.assertEqual({"paths.csv", "paths.svg", "paths.png", "paths.pdf", "paths.gp"} & left, set())
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["subcommand"], "model")
        run("paths", "sample", "--layers", "2", "--heads", "2", "--draws", "2", "--tokens", "6", "--d-model", "6",
            "--out", out)
        left = set(os.listdir(out))
        self.assertTrue({"residual.csv", "residual.svg", "notes.txt", "paths.csv"} <= left, left)

    def test_a_rerun_finds_the_earlier_dump_where_it_was_written(self):
        # A reviewer's cases. The manifest held --dump as typed: a relative dump written from another directory, or a
        # dump path later made a link into --out, named a file of the user's there, and it was removed; a dump written
        # into --out from one directory stayed when the re-run started in another.
        bert = os.path.join(FIXTURES, "bert-tiny")
        model = [BINARY, "model", "--model", bert, "--inputs", os.path.join(bert, "expected-transformer.safetensors"),
                 "--weights", "pretrained", "--draws", "0", "--threads", "1"]
        a, b = os.path.join(self.directory, "A"), os.path.join(self.directory, "B")
        os.makedirs(a)
        subprocess.run([*model, "--dump", "acts.safetensors", "--out", "../B"], cwd=a, check=True, capture_output=True)
        self.assertTrue(os.path.isfile(os.path.join(a, "acts.safetensors")))
        with open(os.path.join(b, "acts.safetensors"), "w") as f:
            f.write("the user's\n")
        subprocess.run([*model, "--out", "."], cwd=b, check=True, capture_output=True)
        with open(os.path.join(b, "acts.safetensors")) as f:
            self.assertEqual(f.read(), "the user's\n")
        # A link where the dump was, to a file in --out.
        d, b2 = os.path.join(self.directory, "D"), os.path.join(self.directory, "B2")
        os.makedirs(d)
        subprocess.run([*model, "--dump", os.path.join(d, "acts.safetensors"), "--out", b2], check=True, capture_output=True)
        with open(os.path.join(b2, "important.safetensors"), "w") as f:
            f.write("keep\n")
        os.remove(os.path.join(d, "acts.safetensors"))
        os.symlink(os.path.join(b2, "important.safetensors"), os.path.join(d, "acts.safetensors"))
        subprocess.run([*model, "--out", b2], check=True, capture_output=True)
        self.assertTrue(os.path.isfile(os.path.join(b2, "important.safetensors")))
        # A dump in --out, typed relative (and --out with a trailing '/', which the check once refused), re-run from
        # elsewhere with another spelling of the folder: it goes.
        subprocess.run([*model, "--dump", "m/acts.safetensors", "--out", "m/"], cwd=self.directory, check=True,
                       capture_output=True)
        m = os.path.join(self.directory, "m")
        self.assertTrue(os.path.isfile(os.path.join(m, "acts.safetensors")))
        subprocess.run([*model, "--out", m], cwd="/", check=True, capture_output=True)
        self.assertFalse(os.path.exists(os.path.join(m, "acts.safetensors")))

    def test_a_task_run_after_another_takes_its_files(self):
        # task and width-depth listed no outputs in their manifests: a circle run after a sort run into one folder left
        # sort's paths_effectiveness files beside circle's manifest.
        out = os.path.join(self.directory, "tasks")
        run("task", "sort", "--layers", "2", "--d-model", "8", "--epochs", "1", "--train-count", "50", "--eval-count",
            "10", "--paths", "2", "--repeats", "1", "--threads", "1", "--out", out)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        for name in manifest["outputs"] + manifest["figures"]:
            self.assertTrue(os.path.isfile(os.path.join(out, name)), name)
        self.assertIn("eval_data.safetensors", manifest["outputs"])
        run("task", "circle", "--epochs", "1", "--train-count", "50", "--seeds", "1", "--threads", "1", "--out", out)
        left = set(os.listdir(out))
        self.assertEqual({n for n in left if n.startswith("paths_effectiveness") or n.startswith("eval_data")}, set(), left)
        self.assertIn("circle.svg", left)

    def test_an_unwritable_out_is_refused_before_computing(self):
        # It was found after the computation, naming a temporary file and no reason. Run as an unprivileged user
        # (root writes anywhere): setpriv when the tests run as root.
        os.chmod(self.directory, 0o755)
        locked = os.path.join(self.directory, "locked")
        os.mkdir(locked, 0o555)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        for out in [locked, os.path.join(locked, "new", "deeper")]:
            with self.subTest(out=out):
                result = subprocess.run(prefix + [os.path.abspath(BINARY), "trainability", "--depths", "2,4", "--out", out],
                                        capture_output=True, text=True)
                line = self.assert_one_line_error(result, f"cannot write into {locked}: Permission denied (--out {out})")
        self.assertEqual(os.listdir(locked), [])
        # Where even root cannot make a folder (access() says yes to root): tried, and --out named (it was
        # "cannot create directories: No such file or directory (/proc/rankscope-out)").
        line = self.assert_one_line_error(run("measure", "--out", "/proc/rankscope-out", check=False),
                                          "cannot write into /proc: ")
        self.assertTrue(line.endswith("(--out /proc/rankscope-out)"), line)

    def test_reproduce_models_need_distinct_folder_names(self):
        # A cell's folder is named after its model's folder: a/tiny and b/tiny both ran into e1_tiny, the second
        # overwrote the first, and the report showed the second model twice.
        for side in ["a", "b"]:
            shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), os.path.join(self.directory, side, "tiny"))
        a, b = (os.path.join(self.directory, side, "tiny") for side in ["a", "b"])
        out = os.path.join(self.directory, "out")
        line = self.assert_one_line_error(run("reproduce", "--quick", "--model", a, "--model", b, "--out", out, check=False),
                                          "(--model)")
        self.assertIn(f"'{a}' and '{b}' both make cell e1_tiny", line)
        line = self.assert_one_line_error(run("reproduce", "--quick", "--model", a, "--model", a, "--out", out, check=False),
                                          f"'{a}' is listed twice (--model)")
        self.assertFalse(os.path.exists(out))

    def test_exact_centre_of_a_large_matrix_is_refused(self):
        path = os.path.join(self.directory, "large.npy")
        np.save(path, np.random.default_rng(0).normal(size=(65, 64)))
        line = self.assert_one_line_error(run("measure", path, "--centers", "mean,exact", check=False), path)
        self.assertIn("the exact centre of a 65 x 64 matrix (4160 entries) is a linear program too large", line)
        run("measure", path, "--centers", "mean")  # the closed forms have no limit
        self.assertIn("note: the exact centre (an LP) is skipped", run("measure", path).stdout)  # the default skips it

    def test_canonical_numbers(self):
        # "010" is ten (CLI11 alone reads it as octal 8) and 2^64 - 1 is a valid seed.
        out = os.path.join(self.directory, "counts")
        run("paths", "count", "--layers", "010", "--heads", "1", "--out", out)
        with open(os.path.join(out, "path_counts.json")) as f:
            self.assertIn('"layers": 10', f.read())
        result = run("measure", "--seed", "18446744073709551615", "--format", "json")
        self.assertIn('"seed": 18446744073709551615', result.stdout)
        # The last seeds before 2^64 - 1 run, each recorded as itself.
        out = os.path.join(self.directory, "last-seeds")
        run("theory", "--layers", "2", "--d-model", "4", "--tokens", "3", "--seed", "18446744073709551614", "--seeds", "2",
            "--threads", "1", "--out", out)
        with open(os.path.join(out, "theory.csv")) as f:
            rows = [line.rstrip("\n").split(",") for line in f if not line.startswith("#")]
        seeds = {row[rows[0].index("seed")] for row in rows[1:]}
        self.assertEqual(seeds, {"18446744073709551614", "18446744073709551615"})

    def test_files_that_are_directories_or_missing(self):
        for args in [["measure", self.directory], ["theory", "--input", self.directory],
                     ["model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", self.directory],
                     ["paths", "sample", "--patterns", self.directory]]:
            with self.subTest(args=args):
                line = self.assert_one_line_error(run(*args, check=False), self.directory)
                self.assertIn("is a directory", line)
        line = self.assert_one_line_error(run("measure", os.path.join(self.directory, "none.npy"), check=False), "none.npy")
        self.assertIn("no such file", line)
        # A symbolic-link loop is named for what it is, as a file and as a model folder (the folder's message named the
        # USE-lite probe "<folder>/model.json" with the library's "status:" prefix; the file's said "no such file").
        loop = os.path.join(self.directory, "loop")
        if not os.path.lexists(loop):
            os.symlink(loop, loop)
        for args in [["measure", loop], ["model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", loop],
                     ["model", "--model", loop]]:
            with self.subTest(args=args):
                line = self.assert_one_line_error(run(*args, check=False), loop)
                self.assertIn("Too many levels of symbolic links", line)
                self.assertNotIn("model.json", line)
                self.assertNotIn("no such file", line)

    def test_inputs_rejected_after_parsing_leave_no_out_folder(self):
        # These inputs pass the flag checks and are rejected only when read, after a command may have created --out
        # (task creates it for its checkpoints): a failed run removes the folders it created that hold no file.
        empty = os.path.join(self.directory, "empty.txt")
        open(empty, "w").close()
        bad_npy = os.path.join(self.directory, "bad.npy")
        with open(bad_npy, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + b"\x00" * 8)
        for args, names in [(["task", "memorize", "--text", empty, "--epochs", "1"], "empty.txt"),
                            (["model", "--model", os.path.join(FIXTURES, "bert-tiny"), "--text", empty], "empty.txt"),
                            (["theory", "--input", bad_npy], "bad.npy"),
                            (["paths", "sample", "--patterns", bad_npy], "bad.npy")]:
            with self.subTest(args=args):
                out = os.path.join(self.directory, "new", "out")
                self.assert_one_line_error(run(*args, "--out", out, check=False), names)
                self.assertFalse(os.path.exists(os.path.dirname(out)), f"{args} left {os.path.dirname(out)}")
        # A folder that existed before the run is never removed, even when empty.
        existing = os.path.join(self.directory, "existing")
        os.mkdir(existing)
        self.assert_one_line_error(run("theory", "--input", bad_npy, "--out", existing, check=False), "bad.npy")
        self.assertTrue(os.path.isdir(existing))

    def test_nonfinite_results_are_errors_unless_allowed(self):
        # The cosine of a matrix without two nonzero rows (a zero matrix, one token) is undefined, not broken: its
        # row is left out, one warning names the matrices, and every other measure is written (the whole measurement
        # stopped on it).
        zeros = os.path.join(self.directory, "zeros.npy")
        np.save(zeros, np.zeros((5, 4)))
        out = os.path.join(self.directory, "zeros")
        result = run("measure", zeros, "--out", out)
        self.assertEqual(result.stderr, "rankscope: warning: mean_pairwise_cosine is undefined for the matrix (fewer "
                                        "than 2 nonzero rows: no pair of tokens), left out of the table: matrix 0 "
                                        f"({zeros})\n")
        rows = read_csv(os.path.join(out, "measures.csv"))
        self.assertNotIn("mean_pairwise_cosine", {r["measure"] for r in rows})
        self.assertIn("relative_residual", {r["measure"] for r in rows})
        batch = os.path.join(self.directory, "one_token_batch.npy")
        x = np.random.default_rng(0).normal(size=(7, 3, 4))
        x[[1, 4], 1:] = 0  # matrices 1 and 4: one nonzero row
        np.save(batch, x)
        result = run("measure", batch, "--format", "csv")
        self.assertIn("mean_pairwise_cosine is undefined for 2 of 7 matrices (fewer than 2 nonzero rows: no pair of "
                      "tokens), left out of the table: matrices 1, 4 (", result.stderr)
        cosines = [line.split(",")[0] for line in result.stdout.splitlines() if ",mean_pairwise_cosine," in line]
        self.assertEqual(cosines, ["0", "2", "3", "5", "6"])
        allowed = run("measure", zeros, "--allow-nonfinite", "--format", "json", check=False)
        self.assertEqual(allowed.returncode, 0, allowed.stderr)
        self.assertIn('"measure": "mean_pairwise_cosine",\n          "value": null', allowed.stdout)  # written as asked
        # X with entries of 1e300: the network overflows; the error names the variant and the layer.
        huge = os.path.join(self.directory, "huge.npy")
        np.save(huge, np.random.default_rng(0).normal(size=(6, 8)) * 1e300)
        out = os.path.join(self.directory, "theory")
        line = self.assert_one_line_error(run("theory", "--layers", "2", "--seeds", "1", "--input", huge, "--out", out,
                                              check=False), "variant")
        self.assertIn("layer", line)
        self.assertFalse(os.path.exists(os.path.join(out, "theory.csv")))

    def test_an_overflowing_checkpoint_is_an_error_unless_allowed(self):
        # bert-tiny with its query and key weights x 1e25: layer 0's scores overflow float32 and its softmax is NaN, and
        # so is every hidden state after it. `model` and `dynamics` stop naming the layer, the checkpoint and the flag,
        # and write nothing; with --allow-nonfinite they write the NaN rows. (The flag did nothing in either: both
        # stopped on the hidden state regardless; let through, `model` crashed in its findings.)
        bert = os.path.join(FIXTURES, "bert-tiny")
        steps = os.path.join(self.directory, "steps")
        shutil.copytree(bert, os.path.join(steps, "step0"))
        overflowing = os.path.join(steps, "step1")
        shutil.copytree(bert, overflowing)
        tensors = read_safetensors(os.path.join(overflowing, "model.safetensors"))
        for name in tensors:
            if name.endswith(("attention.self.query.weight", "attention.self.key.weight")):
                tensors[name] = tensors[name] * np.float32(1e25)
        write_safetensors(os.path.join(overflowing, "model.safetensors"), tensors)

        def refused_then_written(args, out, where):
            """`args` stop on layer 1's NaN state naming `where` and leave no `out`; with the flag they write it."""
            self.assert_one_line_error(run(*args, "--out", out, check=False),
                                       "non-finite hidden state at layer 1 (SAN) (pass --allow-nonfinite to write it "
                                       f"anyway) ({where})")
            self.assertFalse(os.path.exists(out))
            run(*args, "--allow-nonfinite", "--out", out)

        inputs = os.path.join(bert, "expected-transformer.safetensors")
        out = os.path.join(self.directory, "model")
        refused_then_written(["model", "--model", overflowing, "--inputs", inputs, "--weights", "pretrained", "--draws", "0"],
                             out, "step1 pretrained")
        rows = read_csv(os.path.join(out, "residual.csv"))
        self.assertEqual({r["layer"] for r in rows if r["mean"] == "nan"}, {"1", "2", "3"})  # every variant's
        self.assertEqual({r["mean"] == "nan" for r in rows if r["layer"] == "0"}, {False})  # the embeddings
        with open(os.path.join(out, "findings.json")) as f:
            notes = json.load(f)["notes"]
        self.assertTrue(any(n.startswith("Some relative residuals are NaN or Inf (written under --allow-nonfinite)")
                            for n in notes), notes)
        # dynamics: the words of bert-tiny's vocabulary (no [UNK]), two checkpoints of which the second overflows.
        text = os.path.join(self.directory, "text.txt")
        with open(text, "w") as f:
            f.write("".join(" ".join(f"tok{5 + (i * 7 + j) % 59}" for j in range(20)) + "\n" for i in range(4)))
        out = os.path.join(self.directory, "dynamics")
        refused_then_written(["dynamics", "--checkpoints", steps, "--text", text, "--samples", "2", "--tokens", "16",
                              "--draws", "5"], out, "steps step 1")
        rows = read_csv(os.path.join(out, "dynamics_residual.csv"))
        nan = {(r["step"], r["layer"]) for r in rows if r["log10_mean"] == "nan"}
        self.assertEqual(nan, {("1", layer) for layer in ("1", "2", "3")})
        with open(os.path.join(out, "findings.json")) as f:
            reading = json.load(f)["reading"]
        # (it read "The SAN is below 0.05 after layer 3 at every checkpoint from step 0 on": a NaN is not above it)
        self.assertIn("The SAN's relative residual after layer 3 is NaN at the last checkpoint.", reading)
        shares = {r["step"]: r["first_token_share_max"] for r in read_csv(os.path.join(out, "dynamics_attention.csv"))}
        self.assertEqual(shares["1"], "nan")  # (std::max(0, NaN) wrote 0)

    def test_reproduce_gives_allow_nonfinite_to_its_cells(self):
        # Each cell of `reproduce` is a command of its own: --allow-nonfinite reached none of them (--device did). It
        # goes to every cell but `paths count`, a closed form without the flag (which would refuse it).
        out = os.path.join(self.directory, "reproduce")
        run("reproduce", "--quick", "--cells", "theory", "--cells", "e6_path_counts", "--allow-nonfinite", "--out", out)
        argv = {}
        for cell in ("theory", "e6_path_counts"):
            with open(os.path.join(out, cell, "manifest.json")) as f:
                argv[cell] = json.load(f)["argv"]
        self.assertIn("--allow-nonfinite", argv["theory"])
        self.assertNotIn("--allow-nonfinite", argv["e6_path_counts"])

    def test_a_tensor_name_may_hold_a_colon(self):
        # FILE.safetensors:tensor splits at the first ".safetensors:" in the reader; the flag check split at the last
        # ':' and refused "no such file: x.safetensors:a" for a tensor named "a:b".
        path = os.path.join(self.directory, "colon.safetensors")
        matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
        write_safetensors(path, {"a:b": matrix, "c": matrix * 0})
        chosen = json.loads(run("measure", path + ":a:b", "--format", "json").stdout)
        plain = os.path.join(self.directory, "plain.npy")
        np.save(plain, matrix)
        self.assertEqual(chosen["matrices"], json.loads(run("measure", plain, "--format", "json").stdout)["matrices"])

    def test_paths_that_are_not_utf8_are_written_replaced(self):
        # JSON cannot hold the byte 0xff: the manifest (its argv and files_read) failed to serialize after the results
        # were written ("unexpected JSON content: invalid UTF-8 byte", naming no file). Now U+FFFD stands for it.
        folder = os.path.join(os.fsencode(self.directory), b"model \xff")
        shutil.copytree(os.fsencode(os.path.join(FIXTURES, "bert-tiny")), folder)
        out = os.path.join(os.fsencode(self.directory), b"out \xff")
        result = subprocess.run([BINARY, "model", "--model", folder, "--text", RTE, "--samples", "2", "--tokens", "16",
                                 "--draws", "0", "--weights", "pretrained", "--out", out], capture_output=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(out, b"manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        self.assertIn("model \ufffd", " ".join(manifest["argv"]))
        self.assertTrue(any(r["path"].endswith("model \ufffd/model.safetensors") for r in manifest["files_read"]),
                        manifest["files_read"])

    def test_dump_never_replaces_an_input(self):
        # --dump onto the checkpoint or the --inputs ids replaced them with activations (exit 0).
        import hashlib
        folder = os.path.join(self.directory, "bert-tiny")
        shutil.copytree(os.path.join(FIXTURES, "bert-tiny"), folder)
        ids = os.path.join(self.directory, "ids.safetensors")
        write_safetensors(ids, {"input_ids": np.arange(12, dtype=np.int64).reshape(2, 6) + 5})
        for target in (os.path.join(folder, "model.safetensors"), ids):
            with open(target, "rb") as f:
                before = hashlib.sha256(f.read()).hexdigest()
            out = os.path.join(self.directory, "dump-out")
            result = run("model", "--model", folder, "--inputs", ids, "--weights", "pretrained", "--draws", "0",
                         "--dump", target, "--out", out, check=False)
            self.assert_one_line_error(result, f"it would replace {target}, which this run reads (--dump {target})")
            with open(target, "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), before, target)
            self.assertFalse(os.path.exists(out))

    def test_a_bus_error_is_one_line(self):
        # SIGBUS comes when a memory-mapped checkpoint shrinks under the run (a race the test cannot time): "Bus
        # error" and exit 135 before; one line and exit 2 now. The signal is sent here by hand.
        process = subprocess.Popen([BINARY, "theory", "--layers", "12", "--seeds", "50", "--tokens", "64",
                                    "--d-model", "64", "--out", os.path.join(self.directory, "bus")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # rankscope installs its SIGBUS handler before SIGINT's and SIGTERM's (process.cpp); a fixed sleep sent the
        # signal into libtorch's start-up under the sanitizers, where ASan's own SIGBUS handler answered (exit 86).
        wait_until_caught(process, [signal.SIGTERM])
        process.send_signal(signal.SIGBUS)
        _, stderr = process.communicate(timeout=60)
        self.assertEqual(process.returncode, 2, stderr)
        self.assertEqual(stderr.strip().split("\n")[-1], "rankscope: error: an input file mapped into memory (a checkpoint) "
                         "was truncated or replaced while this run read it (SIGBUS); run again when it is stable")

    def test_theory_help_states_the_combined_limit(self):
        # tokens x d_model at most 4096 (the exact centres' linear programs) was refused (REJECTED above) but not shown
        # beside the flags' own ranges, so `--d-model 200` with the default 32 tokens came as a surprise.
        help_text = run("theory", "--help").stdout
        self.assertEqual(help_text.count("tokens x d_model at most 4096, for the exact centres"), 2, help_text)

    def test_ctrl_c_is_said(self):
        # SIGINT ends a run as the default action does (status 128 + 2), with one line that says so (it said nothing).
        process = subprocess.Popen([BINARY, "theory", "--layers", "24", "--seeds", "20", "--tokens", "64", "--d-model",
                                    "64", "--out", os.path.join(self.directory, "interrupted")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_until_caught(process, [signal.SIGINT])
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        self.assertEqual(process.returncode, -signal.SIGINT, stderr)
        self.assertEqual(stderr.strip().splitlines()[-1], "rankscope: interrupted by SIGINT")

    def test_error_lines_show_control_characters_escaped(self):
        # A file name holding ESC reached the terminal raw in the error line.
        result = run("measure", os.path.join(self.directory, "no\x1b[2Jsuch.npy"), check=False)
        line = self.assert_one_line_error(result, "no\\x1b[2Jsuch.npy")
        self.assertNotIn("\x1b", line)

    def test_control_characters_in_text_are_shown_escaped(self):
        """tokenize's table printed a sentence's ESC and tab raw (a terminal acted on `ESC[2J`); the JSON keeps them."""
        text = os.path.join(self.directory, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("clear \x1b[2J the\tscreen\n")
        folder = os.path.join(FIXTURES, "bert-tiny")
        table = run("tokenize", "--model", folder, "--text", text).stdout
        self.assertNotIn("\x1b", table)
        self.assertIn("\tclear \\x1b[2J the\\x09screen\n", table)  # the ids, a tab, the sentence
        document = json.loads(run("tokenize", "--model", folder, "--text", text, "--format", "json").stdout)
        self.assertEqual(document["sentences"][0]["text"], "clear \x1b[2J the\tscreen")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
