"""Nearest release rows without every (target, release row) distance, with the brute force's answers.

* One neighbour for linkability: the release rows with equal cells on an aux set are at equal distance
  from any target, so distances are taken to the distinct cells (groups) only; anonymeter's rule (the
  first row among the nearest) is the smallest first position among the nearest groups, the random
  rule the smallest random rank among them (each group's smallest rank, ``minimum.reduceat``), and the
  ties-kept rule asks whether some release row lies in a nearest group on both sets.
* The inference's nearest row: a categorical column whose release cells are points adds exactly 1 to
  the distance where the cells differ, so a release row whose cells differ from the target's on any of
  those columns is at distance >= 1. The rows with the target's own cells there (a sorted key,
  ``searchsorted``) are measured as (target, row) pairs; where the nearest of them is below 1 it is the
  nearest of all (the first among equals: a key's rows are in table order). The other targets (no such
  row, or none below 1) are measured against every row, in blocks.
"""

from __future__ import annotations

import numpy as np

from .distance import distances, groups, kinds, pair_distances

#: cells of one dense (targets x release cells) block
BLOCK = 1 << 22
#: (target, release row) pairs measured at once
PAIRS = 1 << 22
#: a random order of the release rows is shared by blocks of at least n_release / RANK_SHARE attacks (more
#: where BLOCK allows): drawing and ranking it costs about as much as RANK_SHARE attacks' searches
RANK_SHARE = 64


def blocks(n_targets: int, n_cols: int, least: int = 1):
    """Slices of about ``BLOCK // n_cols`` targets (at least ``least``)."""
    size = max(least, BLOCK // max(n_cols, 1))
    for s in range(0, n_targets, size):
        yield slice(s, min(n_targets, s + size))


def rank(order: np.ndarray) -> np.ndarray:
    """Each release row's place in the random ``order``."""
    out = np.empty(len(order), dtype=np.int32)
    out[order] = np.arange(len(order), dtype=np.int32)
    return out


class _Side:
    """One aux set's distinct release cells: each group's first row and rows listed by group."""

    def __init__(self, e, cols):
        self.cols, self.kinds = cols, kinds(e, cols)
        self.first, self.gid = groups(e.release, cols)
        self.rel = e.release.take(self.first)
        self.by_group = np.argsort(self.gid, kind="stable")
        self.starts = np.searchsorted(self.gid[self.by_group], np.arange(len(self.first)))

    def min_rank(self, order: np.ndarray) -> np.ndarray:
        """Each group's smallest place in the random ``order``."""
        return np.minimum.reduceat(rank(order)[self.by_group], self.starts)

    def nearest(self, e, table, trows, min_rank):
        """Per target: the first nearest row, the nearest rows' smallest rank, the nearest groups (mask)."""
        d = distances(e, self.cols, table, trows, self.kinds, rel=self.rel)
        eq = d == d.min(axis=1, keepdims=True)
        n = len(self.gid)
        return np.where(eq, self.first[None, :], n).min(axis=1), np.where(eq, min_rank[None, :], n).min(axis=1), eq


def _both(eqa: np.ndarray, eqb: np.ndarray, start: np.ndarray, count: np.ndarray, partner: np.ndarray) -> np.ndarray:
    """Per target: whether a release row lies in one of its nearest groups on both sets (``partner``: the
    B groups that share a row with each A group, ``start`` / ``count`` per A group)."""
    t, ga = np.nonzero(eqa)
    cnt = count[ga]
    tt = np.repeat(t, cnt)
    idx = np.repeat(start[ga] - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
    hit = eqb[tt, partner[idx]]
    return np.bincount(tt[hit], minlength=eqa.shape[0]) > 0


def link_one(e, a_cols, b_cols, table, trows, rng) -> tuple[int, int, int]:
    """Successes of the one-neighbour linkability attack on ``trows`` (anonymeter's rule, ties broken at
    random, ties kept), one random order of the release rows per side and block of attacks."""
    a, b = _Side(e, a_cols), _Side(e, b_cols)
    pair = np.unique(a.gid * len(b.first) + b.gid)  # the (A group, B group) pairs that hold a row
    pa, pb = pair // len(b.first), pair % len(b.first)
    count = np.bincount(pa, minlength=len(a.first))
    start = np.cumsum(count) - count
    n = e.release.n
    first = rand = ties = 0
    for blk in blocks(len(trows), n, n // RANK_SHARE):  # the random orders: one per side and block
        oa = rng.permutation(n)
        ma = a.min_rank(oa)
        ob = rng.permutation(n)
        mb = b.min_rank(ob)
        rows = trows[blk]
        for sub in blocks(len(rows), max(len(a.first), len(b.first))):
            fa, xa, ea = a.nearest(e, table, rows[sub], ma)
            fb, xb, eb = b.nearest(e, table, rows[sub], mb)
            first += int((fa == fb).sum())
            rand += int((oa[xa] == ob[xb]).sum())
            ties += int(_both(ea, eb, start, count, pb).sum())
    return first, rand, ties


def _point_key(e, cols, table, trows):
    """A key of the point-only categorical columns (mixed radix, as many as fit in 62 bits) for the
    release rows and the targets, or None."""
    rkey, tkey, size = np.zeros(e.release.n, dtype=np.int64), np.zeros(len(trows), dtype=np.int64), 1
    for c in cols:  # a loop over columns
        if c.kind == "numeric" or c.sets.shape[0] or size * max(c.n_cats, 1) >= 1 << 62:
            continue
        rkey += e.release.cell[c.name] * size
        tkey += table.cell[c.name][trows] * size
        size *= max(c.n_cats, 1)
    return (rkey, tkey) if size > 1 else None


def _range_min(e, cols, table, trows, kinds_, tg, s, en, order) -> tuple[np.ndarray, np.ndarray]:
    """For targets ``tg`` (non-empty ranges ``[s, en)`` of ``order``): the smallest distance to those release
    rows and the lowest position among the rows at it, measured as pairs in chunks of about PAIRS."""
    dmin, first = np.full(len(tg), np.inf), np.zeros(len(tg), dtype=np.int64)
    nz = np.flatnonzero(en > s)
    if len(nz) < len(tg):  # empty ranges: nothing there
        dmin[nz], first[nz] = _range_min(e, cols, table, trows, kinds_, tg[nz], s[nz], en[nz], order)
        return dmin, first
    ln = en - s
    cum = np.cumsum(ln)
    cuts = np.searchsorted(cum, np.arange(PAIRS, int(cum[-1]) + PAIRS, PAIRS), side="right") if len(cum) else []
    prev = 0
    for cut in list(cuts) + [len(tg)]:  # chunks of about PAIRS pairs
        sl = slice(prev, max(prev, min(int(cut), len(tg))))
        prev = sl.stop
        lb = ln[sl]
        if not len(lb):
            continue
        seg = np.cumsum(lb) - lb
        rr = order[np.repeat(s[sl] - seg, lb) + np.arange(int(lb.sum()))]
        d = pair_distances(e, cols, table, trows[np.repeat(tg[sl], lb)], rr, kinds_)
        dmin[sl] = np.minimum.reduceat(d, seg)
        first[sl] = np.minimum.reduceat(np.where(d == np.repeat(dmin[sl], lb), rr, e.release.n), seg)
    return dmin, first


def _window_column(e, cols, kinds_):
    """The numeric column whose release cells are all finite with the most distinct values in a sample."""
    best, most = None, 0
    for c in cols:  # a loop over columns
        if c.kind == "numeric" and kinds_[c.name] != "cells":
            k = len(np.unique(e.release.lo[c.name][:: max(1, e.release.n // 4096)]))
            best, most = (c, k) if k > most else (best, most)
    return best


def _by_key(e, cols, table, trows, kinds_, out, done) -> None:
    """The targets whose nearest row shares their key and is below 1: ``out`` and ``done`` set for them.
    The key's rows are sorted by a numeric column ``x``: a first look at the few nearest in ``x`` bounds the
    distance (``ub``), then every row of the key whose ``x`` term can be at most ``ub`` is measured."""
    key = _point_key(e, cols, table, trows)
    if key is None:
        return
    rkey, tkey = key
    ukey = np.unique(rkey)
    kid = np.searchsorted(ukey, tkey)
    has = np.flatnonzero((kid < len(ukey)) & (ukey[np.minimum(kid, len(ukey) - 1)] == tkey))
    xc = _window_column(e, cols, kinds_)
    lo = e.release.lo[xc.name] if xc is not None else np.zeros(e.release.n)
    v = table.lo[xc.name][trows] if xc is not None else np.zeros(len(trows))
    has = has[~np.isnan(v[has])]
    ux = np.unique(lo)
    stride = len(ux) + 1
    comp = np.searchsorted(ukey, rkey) * stride + np.searchsorted(ux, lo)
    order = np.argsort(comp, kind="stable")
    sc = comp[order]
    base = kid[has] * stride
    ks, ke = np.searchsorted(sc, base), np.searchsorted(sc, base + stride)
    p = np.searchsorted(sc, base + np.searchsorted(ux, v[has]))
    s1, e1 = np.maximum(ks, p - 4), np.minimum(ke, p + 4)  # the first look: a few rows either side in x
    ub, _ = _range_min(e, cols, table, trows, kinds_, has, s1, e1, order)
    keep = ub < 1.0
    has, ub, ks, ke, base = has[keep], ub[keep], ks[keep], ke[keep], base[keep]
    if xc is not None:  # the rows whose x term may be at most ub (a superset, by a margin)
        w = ub * xc.scale * (1 + 1e-6) + 1e-9 * xc.scale
        widest = float(np.max(e.release.hi[xc.name] - lo)) if e.release.n else 0.0
        ks = np.maximum(ks, np.searchsorted(sc, base + np.searchsorted(ux, v[has] - w - widest, side="left")))
        ke = np.minimum(ke, np.searchsorted(sc, base + np.searchsorted(ux, v[has] + w, side="right")))
    dmin, first = _range_min(e, cols, table, trows, kinds_, has, ks, np.maximum(ke, ks), order)
    out[has], done[has] = first, True


def first_nearest(e, cols, table, trows) -> np.ndarray:
    """Per target row, the first (lowest position) of the nearest release rows on ``cols``."""
    kinds_ = kinds(e, cols)
    out = np.zeros(len(trows), dtype=np.int64)
    done = np.zeros(len(trows), dtype=bool)
    _by_key(e, cols, table, trows, kinds_, out, done)
    rest = np.flatnonzero(~done)
    for blk in blocks(len(rest), e.release.n):
        out[rest[blk]] = np.argmin(distances(e, cols, table, trows[rest[blk]], kinds_), axis=1)
    return out
