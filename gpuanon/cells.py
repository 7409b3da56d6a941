"""The published cell format: how a generalized value is written as text, and read back.

One module for the format, so the writer (``generalize``), the checker (``verify`` /
``gpuanon check``), the metrics and the evaluation read cells the same way.

* A categorical cell is one value or a set of values joined by ``|``. In EVERY cell (a single
  value too) a ``\\`` or ``|`` inside a value is escaped with a backslash, so the one value
  ``rent|lease`` is written ``rent\\|lease`` and never reads back as the set {rent, lease}.
  A missing value inside a set is ``NaN``.
* A numeric cell is a number, or an interval: ``lo-hi`` when ``lo >= 0`` (``20-30``), and
  ``[lo, hi]`` when the lower bound is negative (``[-93.2465, -93.2457]``), so a minus sign is
  never read as the separator. Numbers are written with the shortest text that reads back to the
  same float64 (integers without a decimal point). The legacy ``-5--3`` form is still read.

Examples
--------
>>> range_texts(np.array([20.0, -93.5, 4.0]), np.array([30.0, -93.25, 4.0]), integer=False).tolist()
['20.0-30.0', '[-93.5, -93.25]', '4.0']
>>> parse_range("[-93.5, -93.25]"), parse_range("20-30"), parse_range("-5--3")
((-93.5, -93.25), (20.0, 30.0), (-5.0, -3.0))
>>> set_text(["rent|lease"]), split_set_text("rent\\\\|lease")
('rent\\\\|lease', ['rent|lease'])
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

SET_SEPARATOR = "|"

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf"
_DASH_RANGE = re.compile(rf"^\s*({_NUM})\s*-\s*({_NUM})\s*$")
_BRACKET_RANGE = re.compile(rf"^\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]\s*$")


def is_missing(v) -> bool:
    """None, NaN, NA and NaT are missing."""
    if v is None or v is pd.NA:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def escape_value(v) -> str:
    """One value as it appears in a cell: ``\\`` and ``|`` escaped; missing is ``NaN``."""
    if is_missing(v):
        return "NaN"
    return str(v).replace("\\", "\\\\").replace(SET_SEPARATOR, "\\" + SET_SEPARATOR)


def cell_text(v) -> str:
    """Text of one value as sets write it (unescaped): missing (None, NaN, NA) is ``'NaN'``."""
    if is_missing(v):
        return "NaN"
    return str(v)


def needs_escape(v) -> bool:
    """Whether a single value's text differs from the value (it holds ``|`` or ``\\``)."""
    return isinstance(v, str) and ("\\" in v or SET_SEPARATOR in v)


def set_text(values) -> str:
    """The cell of a set of values (a single value too): escaped values joined by ``|``."""
    return SET_SEPARATOR.join(escape_value(v) for v in values)


def split_set_text(text: str) -> list[str]:
    """Values of a set cell: split on unescaped ``|``, then unescape ``\\|`` and ``\\\\``."""
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
    return [re.sub(r"\\(.)", r"\1", v) for v in vals]


def number_texts(x: np.ndarray, integer: bool) -> np.ndarray:
    """Shortest round-trip text of each number (``None`` where NaN), integers without a point."""
    x = np.asarray(x, dtype=np.float64) + 0.0  # no "-0.0"
    out = np.empty(x.shape[0], dtype=object)
    ok = ~np.isnan(x)
    if integer:
        out[ok] = x[ok].astype(np.int64).astype(str)
    else:
        out[ok] = x[ok].astype(str)  # NumPy prints the shortest text that reads back exactly
    out[~ok] = None
    return out


def range_texts(lo: np.ndarray, hi: np.ndarray, integer: bool) -> np.ndarray:
    """Cell text of intervals ``[lo, hi]``, one per entry (a class): see the module's rules."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    los, his = number_texts(lo, integer), number_texts(hi, integer)
    out = los.copy()
    wide = ~np.isnan(lo) & (lo != hi)
    if wide.any():
        a = los[wide].astype(str)
        b = his[wide].astype(str)
        neg = lo[wide] < 0
        dash = np.char.add(np.char.add(a, "-"), b)
        bracket = np.char.add(np.char.add(np.char.add(np.char.add("[", a), ", "), b), "]")
        out[wide] = np.where(neg, bracket, dash).astype(object)
    return out


def parse_range(text: str) -> tuple[float, float]:
    """``(lo, hi)`` of one numeric cell: a number, ``lo-hi`` or ``[lo, hi]``; ValueError otherwise."""
    t = str(text).strip()
    m = _BRACKET_RANGE.match(t) or _DASH_RANGE.match(t)
    if m:
        return float(m.group(1)), float(m.group(2))
    v = float(t)
    return v, v


def parse_numeric_cells(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` of a column of numeric output cells (numbers, ``lo-hi`` or ``[lo, hi]`` text)."""
    if pd.api.types.is_numeric_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
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
    dtype when the column has no missing value, else float64 (numbers read from text too)."""
    try:
        dt = np.dtype(getattr(source_dtype, "numpy_dtype", source_dtype))
    except TypeError:  # a pandas dtype with no NumPy equivalent (text, ...)
        return np.float64
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
