"""A numeric column's statistics on the CPU read off its sorted rows, with no array per distinct value.

A column of mostly distinct values (a float column of millions of rows) has nearly as many distinct
values as rows: its value counts, their running count, a value index per class bound and a bin per
distinct value each cost a column-long pass and a column-long array. Here every number the metrics
read is taken from the sorted rows themselves and from the few rows that repeat the row before them
(:class:`SortedRows`): rows before a bound are searches of the sorted rows, the values seen more
than once (all that ``H(X)``, ``H(T | X)`` and the interval entropies sum over) are runs of those
repeated rows, the domain's equal-frequency bins are row positions. The counts are the integers the
value-space path (:mod:`gpuanon.metrics.columns`, :func:`~gpuanon.metrics.formulas.interval_entropy_at`)
counts, and every float is computed from them by the same operations in the same order, so the
statistics are the same bits.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kernels.keys import MISSING

from ..backend import to_scalar
from ..cpu import host_sort_is_slow

from .columns import ColumnStats, finalize_column_stats
from .entropy import N_BINS, NumericDomain
from .formulas import entropy_bits_x, entropy_bits_n, xlog2x_counts, xlogx_sum
from .runs import sorted_by_target, sorted_copy


class SortedRows(NamedTuple):
    """A column's sorted rows (a view of this thread's sort buffer) and its values seen more than once."""

    srt: Any  # the column's keys, sorted
    rep_vals: Any  # the values seen more than once, ascending
    rep_counts: Any  # their rows (int64, each above 1)
    rep_start: Any  # the first row of each
    n_values: int  # distinct values
    by_target: Any = None  # the sorted keys of the rows of each target value (0 .. nt - 1), when sorted so


def sorted_rows(key_col, min_values: int, target=None, nt: int = 1):
    """:class:`SortedRows` of a host column, or ``(sorted keys, None)`` when it has at most
    ``min_values`` distinct values or more repeated rows than distinct ones (then the value-space
    path is the cheaper, and its runs are read off the same sort).

    With a ``target`` of ``nt > 1`` values, where NumPy's sort is slow
    (:func:`~gpuanon.cpu.host_sort_is_slow`), the rows of each target value are sorted and the
    column merged from them (:func:`~gpuanon.metrics.runs.sorted_by_target`; at 10.5M x 28 about
    4.8 CPU s less there, 12 %): :func:`row_column_stats` searches them, so no row is sorted twice.
    Where the sort is fast the merge and the extra pass cost more than the half sort saved (a third
    more CPU at 2M rows): the column is sorted whole and each target value's rows again."""
    n = int(key_col.shape[0])
    by_t = None
    if target is not None and nt > 1 and host_sort_is_slow():
        srt, by_t = sorted_by_target(key_col, target, nt)
    else:
        srt = sorted_copy(key_col, np, 0)
    if n < 2:
        return srt, None
    same = srt[1:] == srt[:-1]  # row p + 1 repeats row p
    n_dup = int(np.count_nonzero(same))
    if n - n_dup <= min_values or 2 * n_dup > n:
        return srt, None
    dup = np.flatnonzero(same)
    del same
    dv = srt[dup]  # the value of every repeated row, ascending
    if dv.shape[0] == 0:
        return srt, SortedRows(srt, dv, np.zeros(0, dtype=np.int64), dup, n, by_t)
    new = np.empty(dv.shape[0], dtype=bool)
    new[0] = True
    np.not_equal(dv[1:], dv[:-1], out=new[1:])
    first = np.flatnonzero(new)
    counts = np.empty(first.shape[0], dtype=np.int64)
    np.subtract(first[1:], first[:-1], out=counts[:-1])
    counts[-1] = dv.shape[0] - first[-1]
    counts += 1  # the run's first row, not a repeat
    return srt, SortedRows(srt, dv[first], counts, dup[first], n - n_dup, by_t)


def _value_index(sr: SortedRows, rows):
    """The distinct-value index of sorted rows ``rows``: the rows minus the repeats at or before them."""
    if sr.rep_vals.shape[0] == 0:
        return rows.copy()
    ends = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sr.rep_counts - 1)])  # repeats before each run
    # the repeats among rows 1 .. r: all of every run starting before r but the last, whose rows may go past r
    k = np.searchsorted(sr.rep_start, rows, side="left")  # runs starting before row r
    last = np.maximum(k - 1, 0)
    past = np.where(k > 0, np.maximum(sr.rep_start[last] + sr.rep_counts[last] - 1 - rows, 0), 0)
    return rows - (ends[k] - past)


def row_domain(sr: SortedRows, n_bins: int = N_BINS) -> NumericDomain:
    """:func:`~gpuanon.metrics.entropy.numeric_domain` of a column of more than ``n_bins`` present
    values from its sorted rows: the bins' first value indices and their rows before (``start_cum``;
    no ``cum``)."""
    srt, n, v = sr.srt, int(sr.srt.shape[0]), sr.n_values
    # the last sorted key is the last distinct value: the same counted read as the value-space path's
    # (the report's transfers say what a device would read, whichever path the CPU takes)
    has_missing = int(to_scalar(srt[-1])) == MISSING
    n_present = int(np.searchsorted(srt, np.asarray(MISSING, dtype=srt.dtype), side="left")) if has_missing else n
    vp = v - int(has_missing)
    q = (np.arange(n_bins, dtype=np.int64) * n_present) // n_bins  # row positions of the quantiles
    raw = _value_index(sr, q)  # value index of the sorted row at each quantile (ascending)
    starts, at = np.unique(raw, return_index=True)
    first_row = np.searchsorted(srt, srt[q[at]], side="left")  # rows before each bin's first value
    tail = [vp, v] if has_missing else [v]
    tail_rows = [n_present, n] if has_missing else [n]
    bin_start = np.concatenate([starts.astype(np.int64), np.asarray(tail, dtype=np.int64)])
    start_cum = np.concatenate([first_row.astype(np.int64), np.asarray(tail_rows, dtype=np.int64)])
    return NumericDomain(bin_start, None, np.diff(start_cum), True, has_missing, start_cum=start_cum)


def row_column_stats(key_col, sr: SortedRows, target, nt: int, target_counts) -> ColumnStats:
    """:func:`~gpuanon.metrics.columns.column_stats` of a host numeric column from its
    :class:`SortedRows` (``vals``, ``counts`` and ``rep`` are None: nothing per distinct value).

    Per target value but the first: its rows' sorted keys (this thread's sort buffer ``t``), searched
    at the bins' first keys and at the values seen more than once; target 0 holds the rest.
    """
    n = int(sr.srt.shape[0])
    xs = xlogx_sum(sr.rep_counts, np)  # sum of c log2 c over the values' counts (1 log 1 = 0)
    n_f = np.int64(n).astype(np.float64)
    h_x = entropy_bits_n(n_f, xs, np)
    dom = row_domain(sr)
    if target is None or target_counts is None or nt < 2:
        joint = dom.bin_counts[:, None].astype(np.float64) if target is not None and nt == 1 else None
        return ColumnStats(None, None, None, h_x, dom, joint, None)
    edge_keys = sr.srt[dom.start_cum[:-1]]  # each bin's first key
    joint_t = []
    rest = sr.rep_counts.copy()
    s2 = np.zeros((), dtype=np.float64)
    for t in range(1, nt):  # a loop over target values
        keys = sr.by_target[t] if sr.by_target is not None else sorted_copy(key_col, np, t, target == t)
        n_k = int(keys.shape[0])
        jt = np.zeros(dom.n_bins, dtype=np.float64)
        if n_k:
            pos = np.concatenate([np.searchsorted(keys, edge_keys, side="left").astype(np.int64),
                                  np.full(1, n_k, dtype=np.int64)])
            jt = np.diff(pos).astype(np.float64)
        joint_t.append(jt)
        if n_k == 0 or sr.rep_vals.shape[0] == 0:
            continue
        c_rep = (np.searchsorted(keys, sr.rep_vals, side="right")
                 - np.searchsorted(keys, sr.rep_vals, side="left")).astype(np.int64)
        rest -= c_rep
        s2 = s2 + xlogx_sum(c_rep, np)
    s2 = s2 + xlogx_sum(rest, np)
    others = np.stack(joint_t, axis=1)
    joint = np.concatenate([dom.bin_counts.astype(np.float64)[:, None] - others.sum(axis=1, keepdims=True), others],
                           axis=1)
    return finalize_column_stats(None, None, h_x, dom, joint, s2, entropy_bits_x(target_counts, np), np,
                                 n_rows=n_f, xs=xs)


def row_positions(sr: SortedRows, start_cum, kmin, kmax):
    """Per class ``[kmin, kmax]``: rows before ``kmin`` and up to ``kmax`` (``ca``, ``cb``), values
    seen more than once below ``kmin`` and up to ``kmax`` (``ia``, ``ib``), and the bins of the
    interval's first and last rows (``ba``, ``bb``). Each bound is sorted with its class (one 64-bit
    sort), searched in sorted order and put back: the three numbers packed in one 64-bit word when
    they fit (one scatter instead of three)."""
    m = int(kmin.shape[0])
    out = {}
    low = np.uint64(0xFFFFFFFF)
    rb = max(int(sr.srt.shape[0]).bit_length(), 1)  # rows and repeated-value positions are at most n
    bb = max(int(start_cum.shape[0]).bit_length(), 1)  # a bin + 1 is at most n_bins + 1
    packed = 2 * rb + bb <= 64
    for bound, side in ((kmin, "left"), (kmax, "right")):  # the two bounds
        key = bound.astype(np.uint64)
        key <<= np.uint64(32)
        key |= np.arange(m, dtype=np.uint64)
        key.sort()
        needles = (key >> np.uint64(32)).astype(sr.srt.dtype)
        key &= low
        at = key.view(np.int64)  # the classes in bound order (below 2**32: the same as intp)
        del key
        rows = np.searchsorted(sr.srt, needles, side=side)
        reps = np.searchsorted(sr.rep_vals, needles, side=side)
        # the bin of the first row (kmin: the last bin starting at or before it) or of the last row
        bins = np.searchsorted(start_cum, rows, side="right" if side == "left" else "left") - 1
        if packed:
            word = rows.view(np.uint64)  # rows, positions and bins + 1 are at least 0
            word <<= np.uint64(rb + bb)
            reps <<= bb
            word |= reps.view(np.uint64)
            bins += 1
            word |= bins.view(np.uint64)
            del rows, reps, bins
            o = np.empty(m, dtype=np.uint64)
            o[at] = word
            del word
            out["c" + side[0]] = (o >> np.uint64(rb + bb)).view(np.int64)
            i = o >> np.uint64(bb)
            i &= np.uint64((1 << rb) - 1)
            out["i" + side[0]] = i.view(np.int64)
            o &= np.uint64((1 << bb) - 1)
            b = o.view(np.int64)
            b -= 1
            out["b" + side[0]] = b
            continue
        for name, arr in (("c", rows), ("i", reps), ("b", bins)):  # three arrays put back
            o = np.empty(m, dtype=np.int64)
            o[at] = arr
            out[name + side[0]] = o
    ca, ia = out["cl"], out["il"]
    cb, ib = np.maximum(out["cr"], ca), np.maximum(out["ir"], ia)  # an empty interval: b = a
    return ca, cb, ia, ib, out["bl"], out["br"]


def row_interval_entropy(sr: SortedRows, ca, cb, ia, ib):
    """:func:`~gpuanon.metrics.formulas.interval_entropy_at` from rows and repeated-value positions
    (the same operations on the same numbers, in place where they can be)."""
    clog = np.empty(sr.rep_counts.shape[0] + 1, dtype=np.float64)
    clog[0] = 0.0
    np.cumsum(xlog2x_counts(sr.rep_counts, np), out=clog[1:])
    s = (cb - ca).astype(np.float64)  # rows with a value in [lo, hi] (exact integers)
    pos = s > 0
    safe = np.where(pos, s, 1.0)
    del s
    e = clog[ib]
    e -= clog[ia]  # sum of c log2 c over those values (1 log 1 = 0)
    e /= safe
    h = np.log2(safe)
    h -= e
    del e, safe
    h[~pos] = 0.0
    return np.maximum(h, 0.0, out=h)
