"""Helpers shared by the reference tests: run the rankscope binary, write independent .npy/.safetensors files."""
import csv
import json
import os
import struct
import subprocess
import sys

import numpy as np

BINARY = sys.argv[1] if len(sys.argv) > 1 else "build/bin/rankscope"

# The repository's copies of the conformance fixtures and the RTE text (tests never read ../shared, and never skip:
# a missing file is a failure).
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
RTE = os.path.join(REPO, "data", "RTE", "train.tsv")


def require(*paths):
    """Fails (never skips) when a file the test needs is not in the repository."""
    for path in paths:
        if not os.path.exists(path):
            raise AssertionError(f"the repository's test data is missing: {path}")


def read_csv(path):
    """Rows of a CSV rankscope wrote, skipping its '#' provenance lines."""
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def load_json(path):
    with open(path) as f:
        return json.load(f)


def run(*args, check=True):
    result = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"rankscope {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr}")
    return result


def measure_json(path, *extra):
    return json.loads(run("measure", path, "--format", "json", *extra).stdout)


def records(document, matrix=0):
    """{(measure, norm, center, index): value} for one matrix of a `measure --format json` document."""
    out = {}
    for record in document["matrices"][matrix]["measures"]:
        key = (record["measure"], record.get("norm", ""), record.get("center", ""), record.get("index", -1))
        out[key] = record["value"]
    return out


class Bf16:
    """A float array rounded to bfloat16 (round to nearest even): `bits` (uint16) for the file, `values` (float32,
    exactly the stored numbers) for the reference."""

    def __init__(self, array):
        words = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
        rounded = (words + 0x7FFF + ((words >> 16) & 1)) >> 16
        self.bits = rounded.astype(np.uint16)
        self.values = (self.bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors, metadata=None):
    """An independent writer of the published safetensors layout (no library). A BF16 tensor is given as its raw
    bits, a Bf16 wrapper (numpy has no bfloat16)."""
    header, offset, blobs = {}, 0, []
    codes = {np.float32: "F32", np.float64: "F64", np.int64: "I64", np.float16: "F16", np.bool_: "BOOL", Bf16: "BF16"}
    if metadata:
        header["__metadata__"] = metadata
    for name, array in tensors.items():
        code = codes[type(array)] if isinstance(array, Bf16) else codes[np.asarray(array).dtype.type]
        array = np.ascontiguousarray(array.bits if isinstance(array, Bf16) else array)
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def close(name, got, expected, rtol, atol=0.0):
    if not np.isclose(got, expected, rtol=rtol, atol=atol):
        raise AssertionError(f"{name}: rankscope {got!r} vs reference {expected!r} (rtol {rtol}, atol {atol})")


def read_safetensors(path):
    """An independent reader of the published safetensors layout: {name: numpy array}."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    codes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "F16": np.float16}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=codes[entry["dtype"]]).reshape(entry["shape"])
    return out
