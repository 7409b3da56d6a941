"""CSV columns read as text, then typed by explicit rules, in one place (SPEC section 1: values as read).

Every cell is read as the text it holds (pyarrow's CSV reader, every column a string); only empty
cells are missing unless the caller names more (``na_values``). Then each column is typed:

* a pass-through column (``as_read``) stays the text it was read as, character for character;
* a column declared categorical stays text, as read (leading and trailing blanks kept: `` female`` is
  not ``female``; a cell of blanks only is missing);
* a column forced to dates (``dates``), or whose every non-empty cell is an ISO date or date-time
  (``YYYY-MM-DD``, ``YYYY-MM-DD[T ]HH:MM[:SS[.f]]``, optional ``Z`` / ``+HH:MM`` on all of them), becomes
  dates (Arrow ``date32``, Python dates in pandas, any year 0001-9999) when every cell is a day, else
  ``datetime64`` (UTC when the cells carry a zone; nanoseconds, or microseconds when a year lies
  outside 1677-2262);
* a column is numeric only when every non-empty cell is a number (``12``, ``-1.50``, ``1e3``): whole
  numbers as int64 (uint64 above int64's range, exact decimals beyond 64 bits; beside missing cells pandas' nullable integers for a
  quasi-identifier or a column declared numeric, and for values beyond a double's exact range, else
  float64), others float64, parsed exactly; a column with a cell whose significant digits a double
  does not give back (``12345678901234567.5``) as exact decimals (Python ``Decimal``, the most places
  any cell has); Numbers
  with leading zeros (``00501``, ``0012``; not ``0`` nor ``0.5``) keep the column as text unless it is
  declared numeric;
* ``True`` / ``False`` columns (exactly these spellings) without missing cells are booleans; ``true`` /
  ``false``, ``TRUE`` / ``FALSE`` and the like stay text, published as written;
* any other column is text. A checked column (a quasi-identifier or the sensitive attribute) that
  holds mostly numbers and some text is an error naming the cells and the fixes; so is a column
  declared numeric or dates whose cells do not parse.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError

__all__ = ["ColumnTypes", "type_columns"]

_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_NUMBER_RE = re.compile(_NUMBER)
_INT_RE = re.compile(r"^[+-]?\d+$")
_LEADING_ZERO = r"^[+-]?0\d"
_DATE = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$"
_ZONED = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$"
_DAY = r"^\d{4}-\d{2}-\d{2}$"
_NS_FIRST, _NS_LAST = "1677-09-22", "2262-04-10"  # whole days inside datetime64[ns]'s range
_BOOL = ("True", "False")  # the spellings read as booleans; ``true`` / ``FALSE`` stay text as written
_EXACT = 2 ** 53


@dataclass
class ColumnTypes:
    """What the caller knows of the columns: declared kinds, the checked columns with their role (for the
    message), and the pass-through columns kept as read: those named in ``as_read``, and with
    ``others_as_read`` every column neither checked, declared, nor in ``used`` (the target, columns an
    expression reads)."""

    numeric: set = field(default_factory=set)
    categorical: set = field(default_factory=set)
    dates: set = field(default_factory=set)
    checked: dict = field(default_factory=dict)
    as_read: set = field(default_factory=set)
    others_as_read: bool = False
    used: set = field(default_factory=set)
    na_values: tuple = ()

    def keeps_text(self, name: str) -> bool:
        """Whether column ``name`` passes through as the text it was read as."""
        if name in self.as_read:
            return True
        return self.others_as_read and not any(name in s for s in (self.checked, self.used, self.numeric,
                                                                   self.categorical, self.dates))


def _count(mask) -> int:
    return int(pc.sum(mask).as_py() or 0)


def _all(mask) -> bool:
    return bool(pc.all(mask).as_py() is not False)


def _offenders(valid, ok, name: str) -> str:
    """``'thirty', '45 years' (3 cells)``: a few of the cells that did not parse, and their count."""
    bad = pc.filter(valid, pc.invert(ok))
    shown = pc.unique(bad).to_pylist()[:4]
    return f"{', '.join(repr(v) for v in shown)} ({len(bad):,} cell{'s' if len(bad) != 1 else ''})"


def _as_floats(col):
    """The trimmed text column ``col`` as float64 when every non-missing cell is a finite number, else None
    (Arrow's parser: the double nearest to the text; ``inf`` and ``nan`` are text here)."""
    try:
        f = pc.cast(col, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return f if _all(pc.is_finite(f)) else None


def _numbers(col, floats, keep_ints: bool = False):
    """Whole numbers as int64 (uint64 above int64's range); with missing cells the floats when every
    value fits a double, unless ``keep_ints`` (a quasi-identifier); None when no cast holds them (beyond
    64 bits, or a later cell that is no whole number)."""
    texts = [col]
    if pc.any(pc.starts_with(col, "+")).as_py():
        texts.append(pc.replace_substring_regex(col, r"^\+", ""))
    for text in texts:
        for t in (pa.int64(), pa.uint64()):
            try:
                ints = pc.cast(text, t)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # not whole numbers, or out of range
                continue
            if ints.null_count == 0 or keep_ints:
                return ints  # a quasi-identifier: pandas' nullable integers beside missing cells
            lo, hi = pc.min(ints).as_py(), pc.max(ints).as_py()
            if lo is None or (-_EXACT <= lo and hi <= _EXACT):
                return floats  # NaN for the missing cells; every value exact
            return ints  # pandas' nullable integers keep the values exact beside the missing cells
    return None


def _decimals(col, valid):
    """The column as Arrow decimals (every value exact, at the most places any cell has) when a cell
    has more significant digits than a double gives back (``12345678901234567.5``), else None."""
    digits = pc.replace_substring_regex(valid, r"[^0-9]", "")
    digits = pc.utf8_trim(digits, "0")
    long = pc.filter(valid, pc.greater(pc.utf8_length(digits), 15))
    if len(long) == 0 or pc.any(pc.match_substring_regex(valid, "[eE]")).as_py():
        return None
    lossy = any(decimal.Decimal(repr(float(t))) != decimal.Decimal(t)  # a loop over the long distinct cells
                for t in pc.unique(long).to_pylist())
    if not lossy:
        return None
    places = pc.max(pc.utf8_length(pc.replace_substring_regex(valid, r"^[^.]*\.?", ""))).as_py() or 0
    try:
        return pc.cast(col, pa.decimal128(38, places))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # beyond 38 digits: the doubles
        return None


def _in_ns_range(valid) -> bool:
    """Whether every ISO date / date-time text lies inside nanosecond timestamps' years (whole days
    from 1677-09-22 to 2262-04-10; the text compares as the date does, zones aside)."""
    lo, hi = pc.min_max(valid).values()
    return _NS_FIRST <= lo.as_py()[:10] and hi.as_py()[:10] <= _NS_LAST


def _datetimes(name: str, valid, col, forced: bool):
    """ISO dates / date-times as a timestamp column, or None (``forced``: an error) when they are not."""
    naive, zoned = pc.match_substring_regex(valid, _DATE), pc.match_substring_regex(valid, _ZONED)
    kind = pa.timestamp("ns") if _all(naive) else pa.timestamp("ns", "UTC") if _all(zoned) else None
    if kind is not None and kind.tz is None and _all(pc.match_substring_regex(valid, _DAY)):
        kind = pa.date32()  # dates: days, any year 0001-9999 (pandas holds Python dates)
    elif kind is not None and not _in_ns_range(valid):  # years beyond 1677-2262: microseconds
        kind = pa.timestamp("us", kind.tz)
    why = None
    if kind is None:
        why = f"cells that are not ISO dates {_offenders(valid, pc.or_(naive, zoned), name)}"
        if _count(naive) and _count(zoned):
            why = "dates with and without a time zone mixed; give every cell a zone or none"
    else:
        try:
            return pc.cast(col, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            why = f"dates out of range ({' '.join(str(exc).split())[:120]})"
    if forced:
        raise InputError(f"--dates {name}: column '{name}' has {why}; write them as YYYY-MM-DD or "
                         f"YYYY-MM-DDTHH:MM:SS, or leave {name} out of --dates")
    return None


def _type_one(name: str, raw, types: ColumnTypes):
    if types.keeps_text(name):
        return raw
    col = pc.utf8_ltrim(raw, " ")  # leading spaces are read past in numbers, dates and NA cells
    drop = pc.equal(col, "")
    if types.na_values:
        drop = pc.or_(drop, pc.is_in(col, pa.array(list(types.na_values), pa.string())))
    dropped = pc.any(drop).as_py()
    if dropped:  # if_else copies the text: only where a cell is dropped
        col = pc.if_else(drop, pa.scalar(None, pa.string()), col)

    def text():  # a text column keeps its cells as read, leading and trailing blanks too
        return pc.if_else(drop, pa.scalar(None, pa.string()), raw) if dropped else raw

    if name in types.categorical:
        return text()
    trimmed = pc.utf8_rtrim_whitespace(col)
    valid = trimmed.drop_null()
    if len(valid) == 0:
        return col if name in types.dates else pc.cast(col, pa.float64())  # an all-empty column: NaN
    first = valid[0].as_py()
    if name in types.dates or (first[:1].isdigit() and len(first) >= 10 and first[4:5] == "-"):
        when = _datetimes(name, valid, trimmed, name in types.dates)
        if when is not None:
            return when
    head = valid.slice(0, 64).to_pylist()  # a text cell among the first ones: no whole-column cast
    floats = _as_floats(trimmed) if all(_NUMBER_RE.match(v) for v in head) else None
    if floats is not None:
        if name in types.numeric or not pc.any(pc.match_substring_regex(valid, _LEADING_ZERO)).as_py():
            keep = name in types.numeric or types.checked.get(name) == "quasi-identifier"
            ints = _numbers(trimmed, floats, keep) if all(_INT_RE.match(v) for v in head) else None
            if ints is not None:
                return ints
            dec = _decimals(trimmed, valid)  # whole numbers beyond 64 bits too: exact, not rounded doubles
            return floats if dec is None else dec
        return text()  # leading zeros: codes, not quantities
    if name not in types.numeric and name not in types.checked:
        return _bools(text())
    ok = pc.match_substring_regex(valid, _NUMBER)
    n_num = _count(ok)
    if n_num == len(valid):  # numbers beyond a double's range (1e999)
        return pc.cast(trimmed, pa.float64())
    if name in types.numeric:
        raise InputError(f"--numeric {name}: column '{name}' is declared numeric but has cells that are not "
                         f"numbers: {_offenders(valid, ok, name)}; fix those cells, or leave it out of --numeric "
                         f"(as text: --categorical {name})")
    role = types.checked.get(name)
    if role and n_num > len(valid) - n_num:
        raise InputError(f"{role} '{name}' holds numbers but also text: {_offenders(valid, ok, name)}; "
                         f"declare it text with --categorical {name}, or fix those cells (or name them "
                         f"missing with --na-values)")
    return _bools(text())


def _bools(text):
    """A column of ``True`` / ``False`` cells (exactly so spelled, no missing ones) as booleans (written
    back ``True`` / ``False``); any other column, ``true`` / ``FALSE`` too, stays the text as read."""
    if text.null_count == 0 and _all(pc.is_in(text, pa.array(list(_BOOL), pa.string()))):
        return pc.equal(text, "True")
    return text


def type_columns(table, types: ColumnTypes | None = None):
    """A pyarrow table of text columns (nulls: missing cells) as a pandas frame typed by the rules above."""
    types = types or ColumnTypes()
    cols = [_type_one(n, table.column(i), types) for i, n in enumerate(table.column_names)]
    out = pa.table(cols, names=table.column_names)
    nullable = {pa.int64(): pd.Int64Dtype(), pa.uint64(): pd.UInt64Dtype()}
    frame = out.to_pandas(types_mapper=lambda t: None, integer_object_nulls=False)
    for n, c in zip(out.column_names, out.columns):  # exact integers beside missing cells
        if c.type in nullable and c.null_count:
            frame[n] = pd.array(c.to_pylist(), dtype=nullable[c.type])
    return frame
