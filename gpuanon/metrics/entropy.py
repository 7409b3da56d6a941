"""The entropy-coefficient loss over each QI's discrete domain (the contract, section 7, amended).

``U(T | X) = (H(T) - H(T | X)) / H(T)`` is computed on a discrete domain ``D_X`` of every QI: a
categorical QI's categories (missing is a category); a numeric QI's distinct values when it has
at most 256 of them, otherwise 256 equal-frequency bins of the original column (edges at its
quantiles, equal values never split); missing values are a bin of their own.

Before: the joint ``P(x, t)`` counted over the original rows. After (``U'``): every output row
carries a cell ``C`` (an interval ``[lo, hi]``, a set of categories, a hierarchy node's leaves,
``*``, an exact value, the missing value; a suppressed row is ``*``) and spreads its unit mass
over ``D_X`` in proportion to the original column's rows inside the cell,
``w(x) = n(x and C) / n(C)`` (a bin that an interval covers in part counts only its rows inside
``[lo, hi]``). ``Q(x, t) = (1 / N) sum_r [t_r = t] w_r(x)`` and ``U'`` is ``U`` computed from ``Q``.
Rows of a class share their cells, so ``Q`` is built from class-level statistics: each class's
target histogram and the position of its cell in the column's sorted distinct values.

Everything below works on NumPy or CuPy arrays alike (``xp``); the ``(|D_X|, n_targets)`` mass
tables stay where they are made and ``entr`` (``scipy.special`` or ``cupyx.scipy.special``, through
:func:`gpuanon.backend.special`) turns them into entropies there: one number per column comes back.
Small host tables (:data:`SMALL_LOG` entries) take the same logarithms from ``math.log``, so a small
table's run never imports ``scipy.special``.

Examples
--------
A column with values 1, 2, 3 (one row each, targets a, a, b), all three rows in one class
``[1, 3]``: each row's mass is spread evenly, ``x`` says nothing about ``t`` any more.

>>> import numpy as np
>>> counts = np.array([1, 1, 1])
>>> dom = numeric_domain(counts, has_missing=False, xp=np)
>>> a, b = np.array([0]), np.array([3])  # the class covers distinct values 0..2
>>> q = interval_joint(a, b, dom, np.array([[2, 1]]), np)
>>> q.tolist()
[[0.6666666666666666, 0.3333333333333333], [0.6666666666666666, 0.3333333333333333], [0.6666666666666666, 0.3333333333333333]]
>>> round(uncertainty_from_joint(q), 12)
0.0
>>> round(uncertainty_from_joint([[1, 0], [1, 0], [0, 1]]), 12)
1.0
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernels.counts import count_values, indices_of

from ..backend import get_namespace, special, to_scalar

N_BINS = 256


# ---------------------------------------------------------------------------------------------
# entropies (SciPy's or CuPy's entr, where the table lives)
# ---------------------------------------------------------------------------------------------

def uncertainty_from_joint(joint) -> float:
    """``U(T | X)`` from a joint mass table ``joint[x, t]`` (counts or fractional masses).

    ``H(T | X) = H(X, T) - H(X)``; 0 when the target is constant or the table is empty. The
    entropies are computed where the table lives (``entr`` of SciPy or of CuPy); one number comes
    back.

    >>> round(uncertainty_from_joint([[4, 0], [0, 4]]), 12), round(uncertainty_from_joint([[2, 2], [3, 3]]), 12)
    (1.0, 0.0)
    """
    return float(to_scalar(uncertainty_x(np.asarray(joint, dtype=np.float64) if isinstance(joint, (list, tuple))
                                         else joint)))


#: host arrays of at most this many entries get ``x log x`` from ``math.log``: the C library's
#: ``log``, the one SciPy's ``xlogy`` and ``entr`` call, so the same bits (tests/test_metrics_speed.py
#: compares them), without importing ``scipy.special`` (about 0.4 s of a small table's start-up)
SMALL_LOG = 256


def _small_host(x, xp) -> bool:
    """A small host array while SciPy is not loaded (once it is, its vectorized loop is the faster);
    NaN or negative entries go to SciPy's own rules."""
    return xp is np and x.size <= SMALL_LOG and "scipy.special" not in sys.modules and bool((x >= 0).all())


def xlogx(x, xp):
    """``x log x`` element-wise with ``0 log 0 = 0`` (float64): ``xlogy(x, x)`` of SciPy or CuPy.

    >>> xlogx(np.array([0.0, 1.0, np.e]), np).tolist()
    [0.0, 0.0, 2.718281828459045]
    """
    if _small_host(x, xp):  # a loop over at most SMALL_LOG entries of a small table
        return np.array([v * math.log(v) if v else 0.0 for v in x.reshape(-1).tolist()],
                        dtype=np.float64).reshape(x.shape)
    return special(xp).xlogy(x, x)


def entr(x, xp):
    """``-x log x`` element-wise, 0 at 0 (float64): ``entr`` of SciPy or CuPy."""
    if _small_host(x, xp):  # a loop over at most SMALL_LOG entries of a small table
        return np.array([-(v * math.log(v)) if v else 0.0 for v in x.reshape(-1).tolist()],
                        dtype=np.float64).reshape(x.shape)
    return special(xp).entr(x)


def uncertainty_x(joint):
    """:func:`uncertainty_from_joint` as a 0-d array on the table's device (no copy)."""
    xp = get_namespace(joint)
    if xp is np:
        return _host_uncertainty(joint)
    q = xp.maximum(xp.asarray(joint).astype(xp.float64), 0.0)  # float sums can leave -1e-17
    if q.size == 0:
        return xp.zeros((), dtype=xp.float64)
    n = q.sum()
    p = q / xp.where(n > 0, n, 1.0)
    h_t = entr(p.sum(axis=0), xp).sum()
    h_x = entr(p.sum(axis=1), xp).sum()
    h_xt = entr(p, xp).sum()
    u = xp.clip((h_t + h_x - h_xt) / xp.where(h_t > 1e-15, h_t, 1.0), 0.0, 1.0)
    return xp.where((h_t > 1e-15) & (n > 0), u, 0.0)


def _host_uncertainty(joint):
    """:func:`uncertainty_x` on the CPU: the same operations in place on one copy of the table
    (two target values: each row's sum is its first entry plus its second, as the row's reduction
    adds them, without a reduction per row)."""
    q = np.asarray(joint).astype(np.float64)
    np.maximum(q, 0.0, out=q)  # float sums can leave -1e-17
    if q.size == 0:
        return np.zeros((), dtype=np.float64)
    n = q.sum()
    q /= np.where(n > 0, n, 1.0)
    h_t = entr(q.sum(axis=0), np).sum()
    h_x = entr(q[:, 0] + q[:, 1] if q.ndim == 2 and q.shape[1] == 2 else q.sum(axis=1), np).sum()
    if _small_host(q, np):
        h_xt = entr(q, np).sum()
    else:
        h_xt = special(np).entr(q, out=q).sum()
    u = np.clip((h_t + h_x - h_xt) / np.where(h_t > 1e-15, h_t, 1.0), 0.0, 1.0)
    return np.where((h_t > 1e-15) & (n > 0), u, 0.0)


# ---------------------------------------------------------------------------------------------
# the domain of a numeric column
# ---------------------------------------------------------------------------------------------

@dataclass
class NumericDomain:
    """Bins over a column's sorted distinct values (value indices ``0..V-1``).

    ``bin_start[i]`` is the first distinct-value index of bin ``i`` (``bin_start[-1] = V``);
    ``cum[v]`` the number of rows with a value index below ``v`` (length ``V + 1``);
    ``bin_counts`` rows per bin. The missing value, when present, is the last distinct value and
    its own bin. ``start_cum``: ``cum`` at every ``bin_start`` (length ``n_bins + 1``); a domain
    assembled from value ranges held on several workers has it and no ``cum``.
    """

    bin_start: Any
    cum: Any
    bin_counts: Any
    binned: bool
    has_missing: bool
    start_cum: Any = None
    _bin_table: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.start_cum is None and self.cum is not None:
            self.start_cum = self.cum[self.bin_start]

    @property
    def n_bins(self) -> int:
        return int(self.bin_counts.shape[0])

    def bin_of(self, value_index):
        """Bin of distinct-value indices. On the CPU, for many indices, a gather from each distinct
        value's bin (a binary search per index mispredicts a branch per step); the same bins."""
        xp = get_namespace(self.bin_start)
        if xp is np and value_index.shape[0] >= 4096 and self.bin_start.shape[0] <= 1 << 15 and self.bin_start[0] == 0:
            if self._bin_table is None:  # made once per domain: bin of every distinct value (and V)
                nb = self.bin_start.shape[0]
                widths = np.diff(self.bin_start)
                self._bin_table = np.empty(int(self.bin_start[-1]) + 1, dtype=np.int16)
                self._bin_table[:-1] = np.repeat(np.arange(nb - 1, dtype=np.int16), widths)
                self._bin_table[-1] = nb - 1
            return self._bin_table[value_index].astype(np.int64)
        return xp.searchsorted(self.bin_start, value_index, side="right") - 1


def numeric_domain(counts, has_missing: bool, xp=None, n_bins: int = N_BINS, n_starts: int | None = None) -> NumericDomain:
    """The domain ``D_X`` of a numeric column from the row counts of its sorted distinct values.

    At most ``n_bins`` present distinct values: one bin each. More: equal-frequency bins with
    edges at the quantiles ``i * n / n_bins`` of the present rows (a value spans no two bins, so
    a heavy value may swallow several quantiles and leave fewer bins). The missing value (the
    last entry when ``has_missing``) is a bin of its own. ``n_starts``: the number of distinct
    quantile bins when the caller knows it (:func:`gpuanon.metrics.columns.column_stats` reads it
    with the column's other counts): on a device the bins are then kept without a sync.

    >>> d = numeric_domain(np.array([5, 1, 1, 1, 1, 1, 2]), False, np, n_bins=2)
    >>> d.bin_start.tolist(), d.bin_counts.tolist()  # the second edge: the value of sorted row 6
    ([0, 2, 7], [6, 6])
    """
    xp = xp or get_namespace(counts)
    counts = xp.asarray(counts).astype(xp.int64, copy=False)
    v = int(counts.shape[0])
    vp = v - int(bool(has_missing))
    cum = xp.zeros(v + 1, dtype=xp.int64)
    if v:
        xp.cumsum(counts, out=cum[1:])
    binned = vp > n_bins
    if binned:
        n_present = cum[vp]
        q = (xp.arange(n_bins, dtype=xp.int64) * n_present) // n_bins  # row positions of the quantiles
        raw = xp.searchsorted(cum[1:vp + 1], q, side="right")  # ascending
        if xp is np or n_starts is None:
            starts = xp.unique(raw)
        else:  # the first of every run of equal values, n_starts of them
            new = xp.ones(n_bins, dtype=bool)
            new[1:] = raw[1:] != raw[:-1]
            starts = raw[indices_of(new, n_starts, xp)]
    else:
        starts = xp.arange(vp, dtype=xp.int64)
    tail = xp.full(2 if has_missing else 1, v, dtype=xp.int64)  # a fill, not a copy from the host
    tail[0] = vp
    starts = xp.concatenate([starts.astype(xp.int64), tail])
    bin_counts = xp.diff(cum[starts])
    return NumericDomain(starts, cum, bin_counts, binned, bool(has_missing))


# ---------------------------------------------------------------------------------------------
# class cells -> mass on the domain
# ---------------------------------------------------------------------------------------------

def stable_argsort(a, xp=None):
    """``argsort(a, kind="stable")``; on the CPU, for unsigned or non-negative integers below
    ``2**32`` and fewer than ``2**32`` of them, one sort of ``value << 32 | position`` (NumPy's
    vectorized sort of 64-bit keys is several times faster than a stable argsort).

    >>> stable_argsort(np.array([3, 1, 3, 0], dtype=np.uint32)).tolist()
    [3, 1, 0, 2]
    """
    xp = xp or get_namespace(a)
    n = int(a.shape[0])
    if xp is not np or a.dtype.kind not in "ui" or n >= 1 << 32 or n < 1024:
        return xp.argsort(a, kind="stable")
    if a.dtype.kind == "i" or a.dtype.itemsize > 4:
        if a.min() < 0 or a.max() >= 1 << 32:
            return np.argsort(a, kind="stable")
    key = a.astype(np.uint64) << np.uint64(32)
    key |= np.arange(n, dtype=np.uint64)
    key.sort()
    return (key & np.uint64(0xFFFFFFFF)).astype(np.int64)


def interval_positions(values, lo, hi, xp=None):
    """``[a, b)``: the distinct-value indices inside each ``[lo, hi]`` (``values`` sorted).

    On the CPU the needles are sorted first (far fewer cache misses on large columns).
    """
    xp = xp or get_namespace(values)
    m = lo.shape[0]
    if xp is np and m >= 1024 and lo.dtype == hi.dtype == values.dtype and lo.dtype in (np.uint32, np.uint16, np.uint8):
        # small unsigned keys: each bound sorted with its position in one 64-bit sort (the sorted
        # needles read off the sorted keys, not gathered), searched, and put back at its position
        a, b = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
        for bound, out, side in ((lo, a, "left"), (hi, b, "right")):  # the two bounds
            key = bound.astype(np.uint64) << np.uint64(32)
            key |= np.arange(m, dtype=np.uint64)
            key.sort()
            out[(key & np.uint64(0xFFFFFFFF)).astype(np.intp)] = np.searchsorted(
                values, (key >> np.uint64(32)).astype(values.dtype), side=side)
        return a, np.maximum(a, b)
    if xp is np:
        needles = np.concatenate([lo, hi])
        order = stable_argsort(needles)
        srt = needles[order]
        left = order < m
        pos = np.empty(2 * m, dtype=np.int64)
        pos[order[left]] = np.searchsorted(values, srt[left], side="left")
        pos[order[~left]] = np.searchsorted(values, srt[~left], side="right")
        a, b = pos[:m], pos[m:]
    else:
        a = xp.searchsorted(values, lo, side="left").astype(xp.int64)
        b = xp.searchsorted(values, hi, side="right").astype(xp.int64)
    return a, xp.maximum(a, b)


def _accumulate(idx, w, n: int, xp):
    """``out[idx[i], t] += w[i, t]`` as one bincount over ``idx * nt + t``; shape ``(n, nt)``."""
    nt = w.shape[1]
    flat = (idx.astype(xp.int64)[:, None] * nt + xp.arange(nt, dtype=xp.int64)[None, :]).reshape(-1)
    return scatter_sum(flat, w.reshape(-1), n * nt, xp).reshape(n, nt)


def scatter_sum(idx, weights, length: int, xp):
    """``bincount(idx, weights, minlength=length)`` when every index is below ``length``.

    NumPy: ``numpy.bincount`` (adds in row order). A device: one scatter-add into ``length``
    zeros (``add.at``), without ``bincount``'s two reads of the device to size its output; float
    sums are added in the atomics' order there, as ``cupy.bincount`` adds them.
    """
    if xp is np:
        return np.bincount(idx, weights=weights, minlength=length)
    out = xp.zeros(length, dtype=xp.float64)
    xp.add.at(out, idx, weights.astype(xp.float64))
    return out


def interval_joint(a, b, domain: NumericDomain, class_target_hist, xp=None, rows=None, bins=None):
    """Mass of the classes' rows on a numeric domain: ``(n_bins, n_targets)`` float64.

    Class ``c`` covers distinct values ``a[c] .. b[c] - 1`` (``b > a``); its rows spread over the
    bins in proportion to the original rows inside the interval. The first and the last bin get
    only their rows inside ``[lo, hi]``; the bins strictly between get whole bins (a difference
    array over the bins, summed once). One pass of two bincounts per target value (a loop over
    target values, not classes). ``rows``: the rows before ``a`` and before ``b`` when the caller
    has them (else they are gathered from ``domain.cum``; a domain without ``cum`` needs them).
    ``bins``: the bins of each interval's first and last value when the caller has them (then
    ``a`` and ``b`` are not read).
    """
    xp = xp or get_namespace(class_target_hist)
    th = xp.asarray(class_target_hist)
    nb = domain.n_bins
    nt = th.shape[1]
    q = xp.zeros((nb, nt), dtype=xp.float64)
    if th.shape[0] == 0:
        return q
    cum, sc = domain.cum, domain.start_cum  # rows before every value, and before every bin
    ca, cb = (cum[a], cum[b]) if rows is None else (xp.asarray(rows[0]), xp.asarray(rows[1]))
    ba, bb = (domain.bin_of(a), domain.bin_of(b - 1)) if bins is None else bins
    inside = ba != bb  # classes reaching over more than one bin
    s = (cb - ca).astype(xp.float64)
    # rows of the interval in its first bin (all of them when it stays in one bin) and in its last
    first = xp.where(inside, sc[xp.minimum(ba + 1, nb)] - ca, cb - ca).astype(xp.float64)
    last = xp.where(inside, cb - sc[bb], 0).astype(xp.float64)
    ends = xp.concatenate([ba, bb])
    edges = xp.concatenate([xp.minimum(ba + 1, nb), bb])
    inv_s = 1.0 / xp.where(s > 0, s, 1.0)
    full = domain.bin_counts.astype(xp.float64)
    if xp is np:
        _host_interval_sums(q, th, inv_s, inside, (ends, first, last), edges, full)
        return np.maximum(q, 0.0, out=q)
    fl = xp.concatenate([first, last])
    for t in range(nt):  # a loop over target values
        c_t = th[:, t].astype(xp.float64) * inv_s  # the class's rows of target t per row of its interval
        c2 = xp.concatenate([c_t, c_t])
        q[:, t] = scatter_sum(ends, c2 * fl, nb, xp)
        inner = xp.where(inside, c_t, 0.0)
        d = scatter_sum(edges, xp.concatenate([inner, -inner]), nb + 1, xp)
        q[:, t] += xp.cumsum(d)[:nb] * full
    return xp.maximum(q, 0.0)  # the difference array's running sum leaves -1e-17 where it cancels


def _host_interval_sums(q, th, inv_s, inside, ends_fl, edges, full) -> None:
    """:func:`interval_joint`'s loop on the CPU: the same products and bincounts (so the same
    bits: ``-inner`` negates zeros to ``-0.0`` as the concatenation does), written into one reused
    buffer instead of five temporaries per target value."""
    ends, first, last = ends_fl
    m, nb = int(inv_s.shape[0]), int(q.shape[0])
    w = np.empty(2 * m, dtype=np.float64)
    for t in range(th.shape[1]):  # a loop over target values
        c_t = th[:, t].astype(np.float64)
        c_t *= inv_s  # the class's rows of target t per row of its interval
        np.multiply(c_t, first, out=w[:m])
        np.multiply(c_t, last, out=w[m:])
        q[:, t] = np.bincount(ends, weights=w, minlength=nb)
        w[:m] = 0.0
        np.copyto(w[:m], c_t, where=inside)
        np.negative(w[:m], out=w[m:])
        d = np.bincount(edges, weights=w, minlength=nb + 1)
        q[:, t] += np.cumsum(d)[:nb] * full


def set_joint(set_id, sets, counts, class_target_hist, xp=None):
    """Mass of the classes' rows on a categorical domain: ``(n_categories, n_targets)`` float64.

    Class ``c``'s cell is the set of categories ``sets[set_id[c]]`` (a bool row over the
    categories: a set of values, a hierarchy node's leaves, or every category for ``*``).
    """
    xp = xp or get_namespace(class_target_hist)
    th = xp.asarray(class_target_hist).astype(xp.float64)
    sets_f = xp.asarray(sets).astype(xp.float64)
    cnt = xp.asarray(counts).astype(xp.float64)
    n_sets = sets_f.shape[0]
    per_set = _accumulate(xp.asarray(set_id), th, n_sets, xp)  # target histogram of every distinct cell
    size = sets_f @ cnt  # original rows inside every cell
    coef = per_set / xp.where(size > 0, size, 1.0)[:, None]
    return cnt[:, None] * (sets_f.T @ coef)


def hierarchy_joint(code_levels, node, level, counts, class_target_hist, n_nodes: int, xp=None):
    """:func:`set_joint` for hierarchy cells: class ``c`` is node ``node[c]`` at ``level[c]``.

    ``code_levels[x, L]`` is the node above category ``x`` at level ``L``; a loop over the
    hierarchy's levels (not over classes or nodes) gathers every node's rows and targets.
    """
    xp = xp or get_namespace(class_target_hist)
    th = xp.asarray(class_target_hist).astype(xp.float64)
    lv = xp.asarray(code_levels).astype(xp.int64)
    node, level = xp.asarray(node).astype(xp.int64), xp.asarray(level).astype(xp.int64)
    cnt = xp.asarray(counts).astype(xp.float64)
    q = xp.zeros((lv.shape[0], th.shape[1]), dtype=xp.float64)
    for lev in range(lv.shape[1]):  # a loop over levels
        sel = level == lev
        per_node = _accumulate(node[sel], th[sel], n_nodes, xp)
        size = scatter_sum(lv[:, lev], cnt, n_nodes, xp)
        coef = per_node / xp.where(size > 0, size, 1.0)[:, None]
        q += cnt[:, None] * coef[lv[:, lev]]
    return q


def suppressed_joint(domain_counts, suppressed_target_counts):
    """Mass of suppressed rows (cell ``*``): the column's marginal times their target counts."""
    xp = get_namespace(domain_counts)
    c = xp.asarray(domain_counts).astype(xp.float64)
    tot = float(c.sum())
    ts = xp.asarray(suppressed_target_counts).astype(xp.float64)
    if tot <= 0:
        return xp.zeros((c.shape[0], ts.shape[0]), dtype=xp.float64)
    return (c / tot)[:, None] * ts[None, :]


def domain_joint(bin_index, target_codes, n_bins: int, n_targets: int, xp=None):
    """Joint counts ``(n_bins, n_targets)`` of rows' bins and targets (one scatter-add)."""
    xp = xp or get_namespace(bin_index)
    flat = bin_index.astype(xp.int64) * n_targets + target_codes.astype(xp.int64)
    return count_values(flat, n_bins * n_targets, xp).reshape(n_bins, n_targets)
