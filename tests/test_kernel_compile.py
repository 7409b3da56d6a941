"""The first launch of a device kernel (NVRTC compile, load, one run) is timed apart from the stages.

Run on the strict device double (``tests/cupy_double.py``): it checks that the first launch of each
(op, dtype) kernel is timed between two device syncs and reported once, in the report's
``seconds["kernel_compile"]``, and that later fits report none. It cannot catch how long NVRTC
really takes, nor a compile that happens somewhere else than the first launch (on a GPU,
``bench/gpu_check.py`` prints the figure of its cold runs).
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import host as kernel_host
from kernels import segmented

pytest.importorskip("cupy")
from cupy_double import DeviceDouble  # noqa: E402

from gpuanon import Mondrian  # noqa: E402
from gpuanon import backend as B  # noqa: E402
from gpuanon.datasets import load_adult  # noqa: E402

KW = dict(k=5, quasi_identifiers=["age", "education-num", "workclass", "race"], sensitive="income",
          output_format="range", progress=False)


@pytest.fixture(scope="module")
def adult():
    return load_adult().iloc[:3000].reset_index(drop=True)


def test_first_fit_reports_compile_time_later_fits_none(adult):
    dev = DeviceDouble()
    with B.use_device_module(dev):
        first = Mondrian(backend="gpu", **KW)
        first.fit_transform(adult)
        again = Mondrian(backend="gpu", **KW)
        again.fit_transform(adult)
    secs = first.report_["seconds"]
    assert secs["kernel_compile"] > 0
    assert "kernel_compile" not in again.report_["seconds"]  # every kernel was compiled by the first fit
    cpu = Mondrian(backend="cpu", **KW)
    cpu.fit_transform(adult)
    assert "kernel_compile" not in cpu.report_["seconds"]


def test_first_launch_timed_only_with_a_sync_hook(monkeypatch):
    dev = DeviceDouble()
    with B.use_device_module(dev):
        x = dev.asarray(np.arange(10, dtype=np.uint32))
        starts = dev.asarray(np.array([0, 4, 7], dtype=np.int64))
        before = dict(segmented.compile_seconds)
        monkeypatch.setitem(kernel_host.HOOKS, "sync", None)
        out = segmented.segment_reduce("maximum", x, starts, dev)
        assert B.to_host(out).tolist() == [3, 6, 9]
        assert segmented.compile_seconds == before  # no hook: nothing timed, the kernel is cached as it is
        syncs = []
        monkeypatch.setitem(kernel_host.HOOKS, "sync", lambda: syncs.append(1))
        segmented.segment_reduce("maximum", x, starts, dev)  # launched once already: not timed again
        assert syncs == [] and segmented.compile_seconds == before
        out = segmented.segment_reduce("minimum", x, starts, dev)  # a first launch: between two syncs
        assert B.to_host(out).tolist() == [0, 4, 7]
        assert syncs == [1, 1] and segmented.compile_seconds["minimum:uint32"] > before.get("minimum:uint32", 0.0)
