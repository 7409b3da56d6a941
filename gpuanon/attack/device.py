"""The linkability and inference searches on the GPU backend (``xp`` is CuPy): the same answers as
:mod:`.search` and :mod:`.neighbours` on the CPU, bit for bit.

The encoded cells go to the device once (:class:`Cells`, per column and table, on first use). An aux
set's distinct release cells (groups: a ``lexsort`` of the cells with the row position as the last key,
so each group's first row is its lowest position whatever the sort's stability) are measured against a
block of targets as one whole-array distance computation, in the CPU's column order and operations
(numeric: 0 inside the cell, else the gap to its nearest end over the column's range; categorical: 0
when the cell's set holds the value, else 1): the same floats. Per target the first nearest row (the
smallest first position among the nearest groups), the nearest rows' smallest random rank (a scatter
minimum per group) and, for ties kept, whether an (A group, B group) pair that holds a release row has
both groups among the nearest (a gather over the pairs). Blocks are sized from the device's free memory;
their results stay on the device (sums of counts, per-target credits) and come back in one counted
copy per attack. Float sums are done on the host in the CPU's blocks, so the report is the CPU's.
"""

from __future__ import annotations

import numpy as np

from ..backend import get_namespace, to_device, to_host, to_scalar
from .distance import kinds
from .search import RANK_SHARE, blocks

#: the share of the device's free memory that one block of targets may use
MEMORY_SHARE = 8
#: at most this many bytes per block (tests lower it to exercise the blocking)
MAX_BLOCK_BYTES = 1 << 33


class Cells:
    """The encoded release, original and control cells on the device (uploaded once, on first use)."""

    def __init__(self, e, xp):
        self.e, self.xp = e, xp
        self.names = {id(e.release): "release", id(e.original): "original"}
        if e.control is not None:
            self.names[id(e.control)] = "control"
        self._cache: dict = {}
        self._groups: dict = {}

    def up(self, key, host):
        if key not in self._cache:
            self._cache[key] = to_device(np.ascontiguousarray(host), self.xp)
        return self._cache[key]

    def lo(self, t, c):
        return self.up((self.names[id(t)], "lo", c), t.lo[c])

    def hi(self, t, c):
        return self.up((self.names[id(t)], "hi", c), t.hi[c])

    def cell(self, t, c):
        return self.up((self.names[id(t)], "cell", c), t.cell[c])

    def tab(self, c):
        """A categorical column's overlap table (set cell x cell)."""
        return self.up(("tab", c.name), c.overlap_tab)

    def set_sizes(self, c):
        return self.up(("size", c.name), c.sets.sum(axis=1).astype(np.int64))

    def pairs(self, a, b):
        """The (A group, B group) pairs that hold a release row (once per pair of column sets)."""
        key = ("pairs", tuple(c.name for c in a.cols), tuple(c.name for c in b.cols))
        if key not in self._groups:
            pair = self.xp.unique(a.gid * b.n + b.gid)
            self._groups[key] = (pair // b.n, pair % b.n)
        return self._groups[key]

    def groups(self, cols):
        """The release's groups on ``cols`` (:class:`Groups`), built once per column set."""
        key = tuple(c.name for c in cols)
        if key not in self._groups:
            self._groups[key] = Groups(self, cols)
        return self._groups[key]


def _overlap(xp, c, tab, r, p):
    """:meth:`.cells.Column.overlap` of release cells ``r`` and point cells ``p`` on the device."""
    n = c.n_cats
    out = r == p
    rs = r >= n
    return xp.where(rs, tab[xp.where(rs, r - n, 0), p], out)  # ``p`` are points: never a set cell


def distances(dev, cols, kinds_, nan_t, rel: dict, tgt: dict, pairs: bool = False):
    """``(targets, release cells)`` distances (``pairs``: of ``tgt[i]`` to ``rel[i]``, one per pair): ``rel`` /
    ``tgt`` per column, ``(lo, hi)`` or cells; the same operations per cell either way."""
    xp = dev.xp
    r0, t0 = next(iter(rel.values())), next(iter(tgt.values()))
    n_r = (r0[0] if isinstance(r0, tuple) else r0).shape[0]
    d = xp.zeros(t0.shape[0] if pairs else (t0.shape[0], n_r))
    row = (lambda a: a) if pairs else (lambda a: a[None, :])  # noqa: E731
    col = (lambda a: a) if pairs else (lambda a: a[:, None])  # noqa: E731
    for c in cols:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = rel[c.name]
            lo, hi, v = row(lo), row(hi), col(tgt[c.name])
            g = xp.maximum(lo - v, v - hi)
            xp.maximum(g, 0.0, out=g)
            g /= c.scale
            if kinds_[c.name] == "cells" or nan_t[c.name]:
                vn, rn = xp.isnan(v), xp.isnan(lo)
                g = xp.where(vn | rn, xp.where(vn & rn, 1.0, xp.inf), g)
                g = xp.where(xp.isinf(lo) & xp.isinf(hi), 0.0, g)
            d += g
        elif not c.sets.shape[0]:  # point cells only
            d += row(rel[c.name]) != col(tgt[c.name])
        else:
            d += ~_overlap(xp, c, dev.tab(c), row(rel[c.name]), col(tgt[c.name]))
    return d


def _rel_of(dev, cols, rows=None) -> dict:
    t = dev.e.release
    out = {}
    for c in cols:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = dev.lo(t, c.name), dev.hi(t, c.name)
            out[c.name] = (lo, hi) if rows is None else (lo[rows], hi[rows])
        else:
            cell = dev.cell(t, c.name)
            out[c.name] = cell if rows is None else cell[rows]
    return out


def _tgt_of(dev, cols, table, rows) -> dict:
    return {c.name: (dev.lo(table, c.name) if c.kind == "numeric" else dev.cell(table, c.name))[rows] for c in cols}


def _nan_of(cols, table) -> dict:
    """Per numeric column, whether the targets' table holds a missing value (read on the host: no sync)."""
    return {c.name: bool(np.isnan(table.lo[c.name]).any()) for c in cols if c.kind == "numeric"}


def block_rows(dev, per_row_bytes: int) -> int:
    """Targets per block: a share of the device's free memory over the bytes one target's row takes."""
    free, _ = dev.xp.cuda.runtime.memGetInfo()
    return max(1, min(int(free) // MEMORY_SHARE, MAX_BLOCK_BYTES) // max(per_row_bytes, 1))


class Groups:
    """The release rows with equal cells on ``cols``: each group's first (lowest) position, each row's group."""

    def __init__(self, dev, cols):
        xp, t = dev.xp, dev.e.release
        self.cols, self.kinds = cols, kinds(dev.e, cols)
        parts = []
        for c in cols:  # a loop over columns: the CPU's keys (:func:`.distance.groups`)
            if c.kind == "numeric":
                lo, hi = dev.lo(t, c.name), dev.hi(t, c.name)
                nan = xp.isnan(lo)
                parts += [xp.where(nan, 0.0, lo) + 0.0, xp.where(nan, 0.0, hi) + 0.0, nan.astype(xp.float64)]
            else:
                parts.append(dev.cell(t, c.name).astype(xp.float64))
        n = t.n
        pos = xp.arange(n, dtype=xp.int64)
        order = xp.lexsort(xp.stack([pos.astype(xp.float64)] + parts[::-1]))  # the position last: the first row first
        same = xp.ones(n, dtype=bool)
        for p in parts:  # a loop over key columns
            s = p[order]
            same[1:] &= s[1:] == s[:-1]
        new = ~same
        new[:1] = True
        self.gid = xp.empty(n, dtype=xp.int64)
        self.gid[order] = xp.cumsum(new) - 1
        self.first = order[new]  # one sync: the number of groups
        self.n = int(self.first.shape[0])
        self.rel = _rel_of(dev, cols, self.first)

    def min_rank(self, xp, rank):
        """Each group's smallest ``rank`` (a scatter minimum)."""
        out = xp.full(self.n, np.iinfo(np.int32).max, dtype=xp.int32)
        xp.minimum.at(out, self.gid, rank)
        return out

    def nearest(self, dev, table, rows, nan_t, min_rank=None):
        """Per target: the first nearest row, the nearest rows' smallest rank, the nearest groups (mask)."""
        xp = dev.xp
        d = distances(dev, self.cols, self.kinds, nan_t, self.rel, _tgt_of(dev, self.cols, table, rows))
        eq = d == d.min(axis=1, keepdims=True)
        big = dev.e.release.n
        first = xp.where(eq, self.first[None, :], big).min(axis=1)
        if min_rank is None:
            return first
        return first, xp.where(eq, min_rank[None, :], big).min(axis=1), eq


def _rank(xp, order_dev, n: int):
    rank = xp.empty(n, dtype=xp.int32)
    rank[order_dev] = xp.arange(n, dtype=xp.int32)
    return rank


def link_one(dev, a_cols, b_cols, table, trows, rng):
    """:func:`.search.link_one` on the device: ``[anonymeter's rule, random rule, ties kept]`` successes (a
    device array; the random orders drawn on the host from ``rng`` in the CPU's blocks, then uploaded)."""
    xp, n = dev.xp, dev.e.release.n
    a, b = dev.groups(a_cols), dev.groups(b_cols)
    pa, pb = dev.pairs(a, b)
    na, nb = _nan_of(a_cols, table), _nan_of(b_cols, table)
    tr = to_device(np.asarray(trows, dtype=np.int64), xp)
    acc = xp.zeros(3, dtype=xp.int64)
    per_row = 8 * 3 * (a.n + b.n) + 2 * int(pa.shape[0]) + 64
    for blk in blocks(len(trows), n, n // RANK_SHARE):  # the random orders: one per side and block
        oa = to_device(rng.permutation(n), xp)
        ma = a.min_rank(xp, _rank(xp, oa, n))
        ob = to_device(rng.permutation(n), xp)
        mb = b.min_rank(xp, _rank(xp, ob, n))
        rows = tr[blk]
        size = block_rows(dev, per_row)
        for s in range(0, blk.stop - blk.start, size):  # blocks by free memory
            sub = rows[s:s + size]
            fa, xa, ea = a.nearest(dev, table, sub, na, ma)
            fb, xb, eb = b.nearest(dev, table, sub, nb, mb)
            both = (ea[:, pa] & eb[:, pb]).any(axis=1)
            acc += xp.stack([(fa == fb).sum(), (oa[xa] == ob[xb]).sum(), both.sum()])
    return acc


def _smallest(xp, eq, key, need):
    """:func:`.neighbours._smallest` on the device (a sort in place of the partition: the same order statistic)."""
    kk = xp.where(eq, key[None, :], np.int32(eq.shape[1]))
    thr = xp.take_along_axis(xp.sort(kk, axis=1), need - 1, axis=1)
    return eq & (kk <= thr)


def _chosen(xp, d, k: int, rank):
    dk = xp.sort(d, axis=1)[:, k - 1][:, None]
    lt, eq = d < dk, d == dk
    need = (k - lt.sum(axis=1, keepdims=True)).astype(xp.int64)
    pos = xp.arange(d.shape[1], dtype=xp.int32)
    return lt | _smallest(xp, eq, pos, need), lt | _smallest(xp, eq, rank, need), lt | eq


def link_k(dev, a_cols, b_cols, table, trows, k: int, rng, cpu_blocks):
    """:func:`.neighbours._link` for ``k`` neighbours on the device, over every release row, in the CPU's
    blocks (``cpu_blocks``: one random order per side and block, drawn as there)."""
    xp, n = dev.xp, dev.e.release.n
    ka, kb = kinds(dev.e, a_cols), kinds(dev.e, b_cols)
    na, nb = _nan_of(a_cols, table), _nan_of(b_cols, table)
    ra_, rb_ = _rel_of(dev, a_cols), _rel_of(dev, b_cols)
    tr = to_device(np.asarray(trows, dtype=np.int64), xp)
    acc = xp.zeros(3, dtype=xp.int64)
    for blk in cpu_blocks:
        rows = tr[blk]
        ra = _rank(xp, to_device(rng.permutation(n), xp), n)
        ca, sa, ta = _chosen(xp, distances(dev, a_cols, ka, na, ra_, _tgt_of(dev, a_cols, table, rows)), k, ra)
        rb = _rank(xp, to_device(rng.permutation(n), xp), n)
        cb, sb, tb = _chosen(xp, distances(dev, b_cols, kb, nb, rb_, _tgt_of(dev, b_cols, table, rows)), k, rb)
        acc += xp.stack([(ca & cb).any(axis=1).sum(), (sa & sb).any(axis=1).sum(), (ta & tb).any(axis=1).sum()])
    return acc


def _numeric_credit(xp, lo, hi, s):
    """:func:`.neighbours._numeric_credit` on the device (the same elementwise operations)."""
    tol = 0.05
    point = xp.abs(lo - s) / (lo + 1e-12) <= tol
    width = hi - lo
    neg = xp.maximum(xp.minimum(hi, -1e-12) - lo, 0.0)
    win_lo, win_hi = (s - 1e-12 * tol) / (1 + tol), (s + 1e-12 * tol) / (1 - tol)
    pos = xp.maximum(xp.minimum(hi, win_hi) - xp.maximum(xp.maximum(lo, -1e-12), win_lo), 0.0)
    frac = xp.where(xp.isfinite(width) & (width > 0), (neg + pos) / width, 0.0)
    credit = xp.where(width == 0, point, frac).astype(xp.float64)
    gn, sn = xp.isnan(lo), xp.isnan(s)
    return xp.where(gn | sn, (gn & sn).astype(xp.float64), credit)


def _point_key(dev, g, table, tr):
    """:func:`.search._point_key` of the groups and the targets on the device (None: no such column)."""
    xp = dev.xp
    gkey, tkey, size = xp.zeros(g.n, dtype=xp.int64), xp.zeros(tr.shape[0], dtype=xp.int64), 1
    for c in g.cols:  # a loop over columns
        if c.kind == "numeric" or c.sets.shape[0] or size * max(c.n_cats, 1) >= 1 << 62:
            continue
        gkey += g.rel[c.name] * size
        tkey += dev.cell(table, c.name)[tr] * size
        size *= max(c.n_cats, 1)
    return (gkey, tkey) if size > 1 else None


def by_key(dev, g, table, tr, nan_t):
    """The first nearest row of the targets whose nearest group shares their point-categorical cells (a key)
    and is below 1 (any other group differs on such a column: distance >= 1), as :func:`.search._by_key`:
    the groups sorted by key, each target's key range by ``searchsorted``, the (target, group) pairs of the
    ranges measured in chunks by free memory, a scatter minimum per target. Returns the guesses and the
    positions of the other targets (None: no key, every target is another)."""
    xp = dev.xp
    key = _point_key(dev, g, table, tr)
    if key is None:
        return None, None
    gkey, tkey = key
    gorder = xp.argsort(gkey)
    sk = gkey[gorder]
    ks = xp.searchsorted(sk, tkey, side="left")
    ln = xp.searchsorted(sk, tkey, side="right") - ks
    ends = xp.cumsum(ln)
    n_pairs = int(to_scalar(ends[-1])) if tr.shape[0] else 0  # one sync: the number of pairs
    n_t, big = tr.shape[0], dev.e.release.n
    dmin = xp.full(n_t, xp.inf)
    first = xp.full(n_t, big, dtype=xp.int64)
    chunk = block_rows(dev, 8 * 8 + 8 * len(g.cols))  # pairs per chunk
    kept = {}
    for step in ("min", "first"):  # the smallest distance, then the first group at it
        for p0 in range(0, n_pairs, chunk):  # chunks of pairs by free memory
            if (step, p0) not in kept:
                j = xp.arange(p0, min(n_pairs, p0 + chunk), dtype=xp.int64)
                owner = xp.searchsorted(ends, j, side="right")
                grp = gorder[ks[owner] + j - (ends[owner] - ln[owner])]
                rel = {c: (v[0][grp], v[1][grp]) if isinstance(v, tuple) else v[grp] for c, v in g.rel.items()}
                d = distances(dev, g.cols, g.kinds, nan_t, rel, _tgt_of(dev, g.cols, table, tr[owner]), pairs=True)
                if n_pairs <= chunk:  # one chunk: measured once
                    kept[("first", p0)] = (owner, grp, d)
            else:
                owner, grp, d = kept[(step, p0)]
            if step == "min":
                xp.minimum.at(dmin, owner, d)
            else:
                xp.minimum.at(first, owner, xp.where(d == dmin[owner], g.first[grp], big))
    rest = xp.flatnonzero(~(dmin < 1.0))  # one sync: no key row, or none below 1
    return first, rest


def credits(dev, aux_cols, secret, table, trows):
    """Per target, the chance that the nearest release row's secret is right (a device vector)."""
    xp, rel = dev.xp, dev.e.release
    g = dev.groups(aux_cols)
    nan_t = _nan_of(aux_cols, table)
    tr = to_device(np.asarray(trows, dtype=np.int64), xp)
    guess, rest = by_key(dev, g, table, tr, nan_t)
    if rest is None or rest.shape[0]:  # the others: every group, in blocks by free memory
        rows = tr if rest is None else tr[rest]
        size = block_rows(dev, 8 * 3 * g.n + 64)
        got = xp.concatenate([g.nearest(dev, table, rows[s:s + size], nan_t) for s in range(0, rows.shape[0], size)])
        if rest is None:
            guess = got
        else:
            guess[rest] = got
    c = dev.e.column(secret)
    if c.kind == "numeric":
        with np.errstate(invalid="ignore", divide="ignore"):  # the CPU's (the device double computes in NumPy)
            return _numeric_credit(xp, dev.lo(rel, secret)[guess], dev.hi(rel, secret)[guess], dev.lo(table, secret)[tr])
    cell, truth = dev.cell(rel, secret)[guess], dev.cell(table, secret)[tr]
    if not c.sets.shape[0]:
        return (cell == truth).astype(xp.float64)
    size_ = xp.where(cell >= c.n_cats, dev.set_sizes(c)[xp.maximum(cell - c.n_cats, 0)], 1)
    return _overlap(xp, c, dev.tab(c), cell, truth) / size_


def fetch(*arrays) -> list:
    """The device results of an attack (integer counts, float credits) as host float64 arrays, in one
    counted copy (counts are exact in float64)."""
    xp = get_namespace(*arrays)
    flat = to_host(xp.concatenate([a.astype(xp.float64).ravel() for a in arrays]))
    out, s = [], 0
    for a in arrays:  # a loop over the few results
        m = int(np.prod(a.shape))
        out.append(flat[s:s + m].reshape(a.shape))
        s += m
    return out
