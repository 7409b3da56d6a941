"""A release and its original / control rows encoded for the attacks: every published cell a set.

Numeric column: a cell is the interval ``[lo, hi]`` (a point when ``lo == hi``; ``range`` text,
``minmax`` pairs, pass-through and raw values; ``*`` is ``[-inf, inf]``; missing is NaN), parsed by
:func:`gpuanon.table.cells.parse_numeric_cells`. Categorical column: a cell is a set of categories (a value,
``a|b``, ``\\N``, ``*``, a hierarchy label), parsed by :func:`gpuanon.table.cells.category_sets`. Categories
are numbered ``0 .. n_cats - 1`` (the original's and control's values, then any the release adds); a
cell id below ``n_cats`` is the point cell of that category, ids from ``n_cats`` on are the release's
other sets (``sets[id - n_cats]``). Original and control rows are point cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..table.cells import category_sets, cell_key, hierarchy_node_members, parse_numeric_cells
from ..errors import InputError, shown
from ..release.verify import splitmix64
from ..table.exact import float_values
from ..table.values import factorize


@dataclass
class Column:
    """One attacked column: its kind, the numeric scale (the range over every table), and for a
    categorical column the category labels and the release's set cells with their relation tables."""

    name: str
    kind: str  # "numeric" | "categorical"
    scale: float = 1.0
    labels: list = field(default_factory=list)
    missing: int = -1  # the missing value's category (-1: none)
    sets: np.ndarray | None = None  # (m, n_cats) the release's non-point cells
    overlap_tab: np.ndarray | None = None  # (m, n_cats + m): set i meets cell j
    outside_tab: np.ndarray | None = None  # (m, n_cats + m): set i holds a non-missing value outside cell j

    @property
    def n_cats(self) -> int:
        return len(self.labels)

    def finish(self) -> None:
        """The relation tables of the set cells (a loop-free matrix product)."""
        n, s = self.n_cats, self.sets
        if s is None or not len(s):
            self.sets = np.zeros((0, n), dtype=bool)
            self.overlap_tab = self.outside_tab = np.zeros((0, n), dtype=bool)
            return
        si = s.astype(np.int32)
        nm = s.copy()
        if self.missing >= 0:
            nm[:, self.missing] = False
        cnt = nm.sum(axis=1)
        point_out = cnt[:, None] - nm.astype(np.int32) > 0  # a non-missing member other than j
        self.overlap_tab = np.concatenate([s, (si @ si.T) > 0], axis=1)
        self.outside_tab = np.concatenate([point_out, (nm.astype(np.int32) @ (~s).astype(np.int32).T) > 0], axis=1)

    def _sides(self, r, p, xp):
        """Which of ``r`` / ``p`` are set cells, and their rows in the set tables (0 elsewhere)."""
        n = self.n_cats
        rs, ps = r >= n, p >= n
        return rs, ps, xp.where(rs, r - n, 0), xp.where(ps, p - n, 0)

    def overlap(self, r, p, xp=np, tab=None, sides=None):
        """Whether row cells ``r`` and predicate cells ``p`` (broadcast) share a category. ``xp``: NumPy
        or CuPy (arrays of it), with ``tab`` this column's :attr:`overlap_tab` there."""
        r, p = (np.asarray(r), np.asarray(p)) if xp is np else (r, p)
        out = r == p
        if self.sets.shape[0]:
            tab = self.overlap_tab if tab is None else tab
            rs, ps, ri, pi = self._sides(r, p, xp) if sides is None else sides
            out = xp.where(rs, tab[ri, p], xp.where(ps, tab[pi, r], out))
        return out

    def outside(self, r, p, xp=np, tab=None, outside_tab=None, sides=None):
        """Whether row cells ``r`` may hold a non-missing value outside predicate cells ``p`` (``xp``,
        ``tab``, ``outside_tab``: the namespace and this column's tables there)."""
        r, p = (np.asarray(r), np.asarray(p)) if xp is np else (r, p)
        out = (r != p) & (r != self.missing)
        if self.sets.shape[0]:
            tab = self.overlap_tab if tab is None else tab
            otab = self.outside_tab if outside_tab is None else outside_tab
            rs, ps, ri, pi = self._sides(r, p, xp) if sides is None else sides
            out = xp.where(rs, otab[ri, p], xp.where(ps, ~tab[pi, r] & (r != self.missing), out))
        return out

    def holds(self, r, p, neg, xp=np, tab=None, outside_tab=None):
        """Whether a predicate cell ``p`` (``neg``: "not in p") may hold for row cells ``r`` (broadcast)."""
        if xp is np and not np.any(neg):
            return self.overlap(r, p)
        sides = self._sides(r, p, xp) if self.sets.shape[0] else None
        return xp.where(neg, self.outside(r, p, xp, tab, outside_tab, sides), self.overlap(r, p, xp, tab, sides))

    def set_size(self, cells) -> np.ndarray:
        """Number of categories a cell allows."""
        cells = np.asarray(cells)
        size = np.ones(cells.shape, dtype=np.int64)
        if self.sets.shape[0]:
            big = cells >= self.n_cats
            size[big] = self.sets.sum(axis=1)[cells[big] - self.n_cats]
        return size

    def contains(self, cells, codes) -> np.ndarray:
        """Whether cell ``cells[i]`` allows category ``codes[i]``."""
        return self.overlap(cells, codes)


@dataclass
class Table:
    """One table's cells: ``lo`` / ``hi`` (float64) per numeric column, ``cell`` (int64) per categorical one."""

    n: int
    lo: dict = field(default_factory=dict)
    hi: dict = field(default_factory=dict)
    cell: dict = field(default_factory=dict)
    #: what is derived from the cells once and asked again (distinct rows, sorted indexes), by key
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def take(self, rows) -> "Table":
        return Table(len(rows), {c: v[rows] for c, v in self.lo.items()}, {c: v[rows] for c, v in self.hi.items()},
                     {c: v[rows] for c, v in self.cell.items()})


@dataclass
class Encoded:
    """The release and the original / control rows over the attacked columns."""

    columns: list
    release: Table
    original: Table
    control: Table | None

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


def _numeric_release(rel: pd.DataFrame, c: str) -> tuple[np.ndarray, np.ndarray]:
    if c not in rel.columns:  # minmax
        return float_values(rel[f"{c}_min"]), float_values(rel[f"{c}_max"])
    s = rel[c]
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        v = float_values(s)
        return v, v  # points: one array (the attacks read it as both ends, never write it)
    star = (s.astype(object) == "*").to_numpy()
    try:
        lo, hi = parse_numeric_cells(s.where(~star, None))
    except ValueError as exc:
        raise InputError(f"release: {exc}; a numeric column's cells are numbers, 'lo-hi', '[lo, hi]' or '*'") from None
    lo[star], hi[star] = -np.inf, np.inf
    return lo, hi


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def _categorical(name: str, rel: pd.Series, points: list, hierarchy) -> tuple[Column, np.ndarray, list]:
    """The column, the release's cell ids and each point table's category codes."""
    both = pd.concat([p.astype(object) for p in points], ignore_index=True)
    codes_all, cats = factorize(both, use_na_sentinel=False)  # pandas' codes, repeated objects hashed once
    index = {cell_key(v): i for i, v in enumerate(cats)}
    rcodes, rcells = factorize(rel.astype(object), use_na_sentinel=False)
    try:
        sets = category_sets(list(rcells), index, hierarchy_node_members(hierarchy, index), name, add_unknown=True)
    except ValueError as exc:
        raise InputError(f"release: {exc}") from None
    labels = [None] * len(index)
    for k, i in index.items():
        labels[i] = k
    n = len(labels)
    single = sets.sum(axis=1) == 1
    # a set cell of one category is that category's point cell; the others are numbered from n
    point_of = np.where(single, sets.argmax(axis=1), -1)
    multi = np.flatnonzero(~single)
    ids = point_of.copy()
    ids[multi] = n + np.arange(len(multi))
    col = Column(name, "categorical", labels=labels, missing=index.get(None, -1), sets=sets[multi])
    col.finish()
    out, start = [], 0
    for p in points:
        out.append(codes_all[start:start + len(p)].astype(np.int64))
        start += len(p)
    return col, ids[rcodes].astype(np.int64), out


def _check_columns(release, original, control, columns) -> None:
    for c in columns:
        if c not in original.columns:
            raise InputError(f"column '{shown(c)}' is not in the original table; attack columns must be in both tables")
        if control is not None and c not in control.columns:
            raise InputError(f"column '{shown(c)}' is not in the control table; it must have the original's columns")
        if c not in release.columns and not (f"{c}_min" in release.columns and f"{c}_max" in release.columns):
            raise InputError(f"column '{shown(c)}' is not in the release (nor its '{shown(c)}_min' / '_max' pair)")


def encode(release: pd.DataFrame, original: pd.DataFrame, control: pd.DataFrame | None, columns,
           hierarchies: dict | None = None) -> Encoded:
    """Encode ``columns`` of the three tables (the kind from the original's dtype)."""
    _check_columns(release, original, control, columns)
    hierarchies = hierarchies or {}
    rel_t, ori_t = Table(len(release)), Table(len(original))
    con_t = None if control is None else Table(len(control))
    cols = []
    for c in columns:  # a loop over columns
        points = [original[c]] + ([] if control is None else [control[c]])
        if _is_numeric(original[c]):
            lo, hi = _numeric_release(release, c)
            vals = [float_values(p) for p in points]
            finite = np.concatenate([v[np.isfinite(v)] for v in [lo, hi] + vals])
            scale = float(finite.max() - finite.min()) if finite.size else 1.0
            cols.append(Column(c, "numeric", scale=scale if scale > 0 else 1.0))
            rel_t.lo[c], rel_t.hi[c] = lo, hi
            ori_t.lo[c], ori_t.hi[c] = vals[0], vals[0]
            if con_t is not None:
                con_t.lo[c], con_t.hi[c] = vals[1], vals[1]
        else:
            rel = release[c] if c in release.columns else release[f"{c}_min"]
            col, rcells, codes = _categorical(c, rel, points, hierarchies.get(c))
            cols.append(col)
            rel_t.cell[c], ori_t.cell[c] = rcells, codes[0]
            if con_t is not None:
                con_t.cell[c] = codes[1]
    return Encoded(cols, rel_t, ori_t, con_t)


def unique_rows(t: Table, columns, like: Table | None = None) -> np.ndarray:
    """Positions of the first of each set of equal rows, in table order (anonymeter drops duplicates);
    computed once per table and column list, or taken from ``like`` when it holds the same cells (e.g. a
    release that is the original, unchanged)."""
    memo_key = ("unique_rows", tuple(c.name for c in columns))
    if memo_key not in t.memo:
        shared = like is not None and memo_key in like.memo and same_cells(columns, t, like)
        t.memo[memo_key] = like.memo[memo_key] if shared else _first_of_equal(t, columns)
    return t.memo[memo_key]


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8)


def same_cells(columns, t, u) -> bool:
    """Whether tables ``t`` and ``u`` hold bit for bit the same cells in ``columns``."""
    if t.n != u.n:
        return False
    for c in columns:  # a loop over columns
        pairs = [(t.cell[c.name], u.cell[c.name])] if c.kind != "numeric" else \
            [(t.lo[c.name], u.lo[c.name]), (t.hi[c.name], u.hi[c.name])]
        for x, y in pairs:  # at most two arrays per column
            if x is not y and (x.dtype != y.dtype or not np.array_equal(_bits(x), _bits(y))):
                return False
    return True


def _fields(t: Table, columns) -> list:
    """The rows' fields as float columns (a categorical cell id, a numeric cell's two ends; NaN as inf)."""
    out = []
    for c in columns:
        if c.name in t.cell:
            out.append(t.cell[c.name].astype(np.float64))
        elif t.lo[c.name] is t.hi[c.name]:  # points held once (raw values): one field, the same rows equal
            out.append(np.where(np.isnan(t.lo[c.name]), np.inf, t.lo[c.name]))
        else:
            out += [np.where(np.isnan(v), np.inf, v) for v in (t.lo[c.name], t.hi[c.name])]
    return out


def _first_of_equal(t: Table, columns) -> np.ndarray:
    """:func:`unique_rows` by one plain sort of a 64-bit hash per row (splitmix64 over the fields' bits); only
    the rows whose hash another row shares are ordered (stable) and compared field by field, and a collision
    between unequal rows falls back to sorting the rows themselves (:func:`unique_keys`)."""
    fields = _fields(t, columns)
    if not fields:
        return np.arange(min(t.n, 1))
    h = np.zeros(t.n, dtype=np.uint64)
    for f in fields:  # a loop over fields
        h = splitmix64(h ^ (f + 0.0).view(np.uint64))  # + 0.0: -0.0 as 0.0
    hs = np.sort(h)
    shared = np.unique(hs[1:][hs[1:] == hs[:-1]])  # hashes held by more than one row
    if not len(shared):
        return np.arange(t.n)
    pos = np.minimum(np.searchsorted(shared, h), len(shared) - 1)
    sub = np.flatnonzero(shared[pos] == h)  # only those rows are ordered
    order = sub[np.argsort(h[sub], kind="stable")]
    hs = h[order]
    tie = np.flatnonzero(hs[1:] == hs[:-1])
    a, b = order[tie], order[tie + 1]
    if not all(np.array_equal(f[a], f[b]) for f in fields):  # a collision: sort the rows
        return np.sort(unique_keys(np.column_stack(fields))[0])
    first = np.ones(t.n, dtype=bool)
    first[b] = False  # b follows a in the stable order: a later row of its hash
    return np.flatnonzero(first)


def unique_keys(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_index=True, return_counts=True)``'s index and counts (the distinct
    rows in lexicographic order, each one's first position and count; no NaN in ``key``), by a stable
    ``lexsort`` of the columns rather than a sort of whole rows."""
    if not len(key):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(key.T[::-1])
    same = np.ones(len(key), dtype=bool)  # as the previous row in that order
    for j in range(key.shape[1]):  # a loop over key columns
        s = key[order, j]
        same[1:] &= s[1:] == s[:-1]
    start = np.flatnonzero(~same | (np.arange(len(key)) == 0))
    return order[start], np.diff(np.append(start, len(key)))
