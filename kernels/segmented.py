"""Segmented reductions over rows kept contiguous per segment, for NumPy and CuPy.

On NumPy a reduction is ``ufunc.reduceat``. CuPy has no ``reduceat``; there it is one CUDA kernel
(:data:`_CUDA_SOURCE`, compiled at first use per operation and type, then cached by CuPy on disk):
each thread scans a run of :data:`ROWS_PER_THREAD` consecutive rows of one column, keeps the
running value of its current segment and issues one atomic per segment it finishes; when a whole
warp ends inside one segment (the top levels of a partitioning, where a segment spans millions of
rows) the warp first combines its 32 values with shuffles, so at most one atomic per warp and
segment reaches memory. Nothing is copied to the host; an operation or type without a device
kernel is an error (never a silent trip to the host).
"""

from __future__ import annotations

import numpy as np

ROWS_PER_THREAD = 32
THREADS_PER_BLOCK = 256

# (ufunc name) -> (combine expression, atomic call); T is the C type, a / b the operands
_OPS = {
    "minimum": ("(b < a ? b : a)", "atomicMin"),
    "maximum": ("(b > a ? b : a)", "atomicMax"),
    "add": ("(a + b)", "atomicAdd"),
    "bitwise_or": ("(a | b)", "atomicOr"),
}
# numpy dtype -> (C type, the type the atomic takes, identities per op)
_TYPES = {
    "uint32": ("unsigned int", "unsigned int", {"minimum": "0xFFFFFFFFu", "maximum": "0u", "add": "0u",
                                                "bitwise_or": "0u"}),
    "int32": ("int", "int", {"minimum": "2147483647", "maximum": "(-2147483647 - 1)", "add": "0",
                             "bitwise_or": "0"}),
    "uint64": ("unsigned long long", "unsigned long long",
               {"minimum": "0xFFFFFFFFFFFFFFFFull", "maximum": "0ull", "add": "0ull", "bitwise_or": "0ull"}),
    "int64": ("long long", "long long", {"minimum": "9223372036854775807ll",
                                         "maximum": "(-9223372036854775807ll - 1)", "add": "0ll"}),
    "float64": ("double", "double", {"add": "0.0"}),
    "float32": ("float", "float", {"add": "0.0f"}),
}

_CUDA_SOURCE = r"""
typedef @T@ T;
__device__ __forceinline__ T combine(T a, T b) { return @COMBINE@; }
__device__ __forceinline__ void flush(T* p, T v) { @ATOMIC@((@AT@*)p, (@AT@)v); }

extern "C" __global__ void seg_reduce(const T* __restrict__ x, const long long* __restrict__ starts,
                                      T* __restrict__ out, const long long n, const long long ld,
                                      const long long P, const int chunk) {
    const T ident = @IDENT@;
    const T* xc = x + (long long)blockIdx.y * ld;
    T* oc = out + (long long)blockIdx.y * P;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long r0 = tid * chunk;
    long long s = -1;
    T acc = ident;
    if (r0 < n) {
        const long long r1 = (r0 + chunk < n) ? r0 + chunk : n;
        long long lo = 0, hi = P;                       // last segment starting at or before r0
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (starts[mid] <= r0) lo = mid + 1; else hi = mid;
        }
        s = lo - 1;
        long long next = (s + 1 < P) ? starts[s + 1] : n;
        for (long long r = r0; r < r1; ++r) {
            if (r >= next) {                            // segment s ends before row r
                flush(oc + s, acc);
                acc = ident;
                do { ++s; next = (s + 1 < P) ? starts[s + 1] : n; } while (r >= next);
            }
            acc = combine(acc, xc[r]);
        }
    }
    const unsigned full = 0xffffffffu;
    const long long s0 = __shfl_sync(full, s, 0);
    if (__all_sync(full, s == s0) && s0 >= 0) {         // the whole warp ends in one segment
        for (int off = 16; off > 0; off >>= 1) acc = combine(acc, __shfl_down_sync(full, acc, off));
        if ((threadIdx.x & 31) == 0) flush(oc + s0, acc);
    } else if (s >= 0) {
        flush(oc + s, acc);
    }
}
"""

_KERNELS: dict = {}


def device_kernel_source(ufunc_name: str, dtype) -> str:
    """CUDA source of the segmented reduction ``ufunc_name`` for ``dtype`` (KeyError if none)."""
    ctype, atype, idents = _TYPES[np.dtype(dtype).name]
    combine, atomic = _OPS[ufunc_name]
    ident = idents[ufunc_name]
    return (_CUDA_SOURCE.replace("@T@", ctype).replace("@AT@", atype).replace("@COMBINE@", combine)
            .replace("@ATOMIC@", atomic).replace("@IDENT@", ident))


def has_device_kernel(ufunc_name: str, dtype) -> bool:
    """Whether :func:`segment_reduce` has a device kernel for this operation and type."""
    t = _TYPES.get(np.dtype(dtype).name)
    return t is not None and ufunc_name in _OPS and ufunc_name in t[2]


def _device_reduce(ufunc_name: str, x, starts, xp):
    """Segmented reduction on the device; ``x`` is 1-D or 2-D (segments along the last axis)."""
    dt = np.dtype(x.dtype)
    if dt == np.bool_ and ufunc_name == "add":
        x, dt = x.astype(xp.int64), np.dtype(np.int64)
    if not has_device_kernel(ufunc_name, dt):
        raise NotImplementedError(f"no device segmented '{ufunc_name}' for {dt.name} arrays; "
                                  f"cast to one of {', '.join(t for t in _TYPES if ufunc_name in _TYPES[t][2])}")
    key = (ufunc_name, dt.name)
    kern = _KERNELS.get(key)
    if kern is None:
        kern = _KERNELS[key] = xp.RawKernel(device_kernel_source(ufunc_name, dt), "seg_reduce")
    two_d = x.ndim == 2
    X = x if two_d else x[None, :]
    if X.strides[1] != dt.itemsize or X.strides[0] % dt.itemsize:  # rows must be contiguous
        X = xp.ascontiguousarray(X)
    d, n = int(X.shape[0]), int(X.shape[1])
    ld = X.strides[0] // dt.itemsize if d > 1 else n
    P = int(starts.shape[0])
    ident = {"minimum": _max_of(dt), "maximum": _min_of(dt)}.get(ufunc_name, 0)
    out = xp.full((d, P), ident, dtype=dt)
    if n and P and d:
        st = xp.ascontiguousarray(starts.astype(xp.int64, copy=False))
        per_block = THREADS_PER_BLOCK * ROWS_PER_THREAD
        grid = ((n + per_block - 1) // per_block, d)
        kern(grid, (THREADS_PER_BLOCK,), (X, st, out, np.int64(n), np.int64(ld), np.int64(P),
                                                 np.int32(ROWS_PER_THREAD)))
    return out if two_d else out[0]


def _max_of(dt):
    return np.iinfo(dt).max if dt.kind in "iu" else np.inf


def _min_of(dt):
    return np.iinfo(dt).min if dt.kind in "iu" else -np.inf


def segment_reduce(ufunc_name: str, x, starts, xp=np, axis: int = -1):
    """``xp.<ufunc>.reduceat(x, starts, axis)`` for non-empty contiguous segments.

    ``starts`` must be strictly increasing and every segment non-empty. ``x`` is 1-D, or 2-D with
    the segments along its last axis. On CuPy this is a device kernel; an operation or dtype
    without one raises ``NotImplementedError``.

    >>> segment_reduce("maximum", np.array([3, 1, 4, 1, 5], dtype=np.uint32), np.array([0, 2, 3]))
    array([3, 4, 5], dtype=uint32)
    """
    if xp is np:
        return getattr(np, ufunc_name).reduceat(x, starts, axis=axis)
    if not (x.ndim == 1 or (x.ndim == 2 and axis in (1, -1))):
        raise NotImplementedError("device segmented reductions run along the last axis of a 1-D or 2-D array")
    return _device_reduce(ufunc_name, x, starts, xp)


def exclusive_cumsum(sizes, xp=np):
    """Start offsets of consecutive segments of the given sizes (int64)."""
    out = xp.zeros(sizes.shape[0], dtype=xp.int64)
    if sizes.shape[0] > 1:
        xp.cumsum(sizes[:-1], out=out[1:])
    return out


def segment_ids(sizes, xp=np):
    """The segment index of every row, for consecutive segments of the given sizes."""
    return xp.repeat(xp.arange(sizes.shape[0], dtype=xp.int64), sizes)


def group_starts(sorted_labels, xp=np):
    """Start offsets of runs of equal values in a sorted label array."""
    n = sorted_labels.shape[0]
    if n == 0:
        return xp.zeros(0, dtype=xp.int64)
    change = xp.ones(n, dtype=bool)
    change[1:] = sorted_labels[1:] != sorted_labels[:-1]
    return xp.nonzero(change)[0].astype(xp.int64)
