"""Plain, slow reference implementations that the fast kernels are tested against.

Written for clarity, not speed: a recursive Mondrian over a float64 value matrix, with its own
privacy checks. It shares nothing with :mod:`kernels.mondrian` except the contract.
"""

from __future__ import annotations

import math

import numpy as np


def _plain_ok(rows, sa, k, l, l_kind, t, t_distance, q, c, sa_missing=None):
    """Do these rows satisfy k, l and t?  Written with plain Python over value counts.

    ``sa_missing``: the code of a missing sensitive value; l (every kind) ignores it, t counts it.
    """
    if len(rows) < k:
        return False
    if sa is None or (not l and t is None):
        return True
    counts = {}
    for r in rows:
        counts[int(sa[r])] = counts.get(int(sa[r]), 0) + 1
    n = len(rows)
    if l:
        known = {v: x for v, x in counts.items() if v != sa_missing}
        nk = sum(known.values())
        if l_kind == "distinct" and len(known) < l:
            return False
        if l_kind == "entropy":
            h = -sum((x / nk) * math.log(x / nk) for x in known.values())
            if h < math.log(l) - 1e-9:
                return False
        if l_kind == "recursive":
            r = sorted(known.values(), reverse=True)
            if len(r) < l or not r[0] < c * sum(r[l - 1:]):
                return False
    if t is not None:
        m = len(q)
        p = [counts.get(i, 0) / n for i in range(m)]
        if t_distance == "equal":
            dist = 0.5 * sum(abs(p[i] - q[i]) for i in range(m))
        elif t_distance == "ordered":
            acc, dist = 0.0, 0.0
            for i in range(m):
                acc += p[i] - q[i]
                dist += abs(acc)
            dist = dist / (m - 1) if m > 1 else 0.0
        else:
            dist = sum(p[i] * math.log(p[i] / q[i]) for i in range(m) if p[i] > 0)
        if dist > t + 1e-9:
            return False
    return True


def mondrian_reference(
    values,
    is_categorical,
    n_categories,
    global_range,
    k,
    *,
    sa=None,
    l=0,
    l_kind="distinct",
    c=1.0,
    t=None,
    t_distance="equal",
    q=None,
    blocks=None,
    relaxed=False,
    hierarchies=None,
    sa_missing=None,
):
    """Recursive Mondrian over a (n, d) float64 matrix (categorical columns hold their codes).

    Missing numeric values are NaN; ``blocks`` separates rows by missing-value pattern, so a
    column is either all-missing or never missing inside a block. ``hierarchies`` maps a column
    to ``(levels per code, leaves under each node, number of leaves)``: its span is then the
    share of leaves under the lowest node covering all its codes, found by checking every level. Returns labels numbered by the
    smallest row index of each partition.
    """
    values = np.asarray(values, dtype=np.float64)
    n, d = values.shape
    hierarchies = hierarchies or {}
    out = np.full(n, -1, dtype=np.int64)
    parts = []

    def span(rows, j):
        col = values[rows, j]
        if np.isnan(col).all() or np.nanmin(col) == np.nanmax(col):
            return 0.0
        if j in hierarchies:  # leaves under the lowest node covering every code present
            levels, n_under, n_leaves = hierarchies[j]
            present = sorted(set(int(x) for x in col))
            paths = [list(levels[c]) for c in present]
            for lev in range(len(paths[0])):
                if all(p[lev] == paths[0][lev] for p in paths):
                    return n_under[paths[0][lev]] / n_leaves
        if is_categorical[j]:
            return len(np.unique(col)) / n_categories[j]
        if not global_range[j] > 0:
            return 0.0
        return (float(col.max()) - float(col.min())) / global_range[j]

    def ok(rows):
        return _plain_ok(rows, sa, k, l, l_kind, t, t_distance, q, c, sa_missing)

    def split(rows, j):
        col = values[rows, j]
        if relaxed:
            order = np.lexsort((rows, col))
            half = (len(rows) + 1) // 2
            return rows[np.sort(order[:half])], rows[np.sort(order[half:])]
        m = np.sort(col)[(len(col) - 1) // 2]
        left, right = rows[col <= m], rows[col > m]
        if len(right) == 0:
            left, right = rows[col < m], rows[col >= m]
        return left, right

    def recurse(rows):
        spans = [span(rows, j) for j in range(d)]
        for j in sorted(range(d), key=lambda j: (-spans[j], j)):
            if spans[j] <= 0:
                break
            left, right = split(rows, j)
            if len(left) and len(right) and ok(left) and ok(right):
                recurse(left)
                recurse(right)
                return
        parts.append(rows)

    if blocks is None:
        recurse(np.arange(n))
    else:
        for b in np.unique(blocks):
            recurse(np.nonzero(blocks == b)[0])
    for i, rows in enumerate(sorted(parts, key=lambda r: int(r.min()))):
        out[rows] = i
    return out
