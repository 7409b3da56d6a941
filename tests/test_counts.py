"""kernels.counts on NumPy and on the strict device double: the same values as numpy.bincount /
numpy.nonzero, and no read of the device (the reason they exist)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.counts import count_values, indices_of

pytest.importorskip("cupy", reason="the device double reads CuPy's API from the cupy-cuda12x wheel")

from cupy_double import DeviceDouble, DeviceDoubleError  # noqa: E402
from gpuanon import backend as B  # noqa: E402


@pytest.mark.parametrize("weights", [None, "int", "bool"])
def test_count_values_equals_bincount_without_a_sync(weights):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 37, 5000)
    w = {None: None, "int": rng.integers(0, 9, 5000), "bool": rng.random(5000) < 0.3}[weights]
    want = np.bincount(idx, weights=w, minlength=50).astype(np.int64)
    got = count_values(idx, 50, np, weights=w)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    dev = DeviceDouble()
    with B.use_device_module(dev), B.stage("demo"):
        di, dw = B.to_device(idx, dev), None if w is None else B.to_device(w, dev)
        before = dev.stats.summary()["ops"]
        d = count_values(di, 50, dev, weights=dw)
        s = dev.stats.summary()
        s["ops"] -= before
        np.testing.assert_array_equal(B.to_host(d), want)
    assert s["syncs"] == 0 and s["ops"] <= 3, s


def test_count_values_refuses_float_weights_and_out_of_range():
    with pytest.raises(TypeError, match="weights: must hold integers"):
        count_values(np.array([0, 1]), 2, weights=np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match=r"idx: values must lie in \[0, 2\)"):
        count_values(np.array([0, 2]), 2)
    with pytest.raises(ValueError):
        count_values(np.array([-1, 0]), 2)
    assert count_values(np.zeros(0, dtype=np.int64), 3).tolist() == [0, 0, 0]


@pytest.mark.parametrize("p", [0.0, 0.2, 1.0])
def test_indices_of_equals_nonzero_without_a_sync(p):
    mask = np.random.default_rng(1).random(1000) < p
    want = np.flatnonzero(mask)
    np.testing.assert_array_equal(indices_of(mask, want.shape[0]), want)
    with pytest.raises(ValueError, match="count"):
        indices_of(mask, want.shape[0] + 1)
    dev = DeviceDouble()
    with B.use_device_module(dev), B.stage("demo"):
        got = indices_of(B.to_device(mask, dev), want.shape[0], dev)
        s = dev.stats.summary()
        np.testing.assert_array_equal(B.to_host(got), want)
    assert s["syncs"] == 0, s


def test_the_double_refuses_scatters_cupy_lacks():
    dev = DeviceDouble()
    a = dev.zeros(4, dtype=dev.int16)
    i = dev.arange(4, dtype=dev.int64)
    with pytest.raises(DeviceDoubleError, match="add.at only supports"):
        dev.add.at(a, i, 1)  # no atomicAdd on 16-bit integers
    with pytest.raises(DeviceDoubleError, match="not supported"):
        dev.multiply.at(dev.ones(4), i, 2.0)  # CuPy has no scatter for multiply
    b = dev.zeros(4, dtype=dev.uint64)
    dev.bitwise_or.at(b, i, dev.uint64(3))
    assert b.get().tolist() == [3, 3, 3, 3]
