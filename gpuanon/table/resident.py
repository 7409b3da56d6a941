"""A device-resident input (a cuDF frame) on the GPU backend: its plain numeric QIs stay where they are.

:func:`split_resident` divides the input's columns in two. The plain numeric quasi-identifiers
(float32, float64, integers up to 32 bits: the dtypes whose values a device column gives exactly
as the host path's float array would) stay on the device: one ``to_cupy`` per dtype makes them a
device matrix, one pass over it computes every fact the schema checks and the encoding need of
them (:class:`ColumnFacts`: missing count, infinite values, smallest / largest, whole numbers,
distinct count where the identifier check asks for it), and ONE read brings those few numbers per
column to the host. Only the columns the host must see (text and other QIs, the sensitive attribute,
the target) come to the host, in one counted copy; a numeric QI with missing values adds its
missing mask (one byte a row), from which the host forms the missing-value blocks. A cuDF
categorical QI (no target or hierarchy given) keeps its codes on the device, renumbered there as
``pandas.factorize`` numbers the values; only its categories and a first row and a count per
category come to the host.

The schema checks (:meth:`gpuanon.table.schema.Schema.from_frame`) and the encoding
(:func:`gpuanon.table.encoding.encode`) read a :class:`Resident` in place of those columns' values, with
the host path's results bit for bit (``tests/test_device_resident.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from kernels.counts import count_values

from ..backend import device_matrix, frame_to_host, to_device, to_host

__all__ = ["ColumnFacts", "DEVICE_KEYED", "Resident", "split_resident"]

#: host dtypes whose values a device column gives as the host path's float array would, bit for bit
DEVICE_KEYED = tuple(np.dtype(t) for t in ("float32", "float64", "int8", "int16", "int32", "uint8", "uint16", "uint32"))

#: the rows the identifier check looks at first for fractional values (``gpuanon.table.schema``)
HEAD_ROWS = 4096
#: the fewest present values for which the identifier check counts distinct values (``gpuanon.table.schema``)
DISTINCT_MIN_ROWS = 20

_FACTS = ("n_missing", "any_inf", "lo", "hi", "head_fractional", "all_integer")


@dataclass(frozen=True)
class ColumnFacts:
    """What the schema checks and the encoding need of a device-resident numeric column."""

    dtype: np.dtype
    n: int
    n_missing: int
    any_inf: bool
    lo: float  # smallest present value (NaN when none is present)
    hi: float
    head_fractional: bool  # a present value among the first HEAD_ROWS is not a whole number
    all_integer: bool  # every present value is finite and whole
    n_distinct: int | None = None  # distinct present values, counted only where all_integer and enough rows
    kind: str = "numeric"  # or "categorical": a cuDF categorical column, its codes on the device

    @property
    def host_dtype(self) -> np.dtype:
        """The dtype of the column's host copy: cuDF gives an integer column with nulls as float64."""
        return np.dtype(np.float64) if self.dtype.kind in "iu" and self.n_missing else self.dtype

    @property
    def integer(self) -> bool:
        return self.host_dtype.kind in "iu"


@dataclass
class Resident:
    """The device-resident part of an input: its column names (all, in order), the plain numeric
    QIs' device values (float32 or float64 arrays), their facts, and the host missing masks of
    those with missing values."""

    frame: Any
    columns: list
    values: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)
    #: categorical QI -> (its rows' codes into ``values`` on the device, its values in the order of
    #: their first row -- as ``pandas.factorize`` gives them --, (values, 1) int64 row counts)
    codes: dict = field(default_factory=dict)

    def __contains__(self, name) -> bool:
        return name in self.facts


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, str):
        return [c.strip() for c in x.split(",") if c.strip()]
    return list(x)


def resident_names(frame, roles: dict) -> list:
    """The QIs of ``frame`` that stay on the device: plain numbers, not declared categorical, not
    the sensitive attribute or the target."""
    cols = list(frame.columns)
    dtypes = frame.dtypes
    skip = set(_as_list(roles.get("categorical"))) | {roles.get("sensitive"), roles.get("target")}
    out = []
    for c in _as_list(roles.get("quasi_identifiers")):  # a loop over columns
        if c in cols and c not in skip and c not in out and isinstance(dtypes[c], np.dtype) and dtypes[c] in DEVICE_KEYED:
            out.append(c)
    return out


def categorical_names(frame, roles: dict, hierarchies=None) -> list:
    """The categorical QIs of ``frame`` (a cuDF categorical dtype) whose codes stay on the device:
    not declared numeric, and only without a target (whose codes the category counts pair with)
    or hierarchies (checked against the values on the host)."""
    if roles.get("target") is not None or hierarchies is not None:
        return []
    cols, dtypes = list(frame.columns), frame.dtypes
    skip = set(_as_list(roles.get("numeric"))) | {roles.get("sensitive")}
    return list(dict.fromkeys(c for c in _as_list(roles.get("quasi_identifiers"))
                              if c in cols and c not in skip and str(dtypes[c]) == "category"))


def split_resident(frame, roles: dict, xp, hierarchies=None) -> tuple[pd.DataFrame, Resident]:
    """``(host frame, Resident)`` of the device-resident ``frame`` on the device ``xp``: the host
    frame holds the columns the roles need on the host (one counted copy; none when there are none,
    an empty frame of the right length), the Resident the rest (see the module docstring).
    ``hierarchies``: the fit's (a categorical QI with one is read on the host)."""
    n = len(frame)
    names = resident_names(frame, roles)
    cats = categorical_names(frame, roles, hierarchies)
    wanted = _as_list(roles.get("quasi_identifiers")) + [roles.get("sensitive"), roles.get("target")]
    cols = list(frame.columns)
    host_cols = list(dict.fromkeys(c for c in wanted if c is not None and c in cols and c not in names + cats))
    host = frame_to_host(frame[host_cols]) if host_cols else pd.DataFrame(index=pd.RangeIndex(n))
    res = Resident(frame, cols)
    for c in cats:  # a loop over columns
        _categorical(res, frame[c], c, n, xp)
    groups: dict = {}
    for c in names:  # a loop over columns
        groups.setdefault(np.dtype(np.float32 if frame.dtypes[c] == np.float32 else np.float64), []).append(c)
    mats = {dt: device_matrix(frame, group, dt) for dt, group in groups.items()}  # one to_cupy per dtype
    for dt, group in groups.items():
        res.values.update({c: mats[dt][:, i] for i, c in enumerate(group)})
    if not names:
        return host, res
    parts = [_facts_of(m, xp) for m in mats.values()]
    table = to_host(parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=1))  # the one read
    order = [c for group in groups.values() for c in group]
    for i, c in enumerate(order):  # a loop over columns
        v = table[:, i]
        res.facts[c] = ColumnFacts(np.dtype(frame.dtypes[c]), n, int(v[0]), bool(v[1]),
                                   float(v[2]) if v[0] < n else float("nan"), float(v[3]) if v[0] < n else float("nan"),
                                   bool(v[4]), bool(v[5]))
    _count_distinct(res, xp)
    _missing_masks(res, xp)
    return host, res


def _facts_of(m, xp):
    """``(len(_FACTS), columns)`` float64 facts of a device matrix ``m`` (rows x columns), one pass."""
    miss = xp.isnan(m)
    whole = xp.isfinite(m) & (m == xp.floor(m))
    head = slice(0, min(HEAD_ROWS, m.shape[0]))
    return xp.stack([miss.sum(axis=0).astype(xp.float64),
                     xp.isinf(m).any(axis=0).astype(xp.float64),
                     xp.where(miss, xp.inf, m).min(axis=0).astype(xp.float64),
                     xp.where(miss, -xp.inf, m).max(axis=0).astype(xp.float64),
                     (~(whole[head] | miss[head])).any(axis=0).astype(xp.float64),
                     (whole | miss).all(axis=0).astype(xp.float64)])


def _count_distinct(res: Resident, xp) -> None:
    """The distinct present values of the whole-number columns the identifier check counts (one
    sort of them all, one read)."""
    names = [c for c, f in res.facts.items() if f.kind == "numeric" and f.all_integer
             and f.n - f.n_missing >= DISTINCT_MIN_ROWS and not (f.host_dtype.kind == "f" and f.head_fractional)]
    if not names:
        return
    s = xp.sort(xp.stack([res.values[c].astype(xp.float64) for c in names], axis=1), axis=0)  # NaN last
    new = (s[1:] != s[:-1]) & ~xp.isnan(s[1:])
    counts = to_host(new.sum(axis=0) + (~xp.isnan(s[0])))
    for c, d in zip(names, counts):  # a loop over columns
        res.facts[c] = _replace(res.facts[c], n_distinct=int(d))


def _missing_masks(res: Resident, xp) -> None:
    """The host missing masks of the columns with missing values (one byte a row each, one read)."""
    names = [c for c, f in res.facts.items() if f.kind == "numeric" and f.n_missing]
    if not names:
        return
    masks = to_host(xp.stack([xp.isnan(res.values[c]) for c in names], axis=1))
    res.missing.update({c: np.ascontiguousarray(masks[:, i]) for i, c in enumerate(names)})


def _categorical(res: Resident, s, name, n: int, xp) -> None:
    """A cuDF categorical column's codes on the device, numbered as ``pandas.factorize`` numbers its
    values (by first row; a missing value is a value), and its facts. Only the categories and two
    numbers per category (first row, count) come to the host, the renumbering goes up (one per
    category)."""
    cats = frame_to_host(s.cat.categories)  # the few categories (counted)
    m = len(cats) + 1  # code 0: missing, c + 1: category c
    codes = s.cat.codes.to_cupy(dtype=np.int64, na_value=-1) + 1
    srt = xp.sort(codes * n + xp.arange(n, dtype=xp.int64))  # by code, then row: distinct keys
    code, row = srt // n, srt % n
    new = xp.ones(n, dtype=bool)
    new[1:] = code[1:] != code[:-1]
    first = xp.full(m + 1, n, dtype=xp.int64)
    first[xp.where(new, code, m)] = row  # the first row of every code; rows inside a run go to the spare slot
    first_h, counts_h = to_host(xp.stack([first[:m], count_values(codes, m, xp)]))  # the one read
    order = np.flatnonzero(counts_h > 0)
    order = order[np.argsort(first_h[order], kind="stable")]
    values = list(pd.factorize(pd.Series(pd.Categorical.from_codes(order - 1, categories=cats)), sort=False,
                               use_na_sentinel=False)[1])
    local = np.full(m, -1, dtype=np.int64)
    local[order] = np.arange(order.shape[0], dtype=np.int64)
    res.codes[name] = (to_device(local, xp)[codes], values, counts_h[order].astype(np.int64)[:, None])
    res.facts[name] = ColumnFacts(np.dtype(object), n, int(counts_h[0]), False, float("nan"), float("nan"), False,
                                  False, int((counts_h[1:] > 0).sum()), kind="categorical")


def _replace(f: ColumnFacts, **kw) -> ColumnFacts:
    return replace(f, **kw)
