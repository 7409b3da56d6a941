"""Candidate rows of a predicate from two of its conditions at once (the exact count's anchor).

:func:`gpuanon.attack.predicates.match_counts` checks each predicate on the rows its most selective
condition allows, a range of one column's sorted rows. A multivariate predicate such as ``age >= 70 &
fnlwgt <= 20000 & workclass = X`` may single out one row while each of its conditions alone allows
thousands; its candidates from two conditions together are few. A pair index sorts the rows by an outer
key (a categorical column's category, or a numeric column's value in one of :data:`GROUPS` quantile
groups) and, within it, by the inner column's value. Rows meeting both conditions then lie in one range
per outer group the outer condition touches (the inner condition's ranks within the group): a superset
of the rows meeting both (the partly covered groups at the outer condition's ends add a few), checked
exactly afterwards like any candidate.

Only columns whose rows in the table are points (numeric: no missing, no interval; categorical: no set
cell), and conditions that are one interval or one category (not ``inv`` / ``neg``, not a set cell), take
part; the others keep their one-column anchors. A pair index is built when the candidate rows it is
expected to save (the conditions taken as independent) pay for its sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: quantile groups of a numeric outer column
GROUPS = 64
#: expected candidate rows saved that pay for sorting the rows once more (a pair index)
BUILD_ROWS = 1 << 19
#: predicates whose best one-column anchor allows fewer rows keep it
SMALL = 256


@dataclass
class PairIndex:
    """The rows sorted by (outer group, inner rank); ``key`` is ``group * n_ranks + rank`` in that order."""

    perm: np.ndarray
    key: np.ndarray
    n_ranks: int
    edges: np.ndarray | None  # numeric outer: the groups' upper edges; categorical: None (group = category)
    values: np.ndarray | None  # numeric inner: the distinct values (rank = position); categorical: None


def eligible(c, ix) -> bool:
    """Whether column ``c``'s rows in the index ``ix`` are all points (see the module)."""
    if c.kind == "numeric":
        n_wild, n_fin, widest = ix.info[c.name]
        return n_wild == 0 and n_fin == ix.n and widest == 0
    return ix.info[c.name] == ix.n


def conditions(q, c, qid) -> np.ndarray:
    """Whether predicates ``qid``' conditions on ``c`` are one interval or one category."""
    if c.kind == "numeric":
        return ~q.inv[c.name][qid]
    return ~q.neg[c.name][qid] & (q.p[c.name][qid] < c.n_cats)


def _small(n: int):
    """The narrowest integer type holding ``0 .. n - 1``: 8- and 16-bit keys sort by radix, and gather fewer bytes."""
    return np.uint8 if n <= (1 << 8) else np.int16 if n <= (1 << 15) else np.int32 if n < (1 << 31) else np.int64


def _column(c, table, ix) -> tuple:
    """Column ``c``'s outer group per table row (over the index's rows), its rank along the index's sorted
    rows (``ix.perm[c]``), its number of ranks, its distinct values (numeric; ``None``: the rank is the
    category) and its groups' upper edges (numeric; ``None``: the group is the category); once per index
    and column, from the index's sorted rows."""
    if c.name not in ix.columns:
        perm = ix.perm[c.name]
        if c.kind == "numeric":
            v = table.lo[c.name][perm]  # sorted: every row is a bounded point
            new = np.concatenate([[True], v[1:] != v[:-1]]) if len(v) else np.zeros(0, dtype=bool)
            values = v[new]
            edges = np.unique(v[(np.arange(1, GROUPS) * len(v)) // GROUPS]) if len(v) else np.zeros(0)
            group = np.zeros(table.n, dtype=_small(len(edges) + 1))
            group[perm] = np.searchsorted(edges, v, side="right")
            ranked = (np.cumsum(new) - 1).astype(_small(len(values)))
            ix.columns[c.name] = (group, ranked, len(values), values, edges)
        else:
            # every cell a point (eligible): in sorted order the categories run 0, 1, ... in blocks
            ranked = np.repeat(np.arange(c.n_cats, dtype=_small(c.n_cats)), np.diff(ix.key[c.name]))
            ix.columns[c.name] = (table.cell[c.name].astype(_small(c.n_cats)), ranked, c.n_cats, None, None)
    return ix.columns[c.name]


def build(outer, inner, table, ix) -> PairIndex:
    """The pair index of columns ``outer`` and ``inner`` over the index's rows (both :func:`eligible`): the
    rows in the inner column's sorted order, sorted again (stably) by the outer group."""
    group, _, _, _, edges = _column(outer, table, ix)
    _, ranked, n_ranks, values, _ = _column(inner, table, ix)
    pin = ix.perm[inner.name]
    g = group[pin]
    order = np.argsort(g, kind="stable")
    perm = pin[order]
    n_ranks = max(n_ranks, 1)
    n_groups = (len(edges) + 1) if edges is not None else outer.n_cats
    # 32-bit keys where every key and query bound fits: half the bytes to sort, gather and search
    small = np.int32 if (n_groups + 1) * n_ranks < (1 << 31) else np.int64
    # sorted by group: the groups in blocks; each group's rows keep the inner order (ranks gathered forwards)
    blocks = np.repeat(np.arange(n_groups, dtype=small), np.bincount(g, minlength=n_groups)[:n_groups])
    key = blocks * small(n_ranks) + ranked[order].astype(small)
    return PairIndex(perm, key, n_ranks, edges, values)


def _groups(pi: PairIndex, q, c, qid) -> tuple[np.ndarray, np.ndarray]:
    """The first and last outer group that predicates ``qid``' conditions on ``c`` touch."""
    if pi.edges is None:
        p = q.p[c.name][qid]
        return p, p
    return (np.searchsorted(pi.edges, q.a[c.name][qid], side="right"),
            np.searchsorted(pi.edges, q.b[c.name][qid], side="right"))


def _ranks(pi: PairIndex, q, c, qid) -> tuple[np.ndarray, np.ndarray]:
    """The inner ranks ``[start, end)`` predicates ``qid``' conditions on ``c`` allow."""
    if pi.values is None:
        p = q.p[c.name][qid]
        return p, p + 1
    return (np.searchsorted(pi.values, q.a[c.name][qid], side="left"),
            np.searchsorted(pi.values, q.b[c.name][qid], side="right"))


def ranges(pi: PairIndex, q, outer, inner, qid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(owner, start, end)`` ranges of ``pi.perm`` holding every row that meets both conditions of
    predicates ``qid`` (one range per touched outer group; empty ones left out)."""
    g0, g1 = _groups(pi, q, outer, qid)
    r0, r1 = _ranks(pi, q, inner, qid)
    n_groups = np.maximum(g1 - g0 + 1, 0) * (r1 > r0)
    owner = np.repeat(qid, n_groups)
    first = np.cumsum(n_groups) - n_groups
    g = np.repeat(g0 - first, n_groups) + np.arange(int(n_groups.sum()))
    base = g.astype(np.int64) * pi.n_ranks
    kt = pi.key.dtype  # the bounds in the key's type (they fit: see build): no copy of the key per search
    start = np.searchsorted(pi.key, (base + np.repeat(r0, n_groups)).astype(kt), side="left")
    end = np.searchsorted(pi.key, (base + np.repeat(r1, n_groups)).astype(kt), side="left")
    keep = end > start
    return owner[keep], start[keep], end[keep]


def choose(q, used, ix, qid, size: np.ndarray) -> dict:
    """Per (outer, inner) column pair worth an index: the predicates (of ``qid``) to anchor on it. ``size``:
    the one-column anchors' row counts, ``(len(used), len(qid))``, ``inf`` where a column is unused."""
    n = max(ix.n, 1)
    fit = np.array([eligible(c, ix) for c in used])
    cond = np.stack([conditions(q, c, qid) for c in used]) & fit[:, None]
    s = np.where(cond, size, np.inf)
    best = s.min(axis=0)
    two = np.argsort(s, axis=0, kind="stable")[:2] if len(used) > 1 else None
    if two is None:
        return {}
    s1, s2 = np.take_along_axis(s, two, axis=0)
    with np.errstate(invalid="ignore"):  # inf - inf where a predicate has no second condition
        gain = size.min(axis=0) - s1 * s2 / n
    take = np.isfinite(s2) & (best >= SMALL) & (gain > 0)
    out = {}
    for pair in np.unique(two[:, take].T, axis=0) if take.any() else []:  # a loop over the column pairs used
        mine = take & (two[0] == pair[0]) & (two[1] == pair[1])
        a, b = used[pair[0]], used[pair[1]]  # a: the more selective condition
        outer, inner = (b, a) if b.kind == "categorical" or a.kind == "numeric" else (a, b)
        key = (outer.name, inner.name)
        if key in ix.pairs or (ix.build_pairs and gain[mine].sum() > BUILD_ROWS):
            out[key] = (outer, inner, np.flatnonzero(mine))
    return out


def gather(perm: list, st, lb, first) -> np.ndarray:
    """The rows at positions ``[st, st + lb)`` (entries in order of ``st``) of the row lists ``perm``,
    concatenated, without concatenating the lists themselves (position ``k * n + i``: list ``k``, row ``i``)."""
    n = len(perm[0])
    k = st // max(n, 1)
    cut = np.flatnonzero(np.diff(k)) + 1
    bounds = np.concatenate([[0], cut, [len(st)]])
    total = int(lb.sum())
    rows = np.empty(total, dtype=perm[0].dtype)
    for e0, e1 in zip(bounds[:-1], bounds[1:]):  # a loop over row lists (entries are grouped by list)
        p0 = int(first[e0])
        p1 = int(first[e1 - 1] + lb[e1 - 1])
        if p1 > p0:
            rel = st[e0:e1] - k[e0] * n - first[e0:e1]
            rows[p0:p1] = perm[k[e0]][np.repeat(rel, lb[e0:e1]) + np.arange(p0, p1)]
    return rows
