"""A sharded table's encoding: global dictionaries from per-shard profiles, keys made on the workers.

The single-process encoding (:func:`gpuanon.encoding.encode`) depends on the whole table: the
sorted distinct values of every rank-keyed numeric column, the order of each categorical
column's codes (by majority target value and its share, then by value), the sensitive and
target dictionaries and the missing-value patterns. Each is a chunk / combine / finalize
reduction here:

* chunk (:func:`profile_shard`, on the worker): the shard's distinct values, value x target
  counts of categorical columns, minimum, maximum and missing count of numeric ones, its
  distinct missing patterns;
* combine / finalize (:func:`combine_profiles`, here): :class:`GlobalEncoding`, whose
  :class:`~gpuanon.encoding.Column` objects are those :func:`~gpuanon.encoding.encode` makes on
  the whole table (a test holds them equal);
* :func:`encode_shard` (on the worker): the shard's keys, codes and block ids with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kernels.keys import MISSING, float32_keys

from ..backend import to_device
from ..encoding import Column, category_order
from ..encoding import is_na as _isna  # the single-process encoder's own ordering rules
from ..encoding import sort_key as _sort_key
from ..errors import SchemaError
from ..exact import needs_exact

#: missing-value patterns are kept as bits of one int64 (the single-process encoder renumbers them)
MAX_MISSING_COLUMNS = 62


def _numeric_series(s: pd.Series) -> pd.Series:
    if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        s = pd.to_numeric(s, errors="coerce")
    return s


def _numeric_array(s: pd.Series) -> np.ndarray:
    return s.to_numpy(dtype=np.float32 if s.dtype == np.float32 else np.float64, na_value=np.nan)


def _sorted_values(values) -> list:
    """Distinct values in the encoder's dictionary order (missing last)."""
    uniq = list(pd.unique(pd.Series(list(values), dtype=object)))
    return sorted(uniq, key=lambda v: (_isna(v), _sort_key(v)))


def profile_shard(df: pd.DataFrame, qis, kinds: dict, sensitive, target) -> dict:
    """Chunk: what the global dictionaries need from one shard (small, host objects)."""
    out: dict = {"n": int(len(df)), "columns": {}, "numeric_missing": None}
    tgt = df[target] if target is not None else None
    miss_cols = []
    for name in qis:
        s = df[name]
        if kinds[name] == "categorical":
            if tgt is not None:
                vc = pd.DataFrame({"v": s.astype(object), "t": tgt.astype(object)}).groupby(
                    ["v", "t"], dropna=False, sort=False).size()
                out["columns"][name] = {"pairs": vc}
            else:
                out["columns"][name] = {"values": s.astype(object).value_counts(dropna=False, sort=False)}
            continue
        if needs_exact(s):
            raise SchemaError(f"quasi-identifier '{name}' holds dates or integers beyond 2**53, which a cluster run "
                              f"does not key exactly yet; run it in one process (without --cluster) or declare it "
                              f"categorical (--categorical {name})")
        raw = s
        s = _numeric_series(s)
        if raw is not s:  # the sample the schema was checked on may not have shown a bad value
            bad = raw[s.isna() & raw.notna()]
            if len(bad):
                raise SchemaError(f"quasi-identifier '{name}' is declared numeric but holds non-numeric values such "
                                  f"as {str(bad.iloc[0])!r}; declare it categorical or clean the column")
        arr = _numeric_array(s)
        miss = np.isnan(arr)
        real = arr[~miss]
        if np.isinf(real).any():
            raise SchemaError(f"quasi-identifier '{name}' holds infinite values; replace them (or mark them missing) "
                              f"or declare the column categorical")
        info = {"f32": arr.dtype == np.float32, "integer": bool(pd.api.types.is_integer_dtype(s) and not pd.api.types.is_bool_dtype(s)),
                "n_missing": int(miss.sum()),
                "lo": float(real.min()) if real.size else np.nan, "hi": float(real.max()) if real.size else np.nan}
        if arr.dtype != np.float32:
            info["uniq"] = np.unique(real)
        out["columns"][name] = info
        miss_cols.append(miss)
    if miss_cols:
        m = np.stack(miss_cols, axis=1)
        if m.any():
            out["numeric_missing"] = np.unique(m, axis=0)
    for role, col in (("target_values", target), ("sa_values", sensitive)):
        out[role] = None if col is None else pd.unique(df[col].astype(object))
    return out


@dataclass
class GlobalEncoding:
    """The whole table's dictionaries: every worker encodes its shard with these."""

    qis: list
    kinds: dict
    columns: list  # gpuanon.encoding.Column, as encode() makes them on the whole table
    sensitive: str | None
    target: str | None
    sa_values: list = field(default_factory=list)
    target_values: list = field(default_factory=list)
    sa_ordered: bool = False
    missing_columns: list = field(default_factory=list)  # QI indices whose missing values make blocks
    patterns: np.ndarray | None = None  # sorted distinct missing patterns (int64 bits), None: no blocks
    n_rows: int = 0
    category_counts: dict = field(default_factory=dict)  # categorical QI -> rows per code (int64)
    #: categorical QI -> its user hierarchy bound to these codes (``gpuanon.hierarchy.ColumnHierarchy``,
    #: host arrays); every worker's tables bind them (:func:`.worker.local_table`)
    hierarchies: dict = field(default_factory=dict)

    @property
    def n_blocks(self) -> int:
        return 1 if self.patterns is None else int(self.patterns.shape[0])


def _order_categories(pairs: pd.Series | None, counts: pd.Series | None, target_values: list,
                      order_values: list | None = None):
    """Categories in code order and rows per code, as the single-process encoder orders them
    (``order_values``: a hierarchy's leaf order, which then decides the order)."""
    if pairs is None:
        if order_values is not None:
            uniq = list(counts.index)
            cats = [uniq[i] for i in category_order(uniq, None, order_values)]
        else:
            cats = _sorted_values(counts.index)
        idx = pd.Index(counts.index, dtype=object).get_indexer(pd.Index(cats, dtype=object))
        return cats, counts.to_numpy()[idx].astype(np.int64)
    vals = pd.Index(pairs.index.get_level_values(0), dtype=object)
    tvals = pd.Index(pairs.index.get_level_values(1), dtype=object)
    uniq = list(pd.unique(vals.to_numpy()))
    ui = pd.Index(uniq, dtype=object)
    m, nt = len(uniq), len(target_values)
    vcode = ui.get_indexer(vals)
    tcode = pd.Index(target_values, dtype=object).get_indexer(tvals)
    f = np.bincount(vcode.astype(np.int64) * nt + tcode, weights=pairs.to_numpy(), minlength=m * nt)
    f = f.astype(np.int64).reshape(m, nt)
    order = category_order(uniq, f, order_values)
    return [uniq[i] for i in order], f.sum(axis=1)[order]


def combine_profiles(profiles: list, qis, kinds: dict, sensitive, target, sa_ordered: bool,
                     orders: dict | None = None) -> GlobalEncoding:
    """Combine and finalize the shards' profiles into the whole table's dictionaries.

    ``orders``: categorical QI -> its values in a hierarchy's leaf order (``leaf_orders`` of the
    plan), the order its codes follow, as in :func:`gpuanon.encoding.encode`.
    """
    orders = orders or {}
    n = sum(p["n"] for p in profiles)
    target_values = [] if target is None else _sorted_values(np.concatenate([p["target_values"] for p in profiles]))
    if sensitive is None:
        sa_values = []
    elif sensitive == target:
        sa_values = target_values
    else:
        sa_values = _sorted_values(np.concatenate([p["sa_values"] for p in profiles]))
    columns, cat_counts, numeric_idx = [], {}, []
    for j, name in enumerate(qis):
        parts = [p["columns"][name] for p in profiles]
        if kinds[name] == "categorical":
            if target is not None:
                pairs = pd.concat([q["pairs"] for q in parts]).groupby(level=[0, 1], dropna=False, sort=False).sum()
                cats, cnt = _order_categories(pairs, None, target_values, orders.get(name))
            else:
                counts = pd.concat([q["values"] for q in parts]).groupby(level=0, dropna=False, sort=False).sum()
                cats, cnt = _order_categories(None, counts, target_values, orders.get(name))
            n_missing = int(sum(c for v, c in zip(cats, cnt) if _isna(v)))
            cats = [np.nan if _isna(v) else v for v in cats]  # as pd.factorize gives it (None -> nan)
            columns.append(Column(name, "categorical", None, cats, n_missing=n_missing))
            cat_counts[name] = np.asarray(cnt, dtype=np.int64)
            continue
        f32 = {q["f32"] for q in parts}
        if len(f32) > 1:
            raise SchemaError(f"numeric quasi-identifier '{name}' is float32 in some shards and not in others; "
                              f"write every file with the same column types")
        nm = sum(q["n_missing"] for q in parts)
        lo = np.nanmin([q["lo"] for q in parts]) if nm < n else float("nan")
        hi = np.nanmax([q["hi"] for q in parts]) if nm < n else float("nan")
        info = "f32" if f32 == {True} else np.unique(np.concatenate([q["uniq"] for q in parts]))
        columns.append(Column(name, "numeric", info, [], float(lo), float(hi), int(nm),
                              all(q["integer"] for q in parts)))
        numeric_idx.append(j)
    missing_cols = [j for j in numeric_idx if columns[j].n_missing]
    patterns = None
    if missing_cols:
        if len(missing_cols) > MAX_MISSING_COLUMNS:
            raise SchemaError(f"{len(missing_cols)} numeric quasi-identifiers have missing values; a cluster run "
                              f"handles at most {MAX_MISSING_COLUMNS}: fill some of them first")
        sel = [numeric_idx.index(j) for j in missing_cols]
        pats = [_pattern_bits(p["numeric_missing"][:, sel]) for p in profiles if p["numeric_missing"] is not None]
        patterns = np.unique(np.concatenate(pats + [np.zeros(0, dtype=np.int64)]))
    return GlobalEncoding(list(qis), dict(kinds), columns, sensitive, target, sa_values, target_values, sa_ordered,
                          missing_cols, patterns, n, cat_counts)


def _pattern_bits(miss: np.ndarray) -> np.ndarray:
    """One int64 per row of a (rows, columns) bool matrix, first column most significant."""
    bits = np.zeros(miss.shape[0], dtype=np.int64)
    for c in range(miss.shape[1]):  # a loop over columns
        bits = bits * 2 + miss[:, c]
    return bits


def _codes(values: pd.Series, dictionary: list) -> np.ndarray:
    """Codes of ``values`` in ``dictionary`` (every missing value is the dictionary's missing entry)."""
    miss = values.isna().to_numpy()
    real = [i for i, v in enumerate(dictionary) if not _isna(v)]
    idx = pd.Index([dictionary[i] for i in real], dtype=object)
    pos = idx.get_indexer(pd.Index(values.astype(object), dtype=object))
    codes = np.where(pos >= 0, np.asarray(real, dtype=np.int64)[np.maximum(pos, 0)] if real else -1, -1)
    if miss.any():
        na = [i for i, v in enumerate(dictionary) if _isna(v)]
        codes[miss] = na[0] if na else -1
    if (codes < 0).any():
        bad = values[codes < 0].iloc[0]
        raise SchemaError(f"value {bad!r} of column '{values.name}' is missing from the table's dictionary; the "
                          f"shards changed while the run read them")
    return codes


def encode_shard(df: pd.DataFrame, enc: GlobalEncoding, xp=np) -> dict:
    """The shard's QI keys, sensitive / target codes and block ids, with the global dictionaries."""
    n = len(df)
    keys = xp.empty((len(enc.qis), n), dtype=xp.uint32)
    miss_cols = []
    for j, (name, col) in enumerate(zip(enc.qis, enc.columns)):
        if col.kind == "categorical":
            keys[j] = to_device(_codes(df[name], col.categories).astype(np.uint32), xp)
            continue
        arr = _numeric_array(_numeric_series(df[name]))
        miss = np.isnan(arr)
        if isinstance(col.info, str):
            keys[j] = float32_keys(to_device(arr, xp), xp)
        else:
            k = np.searchsorted(col.info, arr).astype(np.uint32)
            k[miss] = MISSING
            keys[j] = to_device(k, xp)
        if j in enc.missing_columns:
            miss_cols.append(miss)
    blocks = None
    if enc.patterns is not None:
        bits = _pattern_bits(np.stack(miss_cols, axis=1))
        blocks = to_device(np.searchsorted(enc.patterns, bits).astype(np.int64), xp)
    sa = tg = None
    if enc.target is not None:
        tg = to_device(_codes(df[enc.target], enc.target_values).astype(np.int32), xp)
    if enc.sensitive is not None:
        sa = tg if enc.sensitive == enc.target else to_device(_codes(df[enc.sensitive], enc.sa_values).astype(np.int32), xp)
    return {"keys": keys, "blocks": blocks, "sa": sa, "target": tg}
