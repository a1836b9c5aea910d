"""rankscope measure against numpy and python3-torch, computed independently on the same matrices."""
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import close, measure_json, records, write_safetensors  # noqa: E402


def induced(x):
    a = np.abs(x)
    return {"l1": a.sum(0).max(), "linf": a.sum(1).max(), "frobenius": np.linalg.norm(x),
            "spectral": np.linalg.norm(x, 2)}


def all_norms(x):
    n = induced(x)
    n["composite"] = np.sqrt(n["l1"] * n["linf"])
    return n


def rank1_residual(x):
    u, s, vh = torch.linalg.svd(torch.from_numpy(x).double())
    return (torch.from_numpy(x).double() - s[0] * torch.outer(u[:, 0], vh[0])).numpy()


class MeasuresAgainstReference(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="rankscope-ref-")
        self.rng = np.random.default_rng(1234)

    def check_matrix(self, x, got, single):
        rtol = 1e-5 if single else 1e-9
        x = x.astype(np.float64)
        whole = all_norms(x)
        residuals = {"mean": x - x.mean(0, keepdims=True), "median": x - np.median(x, 0, keepdims=True),
                     "rank1": rank1_residual(x)}
        for norm, value in whole.items():
            close(f"norm {norm}", got[("norm", norm, "", -1)], value, rtol)
            for center, res in residuals.items():
                r = all_norms(res)[norm]
                close(f"residual {norm} {center}", got[("residual", norm, center, -1)], r, rtol, atol=1e-9 * value)
                close(f"relative {norm} {center}", got[("relative_residual", norm, center, -1)], r / value, rtol,
                      atol=1e-9)
        s = np.linalg.svd(x, compute_uv=False)
        for i, value in enumerate(s):
            close(f"singular value {i}", got[("singular_value", "", "", i)], value, rtol, atol=1e-12 * s[0])
        p = s / s.sum()
        close("effective rank", got[("effective_rank", "", "", -1)], np.exp(-(p * np.log(p)).sum()), rtol)
        close("stable rank", got[("stable_rank", "", "", -1)], (s ** 2).sum() / s[0] ** 2, rtol)
        reference_rank = np.linalg.matrix_rank(x.astype(np.float32) if single else x)
        self.assertEqual(got[("numerical_rank", "", "", -1)], reference_rank)
        unit = x / np.linalg.norm(x, axis=1, keepdims=True)
        cosine = unit @ unit.T
        n = x.shape[0]
        close("cosine", got[("mean_pairwise_cosine", "", "", -1)], (cosine.sum() - n) / (n * (n - 1)), rtol)

    def test_float64_npy(self):
        x = self.rng.normal(size=(12, 7)) + self.rng.normal(size=(1, 7)) * 3
        path = os.path.join(self.directory, "x.npy")
        np.save(path, x)
        self.check_matrix(x, records(measure_json(path)), single=False)

    def test_float32_batch_in_safetensors(self):
        x = self.rng.normal(size=(3, 10, 16)).astype(np.float32)
        x[1] = x[1] * 0.01 + 1  # nearly collapsed
        path = os.path.join(self.directory, "batch.safetensors")
        write_safetensors(path, {"hidden": x, "other": np.zeros((2, 2), np.float32)})
        document = measure_json(path + ":hidden")
        self.assertEqual(document["shape"], [3, 10, 16])
        for m in range(3):
            self.check_matrix(x[m], records(document, m), single=True)

    def test_low_rank_numerical_rank(self):
        x = (self.rng.normal(size=(20, 3)) @ self.rng.normal(size=(3, 9))).astype(np.float32)
        path = os.path.join(self.directory, "low.npy")
        np.save(path, x)
        got = records(measure_json(path))
        self.assertEqual(got[("numerical_rank", "", "", -1)], np.linalg.matrix_rank(x))
        self.assertEqual(got[("numerical_rank", "", "", -1)], 3)

    def test_half_precision_rank_tolerance_is_the_bound_of_their_rounding(self):
        # Matrices stored in float16 (.npy) and bfloat16 (safetensors). Rounding moves each singular value by at most
        # u * ||X||_F (u = eps / 2): the default tolerance relative to s_1 is u * ||X||_F / s_1, never below
        # max(n, d) * 2^-23. Rank-3 matrices stay rank 3 (float32's tolerance counted the rounding as rank: 8), and a
        # full-rank 768 x 768 bfloat16 matrix keeps most of its rank (max(n, d) * eps would be 6: rank 0).
        from common import Bf16
        low = self.rng.normal(size=(20, 3)) @ self.rng.normal(size=(3, 8))
        tall = self.rng.normal(size=(256, 3)) @ self.rng.normal(size=(3, 64))
        full = self.rng.normal(size=(768, 768))
        cases = [("half.npy", low.astype(np.float16), 2.0 ** -10, 3)]
        for name, x, expected in [("low", low, 3), ("tall", tall, 3), ("full", full, None)]:
            brain = Bf16(x.astype(np.float32))
            write_safetensors(os.path.join(self.directory, name + ".safetensors"), {"h": brain})
            cases.append((name + ".safetensors:h", brain, 2.0 ** -7, expected))
        np.save(os.path.join(self.directory, "half.npy"), cases[0][1])
        for path, stored, epsilon, expected in cases:
            values = (stored.values if isinstance(stored, Bf16) else stored).astype(np.float64)
            got = records(measure_json(os.path.join(self.directory, path), "--centers", "mean"))
            s = np.linalg.svd(values, compute_uv=False)
            tolerance = max(max(values.shape) * 2.0 ** -23, epsilon / 2 * np.sqrt((s ** 2).sum()) / s[0])
            close(path + " tolerance", got[("numerical_rank_tolerance", "", "", -1)], tolerance, 1e-12)
            rank = got[("numerical_rank", "", "", -1)]
            self.assertEqual(rank, np.linalg.matrix_rank(values, tol=tolerance * s[0]), path)
            if expected is not None:
                self.assertEqual(rank, expected, path)
                self.assertGreater(s[expected], max(values.shape) * 2.0 ** -23 * s[0], path)  # float32's would count it
            else:
                self.assertGreater(rank, 650, path)

    def test_attention_measures_of_softmax_matrices(self):
        logits = torch.from_numpy(self.rng.normal(size=(9, 9)) * 2)
        p = torch.softmax(logits, dim=-1).numpy()
        path = os.path.join(self.directory, "attention.npy")
        np.save(path, p)
        got = records(measure_json(path))
        entropy = -(p * np.log(p)).sum(1)
        close("entropy", got[("attention_mean_row_entropy", "", "", -1)], entropy.mean(), 1e-9)
        close("max entropy", got[("attention_max_row_entropy", "", "", -1)], entropy.max(), 1e-9)
        close("first token", got[("attention_first_token_share", "", "", -1)], p[:, 0].mean(), 1e-9)
        s = torch.linalg.svdvals(torch.from_numpy(p)).numpy()
        close("sigma2", got[("attention_sigma2", "", "", -1)], s[1], 1e-9)
        close("gap", got[("attention_spectral_gap", "", "", -1)], 1 - s[1] / s[0], 1e-9)

    def test_csv_input_matches_npy_input(self):
        x = self.rng.normal(size=(5, 4))
        np.save(os.path.join(self.directory, "m.npy"), x)
        np.savetxt(os.path.join(self.directory, "m.csv"), x, delimiter=",", fmt="%.17g")
        a = records(measure_json(os.path.join(self.directory, "m.npy")))
        b = records(measure_json(os.path.join(self.directory, "m.csv")))
        for key, value in a.items():
            close(str(key), b[key], value, 1e-12, atol=1e-14)

    def test_exact_never_above_mean_or_median(self):
        x = self.rng.standard_t(df=2, size=(8, 5))
        path = os.path.join(self.directory, "heavy.npy")
        np.save(path, x)
        got = records(measure_json(path))
        for norm in ["l1", "linf", "composite", "frobenius", "spectral"]:
            exact = got[("residual", norm, "exact", -1)]
            for center in ["mean", "median"]:
                self.assertLessEqual(exact, got[("residual", norm, center, -1)] * (1 + 1e-9), (norm, center))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
