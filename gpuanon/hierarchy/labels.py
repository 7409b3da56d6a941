"""Labels of hierarchy nodes, and the check-and-number step from labelled paths to node ids."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..table.values import is_na
from ..errors import InputError

ROOT = "*"
"""Label of the root of built hierarchies (the suppressed cell)."""

MISSING_LABEL = "NaN"
"""Label of the leaf that stands for a missing value."""

GROUP_SEPARATOR = "|"
"""Separator of the values in a frequency group's label (as in :mod:`gpuanon.anonymize.generalize`)."""


def node_text(v: Any) -> str:
    """The label text of a value (missing -> ``NaN``)."""
    if is_na(v):
        return MISSING_LABEL
    if isinstance(v, (np.generic,)):
        v = v.item()
    return str(v)


def describe(name: str | None, source: str | None) -> str:
    """``hierarchy (column 'c', file f.csv)``: how messages name a hierarchy."""
    parts = []
    if name is not None:
        parts.append(f"column {name!r}")
    if source is not None:
        parts.append(f"file {source}")
    return "hierarchy" + (" (" + ", ".join(parts) + ")" if parts else "")


def levels_from_paths(leaves: Sequence, paths, name: str | None = None, source: str | None = None,
                      lines: Sequence[int] | None = None) -> tuple[np.ndarray, list[str]]:
    """Node ids ``levels`` ``(n_leaves, height + 1)`` and the label of every node id.

    Nodes are identified by ``(level, label)``; ids are given level by level, in order of first
    appearance down the leaves. Raises :class:`~gpuanon.errors.InputError` (naming the hierarchy,
    the line or leaf, and the fix) for no leaves, paths of unequal lengths, a leaf listed twice,
    rows that end with different roots, and a label with two different parents.
    """
    n = len(leaves)
    where = describe(name, source)
    if n == 0:
        raise InputError(f"{where}: no leaves")
    rows = [list(p) for p in paths]
    if len(rows) != n:
        raise InputError(f"{where}: {n} leaves but {len(rows)} paths")
    depth = {len(r) for r in rows}
    if len(depth) != 1 or 0 in depth:
        raise InputError(f"{where}: every leaf needs a path of the same length >= 1 "
                         f"(level 1 .. root); got lengths {sorted(depth)}")
    height = depth.pop()
    lab = np.array([[str(x) for x in r] for r in rows], dtype=object).reshape(n, height)
    line = (lambda i: f"line {lines[i]}") if lines is not None else (lambda i: f"leaf {i}")
    leaf_text = [node_text(v) for v in leaves]
    seen: dict[str, int] = {}
    for i, t in enumerate(leaf_text):
        if t in seen:
            raise InputError(f"{where}: leaf {t!r} is listed twice ({line(seen[t])} and "
                             f"{line(i)}); keep one row per value")
        seen[t] = i
    roots = lab[:, -1]
    if (roots != roots[0]).any():
        bad = int(np.flatnonzero(roots != roots[0])[0])
        raise InputError(f"{where}: the last column must be the same root for every row; "
                         f"{line(0)} ends with {roots[0]!r} but {line(bad)} ends with "
                         f"{roots[bad]!r}; end every row with the same root (e.g. '*')")
    levels = np.empty((n, height + 1), dtype=np.int64)
    levels[:, 0] = np.arange(n)
    labels = list(leaf_text)
    offset = n
    for lev in range(1, height + 1):
        codes, uniq = pd.factorize(lab[:, lev - 1], sort=False)
        levels[:, lev] = codes + offset
        labels.extend(str(u) for u in uniq)
        offset += len(uniq)
    # a tree: every node of level L (1 <= L < height) has one parent
    for lev in range(1, height):
        child, par = levels[:, lev], levels[:, lev + 1]
        first_par = np.full(offset, -1, dtype=np.int64)
        first_row = np.full(offset, -1, dtype=np.int64)
        rev = np.arange(n)[::-1]
        first_par[child[rev]] = par[rev]
        first_row[child[rev]] = rev
        bad = np.flatnonzero(first_par[child] != par)
        if bad.size:
            i = int(bad[0])
            j = int(first_row[child[i]])
            raise InputError(
                f"{where}: {labels[child[i]]!r} at level {lev} has two parents: "
                f"{labels[par[j]]!r} ({line(j)}) and {labels[par[i]]!r} ({line(i)}); a "
                f"hierarchy must be a tree: give each group one parent or rename one of them")
    return levels, labels
