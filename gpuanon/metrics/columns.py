"""A column's whole-table statistics (:class:`ColumnStats`: values, rows per value, ``H(X)``, the
domain ``D_X``, the joint rows per bin and target value, ``U(T | X)``) as a reduction, whichever
runner runs it: chunk (:func:`value_target_chunk`: the rows per (value, target value) of some rows, as
sorted key multisets, :class:`ValueTargets`), combine (:func:`combine_value_targets`: summed per
key), finalize (:func:`stats_from_value_targets`: :class:`ColumnStats`). One process runs it on one
chunk, the whole table (:func:`column_stats`); a cluster on its shards'
(:mod:`gpuanon.distributed.metrics`). The same integer counts give the same floats, so both
runners' statistics are equal.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kernels.counts import count_values, indices_of
from kernels.keys import MISSING

from ..backend import to_host, to_scalar
from .entropy import N_BINS, NumericDomain, numeric_domain
from .formulas import entropy_bits_x, xlogx_sum
from .runs import device_runs, run_counts, runs, sorted_copy


#: rows from which the CPU reads a value's rows per target value from runs of each target's sorted
#: keys (one more sort, of target 0's rows) rather than by two searches per value seen more than
#: once: searches of millions of values in a table larger than the caches miss them on every step
RUNS_ROWS = 1 << 22


class ColumnStats(NamedTuple):
    """Whole-table statistics of one encoded column, on the table's device."""

    vals: Any  # sorted distinct keys
    counts: Any  # rows per distinct key
    u_raw: Any  # U(T | X) over the raw distinct values (0-d), or None
    h_x: Any  # H(X) in bits over the raw distinct values (0-d)
    domain: NumericDomain  # D_X over the distinct values
    joint_before: Any = None  # (|D_X|, n_targets) counts
    rep: Any = None  # indices of the counts above 1 (ascending), when known


# ---------------------------------------------------------------------------------------------
# a column's whole-table statistics as chunk / combine / finalize. The rows per (value, target
# value) are held as sorted key multisets (ValueTargets): one process's one chunk is its sorted
# rows, a cluster's chunks are the shards' distinct keys with their rows, combined by summing
# per key; the finalize (stats_from_value_targets) is one, so the same integer counts give the
# same floats whichever runner ran.
# ---------------------------------------------------------------------------------------------

class ValueTargets(NamedTuple):
    """A column's rows per (value, target value), as sorted key multisets.

    ``whole``: ``(vals, counts, rep, has_missing, n_starts)``, the column's sorted distinct keys and
    their rows (``rep``, ``has_missing``, ``n_starts``: as :func:`~gpuanon.metrics.runs.device_runs`
    reads them, or None where not read). ``by_target[t - 1]``: ``(keys, weights)`` of the rows of
    target value ``t`` (``t = 1 .. nt - 1``; target 0 holds the rest): sorted keys, and their rows
    when the keys are distinct, or None when every entry is one row. No target: ``by_target`` None
    (a target of one value: empty). ``rest``: on the CPU's one chunk, the sorted keys of the rows of
    target 0 (then every ``by_target`` entry is one row per key): ``H(T | X)``'s sums read each target
    value's runs of equal keys, no search of the values seen more than once.
    """

    whole: tuple
    by_target: list | None
    rest: Any = None


def value_target_chunk(key_col, target, nt: int, xp, numeric: bool = True, counted=None,
                       target_rows=None) -> ValueTargets:
    """Chunk: the :class:`ValueTargets` of some rows (``key_col``, ``target``), where they live, by
    sorts: the column once (its runs), the rows of each target value but the first once each.

    What leaves the device: on the CPU whether the column has missing values (in the finalize); on a
    device four counts (:func:`~gpuanon.metrics.runs.device_runs`), or none when ``counted`` brings
    them (:func:`~gpuanon.metrics.runs.device_runs_many` of several columns). ``target_rows``: the target's rows per value on the
    host, when read (a target value's rows are then a compaction of known size). On the CPU the
    target values' keys are views of this thread's sort buffers: finalize before the next chunk.
    """
    if counted is not None:
        whole = counted
    elif xp is np:  # the values seen more than once found once, for every sum over them
        vals, counts = runs(sorted_copy(key_col, xp, 0), xp)
        whole = (vals, counts, np.flatnonzero(counts > 1), None, None)
    elif key_col.shape[0] == 0:
        vals, counts = runs(sorted_copy(key_col, xp, 0), xp)
        whole = (vals, counts, None, None, None)
    else:
        whole = device_runs(xp.sort(key_col), xp, numeric)
    if target is None:
        return ValueTargets(whole, None)
    by_target = []
    for t in range(1, nt):  # a loop over target values
        if target_rows is None or xp is np:
            srt_t = sorted_copy(key_col, xp, t, target == t)
        else:  # the target's rows counted on the host: a compaction of known size
            srt_t = xp.sort(key_col[indices_of(target == t, int(target_rows[t]), xp)])
        by_target.append((srt_t, None))
    rest = None
    if xp is np and counted is None and nt > 1 and key_col.shape[0] >= RUNS_ROWS:
        rest = sorted_copy(key_col, xp, nt, target == 0)  # the rows of target 0 (codes lie in 0 .. nt - 1)
    return ValueTargets(whole, by_target, rest)


def value_target_runs(vt: ValueTargets) -> ValueTargets:
    """A chunk as distinct keys with their rows (host arrays): what a shard sends to be combined."""
    vals, counts = vt.whole[:2]
    by_t = None
    if vt.by_target is not None:
        by_t = []
        for keys, w in vt.by_target:  # a loop over target values
            keys = to_host(keys)
            if w is None:
                keys, w = runs(keys, np)
            by_t.append((keys, to_host(w)))
    return ValueTargets((to_host(vals), to_host(counts), None, None, None), by_t)


def _sum_by_key(parts: list):
    """``(keys, weights)`` of several (host) weighted key sets, summed by key (sorted)."""
    keys = np.concatenate([p[0] for p in parts])
    u, inv = np.unique(keys, return_inverse=True)
    w = np.concatenate([np.asarray(p[1]) for p in parts]).astype(np.int64)
    return u.astype(keys.dtype, copy=False), count_values(inv.reshape(-1), u.shape[0], np, weights=w)


def combine_value_targets(chunks: list) -> ValueTargets:
    """Combine: several chunks' :class:`ValueTargets` (host runs, :func:`value_target_runs`) summed
    per key; one chunk as it is."""
    if len(chunks) == 1:
        return chunks[0]
    vals, counts = _sum_by_key([c.whole[:2] for c in chunks])
    by_t = None
    if chunks[0].by_target is not None:
        by_t = [_sum_by_key([c.by_target[t] for c in chunks]) for t in range(len(chunks[0].by_target))]
    return ValueTargets((vals, counts, None, None, None), by_t)


def value_target_matrix(vt: ValueTargets, nt: int):
    """``(vals, (m, nt) rows)``: the distinct values (uint32) and their rows per target value, dense
    (for columns of few values: a cluster's frequency tables and its homes' statistics)."""
    vals, counts = (np.asarray(to_host(a)) for a in vt.whole[:2])
    m = np.zeros((vals.shape[0], nt), dtype=np.int64)
    for t, (keys, w) in enumerate(vt.by_target or [], 1):  # a loop over target values
        m[np.searchsorted(vals, keys), t] = w
    m[:, 0] = counts - m[:, 1:].sum(axis=1)
    return vals.astype(np.uint32), m


def matrix_value_targets(vals, counts_t, has_target: bool) -> ValueTargets:
    """The :class:`ValueTargets` of a dense value x target matrix (host arrays)."""
    vals, ct = np.asarray(vals), np.asarray(counts_t)
    by_t = None
    if has_target:
        by_t = []
        for t in range(1, ct.shape[1]):  # a loop over target values
            nz = np.flatnonzero(ct[:, t])
            by_t.append((vals[nz], ct[nz, t]))
    return ValueTargets((vals, ct.sum(axis=1), None, None, None), by_t)


def _rows_at(keys, cum, at, xp):
    """Rows of a sorted key multiset (``cum``: its cumulative weights, or None for one row each)
    with key ``at[i]``."""
    a, b = xp.searchsorted(keys, at, side="left"), xp.searchsorted(keys, at, side="right")
    return (b - a).astype(xp.int64) if cum is None else cum[b] - cum[a]


def stats_from_value_targets(vt: ValueTargets, nt: int, target_counts, numeric: bool, xp,
                             target_rows=None) -> ColumnStats:
    """Finalize: a column's :class:`ColumnStats` from its :class:`ValueTargets`.

    ``H(X)`` and the domain ``D_X`` from the values' rows (:func:`column_domain`); then per target
    value but the first its rows per bin (searches of the bins' first keys) and at the values seen
    more than once (``H(T | X) = (sum_x n_x log n_x - sum_{x,t} n_xt log n_xt) / n``: a value seen
    once adds 0 to both sums), target 0 their rest; ``U(T | X)`` (:func:`finalize_column_stats`).
    """
    vals, counts, rep, has_missing, n_starts = vt.whole
    if has_missing is None:
        has_missing = bool(numeric and vals.shape[0] and int(to_scalar(vals[-1])) == MISSING)
    h_x, dom, done = column_domain(vals, counts, has_missing, numeric, vt.by_target is not None, nt, target_counts,
                                   xp, rep, n_starts)
    if done is not None:
        return done
    edge_keys = vals[dom.bin_start[:-1]]
    joint_t = []
    rep_all = rep
    if rep is None:
        rep = xp.nonzero(counts > 1)[0]
    # the CPU's one chunk: a value's rows of target t above 1 are its run in that target's sorted keys
    # (the same counts, in value order, as the searches below find)
    by_runs = xp is np and vt.rest is not None
    rep_vals = None if by_runs else vals[rep]
    rest = None if by_runs else counts[rep].copy()
    s2 = xp.zeros((), dtype=xp.float64)
    for keys, w in vt.by_target:  # a loop over target values
        n_k = int(keys.shape[0])
        cum = None
        if w is not None:
            cum = xp.zeros(n_k + 1, dtype=xp.int64)
            if n_k:
                xp.cumsum(w, out=cum[1:])
        jt = xp.zeros(dom.n_bins, dtype=xp.float64)
        if n_k:  # a bin's rows lie between the searches of its first key and the next bin's
            pos = xp.concatenate([xp.searchsorted(keys, edge_keys, side="left").astype(xp.int64),
                                  xp.full(1, n_k, dtype=xp.int64)])
            jt = xp.diff(pos if cum is None else cum[pos]).astype(xp.float64)
        joint_t.append(jt)
        if n_k == 0 or rep.shape[0] == 0:
            continue
        if by_runs:
            s2 = s2 + xlogx_sum(run_counts(keys), xp)
            continue
        c_rep = _rows_at(keys, cum, rep_vals, xp)
        rest -= c_rep
        s2 = s2 + xlogx_sum(c_rep, xp)
    s2 = s2 + xlogx_sum(run_counts(vt.rest) if by_runs else rest, xp)
    others = xp.stack(joint_t, axis=1)
    joint = xp.concatenate([dom.bin_counts.astype(xp.float64)[:, None] - others.sum(axis=1, keepdims=True), others],
                           axis=1)
    rep_t = None
    if target_rows is not None and xp is not np:
        rep_t = indices_of(target_counts > 1, int((np.asarray(target_rows) > 1).sum()), xp)
    return finalize_column_stats(vals, counts, h_x, dom, joint, s2, entropy_bits_x(target_counts, xp, rep_t), xp,
                                 rep_all)


def column_stats(key_col, target, nt: int, target_counts, xp, numeric: bool = True, counted=None,
                 target_rows=None) -> ColumnStats:
    """Statistics of one encoded column: the one-chunk case of the cluster's reduction, the chunk
    (:func:`value_target_chunk`, the whole column's sorts) finalized as a cluster finalizes its
    shards' combined chunks (:func:`stats_from_value_targets`). ``counted``: the column's
    :func:`~gpuanon.metrics.runs.device_runs`, when read with other columns'; ``target_rows``: ``target_counts`` on the host."""
    vt = value_target_chunk(key_col, target, nt, xp, numeric, counted, target_rows)
    return stats_from_value_targets(vt, nt, target_counts, numeric, xp, target_rows)


def column_domain(vals, counts, has_missing: bool, numeric: bool, has_target: bool, nt: int, target_counts, xp,
                  rep=None, n_starts=None):
    """Finalize, first half: a column's ``H(X)`` and domain ``D_X`` from its values' counts, and
    its :class:`ColumnStats` already when there is no target to relate it to (else None)."""
    h_x = entropy_bits_x(counts, xp, rep)
    dom = numeric_domain(counts, has_missing, xp, N_BINS if numeric else max(int(vals.shape[0]), 1), n_starts)
    if not has_target or target_counts is None or nt < 2:
        joint = None
        if has_target and nt == 1:
            joint = dom.bin_counts[:, None].astype(xp.float64)
        return h_x, dom, ColumnStats(vals, counts, None, h_x, dom, joint, rep)
    return h_x, dom, None


def finalize_column_stats(vals, counts, h_x, dom, joint, s2, h_t, xp, rep=None, n_rows=None, xs=None) -> ColumnStats:
    """Finalize, second half: ``U(T | X)`` from ``s2 = sum_{x,t} n_xt log n_xt`` and ``H(T)``,
    and the column's :class:`ColumnStats` (``joint``: rows per domain bin and target value).
    ``n_rows`` (float64) and ``xs`` (``sum_x n_x log n_x``): when known, in place of ``counts``."""
    n = counts.sum().astype(xp.float64) if n_rows is None else n_rows
    h_t_x = ((xlogx_sum(counts, xp, rep) if xs is None else xs) - s2) / xp.where(n > 0, n, 1.0)
    u = xp.where((h_t > 0) & (n > 0), xp.clip((h_t - h_t_x) / xp.where(h_t > 0, h_t, 1.0), 0.0, 1.0), 0.0)
    return ColumnStats(vals, counts, u, h_x, dom, joint, rep)


def before_stats(table, j: int, target_counts, cache_limit: int = 1 << 16, counted=None,
                 target_rows=None) -> ColumnStats:
    """Statistics of QI ``j`` over the whole table; kept in ``table.column_stats`` (sweeps reuse
    them) when the column has at most ``cache_limit`` distinct values. ``counted``: the column's
    :func:`device_runs`, when read with other columns'; ``target_rows``: ``target_counts`` on the host."""
    cache = table.column_stats
    if j in cache:
        return cache[j]
    nt = max(len(table.target_values), 1)
    st = column_stats(table.keys[j], table.target, nt, target_counts, table.xp,
                      numeric=table.columns[j].kind == "numeric", counted=counted, target_rows=target_rows)
    if st.vals.shape[0] <= cache_limit:
        cache[j] = st
    return st
