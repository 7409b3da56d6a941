"""Class summaries of the anonymizer's own output, on the device the table lives on.

:func:`summary_from_labels` reads the shared class statistics (:class:`gpuanon.release.classes.ClassStats`:
one sort by class, per-class key ranges, category masks, hierarchy nodes, target histograms) and
each column's whole-table statistics (:mod:`gpuanon.metrics.columns`, kept in ``Table.column_stats``), and
keeps every per-class and per-value array where it was made: what reaches the host are the
metrics' single numbers (:mod:`gpuanon.metrics.compute`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernels.counts import count_values, indices_of
from kernels.hierarchy import lowest_common_node
from kernels.keys import MISSING, float32_keys

from ..backend import get_namespace, to_device, to_host, to_scalar
from ..release.classes import ClassStats
from .columns import before_stats
from .entropy import (hierarchy_joint, interval_joint, interval_positions, set_joint, suppressed_joint,
                      uncertainty_from_joint)
from .formulas import dense_ids, dense_ids_x, interval_entropy_at
from .runs import device_runs_many, release_buffers, runs, trim_heap
from .sorted_rows import row_column_stats, row_interval_entropy, row_positions, sorted_rows


#: rows from which the CPU hands each column's freed temporaries back to the system (a small table's
#: are too few to matter)
TRIM_ROWS = 1 << 20

#: rows below which the CPU runs the columns one after another: at Adult's 30k rows (and 100k) the
#: thread pool's start and hand-offs cost more CPU and wall time than the overlap saves
SERIAL_ROWS = 1 << 17

#: distinct values up to which a column's statistics are kept in ``Table.column_stats`` (and read
#: in value space); a CPU column of more is read off its sorted rows (:mod:`gpuanon.metrics.sorted_rows`)
CACHE_LIMIT = 1 << 16

#: key types the CPU reads off the sorted rows (each key sorted with its class in 64 bits)
SMALL_KEYS = (np.uint32, np.uint16, np.uint8)


@dataclass
class ColumnSummary:
    """One QI: its generalized value per class and the original column's value counts.

    numeric: ``lo``, ``hi`` per class, the domain's range, and ``gt_h``, each class's
    Gionis-Tassa entropy (bits) of the original values inside its interval. Classes are told apart
    by their keys where known (``gen_id``, ``gen_key``; a summary of a published table has none and
    reads ``lo`` / ``hi``): an exact column's floats (distances from its smallest value) merge
    neighbouring values beyond 2**53, and its NCP reads ``width``, each class's span computed in
    integers and rounded once. categorical:
    ``set_id`` per class into ``sets`` (bool, sets x categories); ``counts`` per category.
    ``u_before``: ``U(T | X)`` of the original column over its raw distinct values (the label
    reading's "before").

    The entropy coefficient of section 7 (amended) reads the column on its domain ``D_X``
    (:mod:`gpuanon.metrics.entropy`): ``domain_counts`` rows per domain element, ``joint_before`` the
    original rows' ``(x, t)`` counts, ``joint_after`` the kept rows' mass spread over their cells
    (suppressed rows are added by :func:`~gpuanon.metrics.compute_metrics`). Arrays are NumPy or
    CuPy (all on one device); single numbers may be 0-d arrays. ``lo`` / ``hi`` may be float32 (a
    float32 column's values on the CPU, exact); readers widen them to float64.
    """

    name: str
    kind: str
    counts: Any
    u_before: Any = None  # U(T | X) of the original column (raw distinct values)
    h_bits: Any = 0.0  # entropy (bits) of the original column
    lo: Any = None
    hi: Any = None
    dom_range: float = 0.0
    gt_h: Any = None
    gen_id: Any = None  # numeric: dense id of each class's (lo, hi), when known
    gen_key: Any = None  # numeric: each class's (smallest key << 32 | largest key), uint64 (keys are global;
    # none on the CPU for a float32 column: made from its float32 lo / hi when read)
    width: Any = None  # exact column (``Column.exact``): each class's hi - lo computed in integers
    set_id: Any = None
    sets: Any = None
    levels: Any = None  # hierarchy level per class (for precision), if any
    height: int | None = None
    domain_counts: Any = None  # rows per element of D_X
    joint_before: Any = None  # (|D_X|, n_targets) counts over the original rows
    joint_after: Any = None  # (|D_X|, n_targets) mass of the kept rows over their cells
    binned: bool = False  # numeric column read on equal-frequency bins

    def generalized_ids(self):
        """A dense id per class of its generalized value on this column."""
        if self.kind == "categorical":
            return self.set_id
        if self.gen_id is not None:
            return self.gen_id
        if self.gen_key is not None:  # keys are order-preserving: the ids (lo, hi) would give
            return dense_ids_x(self.gen_key)[0]
        if isinstance(self.lo, np.ndarray) and self.lo.dtype == np.float32:  # float32 bounds: their
            # keys (a float32 column's keys are its values' float32_keys), made when read
            key = float32_keys(self.lo).astype(np.uint64) << np.uint64(32)
            key |= float32_keys(self.hi).astype(np.uint64)
            return dense_ids_x(key)[0]
        lo = np.where(np.isnan(self.lo), np.inf, self.lo)
        hi = np.where(np.isnan(self.hi), np.inf, self.hi)
        pair = np.empty(lo.shape[0], dtype=np.complex128)
        pair.real, pair.imag = lo, hi
        return np.unique(pair, return_inverse=True)[1].reshape(-1)


@dataclass
class ClassSummary:
    """Equivalence classes of an anonymized table, ready for every metric."""

    sizes: Any
    target_hist: Any
    columns: list[ColumnSummary]
    n_in: int
    n_suppressed: int
    target_counts_before: Any = None
    notes: list = field(default_factory=list)

    @property
    def n_out(self) -> int:
        return int(to_scalar(self.sizes.sum()))


# ---------------------------------------------------------------------------------------------
# the summary of the anonymizer's classes
# ---------------------------------------------------------------------------------------------

def category_sets(stats, j: int, n_categories: int):
    """``(set_id, sets)``: a dense id per class of its set of categories, and the sets as bool rows."""
    xp = stats.xp
    masks = stats.category_masks(j)  # (classes, words) uint64
    words = masks.shape[1]
    if words == 1:
        set_id, n_sets = dense_ids(masks[:, 0])
    else:
        set_id = stats.set_ids(j).astype(xp.int64)  # dense, by a sort of the mask rows
        n_sets = int(to_scalar(set_id.max())) + 1 if set_id.shape[0] else 0
    rep = xp.zeros(n_sets, dtype=xp.int64)
    rep[set_id] = xp.arange(set_id.shape[0], dtype=xp.int64)  # any class holding the set
    bits = (masks[rep][:, :, None] >> xp.arange(64, dtype=xp.uint64)[None, None, :]) & xp.uint64(1)
    return set_id, bits.reshape(n_sets, words * 64)[:, :n_categories].astype(bool)


def summary_from_labels(table, labels, n_classes: int | None = None, stats=None, positions=None) -> ClassSummary:
    """Summarize the classes of the anonymizer's own output (labels: class per row, -1 suppressed).

    ``stats``: the fit's :class:`~gpuanon.release.classes.ClassStats` when the pipeline has one (its
    sort by class and per-class statistics are shared); otherwise one is built from ``labels``.
    ``positions``: per numeric QI whose whole-table statistics are held elsewhere (a cluster's
    value ranges, :mod:`gpuanon.distributed.ranges`), every class's ``(a, b, rows before a, rows
    before b, interval entropy)``, as this function would compute them from the column's values.
    """
    xp = table.xp
    if stats is None:
        labels = to_device(labels, xp)
        if n_classes is None:
            n_classes = int(to_scalar(labels.max())) + 1 if labels.shape[0] else 0
        stats = ClassStats(table, labels, max(int(n_classes), 0))
    nt = len(table.target_values)
    thist = tcounts = None
    if table.target is not None:
        thist = stats.target_hist()
        tcounts = count_values(table.target, nt, xp)

    def categorical(c, st, set_id, sets, joint_after, **extra) -> ColumnSummary:
        full = xp.zeros(c.n_categories, dtype=xp.int64)
        full[st.vals.astype(xp.int64)] = st.counts
        joint_before = joint_after_ = None
        if thist is not None and st.joint_before is not None:
            joint_before = xp.zeros((c.n_categories, st.joint_before.shape[1]), dtype=xp.float64)
            joint_before[st.vals.astype(xp.int64)] = st.joint_before
            joint_after_ = joint_after(full)
        return ColumnSummary(c.name, "categorical", full, st.u_raw, st.h_x, set_id=set_id, sets=sets,
                             domain_counts=full, joint_before=joint_before, joint_after=joint_after_, **extra)

    counted, tc_host = {}, None
    if xp is not np and table.n_rows:  # the columns not kept from an earlier run: their counts read together
        if tcounts is not None and nt > 1:
            tc_host = to_host(tcounts)  # the target's rows per value, read once for every column
        counted = device_runs_many({j: (table.keys[j], c.kind == "numeric") for j, c in enumerate(table.columns)
                                    if j not in table.column_stats}, xp)

    def column(j: int) -> ColumnSummary:
        c = table.columns[j]
        if c.kind == "numeric" and c.name not in table.hierarchies:
            return numeric(j, c)
        st = before_stats(table, j, tcounts, counted=counted.pop(j, None), target_rows=tc_host)
        bound = table.hierarchies.get(c.name)
        if bound is not None:
            node, level = stats.hierarchy_nodes(j)
            set_id, n_used = dense_ids(node)
            used = xp.zeros(n_used, dtype=xp.int64)
            used[set_id] = node
            used_level = xp.zeros(n_used, dtype=xp.int64)
            used_level[set_id] = level
            lv = bound.code_levels  # node above every code at every level
            sets = lv[:, used_level].T == used[:, None]  # leaves (codes) under each used node
            return categorical(c, st, set_id, sets, lambda full: set_joint(set_id, sets, full, thist, xp),
                               levels=level.astype(xp.int64), height=int(bound.hierarchy.height))
        set_id, sets = category_sets(stats, j, c.n_categories)
        return categorical(c, st, set_id, sets, lambda full: set_joint(set_id, sets, full, thist, xp))

    def numeric(j: int, c) -> ColumnSummary:
        kmin, kmax = stats.key_minmax(j)
        pos = None if positions is None else positions.get(j)
        sr, got, bins = None, counted.pop(j, None), None
        if xp is np and pos is None and j not in table.column_stats and table.keys[j].dtype in SMALL_KEYS:
            srt, sr = sorted_rows(table.keys[j], CACHE_LIMIT, table.target, nt)  # the CPU: statistics off the sorted rows
            if sr is None:  # few values: the value-space path, its runs read off the same sort
                vals, cnt = runs(srt, np)
                got = (vals, cnt, np.flatnonzero(cnt > 1), None, None)
        if sr is not None:
            st = row_column_stats(table.keys[j], sr, table.target, max(nt, 1), tcounts)
            ca, cb, ia, ib, ba, bb = row_positions(sr, st.domain.start_cum, kmin.astype(sr.srt.dtype),
                                                   kmax.astype(sr.srt.dtype))
            gt_h, pa, pb, bins = row_interval_entropy(sr, ca, cb, ia, ib), None, None, (ba, bb)
        else:
            st = before_stats(table, j, tcounts, counted=got, target_rows=tc_host)
        lo, hi = table.numeric_values(j, kmin), table.numeric_values(j, kmax)
        f32 = xp is np and isinstance(c.info, str)
        if f32:  # float32 values held as float32 (exactly): half the bytes; their keys are made from
            lo, hi = lo.astype(np.float32), hi.astype(np.float32)  # them when read (no gen_key held)
        if xp is np and table.column_stats.get(j) is not st:  # the CPU passes the rows below: the
            st.domain.cum = None  # column-long running count of a column not kept is not needed
        # keys are order-preserving: search in key space (a missing class covers the MISSING key only)
        if sr is None and pos is None:
            pa, pb = interval_positions(st.vals, kmin.astype(st.vals.dtype), kmax.astype(st.vals.dtype), xp)
            gt_h, ca, cb = interval_entropy_at(st.counts, pa, pb, rows=True, rep=st.rep)
        elif sr is None:
            pa, pb, ca, cb, gt_h = pos
        joint_after = None
        if thist is not None and st.joint_before is not None:
            # on the CPU: no gathers from a column-long cumsum (and none exists for positions given)
            rows_ab = (ca, cb) if xp is np or pos is not None else None
            joint_after = interval_joint(pa, pb, st.domain, thist, xp, rows=rows_ab, bins=bins)
        gen_key = None if f32 else (kmin.astype(xp.uint64) << xp.uint64(32)) | kmax.astype(xp.uint64)
        # the CPU keeps the keys only (the ids, the same, are made from them when read: a class's
        # int64 less on every column held until the metrics are done)
        gen = None if xp is np else dense_ids_x(gen_key)[0]
        width = None if c.exact is None else exact_widths(c.exact, kmin, kmax, xp)
        return ColumnSummary(c.name, "numeric", xp.zeros(0, dtype=xp.int64), st.u_raw, st.h_x, lo=lo, hi=hi,
                             dom_range=c.global_range, gt_h=gt_h, gen_id=gen, gen_key=gen_key, width=width,
                             domain_counts=st.domain.bin_counts, joint_before=st.joint_before,
                             joint_after=joint_after, binned=st.domain.binned)

    cols = run_columns(table, column)
    n_in = int(table.n_rows)
    return merge_equal_classes(ClassSummary(stats.sizes, thist, cols, n_in, n_in - stats.n_kept, tcounts))


def run_columns(table, column) -> list:
    """``column(j)`` of every column: on the CPU from :data:`SERIAL_ROWS` rows in threads (NumPy's
    sorts release the GIL), each column's freed temporaries handed back to the system before the next."""
    xp = table.xp
    workers = int(os.environ.get("GPUANON_THREADS", 0)) or (os.cpu_count() or 1)
    if xp is np and len(table.columns) > 1 and workers > 1 and table.n_rows >= SERIAL_ROWS:  # numpy sorts release the GIL

        def column_trimmed(j: int) -> ColumnSummary:
            try:
                return column(j)
            finally:  # the column's freed temporaries back to the system before the next column
                if table.n_rows >= TRIM_ROWS:
                    trim_heap()

        with ThreadPoolExecutor(max_workers=min(len(table.columns), workers)) as ex:
            cols = list(ex.map(column_trimmed, range(len(table.columns))))
    else:
        cols = [column(j) for j in range(len(table.columns))]
        release_buffers()
        if xp is np and table.n_rows >= TRIM_ROWS:
            trim_heap()
    return cols


def exact_widths(exact, kmin, kmax, xp):
    """Each class's span ``value[kmax] - value[kmin]`` on a column with an exact dictionary
    (:class:`gpuanon.table.exact.Exact`), computed in uint64 and rounded once to float64 (NaN where a
    bound is the missing key). The difference of two rounded distances would lose up to an ulp of
    each: near 2**63 (2048) a whole span of a few thousand.

    >>> from gpuanon.table.exact import Exact
    >>> ex = Exact(np.array([-(2**62), 2**62, 2**62 + 39], dtype=np.int64))
    >>> exact_widths(ex, np.array([1, 0], np.uint32), np.array([2, MISSING], np.uint32), np).tolist()
    [39.0, nan]
    """
    v = exact.values
    miss = (kmin == MISSING) | (kmax == MISSING)
    if v.shape[0] == 0:
        return xp.full(kmin.shape[0], xp.nan)
    u = v.view(np.uint64) if v.dtype == np.int64 else v.astype(np.uint64, copy=False)
    off = to_device(u - u[0], xp)  # distances from the smallest value (exact: they lie below 2**64)
    ia = xp.where(miss, 0, kmin).astype(xp.int64)
    ib = xp.where(miss, 0, kmax).astype(xp.int64)
    return xp.where(miss, xp.nan, (off[ib] - off[ia]).astype(xp.float64))


def merge_equal_classes(summary: ClassSummary) -> ClassSummary:
    """Partitions whose generalized tuples are equal form one equivalence class (relaxed mode)."""
    sizes = summary.sizes
    xp = get_namespace(sizes)
    n = int(sizes.shape[0])
    if n == 0 or not summary.columns:
        return summary
    gid, made = None, {}
    for i, col in enumerate(summary.columns):  # a loop over columns; on a device no read until the last
        g = xp.asarray(col.generalized_ids()).astype(xp.int64)
        if col.gen_id is None and col.gen_key is not None:
            made[i] = g  # ids made from the keys: kept for the merged classes (the same ids as before)
        if gid is None and xp is np and col.kind == "numeric" and col.gen_id is None and g.shape[0]:
            gid, n_ec = g, g.max() + 1  # ids just made by a dense ranking: already dense
        elif gid is None:
            gid, n_ec = dense_ids_x(g)
        else:
            gid, n_ec = dense_ids_x(gid * (g.max() + 1) + g)
        if xp is np and int(n_ec) == n:  # every tuple already distinct: more columns keep them so
            to_scalar(n_ec)  # the one read of the count (a CPU run's report counts what would cross)
            return summary
    n_ec = int(to_scalar(n_ec))
    if n_ec == n:
        return summary
    order = xp.argsort(gid, kind="stable")
    sg = gid[order]
    new = xp.ones(n, dtype=bool)
    new[1:] = sg[1:] != sg[:-1]
    first = order[indices_of(new, n_ec, xp)]  # the first partition of every class (ids are dense: 0, 1, ...)
    merged = count_values(gid, n_ec, xp, weights=sizes.astype(xp.int64))
    thist = None
    if summary.target_hist is not None:
        th = summary.target_hist
        nt = th.shape[1]
        cell = (gid[:, None] * nt + xp.arange(nt, dtype=xp.int64)[None, :]).reshape(-1)
        thist = count_values(cell, n_ec * nt, xp, weights=th.astype(xp.int64).reshape(-1)).reshape(n_ec, nt)
    cols = []
    for i, col in enumerate(summary.columns):
        c = ColumnSummary(col.name, col.kind, col.counts, col.u_before, col.h_bits, dom_range=col.dom_range,
                          sets=col.sets, height=col.height, domain_counts=col.domain_counts,
                          joint_before=col.joint_before, joint_after=col.joint_after, binned=col.binned)
        for f in ("lo", "hi", "gt_h", "set_id", "levels", "gen_id", "gen_key", "width"):
            v = getattr(col, f)
            if v is not None:
                setattr(c, f, v[first])
        if i in made:
            c.gen_id = made[i][first]
        cols.append(c)
    return ClassSummary(merged, thist, cols, summary.n_in, summary.n_suppressed, summary.target_counts_before,
                        summary.notes)


def hierarchy_mass(hierarchy, categories, lo, hi, counts, class_target_hist, xp):
    """Mass ``(codes, targets)`` of classes whose cell is the lowest node of ``hierarchy`` covering
    their codes ``lo .. hi`` (``counts``: the whole table's rows per code); suppressed rows not
    included. What :meth:`HierarchyScorer.u_after` scores; a cluster's homes sum their shares."""
    leaf = np.asarray(hierarchy.leaf_codes(categories))
    lv = to_device(np.ascontiguousarray(hierarchy.levels[leaf]), xp)  # node of every code at every level
    node, level = lowest_common_node(lv, lo, hi, xp)
    return hierarchy_joint(lv, node, level, counts, class_target_hist, int(hierarchy.n_nodes), xp)


class HierarchyScorer:
    """``U'(T | X)`` of candidate hierarchies of categorical QIs over fixed classes (section 5.6).

    A class's cell on column ``j`` under hierarchy ``h`` is the lowest node covering its codes
    (codes follow ``h``'s leaf order, so the node covering the smallest and the largest code).
    Suppressed rows count with the cell ``*``. The class statistics (rows sorted by class, target
    histograms, code ranges) are computed once and shared by every candidate.

    >>> import pandas as pd
    >>> from gpuanon.table.encoding import encode
    >>> from gpuanon.table.schema import Schema
    >>> from gpuanon.hierarchy import Hierarchy
    >>> df = pd.DataFrame({"c": ["a", "b", "c", "d"], "y": [0, 0, 1, 1]})
    >>> t = encode(df, Schema.from_frame(df, ["c"], target="y"))
    >>> sc = HierarchyScorer(t, np.array([0, 0, 1, 1]))
    >>> h = Hierarchy.from_labels(["a", "b", "c", "d"], [["ab", "*"], ["ab", "*"], ["cd", "*"], ["cd", "*"]])
    >>> round(sc.u_before(0), 12), round(sc.u_after(0, h), 12)
    (1.0, 1.0)
    """

    def __init__(self, table, labels, stats=None):
        xp = table.xp
        self.table, self.xp = table, xp
        if stats is None:
            labels = to_device(labels, xp)
            n_classes = int(to_scalar(labels.max())) + 1 if labels.shape[0] else 0
            stats = ClassStats(table, labels, max(n_classes, 0))
        self.stats = stats
        self.thist = self.tcounts = self.tsup = None
        if table.target is not None:
            nt = len(table.target_values)
            self.thist = stats.target_hist()
            self.tcounts = count_values(table.target, nt, xp)
            self.tsup = self.tcounts - self.thist.sum(axis=0)
            self._any_suppressed = bool(stats.n_kept < table.n_rows)
        self._ranges: dict = {}

    def _column(self, j: int):
        if j not in self._ranges:
            xp, c = self.xp, self.table.columns[j]
            lo, hi = self.stats.code_minmax(j)
            st = before_stats(self.table, j, self.tcounts)
            full = xp.zeros(c.n_categories, dtype=xp.int64)
            full[st.vals.astype(xp.int64)] = st.counts
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
        q = hierarchy_mass(hierarchy, col.categories, lo, hi, full, self.thist, xp)
        if self._any_suppressed:
            q = q + suppressed_joint(full.astype(xp.float64), self.tsup)
        return uncertainty_from_joint(q)

    def u_plain(self, j: int) -> float | None:
        """``U'(T | X_j)`` with no hierarchy: every class's cell is its set of categories."""
        if self.thist is None:
            return None
        full = self._column(j)[2]
        set_id, sets = category_sets(self.stats, j, self.table.columns[j].n_categories)
        q = set_joint(set_id, sets, full, self.thist, self.xp)
        if self._any_suppressed:
            q = q + suppressed_joint(full.astype(self.xp.float64), self.tsup)
        return uncertainty_from_joint(q)
