"""The ``seg_reduce`` CUDA kernel of :mod:`kernels.segmented`, emulated step by step with NumPy.

The emulation runs the kernel's own loop (steps of 32 rows per warp) vectorized over warps (rows
of the arrays here) and lanes (their 32 columns): the per-warp search of ``starts``, the
coalesced loads, the uniform test for a boundary in the step, the search by shuffles over the
next 32 starts, the ballot of run heads, the segmented scan by ``__shfl_up_sync``, the butterfly
total by ``__shfl_xor_sync``, and every atomic, applied as an exact scatter reduction into
``out``. Warp-uniform branches are masks over warps; a shuffle reads the source lane's value
from before the instruction, as on the device. The tests (tests/test_segmented.py) and the
device double (tests/cupy_double.py) run kernel launches through it.
"""

from __future__ import annotations

import numpy as np

from . import segmented as _S

_LANE = np.arange(32, dtype=np.int64)
_FULL = np.uint64(0xFFFFFFFF)


def _shfl(v, src):
    """``__shfl_sync(FULL, v, src)``: every lane reads lane ``src`` (per lane, or one for all)."""
    src = np.broadcast_to(np.asarray(src, dtype=np.int64) & 31, v.shape)
    return np.take_along_axis(v, src, axis=1)


def _shfl_up(v, off):
    """``__shfl_up_sync(FULL, v, off)``: lane i reads lane i - off; lanes below ``off`` keep theirs."""
    out = v.copy()
    out[:, off:] = v[:, :-off]
    return out


def _shfl_xor(v, m):
    """``__shfl_xor_sync(FULL, v, m)``: lane i reads lane i ^ m."""
    return v[:, _LANE ^ m]


def _ballot(pred):
    """``__ballot_sync(FULL, pred)`` as uint64 holding the 32-bit mask (bit i: lane i)."""
    return (pred.astype(np.uint64) << _LANE.astype(np.uint64)).sum(axis=1, dtype=np.uint64)


def _top_bit(x):
    """``31 - __clz(x)`` for 32-bit ``x > 0`` (uint64 arrays): the index of the highest set bit."""
    _, e = np.frexp(x.astype(np.float64))  # exact below 2**53
    return (e - 1).astype(np.int64)


class _Warps:
    """The combine of the launched operation on ``(a, b)`` pairs (``b``: minmax's maxima)."""

    def __init__(self, op, dt):
        o1, o2 = _S.plain_ops(op)
        self.two = o1 != o2
        self.f1, self.f2 = getattr(np, o1), getattr(np, o2)
        self.i1, self.i2 = _S.identity(o1, dt), _S.identity(o2, dt)

    def comb(self, p, q):
        return self.f1(p[0], q[0]), (self.f2(p[1], q[1]) if self.two else p[1])

    def total(self, p):
        """``warp_total``: five butterfly steps; every lane ends with the warp's combination."""
        for m in (16, 8, 4, 2, 1):
            o = (_shfl_xor(p[0], m), _shfl_xor(p[1], m) if self.two else p[1])
            p = self.comb(p, o)
        return p


def _run(W, X, starts, out, n, P, chunk, base, col):
    """The kernel's body for the warps ``(base, col)`` that have rows (``base < n``)."""
    G, tile = base.shape[0], 32 * chunk
    flat = out.reshape(-1)
    puts = []  # (flat index, value a, value b) of every atomic

    def start(i):  # ``(i < P) ? starts[i] : n``
        return np.where(i < P, starts[np.clip(i, 0, max(P - 1, 0))], n)

    end = np.minimum(base + tile, n)
    s = np.searchsorted(starts, base, side="right") - 1  # lane 0's binary search, then __shfl_sync
    nxt = start(s + 1)
    acc = (np.full((G, 32), W.i1, dtype=X.dtype), np.full((G, 32), W.i2, dtype=X.dtype))
    for step in range(chunk):  # ``for (r0 = base; r0 < end; r0 += 32)``
        r0 = base + 32 * step
        live = r0 < end
        r = r0[:, None] + _LANE
        last = np.minimum(r0 + 31, end - 1)
        has = (r <= last[:, None]) & live[:, None]
        xv = X[col[:, None], np.minimum(r, n - 1)]
        v = (np.where(has, xv, W.i1), np.where(has, xv, W.i2))
        fast = live & (nxt > last)
        slow = live & ~fast
        if fast.any():
            a = W.comb(acc, v)
            acc = tuple(np.where(fast[:, None], ai, ci) for ai, ci in zip(a, acc))
        if not slow.any():
            continue
        q = np.nonzero(slow)[0]  # the warps that cross boundaries: the rest of the step is theirs
        sq, rq, lq = s[q], r[q], last[q]
        vq, aq = tuple(vi[q] for vi in v), tuple(ai[q] for ai in acc)
        c = np.zeros((q.shape[0], 32), dtype=np.int64)
        i0 = sq + 1
        going = np.ones(q.shape[0], dtype=bool)
        while going.any():  # ``for (i0 = s + 1;; i0 += 32)``, a warp leaves at its ``break``
            sj = start(i0[:, None] + _LANE)
            k = np.zeros_like(c)
            for b in (16, 8, 4, 2, 1):
                k += b * (_shfl(sj, k + b - 1) <= rq)
            k += _shfl(sj, k) <= rq
            c += np.where(going[:, None], k, 0)
            going &= ~(sj[:, 31] > lq)
            i0 = i0 + 32
        cp = _shfl_up(c, 1)
        heads = _ballot((_LANE == 0) | (c != cp))
        first = _top_bit(heads[:, None] & (_FULL >> (31 - _LANE).astype(np.uint64)))
        w = vq
        for off in (1, 2, 4, 8, 16):
            y = tuple(_shfl_up(wi, off) for wi in w)
            yw = W.comb(y, w)
            take = (_LANE - off) >= first
            w = tuple(np.where(take, a, b) for a, b in zip(yw, w))
        tot = W.total(aq)
        L = lq - r0[q]
        cL = _shfl(c, L[:, None])
        gq = np.zeros((q.shape[0], 32), dtype=bool)
        gq[:, 0] = (c[:, 0] != 0) & (sq >= 0)
        _put_sub(puts, col[q], P, gq, np.broadcast_to(sq[:, None], c.shape), tot)
        tail = (_LANE < L[:, None]) & (((heads[:, None] >> (_LANE + 1).astype(np.uint64)) & 1) == 1)
        tail &= (sq[:, None] + c) >= 0
        ct = W.comb(tot, w)
        _put_sub(puts, col[q], P, tail, sq[:, None] + c, tuple(np.where(c == 0, a, b) for a, b in zip(ct, w)))
        keep = (c == cL) & (rq <= lq[:, None])
        aq = (np.where(keep, vq[0], W.i1), np.where(keep, vq[1], W.i2))
        for ai, aqi in zip(acc, aq):
            ai[q] = aqi
        s[q] = sq + cL[:, 0]
        nxt[q] = start(s[q] + 1)
    tot = W.total(acc)
    fin = np.zeros((G, 32), dtype=bool)
    fin[:, 0] = s >= 0
    _put_sub(puts, col, P, fin, np.broadcast_to(s[:, None], fin.shape), tot)
    for idx, va, vb in puts:  # the atomics: exact, in any order; minmax's maxima d x P further
        W.f1.at(flat, idx, va)
        if W.two:
            W.f2.at(flat, out[0].size + idx, vb)
    return out


def _put_sub(puts, col, P, where, s, v):
    """``put(oc, P2, s, v)`` by the lanes in ``where`` of warps on columns ``col``: recorded."""
    g, ln = np.nonzero(where)
    puts.append((col[g] * P + s[g, ln], v[0][g, ln], v[1][g, ln]))


def emulate_seg_reduce(op: str, dtype, x, starts, out, n, ld, P, chunk, grid, block, steps: bool = True):
    """One launch of the ``seg_reduce`` kernel for ``(op, dtype)``, computed with NumPy.

    Takes the launch exactly as the kernel gets it: ``grid`` / ``block`` and the arguments
    ``(x, starts, out, n, ld, P, chunk)`` as NumPy arrays and NumPy scalars (``int64`` for ``n``,
    ``ld``, ``P``; ``int32`` for ``chunk``). Follows the kernel's algorithm step by step,
    vectorized over warps and lanes (see the module docstring), with atomics as exact scatter
    reductions into ``out`` (which it updates in place and returns). Raises ``ValueError`` when
    the launch breaks the kernel's contract: wrong dtypes or scalar types, ``out`` not ``(d, P)``
    (``(2, d, P)`` for ``minmax``) contiguous, ``starts`` not contiguous ``int64`` of length ``P``
    or against the segment contract, rows of ``x`` not contiguous or ``ld`` not their stride, a
    block that is not whole warps, a grid that does not cover ``n`` rows. What it cannot show:
    timing, memory races the model hides (atomics are exact here), anything the CUDA compiler
    does differently from this reading of the source. With ``steps=False`` the launch is checked
    the same way but its result comes from the host reduction (:func:`segment_reduce` on NumPy),
    for callers that need the contract and the values, not the kernel's steps, on large launches.
    """
    dt = np.dtype(dtype)
    if not _S.has_device_kernel(op, dt):
        raise ValueError(f"seg_reduce: no kernel for ({op}, {dt.name})")
    for name, v, t in (("n", n, np.int64), ("ld", ld, np.int64), ("P", P, np.int64), ("chunk", chunk, np.int32)):
        if type(v) is not t:
            raise ValueError(f"seg_reduce: argument {name} must be a numpy.{t.__name__}, got {type(v).__name__}")
    n, ld, P, chunk = int(n), int(ld), int(P), int(chunk)
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    block = tuple(block) if isinstance(block, (tuple, list)) else (block,)
    gx, d = int(grid[0]), int(grid[1]) if len(grid) > 1 else 1
    bx = int(block[0])
    if any(int(b) != 1 for b in block[1:]) or any(int(g) != 1 for g in grid[2:]):
        raise ValueError("seg_reduce: the block is 1-D and the grid 2-D (row chunks, columns)")
    if bx % 32 or bx <= 0:
        raise ValueError(f"seg_reduce: block of {bx} threads is not whole warps")
    if gx * bx * chunk < n or chunk <= 0:
        raise ValueError(f"seg_reduce: grid {gx} x {bx} threads x {chunk} rows does not cover {n} rows")
    if x.dtype != dt or out.dtype != dt:
        raise ValueError(f"seg_reduce: x and out must be {dt.name}, got {x.dtype} and {out.dtype}")
    if starts.dtype != np.int64 or starts.ndim != 1 or starts.shape[0] != P or not starts.flags.c_contiguous:
        raise ValueError(f"seg_reduce: starts must be contiguous int64 of length P={P}")
    shape = (2, d, P) if op == "minmax" else (d, P)
    if out.shape != shape or not out.flags.c_contiguous:
        raise ValueError(f"seg_reduce: out must be a contiguous {shape} array, got {out.shape}")
    X = x if x.ndim == 2 else x[None, :]
    if X.shape[0] < d or X.shape[1] < n or (n and X.strides[1] != dt.itemsize) or \
            (d > 1 and X.strides[0] != ld * dt.itemsize):
        raise ValueError(f"seg_reduce: x must hold {d} contiguous rows of {n} values, {ld} apart")
    _S.check_segments(starts, n)
    if n == 0 or P == 0:
        return out
    if not steps:
        got = _S.segment_reduce(op, np.ascontiguousarray(X[:d, :n]), starts, np, axis=1)
        if op == "minmax":
            np.minimum(out[0], got[0], out=out[0])
            np.maximum(out[1], got[1], out=out[1])
        else:
            getattr(np, op)(out, got, out=out)
        return out
    warps = np.arange(gx * bx // 32, dtype=np.int64)
    base = warps * (32 * chunk)
    base = base[base < n]  # ``if (base >= n) return;``
    col = np.repeat(np.arange(d, dtype=np.int64), base.shape[0])
    return _run(_Warps(op, dt), X, starts, out, n, P, chunk, np.tile(base, d), col)


def emulate_launch(source: str, name: str, grid, block, args, steps: bool = True):
    """:func:`emulate_seg_reduce` for a launch of a kernel built from ``(source, name)``; KeyError
    if the source is none of :func:`kernels.segmented.device_kernel_sources`."""
    if name != "seg_reduce":
        raise KeyError(f"no emulation of kernel {name!r}")
    for t in _S.kernel_dtypes():
        for op in _S.ops():
            if _S.has_device_kernel(op, t) and _S.device_kernel_source(op, t) == source:
                return emulate_seg_reduce(op, t, *args, grid=grid, block=block, steps=steps)
    raise KeyError("no emulation of this kernel source")
