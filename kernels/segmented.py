"""Segmented reductions over rows kept contiguous per segment, for NumPy and CuPy.

**The segment contract** (the same on both backends; :func:`check_segments` states it in code):
``starts`` is a 1-D integer array, non-decreasing, every value in ``[0, n]`` (``n`` rows along the
reduced axis). Segment ``i`` holds rows ``starts[i] .. starts[i+1] - 1`` (the last one up to
``n - 1``). Rows before ``starts[0]`` belong to no segment and are ignored. An empty segment
(``starts[i] == starts[i+1]``, or ``starts[i] == n``) holds the operation's identity: 0 for
``add`` and ``bitwise_or``, the type's largest value for ``minimum``, its smallest for ``maximum``
(``inf`` / ``-inf`` for floats). NumPy's ``reduceat`` is corrected to this where it differs. A
violation (decreasing, out of range) raises ``ValueError`` on the host; on the device it is
checked only when ``CHECK_SEGMENTS`` is on (environment ``GPUANON_CHECK_SEGMENTS=1``), since the
check reads the device and would add a synchronization to every call.

Integer reductions: NumPy's ``reduceat``; on CuPy one CUDA kernel (:data:`_CUDA_SOURCE`, compiled
at first use per operation and type). Each warp owns a tile of ``32 * ROWS_PER_THREAD`` rows of one
column and walks it in steps of 32 rows, lane ``i`` reading row ``base + i`` (coalesced). One lane
searches ``starts`` for the tile's first segment; after that the warp advances through ``starts``
as it crosses boundaries. A step inside one segment only adds each lane's value to the lane's
share; a step that crosses boundaries finds every row's segment (a search by shuffles over the
next 32 starts), marks the heads of runs in a ballot, reduces each run by a segmented warp scan
and issues one atomic per run that ends inside the step. ``minmax`` computes the minimum and
the maximum in the same pass (two outputs). :mod:`kernels.seg_emulate` follows the kernel step by
step in NumPy (the tests' and the device double's model of it). Integer sums wrap (two's
complement) on both backends; the signed ones go through the unsigned atomics (same bits). Floating ``add`` is :func:`segment_sum`, a
fixed-order pairwise sum made of elementwise IEEE additions only, so NumPy and CuPy give the same
bits and two device runs agree. Nothing is copied to the host; an operation or type without a
device implementation raises ``NotImplementedError`` (never a silent trip to the host).
"""

from __future__ import annotations

import os
import time

import numpy as np

from .host import HOOKS as host_hooks
from .host import scalar, would_read

ROWS_PER_THREAD = 32
THREADS_PER_BLOCK = 256
CHECK_SEGMENTS = os.environ.get("GPUANON_CHECK_SEGMENTS", "") not in ("", "0")

# op -> (combine expression, atomic function); T is the C type, AT the atomic's type
_OPS = {
    "minimum": ("(b < a ? b : a)", "atomicMin"),
    "maximum": ("(b > a ? b : a)", "atomicMax"),
    "add": ("(T)((AT)a + (AT)b)", "atomicAdd"),  # in the unsigned atomic type: wraps, no signed overflow
    "bitwise_or": ("(a | b)", "atomicOr"),
    "minmax": None,  # minimum and maximum in one pass: two outputs
}
_U32, _U64 = "unsigned int", "unsigned long long"
# numpy dtype -> (C type, {op: (identity literal, the type the atomic takes)}); every entry compiles
# with NVRTC for sm_80 and sm_90 (tests/test_nvrtc.py)
_TYPES = {
    "uint32": (_U32, {"minimum": ("0xFFFFFFFFu", _U32), "maximum": ("0u", _U32), "add": ("0u", _U32),
                      "bitwise_or": ("0u", _U32)}),
    "int32": ("int", {"minimum": ("2147483647", "int"), "maximum": ("(-2147483647 - 1)", "int"),
                      "add": ("0", _U32), "bitwise_or": ("0", "int")}),
    "uint64": (_U64, {"minimum": ("0xFFFFFFFFFFFFFFFFull", _U64), "maximum": ("0ull", _U64),
                      "add": ("0ull", _U64), "bitwise_or": ("0ull", _U64)}),
    "int64": ("long long", {"minimum": ("9223372036854775807ll", "long long"),
                            "maximum": ("(-9223372036854775807ll - 1)", "long long"),
                            "add": ("0ll", _U64), "bitwise_or": ("0ll", _U64)}),
}
_FLOAT_SUM = ("float32", "float64")  # add on these: segment_sum, the same on both backends

_CUDA_SOURCE = r"""
typedef @T@ T;
typedef @AT@ AT;
#define TWO @TWO@
#define FULL 0xffffffffu
__device__ __forceinline__ T combine(T a, T b) { return @COMBINE@; }
__device__ __forceinline__ void flush(T* p, T v) { @ATOMIC@((AT*)p, (AT)v); }
__device__ __forceinline__ T combine2(T a, T b) { return @COMBINE2@; }
__device__ __forceinline__ void flush2(T* p, T v) { @ATOMIC2@((AT*)p, (AT)v); }

struct V { T a, b; };  // a running value; b: the maximum of minmax (unused otherwise)
__device__ __forceinline__ V comb(V p, V q) {
    V o; o.a = combine(p.a, q.a); o.b = TWO ? combine2(p.b, q.b) : p.b; return o;
}
__device__ __forceinline__ V shfl_up(V p, int off) {
    V o; o.a = __shfl_up_sync(FULL, p.a, off); o.b = TWO ? __shfl_up_sync(FULL, p.b, off) : p.b; return o;
}
__device__ __forceinline__ V warp_total(V p) {  // every lane gets the combination of the warp's 32 values
    for (int m = 16; m > 0; m >>= 1) {
        V o; o.a = __shfl_xor_sync(FULL, p.a, m); o.b = TWO ? __shfl_xor_sync(FULL, p.b, m) : p.b;
        p = comb(p, o);
    }
    return p;
}
__device__ __forceinline__ void put(T* oc, long long P2, long long s, V v) {
    flush(oc + s, v.a);
    if (TWO) flush2(oc + P2 + s, v.b);
}

extern "C" __global__ void seg_reduce(const T* __restrict__ x, const long long* __restrict__ starts,
                                      T* __restrict__ out, const long long n, const long long ld,
                                      const long long P, const int chunk) {
    const V ident = {@IDENT@, @IDENT2@};
    const T* xc = x + (long long)blockIdx.y * ld;
    T* oc = out + (long long)blockIdx.y * P;
    const long long P2 = (long long)gridDim.y * P;      // minmax: the maxima follow the d x P minima
    const int lane = threadIdx.x & 31;
    const long long tile = 32LL * chunk;                // a warp's rows: chunk steps of 32 rows
    const long long base = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * tile;
    if (base >= n) return;                              // the whole warp (base is one per warp)
    const long long end = (base + tile < n) ? base + tile : n;
    long long s = 0;
    if (lane == 0) {                                    // one search per warp: the segment of row base
        long long lo = 0, hi = P;
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (starts[mid] <= base) lo = mid + 1; else hi = mid;
        }
        s = lo - 1;                                     // -1: no segment (rows before starts[0])
    }
    s = __shfl_sync(FULL, s, 0);
    long long next = (s + 1 < P) ? starts[s + 1] : n;   // the row where segment s ends
    V acc = ident;                                      // this lane's share of segment s
    for (long long r0 = base; r0 < end; r0 += 32) {
        const long long r = r0 + lane;                  // coalesced: lane i reads row r0 + i
        const long long last = (r0 + 31 < end) ? r0 + 31 : end - 1;
        V v = ident;
        if (r <= last) { v.a = xc[r]; v.b = v.a; }
        if (next > last) { acc = comb(acc, v); continue; }  // no segment starts in these rows
        long long c = 0;                                // starts after s at or before row r
        for (long long i0 = s + 1;; i0 += 32) {         // 32 starts at a time (more: empty segments)
            const long long sj = (i0 + lane < P) ? starts[i0 + lane] : n;
            int k = 0;                                  // how many of the 32 are <= r: a search by shuffles
            for (int b = 16; b > 0; b >>= 1) if (__shfl_sync(FULL, sj, k + b - 1) <= r) k += b;
            if (__shfl_sync(FULL, sj, k) <= r) k += 1;
            c += k;
            if (__shfl_sync(FULL, sj, 31) > last) break;
        }
        const long long cp = __shfl_up_sync(FULL, c, 1);
        const unsigned heads = __ballot_sync(FULL, lane == 0 || c != cp);  // a run of one segment starts
        const int first = 31 - __clz(heads & (FULL >> (31 - lane)));        // where this lane's run starts
        V w = v;                                        // segmented inclusive scan: w = run up to this lane
        for (int off = 1; off < 32; off <<= 1) {
            const V y = shfl_up(w, off);
            if (lane - off >= first) w = comb(y, w);
        }
        const V tot = warp_total(acc);                  // segment s in the earlier steps
        const int L = (int)(last - r0);                 // the last lane holding a row
        const long long cL = __shfl_sync(FULL, c, L);
        if (lane == 0 && c != 0 && s >= 0) put(oc, P2, s, tot);  // segment s ended before row r0
        if (lane < L && ((heads >> (lane + 1)) & 1u) && s + c >= 0)  // a run that ends in this step
            put(oc, P2, s + c, c == 0 ? comb(tot, w) : w);
        acc = (c == cL && r <= last) ? v : ident;       // the last run goes on, in the lanes' shares
        s += cL;
        next = (s + 1 < P) ? starts[s + 1] : n;
    }
    const V tot = warp_total(acc);
    if (lane == 0 && s >= 0) put(oc, P2, s, tot);
}
"""

_KERNELS: dict = {}

#: seconds of each device kernel's first launch (NVRTC compile, module load and one run), per
#: ``"op:dtype"``, added up over devices; timed between two device syncs when ``host.HOOKS["sync"]`` is set
compile_seconds: dict = {}


def _timed_first_launch(kern, key, name):
    """``kern`` whose first launch is timed into :data:`compile_seconds`; ``kern`` itself is cached after."""
    def launch(*args, **kw):
        _KERNELS[key] = kern
        sync = host_hooks.get("sync")
        if sync is None:
            return kern(*args, **kw)
        sync()
        t = time.perf_counter()
        out = kern(*args, **kw)
        sync()
        compile_seconds[name] = compile_seconds.get(name, 0.0) + time.perf_counter() - t
        return out
    return launch


def kernel_dtypes() -> tuple:
    """The dtypes the CUDA kernel is built for."""
    return tuple(_TYPES)


def plain_ops(op: str) -> tuple:
    """The one or two plain operations a kernel for ``op`` runs (``minmax``: both)."""
    return ("minimum", "maximum") if op == "minmax" else (op, op)


def device_kernel_source(op: str, dtype) -> str:
    """CUDA source of the segmented reduction ``op`` for ``dtype`` (KeyError if none)."""
    ctype, per_op = _TYPES[np.dtype(dtype).name]
    if op not in _OPS:
        raise KeyError(op)
    o1, o2 = plain_ops(op)
    (ident, atype), (ident2, atype2) = per_op[o1], per_op[o2]
    assert atype == atype2  # one AT for both outputs
    (combine, atomic), (combine2, atomic2) = _OPS[o1], _OPS[o2]
    return (_CUDA_SOURCE.replace("@T@", ctype).replace("@AT@", atype).replace("@TWO@", str(int(o1 != o2)))
            .replace("@COMBINE@", combine).replace("@ATOMIC@", atomic).replace("@COMBINE2@", combine2)
            .replace("@ATOMIC2@", atomic2).replace("@IDENT@", ident).replace("@IDENT2@", ident2))


def has_device_kernel(op: str, dtype) -> bool:
    """Whether a CUDA kernel exists (and compiles) for this operation and type."""
    try:
        t = _TYPES.get(np.dtype(dtype).name)
    except TypeError:
        return False
    return t is not None and op in _OPS and all(o in t[1] for o in plain_ops(op))


def device_support(op: str, dtype) -> str | None:
    """How :func:`segment_reduce` runs ``op`` on ``dtype`` on a device: ``"kernel"`` (the CUDA
    kernel), ``"fixed-order sum"`` (:func:`segment_sum`, elementwise operations only) or ``None``
    (``NotImplementedError``). ``bool`` ``add`` runs as ``int64``."""
    dt = np.dtype(dtype)
    if dt == np.bool_ and op == "add":
        dt = np.dtype(np.int64)
    if has_device_kernel(op, dt):
        return "kernel"
    if op == "add" and dt.name in _FLOAT_SUM:
        return "fixed-order sum"
    return None


def device_kernel_sources() -> list:
    """``(name, source)`` of every CUDA kernel the package compiles (tests compile each with NVRTC).

    A new RawKernel / ElementwiseKernel source joins this list."""
    return [(f"seg_reduce/{op}/{t}", device_kernel_source(op, t))
            for t in _TYPES for op in _OPS if has_device_kernel(op, t)]


def ops() -> tuple:
    """The operations :func:`segment_reduce` accepts."""
    return tuple(_OPS)


def identity(op: str, dtype):
    """The value an empty segment holds for ``op`` on ``dtype`` (the contract's identity; for
    ``minmax`` the pair of ``minimum``'s and ``maximum``'s)."""
    dt = np.dtype(dtype)
    if op == "minmax":
        return identity("minimum", dt), identity("maximum", dt)
    if op in ("add", "bitwise_or"):
        return dt.type(0)
    big = dt.kind in "iu"
    if op == "minimum":
        return np.iinfo(dt).max if big else dt.type(np.inf)
    if op == "maximum":
        return np.iinfo(dt).min if big else dt.type(-np.inf)
    raise ValueError(f"op: {op!r} is not one of {', '.join(_OPS)}")


def check_segments(starts, n: int, xp=np) -> None:
    """Raise ``ValueError`` unless ``starts`` meets the segment contract for ``n`` rows.

    On a device array this reads the device (a synchronization): use it in tests and under
    ``CHECK_SEGMENTS``, not on the hot path.

    >>> check_segments(np.array([0, 2, 2, 5]), 5)
    >>> check_segments(np.array([0, 3, 2]), 5)
    Traceback (most recent call last):
    ...
    ValueError: starts: must be non-decreasing (a segment starts before the one before it); sort them
    """
    if getattr(starts, "ndim", None) != 1:
        raise ValueError("starts: must be a 1-D array of segment start offsets")
    if np.dtype(starts.dtype).kind not in "iu":
        raise ValueError(f"starts: must hold integers, got {np.dtype(starts.dtype).name}; cast to int64")
    if starts.shape[0] == 0:
        return
    if bool(scalar((starts[1:] < starts[:-1]).any())):
        raise ValueError("starts: must be non-decreasing (a segment starts before the one before it); sort them")
    if bool(scalar(starts[0] < 0)) or bool(scalar(starts[-1] > n)):
        raise ValueError(f"starts: every start must lie in [0, {n}] (the number of rows)")


#: the host reads :func:`check_segments` makes on non-empty valid segments: three 1-byte flags
CHECK_READS = (1, 1, 1)


def count_segment_checks(starts, times: int = 1) -> None:
    """Count, in a CPU run's simulated transfer log, the reads of ``times`` :func:`check_segments`
    calls on ``starts`` (as :func:`segment_reduce` on NumPy makes them) without running them: a CPU
    formulation that takes no segmented reduction keeps the report's transfers of one that does."""
    if starts.shape[0]:
        for nb in CHECK_READS:  # a loop over the check's three reads
            would_read(nb, times)


def _host_reduce(op: str, x, starts, axis: int):
    """``np.<op>.reduceat`` under the contract: empty segments hold the identity, sums keep the
    input's type (they wrap, as on the device)."""
    starts = np.asarray(starts)
    check_segments(starts, x.shape[axis])
    xm = np.moveaxis(x, axis, 0)
    n, P = xm.shape[0], starts.shape[0]
    m = int(np.searchsorted(starts, n, side="left"))  # segments starting before row n
    fn = getattr(np, op)
    if m == P and (P < 2 or bool((starts[1:] != starts[:-1]).all())):
        return fn.reduceat(x, starts, axis=axis, dtype=x.dtype)
    out = np.full((P,) + xm.shape[1:], identity(op, x.dtype), dtype=x.dtype)
    if m:
        r = fn.reduceat(xm, starts[:m], axis=0, dtype=x.dtype)
        empty = np.diff(np.append(starts[:m], n)) == 0
        r[empty] = identity(op, x.dtype)
        out[:m] = r
    return np.moveaxis(out, 0, axis)


def segment_sum(x, starts, xp=np, axis: int = -1, max_size: int | None = None):
    """Floating-point segmented sum in a fixed order: the same bits on NumPy and CuPy.

    A pairwise tree over each row's position in its segment: at level ``L`` (stride ``h = 2**L``)
    the row at position ``p`` with ``p % 2h == 0`` adds the row ``h`` below it when that row is in
    its segment. Each level is a few whole-array elementwise passes (IEEE additions, no atomics,
    no reduction whose order a library chooses); the segment's first row ends with the sum. The
    levels run to ``max_size`` (the largest segment's size) when given, else to the row count
    (extra levels change nothing). Segments follow the contract of this module.

    >>> segment_sum(np.array([0.1, 0.2, 0.3, 1.0, 2.0]), np.array([0, 3, 3]))
    array([0.6, 0. , 3. ])
    """
    X = xp.moveaxis(x, axis, 0) if x.ndim > 1 else x
    n, P = int(X.shape[0]), int(starts.shape[0])
    if xp is np:
        check_segments(np.asarray(starts), n)
    elif CHECK_SEGMENTS:
        check_segments(starts, n, xp)
    out = xp.zeros((P,) + tuple(X.shape[1:]), dtype=X.dtype)
    if n == 0 or P == 0:
        return xp.moveaxis(out, 0, axis) if x.ndim > 1 else out
    st = starts.astype(xp.int64)
    ends = xp.concatenate([st[1:], xp.full(1, n, dtype=xp.int64)])
    marks = xp.zeros(n + 1, dtype=xp.int64)
    xp.add.at(marks, st, 1)
    seg = xp.cumsum(marks[:n]) - 1  # -1 before starts[0]
    segc = xp.maximum(seg, 0)
    r = xp.arange(n, dtype=xp.int64)
    pos = r - st[segc]
    rem = xp.where(seg >= 0, ends[segc] - r, 0)  # rows from this one to its segment's end
    if max_size is None:
        max_size = int(np.max(np.diff(np.append(np.asarray(starts), n)))) if xp is np else n
    Y = X.astype(X.dtype, copy=True)
    h = 1
    while h < max_size:  # a loop over tree levels
        take = ((pos[: n - h] & (2 * h - 1)) == 0) & (rem[: n - h] > h)
        if Y.ndim > 1:
            take = take.reshape((n - h,) + (1,) * (Y.ndim - 1))
        Y[: n - h] = xp.where(take, Y[: n - h] + Y[h:], Y[: n - h])
        h *= 2
    nonempty = (ends > st) & (st < n)
    first = Y[xp.minimum(st, n - 1)]
    if Y.ndim > 1:
        nonempty = nonempty.reshape((P,) + (1,) * (Y.ndim - 1))
    out = xp.where(nonempty, first, out)
    return xp.moveaxis(out, 0, axis) if x.ndim > 1 else out


def _device_reduce(op: str, x, starts, xp):
    """Segmented reduction by the CUDA kernel; ``x`` is 1-D or 2-D (segments along the last axis)."""
    dt = np.dtype(x.dtype)
    if not has_device_kernel(op, dt):
        kinds = ", ".join(t for t in _TYPES if op in _TYPES[t][1])
        raise NotImplementedError(f"no device segmented '{op}' for {dt.name} arrays; cast to one of {kinds}"
                                  + (" (or float32 / float64 for add)" if op == "add" else ""))
    key = (xp.RawKernel, op, dt.name)  # per array module: a test double's kernels stay its own
    kern = _KERNELS.get(key)
    if kern is None:
        kern = _KERNELS[key] = _timed_first_launch(xp.RawKernel(device_kernel_source(op, dt), "seg_reduce"), key,
                                                   f"{op}:{dt.name}")
    two_d = x.ndim == 2
    X = x if two_d else x[None, :]
    if X.strides[1] != dt.itemsize or X.strides[0] % dt.itemsize:  # rows must be contiguous
        X = xp.ascontiguousarray(X)
    d, n = int(X.shape[0]), int(X.shape[1])
    ld = X.strides[0] // dt.itemsize if d > 1 else n
    P = int(starts.shape[0])
    if CHECK_SEGMENTS:
        check_segments(starts, n, xp)
    if op == "minmax":  # the minima, then the maxima: one (2, d, P) output
        lo, hi = identity(op, dt)
        out = xp.full((2, d, P), lo, dtype=dt)
        out[1] = hi
    else:
        out = xp.full((d, P), identity(op, dt), dtype=dt)
    if n and P and d:
        st = xp.ascontiguousarray(starts.astype(xp.int64, copy=False))
        per_block = THREADS_PER_BLOCK * ROWS_PER_THREAD
        grid = ((n + per_block - 1) // per_block, d)
        kern(grid, (THREADS_PER_BLOCK,), (X, st, out, np.int64(n), np.int64(ld), np.int64(P),
                                          np.int32(ROWS_PER_THREAD)))
    if op == "minmax":
        return (out[0], out[1]) if two_d else (out[0, 0], out[1, 0])
    return out if two_d else out[0]


def segment_reduce(op: str, x, starts, xp=np, axis: int = -1, max_size: int | None = None):
    """``xp.<op>.reduceat(x, starts, axis)`` under the segment contract of this module.

    ``op``: ``minimum``, ``maximum``, ``add``, ``bitwise_or``, or ``minmax`` (both the minimum and
    the maximum in one pass over ``x``; returns the pair ``(minima, maxima)``). ``x`` is 1-D, or 2-D with the
    segments along its last axis (any axis for floating ``add``). ``bool`` input to ``add`` is
    counted as ``int64`` on both backends; floating ``add`` is :func:`segment_sum` on both
    backends (``max_size``: the largest segment's size, if the caller knows it). On CuPy an
    operation or dtype without a device implementation raises ``NotImplementedError``.

    >>> segment_reduce("maximum", np.array([3, 1, 4, 1, 5], dtype=np.uint32), np.array([0, 2, 3]))
    array([3, 4, 5], dtype=uint32)
    >>> segment_reduce("minimum", np.array([3, 1, 4], dtype=np.int32), np.array([1, 1, 3]))
    array([2147483647,          1, 2147483647], dtype=int32)
    """
    if op not in _OPS:
        raise ValueError(f"op: {op!r} is not one of {', '.join(_OPS)}")
    if np.dtype(x.dtype) == np.bool_ and op == "add":
        x = x.astype(xp.int64)
    if op == "add" and np.dtype(x.dtype).kind == "f" and (xp is np or np.dtype(x.dtype).name in _FLOAT_SUM):
        return segment_sum(x, starts, xp, axis=axis, max_size=max_size)
    if xp is np:
        if op == "minmax":
            return _host_reduce("minimum", x, starts, axis), _host_reduce("maximum", x, starts, axis)
        return _host_reduce(op, x, starts, axis)
    if not (x.ndim == 1 or (x.ndim == 2 and axis in (1, -1))):
        raise NotImplementedError("device segmented reductions run along the last axis of a 1-D or 2-D array")
    return _device_reduce(op, x, starts, xp)


def exclusive_cumsum(sizes, xp=np):
    """Start offsets of consecutive segments of the given sizes (int64)."""
    out = xp.zeros(sizes.shape[0], dtype=xp.int64)
    if sizes.shape[0] > 1:
        xp.cumsum(sizes[:-1], out=out[1:])
    return out


def segment_ids(sizes, xp=np, n: int | None = None):
    """The segment index of every row, for consecutive segments of the given sizes (int64).

    On a device a scatter of ones at every segment's start and a cumulative sum: O(rows), no
    synchronization when ``n`` (the rows in all, ``sizes.sum()``) is given; without it the sum is
    read (a synchronization). On the CPU one ``repeat`` (``n`` unused). Empty segments get no row.

    >>> segment_ids(np.array([2, 0, 3]), n=5)
    array([0, 0, 2, 2, 2])
    """
    P = sizes.shape[0]
    if xp is np:  # the CPU's formulation: one repeat
        return np.repeat(np.arange(P, dtype=np.int64), sizes)
    if n is None:
        n = int(scalar(sizes.sum())) if P else 0
    marks = xp.zeros(n + 1, dtype=xp.int64)
    if P > 1:
        xp.add.at(marks, xp.cumsum(sizes[:-1].astype(xp.int64)), 1)
    return xp.cumsum(marks[:n])


def group_starts(sorted_labels, xp=np):
    """Start offsets of runs of equal values in a sorted label array."""
    n = sorted_labels.shape[0]
    if n == 0:
        return xp.zeros(0, dtype=xp.int64)
    change = xp.ones(n, dtype=bool)
    change[1:] = sorted_labels[1:] != sorted_labels[:-1]
    return xp.nonzero(change)[0].astype(xp.int64)
