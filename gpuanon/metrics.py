"""Information-loss metrics (the contract, section 7).

Every metric is computed from a :class:`ClassSummary`: one row per equivalence class (its size,
its target histogram, and for every QI its generalized value), plus the original columns'
value counts. A summary is built either from the anonymizer's encoded table and labels
(:func:`summary_from_labels`, on the GPU or the CPU with the same segmented kernels as the
anonymizer) or from any output table and the original table (:func:`summary_from_output`), so
users' own tables and a peer's partitions are scored by the same code.

Metrics: the entropy (uncertainty) coefficient ``U(T | X)`` per QI before and after and the
total loss; Gionis-Tassa conditional-entropy loss (raw and normalized); NCP (weighted);
discernibility; ``C_avg``; the classification metric; Sweeney's precision (for
hierarchy-generalized columns); class-size statistics; suppressed rows.

Examples
--------
>>> import numpy as np, pandas as pd
>>> df = pd.DataFrame({"age": [20, 30, 40, 50], "c": ["a", "a", "b", "c"]})
>>> round(ncp(df, ["age", "c"], np.array([0, 0, 1, 1]), {"age": "numeric", "c": "categorical"}), 4)
0.3333
>>> round(entropy_loss([0.361, 0.221, 0.266, 0.279, 0.005], [0.259, 0.242, 0.209, 0.218, 0.007]), 3)
0.174
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from kernels.keys import MISSING
from kernels.segmented import group_starts, segment_reduce

from .backend import to_host
from .entropy import (N_BINS, NumericDomain, domain_joint, hierarchy_joint, interval_joint, interval_positions,
                      numeric_domain, set_joint, stable_argsort, suppressed_joint, uncertainty_from_joint)
from .cells import SET_SEPARATOR, cell_text, parse_numeric_cells, split_set_text  # noqa: F401 (re-exported)



# ---------------------------------------------------------------------------------------------
# plain formulas on counts
# ---------------------------------------------------------------------------------------------

def entropy_bits(counts) -> float:
    """Shannon entropy (bits) of a count vector: ``log2 n - sum c log2 c / n``."""
    c = np.asarray(counts)
    n = float(c.sum())
    if n <= 0:
        return 0.0
    return float(max(0.0, np.log2(n) - _xlogx_sum(c) / n))


def uncertainty_coefficient(joint) -> float:
    """``U(T | X) = (H(T) - H(T | X)) / H(T)`` from a joint count table ``joint[x, t]``.

    0 when the target is constant (``H(T) = 0``).
    """
    joint = np.asarray(joint, dtype=np.float64)
    n = joint.sum()
    if n == 0:
        return 0.0
    ht = entropy_bits(joint.sum(axis=0))
    if ht == 0:
        return 0.0
    nx = joint.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(joint > 0, joint / np.where(nx[:, None] > 0, nx[:, None], 1), 1.0)
        h_t_given_x = -(joint / n * np.log2(p)).sum()
    return float(max(0.0, min(1.0, (ht - h_t_given_x) / ht)))


def entropy_loss(before, after) -> float:
    """Total entropy-coefficient loss ``1 - sum_j U(T|X'_j) / sum_j U(T|X_j)``."""
    b = float(np.sum(before))
    return 0.0 if b == 0 else 1.0 - float(np.sum(after)) / b


def precision(levels, heights) -> float:
    """Sweeney's precision ``1 - sum_ij h_ij / |DGH_j| / (N * N_QI)``.

    ``levels``: (N, N_QI) generalization level of every cell; ``heights``: (N_QI,) hierarchy heights.
    """
    levels = np.asarray(levels, dtype=np.float64)
    heights = np.asarray(heights, dtype=np.float64)
    if levels.size == 0:
        return 1.0
    return float(1.0 - (levels / heights[None, :]).sum() / levels.size)


# ---------------------------------------------------------------------------------------------
# class summaries
# ---------------------------------------------------------------------------------------------

@dataclass
class ColumnSummary:
    """One QI: its generalized value per class and the original column's value counts.

    numeric: ``lo``, ``hi`` per class, the domain's range, and ``gt_h``, each class's
    Gionis-Tassa entropy (bits) of the original values inside its interval. categorical: ``set_id`` per class into ``sets`` (bool, sets x categories);
    ``counts`` per category. ``u_before``: ``U(T | X)`` of the original column over its raw
    distinct values (the label reading's "before").

    The entropy coefficient of section 7 (amended) reads the column on its domain ``D_X``
    (:mod:`gpuanon.entropy`): ``domain_counts`` rows per domain element, ``joint_before`` the
    original rows' ``(x, t)`` counts, ``joint_after`` the kept rows' mass spread over their cells
    (suppressed rows are added by :func:`compute_metrics`).
    """

    name: str
    kind: str
    counts: np.ndarray
    u_before: float | None = None  # U(T | X) of the original column (raw distinct values)
    h_bits: float = 0.0  # entropy (bits) of the original column
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    dom_range: float = 0.0
    gt_h: np.ndarray | None = None
    gen_id: np.ndarray | None = None  # numeric: dense id of each class's (lo, hi), when known
    set_id: np.ndarray | None = None
    sets: np.ndarray | None = None
    levels: np.ndarray | None = None  # hierarchy level per class (for precision), if any
    height: int | None = None
    domain_counts: np.ndarray | None = None  # rows per element of D_X
    joint_before: np.ndarray | None = None  # (|D_X|, n_targets) counts over the original rows
    joint_after: np.ndarray | None = None  # (|D_X|, n_targets) mass of the kept rows over their cells
    binned: bool = False  # numeric column read on equal-frequency bins

    def generalized_ids(self) -> np.ndarray:
        """A dense id per class of its generalized value on this column."""
        if self.kind == "categorical":
            return self.set_id
        if self.gen_id is not None:
            return self.gen_id
        lo = np.where(np.isnan(self.lo), np.inf, self.lo)
        hi = np.where(np.isnan(self.hi), np.inf, self.hi)
        pair = np.empty(lo.shape[0], dtype=np.complex128)
        pair.real, pair.imag = lo, hi
        return np.unique(pair, return_inverse=True)[1].reshape(-1)


@dataclass
class ClassSummary:
    """Equivalence classes of an anonymized table, ready for every metric."""

    sizes: np.ndarray
    target_hist: np.ndarray | None
    columns: list[ColumnSummary]
    n_in: int
    n_suppressed: int
    target_counts_before: np.ndarray | None = None
    notes: list = field(default_factory=list)

    @property
    def n_out(self) -> int:
        return int(self.sizes.sum())


def _stats_from_runs(val, tcode, cnt, target_counts):
    """Column statistics from sorted runs of equal (value, target) pairs (host arrays).

    Returns ``(distinct values, counts per value, U(T | X), H(X) in bits)``.
    """
    vnew = np.ones(val.shape[0], dtype=bool)
    vnew[1:] = val[1:] != val[:-1]
    vstart = np.nonzero(vnew)[0]
    counts = np.add.reduceat(cnt, vstart) if val.shape[0] else np.zeros(0, dtype=np.int64)
    n = float(cnt.sum())
    h_x = entropy_bits(counts)
    u = None
    if target_counts is not None and n > 0:
        h_t = entropy_bits(target_counts)
        n_v = np.repeat(counts, np.diff(np.append(vstart, val.shape[0])))
        h_t_x = float(-(cnt / n * np.log2(cnt / n_v)).sum())
        u = 0.0 if h_t == 0 else float(max(0.0, min(1.0, (h_t - h_t_x) / h_t)))
    return val[vstart], counts, u, h_x


def _runs(sorted_keys, xp):
    """Distinct values of a sorted array and how often each occurs."""
    n = sorted_keys.shape[0]
    if n == 0:
        return sorted_keys, xp.zeros(0, dtype=xp.int64)
    new = xp.ones(n, dtype=bool)
    new[1:] = sorted_keys[1:] != sorted_keys[:-1]
    start = xp.nonzero(new)[0]
    return sorted_keys[start], xp.diff(xp.concatenate([start, xp.asarray([n], dtype=start.dtype)]))


_TLS = threading.local()


def _sorted_copy(a, xp, slot: int, mask=None):
    """A sorted copy of ``a`` (or of ``a[mask]``); on the CPU into a reused per-thread buffer.

    Fresh multi-hundred-megabyte arrays cost as much in page faults as the sort itself.
    """
    if xp is not np:
        return xp.sort(a if mask is None else a[mask])
    bufs = _TLS.__dict__.setdefault("bufs", {})
    buf = bufs.get(slot)
    if buf is None or buf.shape[0] < a.shape[0] or buf.dtype != a.dtype:
        buf = bufs[slot] = np.empty(a.shape[0], dtype=a.dtype)
    if mask is None:
        out = buf[: a.shape[0]]
        np.copyto(out, a)
    else:
        m = int(np.count_nonzero(mask))
        out = buf[:m]
        np.compress(mask, a, out=out)
    out.sort()
    return out


def release_buffers() -> None:
    """Free this thread's sort buffers."""
    _TLS.__dict__.pop("bufs", None)


class _ColStats(NamedTuple):
    """Whole-table statistics of one encoded column (the first four fields: the old tuple)."""

    vals: np.ndarray  # sorted distinct keys (host)
    counts: np.ndarray  # rows per distinct key (host)
    u_raw: float | None  # U(T | X) over the raw distinct values
    h_x: float  # H(X) in bits over the raw distinct values
    vals_x: Any = None  # the same two on the table's backend
    counts_x: Any = None
    domain: NumericDomain | None = None  # D_X over the distinct values (backend arrays)
    joint_before: np.ndarray | None = None  # (|D_X|, n_targets) counts (host)


def _key_stats(key_col, target, nt: int, target_counts, xp, numeric: bool = True) -> _ColStats:
    """Statistics of one encoded column from sorts of its (uint32) keys.

    One sort of the whole column gives the values and their counts; one sort of the rows of
    each target value but the first gives the joint counts, over the raw values (``U`` of the
    label reading) and over the domain ``D_X`` (bins of a numeric column with more than 256
    distinct values; every category of a categorical one).
    """
    vals, counts = _runs(_sorted_copy(key_col, xp, 0), xp)
    vals_h, counts_h = to_host(vals), to_host(counts).astype(np.int64)
    h_x = entropy_bits(counts_h)
    has_missing = bool(numeric and vals_h.shape[0] and vals_h[-1] == MISSING)
    dom = numeric_domain(counts, has_missing, xp, N_BINS if numeric else max(int(vals_h.shape[0]), 1))
    if target is None or target_counts is None or nt < 2:
        joint = None
        if target is not None and nt == 1:
            joint = to_host(dom.bin_counts)[:, None].astype(np.float64)
        return _ColStats(vals_h, counts_h, None, h_x, vals, counts, dom, joint)
    edge_keys = vals[dom.bin_start[:-1]]
    nb = dom.n_bins
    joint_t = []
    # H(T | X) = (sum_x n_x log n_x - sum_{x,t} n_xt log n_xt) / n; a value seen once adds 0 to
    # both sums, so only values seen more than once need their per-target counts
    rep = np.flatnonzero(counts_h > 1)
    rep_vals = vals[xp.asarray(rep)]
    rest = counts_h[rep].copy()
    s2 = 0.0
    for t in range(1, nt):  # a loop over target values
        vt, ct = _runs(_sorted_copy(key_col, xp, 1, target == t), xp)
        # rows of target t per bin: vt is sorted, so each bin is a run of it (search the edges in vt)
        pos = xp.searchsorted(vt, edge_keys, side="left")
        jt = xp.zeros(nb, dtype=xp.float64)
        nonempty = pos < vt.shape[0]  # bins above the largest value of target t hold none of its rows
        if bool(nonempty.any()):
            p_ne = pos[nonempty]
            # a bin is a run of vt: one segmented sum; of bins sharing a start only the last is not empty
            last = xp.concatenate([p_ne[1:] != p_ne[:-1], xp.ones(1, dtype=bool)])
            sums = segment_reduce("add", ct, p_ne[last], xp, axis=0)
            jt[xp.nonzero(nonempty)[0][last]] = sums.astype(xp.float64)
        joint_t.append(to_host(jt))
        if vt.shape[0] == 0 or rep.shape[0] == 0:
            continue
        at = xp.minimum(xp.searchsorted(vt, rep_vals), vt.shape[0] - 1)
        hit = to_host(vt[at] == rep_vals)
        c_rep = np.where(hit, to_host(ct[at]).astype(np.int64), 0)
        rest -= c_rep
        s2 += _xlogx_sum(c_rep)
    s2 += _xlogx_sum(rest)
    others = np.stack(joint_t, axis=1)
    joint = np.concatenate([to_host(dom.bin_counts).astype(np.float64)[:, None] - others.sum(axis=1, keepdims=True),
                            others], axis=1)
    n = float(counts_h.sum())
    h_t = entropy_bits(target_counts)
    if h_t == 0 or n == 0:
        return _ColStats(vals_h, counts_h, 0.0, h_x, vals, counts, dom, joint)
    h_t_x = (_xlogx_sum(counts_h) - s2) / n
    u = float(max(0.0, min(1.0, (h_t - h_t_x) / h_t)))
    return _ColStats(vals_h, counts_h, u, h_x, vals, counts, dom, joint)


def _xlogx_sum(c) -> float:
    """``sum c log2 c`` over counts (0 log 0 = 1 log 1 = 0: only counts above 1 are visited)."""
    c = np.asarray(c)
    big = c[c > 1].astype(np.float64)
    return float((big * np.log2(big)).sum())


def _before_stats(table, j: int, target_counts, cache_limit: int = 1 << 16):
    """Statistics of QI ``j`` over the whole table; cached on the table (sweeps reuse them) when
    the column has at most ``cache_limit`` distinct values."""
    cache = table.__dict__.setdefault("_metric_cache", {})
    if j in cache:
        return cache[j]
    nt = max(len(table.target_values), 1)
    st = _key_stats(table.keys[j], table.target, nt, target_counts, table.xp,
                    numeric=table.columns[j].kind == "numeric")
    if st[0].shape[0] <= cache_limit:
        cache[j] = st
    return st


def summary_from_labels(table, labels, n_classes: int | None = None) -> ClassSummary:
    """Summarize the classes of the anonymizer's own output (labels: class per row, -1 suppressed)."""
    xp = table.xp
    labels = xp.asarray(labels)
    kept = xp.nonzero(labels >= 0)[0]
    lab = labels[kept]
    order = stable_argsort(lab, xp)
    rows = kept[order]
    starts = group_starts(lab[order], xp)
    sizes = xp.diff(xp.concatenate([starts, xp.asarray([rows.shape[0]], dtype=xp.int64)]))
    part = xp.repeat(xp.arange(starts.shape[0], dtype=xp.int64), sizes)
    nt = len(table.target_values)
    thist = None
    tcounts = None
    if table.target is not None:
        thist = xp.bincount(part * nt + table.target[rows].astype(xp.int64),
                            minlength=starts.shape[0] * nt).reshape(-1, nt)
        tcounts = to_host(xp.bincount(table.target, minlength=nt))
    thist_h = None if thist is None else to_host(thist)
    nparts = int(starts.shape[0])

    def categorical(c, st, set_id, sets, **extra) -> ColumnSummary:
        full = np.zeros(c.n_categories, dtype=np.int64)
        full[st.vals.astype(np.int64)] = st.counts
        joint_before = joint_after = None
        if thist_h is not None and st.joint_before is not None:
            joint_before = np.zeros((c.n_categories, st.joint_before.shape[1]))
            joint_before[st.vals.astype(np.int64)] = st.joint_before
            joint_after = to_host(set_joint(set_id, sets, full, thist_h, np))
        return ColumnSummary(c.name, "categorical", full, st.u_raw, st.h_x, set_id=set_id, sets=sets,
                             domain_counts=full, joint_before=joint_before, joint_after=joint_after, **extra)

    def column(j: int) -> ColumnSummary:
        c, key = table.columns[j], table.keys[j]
        st = _before_stats(table, j, tcounts)
        if c.kind == "categorical" and c.hierarchy is not None:
            code = key[rows]
            lo_c = to_host(segment_reduce("minimum", code, starts, xp, axis=0)).astype(np.int64)
            hi_c = to_host(segment_reduce("maximum", code, starts, xp, axis=0)).astype(np.int64)
            lv = to_host(c.code_levels)
            a, b = lv[lo_c], lv[hi_c]
            level = np.argmax(a == b, axis=1)
            node = a[np.arange(a.shape[0]), level]
            used, set_id = np.unique(node, return_inverse=True)
            used_level = c.hierarchy.node_level[used]
            sets = lv[:, used_level].T == used[:, None]  # leaves (codes) under each used node
            return categorical(c, st, set_id.reshape(-1), sets, levels=level.astype(np.int64),
                               height=int(c.hierarchy.height))
        if c.kind == "categorical":
            code = key[rows].astype(xp.int64)
            ncat = c.n_categories
            pairs = xp.unique(part * ncat + code)
            pc, cc = to_host(pairs // ncat), to_host(pairs % ncat)
            member = np.zeros((nparts, ncat), dtype=bool)
            member[pc, cc] = True
            sets, set_id = np.unique(member, axis=0, return_inverse=True)
            return categorical(c, st, set_id.reshape(-1), sets)
        k = key[rows]
        kmin_x = segment_reduce("minimum", k, starts, xp, axis=0)
        kmax_x = segment_reduce("maximum", k, starts, xp, axis=0)
        kmin, kmax = to_host(kmin_x).astype(np.int64), to_host(kmax_x).astype(np.int64)
        lo, hi = to_host(table.numeric_values(j, kmin_x)), to_host(table.numeric_values(j, kmax_x))
        # keys are order-preserving: search in key space (a missing class covers the MISSING key only)
        pa, pb = interval_positions(st.vals_x, kmin_x.astype(st.vals_x.dtype), kmax_x.astype(st.vals_x.dtype), xp)
        gt_h, ca, cb = _interval_entropy_at(st.counts, to_host(pa), to_host(pb), rows=True)
        joint_after = None
        if thist is not None and st.joint_before is not None:
            rows_ab = (ca, cb) if xp is np else None  # on the CPU: no gathers from a column-long cumsum
            joint_after = to_host(interval_joint(pa, pb, st.domain, thist, xp, rows=rows_ab))
        gen = np.unique((kmin << 32) | kmax, return_inverse=True)[1].reshape(-1)
        return ColumnSummary(c.name, "numeric", np.zeros(0, dtype=np.int64), st.u_raw, st.h_x, lo=lo, hi=hi,
                             dom_range=c.global_range, gt_h=gt_h, gen_id=gen,
                             domain_counts=to_host(st.domain.bin_counts), joint_before=st.joint_before,
                             joint_after=joint_after, binned=st.domain.binned)

    import os  # noqa: PLC0415

    workers = int(os.environ.get("GPUANON_THREADS", 0)) or (os.cpu_count() or 1)
    if xp is np and len(table.columns) > 1 and workers > 1:  # numpy sorts release the GIL
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        with ThreadPoolExecutor(max_workers=min(len(table.columns), workers)) as ex:
            cols = list(ex.map(column, range(len(table.columns))))
    else:
        cols = [column(j) for j in range(len(table.columns))]
        release_buffers()
    n_in = int(table.n_rows)
    return _merge_equal_classes(ClassSummary(to_host(sizes), None if thist is None else to_host(thist), cols,
                                             n_in, n_in - int(rows.shape[0]), tcounts))


class HierarchyScorer:
    """``U'(T | X)`` of candidate hierarchies of categorical QIs over fixed classes (section 5.6).

    A class's cell on column ``j`` under hierarchy ``h`` is the lowest node covering its codes
    (codes follow ``h``'s leaf order, so the node covering the smallest and the largest code).
    Suppressed rows count with the cell ``*``. The class statistics (rows sorted by class, target
    histograms, code ranges) are computed once and shared by every candidate.

    >>> import pandas as pd
    >>> from gpuanon.encoding import encode
    >>> from gpuanon.schema import Schema
    >>> from gpuanon.hierarchy import Hierarchy
    >>> df = pd.DataFrame({"c": ["a", "b", "c", "d"], "y": [0, 0, 1, 1]})
    >>> t = encode(df, Schema.from_frame(df, ["c"], target="y"))
    >>> sc = HierarchyScorer(t, np.array([0, 0, 1, 1]))
    >>> h = Hierarchy.from_labels(["a", "b", "c", "d"], [["ab", "*"], ["ab", "*"], ["cd", "*"], ["cd", "*"]])
    >>> round(sc.u_before(0), 12), round(sc.u_after(0, h), 12)
    (1.0, 1.0)
    """

    def __init__(self, table, labels):
        xp = table.xp
        self.table, self.xp = table, xp
        labels = xp.asarray(labels)
        kept = xp.nonzero(labels >= 0)[0]
        lab = labels[kept]
        order = stable_argsort(lab, xp)
        self.rows = kept[order]
        self.starts = group_starts(lab[order], xp)
        sizes = xp.diff(xp.concatenate([self.starts, xp.asarray([self.rows.shape[0]], dtype=xp.int64)]))
        self.thist = self.tcounts = self.tsup = None
        if table.target is not None:
            nt = len(table.target_values)
            part = xp.repeat(xp.arange(self.starts.shape[0], dtype=xp.int64), sizes)
            self.thist = xp.bincount(part * nt + table.target[self.rows].astype(xp.int64),
                                     minlength=self.starts.shape[0] * nt).reshape(-1, nt)
            self.tcounts = to_host(xp.bincount(table.target, minlength=nt))
            self.tsup = self.tcounts - to_host(self.thist.sum(axis=0))
        self._ranges: dict = {}

    def _column(self, j: int):
        if j not in self._ranges:
            xp, c = self.xp, self.table.columns[j]
            code = self.table.keys[j][self.rows]
            lo = segment_reduce("minimum", code, self.starts, xp, axis=0).astype(xp.int64)
            hi = segment_reduce("maximum", code, self.starts, xp, axis=0).astype(xp.int64)
            st = _before_stats(self.table, j, self.tcounts)
            full = np.zeros(c.n_categories, dtype=np.int64)
            full[st.vals.astype(np.int64)] = st.counts
            self._ranges[j] = (lo, hi, full, st)
        return self._ranges[j]

    def u_before(self, j: int) -> float | None:
        """``U(T | X_j)`` over the column's categories (None without a target)."""
        if self.thist is None:
            return None
        return uncertainty_from_joint(self._column(j)[3].joint_before)

    def u_after(self, j: int, hierarchy) -> float | None:
        """``U'(T | X_j)`` when every class's cell is its lowest node of ``hierarchy``."""
        if self.thist is None:
            return None
        xp, col = self.xp, self.table.columns[j]
        lo, hi, full, _ = self._column(j)
        leaf = to_host(hierarchy.leaf_codes(col.categories))
        lv = xp.asarray(hierarchy.levels[leaf])  # node of every code at every level
        a, b = lv[lo], lv[hi]
        level = xp.argmax(a == b, axis=1)
        node = a[xp.arange(a.shape[0]), level]
        q = to_host(hierarchy_joint(lv, node, level, xp.asarray(full), self.thist, int(hierarchy.n_nodes), xp))
        if self.tsup.sum() > 0:
            q = q + suppressed_joint(full.astype(np.float64), self.tsup)
        return uncertainty_from_joint(q)


def _merge_equal_classes(summary: ClassSummary) -> ClassSummary:
    """Partitions whose generalized tuples are equal form one equivalence class (relaxed mode)."""
    n = len(summary.sizes)
    if n == 0:
        return summary
    gid = np.zeros(n, dtype=np.int64)
    for col in summary.columns:
        g = col.generalized_ids()
        gid = pd.factorize(gid * (int(g.max()) + 1) + g)[0].astype(np.int64)
    n_ec = int(gid.max()) + 1
    if n_ec == n:
        return summary
    first = np.full(n_ec, n, dtype=np.int64)
    np.minimum.at(first, gid, np.arange(n))
    sizes = np.bincount(gid, weights=summary.sizes, minlength=n_ec).astype(np.int64)
    thist = None
    if summary.target_hist is not None:
        thist = np.stack([np.bincount(gid, weights=summary.target_hist[:, t], minlength=n_ec)
                          for t in range(summary.target_hist.shape[1])], axis=1).astype(np.int64)
    cols = []
    for col in summary.columns:
        c = ColumnSummary(col.name, col.kind, col.counts, col.u_before, col.h_bits, dom_range=col.dom_range,
                          sets=col.sets, height=col.height, domain_counts=col.domain_counts,
                          joint_before=col.joint_before, joint_after=col.joint_after, binned=col.binned)
        for f in ("lo", "hi", "gt_h", "set_id", "levels", "gen_id"):
            v = getattr(col, f)
            if v is not None:
                setattr(c, f, v[first])
        cols.append(c)
    return ClassSummary(sizes, thist, cols, summary.n_in, summary.n_suppressed, summary.target_counts_before,
                        summary.notes)


def summary_from_output(out: pd.DataFrame, original: pd.DataFrame, quasi_identifiers, kinds: dict,
                        target: str | None = None, class_ids=None, hierarchies: dict | None = None,
                        rows=None) -> ClassSummary:
    """Summarize any anonymized table against the original one (rows need not be aligned).

    Numeric QIs may be numbers, ``"lo-hi"`` text, or ``<col>_min`` / ``<col>_max`` pairs;
    categorical QIs a value, values joined by ``|``, ``*`` (every category), or a node label of
    ``hierarchies[column]`` (a :class:`~gpuanon.hierarchy.Hierarchy`).

    A numeric column of plain numbers that are not all original values is read as a ``mean``
    column: each class stands for the interval of its original rows, found through ``rows``
    (the position in ``original`` of every output row) or, when the tables have equal length
    and the same target sequence, row by row. Without either, each mean is read as the original
    value nearest to it (a note says so).
    """
    from .verify import class_ids as _class_ids  # noqa: PLC0415

    from .generalize import resolve_qi_columns  # noqa: PLC0415

    try:
        qcols = resolve_qi_columns(quasi_identifiers, out.columns)
    except KeyError as exc:
        raise KeyError(f"quasi-identifier '{exc.args[0]}' is not in the anonymized table") from None
    if class_ids is None:
        gid, n_cls = _class_ids(out, qcols)
    else:
        gid, n_cls = pd.factorize(np.asarray(class_ids))[0], None
        n_cls = int(gid.max()) + 1 if len(gid) else 0
    gid = np.asarray(gid, dtype=np.int64)
    sizes = np.bincount(gid, minlength=n_cls)
    new = np.ones(len(gid), dtype=bool)
    new[1:] = gid[1:] > np.maximum.accumulate(gid)[:-1] if len(gid) else new[1:]
    first = np.nonzero(new)[0]
    thist, tcounts, tcodes_orig, nt = None, None, None, 1
    if target is not None:
        tvals = pd.unique(original[target])
        tcodes_orig = pd.Index(tvals).get_indexer(original[target])
        tc = pd.Index(tvals).get_indexer(out[target])
        if (tc < 0).any():
            raise ValueError(f"target column '{target}' holds values that the original table does not have")
        nt = len(tvals)
        thist = np.bincount(gid * nt + tc, minlength=n_cls * nt).reshape(n_cls, nt)
        tcounts = np.bincount(tcodes_orig, minlength=nt)
    if rows is None and len(out) == len(original) and (
            target is None or np.array_equal(out[target].to_numpy(), original[target].to_numpy())):
        rows = np.arange(len(out))  # the same rows in the same order
    notes: list = []
    hierarchies = hierarchies or {}
    cols = []
    for c in quasi_identifiers:
        o = original[c]
        if kinds[c] == "numeric":
            ov = pd.to_numeric(o, errors="coerce").to_numpy(dtype=np.float64)
            key = np.where(np.isnan(ov), np.inf, ov)
            vals, inv = np.unique(key, return_inverse=True)
            inv = inv.reshape(-1)
            _, vcounts, u_before, h_bits = _code_stats(inv, tcodes_orig, tcounts)
            dom = numeric_domain(vcounts, bool(np.isnan(ov).any()), np)
            plain = c in out.columns
            if plain:
                lo, hi = parse_numeric_cells(out[c])
                plain = bool(np.all((lo == hi) | np.isnan(lo)))
            else:
                lo = out[f"{c}_min"].to_numpy(dtype=np.float64, na_value=np.nan)
                hi = out[f"{c}_max"].to_numpy(dtype=np.float64, na_value=np.nan)
            lo, hi = lo[first], hi[first]
            a, b = interval_positions(vals, np.where(np.isnan(lo), np.inf, lo), np.where(np.isnan(hi), np.inf, hi), np)
            empty = b <= a
            if plain and empty.any() and rows is not None:  # means: each class's interval of original rows
                g = pd.DataFrame({"g": gid, "v": ov[np.asarray(rows)]}).groupby("g")["v"]
                lo, hi = g.min().reindex(range(n_cls)).to_numpy(), g.max().reindex(range(n_cls)).to_numpy()
                a, b = interval_positions(vals, np.where(np.isnan(lo), np.inf, lo),
                                          np.where(np.isnan(hi), np.inf, hi), np)
                empty = b <= a
                notes.append(f"column '{c}': numbers read as class means; each class stands for the interval "
                             f"of its original rows")
            if empty.any():  # cells that hold no original value: the nearest original value
                mid = np.where(np.isnan(lo), np.inf, (lo + hi) / 2)
                i_hi = np.clip(np.searchsorted(vals, mid), 0, len(vals) - 1)
                i_lo = np.clip(i_hi - 1, 0, len(vals) - 1)
                near = np.where(np.abs(vals[i_lo] - mid) <= np.abs(vals[i_hi] - mid), i_lo, i_hi)
                a, b = np.where(empty, near, a), np.where(empty, near + 1, b)
                notes.append(f"column '{c}': {int(empty.sum())} class cell(s) hold no original value and are "
                             f"read as the nearest original value")
            gt_h = _interval_entropy_at(vcounts, a, b)
            pv = vals[np.isfinite(vals)]
            rng = float(pv[-1] - pv[0]) if pv.shape[0] > 1 else 0.0
            joint_before = joint_after = None
            if thist is not None:
                joint_before = domain_joint(dom.bin_of(inv), tcodes_orig, dom.n_bins, nt, np).astype(np.float64)
                joint_after = interval_joint(a, b, dom, thist, np)
            cols.append(ColumnSummary(c, "numeric", np.zeros(0, dtype=np.int64), u_before, h_bits,
                                      lo=lo, hi=hi, dom_range=rng, gt_h=gt_h, domain_counts=dom.bin_counts,
                                      joint_before=joint_before, joint_after=joint_after, binned=dom.binned))
        else:
            codes, cats = pd.factorize(o, use_na_sentinel=False)
            ncat = len(cats)
            _, ccounts, u_before, h_bits = _code_stats(codes.astype(np.int64), tcodes_orig, tcounts)
            index = {cell_text(v): i for i, v in enumerate(cats)}
            nodes = _node_members(hierarchies.get(c), index)
            cell_inv, cells = pd.factorize(out[c].iloc[first], use_na_sentinel=False)
            cell_sets = np.zeros((len(cells), ncat), dtype=bool)
            for i, cell in enumerate(cells):  # a loop over distinct generalized values
                t = cell_text(cell)
                if t in index:
                    cell_sets[i, index[t]] = True
                elif t in nodes:
                    cell_sets[i, nodes[t]] = True
                elif t == "*":
                    cell_sets[i, :] = True
                else:
                    for p in split_set_text(t):
                        if p not in index:
                            raise ValueError(f"value {p!r} in column '{c}' is not in the original table (nor a "
                                             f"hierarchy label: pass the hierarchy used)")
                        cell_sets[i, index[p]] = True
            sets, sid = np.unique(cell_sets, axis=0, return_inverse=True)
            set_id = sid.reshape(-1)[cell_inv]
            joint_before = joint_after = None
            if thist is not None:
                joint_before = domain_joint(codes.astype(np.int64), tcodes_orig, ncat, nt, np).astype(np.float64)
                joint_after = set_joint(set_id, sets, ccounts, thist, np)
            cols.append(ColumnSummary(c, "categorical", ccounts, u_before, h_bits, set_id=set_id, sets=sets,
                                      domain_counts=ccounts, joint_before=joint_before, joint_after=joint_after))
    return ClassSummary(sizes, thist, cols, len(original), len(original) - len(out), tcounts, notes)


def _node_members(hierarchy, index: dict) -> dict:
    """``{node label: category indices under it}`` for a hierarchy's inner nodes (empty without one)."""
    if hierarchy is None:
        return {}
    leaf_idx = np.array([index.get(cell_text(v), -1) for v in hierarchy.leaves], dtype=np.int64)
    out = {}
    for node in range(hierarchy.n_leaves, hierarchy.n_nodes):  # a loop over hierarchy nodes
        under = leaf_idx[(hierarchy.levels == node).any(axis=1)]
        out.setdefault(str(hierarchy.labels[node]), under[under >= 0])
    return out


def output_metrics(out: pd.DataFrame, original: pd.DataFrame, quasi_identifiers, target: str | None = None,
                   kinds: dict | None = None, k: int | None = None, hierarchies: dict | None = None) -> dict:
    """Every section-7 metric of a user's anonymized table against its original (``gpuanon check --original``).

    ``kinds`` defaults to the original columns' dtypes (numbers: numeric; anything else:
    categorical); ``hierarchies`` maps a column to the hierarchy whose node labels it uses.

    >>> import pandas as pd
    >>> orig = pd.DataFrame({"age": [20, 30, 40, 50], "y": [0, 0, 1, 1]})
    >>> out = pd.DataFrame({"age": ["20-30", "20-30", "40-50", "40-50"], "y": [0, 0, 1, 1]})
    >>> round(output_metrics(out, orig, ["age"], target="y")["entropy_loss"], 6)
    0.0
    """
    if kinds is None:
        kinds = {c: "numeric" if (pd.api.types.is_numeric_dtype(original[c])
                                  and not pd.api.types.is_bool_dtype(original[c])) else "categorical"
                 for c in quasi_identifiers}
    summary = summary_from_output(out, original, list(quasi_identifiers), kinds, target=target,
                                  hierarchies=hierarchies)
    met = compute_metrics(summary, k=k)
    if summary.notes:
        met["notes"] = list(summary.notes)
    return met


def _code_stats(codes, tcodes, target_counts):
    """Column statistics of dense codes 0..m-1 (every code present), via the shared run logic."""
    nt = len(target_counts) if target_counts is not None else 1
    u, cnt = np.unique(codes * nt + (tcodes if tcodes is not None else 0), return_counts=True)
    return _stats_from_runs(u // nt, u % nt, cnt, target_counts)


# ---------------------------------------------------------------------------------------------
# the metrics
# ---------------------------------------------------------------------------------------------

def _interval_entropy(values, counts, lo, hi):
    """Entropy (bits) of the original distribution restricted to each ``[lo, hi]``.

    ``values`` sorted (numbers or order-preserving keys), ``counts`` >= 1 per value; an empty
    interval (lo > hi) gives 0.
    """
    a, b = interval_positions(values, lo, hi, np)
    return _interval_entropy_at(counts, a, b)


def _interval_entropy_at(counts, a, b, rows: bool = False):
    """Entropy (bits) of the original distribution over distinct-value indices ``a .. b - 1``.

    Prefix sums are kept only where a value occurs more than once, so a column of mostly
    distinct values needs no array as long as the column. ``rows=True`` also returns the rows
    before ``a`` and before ``b`` (what the entropy coefficient needs: no second search).
    """
    b = np.maximum(b, a)
    rep = np.flatnonzero(counts > 1)  # values seen more than once
    c = counts[rep].astype(np.float64)
    extra = np.concatenate([[0.0], np.cumsum(c - 1.0)])
    clog = np.concatenate([[0.0], np.cumsum(c * np.log2(c))])
    ia, ib = np.searchsorted(rep, a), np.searchsorted(rep, b)
    s = (b - a) + (extra[ib] - extra[ia])  # rows with a value in [lo, hi]
    e = clog[ib] - clog[ia]  # sum of c log2 c over those values (1 log 1 = 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(s > 0, np.log2(np.where(s > 0, s, 1.0)) - e / np.where(s > 0, s, 1.0), 0.0)
    if rows:
        return np.maximum(h, 0.0), (a + extra[ia]).astype(np.int64), (b + extra[ib]).astype(np.int64)
    return np.maximum(h, 0.0)


def _set_entropy(sets, counts):
    c = counts.astype(np.float64)
    clog = np.where(c > 0, c * np.log2(np.where(c > 0, c, 1.0)), 0.0)
    s = sets.astype(np.float64) @ c
    e = sets.astype(np.float64) @ clog
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(s > 0, np.log2(np.where(s > 0, s, 1.0)) - e / np.where(s > 0, s, 1.0), 0.0)
    return np.maximum(h, 0.0)


def column_ncp(col: ColumnSummary) -> np.ndarray:
    """NCP of every class on one column."""
    if col.kind == "numeric":
        rng = float(col.dom_range)
        w = col.hi - col.lo
        return np.where(np.isnan(w), 0.0, w / rng) if rng > 0 else np.zeros(len(col.lo))
    dom = max(int((col.counts > 0).sum()), 1)
    size = col.sets.sum(axis=1)[col.set_id]
    return np.where(size > 1, size / dom, 0.0)


def suppressed_target_counts(summary: ClassSummary) -> np.ndarray | None:
    """Target counts of the suppressed rows: the original table's minus the output's."""
    if summary.target_hist is None or summary.target_counts_before is None:
        return None
    t = np.asarray(summary.target_counts_before, dtype=np.float64) - summary.target_hist.sum(axis=0)
    return np.maximum(t, 0.0)


def entropy_coefficients(summary: ClassSummary) -> dict:
    """``U(T | X_j)`` before and ``U'(T | X_j)`` after per QI, and the loss (section 7, amended).

    Suppressed rows count with the cell ``*`` (the column's marginal). A column summary without
    domain tables (built by hand) gives ``None``.
    """
    tsup = suppressed_target_counts(summary)
    before, after, binned = {}, {}, []
    for col in summary.columns:
        if col.joint_before is None or col.joint_after is None:
            before[col.name] = after[col.name] = None
            continue
        q = np.asarray(col.joint_after, dtype=np.float64)
        if tsup is not None and tsup.sum() > 0:
            q = q + suppressed_joint(np.asarray(col.domain_counts, dtype=np.float64), tsup)
        before[col.name] = uncertainty_from_joint(col.joint_before)
        after[col.name] = uncertainty_from_joint(q)
        if col.binned:
            binned.append(col.name)
    ok = [c for c in before if before[c] is not None]
    loss = entropy_loss([before[c] for c in ok], [after[c] for c in ok]) if ok else None
    out = {"entropy_coefficient_before": before, "entropy_coefficient_after": after, "entropy_loss": loss}
    if binned:
        out["entropy_binned_columns"] = binned
    return out


def label_entropy_coefficients(summary: ClassSummary) -> dict:
    """Diagnostic: ``U`` over the generalized labels taken as categories (the first reading).

    A label identifies its class, so it also carries what the class's other QIs say about the
    target: this reading can exceed the original column's ``U`` (negative loss).
    """
    before, after = {}, {}
    nt = summary.target_hist.shape[1]
    for col in summary.columns:
        before[col.name] = col.u_before
        gid = col.generalized_ids()
        ng = int(gid.max()) + 1 if len(gid) else 0
        joint = np.stack([np.bincount(gid, weights=summary.target_hist[:, t], minlength=ng)
                          for t in range(nt)], axis=1) if ng else np.zeros((0, nt))
        after[col.name] = uncertainty_coefficient(joint)
    ok = [c for c in before if before[c] is not None]
    return {"entropy_coefficient_before_labels": before, "entropy_coefficient_after_labels": after,
            "entropy_loss_labels": entropy_loss([before[c] for c in ok], [after[c] for c in ok]) if ok else None}


def compute_metrics(summary: ClassSummary, k: int | None = None, weights: dict | None = None,
                    histogram_bins: int = 30) -> dict:
    """Every metric of the contract's section 7 as a JSON-ready dict."""
    sizes = summary.sizes.astype(np.int64)
    n_out, n_in = int(sizes.sum()), int(summary.n_in)
    n_cls = int(len(sizes))
    qis = [c.name for c in summary.columns]
    m: dict = {"n_classes": n_cls, "n_rows_out": n_out, "n_suppressed": int(summary.n_suppressed)}
    # entropy coefficient before / after (section 7 as amended: cells read on the domain D_X)
    if summary.target_hist is not None:
        m.update(entropy_coefficients(summary))
        m.update(label_entropy_coefficients(summary))
        cm_pen = (sizes - summary.target_hist.max(axis=1)).sum()
        m["cm"] = float((cm_pen + summary.n_suppressed) / max(n_in, 1))
    else:
        m.update(entropy_coefficient_before=None, entropy_coefficient_after=None, entropy_loss=None,
                 entropy_coefficient_before_labels=None, entropy_coefficient_after_labels=None,
                 entropy_loss_labels=None, cm=None)
    # Gionis-Tassa conditional entropy
    gt_total, gt_norm_den, per_gt = 0.0, 0.0, {}
    for col in summary.columns:
        if col.kind == "numeric":
            h = col.gt_h
        else:
            h = _set_entropy(col.sets, col.counts)[col.set_id]
        v = float((h * sizes).sum())
        per_gt[col.name] = v
        gt_total += v
        gt_norm_den += n_out * col.h_bits
    m["gionis_tassa"] = {"total_bits": gt_total, "normalized": gt_total / gt_norm_den if gt_norm_den > 0 else 0.0,
                         "per_column_bits": per_gt}
    # NCP
    w = np.array([1.0 if weights is None else float(weights.get(c, 0.0)) for c in qis])
    w = w / w.sum() if w.sum() > 0 else np.full(len(qis), 1.0 / max(len(qis), 1))
    per_ncp = {col.name: float((column_ncp(col) * sizes).sum() / max(n_out, 1)) for col in summary.columns}
    m["ncp"] = float(sum(wi * per_ncp[c] for wi, c in zip(w, qis)))
    m["ncp_per_column"] = per_ncp
    m["ncp_weights"] = dict(zip(qis, map(float, w)))
    # discernibility, C_avg
    m["dm"] = int((sizes.astype(np.int64) ** 2).sum()) + int(summary.n_suppressed) * n_in
    m["c_avg"] = float((n_out / n_cls) / k) if (k and n_cls) else None
    # precision (hierarchy-generalized columns only)
    hcols = [c for c in summary.columns if c.levels is not None]
    if hcols:
        lv = np.stack([np.repeat(c.levels, sizes) for c in hcols], axis=1)
        m["precision"] = precision(lv, [c.height for c in hcols])
    else:
        m["precision"] = None
    # class sizes
    if n_cls:
        lo_s, hi = int(sizes.min()), int(sizes.max())
        width = max(1, -(-(hi - lo_s + 1) // histogram_bins))  # integer-wide bins of equal width
        edges = lo_s + width * np.arange(-(-(hi - lo_s + 1) // width) + 1)
        counts, edges = np.histogram(sizes, bins=edges)
        m["class_size"] = {"min": int(sizes.min()), "median": float(np.median(sizes)), "max": hi,
                           "mean": float(sizes.mean()),
                           "histogram": {"edges": edges.tolist(), "counts": counts.tolist()}}
    return m


def ncp_per_column(df: pd.DataFrame, qi, labels, kinds: dict, categorical: str = "set") -> dict:
    """Mean NCP of every QI for any partitioning of ``df`` (labels per row, -1: suppressed).

    ``categorical='set'`` is the contract's definition (0 for one value, else covered / domain);
    ``'arx'`` is ``(covered - 1) / (domain - 1)``.
    """
    labels = np.asarray(labels)
    keep = labels >= 0
    out = {}
    lab = pd.factorize(labels[keep])[0]
    sizes = np.bincount(lab)
    for c in qi:
        if kinds[c] == "numeric":
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
            rng = np.nanmax(v) - np.nanmin(v) if np.isfinite(v).any() else 0.0
            g = pd.DataFrame({"g": lab, "v": v[keep]}).groupby("g")["v"]
            width = (g.max() - g.min()).to_numpy()
            pen = np.where(np.isnan(width), 0.0, width / rng) if rng > 0 else np.zeros(len(sizes))
        else:
            dom = max(int(pd.Series(df[c]).nunique(dropna=False)), 1)
            codes = pd.factorize(df[c].to_numpy()[keep], use_na_sentinel=False)[0].astype(np.int64)
            distinct = np.bincount(np.unique(lab * (codes.max() + 1) + codes) // (codes.max() + 1),
                                   minlength=len(sizes))
            if categorical == "arx":
                pen = (distinct - 1) / (dom - 1) if dom > 1 else np.zeros(len(sizes))
            else:
                pen = np.where(distinct > 1, distinct / dom, 0.0)
        out[c] = float((pen * sizes).sum() / max(sizes.sum(), 1))
    return out


def ncp(df: pd.DataFrame, qi, labels, kinds: dict, weights=None, categorical: str = "set") -> float:
    """Table NCP of a partitioning: mean over rows of the weighted mean over QIs."""
    per = ncp_per_column(df, qi, labels, kinds, categorical)
    w = np.ones(len(qi)) if weights is None else np.asarray([weights.get(c, 0.0) for c in qi], dtype=float)
    w = w / w.sum()
    return float(sum(wi * per[c] for wi, c in zip(w, qi)))
