"""Segmented reductions: the segment contract on both code paths, the fixed-order float sum, and the
CUDA kernel's algorithm emulated thread by thread against NumPy's ``reduceat``.

The device code path runs here on :class:`FakeDeviceXP`: NumPy under another name, whose
``RawKernel`` launches run :func:`kernels.seg_emulate.emulate_seg_reduce`. What it cannot catch: it
does not refuse host conversions or NumPy-only calls (its arrays are NumPy arrays), and it says
nothing about compilation (tests/test_nvrtc.py), CUDA numerics, races, memory or speed.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from kernels import seg_emulate as E
from kernels import segmented as S

OPS = S.ops()
INT_TYPES = ["uint32", "int32", "uint64", "int64"]


class FakeDeviceXP(types.SimpleNamespace):
    """NumPy under another name (so the device branch runs); kernels run the NumPy emulation."""

    def __getattr__(self, name):
        return getattr(np, name)

    class RawKernel:
        def __init__(self, source, name):
            self.source, self.name, self.launches = source, name, 0

        def __call__(self, grid, block, args):
            E.emulate_launch(self.source, self.name, grid, block, args)


FAKE = FakeDeviceXP()


def _random_segments(rng, n, kind):
    """Starts for ``n`` rows: one segment, tiny (< 32 rows), long (> 32 rows), mixed, with empties."""
    if kind == "one":
        return np.array([0], dtype=np.int64)
    if kind == "tiny":
        sizes = rng.integers(1, 8, size=n)
    elif kind == "long":
        sizes = rng.integers(33, 5000, size=max(1, n // 1000))
    elif kind == "warp":  # around one warp's rows, so warps span segments
        sizes = rng.integers(20, 1100, size=n // 50 + 1)
    else:  # mixed, with empty segments
        sizes = rng.choice([0, 1, 2, 31, 32, 33, 1024, 2000], size=n // 100 + 2)
    st = np.concatenate([[0], np.cumsum(sizes)])
    return st[st < n].astype(np.int64) if kind != "mixed" else np.minimum(st[:-1], n).astype(np.int64)


def _values(rng, dt, shape):
    dt = np.dtype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


def _expected(op, x, starts):
    """Plain per-segment reduction with the contract's identities (a loop: the reference)."""
    if op == "minmax":
        return _expected("minimum", x, starts), _expected("maximum", x, starts)
    n = x.shape[-1]
    ends = list(starts[1:]) + [n]
    cols = []
    for a, b in zip(starts, ends):
        seg = x[..., a:b]
        cols.append(getattr(np, op).reduce(seg, axis=-1, dtype=x.dtype) if b > a
                    else np.full(x.shape[:-1], S.identity(op, x.dtype), dtype=x.dtype))
    return np.stack(cols, axis=-1) if cols else np.zeros(x.shape[:-1] + (0,), dtype=x.dtype)


@pytest.mark.parametrize("kind", ["one", "tiny", "long", "warp", "mixed"])
@pytest.mark.parametrize("n", [1, 31, 8192 + 17, 40000])
def test_emulated_kernel_equals_the_reference(kind, n):
    rng = np.random.default_rng(n * 7 + len(kind))
    starts = _random_segments(rng, n, kind)
    for t in INT_TYPES:
        x = _values(rng, t, (3, n))
        for op in OPS:
            _check(op, x, starts, (op, t, kind))


def _same(got, want):
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == 2 and all(_same(g, w) for g, w in zip(got, want))
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def _check(op, x, starts, what):
    """The emulated kernel (2-D and 1-D) and the host path equal the reference."""
    want = _expected(op, x, starts)
    assert _same(S.segment_reduce(op, x, starts, FAKE, axis=1), want), what
    assert _same(S.segment_reduce(op, x, starts, np, axis=1), want), what
    want1 = tuple(w[1] for w in want) if op == "minmax" else want[1]
    assert _same(S.segment_reduce(op, x[1], starts, FAKE), want1), what


@pytest.mark.parametrize("case", ["every lane", "every other lane", "many per tile", "empties in one step",
                                  "past the end", "tile edges"])
def test_emulated_kernel_on_dense_boundaries(case):
    """Tiles that cross many segments: a boundary at every lane, runs of empty segments (more than 32
    starts inside one step of 32 rows), empty segments at the end, boundaries on tile edges."""
    rng = np.random.default_rng(len(case))
    n = 3 * 1024 + 45
    if case == "every lane":
        starts = np.arange(n, dtype=np.int64)
    elif case == "every other lane":
        starts = np.arange(0, n, 2, dtype=np.int64)
    elif case == "many per tile":
        starts = np.unique(np.concatenate([[0], rng.integers(0, n, size=400)])).astype(np.int64)
    elif case == "empties in one step":
        starts = np.sort(np.concatenate([[0], np.full(70, 40), np.full(40, 63), np.full(33, 64),
                                         rng.integers(0, n, size=50)])).astype(np.int64)
    elif case == "past the end":
        starts = np.concatenate([np.arange(0, n, 7), np.full(40, n)]).astype(np.int64)
    else:
        starts = np.array([0, 31, 32, 1023, 1024, 1025, 2047, 2048, 3071, 3072, n - 1], dtype=np.int64)
    for t in INT_TYPES:
        x = _values(rng, t, (3, n))
        for op in OPS:
            _check(op, x, starts, (op, t, case))


def test_rows_before_the_first_start_are_ignored_on_both_paths():
    x = np.arange(1, 101, dtype=np.int64)
    starts = np.array([40, 70], dtype=np.int64)
    want = np.array([x[40:70].sum(), x[70:].sum()])
    for xp in (np, FAKE):
        assert np.array_equal(S.segment_reduce("add", x, starts, xp), want)
        assert np.array_equal(S.segment_reduce("add", x.astype(np.float64), starts, xp), want.astype(np.float64))


def test_empty_segments_hold_the_identity_on_both_paths():
    x = np.array([5, 3, 9, 1], dtype=np.uint32)
    starts = np.array([0, 2, 2, 4, 4], dtype=np.int64)
    for xp in (np, FAKE):
        assert S.segment_reduce("minimum", x, starts, xp).tolist() == [3, 0xFFFFFFFF, 1, 0xFFFFFFFF, 0xFFFFFFFF]
        assert S.segment_reduce("maximum", x, starts, xp).tolist() == [5, 0, 9, 0, 0]
        lo, hi = S.segment_reduce("minmax", x, starts, xp)
        assert lo.tolist() == [3, 0xFFFFFFFF, 1, 0xFFFFFFFF, 0xFFFFFFFF] and hi.tolist() == [5, 0, 9, 0, 0]
        assert S.segment_reduce("add", x.astype(np.float64), starts, xp).tolist() == [8.0, 0.0, 10.0, 0.0, 0.0]


@pytest.mark.parametrize("starts, fix", [([0, 3, 2], "non-decreasing"), ([0, 6], r"\[0, 5\]"),
                                         ([-1, 2], r"\[0, 5\]")])
def test_a_broken_contract_is_refused(starts, fix):
    x = np.arange(5, dtype=np.int64)
    with pytest.raises(ValueError, match=fix):
        S.segment_reduce("add", x, np.array(starts), np)
    with pytest.raises(ValueError, match=fix):
        S.check_segments(np.array(starts), 5)


def test_int64_sums_wrap_like_numpy_and_bool_is_counted():
    x = np.array([2**62, 2**62, 2**62, -5, 7], dtype=np.int64)
    st = np.array([0, 3], dtype=np.int64)
    want = np.add.reduceat(x, st)
    for xp in (np, FAKE):
        assert np.array_equal(S.segment_reduce("add", x, st, xp), want)
        b = S.segment_reduce("add", np.array([True, True, False, True]), np.array([0, 2]), xp)
        assert b.dtype == np.int64 and b.tolist() == [2, 1]


def test_float_sums_are_the_same_bits_on_both_paths_and_in_a_fixed_order():
    rng = np.random.default_rng(3)
    n = 20000
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, size=n)
    starts = _random_segments(rng, n, "mixed")
    cpu = S.segment_reduce("add", x, starts, np)
    dev = S.segment_reduce("add", x, starts, FAKE)
    assert cpu.view(np.uint64).tolist() == dev.view(np.uint64).tolist()
    sizes = np.diff(np.append(starts, n))
    assert np.array_equal(S.segment_sum(x, starts, np, max_size=int(sizes.max())), cpu)
    assert np.array_equal(S.segment_sum(x, starts, FAKE, max_size=int(sizes.max())), cpu)
    ok = sizes > 0
    assert np.allclose(cpu[ok], np.add.reduceat(x, np.minimum(starts, n - 1))[ok], rtol=1e-9, atol=1e-300)
    # a 2-D sum along axis 0 equals the per-column 1-D sums
    M = np.stack([x, -x, x * 3], axis=1)
    got = S.segment_reduce("add", M, starts, FAKE, axis=0)
    assert all(np.array_equal(got[:, j], S.segment_sum(M[:, j], starts, np)) for j in range(3))


def test_segment_ids_handle_empty_segments():
    sizes = np.array([0, 3, 0, 0, 2, 1, 0], dtype=np.int64)
    want = np.repeat(np.arange(sizes.shape[0]), sizes)
    for xp in (np, FAKE):
        assert np.array_equal(S.segment_ids(sizes, xp, n=6), want)
    assert np.array_equal(S.segment_ids(sizes, np), want)
    assert S.segment_ids(np.zeros(0, dtype=np.int64), np).shape == (0,)


def test_the_emulation_refuses_launches_that_break_the_contract():
    x = np.arange(100, dtype=np.int64)[None, :]
    st = np.array([0, 50], dtype=np.int64)
    out = np.zeros((1, 2), dtype=np.int64)
    good = dict(n=np.int64(100), ld=np.int64(100), P=np.int64(2), chunk=np.int32(32), grid=(1, 1), block=(256,))
    E.emulate_seg_reduce("add", "int64", x, st, out, **good)
    assert out.tolist() == [[x[0, :50].sum(), x[0, 50:].sum()]]
    bad = [dict(n=100), dict(grid=(1, 2)), dict(block=(100,)), dict(chunk=np.int32(0)), dict(P=np.int64(3))]
    for change in bad:
        with pytest.raises(ValueError):
            E.emulate_seg_reduce("add", "int64", x, st, np.zeros((1, 2), dtype=np.int64), **{**good, **change})
    with pytest.raises(ValueError, match="cover"):
        E.emulate_seg_reduce("add", "int64", np.zeros((1, 9000), dtype=np.int64), st, out,
                             **{**good, "n": np.int64(9000), "ld": np.int64(9000)})
    with pytest.raises(ValueError, match="int64"):
        E.emulate_seg_reduce("add", "int64", x, st.astype(np.int32), out, **good)
    with pytest.raises(ValueError, match="non-decreasing"):
        E.emulate_seg_reduce("add", "int64", x, st[::-1].copy(), out, **good)
    with pytest.raises(ValueError, match="contiguous rows"):
        E.emulate_seg_reduce("add", "int64", np.zeros((2, 200), dtype=np.int64)[:, ::2], st,
                             np.zeros((2, 2), dtype=np.int64), **{**good, "grid": (1, 2)})


def test_operations_without_a_device_implementation_are_refused():
    for op, dt in [("minimum", "float64"), ("bitwise_or", "float32"), ("add", "float16"), ("add", "int8")]:
        assert S.device_support(op, dt) is None
        with pytest.raises(NotImplementedError, match="no device segmented"):
            S.segment_reduce(op, np.zeros(4, dtype=dt), np.array([0, 2]), FAKE)
    with pytest.raises(ValueError, match="op"):
        S.segment_reduce("multiply", np.zeros(4), np.array([0, 2]), np)


def _gpu_usable():
    from gpuanon.backend import gpu_usable

    return gpu_usable()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_usable(), reason="no usable GPU")
def test_device_equals_host_bit_for_bit():
    """On a real GPU: every device-supported (op, dtype) equals the host path exactly, float sums
    included, with empty segments and rows before the first start."""
    import cupy

    from gpuanon.backend import to_device, to_host

    rng = np.random.default_rng(5)
    n = 300_000
    for kind in ("one", "tiny", "long", "warp", "mixed"):
        starts = _random_segments(rng, n, kind)
        if kind == "mixed":
            starts = np.minimum(starts + 7, n)  # rows 0..6 belong to no segment
        dst = to_device(starts, cupy)
        for op in OPS:
            for t in INT_TYPES + ["float64", "float32", "bool"]:
                if S.device_support(op, t) is None:
                    continue
                x = (_values(rng, t, (3, n)) if t in INT_TYPES else
                     rng.standard_normal((3, n)).astype(t) * 1e3 if t != "bool" else rng.random((3, n)) < 0.5)
                want = S.segment_reduce(op, x, starts, np, axis=1)
                got = to_host(S.segment_reduce(op, to_device(x, cupy), dst, cupy, axis=1))
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (op, t, kind)
