"""Exact ordered QIs: integers beyond float64's exact range, and dates and times.

A numeric QI is keyed by its dense rank among its sorted distinct values (:mod:`kernels.keys`);
the values themselves are the dictionary that decodes a key. For most columns that dictionary is
float64, which holds every integer up to 2**53 exactly. Two kinds of column need more:

* integer columns (int64 / uint64, nullable too) with a value beyond 2**53 in magnitude, and
* dates and times (``datetime64`` of any unit, with or without a time zone; Python ``date``
  objects, as pandas reads a Parquet ``date32`` column), ordered by their epoch count in the
  column's unit (UTC instants for a time zone).

For these the dictionary is kept exactly (:class:`Exact`: the sorted distinct values as int64 or
uint64) and ranked exactly; the float dictionary the kernel and the metrics read holds each
value's distance from the smallest one (computed in integers, then rounded once), so widths and
spans stay exact to float64's relative precision. Published bounds are read from the exact
dictionary: integers as integer text (``lo-hi``, ``[lo, hi]`` when ``lo < 0``), dates as
``2020-01-01..2020-03-31`` (day resolution when every value is at midnight), ISO date-times
otherwise (``2020-01-01T10:00:00..2020-01-02T08:30:00``, with the UTC offset for a time zone).

Examples
--------
>>> import pandas as pd
>>> ex = exact_of(pd.Series([2**62 + 1, 2**62 + 3, None], dtype="Int64"), "id")
>>> ex[0].values.tolist(), ex[1].tolist()
([4611686018427387905, 4611686018427387907], [0, 1, 4294967295])
>>> parse_exact("4611686018427387905-4611686018427387907", "int")
(4611686018427387905, 4611686018427387907)
>>> day = pd.Series(pd.to_datetime(["2020-01-01", "2020-03-31"]))
>>> e, k = exact_of(day, "when")
>>> range_texts(e, np.array([0], np.uint32), np.array([1], np.uint32)).tolist()
['2020-01-01..2020-03-31']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kernels.keys import MISSING

from ..backend import frame_to_host
from ..errors import SchemaError

FLOAT_EXACT = 2**53  # every integer of magnitude up to this is a float64
DATE_RANGE = ".."  # between the two bounds of a date range (a date holds '-')
_DAY_NS = 86_400 * 10**9
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


@dataclass(eq=False)
class Exact:
    """The exact dictionary of an ordered QI: ``values`` its sorted distinct values (int64 or
    uint64; a date or time as its epoch count in ``unit``, UTC for a time zone ``tz``);
    ``kind`` 'int' or 'time'; ``dates``: every value at midnight (published as days);
    ``date_objects``: the input held Python dates (its ``_min`` / ``_max`` columns hold dates)."""

    values: np.ndarray
    kind: str = "int"
    unit: str = "ns"
    tz: str | None = None
    dates: bool = False
    date_objects: bool = False
    _texts: object = None
    scale: int = 0  # 'decimal': values are the numbers times 10**scale

    def __repr__(self) -> str:
        return f"Exact({self.kind}, {self.values.shape[0]} values" + (
            f", {self.unit}, tz={self.tz}, dates={self.dates})" if self.kind == "time" else ")")

    @property
    def mean_step(self) -> int:
        """A published mean is a whole multiple of this many units: a day for dates, else one unit."""
        return _DAY_NS // (10**9 // _PER_SECOND[self.unit]) if self.dates else 1

    def origin(self) -> int:
        return int(self.values[0]) if self.values.shape[0] else 0

    def offsets(self) -> np.ndarray:
        """Each value's distance from the smallest (float64; the difference is exact in uint64)."""
        v = self.values
        if v.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        u = v.view(np.uint64) if v.dtype == np.int64 else v
        return (u - u[0]).astype(np.float64)

    def python(self, i: int):
        """Value ``i`` as a JSON-ready Python value (an int, or ISO text for a date or time)."""
        return int(self.values[i]) if self.kind == "int" else str(self.value_texts()[i])

    def decimals(self) -> np.ndarray:
        """The dictionary's values as ``Decimal`` objects (a decimal column; one per value)."""
        out = np.empty(self.values.shape[0], dtype=object)
        out[:] = [Decimal(int(v)).scaleb(-self.scale) for v in self.values.tolist()]  # a loop over distinct values
        return out

    def times(self, ints: np.ndarray) -> pd.DatetimeIndex:
        """Epoch counts (int64) as dates and times of the column's unit and zone."""
        idx = pd.DatetimeIndex(np.asarray(ints, dtype=np.int64).view(f"M8[{self.unit}]"))
        return idx if self.tz is None else idx.tz_localize("UTC").tz_convert(self.tz)

    def value_texts(self):
        """The published text of every dictionary value (an Arrow string array), made once."""
        if self._texts is None:
            if self.kind == "int":
                self._texts = pa.array(self.values).cast(pa.string())
            elif self.kind == "decimal":  # fixed notation, the column's places (as the file holds them)
                self._texts = pa.array([format(d, "f") for d in self.decimals()], pa.string())
            else:
                self._texts = pa.array(_time_texts(self), pa.string())
        return self._texts

    def to_dict(self) -> dict:
        d = {"exact": self.kind}
        if self.kind == "time":
            d.update(unit=self.unit, tz=self.tz, dates=self.dates)
        if self.kind == "decimal":
            d.update(scale=self.scale)
        return d


def _time_texts(ex: Exact) -> np.ndarray:
    """ISO text of every value (vectorized; the zone's offsets formatted once each)."""
    idx = ex.times(ex.values)
    wall = (idx.tz_localize(None) if ex.tz is not None else idx).to_numpy()
    if ex.dates:
        return np.datetime_as_string(wall, unit="D")
    ints = ex.values
    unit = "s" if (ints % _PER_SECOND[ex.unit] == 0).all() else ex.unit
    text = np.datetime_as_string(wall.astype(f"M8[{unit}]"), unit=unit)
    if ex.tz is None:
        return text
    off = (wall.astype("M8[s]").astype(np.int64) - (ints // _PER_SECOND[ex.unit]))  # seconds east of UTC
    codes, uniq = pd.factorize(off)
    suffix = np.array([("+" if o >= 0 else "-") + f"{abs(o) // 3600:02d}:{abs(o) % 3600 // 60:02d}"
                       for o in uniq], dtype=object)  # a loop over the zone's distinct offsets
    return np.char.add(text.astype(str), suffix[codes].astype(str))


def _starts_with_text(s: pd.Series) -> bool:
    """The column's first value is text: then not every present value is a date or a decimal (what
    ``infer_dtype`` would find in a pass over the rows)."""
    return isinstance(s.iloc[0], str)


def is_time(s: pd.Series) -> bool:
    """A date / time column: ``datetime64`` (any unit, any zone) or Python dates (Parquet ``date32``)."""
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        return True
    return (s.dtype == object and isinstance(s, pd.Series) and len(s) > 0 and not _starts_with_text(s)
            and pd.api.types.infer_dtype(s, skipna=True) == "date")


def is_decimal(s) -> bool:
    """A column of ``Decimal`` objects (as pandas reads a Parquet ``decimal128``, and CSV numbers with
    more significant digits than a double holds)."""
    return (isinstance(s, pd.Series) and s.dtype == object and len(s) > 0 and not _starts_with_text(s)
            and pd.api.types.infer_dtype(s, skipna=True) == "decimal")


def _decimal_keys(s: pd.Series, name):
    """``(exact dictionary, keys)`` of a decimal column: every value times 10**scale (the most places
    any value has) as int64, ranked exactly; loops run over the distinct values only."""
    codes, uniq = pd.factorize(s, use_na_sentinel=True)
    exps = [u.as_tuple().exponent for u in uniq]  # a loop over distinct values
    if any(not isinstance(e, int) for e in exps):
        _refuse(name, "holds decimals that are not finite numbers (NaN or infinity)")
    scale = max([0] + [-e for e in exps])
    scaled = [int(u.scaleb(scale)) for u in uniq]
    if scaled and not (-(2**63) <= min(scaled) and max(scaled) < 2**63):
        _refuse(name, f"holds decimals with more digits than 18 at {scale} places (such as "
                      f"{uniq[int(np.argmax(np.abs(np.array(scaled, dtype=object))))]})")
    vals = np.array(scaled, dtype=np.int64)
    order = np.unique(vals, return_inverse=True)
    keys = np.full(codes.shape[0], MISSING, dtype=np.uint32)
    keys[codes >= 0] = order[1].reshape(-1).astype(np.uint32)[codes[codes >= 0]]
    return Exact(order[0], "decimal", scale=scale), keys


def _refuse(name, detail: str):
    raise SchemaError(f"quasi-identifier '{name}' {detail}; declare it categorical (--categorical {name}) to "
                      f"publish sets of its exact values")


def exact_of(s: pd.Series, name) -> tuple[Exact, np.ndarray] | None:
    """``(exact dictionary, keys)`` of a numeric QI that float64 cannot hold exactly, else None.

    Keys are dense ranks (uint32; :data:`~kernels.keys.MISSING` where missing). Raises
    :class:`~gpuanon.errors.SchemaError` for integers no 64-bit type holds.
    """
    if not isinstance(s, pd.Series):  # a cuDF column: an exact dictionary is built on the host
        if not needs_exact(s):
            return None

        s = frame_to_host(s.to_frame())[s.name]
    kind, date_objects = "int", False
    if is_decimal(s):
        return _decimal_keys(s, name)
    miss = s.isna().to_numpy()
    if is_time(s):
        kind = "time"
        if s.dtype == object:
            date_objects = True
            s = pd.to_datetime(s)
        idx = pd.DatetimeIndex(s)
        unit, tz = idx.unit, (None if idx.tz is None else str(idx.tz))
        ints = idx.asi8.copy()
        wall = idx.tz_localize(None).asi8 if tz is not None else ints
        per_day = _DAY_NS // (10**9 // _PER_SECOND[unit])
        dates = bool(((wall[~miss] % per_day) == 0).all())
    else:
        if s.dtype == object and pd.api.types.infer_dtype(s, skipna=True) == "integer":
            conv = pd.to_numeric(s, errors="coerce")
            if not pd.api.types.is_integer_dtype(conv.dtype):
                big = next(v for v in s if isinstance(v, int) and not (-(2**63) <= v < 2**64))
                _refuse(name, f"holds integers that no 64-bit type holds (such as {big})")
            s = conv
        if not pd.api.types.is_integer_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
            return None
        dt = np.dtype(getattr(s.dtype, "numpy_dtype", s.dtype))
        dt = np.dtype(np.uint64) if dt.kind == "u" else np.dtype(np.int64)
        ints = s.to_numpy(dtype=dt, na_value=0)
        present = ints[~miss]
        if present.shape[0] == 0 or (int(present.max()) <= FLOAT_EXACT and int(present.min()) >= -FLOAT_EXACT):
            return None  # float64 holds every value: the ordinary path
        unit, tz, dates = "ns", None, False
    uniq, inv = np.unique(ints[~miss], return_inverse=True)
    keys = np.full(ints.shape[0], MISSING, dtype=np.uint32)
    keys[~miss] = inv.reshape(-1).astype(np.uint32)
    ex = Exact(uniq, kind, unit, tz, dates and kind == "time", date_objects)
    return ex, keys


def _take(arr, idx: np.ndarray):
    return arr.take(pa.array(idx))


def range_texts(ex: Exact, kmin: np.ndarray, kmax: np.ndarray):
    """Cell text of every class's interval (an Arrow string array, null where missing)."""
    kmin, kmax = np.asarray(kmin), np.asarray(kmax)
    miss = kmin == MISSING
    top = max(ex.values.shape[0] - 1, 0)
    a, b = np.where(miss, 0, kmin).astype(np.int64), np.minimum(kmax, top).astype(np.int64)
    texts = ex.value_texts()
    if texts is None or len(texts) == 0:
        return pa.nulls(kmin.shape[0], pa.string())
    los, his = _take(texts, a), _take(texts, b)
    los = pc.if_else(pa.array(miss), pa.scalar(None, pa.string()), los)
    wide = ~miss & (kmin != kmax)
    if not wide.any():
        return los
    if ex.kind == "time":
        joined = pc.binary_join_element_wise(los, his, DATE_RANGE)
    else:
        neg = ex.values[a] < 0 if ex.values.dtype == np.int64 else np.zeros(a.shape[0], dtype=bool)
        dash = pc.binary_join_element_wise(los, his, "-")
        bracket = pc.binary_join_element_wise(pa.scalar("["), los, pa.scalar(", "), his, pa.scalar("]"), "")
        joined = pc.if_else(pa.array(neg), bracket, dash)
    return pc.if_else(pa.array(wide), joined, los)


def bound_values(ex: Exact, keys: np.ndarray, source_dtype=None):
    """A ``_min`` / ``_max`` column's values (one per entry of ``keys``), exact: integers in the
    input's dtype (nullable ``Int64`` / ``UInt64`` when one is missing), dates and times in the
    input's unit and zone (Python dates for a date input)."""
    keys = np.asarray(keys)
    miss = keys == MISSING
    vals = ex.values[np.minimum(keys, max(ex.values.shape[0] - 1, 0)).astype(np.int64)] if ex.values.shape[0] \
        else np.zeros(keys.shape[0], dtype=ex.values.dtype)
    if ex.kind == "decimal":
        return _decimal_values(ex, vals, miss)
    if ex.kind == "int":
        if not miss.any():
            try:
                dt = np.dtype(getattr(source_dtype, "numpy_dtype", source_dtype))
            except TypeError:
                dt = vals.dtype
            return vals.astype(dt) if dt.kind in "iu" else vals
        return pd.arrays.IntegerArray(np.where(miss, 0, vals).astype(vals.dtype), miss)  # Int64 / UInt64
    return time_values(ex, vals, miss)


def _decimal_values(ex: Exact, scaled: np.ndarray, miss: np.ndarray) -> np.ndarray:
    """Scaled integers as ``Decimal`` objects at the column's places (None where ``miss``)."""
    codes, uniq = pd.factorize(np.where(miss, 0, scaled))
    dec = np.empty(len(uniq), dtype=object)
    dec[:] = [Decimal(int(v)).scaleb(-ex.scale) for v in uniq.tolist()]  # a loop over distinct values
    out = dec[codes]
    out[miss] = None
    return out


def time_values(ex: Exact, ints: np.ndarray, miss: np.ndarray):
    """Epoch counts as the column's dates and times (NaT / None where ``miss``)."""
    idx = ex.times(np.where(miss, np.iinfo(np.int64).min, ints))  # the minimum int64 is NaT
    if ex.date_objects:
        out = np.empty(ints.shape[0], dtype=object)
        out[~miss] = idx[~miss].date
        out[miss] = None
        return out
    return pd.array(idx)


def unsigned_offsets(ex: Exact) -> np.ndarray:
    """Each value's distance from the smallest, exact (uint64)."""
    u = ex.values.view(np.uint64) if ex.values.dtype == np.int64 else ex.values
    return u - u[0] if u.shape[0] else np.zeros(0, dtype=np.uint64)


def exact_means(ex: Exact, lo_sums, hi_sums, sizes, miss) -> tuple[np.ndarray, np.ndarray]:
    """``(means, missing)`` of classes from their sums of offsets (the low and the high 32 bits of
    each row's offset summed apart, uint64) and sizes: the rational mean rounded to the nearest whole
    value (half to even; to the nearest day for dates) in exact integer arithmetic, so it lies inside
    its class; in the values' dtype (int64 / uint64 epoch counts for times)."""
    hi = np.asarray(hi_sums, dtype=np.uint64).astype(object)
    total = hi * (1 << 32) + np.asarray(lo_sums, dtype=np.uint64).astype(object)
    step = ex.mean_step
    d = np.maximum(np.asarray(sizes, dtype=np.int64), 1).astype(object) * step
    q = total // d
    r2 = (total - q * d) * 2
    up = (r2 > d).astype(bool) | ((r2 == d).astype(bool) & (q % 2 == 1).astype(bool))
    q = q + up.astype(np.int64).astype(object)
    means = np.where(miss, 0, q * step + ex.origin()).astype(ex.values.dtype)
    return means, np.asarray(miss, dtype=bool)


def mean_values(ex: Exact, means: np.ndarray, miss: np.ndarray):
    """Published class means (from :func:`exact_means`): integers in the column's dtype (nullable
    where a class is missing), dates and times in the column's unit and zone."""
    if ex.kind == "int":
        return pd.arrays.IntegerArray(means, miss) if miss.any() else means
    if ex.kind == "decimal":  # rounded to the column's places
        return _decimal_values(ex, means, miss)
    return time_values(ex, means, miss)


_INT = r"[-+]?\d+"


def parse_exact(text: str, kind: str):
    """``(lo, hi)`` of one published cell of an exact column, read exactly: Python ints for 'int',
    ``pandas.Timestamp`` for 'time' (``lo..hi`` or one date); ValueError otherwise."""
    t = str(text).strip()
    if kind == "time":
        a, sep, b = t.partition(DATE_RANGE)
        lo = pd.Timestamp(a)
        return lo, (pd.Timestamp(b) if sep else lo)
    if kind == "decimal":
        return _parse_decimals(t)
    return _bounds(t, _INT, int, "an integer")


_DEC = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def _parse_decimals(t: str):
    """``(lo, hi)`` of a decimal cell as ``Decimal`` objects: a number, ``lo-hi`` or ``[lo, hi]``."""
    return _bounds(t, _DEC, Decimal, "a number")


def _bounds(t: str, number: str, convert, what: str):
    """``(lo, hi)`` of a cell holding one ``number`` (a regular expression), ``lo-hi`` or ``[lo, hi]``."""
    m = re.fullmatch(rf"\[\s*({number})\s*,\s*({number})\s*\]", t) or re.fullmatch(rf"({number})\s*-\s*({number})", t)
    if m:
        return convert(m.group(1)), convert(m.group(2))
    if re.fullmatch(number, t):
        return convert(t), convert(t)
    raise ValueError(f"{t!r} is not {what}, 'lo-hi' or '[lo, hi]'")


def is_date_range(text: str) -> bool:
    return DATE_RANGE in str(text)



def time_ns(ts) -> int:
    """A ``pandas.Timestamp`` of any unit as epoch nanoseconds (a Python int, also beyond int64's
    range: years 0001-9999 are all exact)."""
    v = ts.asm8
    return int(v.view(np.int64)) * (10**9 // _PER_SECOND[np.datetime_data(v.dtype)[0]])


def times_ns(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(epoch nanoseconds as Python ints (object array), missing mask)`` of a date / time column of
    any unit or range (Python dates too)."""
    idx = pd.DatetimeIndex(pd.to_datetime(s))
    miss = np.asarray(idx.isna())
    vals = idx.asi8.astype(object) * (10**9 // _PER_SECOND[idx.unit])
    vals[miss] = None
    return vals, miss


def float_values(s: pd.Series) -> np.ndarray:
    """Values of a numeric or date / time column as float64 (a time as epoch nanoseconds; NaN where
    missing): what the metrics of a user's table read."""
    if is_time(s):
        idx = pd.DatetimeIndex(pd.to_datetime(s))
        try:
            out = idx.as_unit("ns").asi8.astype(np.float64)
        except (OverflowError, ValueError):  # years beyond 1677-2262: nanoseconds beyond int64, as floats
            out = idx.asi8.astype(np.float64) * float(10**9 // _PER_SECOND[idx.unit])
        out[np.asarray(idx.isna())] = np.nan
        return out
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def looks_like_time(text: str) -> bool:
    """A published date / time cell (``2020-01-01``, ``2020-01-01T10:00:00..2020-01-02``)."""
    return re.match(r"\s*[-+]?\d{4}-\d\d-\d\d", str(text)) is not None


def needs_exact(s: pd.Series) -> bool:
    """Whether a numeric QI needs an exact dictionary (a date / time, or an integer beyond 2**53)."""
    if is_time(s) or is_decimal(s):
        return True
    if s.dtype == object and isinstance(s, pd.Series) and pd.api.types.infer_dtype(s, skipna=True) == "integer":
        s = pd.to_numeric(s, errors="coerce")
        if not pd.api.types.is_integer_dtype(s.dtype):
            return True
    if not pd.api.types.is_integer_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype) or not s.notna().any():
        return False
    return int(s.max()) > FLOAT_EXACT or int(s.min()) < -FLOAT_EXACT


def combine_exact(name, exacts: list, others: list) -> Exact:
    """One exact dictionary over several chunks (shards): ``exacts`` the chunks' exact dictionaries,
    ``others`` the value arrays (or None) of the chunks whose values float64 held, joined as integers
    when they are whole numbers; chunks of different types are an error naming the column."""
    full = [e for e in exacts if e.values.shape[0]] or exacts[:1]
    types = {(e.kind, e.values.dtype.str, e.unit, e.tz, e.date_objects, e.scale) for e in full}
    e0 = full[0]
    vals = [e.values for e in full]
    for u in others:  # a loop over chunks
        if e0.kind != "int" or u is None or not np.array_equal(u, np.floor(u)):
            types.add(("float", "", "", None, False, 0))
        else:
            vals.append(u.astype(e0.values.dtype))
    if len(types) > 1:
        raise SchemaError(f"quasi-identifier '{name}' holds values of different types in different shards "
                          f"({', '.join(sorted(str(t[0]) + ' ' + str(t[1]) for t in types))}); write every file "
                          f"with the same column types")
    return Exact(np.unique(np.concatenate(vals)), e0.kind, e0.unit, e0.tz, all(e.dates for e in full), e0.date_objects,
                 scale=e0.scale)
