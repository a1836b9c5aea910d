"""Shared helpers of the binding tests: the built command-line program, its CSV files as typed columns, safetensors
I/O written from the published layout (no library), and the repository's fixtures. Nothing here skips: a missing
program, module or fixture is a failure."""
import csv
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import rankscope

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
RTE = os.path.join(REPO, "data", "RTE", "train.tsv")


def cli_binary():
    binary = os.environ.get("RANKSCOPE_BIN", os.path.join(REPO, "build", "bin", "rankscope"))
    if not os.access(binary, os.X_OK):
        raise AssertionError(f"the rankscope program is missing: {binary} (build it; ctest sets RANKSCOPE_BIN)")
    return binary


def run_cli(*args, check=True):
    """Runs the command-line program; returns the CompletedProcess (fails the test on a non-zero exit when check)."""
    result = subprocess.run([cli_binary(), *map(str, args)], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"rankscope {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr}")
    return result


def cli_error(*args):
    """The one-line message of a failing command: 'rankscope: error: <message>' -> '<message>'."""
    result = run_cli(*args, check=False)
    assert result.returncode == 2, (result.returncode, result.stderr)
    line = result.stderr.strip()
    assert line.startswith("rankscope: error: "), line
    return line[len("rankscope: error: "):]


def read_csv_rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def assert_table_equals_csv(table, path, exact=True, rtol=0.0):
    """A binding table (dict of numpy columns) against a CSV the command wrote: same columns in the same order, same
    number of rows, every cell equal (numbers compared as floats; the CSV's reals are shortest round-trip spellings, so
    equality is exact when both come from the same computation)."""
    rows = read_csv_rows(path)
    with open(path) as f:
        header = next(line for line in f if not line.startswith("#")).strip().split(",")
    assert list(table.keys()) == header, (list(table.keys()), header)
    lengths = {len(values) for values in table.values()}
    assert lengths == {len(rows)}, (lengths, len(rows), path)
    for name, values in table.items():
        cells = [row[name] for row in rows]
        if values.dtype == object:
            assert list(values) == cells, (name, list(values)[:5], cells[:5])
        else:
            expected = np.array([float(c) if c != "" else np.nan for c in cells])
            got = values.astype(np.float64)
            if exact:
                same = (got == expected) | (np.isnan(got) & np.isnan(expected))
                assert same.all(), (name, got[~same][:5], expected[~same][:5])
            else:
                np.testing.assert_allclose(got, expected, rtol=rtol, equal_nan=True, err_msg=name)


def read_safetensors(path):
    """{name: numpy array} and the metadata of a .safetensors file, read from the published layout."""
    codes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "F16": np.float16}
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype=np.dtype(codes[entry["dtype"]]).newbyteorder("<")).reshape(
            entry["shape"]).copy()
    return tensors, metadata


# The repository's independent writer of the safetensors layout (also used by the command-line reference tests).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from common import write_safetensors  # noqa: E402,F401


def composite_norm(m):
    """sqrt(max column abs sum * max row abs sum) over the last two axes."""
    return np.sqrt(np.abs(m).sum(-2).max(-1) * np.abs(m).sum(-1).max(-1))


def relative_residual_reference(x):
    """The paper's measure from its definition: ||X - 1 mean^T||_{1,inf} / ||X||_{1,inf}."""
    return composite_norm(x - x.mean(-2, keepdims=True)) / composite_norm(x)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def pytest_report_header(config):
    return f"rankscope module: {rankscope.__file__} ({rankscope.version()})"
