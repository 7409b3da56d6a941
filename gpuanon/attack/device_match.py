"""Singling out's match counts on the GPU backend: whether each predicate may match each row as device masks
(the conditions of :func:`.predicates.holds`, column by column, over blocks of predicates sized from free
device memory), the counts capped at 2 and brought back in one counted copy: the counts of
:func:`.predicates.match_counts` (exact, capped at 2), so the same report. The predicates are host arrays;
which predicates use a column is read there (no sync); the random draw of the CPU's sample is made and
dropped so that the generator's stream is the CPU's.
"""

from __future__ import annotations

import numpy as np

from ..backend import to_device, to_host
from .device import block_rows
from .predicates import interval_mask


def _pred(dev, q, field: str, name: str, u):
    return to_device(np.ascontiguousarray(getattr(q, field)[name][u]), dev.xp)[:, None]


def _numeric(dev, q, name, u, lo, hi):
    """:func:`.predicates._numeric_mask` on the device (its general form: the same booleans on points)."""
    a, b, inv = (_pred(dev, q, f, name, u) for f in ("a", "b", "inv"))
    m = interval_mask(dev.xp, a, b, inv, lo, hi)
    return dev.xp.where(dev.xp.isnan(lo), _pred(dev, q, "null", name, u), m)


def _categorical(dev, c, q, u, r):
    """:meth:`.cells.Column.overlap` / ``outside`` of row cells ``r`` and the predicates' cells on the device."""
    p, neg = _pred(dev, q, "p", c.name, u), _pred(dev, q, "neg", c.name, u)
    tab = dev.tab(c) if c.sets.shape[0] else None
    otab = dev.up(("outside", c.name), c.outside_tab) if c.sets.shape[0] else None
    return c.holds(r, p, neg, dev.xp, tab, otab)


def match_counts(dev, q, columns, table, rng, rows=None, index=None) -> np.ndarray:
    """:func:`.predicates.match_counts` on the device (``dev``: :class:`.device.Cells`)."""
    xp = dev.xp
    rows = np.arange(table.n) if rows is None else np.asarray(rows if index is None else index.rows)
    if not q.n or not len(rows):
        return np.zeros(q.n, dtype=np.int64)
    rng.permutation(len(rows))  # the CPU's sample: drawn, not needed (the counts here are exact)
    rd = to_device(rows.astype(np.int64), xp)
    cells = {}
    for c in columns:  # a loop over columns: the rows' cells, gathered once
        if c.kind == "numeric":
            cells[c.name] = (dev.lo(table, c.name)[rd][None, :], dev.hi(table, c.name)[rd][None, :])
        else:
            cells[c.name] = dev.cell(table, c.name)[rd][None, :]
    size = block_rows(dev, 6 * len(rows) + 64)
    counts = []
    for s in range(0, q.n, size):  # blocks of predicates by free memory
        blk = np.arange(s, min(q.n, s + size))
        ok = xp.ones((len(blk), len(rows)), dtype=bool)
        for c in columns:  # a loop over columns
            u = blk[q.used[c.name][blk]]
            if not len(u):
                continue
            m = (_numeric(dev, q, c.name, u, *cells[c.name]) if c.kind == "numeric"
                 else _categorical(dev, c, q, u, cells[c.name]))
            ud = to_device(u - s, xp)
            ok[ud] &= m
        counts.append(xp.minimum(ok.sum(axis=1), 2))
    return to_host(xp.concatenate(counts)).astype(np.int64)
