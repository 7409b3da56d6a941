"""The published cell format: how a generalized value is written as text, and read back.

One module for the format, so the writer (``generalize``), the checker (``verify`` /
``gpuanon check``), the metrics and the evaluation read cells the same way.

* A categorical cell is one value or a set of values joined by ``|``. In EVERY cell (a single
  value too) a ``\\`` or ``|`` inside a value is escaped with a backslash, so the one value
  ``rent|lease`` is written ``rent\\|lease`` and never reads back as the set {rent, lease}.
  A missing value is shown one way: ALONE, the cell is empty (missing); INSIDE A SET it is the
  marker ``\\N`` (:data:`MISSING_IN_SET`: ``\\N|Unknown``). A backslash inside a value is always
  written ``\\\\``, so no value's text is ``\\N``: a category literally named ``NaN`` stays ``NaN``
  (``NaN|Unknown``), and :func:`split_set_text` reads the marker back as ``None``.
* A numeric cell is a number, or an interval: ``lo-hi`` when ``lo >= 0`` (``20-30``), and
  ``[lo, hi]`` when the lower bound is negative (``[-93.2465, -93.2457]``), so a minus sign is
  never read as the separator. Numbers are written with the shortest text that reads back to the
  same float64 (integers without a decimal point). The legacy ``-5--3`` form is still read.
* Integers beyond 2**53 and dates / times are written from their exact values (:mod:`gpuanon.table.exact`):
  integer text in the same forms, and date ranges ``2020-01-01..2020-03-31`` (ISO date-times when a
  value is not at midnight); :func:`parse_range` reads a date cell as epoch nanoseconds.

Examples
--------
>>> range_texts(np.array([20.0, -93.5, 4.0]), np.array([30.0, -93.25, 4.0]), integer=False).tolist()
['20.0-30.0', '[-93.5, -93.25]', '4.0']
>>> parse_range("[-93.5, -93.25]"), parse_range("20-30"), parse_range("-5--3")
((-93.5, -93.25), (20.0, 30.0), (-5.0, -3.0))
>>> set_text(["rent|lease"]), split_set_text("rent\\\\|lease")
('rent\\\\|lease', ['rent|lease'])
>>> set_text([None, "NaN"]), split_set_text("\\\\N|NaN")
('\\\\N|NaN', [None, 'NaN'])
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .values import is_na
from .exact import float_values, is_time, looks_like_time, parse_exact, time_ns

SET_SEPARATOR = "|"

MISSING_IN_SET = "\\N"
"""A missing value inside a set cell (alone, a missing value is an empty cell). An escape sequence
(a backslash then ``N``) that no escaped value can be, since a value's backslash is written ``\\\\``."""

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf"
_DASH_RANGE = re.compile(rf"^\s*({_NUM})\s*-\s*({_NUM})\s*$")
_BRACKET_RANGE = re.compile(rf"^\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]\s*$")


def escape_value(v) -> str:
    """One value as it appears in a cell: ``\\`` and ``|`` escaped; missing is :data:`MISSING_IN_SET`."""
    if is_na(v):
        return MISSING_IN_SET
    return str(v).replace("\\", "\\\\").replace(SET_SEPARATOR, "\\" + SET_SEPARATOR)


def cell_text(v) -> str:
    """Display text of one value (unescaped): missing (None, NaN, NA) is ``'NaN'``; a key for tables
    that name a missing category ``NaN`` (a set cell writes it :data:`MISSING_IN_SET`)."""
    if is_na(v):
        return "NaN"
    return str(v)


def needs_escape(v) -> bool:
    """Whether a single value's text differs from the value (it holds ``|`` or ``\\``)."""
    return isinstance(v, str) and ("\\" in v or SET_SEPARATOR in v)


def set_text(values) -> str:
    """The cell of a set of values (a single value too): escaped values joined by ``|``."""
    return SET_SEPARATOR.join(escape_value(v) for v in values)


def cell_key(v):
    """Key of a value or of a parsed set member: ``None`` for a missing one, else its text (``str``).
    Unlike :func:`cell_text`, a missing value and a category named ``NaN`` get different keys."""
    return None if is_na(v) else str(v)


def split_set_text(text: str) -> list:
    """Values of a set cell: split on unescaped ``|``, then unescape ``\\|`` and ``\\\\``; the marker
    :data:`MISSING_IN_SET` is read back as ``None`` (a missing value)."""
    parts = re.split(r"(?<!\\)((?:\\\\)*)\|", text)
    # re.split keeps the captured runs of escaped backslashes: glue them back to the value before
    vals, cur = [], ""
    for i, p in enumerate(parts):
        if i % 2 == 0:
            cur += p
            vals.append(cur)
            cur = ""
        else:
            vals[-1] += p
    return [None if v == MISSING_IN_SET else re.sub(r"\\(.)", r"\1", v) for v in vals]


#: Numbers whose shortest text Arrow writes in the same fixed notation as NumPy / Python (``repr``):
#: outside it (and for inf), NumPy writes the text. Arrow drops the ``.0`` of an integral float,
#: which is put back.
_ARROW_FIXED = (1e-4, 1e9)
_ARROW_OK: list = []  # [bool] once probed: whether this Arrow writes floats as expected


def _arrow_float_texts(x: np.ndarray, nan: np.ndarray):
    """Arrow strings of float64 ``x`` (null where ``nan``) in NumPy's ``str`` format."""
    txt = pc.cast(pa.array(x, mask=nan), pa.string())
    a = np.abs(x)
    fixed = ((a >= _ARROW_FIXED[0]) & (a < _ARROW_FIXED[1])) | (x == 0)
    fixed_a = pa.array(fixed)
    integral = pc.and_(fixed_a, pc.invert(pc.match_substring(txt, ".")))
    txt = pc.if_else(integral, pc.binary_join_element_wise(txt, pa.scalar(".0"), ""), txt)
    # NumPy writes what Arrow would write otherwise (and anything unexpected in the fixed range)
    other = ~fixed & ~nan | (fixed & np.asarray(pc.fill_null(pc.match_substring(txt, "e"), False)))
    if other.any():
        rep = pa.array(x[other].astype(str), pa.string())
        rep = rep.combine_chunks() if isinstance(rep, pa.ChunkedArray) else rep  # a long one comes in chunks
        txt = pc.replace_with_mask(txt, pa.array(other), rep)
    return txt


def _arrow_writes_like_numpy() -> bool:
    """Whether the installed Arrow's float texts, as fixed up here, are NumPy's on probe values."""
    if not _ARROW_OK:
        try:
            probe = np.array([0.1, 0.5, 1.0, 20.0, -3.0, 1 / 3, 2 / 3, 123.456, 1e-4, 1.2345678901234567e-4,
                              999999999.5, 1.5e8, 0.0, 5e-5, 1e9, 1e16, 12345678.9, 0.30000000000000004, -7e-7,
                              np.inf, -np.inf, 2.5e-3, 1e300, 5e-324, 4.35, 100.0, 1e-10])
            got = _arrow_float_texts(probe, np.zeros(probe.shape[0], dtype=bool)).to_pylist()
            _ARROW_OK.append(got == probe.astype(str).tolist())
        except Exception:  # noqa: BLE001 - an Arrow without these functions: NumPy writes the texts
            _ARROW_OK.append(False)
    return _ARROW_OK[0]


def number_text_array(x: np.ndarray, integer: bool):
    """Shortest round-trip text of each number as an Arrow string array (null where NaN), integers
    without a point: the text of :func:`number_texts`, written by Arrow's compute functions."""
    x = np.asarray(x, dtype=np.float64) + 0.0  # no "-0.0"
    nan = np.isnan(x)
    if integer:
        return pa.array(np.where(nan, 0.0, x).astype(np.int64), mask=nan).cast(pa.string())
    if _arrow_writes_like_numpy():
        return _arrow_float_texts(x, nan)
    out = np.empty(x.shape[0], dtype=object)
    out[~nan] = x[~nan].astype(str)  # NumPy prints the shortest text that reads back exactly
    return pa.array(out, pa.string())


def number_texts(x: np.ndarray, integer: bool) -> np.ndarray:
    """Shortest round-trip text of each number (``None`` where NaN), integers without a point."""
    return number_text_array(x, integer).to_numpy(zero_copy_only=False)


def range_text_array(lo: np.ndarray, hi: np.ndarray, integer: bool):
    """Cell text of intervals ``[lo, hi]`` as an Arrow string array (null where ``lo`` is NaN),
    built with Arrow's compute functions over all entries at once."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    los, his = number_text_array(lo, integer), number_text_array(hi, integer)
    wide = ~np.isnan(lo) & (lo != hi)
    if not wide.any():
        return los
    b = pc.fill_null(his, "None")
    dash = pc.binary_join_element_wise(los, b, "-")
    bracket = pc.binary_join_element_wise(pa.scalar("["), los, pa.scalar(", "), b, pa.scalar("]"), "")
    return pc.if_else(pa.array(wide), pc.if_else(pa.array(lo < 0), bracket, dash), los)


def range_texts(lo: np.ndarray, hi: np.ndarray, integer: bool) -> np.ndarray:
    """Cell text of intervals ``[lo, hi]``, one per entry (a class): see the module's rules."""
    return range_text_array(lo, hi, integer).to_numpy(zero_copy_only=False)


def parse_range(text: str) -> tuple[float, float]:
    """``(lo, hi)`` of one numeric cell: a number, ``lo-hi`` or ``[lo, hi]``, or a date / time
    (range ``lo..hi``, as epoch nanoseconds); ValueError otherwise."""
    t = str(text).strip()
    if looks_like_time(t):  # a date or date-time (range): epoch nanoseconds
        a, b = parse_exact(t, "time")
        return float(time_ns(a)), float(time_ns(b))
    m = _BRACKET_RANGE.match(t) or _DASH_RANGE.match(t)
    if m:
        return float(m.group(1)), float(m.group(2))
    v = float(t)
    return v, v


def parse_numeric_cells(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` of a column of numeric output cells (numbers, ``lo-hi`` or ``[lo, hi]`` text)."""
    if pd.api.types.is_numeric_dtype(s.dtype) or is_time(s):
        v = float_values(s)
        return v, v.copy()
    codes, uniq = pd.factorize(s, use_na_sentinel=True)
    lo_u = np.full(len(uniq), np.nan)
    hi_u = np.full(len(uniq), np.nan)
    for i, text in enumerate(uniq):  # a loop over distinct cells, not rows
        try:
            lo_u[i], hi_u[i] = parse_range(text)
        except ValueError:
            raise ValueError(f"cell {text!r} of column '{s.name}' is neither a number nor a 'lo-hi' or "
                             f"'[lo, hi]' range") from None
    lo = np.where(codes >= 0, lo_u[np.maximum(codes, 0)], np.nan)
    hi = np.where(codes >= 0, hi_u[np.maximum(codes, 0)], np.nan)
    return lo, hi


def output_qi_columns(qi_names, fmt: str, kinds: dict) -> list[str]:
    """Names of the QI columns in an output written with ``fmt``."""
    cols = []
    for c in qi_names:
        if fmt == "minmax" and kinds.get(c) == "numeric":
            cols += [c + "_min", c + "_max"]
        else:
            cols.append(c)
    return cols


def resolve_qi_columns(qi_names, columns) -> list[str]:
    """Output columns of QIs in any output table: the column itself, or its ``_min`` / ``_max`` pair.

    Raises ``KeyError`` with the first QI that has neither.
    """
    cols = []
    for c in qi_names:
        if c in columns:
            cols.append(c)
        elif f"{c}_min" in columns and f"{c}_max" in columns:
            cols += [f"{c}_min", f"{c}_max"]
        else:
            raise KeyError(c)
    return cols


def minmax_dtype(column, source_dtype):
    """The dtype of a numeric QI's ``_min`` / ``_max`` columns: the input's integer or float32
    dtype when the column has no missing value, pandas' nullable ``Int64`` / ``UInt64`` for an
    integer column with missing values, else float64 (numbers read from text too)."""
    try:
        dt = np.dtype(getattr(source_dtype, "numpy_dtype", source_dtype))
    except TypeError:  # a pandas dtype with no NumPy equivalent (text, ...)
        return np.float64
    if column.n_missing and column.integer and dt.kind in "iu":
        return pd.UInt64Dtype() if dt.kind == "u" else pd.Int64Dtype()
    if column.n_missing == 0 and dt.kind in "iuf" and (column.integer or dt == np.float32):
        return dt
    return np.float64


def in_input_order(columns, generalized: dict, quasi_identifiers, dropped, passthrough) -> dict:
    """The output's columns in the input's order: each QI's generalized column (or its ``_min`` /
    ``_max`` pair) at its place, ``dropped`` columns left out, any other through ``passthrough(name)``."""
    qi = set(quasi_identifiers)
    out: dict = {}
    for c in columns:
        if c in dropped:
            continue
        if c in generalized:
            out[c] = generalized[c]
        elif c in qi and c + "_min" in generalized:
            out[c + "_min"], out[c + "_max"] = generalized[c + "_min"], generalized[c + "_max"]
        else:
            out[c] = passthrough(c)
    return out


def _leaf_key(v, index: dict):
    """The ``index`` key of a hierarchy leaf: a hierarchy names the missing value's leaf ``NaN``."""
    key = cell_key(v)
    return None if (key == cell_text(None) and key not in index) or is_na(v) else key


def hierarchy_node_members(hierarchy, index: dict) -> dict:
    """``{node label: category indices under it}`` for a hierarchy's inner nodes (empty without one);
    ``index`` maps a category's :func:`cell_key` to its index."""
    if hierarchy is None:
        return {}
    leaf_idx = np.array([index.get(_leaf_key(v, index), -1) for v in hierarchy.leaves], dtype=np.int64)
    out = {}
    for node in range(hierarchy.n_leaves, hierarchy.n_nodes):  # a loop over hierarchy nodes
        under = leaf_idx[(hierarchy.levels == node).any(axis=1)]
        out.setdefault(str(hierarchy.labels[node]), under[under >= 0])
    return out


def category_sets(cells, index: dict, nodes: dict, column, add_unknown: bool = False) -> np.ndarray:
    """The set of categories each categorical cell allows, as a bool array ``(len(cells), len(index))``:
    a value, a ``|`` set (``\\N`` the missing value), ``*`` (every category) or a hierarchy label
    (``nodes``: :func:`hierarchy_node_members`). ``index`` maps :func:`cell_key` to a category's index;
    a member not in it raises ValueError naming ``column``, or with ``add_unknown`` is added to
    ``index`` (the array widens). One pass per distinct cell, not per row."""
    members = []
    for cell in cells:  # a loop over distinct cells
        t = cell_key(cell)
        if t is None and None not in index and not add_unknown:
            raise ValueError(f"column '{column}' has a missing cell but the original table has no missing "
                             "value there")
        if t in index or (t is None and add_unknown):
            members.append([t])
        elif t in nodes:
            members.append(nodes[t])
        elif t == "*":
            members.append(None)
        else:
            parts = split_set_text(t)
            for p in parts:
                if p not in index and not add_unknown:
                    raise ValueError(f"value {p!r} in column '{column}' is not in the original table (nor a "
                                     f"hierarchy label: pass the hierarchy used)")
            members.append(parts)
    if add_unknown:
        for m in members:
            for p in m if isinstance(m, list) else ():
                index.setdefault(p, len(index))
    sets = np.zeros((len(members), len(index)), dtype=bool)
    for i, m in enumerate(members):  # distinct cells
        if m is None:
            sets[i, :] = True
        elif isinstance(m, list):
            sets[i, [index[p] for p in m]] = True
        else:  # the indices under a hierarchy node
            sets[i, m] = True
    return sets
