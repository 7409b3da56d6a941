"""Distances of original / control rows to release cells (SPEC 14), dense over blocks or over pairs.

Distance of an original row to a release row, summed over columns (anonymeter's Gower-like distance
on cells): numeric 0 inside the cell ``[lo, hi]``, else the gap to the nearest end over the column's
range (a point cell: ``|x - y| / range``, anonymeter's); ``*`` is 0; both missing 1 and one missing
``inf`` (anonymeter's NaN sorts last); categorical 0 when the cell's set holds the value, else 1.
:func:`distances` (targets x every release row) and :func:`pair_distances` (listed (target, release row)
pairs) evaluate the same operations per cell in the same column order: a pair's distance is the same
float in both.
"""

from __future__ import annotations

import numpy as np


def kinds(e, cols) -> dict:
    """Per numeric column, how its release cells are read: ``points`` (finite points, no missing value:
    anonymeter's ``|x - y| / range``), ``plain`` (finite cells, none missing) or ``cells`` (the rest)."""
    out = {}
    for c in cols:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = e.release.lo[c.name], e.release.hi[c.name]
            plain = bool(np.isfinite(lo).all() and np.isfinite(hi).all())
            out[c.name] = "points" if plain and np.array_equal(lo, hi) else "plain" if plain else "cells"
    return out


def _gap(v, lo, hi, scale, kind: str, tmp=None):
    """One numeric column's term: ``v`` the targets' values, ``[lo, hi]`` the release cells (broadcast)."""
    vn = np.isnan(v)
    plain = kind != "cells" and not vn.any()
    if plain and kind == "points":  # points: anonymeter's |x - y| / range
        tmp = np.subtract(v, lo, out=tmp)
        np.abs(tmp, out=tmp)
        tmp /= scale
        return tmp
    with np.errstate(invalid="ignore"):
        gap = np.maximum(np.maximum(lo - v, v - hi), 0.0) / scale
    if not plain:
        rn = np.isnan(lo)
        gap = np.where(vn | rn, np.where(vn & rn, 1.0, np.inf), gap)
        gap = np.where(np.isinf(lo) & np.isinf(hi), 0.0, gap)
    return gap


def distances(e, cols, table, trows, kinds_: dict | None = None, rel=None) -> np.ndarray:
    """``(len(trows), n_release)`` distances of ``table``'s rows ``trows`` to the release rows (``rel``: the
    release table, default ``e.release``; ``kinds_``: :func:`kinds` of ``cols``, computed once per attack)."""
    rel = e.release if rel is None else rel
    kinds_ = kinds(e, cols) if kinds_ is None else kinds_
    d = np.zeros((len(trows), rel.n))
    tmp = np.empty_like(d)  # one scratch block: the same operations, in place
    for c in cols:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = rel.lo[c.name][None, :], rel.hi[c.name][None, :]
            d += _gap(table.lo[c.name][trows][:, None], lo, hi, c.scale, kinds_[c.name], tmp)
        elif not c.sets.shape[0]:  # point cells only
            d += np.not_equal(rel.cell[c.name][None, :], table.cell[c.name][trows][:, None], out=tmp)
        else:
            d += ~c.overlap(rel.cell[c.name][None, :], table.cell[c.name][trows][:, None])
    return d


def pair_distances(e, cols, table, tr, rr, kinds_: dict) -> np.ndarray:
    """Distances of ``table``'s rows ``tr[i]`` to release rows ``rr[i]`` (pairs)."""
    rel = e.release
    d = np.zeros(len(tr))
    for c in cols:  # a loop over columns
        if c.kind == "numeric":
            d += _gap(table.lo[c.name][tr], rel.lo[c.name][rr], rel.hi[c.name][rr], c.scale, kinds_[c.name])
        elif not c.sets.shape[0]:
            d += np.not_equal(rel.cell[c.name][rr], table.cell[c.name][tr])
        else:
            d += ~c.overlap(rel.cell[c.name][rr], table.cell[c.name][tr])
    return d


def groups(t, cols) -> tuple[np.ndarray, np.ndarray]:
    """Rows of table ``t`` with equal cells on ``cols``: the first row of each group (in table order) and
    each row's group."""
    parts = []
    for c in cols:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = t.lo[c.name], t.hi[c.name]
            nan = np.isnan(lo)
            parts += [np.where(nan, 0.0, lo) + 0.0, np.where(nan, 0.0, hi) + 0.0, nan.astype(np.float64)]
        else:
            parts.append(t.cell[c.name].astype(np.float64))
    if not parts or not t.n:
        return np.zeros(min(t.n, 1), dtype=np.int64), np.zeros(t.n, dtype=np.int64)
    order = np.lexsort(parts[::-1])  # stable: equal rows keep table order
    same = np.ones(t.n, dtype=bool)  # as the previous row in that order
    for p in parts:  # a loop over key columns
        s = p[order]
        same[1:] &= s[1:] == s[:-1]
    new = ~same
    new[0] = True
    gid = np.empty(t.n, dtype=np.int64)
    gid[order] = np.cumsum(new) - 1
    return order[new], gid
