"""Level-synchronous Mondrian partitioning on encoded keys, for NumPy and CuPy.

All active partitions advance one level at a time. Rows stay contiguous per partition under a
permutation; a level is a handful of whole-array passes: segmented min / max of the keys for the
spans, one sort keyed by ``(partition, key of the chosen QI)`` for the medians, ``searchsorted``
for the child sizes, one scatter-add for the children's sensitive-value histograms, and a
stable regroup that keeps every child's rows in original row order. There is no Python loop
over partitions or rows: the loops run over levels, over columns and over "next widest column"
attempts.

The cut rule (strict mode) is the contract's: along the widest QI by normalized span, cut at the
lower median ``m``: left ``v <= m``, right ``v > m``; if right is empty, left ``v < m``, right
``v >= m``. Relaxed mode cuts at the median position, ties split by original row index.
"""

from __future__ import annotations

import weakref
from typing import Callable, Sequence

import numpy as np

from .hierarchy import lowest_common_node
from .counts import count_values, indices_of
from .cpu import CodeMasks, KeyRows, chosen_values, extremes, mark_left, split_children, strict_split
from .host import host, scalar
from .keys import decode_float32_keys
from .segmented import exclusive_cumsum, segment_ids, segment_reduce
from .specs import CategoricalSpec, HierarchySpec, NumericSpec, check_specs

_LOW32 = np.int64(0xFFFFFFFF)


def _ranges(starts, sizes, xp, total: int | None = None):
    """Row positions of the given segments, concatenated, and each row's local segment index.

    ``total``: the rows in all (``sizes.sum()``) when the caller knows it; else it is read.
    """
    if total is None:
        total = int(scalar(sizes.sum())) if sizes.shape[0] else 0
    loc = segment_ids(sizes, xp, n=total)
    ofs = exclusive_cumsum(sizes, xp)
    if xp is np:  # the CPU: the rows before each segment not in it (non-decreasing) by one repeat, if any
        rows = np.arange(total, dtype=np.int64)
        shift = starts - ofs
        if shift.shape[0] and shift[-1]:
            rows += np.repeat(shift, sizes)
        return rows, loc, ofs
    rows = xp.arange(total, dtype=xp.int64) + (starts - ofs)[loc]
    return rows, loc, ofs


_PLAN: list = [None]  # the column plan of the last column list (weak references to its specs)
_RANK_TABLE_LIMIT = 1 << 22  # rank columns' values concatenated (one gather) up to this many


class _SpanPlan:
    """Per-column constants of :func:`_spans`, built once per column list (a fit) on its device.

    ``kind``: host list of ``'skip'``, ``'f32'``, ``'rank'``, ``'nan'`` (a numeric column without
    values), ``'cat'``, ``'hier'``. Device arrays: ``div`` (the numeric range, 1 elsewhere),
    ``is_f`` / ``is_r`` / ``is_nan`` masks, the rank columns' values concatenated (``table``) with
    per-column offsets ``roff`` and largest index ``rmax``, and for the categorical columns their
    indices ``cidx``, counts ``cn`` and cumulative counts ``cbase``.
    """

    def __init__(self, specs, n_categories, global_range, xp):
        d = len(specs)
        self.kind, ncat, rng = [], [0] * d, [1.0] * d
        for j, spec in enumerate(specs):
            if isinstance(spec, HierarchySpec):
                k = "hier"
            elif isinstance(spec, CategoricalSpec):
                ncat[j] = int(n_categories[j])
                k = "cat" if ncat[j] > 1 else "skip"
            elif isinstance(spec, NumericSpec):
                g = float(global_range[j])
                k = "skip" if not g > 0 else "f32" if spec.values is None else \
                    "rank" if int(spec.values.shape[0]) else "nan"
                rng[j] = g if k != "skip" else 1.0
            else:  # check_specs lets only the three in
                raise TypeError(f"column {j}: unknown spec {type(spec).__name__}")
            self.kind.append(k)
        rank = [j for j in range(d) if self.kind[j] == "rank"]
        lens = [int(specs[j].values.shape[0]) for j in rank]
        self.rank_each = sum(lens) > _RANK_TABLE_LIMIT  # large tables: a gather per column instead
        roff, rmax, o = [0] * d, [0] * d, 0
        for j, ln in zip(rank, lens):
            roff[j], rmax[j], o = o, ln - 1, o + ln
        self.table = None if (not rank or self.rank_each) else \
            xp.concatenate([xp.asarray(specs[j].values, dtype=xp.float64) for j in rank])
        self.cat = [j for j in range(d) if self.kind[j] == "cat"]
        self.masks = CodeMasks([ncat[j] for j in self.cat]) if xp is np else None  # the CPU's count
        self.extreme_rows = [j for j in range(d) if self.kind[j] not in ("skip", "cat")]  # CPU: minmax of these
        self.ncat_total = sum(ncat[j] for j in self.cat)
        cb = [0] * len(self.cat)
        for i in range(1, len(self.cat)):
            cb[i] = cb[i - 1] + ncat[self.cat[i - 1]]
        self.div = _on_device(rng, xp.float64, xp)[:, None]
        self.is_f = _on_device([k == "f32" for k in self.kind], xp.bool_, xp)[:, None]
        self.is_r = _on_device([k == "rank" for k in self.kind], xp.bool_, xp)[:, None]
        self.is_nan = _on_device([k == "nan" for k in self.kind], xp.bool_, xp)[:, None]
        self.roff = _on_device(roff, xp.int64, xp)[:, None]
        self.rmax = _on_device(rmax, xp.int64, xp)[:, None]
        self.cidx = _on_device(self.cat, xp.int64, xp)
        self.cn = _on_device([ncat[j] for j in self.cat], xp.int64, xp)[:, None]
        self.cbase = _on_device(cb, xp.int64, xp)[:, None]
        self.rows = {k: _row_range([j for j in range(d) if self.kind[j] == k]) for k in ("f32", "rank")}


def _row_range(cols):
    """The slice of rows from the first to the last of ``cols`` (None if there is none)."""
    return slice(cols[0], cols[-1] + 1) if cols else None


def _on_device(values, dtype, xp):
    """A small constant array on ``xp``'s device, written element by element from Python scalars
    (once per fit: no host array crosses to the device)."""
    out = xp.zeros(len(values), dtype=dtype)
    for i, v in enumerate(values):  # a loop over columns, once per fit
        if v:
            out[i] = v
    return out


def _span_plan(specs, n_categories, global_range, xp):
    """The cached :class:`_SpanPlan` of this column list, or a new one."""
    key = (id(xp), tuple(int(c) for c in n_categories), np.asarray([float(g) for g in global_range]).tobytes())
    got = _PLAN[0]
    if got is not None and got[1] == key and len(got[0]) == len(specs) and \
            all(r() is sp for r, sp in zip(got[0], specs)):
        return got[2]
    plan = _SpanPlan(specs, n_categories, global_range, xp)
    _PLAN[0] = ([weakref.ref(sp) for sp in specs], key, plan)
    return plan


def _distinct_share(K, seg, P, plan, xp, cell_limit):
    """Distinct codes over categories ``(len(plan.cat), P)`` of the categorical columns, in one
    scatter over (column, segment, code) cells and one cumulative sum; None when the cells or the
    row index would pass ``cell_limit`` (then each column is counted apart)."""
    cells = P * plan.ncat_total
    if not plan.cat or cells > cell_limit or len(plan.cat) * int(K.shape[1]) > cell_limit:
        return None
    Kc = K[plan.cidx]
    flat = plan.cbase * P + seg[None, :] * plan.cn + Kc.astype(xp.int64)
    present = xp.zeros(cells, dtype=bool)
    present[flat.reshape(-1)] = True
    cs = xp.zeros(cells + 1, dtype=xp.int64)
    xp.cumsum(present, dtype=xp.int64, out=cs[1:])
    first = plan.cbase * P + xp.arange(P, dtype=xp.int64)[None, :] * plan.cn
    return (cs[first + plan.cn] - cs[first]).astype(xp.float64) / plan.cn.astype(xp.float64)


def _spans(K, sizes, starts, seg, col_info, n_categories, global_range, xp, cell_limit, words=None, plan=None):
    """Normalized span of every column in every segment, shape (P, d); 0 where single-valued.

    ``col_info``: one :mod:`kernels.specs` spec per column. Whole-matrix operations on the ``(d, P)`` minima and maxima:
    one decode of all float32-key columns, one gather for all rank columns, one count for all
    categorical ones; a hierarchy column (or a categorical one too large to count with the others)
    takes its own few operations.
    """
    d = K.shape[0]
    P = sizes.shape[0]
    specs = check_specs(col_info)
    plan = _span_plan(specs, n_categories, global_range, xp) if plan is None else plan  # the kernel's: its fit's
    if xp is np:  # the CPU's formulation (kernels.cpu): extremes of the columns that use them, code masks
        dense = P > 0 and bool(sizes.min() > 0)  # no empty segment: reduceat as it is
        mn, mx = extremes(K, starts, plan.extreme_rows, P, dense)
        count = plan.masks.counts(plan.masks.words(K, plan.cat) if words is None else words, starts, K, plan.cat,
                                  P, dense)
        mx[plan.cat] = count != 1  # mn is 0 there: mn == mx where a categorical column holds one code
        share = count.astype(np.float64) / plan.cn.astype(np.float64)
    else:
        mn, mx = segment_reduce("minmax", K, starts, xp, axis=1)
        share = _distinct_share(K, seg, P, plan, xp, cell_limit)
    S = xp.zeros((d, P), dtype=xp.float64)  # value ranges (numeric) or shares; 0: no span
    f = plan.rows["f32"]
    if f is not None:
        part = decode_float32_keys(mx[f], xp) - decode_float32_keys(mn[f], xp)
        S[f] = xp.where(plan.is_f[f], part, S[f])
    r = plan.rows["rank"]
    if r is not None and plan.table is not None:
        lo = xp.minimum(mn[r].astype(xp.int64), plan.rmax[r]) + plan.roff[r]
        hi = xp.minimum(mx[r].astype(xp.int64), plan.rmax[r]) + plan.roff[r]
        S[r] = xp.where(plan.is_r[r], plan.table[hi] - plan.table[lo], S[r])
    elif r is not None:  # large value tables: one gather per column
        for j in range(r.start, r.stop):
            if plan.kind[j] == "rank":
                S[j] = specs[j].decode(mx[j], xp) - specs[j].decode(mn[j], xp)
    if "nan" in plan.kind:
        S = xp.where(plan.is_nan, xp.nan, S)
    if share is not None:
        S[plan.cidx] = share
    for j, kind in enumerate(plan.kind):  # a loop over columns: hierarchies, large categorical ones
        if kind == "hier":  # leaves under the lowest common node of both ends
            node, _ = lowest_common_node(specs[j].levels, mn[j], mx[j], xp)
            S[j] = specs[j].frac[node]
        elif kind == "cat" and share is None:
            ncat = int(n_categories[j])
            flat = seg * ncat + K[j].astype(xp.int64)
            if P * ncat <= cell_limit:
                cnt = xp.bincount(flat, minlength=P * ncat).reshape(P, ncat)
                distinct = (cnt > 0).sum(axis=1)
            else:
                distinct = xp.bincount(xp.unique(flat) // ncat, minlength=P)
            S[j] = distinct.astype(xp.float64) / ncat
    return xp.ascontiguousarray(xp.where(mn == mx, 0.0, S / plan.div).T)


def partition_spans(keys, sizes, *, col_info, n_categories, global_range, xp=np, cell_limit: int = 1 << 25):
    """Normalized span ``(P, d)`` of consecutive segments of ``keys`` (rows contiguous per segment).

    The spans one level of :func:`mondrian_partition` computes. A segment's span depends only on
    each column's smallest and largest key and on the set of categorical codes it holds, so a
    caller that combined those across shards may pass one representative row per value.
    """
    sizes = xp.asarray(sizes, dtype=xp.int64)
    seg = segment_ids(sizes, xp, n=int(keys.shape[1]))
    return _spans(keys, sizes, exclusive_cumsum(sizes, xp), seg, col_info, n_categories, global_range, xp, cell_limit)


# the cut rule, written once: the kernel below and the cluster's coordinator and shards
# (gpuanon.distributed) call these

def below_only(median, top):
    """Strict mode: the left child takes the keys strictly below the lower median when the median is
    the partition's largest key (else every key at or below it: the right child would be empty)."""
    return median == top


def goes_left(v, median, below, xp):
    """Strict mode: whether each key ``v`` goes to the left child (``below``: :func:`below_only`)."""
    return xp.where(below, v < median, v <= median)


def _goes_left(v, med, use_lt, loc, xp):
    """:func:`goes_left` of the rows (``loc``: each row's pending partition) on the device."""
    return goes_left(v.astype(xp.int64), med[loc], use_lt[loc], xp)


def cut_allowed(nleft, nright, hist_left, hist_right, allowed, xp):
    """A cut is made when both children have rows and the criteria ``allowed`` both."""
    return (nleft > 0) & (nright > 0) & allowed(nleft, hist_left, xp) & allowed(nright, hist_right, xp)


def _child_hist(loc, left, sa_rows, pofs, n_sa, xp, cell_limit):
    """Sensitive-value histograms of the left and right children: two (n_pend, n_sa) arrays."""
    n_pend = pofs.shape[0]
    child = 2 * loc + (~left).astype(xp.int64)
    flat = child * n_sa + sa_rows.astype(xp.int64)
    per = max(1, cell_limit // (2 * n_sa))
    if n_pend <= per:
        h = count_values(flat, 2 * n_pend * n_sa, xp).reshape(n_pend, 2, n_sa)
        return h[:, 0, :], h[:, 1, :]
    # Large histograms: count in blocks of segments (a loop over blocks, not over partitions).
    hl = xp.zeros((n_pend, n_sa), dtype=xp.int64)
    hr = xp.zeros((n_pend, n_sa), dtype=xp.int64)
    ends = [int(x) for x in pofs[per::per].tolist()] + [int(flat.shape[0])]
    r0 = 0
    for b, s0 in enumerate(range(0, n_pend, per)):
        s1 = min(n_pend, s0 + per)
        r1 = ends[b]
        h = count_values(flat[r0:r1] - 2 * s0 * n_sa, 2 * (s1 - s0) * n_sa, xp)
        h = h.reshape(s1 - s0, 2, n_sa)
        hl[s0:s1] = h[:, 0, :]
        hr[s0:s1] = h[:, 1, :]
        r0 = r1
    return hl, hr


def _pending(pending, cut, sizes, xp):
    """The pending partitions' indices and count, their rows, and the cut partitions' count and rows.

    On a device one read per attempt (the four numbers). On the CPU the numbers are read off the
    pending indices, and pass through :func:`~kernels.host.host` as the device's read does (a CPU
    run's transfer report counts the reads a device run makes)."""
    if xp is np:
        pend = np.flatnonzero(pending)
        cidx = np.flatnonzero(cut)
        n_pend, total, n_cut, cut_rows = (int(x) for x in host(np.array(
            [pend.shape[0], sizes[pend].sum(), cidx.shape[0], sizes[cidx].sum()], dtype=np.int64)))
        return pend, n_pend, total, n_cut, cut_rows
    n_pend, total, n_cut, cut_rows = (int(x) for x in host(xp.stack([
        pending.sum(dtype=xp.int64), xp.where(pending, sizes, 0).sum(),
        cut.sum(dtype=xp.int64), xp.where(cut, sizes, 0).sum()])))
    return (indices_of(pending, n_pend, xp) if n_pend else None), n_pend, total, n_cut, cut_rows


def _finished_and_cut(cut, n_fin: int, xp):
    """The indices of the finished partitions and of the cut ones, each in order."""
    if xp is np:
        return np.flatnonzero(~cut), np.flatnonzero(cut)
    by_cut = xp.argsort(cut.astype(xp.int8), kind="stable")  # finished, then cut; each in order
    return by_cut[:n_fin], by_cut[n_fin:]


def _regroup_keys(K, spare, keys, src, xp):
    """``(K's columns in the order src, the spare buffer)``: the key matrix of the next level, the
    device's formulation (the CPU's: :class:`~kernels.cpu.KeyRows`).

    ``keys`` (the caller's) is never written: the first regroup takes into a new matrix. After that,
    all rows are taken at once into a second buffer (flat, allocated once at the size of the first
    regroup), and the two buffers swap: one launch a level instead of one a column.
    """
    d, m = K.shape[0], src.shape[0]
    if K is keys:
        return xp.take(K, src, axis=1), spare
    if spare is None:
        spare = xp.empty(d * m, dtype=K.dtype)
    out = spare[: d * m].reshape(d, m)
    xp.take(K, src, axis=1, out=out)
    return out, K.reshape(-1)  # K is whole (a take's result or a whole view of a buffer): its storage is free now


def _regroup(cstarts, csizes, cut_rows: int, go_left, xp):
    """Where the rows of the cut partitions (``cstarts``, ``csizes``; ``cut_rows`` rows in all)
    go: each one's left child's rows, then its right child's, each in their order. Returns ``src``
    (the new order of those rows) and the children's sizes. The device's formulation (the CPU's:
    :func:`~kernels.cpu.split_children`)."""
    crows, cloc, cofs = _ranges(cstarts, csizes, xp, cut_rows)
    L = go_left[crows].astype(xp.int64)
    R = 1 - L
    csL = xp.cumsum(L) - L
    csR = xp.cumsum(R) - R
    nl = segment_reduce("add", L, cofs, xp, axis=0)
    new_sizes = xp.stack([nl, csizes - nl], axis=1).reshape(-1)
    new_starts = exclusive_cumsum(new_sizes, xp)
    ls, rs = new_starts[0::2], new_starts[1::2]
    newpos = xp.where(L == 1, ls[cloc] + csL - csL[cofs][cloc], rs[cloc] + csR - csR[cofs][cloc])
    src = xp.empty_like(crows)
    src[newpos] = crows
    return src, new_sizes


def mondrian_partition(
    keys,
    *,
    col_info: Sequence,
    n_categories: Sequence[int],
    global_range,
    k: int,
    allowed: Callable,
    blocks=None,
    sa=None,
    n_sa: int = 0,
    relaxed: bool = False,
    xp=np,
    progress: Callable | None = None,
    cell_limit: int = 1 << 25,
):
    """Partition the rows of an encoded QI key matrix.

    Parameters
    ----------
    keys : (d, n) uint32 array
        Order-preserving keys (see :mod:`kernels.keys`).
    col_info : sequence of length d
        One spec per column (:mod:`kernels.specs`; build them for an encoded table with
        ``gpuanon.table.encoding.kernel_specs``): :class:`~kernels.specs.CategoricalSpec`,
        :class:`~kernels.specs.NumericSpec` (float32 keys or the sorted distinct values) or
        :class:`~kernels.specs.HierarchySpec` (codes in leaf order; the span is the share of
        leaves under the lowest common node of the partition's smallest and largest code).
    n_categories : sequence of int
        Number of categories of each categorical column (ignored for numeric ones).
    global_range : (d,) float64
        ``max - min`` over the whole table of each numeric column.
    k : int
        Segments smaller than ``2 k`` are final without trying a cut.
    allowed : callable ``(sizes, hist_or_None, xp) -> bool array``
        The privacy criteria, evaluated on candidate children.
    blocks : (n,) int array or None
        Initial partitions (e.g. missing-value patterns); rows with equal ids start together.
    sa, n_sa : sensitive codes and their count; histograms are built only when ``n_sa > 0``.
    relaxed : bool
        Cut at the median position instead of the median value.

    Returns
    -------
    labels : (n,) int64
        Partition of every row, numbered by the smallest row index in each partition.
    n_parts : int
    info : dict
        ``levels`` and ``attempts`` counts.
    """
    d, n = keys.shape
    col_info = check_specs(col_info)
    needs_hist = sa is not None and n_sa > 0
    if blocks is None:
        perm = xp.arange(n, dtype=xp.int32 if xp is np and n < 2**31 else xp.int64)  # the CPU: half the bytes to regroup
        sizes = xp.full(1, n, dtype=xp.int64)
    else:
        blocks = xp.asarray(blocks, dtype=xp.int64)
        perm = xp.argsort(blocks, kind="stable").astype(xp.int64)
        counts = xp.bincount(blocks)
        sizes = counts[counts > 0].astype(xp.int64)
    K = keys if blocks is None else xp.take(keys, perm, axis=1)  # ``keys`` itself is never modified
    S = sa[perm] if needs_hist else None
    labels = xp.empty(n, dtype=xp.int64)
    first_rows = []
    n_parts = levels = attempts = 0
    words = spare = plan = None
    if xp is np:  # the rows' category masks, once, and the buffer the keys are regrouped in (kernels.cpu)
        plan = _span_plan(col_info, n_categories, global_range, xp)
        key_rows = KeyRows(K, narrow="f32" not in plan.kind)  # uint16 keys when every one fits
        words = plan.masks.words(K, plan.cat)  # regrouped with the keys

    while sizes.shape[0] > 0:
        levels += 1
        P = sizes.shape[0]
        starts = exclusive_cumsum(sizes, xp)
        seg = None if xp is np else segment_ids(sizes, xp, n=int(K.shape[1]))  # the CPU's spans use none
        span = _spans(K, sizes, starts, seg, col_info, n_categories, global_range, xp, cell_limit,
                      words, plan)
        span = xp.where((sizes < 2 * k)[:, None], 0.0, span)
        n_act = K.shape[1]
        go_left = xp.zeros(n_act, dtype=bool)
        cut = xp.zeros(P, dtype=bool)
        pending = span.max(axis=1) > 0  # partitions with a column left to try
        while True:
            pend, n_pend, total, n_cut, cut_rows = _pending(pending, cut, sizes, xp)
            if n_pend == 0:
                break
            col = xp.argmax(span[pend], axis=1)  # widest first, ties: lowest column index
            attempts += 1
            psizes, pstarts = sizes[pend], starts[pend]
            if xp is np and not relaxed:  # the CPU's strict attempt: fewer passes, the same numbers
                rows, loc, pofs, nleft, left = strict_split(K, col, psizes, pstarts, total, n_act, key_rows.bits,
                                                            needs_hist)
            else:
                rows, loc, pofs = _ranges(pstarts, psizes, xp, total)
                v = chosen_values(K, col, psizes, rows) if xp is np else K[col[loc], rows]
                key = (loc << 32) | v.astype(xp.int64)
                if relaxed:
                    order = xp.argsort(key, kind="stable")
                    skey = key[order]
                else:
                    skey = xp.sort(key)
                med = skey[pofs + (psizes - 1) // 2] & _LOW32
                if relaxed:
                    nleft = (psizes + 1) // 2
                    pos = xp.empty_like(order)
                    pos[order] = xp.arange(order.shape[0], dtype=order.dtype)
                    left = (pos - pofs[loc]) < nleft[loc]
                else:
                    top = skey[pofs + psizes - 1] & _LOW32
                    base = xp.arange(n_pend, dtype=xp.int64) << 32
                    le = xp.searchsorted(skey, base | med, side="right") - pofs
                    lt = xp.searchsorted(skey, base | med, side="left") - pofs
                    use_lt = below_only(med, top)
                    nleft = xp.where(use_lt, lt, le)
                    left = _goes_left(v, med, use_lt, loc, xp)
            nright = psizes - nleft
            hl, hr = _child_hist(loc, left, S[rows], pofs, n_sa, xp, cell_limit) if needs_hist else (None, None)
            ok = cut_allowed(nleft, nright, hl, hr, allowed, xp)
            cut[pend] = ok  # pending partitions are not cut yet
            if xp is np and not relaxed:
                go_left = mark_left(go_left, rows, left, ok, psizes, loc)
            else:
                go_left[rows] = left & ok[loc]  # rows of a pending partition are still all False
            span[pend, col] = -1.0
            pending[pend] = ~ok & (span[pend].max(axis=1) > 0)

        n_fin = P - n_cut  # read with the last (empty) attempt
        fin, cidx = _finished_and_cut(cut, n_fin, xp)
        if n_fin:
            frows, floc, _ = _ranges(starts[fin], sizes[fin], xp, n_act - cut_rows)
            labels[perm[frows]] = n_parts + floc
            first_rows.append(perm[starts[fin]])  # rows stay in original order per segment
            n_parts += n_fin
        if progress is not None:
            progress(levels, int(n_act), n_parts)
        if n_cut == 0:
            break
        if xp is np:  # the CPU: two index lists; children too small to cut are final now, their keys not regrouped
            src, new_sizes, n_parts = split_children(go_left, cut, sizes, starts, perm, 2 * k, labels, first_rows, n_parts)
            words = words.take(src, axis=1)
        else:
            src, new_sizes = _regroup(starts[cidx], sizes[cidx], cut_rows, go_left, xp)
        perm = perm[src]
        if xp is np:
            K = key_rows.regroup(K, src)
        else:
            K, spare = _regroup_keys(K, spare, keys, src, xp)
        if needs_hist:
            S = S[src]
        sizes = new_sizes

    if n_parts:
        firsts = xp.concatenate(first_rows)
        relabel = xp.empty(n_parts, dtype=xp.int64)
        relabel[xp.argsort(firsts)] = xp.arange(n_parts, dtype=xp.int64)
        labels = relabel[labels]
    return labels, n_parts, {"levels": levels, "attempts": attempts}
