"""The table's dictionaries as chunk / combine / finalize reductions, and a chunk's keys with them.

An encoded table (:class:`gpuanon.table.encoding.Table`) depends on the whole table: the sorted distinct
values of every rank-keyed numeric QI (exact ones for integers beyond 2**53 and dates / times,
:mod:`gpuanon.table.exact`), its minimum, maximum and missing count; the order of each categorical QI's
codes; the sensitive and target dictionaries; the missing-value patterns that make the blocks.
One process runs these four functions on one chunk (:func:`gpuanon.table.encoding.encode`); a cluster
runs the chunk and the encode on every shard's worker, combine / finalize on the coordinator:

* chunk (:func:`profile_chunk`): ``(Profile, Chunk)`` of some rows. The :class:`Profile` is small
  and travels; the :class:`Chunk` stays with the rows (their codes into the chunk's own distinct
  values, numeric ranks already on the device);
* combine (:func:`combine`): one profile of several (values united, counts added; of one: itself);
* finalize (:func:`finalize`): the :class:`Dictionaries` (every QI's :class:`Column`, the
  sensitive and target values, the missing patterns), by :func:`~gpuanon.table.values.value_order` and
  :func:`~gpuanon.table.values.category_order`, which read values and counts only -- never how the rows were split;
* encode (:func:`encode_chunk`): a chunk's keys, codes and block ids: its own codes through a
  small table (its distinct values' positions in the dictionaries), skipped where that is the
  identity (one chunk).

Category code order (the contract, section 1): with a target, categories are ordered by
(majority target value, share of that majority, value), so that Mondrian's ordinal cuts keep
similar categories together; without one, by value. A missing category is its own category and
sorts after the others with the same majority and share.

>>> import pandas as pd
>>> from gpuanon.table.schema import Schema
>>> df = pd.DataFrame({"a": [3.0, 1.0, None, 3.0], "c": ["x", "y", "x", "z"]})
>>> schema = Schema.from_frame(df, ["a", "c"])
>>> parts = [profile_chunk(df[:2], schema), profile_chunk(df[2:], schema)]
>>> d = finalize(combine([p for p, _ in parts]), schema)
>>> d.columns[0].info.tolist(), d.columns[1].categories, d.n_blocks
([1.0, 3.0], ['x', 'y', 'z'], 2)
>>> encode_chunk(parts[1][1], d)["keys"].tolist()
[[4294967295, 1], [0, 2]]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kernels.keys import MISSING, float32_keys, rank_keys

from ..backend import get_namespace, to_device, to_host
from ..errors import SchemaError
from .exact import Exact, combine_exact, exact_of
from .values import category_order, factorize, is_na, jsonable, value_order


@dataclass
class Column:
    """How one QI is encoded and decoded.

    A Column is never changed after encode (save its device cache ``info_x``); hierarchies bound
    in a fit live in that fit's ``Table.hierarchies``, by column name.
    """

    name: str
    kind: str  # 'numeric' | 'categorical'
    info: Any = None  # numeric: 'f32' or sorted distinct values (host float64)
    categories: list = field(default_factory=list)  # categorical: values in code order
    lo: float = float("nan")
    hi: float = float("nan")
    n_missing: int = 0
    integer: bool = False
    info_x: Any = None  # the same sorted values on the table's device (made once by encode)
    #: integers beyond 2**53 and dates / times: the exact dictionary (:class:`gpuanon.table.exact.Exact`);
    #: ``info`` then holds each value's distance from the smallest, ``lo`` / ``hi`` those distances
    exact: Any = None

    @property
    def n_categories(self) -> int:
        return len(self.categories)

    def decode_table(self, xp):
        """'f32', or the sorted distinct values on ``xp``'s device (copied once, at encode)."""
        if isinstance(self.info, str):
            return self.info
        if self.info_x is None or get_namespace(self.info_x) is not xp:
            self.info_x = to_device(self.info, xp)
        return self.info_x

    @property
    def global_range(self) -> float:
        if self.kind != "numeric" or not np.isfinite(self.hi - self.lo):
            return 0.0
        return float(self.hi - self.lo)

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "n_missing": self.n_missing}
        if self.kind == "categorical":
            d["categories"] = [None if is_na(v) else jsonable(v) for v in self.categories]
        elif self.exact is not None:
            n = self.exact.values.shape[0]
            d.update(min=self.exact.python(0) if n else None, max=self.exact.python(n - 1) if n else None,
                     integer=self.integer, **self.exact.to_dict())
        else:
            d.update(min=jsonable(self.lo), max=jsonable(self.hi), integer=self.integer)
        return d


def codes_sorted(series: pd.Series):
    """Codes of a column with categories sorted by value (missing last, its own category)."""
    codes, uniq = _factorize(series)
    order = value_order(uniq)
    remap = np.empty(len(order), dtype=np.int64)
    remap[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    return remap[codes].astype(np.int32), [uniq[i] for i in order]


# ------------------------------------------------------------------------------------------ chunk
@dataclass
class Profile:
    """Chunk: what the dictionaries need from some rows (small host objects). ``columns``: per QI a dict -- a categorical QI's ``values`` (distinct, in the chunk's order) and
    ``counts`` (rows per value x target value, one column without a target); a numeric QI's
    ``uniq`` (sorted distinct values: float64, or int64 / uint64 with an ``exact`` dictionary's
    ``Exact`` fields; None for float32), ``f32``, ``lo``, ``hi``, ``n_missing``, ``integer``.
    ``missing``: ``(QI indices with a missing value here, distinct patterns as bool rows, sorted)``."""

    n: int
    columns: dict
    missing: tuple
    target_values: list | None = None
    sa_values: list | None = None


@dataclass
class Chunk:
    """What stays with the rows: their codes into the chunk's own distinct values (the profile's)."""

    profile: Profile
    keys: Any  # (d, n) uint32 on the device: numeric QIs keyed (ranks among the chunk's values)
    codes: dict  # categorical QI index -> codes into the profile's values (host; a cuDF categorical's: device)
    uniq_x: dict  # numeric QI index -> its sorted distinct values on the device
    target: Any = None  # host codes into the profile's target values
    sa: Any = None
    pattern: Any = None  # host int64: each row's missing pattern, a row of ``profile.missing[1]``


def profile_chunk(df: pd.DataFrame, schema, xp=np, check: bool = False, resident=None,
                  factorized: dict | None = None) -> tuple[Profile, Chunk]:
    """Chunk: the profile of ``df``'s rows and their codes (keys made on ``xp``'s device; ``resident``:
    a cuDF input's :class:`~gpuanon.table.resident.Resident`, its QIs coded on the device, not read from ``df``;
    ``factorized``: ``{categorical QI: (codes, distinct values)}`` of these rows, no value missing,
    as :meth:`gpuanon.table.schema.Schema.from_frame` hashed them: taken as they are).

    ``check``: refuse non-numeric or infinite values in numeric QIs (a cluster validated its schema
    on a sample only; one process on the whole table).
    """
    n = len(df)
    tcodes, tvals = _factorize(df[schema.target]) if schema.target is not None else (None, None)
    scodes, svals = _factorize(df[schema.sensitive]) if schema.sensitive not in (None, schema.target) else \
        (tcodes, tvals)
    keys = xp.empty((len(schema.quasi_identifiers), n), dtype=xp.uint32)
    prof = Profile(n, {}, ((), np.zeros((1 if n else 0, 0), dtype=bool)), tvals, svals)
    chunk = Chunk(prof, keys, {}, {}, tcodes, scodes)
    miss_cols, misses = [], []
    for j, name in enumerate(schema.quasi_identifiers):  # a loop over columns
        s = df[name] if resident is None or name not in resident else None
        if schema.kinds[name] == "categorical" and resident is not None and name in resident.codes:
            chunk.codes[j], values, counts = resident.codes[name]  # codes on the device (no target)
            prof.columns[name] = {"values": values, "counts": counts}
            continue
        if schema.kinds[name] == "categorical":
            pre = (factorized or {}).get(name)
            codes, values = (pre[0].astype(np.int64, copy=False), list(pre[1])) if pre is not None and \
                pre[0].shape[0] == n else _factorize(s)
            nt = len(tvals) if tvals is not None else 1
            joint = codes * nt + tcodes if tvals is not None else codes
            counts = np.bincount(joint, minlength=len(values) * nt).reshape(len(values), nt)
            chunk.codes[j] = codes
            prof.columns[name] = {"values": values, "counts": counts}
            continue
        col, miss = _profile_resident(name, resident, xp, chunk, j) if resident is not None and name in resident \
            else _profile_numeric(name, s, xp, chunk, j, check)
        prof.columns[name] = col
        if col["n_missing"]:
            miss_cols.append(j)
            misses.append(miss)
    if miss_cols:
        chunk.pattern, rows = _patterns(misses, n)
        prof.missing = (tuple(miss_cols), rows)
    return prof, chunk


def _factorize(s: pd.Series):
    """``(codes, distinct values)`` in order of first appearance, a missing value one of them. A text
    column is hashed without the missing-value pass first (the same codes when none is missing)."""
    if s.dtype == object:
        codes, uniques = factorize(s, use_na_sentinel=True)
        if not codes.shape[0] or int(codes.min()) >= 0:
            return codes.astype(np.int64, copy=False), list(uniques)
        codes, uniques = factorize(s, use_na_sentinel=False)
        return codes.astype(np.int64, copy=False), list(uniques)
    codes, uniques = pd.factorize(s, sort=False, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), list(uniques)


def _profile_resident(name, resident, xp, chunk: Chunk, j: int):
    """:func:`_profile_numeric` of a device-resident column: keyed where it is, its profile from its
    facts (:class:`~gpuanon.table.resident.ColumnFacts`), its missing mask the one the split brought."""
    f, x = resident.facts[name], resident.values[name]
    uniq = None
    if x.dtype == xp.float32:
        chunk.keys[j] = float32_keys(x, xp)
    else:
        chunk.keys[j], chunk.uniq_x[j] = rank_keys(x, xp)
        uniq = to_host(chunk.uniq_x[j])
    miss = resident.missing.get(name)
    return {"uniq": uniq, "exact": None, "f32": x.dtype == xp.float32, "integer": f.integer,
            "n_missing": f.n_missing, "lo": f.lo, "hi": f.hi}, miss


def _profile_numeric(name, s: pd.Series, xp, chunk: Chunk, j: int, check: bool):
    """A numeric QI's profile and missing mask; its keys (ranks among its values) into ``chunk.keys[j]``."""
    ex = exact_of(s, name)
    if ex is not None:  # integers beyond 2**53, dates and times: ranked exactly
        e, k = ex
        chunk.keys[j] = to_device(k, xp)
        miss = k == MISSING
        return {"uniq": e.values, "exact": e, "f32": False, "integer": e.kind == "int",
                "n_missing": int(miss.sum()), "lo": np.nan, "hi": np.nan}, miss
    raw = s
    if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        s = pd.to_numeric(s, errors="coerce")
    integer = pd.api.types.is_integer_dtype(s) and not pd.api.types.is_bool_dtype(s)
    if isinstance(s.dtype, np.dtype) and s.dtype in (np.float32, np.float64):
        arr = s.to_numpy()  # missing is NaN already: the values as they are (read, never written)
    else:
        arr = s.to_numpy(dtype=np.float32 if s.dtype == np.float32 else np.float64, na_value=np.nan)
    miss = np.isnan(arr)
    if check:
        _check_numeric(name, raw, s, arr, miss)
    nm, n, uniq = int(miss.sum()), arr.shape[0], None
    x = to_device(arr, xp)
    if arr.dtype == np.float32:
        chunk.keys[j] = float32_keys(x, xp)
    else:
        chunk.keys[j], chunk.uniq_x[j] = rank_keys(x, xp)
        uniq = to_host(chunk.uniq_x[j])
    lo = float(np.nanmin(arr)) if nm < n else float("nan")
    hi = float(np.nanmax(arr)) if nm < n else float("nan")
    return {"uniq": uniq, "exact": None, "f32": arr.dtype == np.float32, "integer": bool(integer),
            "n_missing": nm, "lo": lo, "hi": hi}, miss


def _check_numeric(name, raw, s, arr, miss) -> None:
    if raw is not s and len(bad := raw[s.isna() & raw.notna()]):
        raise SchemaError(f"quasi-identifier '{name}' is declared numeric but holds non-numeric values such "
                          f"as {str(bad.iloc[0])!r}; declare it categorical or clean the column")
    if np.isinf(arr[~miss]).any():
        raise SchemaError(f"quasi-identifier '{name}' holds infinite values; replace them (or mark them missing) "
                          f"or declare the column categorical")


def _patterns(misses: list, n: int):
    """Each row's missing pattern (dense, in the order of the sorted patterns; first column most
    significant) and the distinct patterns as bool rows."""
    pattern = np.zeros(n, dtype=np.int64)
    for c, miss in enumerate(misses, 1):  # a loop over columns
        pattern = pattern * 2 + miss
        if c % 60 == 0:  # keep the pattern id small: renumber it densely
            pattern = pd.factorize(pattern, sort=True)[0].astype(np.int64)
    codes, uniq = pd.factorize(pattern, sort=True)
    codes = codes.astype(np.int64)
    first = pd.Series(codes).drop_duplicates()  # one row of each pattern
    rows = np.zeros((len(uniq), len(misses)), dtype=bool)
    idx = first.index.to_numpy()
    rows[first.to_numpy()] = np.stack([m[idx] for m in misses], axis=1)
    return codes, rows


# ---------------------------------------------------------------------------------------- combine
def combine(profiles: list) -> Profile:
    """Combine: one profile of several chunks' (the combine of one profile is that profile).

    The result does not depend on the order of ``profiles``: values are united as a set (their
    order is :func:`finalize`'s), counts added, missing patterns sorted.
    """
    if len(profiles) == 1:
        return profiles[0]
    first = profiles[0]
    tvals, tmaps = _union([p.target_values for p in profiles]) if first.target_values is not None else (None, None)
    svals = _union([p.sa_values for p in profiles])[0] if first.sa_values is not None else None
    out = Profile(sum(p.n for p in profiles), {}, _combine_missing([p.missing for p in profiles]), tvals, svals)
    for name, q0 in first.columns.items():  # a loop over columns
        parts = [p.columns[name] for p in profiles]
        if "values" not in q0:
            out.columns[name] = _combine_numeric(name, parts)
            continue
        values, vmaps = _union([q["values"] for q in parts])
        counts = np.zeros((len(values), q0["counts"].shape[1] if tvals is None else len(tvals)), dtype=np.int64)
        for i, (q, vm) in enumerate(zip(parts, vmaps)):  # a loop over chunks
            counts[np.ix_(vm, tmaps[i] if tvals is not None else [0])] += q["counts"]
        out.columns[name] = {"values": values, "counts": counts}
    return out


def _union(lists: list):
    """The distinct values of several lists (missing values as one ``nan``), and each list's
    positions in them."""
    flat = np.empty(sum(len(v) for v in lists), dtype=object)
    flat[:] = [v for vals in lists for v in vals]
    codes, uniq = pd.factorize(flat, sort=False, use_na_sentinel=False)
    bounds = np.cumsum([0] + [len(v) for v in lists])
    return list(uniq), [codes[a:b].astype(np.int64) for a, b in zip(bounds[:-1], bounds[1:])]


def _combine_missing(parts: list) -> tuple:
    """The distinct missing patterns of several chunks, over the QIs missing in any of them."""
    cols = tuple(sorted({j for c, _ in parts for j in c}))
    rows = [np.zeros((r.shape[0], len(cols)), dtype=np.uint8) for _, r in parts]
    for full, (c, r) in zip(rows, parts):  # a loop over chunks
        full[:, [cols.index(j) for j in c]] = r
    return cols, np.unique(np.concatenate(rows), axis=0).astype(bool)


def _has_values(q: dict) -> bool:
    return (q["uniq"] is not None and q["uniq"].shape[0] > 0) or (q["uniq"] is None and not np.isnan(q["lo"]))


def _combine_numeric(name, parts: list) -> dict:
    nm = sum(q["n_missing"] for q in parts)
    exacts = [q["exact"] for q in parts if q["exact"] is not None]
    if exacts:  # a chunk whose integers float64 held (none beyond 2**53 there) joins as integers
        ex = combine_exact(name, exacts, [q["uniq"] for q in parts if q["exact"] is None and _has_values(q)])
        return {"uniq": ex.values, "exact": ex, "f32": False, "integer": ex.kind == "int", "n_missing": nm,
                "lo": np.nan, "hi": np.nan}
    if len({q["f32"] for q in parts}) > 1:
        raise SchemaError(f"numeric quasi-identifier '{name}' is float32 in some shards and not in others; "
                          f"write every file with the same column types")
    los = [q["lo"] for q in parts if not np.isnan(q["lo"])]
    his = [q["hi"] for q in parts if not np.isnan(q["hi"])]
    uniq = None if parts[0]["f32"] else np.unique(np.concatenate([q["uniq"] for q in parts]))
    return {"uniq": uniq, "exact": None, "f32": parts[0]["f32"], "integer": all(q["integer"] for q in parts),
            "n_missing": nm, "lo": min(los) if los else float("nan"), "hi": max(his) if his else float("nan")}


# --------------------------------------------------------------------------------------- finalize
@dataclass
class Dictionaries:
    """The whole table's dictionaries: what :func:`finalize` makes of the combined profile, and
    what every chunk is encoded with (:func:`encode_chunk`). A :class:`~gpuanon.table.encoding.Table`
    is made of them and the encoded arrays (``Table.of``)."""

    qis: list
    kinds: dict
    columns: list  # Column, in QI order
    sensitive: str | None
    target: str | None
    sa_values: list = field(default_factory=list)
    target_values: list = field(default_factory=list)
    sa_ordered: bool = False
    missing_columns: list = field(default_factory=list)  # QI indices whose missing values make blocks
    patterns: np.ndarray | None = None  # (blocks, missing columns) bool, sorted; None: no blocks
    n_rows: int = 0
    #: categorical QI -> its user hierarchy bound to these codes (``gpuanon.hierarchy.ColumnHierarchy``,
    #: host arrays); a cluster's workers bind them to their tables (:func:`.distributed.worker.local_table`)
    hierarchies: dict = field(default_factory=dict)

    @property
    def n_blocks(self) -> int:
        return 1 if self.patterns is None else int(self.patterns.shape[0])


def finalize(profile: Profile, schema, orders: dict | None = None) -> Dictionaries:
    """Finalize: the dictionaries of the table ``profile`` describes.

    ``orders``: categorical QI -> its values in a hierarchy's leaf order (``Plan.leaf_orders``),
    the order its codes follow.
    """
    orders = orders or {}
    tv = profile.target_values
    torder = value_order(tv) if tv is not None else None
    target_values = [] if tv is None else [tv[i] for i in torder]
    sa_values = [] if schema.sensitive is None else target_values if schema.sensitive == schema.target else \
        [profile.sa_values[i] for i in value_order(profile.sa_values)]
    columns = []
    for name in schema.quasi_identifiers:  # a loop over columns
        q = profile.columns[name]
        if "values" in q:
            values, counts = q["values"], q["counts"]
            joint = counts[:, torder] if orders.get(name) is None and target_values else None
            order = category_order(values, joint, orders.get(name))
            na = [i for i, v in enumerate(values) if is_na(v)]
            columns.append(Column(name, "categorical", None, [values[i] for i in order],
                                  n_missing=int(counts[na].sum())))
        elif (ex := q["exact"]) is not None:
            off = ex.offsets()
            lo, hi = (0.0, float(off[-1])) if off.shape[0] else (float("nan"), float("nan"))
            columns.append(Column(name, "numeric", off, [], lo, hi, q["n_missing"], ex.kind == "int", exact=ex))
        else:
            columns.append(Column(name, "numeric", "f32" if q["f32"] else q["uniq"], [], q["lo"], q["hi"],
                                  q["n_missing"], q["integer"]))
    cols, rows = profile.missing
    return Dictionaries(list(schema.quasi_identifiers), {c: schema.kinds[c] for c in schema.quasi_identifiers},
                        columns, schema.sensitive, schema.target, sa_values, target_values,
                        bool(schema.sensitive_ordered), list(cols), rows if cols else None, profile.n)


# ----------------------------------------------------------------------------------------- encode
def encode_chunk(chunk: Chunk, dicts: Dictionaries, xp=np) -> dict:
    """A chunk's QI keys (on ``xp``'s device), sensitive / target codes and block ids with the
    whole table's dictionaries: ``{"keys", "blocks", "sa", "target"}`` (the keys are the chunk's,
    remapped in place: once per chunk)."""
    prof, keys = chunk.profile, chunk.keys
    for j, (name, col) in enumerate(zip(dicts.qis, dicts.columns)):  # a loop over columns
        q = prof.columns[name]
        if col.kind == "categorical":
            pos, c = _positions(q["values"], col.categories, name).astype(np.uint32), chunk.codes[j]
            keys[j] = to_device(pos[c], xp) if isinstance(c, np.ndarray) else to_device(pos, xp)[c]  # on the device
            continue
        local = q["uniq"]
        full = col.exact.values if col.exact is not None else col.info
        if local is None or local.shape[0] in (0, full.shape[0]):  # float32, nothing here, or the same values
            continue
        remap = to_device(np.searchsorted(full, local.astype(full.dtype)).astype(np.uint32), xp)
        k = keys[j]
        keys[j] = xp.where(k == MISSING, MISSING, remap[xp.minimum(k, local.shape[0] - 1).astype(xp.int64)])
    tg = sa = None
    if dicts.target is not None:
        tg = _positions(prof.target_values, dicts.target_values, dicts.target).astype(np.int32)[chunk.target]
    if dicts.sensitive is not None:
        sa = tg if dicts.sensitive == dicts.target else \
            _positions(prof.sa_values, dicts.sa_values, dicts.sensitive).astype(np.int32)[chunk.sa]
    return {"keys": keys, "blocks": _blocks(chunk, dicts, xp),
            "sa": None if sa is None else to_device(sa, xp), "target": None if tg is None else to_device(tg, xp)}


def _positions(local: list, dictionary: list, name) -> np.ndarray:
    """Each of the chunk's distinct values' position in ``dictionary`` (a missing value at the
    dictionary's missing entry)."""
    pos = pd.Index(dictionary, dtype=object).get_indexer(pd.Index(local, dtype=object)).astype(np.int64)
    na = [i for i, v in enumerate(dictionary) if is_na(v)]
    miss = np.asarray([is_na(v) for v in local], dtype=bool)
    if na and miss.any():
        pos[miss] = na[0]
    if (pos < 0).any():
        bad = local[int(np.flatnonzero(pos < 0)[0])]
        raise SchemaError(f"value {bad!r} of column '{name}' is missing from the table's dictionary; the "
                          f"shards changed while the run read them")
    return pos


def _blocks(chunk: Chunk, dicts: Dictionaries, xp):
    """Each row's block: the position of its missing pattern among the table's."""
    if dicts.patterns is None:
        return None
    cols, rows = chunk.profile.missing  # nothing missing here: every row has the one pattern of none
    codes = chunk.pattern if chunk.pattern is not None else np.zeros(chunk.profile.n, dtype=np.int64)
    if tuple(cols) != tuple(dicts.missing_columns) or rows.shape[0] != dicts.patterns.shape[0]:
        full = np.zeros((rows.shape[0], len(dicts.missing_columns)), dtype=bool)
        full[:, [dicts.missing_columns.index(j) for j in cols]] = rows
        both = np.concatenate([dicts.patterns, full]).astype(np.uint8)
        _, inv = np.unique(both, axis=0, return_inverse=True)
        codes = inv.reshape(-1)[dicts.patterns.shape[0]:].astype(np.int64)[codes]
    return to_device(codes, xp)
