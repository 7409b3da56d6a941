"""Whether a table given as ``--original`` could be the table an anonymized one was made from
(``gpuanon check --original``, ``gpuanon risk --original``).

An anonymized table has at most its original's rows, holds the original's QI columns (a ``minmax``
output the ``<col>_min`` / ``<col>_max`` pair), and every published class -- a distinct tuple of QI
cells -- holds at least one original row: a row whose every QI value lies inside the class's cell
(a number or date inside ``lo-hi`` / ``[lo, hi]`` / ``lo..hi`` or equal to the single value, a
category one of the set's values, a missing value published missing). What cannot be read against
the original's values matches any value: ``*`` (suppressed), a label naming no original category
(a hierarchy's node), and the class means of a ``mean`` output (single numbers that are not original values).

The test is whole-array: the classes (in chunks) against the original's distinct QI tuples, one
boolean matrix per column. Above :data:`PAIR_BUDGET` class-tuple pairs, each column is tested on
its own (every class's cell holds one of the original's values of that column), which is cheaper
and still refuses a table of other values.

>>> orig = pd.DataFrame({"age": [21, 25, 33, 38], "sex": ["f", "m", "f", "m"]})
>>> out = pd.DataFrame({"age": ["20-29", "20-29", "30-39", "30-39"], "sex": ["f|m"] * 4})
>>> origin_problem(out, orig, ["age", "sex"]) is None
True
>>> origin_problem(out.assign(age=["20-29", "20-29", "34-39", "34-39"], sex="f"), orig, ["age", "sex"])
'1 of the 2 published classes hold no row of it (e.g. age=34-39, sex=f)'
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..table.cells import cell_key, parse_range, resolve_qi_columns, split_set_text
from ..table.exact import float_values, is_decimal, is_time
from .verify import class_ids

PAIR_BUDGET = 1 << 26
"""Most (class, distinct original tuple) pairs tested jointly; above it each column is tested alone."""

_CHUNK = 1 << 24  # booleans of one (classes x tuples) block


def _numeric(o: pd.Series) -> bool:
    """Numbers, dates and exact decimals (compared as doubles: rounding is monotone, so a value inside
    its cell stays inside)."""
    return is_time(o) or is_decimal(o) or (pd.api.types.is_numeric_dtype(o.dtype) and not pd.api.types.is_bool_dtype(o.dtype))


def _intervals(cells: pd.Series):
    """``(lo, hi, wild)`` floats per cell (a time in epoch nanoseconds; NaN: a missing cell); ``wild``:
    a cell that is no number or interval (``*``, a label), matching any value."""
    if pd.api.types.is_numeric_dtype(cells.dtype) or is_time(cells):
        v = float_values(cells)
        return v, v.copy(), np.zeros(len(v), dtype=bool)
    codes, uniq = pd.factorize(cells, use_na_sentinel=True)
    lo_u, hi_u = np.full(len(uniq) + 1, np.nan), np.full(len(uniq) + 1, np.nan)
    wild_u = np.zeros(len(uniq) + 1, dtype=bool)
    for i, text in enumerate(uniq):  # a loop over distinct cells, not rows
        try:
            lo_u[i], hi_u[i] = parse_range(text)
        except (ValueError, TypeError):
            wild_u[i] = True
    return lo_u[codes], hi_u[codes], wild_u[codes]


def _numeric_test(o: pd.Series, out: pd.DataFrame, c: str, first: np.ndarray):
    """``(original codes, test, alone)`` of a numeric QI: ``test(classes, codes)`` is the boolean matrix
    'class cell holds the original value'; ``alone`` whether each class's cell holds any original value
    (by binary search in the sorted values)."""
    ov = float_values(o)
    vals, codes = np.unique(ov, return_inverse=True)  # a missing value: one NaN, last
    if c in out.columns:
        lo, hi, wild = _intervals(out[c].iloc[first])
    else:
        lo, hi = float_values(out[f"{c}_min"].iloc[first]), float_values(out[f"{c}_max"].iloc[first])
        wild = np.zeros(len(first), dtype=bool)
    single = (lo == hi) | np.isnan(lo) | wild
    known = np.isin(lo, vals[~np.isnan(vals)])
    if c in out.columns and single.all() and not (known | np.isnan(lo) | wild).all():
        wild = np.ones(len(first), dtype=bool)  # class means: single numbers that are not original values

    def test(cls, v):
        x = vals[v][None, :]
        lo_, hi_, w = lo[cls][:, None], hi[cls][:, None], wild[cls][:, None]
        return w | ((lo_ <= x) & (x <= hi_)) | (np.isnan(lo_) & np.isnan(x))

    known_vals = vals[~np.isnan(vals)]
    alone = (wild | (np.searchsorted(known_vals, hi, side="right") > np.searchsorted(known_vals, lo, side="left"))
             | (np.isnan(lo) & bool(np.isnan(vals).any())))
    return codes.reshape(-1), test, alone


def _categorical_test(o: pd.Series, out: pd.DataFrame, c: str, first: np.ndarray):
    """``(original codes, test, alone)`` of a categorical QI: a class cell is a value or a set of values;
    ``*`` or a label naming no original value matches any value."""
    codes, cats = pd.factorize(o, use_na_sentinel=False)
    index = {cell_key(v): i for i, v in enumerate(cats)}
    cell_inv, cells = pd.factorize(out[c].iloc[first], use_na_sentinel=False)
    sets = np.zeros((len(cells), len(cats)), dtype=bool)
    for i, cell in enumerate(cells):  # a loop over distinct published cells
        key = cell_key(cell)
        members = [key] if key in index or key is None else split_set_text(key)
        if key is None and None not in index:
            continue  # a missing cell, and no missing value in the original: no row
        if key == "*" or not any(m in index for m in members):
            sets[i, :] = True  # suppressed, or a hierarchy's label (no original value in it): any value
        else:  # a set of values (a value the original lacks holds none of its rows)
            sets[i, [index[m] for m in members if m in index]] = True
    cell_inv = np.asarray(cell_inv, dtype=np.int64)
    return np.asarray(codes, dtype=np.int64), lambda cls, v: sets[cell_inv[cls]][:, v], sets.any(axis=1)[cell_inv]


def _blocks(n_cls: int, m: int):
    step = max(1, _CHUNK // max(m, 1))
    return [np.arange(a, min(a + step, n_cls)) for a in range(0, n_cls, step)]


def origin_problem(out: pd.DataFrame, original: pd.DataFrame, quasi_identifiers) -> str | None:
    """Why ``original`` cannot be the table ``out`` was made from (rows, columns, or classes that hold
    none of its rows), or None. ``quasi_identifiers``: the QI names as in the original."""
    if len(out) > len(original):
        return (f"it has {len(original):,} rows, fewer than the {len(out):,} of the table (an anonymized table "
                f"has at most its original's rows)")
    absent = [c for c in quasi_identifiers if c not in original.columns]
    if absent:
        return f"it has no column '{absent[0]}' (a quasi-identifier)"
    qcols = resolve_qi_columns(quasi_identifiers, out.columns)
    gid, n_cls = class_ids(out, qcols)
    if n_cls == 0:
        return None
    first = np.full(n_cls, len(gid), dtype=np.int64)
    np.minimum.at(first, gid, np.arange(len(gid)))
    tests = [(_numeric_test if _numeric(original[c]) else _categorical_test)(original[c], out, c, first)
             for c in quasi_identifiers]  # a loop over columns
    codes = np.stack([t[0] for t in tests], axis=1) if len(original) else np.zeros((0, len(tests)), np.int64)
    tuples = np.unique(codes, axis=0)
    if n_cls * len(tuples) <= PAIR_BUDGET:
        held = np.zeros(n_cls, dtype=bool)
        for cls in _blocks(n_cls, len(tuples)):  # blocks of classes, each against every distinct tuple
            m = np.ones((len(cls), len(tuples)), dtype=bool)
            for j, (_, test, _) in enumerate(tests):
                m &= test(cls, tuples[:, j])
            held[cls] = m.any(axis=1)
    else:  # each column alone: every class's cell holds one of the column's original values
        held = np.logical_and.reduce([t[2] for t in tests])
    if held.all():
        return None
    bad = int(np.flatnonzero(~held)[0])
    row = out.iloc[int(first[bad])]
    shown = ", ".join(f"{c}={row[c]}" for c in qcols[:4]) + (", ..." if len(qcols) > 4 else "")
    return (f"{int((~held).sum()):,} of the {n_cls:,} published classes hold no row of it "
            f"(e.g. {shown})")
