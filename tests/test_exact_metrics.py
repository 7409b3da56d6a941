"""Metrics of exact integer QIs whose values lie more than 2**53 apart: a column's float dictionary
holds each value's distance from the smallest, so neighbouring values near 2**62 share a float;
classes are told apart by their keys and NCP reads spans computed in integers, so the metrics equal
a brute-force computation on Python integers and those of the column replaced by its ranks."""

import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from gpuanon import Mondrian
from gpuanon.table.encoding import encode
from gpuanon.table.exact import parse_exact
from gpuanon.metrics import compute_metrics, summary_from_labels
from gpuanon.table.schema import Schema
from expected import flat  # noqa: E402


N = 300


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(5)
    centers = np.array([-(2**62), 2**62])  # 2**63 apart: distances near 2**63 step by 2048
    x = centers[rng.integers(0, 2, N)] + rng.integers(0, 3000, N)
    return pd.DataFrame({"x": x.astype(np.int64), "y": rng.integers(0, 2, N)})


@pytest.fixture(scope="module")
def fitted(frame):
    m = Mondrian(k=5, quasi_identifiers=["x"], target="y", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = m.fit_transform(frame)
    return m, out


def test_ncp_and_classes_equal_a_brute_force_on_python_integers(frame, fitted):
    m, out = fitted
    bounds = [parse_exact(t, "int") for t in out["x"].astype(str)]
    xs = [int(v) for v in frame["x"]]
    rng = max(xs) - min(xs)
    assert m.metrics_["n_classes"] == len(set(bounds))
    ncp = sum(Fraction(hi - lo, rng) for lo, hi in bounds) / len(bounds)
    assert ncp > 0
    assert m.metrics_["ncp"] == pytest.approx(float(ncp), rel=1e-12, abs=0)
    assert m.metrics_["ncp_per_column"]["x"] == pytest.approx(float(ncp), rel=1e-12, abs=0)
    sizes = pd.Series(bounds).value_counts()
    assert m.metrics_["dm"] == int((sizes**2).sum()) + (N - len(out)) * N


def test_ranks_give_the_same_entropy_based_metrics(frame, fitted):
    """The same classes read on the column's dense ranks (floats exact): every metric but NCP (a
    span of values, not of ranks) is equal."""
    m, _ = fitted
    ranks = frame.assign(x=frame["x"].rank(method="dense").astype(np.int64))
    t = encode(ranks, Schema.from_frame(ranks, ["x"], target="y"))
    got = compute_metrics(summary_from_labels(t, m.labels_), k=5)
    for key in ("n_classes", "n_rows_out", "dm", "cm", "class_size", "entropy_coefficient_before",
                "entropy_coefficient_after", "entropy_loss", "entropy_coefficient_before_labels",
                "entropy_coefficient_after_labels", "entropy_loss_labels", "gionis_tassa"):
        assert flat(got[key]) == pytest.approx(flat(m.metrics_[key]), rel=1e-12, abs=1e-15), key

