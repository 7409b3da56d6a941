"""Metrics and output on a device read their single numbers together: the compactions of known size
(gpuanon/metrics/runs.py), dense ids by a sort, and the per-stage sync budgets, on the strict CuPy
double (tests/cupy_double.py) against NumPy. The double counts syncs and checks the API; it cannot
show how long a read takes on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cupy", reason="the device double reads CuPy's API from the cupy-cuda12x wheel")

from cupy_double import DeviceDouble  # noqa: E402
from gpuanon import Mondrian  # noqa: E402
from gpuanon import backend as B  # noqa: E402
from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass  # noqa: E402
from gpuanon.metrics import runs as R  # noqa: E402
from gpuanon.metrics.entropy import N_BINS, numeric_domain  # noqa: E402
from gpuanon.metrics.formulas import dense_ids, dense_ids_x  # noqa: E402
from kernels.keys import MISSING  # noqa: E402


def _columns(rng):
    many = rng.integers(0, 5000, 3000).astype(np.uint32)  # binned: more than 256 distinct values
    heavy = np.where(rng.random(3000) < 0.6, 7, rng.integers(0, 4000, 3000)).astype(np.uint32)  # bins merge
    missing = many.copy()
    missing[rng.random(3000) < 0.1] = MISSING
    few = rng.integers(0, 40, 3000).astype(np.uint32)
    single = np.full(5, 3, dtype=np.uint32)
    return {0: (many, True), 1: (heavy, True), 2: (missing, True), 3: (few, False), 4: (few, True),
            5: (single, True)}


@pytest.mark.parametrize("group_bytes", [1 << 30, 1])
def test_device_runs_many_equals_runs(monkeypatch, group_bytes):
    monkeypatch.setattr(R, "GROUP_BYTES", group_bytes)
    cols = _columns(np.random.default_rng(0))
    dev = DeviceDouble()
    with B.use_device_module(dev):
        got = R.device_runs_many({j: (dev.asarray(k), num) for j, (k, num) in cols.items()}, dev)
        syncs = dev.stats.summary()["syncs"]
        got = {j: tuple(B.to_host(v) if hasattr(v, "shape") else v for v in t) for j, t in got.items()}
    assert syncs == (1 if group_bytes > 1 else len(cols))  # one read per group of columns
    for j, (keys, numeric) in cols.items():
        vals, counts = R.runs(np.sort(keys), np)
        g_vals, g_counts, g_rep, g_missing, g_starts = got[j]
        assert g_vals.tolist() == vals.tolist() and g_counts.tolist() == counts.tolist()
        assert g_rep.tolist() == np.flatnonzero(counts > 1).tolist()
        assert g_missing == bool(numeric and vals[-1] == MISSING)
        if numeric:
            dom = numeric_domain(counts, g_missing, np, N_BINS)
            assert g_starts == dom.bin_start.shape[0] - 1 - int(g_missing) or not dom.binned


def test_dense_ids_x_equals_dense_ids():
    a = np.random.default_rng(1).integers(0, 50, 400).astype(np.uint64) << np.uint64(20)
    ids, n = dense_ids(a)
    dev = DeviceDouble()
    with B.use_device_module(dev):
        g_ids, g_n = dense_ids_x(dev.asarray(a))
        assert dev.stats.summary()["syncs"] == 0
        assert B.to_host(g_ids).tolist() == ids.tolist() and int(B.to_scalar(g_n)) == n


def test_metrics_and_output_syncs_do_not_grow_with_the_qis():
    """One HEPMASS-shaped fit_transform (28 QIs): metrics read 4 times (the columns' counts, the
    class merge, the single numbers, the class-size histogram), the minmax output twice."""
    df = make_hepmass(4000, random_state=0)
    dev = DeviceDouble()
    with B.use_device_module(dev):
        Mondrian(k=10, quasi_identifiers=list(HEPMASS_FEATURES), sensitive="label", output_format="minmax",
                 backend="gpu", progress=False).fit_transform(df)
    st = dev.stats.summary()["stages"]
    metrics = sum(v for k, v in st["metrics"].items() if k.startswith("syncs"))
    output = sum(v for k, v in st["output"].items() if k.startswith("syncs"))
    assert metrics <= 4 and output <= 2, (metrics, output)
