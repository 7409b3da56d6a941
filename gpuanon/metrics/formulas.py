"""Formulas on counts, NumPy or CuPy alike: entropies, interval and set entropies, dense ids.

Every function takes arrays on one device and returns arrays (0-d for a single number) on the
same device; callers bring single numbers to the host with :func:`gpuanon.backend.to_scalar`.
"""

from __future__ import annotations

import numpy as np

from ..backend import get_namespace, to_scalar
from .entropy import SMALL_LOG, interval_positions, uncertainty_x, xlogx


_LN2 = float(np.log(2.0))


def xlog2x(c):
    """``c log2 c`` element-wise (``xlogy`` of SciPy or CuPy: 0 log 0 = 0)."""
    xp = get_namespace(c)
    return xlogx(c, xp) / _LN2


def xlog2x_counts(c, xp):
    """:func:`xlog2x` of integer counts (>= 0) as float64. On the CPU, where the largest count is
    below the number of counts (or below :data:`SMALL_LOG`), a gather from a table of ``v log2 v``
    for ``v = 0 .. max``: the same function on the same values, so the same bits, for a fraction of
    the logarithms.

    >>> xlog2x_counts(np.array([2, 4, 2, 0]), np).tolist()
    [2.0, 8.0, 2.0, 0.0]
    """
    if xp is not np or c.shape[0] == 0:
        return xlog2x(c.astype(xp.float64))
    top = int(c.max())
    if top < max(c.shape[0], SMALL_LOG):
        return xlog2x(np.arange(top + 1, dtype=np.float64))[c]
    return xlog2x(c.astype(np.float64))


def xlogx_sum(c, xp=None, rep=None):
    """``sum c log2 c`` over counts, a 0-d array (0 log 0 = 1 log 1 = 0: only counts above 1 are read).

    ``rep``: the indices of the counts above 1 (ascending) when the caller has them; the same
    values in the same order as the mask, without the mask's read of its number of hits.
    """
    xp = xp or get_namespace(c)
    c = xp.asarray(c)
    sel = c[c > 1] if rep is None else c[rep]
    if xp is np and sel.dtype.kind in "iu":
        return xlog2x_counts(sel, xp).sum()
    return xlog2x(sel.astype(xp.float64)).sum()


def entropy_bits_x(counts, xp=None, rep=None):
    """Shannon entropy (bits) of a count vector as a 0-d array: ``log2 n - sum c log2 c / n``
    (``rep``: as for :func:`xlogx_sum`)."""
    xp = xp or get_namespace(counts)
    c = xp.asarray(counts)
    return entropy_bits_n(c.sum().astype(xp.float64), xlogx_sum(c, xp, rep), xp)


def entropy_bits_n(n, xs, xp):
    """:func:`entropy_bits_x` from the number of rows ``n`` (float64) and ``xs = sum c log2 c``."""
    safe = xp.where(n > 0, n, 1.0)
    return xp.where(n > 0, xp.maximum(0.0, xp.log2(safe) - xs / safe), 0.0)


def entropy_bits(counts) -> float:
    """Shannon entropy (bits) of a count vector: ``log2 n - sum c log2 c / n``.

    >>> entropy_bits([2, 2]), entropy_bits([4]), entropy_bits([])
    (1.0, 0.0, 0.0)
    """
    c = counts if hasattr(counts, "__array_namespace__") or hasattr(counts, "dtype") else np.asarray(counts)
    return float(to_scalar(entropy_bits_x(c)))


def uncertainty_coefficient(joint) -> float:
    """``U(T | X) = (H(T) - H(T | X)) / H(T)`` from a joint count table ``joint[x, t]``.

    0 when the target is constant (``H(T) = 0``).

    >>> uncertainty_coefficient([[3, 0], [0, 1]]), uncertainty_coefficient([[1, 1], [2, 2]])
    (1.0, 0.0)
    """
    j = joint if hasattr(joint, "dtype") else np.asarray(joint, dtype=np.float64)
    return float(to_scalar(uncertainty_x(j)))


def entropy_loss(before, after) -> float:
    """Total entropy-coefficient loss ``1 - sum_j U(T|X'_j) / sum_j U(T|X_j)``."""
    b = float(np.sum(before))
    return 0.0 if b == 0 else 1.0 - float(np.sum(after)) / b


def precision(levels, heights) -> float:
    """Sweeney's precision ``1 - sum_ij h_ij / |DGH_j| / (N * N_QI)``.

    ``levels``: (N, N_QI) generalization level of every cell; ``heights``: (N_QI,) hierarchy heights.

    >>> precision([[1, 0], [1, 2]], [2, 2])
    0.5
    """
    levels = np.asarray(levels, dtype=np.float64)
    heights = np.asarray(heights, dtype=np.float64)
    if levels.size == 0:
        return 1.0
    return float(1.0 - (levels / heights[None, :]).sum() / levels.size)


def interval_entropy_at(counts, a, b, rows: bool = False, rep=None):
    """Entropy (bits) of the original distribution over distinct-value indices ``a .. b - 1``.

    Prefix sums are kept only where a value occurs more than once, so a column of mostly
    distinct values needs no array as long as the column. ``rows=True`` also returns the rows
    before ``a`` and before ``b`` (what the entropy coefficient needs: no second search).
    ``rep``: the indices of the counts above 1 when the caller has them (no read of their number).

    >>> interval_entropy_at(np.array([1, 1, 2]), np.array([0, 2]), np.array([3, 3])).tolist()
    [1.5, 0.0]
    """
    xp = get_namespace(counts)
    b = xp.maximum(b, a)
    if rep is None:
        rep = xp.nonzero(counts > 1)[0]  # values seen more than once
    c_int = counts[rep]
    c = c_int.astype(xp.float64)
    zero = xp.zeros(1, dtype=xp.float64)
    extra = xp.concatenate([zero, xp.cumsum(c - 1.0)])
    clog = xp.concatenate([zero, xp.cumsum(xlog2x_counts(c_int, xp) if xp is np and c_int.dtype.kind in "iu" else xlog2x(c))])
    if xp is np and counts.shape[0] < 2**31:  # the CPU: a gather from a running count of the repeats,
        # not two binary searches of unsorted needles (a cache miss per step on a large column)
        before = np.empty(counts.shape[0] + 1, dtype=np.int32)
        before[0] = 0
        np.greater(counts, 1, out=before[1:], casting="unsafe")  # flags written as int32: the
        np.cumsum(before[1:], out=before[1:])  # running count in place, no bool -> int cast per step
        ia, ib = before[a].astype(np.int64), before[b].astype(np.int64)
    else:
        ia, ib = xp.searchsorted(rep, a), xp.searchsorted(rep, b)
    s = (b - a) + (extra[ib] - extra[ia])  # rows with a value in [lo, hi]
    e = clog[ib] - clog[ia]  # sum of c log2 c over those values (1 log 1 = 0)
    safe = xp.where(s > 0, s, 1.0)
    h = xp.maximum(xp.where(s > 0, xp.log2(safe) - e / safe, 0.0), 0.0)
    if rows:
        return h, (a + extra[ia]).astype(xp.int64), (b + extra[ib]).astype(xp.int64)
    return h


def interval_entropy(values, counts, lo, hi):
    """Entropy (bits) of the original distribution restricted to each ``[lo, hi]``.

    ``values`` sorted (numbers or order-preserving keys), ``counts`` >= 1 per value; an empty
    interval (lo > hi) gives 0.
    """
    a, b = interval_positions(values, lo, hi)
    return interval_entropy_at(counts, a, b)


def set_entropy(sets, counts):
    """Entropy (bits) of the original distribution restricted to each set (bool rows over categories).

    A set holding one category with rows has entropy exactly 0 (``log2 s - s log2 s / s`` would
    leave a rounding residue that differs between the CPU and the GPU, whose matrix products sum in
    another order).

    >>> [round(h, 12) for h in set_entropy(np.array([[True, False], [True, True]]), np.array([3, 3])).tolist()]
    [0.0, 1.0]
    """
    xp = get_namespace(counts)
    c = counts.astype(xp.float64)
    clog = xlog2x(c)
    sf = sets.astype(xp.float64)
    s, e, held = sf @ c, sf @ clog, sf @ (c > 0).astype(xp.float64)
    safe = xp.where(s > 0, s, 1.0)
    return xp.maximum(xp.where(held > 1, xp.log2(safe) - e / safe, 0.0), 0.0)


def dense_ids(a):
    """``(ids, n)``: equal values of ``a`` (integers) get equal ids in ``0 .. n - 1`` in value order
    (a sort; on the CPU NumPy's ``unique``, a few times faster than a sorted hash factorization);
    ``n`` is read from the device (one counted sync)."""
    xp = get_namespace(a)
    if xp is np:
        a = np.asarray(a).reshape(-1)
        if 4096 <= a.shape[0] < 1 << 32 and a.dtype.itemsize == 8 and (
                a.dtype.kind == "u" or (a.dtype.kind == "i" and a.min() >= 0)):
            return _dense_ids_64(a.view(np.uint64))
        uniq, ids = np.unique(a, return_inverse=True)
        return ids.reshape(-1).astype(np.int64, copy=False), int(uniq.shape[0])
    ids, n = dense_ids_x(a)
    return ids, int(to_scalar(n))


def _dense_ids_64(a):
    """:func:`dense_ids` of a uint64 array of fewer than ``2**32`` entries on the CPU: the order by
    two sorts of ``half << 32 | position`` (the low halves, then the high halves of that order:
    a stable radix order of the whole values), NumPy's vectorized sort of 64-bit keys, about a
    third less than ``unique``'s argsort of the values; the same ids (ranks of the values).

    >>> _dense_ids_64(np.array([7, 3 << 32, 7, 5], dtype=np.uint64))[0].tolist()
    [1, 2, 1, 0]
    """
    m = int(a.shape[0])
    pos = np.arange(m, dtype=np.uint64)
    low = np.uint64(0xFFFFFFFF)
    key = a << np.uint64(32)
    key |= pos
    key.sort()
    key &= low
    o1 = key.view(np.int64)  # positions by the low half (below 2**32: as intp)
    key = a[o1]
    key >>= np.uint64(32)
    key <<= np.uint64(32)
    key |= pos
    key.sort()
    key &= low
    order = o1[key.view(np.int64)]  # positions by the value (ties: by position)
    del key
    srt = a[order]
    new = np.empty(m, dtype=bool)
    new[0] = True
    np.not_equal(srt[1:], srt[:-1], out=new[1:])
    sid = np.cumsum(new, dtype=np.int64)
    sid -= 1
    ids = np.empty(m, dtype=np.int64)
    ids[order] = sid
    return ids, int(sid[-1]) + 1


def dense_ids_x(a):
    """``(ids, n)`` as :func:`dense_ids`, with ``n`` a 0-d array where ``a`` lives: on a device a
    sort, flags where the sorted value changes and their cumulative sum, scattered back (no sync).

    >>> ids, n = dense_ids_x(np.array([7, 3, 7, 5]))
    >>> ids.tolist(), int(n)
    ([2, 0, 2, 1], 3)
    """
    xp = get_namespace(a)
    if xp is np:
        ids, n = dense_ids(a)
        return ids, np.asarray(n, dtype=np.int64)
    m = int(a.shape[0])
    if m == 0:
        return xp.zeros(0, dtype=xp.int64), xp.zeros((), dtype=xp.int64)
    order = xp.argsort(a)
    s = a[order]
    flag = xp.zeros(m, dtype=xp.int64)
    flag[1:] = s[1:] != s[:-1]
    sid = xp.cumsum(flag)
    ids = xp.empty(m, dtype=xp.int64)
    ids[order] = sid
    return ids, sid[-1] + 1
