"""The encoded table every algorithm runs on, and the dictionaries to decode it.

QIs become one ``(d, n)`` uint32 key matrix (order-preserving keys, see :mod:`kernels.keys`;
integers beyond 2**53 and dates / times are ranked on their exact values, :mod:`gpuanon.exact`);
the sensitive attribute and the target become integer codes. Data frames exist only at the edges.
:func:`kernel_specs` describes the columns to the Mondrian kernel (:mod:`kernels.specs`).

Hierarchies are not part of the encoding: a fit binds them to its own copy of the table
(:meth:`Table.bind_hierarchies`; ``Table.hierarchies`` maps a QI to its bound hierarchy).

Category code order (the contract, section 1): with a target, categories are ordered by
(majority target value, share of that majority, value), so that Mondrian's ordinal cuts keep
similar categories together; without one, by value. A missing category is its own category and
sorts after the others with the same majority and share.

Examples
--------
>>> import pandas as pd
>>> from gpuanon.schema import Schema
>>> df = pd.DataFrame({"a": [1.0, 2.0, None], "c": ["x", "y", "x"], "y": [0, 1, 0]})
>>> t = encode(df, Schema.from_frame(df, ["a", "c"], sensitive="y", target="y"))
>>> t.keys.shape, t.n_blocks
((2, 3), 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd

from kernels.counts import count_values
from kernels.keys import MISSING, decode_keys, float32_keys, rank_keys
from kernels.specs import CategoricalSpec, ColumnSpec, HierarchySpec, NumericSpec

from .backend import get_namespace, namespace_by_name, to_device, to_host
from .exact import exact_of
from .schema import Schema


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
    #: integers beyond 2**53 and dates / times: the exact dictionary (:class:`gpuanon.exact.Exact`);
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
            d["categories"] = [None if is_na(v) else _jsonable(v) for v in self.categories]
        elif self.exact is not None:
            n = self.exact.values.shape[0]
            d.update(min=self.exact.python(0) if n else None, max=self.exact.python(n - 1) if n else None,
                     integer=self.integer, **self.exact.to_dict())
        else:
            d.update(min=_jsonable(self.lo), max=_jsonable(self.hi), integer=self.integer)
        return d


def is_na(v) -> bool:
    """A missing value (``pd.isna``; False for values it cannot judge, e.g. lists)."""
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


@dataclass
class Table:
    """An encoded table: QI keys, block ids (missing-value patterns), SA and target codes."""

    n_rows: int
    columns: list[Column]
    keys: Any  # (d, n) uint32 on the backend's device
    blocks: Any | None  # (n,) int64 missing-pattern ids, or None when nothing is missing
    n_blocks: int
    sa: Any | None = None  # (n,) int32
    sa_values: list = field(default_factory=list)
    sa_ordered: bool = False
    target: Any | None = None
    target_values: list = field(default_factory=list)
    xp: Any = np
    #: whole-table statistics computed at first use and kept (the metrics' per-column value counts);
    #: shared by the tables ``dataclasses.replace`` makes of this one, so a sweep computes them once
    column_stats: dict = field(default_factory=dict, repr=False, compare=False)
    #: QI name -> its bound hierarchy (``gpuanon.hierarchy.ColumnHierarchy``): set by bind_hierarchies
    hierarchies: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    def __getstate__(self):  # a pickle keeps the array module by name (modules do not pickle)
        return dict(self.__dict__, xp="numpy" if self.xp is np else "cupy", hierarchies=dict(self.hierarchies))

    def __setstate__(self, state):
        self.__dict__.update(state, xp=namespace_by_name(state["xp"]), hierarchies=MappingProxyType(state["hierarchies"]))

    @property
    def qi_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def bind_hierarchies(self, bound: Mapping[str, Any]) -> None:
        """Generalize the named categorical QIs by these bound hierarchies (the others by sets).

        ``bound`` maps a QI name to a ``gpuanon.hierarchy.ColumnHierarchy`` (``.hierarchy``,
        ``.code_levels``) and replaces whatever was bound before. Call it on a fit's own copy of
        the table (``dataclasses.replace``): a table shared with other fits is never affected.
        """
        bound = dict(bound)
        unknown = sorted(set(bound) - {c.name for c in self.columns if c.kind == "categorical"})
        if unknown:
            raise ValueError(f"hierarchies bound to {unknown}, which are not categorical QIs of the table")
        self.hierarchies = MappingProxyType(bound)

    @property
    def n_sa(self) -> int:
        return len(self.sa_values)

    def sa_distribution(self):
        """The whole table's sensitive-value distribution (host float64)."""
        if self.sa is None:
            return None
        counts = to_host(count_values(self.sa, self.n_sa, self.xp)).astype(np.float64)
        return counts / max(counts.sum(), 1.0)

    def sa_missing_rows(self) -> int:
        """How many rows have a missing sensitive value (its code is the last, see ``codes_sorted``)."""
        if self.sa is None or not self.sa_values or not is_na(self.sa_values[-1]):
            return 0
        return int(to_host(count_values(self.sa, self.n_sa, self.xp))[-1])

    def numeric_values(self, j: int, keys=None):
        """Decoded float64 values of numeric column ``j`` (NaN where missing); for a column with an
        exact dictionary (``Column.exact``) each value's distance from the column's smallest."""
        xp = self.xp
        k = self.keys[j] if keys is None else keys
        v = decode_keys(k, self.columns[j].decode_table(xp), xp)
        return xp.where(k == MISSING, xp.nan, v)

    def encoding_metadata(self) -> dict:
        return {
            "columns": [c.to_dict() for c in self.columns],
            "sensitive_values": [_jsonable(v) for v in self.sa_values],
            "sensitive_ordered": self.sa_ordered,
            "target_values": [_jsonable(v) for v in self.target_values],
        }


def kernel_specs(table: Table, xp=None) -> list[ColumnSpec]:
    """The Mondrian kernel's spec of every QI of ``table`` (:mod:`kernels.specs`), in key order.

    The one place they are built: a numeric column's :class:`~kernels.specs.NumericSpec` carries
    its decode table on ``xp``'s device (copied once, at encode); a categorical column bound to a
    hierarchy (``table.hierarchies``) gets a :class:`~kernels.specs.HierarchySpec` (its code
    levels, and the share of leaves under every node, copied to the device here); any other
    categorical column a :class:`~kernels.specs.CategoricalSpec`. ``xp`` defaults to the table's.

    Examples
    --------
    >>> import pandas as pd
    >>> from gpuanon.schema import Schema
    >>> df = pd.DataFrame({"a": [1.0, 2.0, 5.0], "c": ["x", "y", "x"]})
    >>> kernel_specs(encode(df, Schema.from_frame(df, ["a", "c"])))
    [NumericSpec(values=<3 values>), CategoricalSpec()]
    """
    xp = table.xp if xp is None else xp
    specs: list[ColumnSpec] = []
    for c in table.columns:
        bound = table.hierarchies.get(c.name) if c.kind == "categorical" else None
        if c.kind == "numeric":
            info = c.decode_table(xp)
            specs.append(NumericSpec(None if isinstance(info, str) else info))
        elif bound is None:
            specs.append(CategoricalSpec())
        else:
            h = bound.hierarchy
            frac = to_device(np.asarray(h.n_under, dtype=np.float64) / h.n_leaves, xp)
            specs.append(HierarchySpec(bound.code_levels, frac))
    return specs


def codes_sorted(series: pd.Series):
    """Codes of a column with categories sorted by value (missing last, its own category)."""
    codes, uniques = pd.factorize(series, sort=False, use_na_sentinel=False)
    uniq = list(uniques)
    order = sorted(range(len(uniq)), key=lambda i: (is_na(uniq[i]), sort_key(uniq[i])))
    remap = np.empty(len(uniq), dtype=np.int64)
    remap[np.asarray(order, dtype=np.int64)] = np.arange(len(uniq))
    return remap[codes].astype(np.int32), [uniq[i] for i in order]


def sort_key(v):
    """Sort key of a category: numbers by value, then text, missing last."""
    if is_na(v):
        return (2, "")
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, str(v))


def category_order(uniq: list, joint=None, order_values=None) -> list:
    """Finalize of a categorical column's dictionary (one process and a cluster alike): the positions
    of its distinct values ``uniq`` in code order. A hierarchy's leaf order ``order_values`` decides
    when given (matched by text, missing as ``NaN``; values not in it last; ties: ``uniq``'s order);
    else with ``joint`` (rows per value x target value) the majority target value, then its share,
    then the value (missing last); else the value.

    >>> category_order(["b", "a", "c"]), category_order(["b", "a"], np.array([[1, 3], [2, 0]]))
    ([1, 0, 2], [1, 0])
    """
    m = len(uniq)
    if order_values is not None:
        pos = {("NaN" if is_na(v) else str(v)): i for i, v in enumerate(order_values)}
        return sorted(range(m), key=lambda i: pos.get("NaN" if is_na(uniq[i]) else str(uniq[i]), len(pos)))
    if joint is not None:
        tstar = joint.argmax(axis=1)
        share = joint[np.arange(m), tstar] / np.maximum(joint.sum(axis=1), 1)
        return sorted(range(m), key=lambda i: (int(tstar[i]), float(share[i]), is_na(uniq[i]), sort_key(uniq[i])))
    return sorted(range(m), key=lambda i: (is_na(uniq[i]), sort_key(uniq[i])))


def _encode_categorical(series: pd.Series, target_codes, n_target, order_values=None):
    codes, uniques = pd.factorize(series, sort=False, use_na_sentinel=False)
    uniq = list(uniques)
    m = len(uniq)
    f = None
    if order_values is None and target_codes is not None and n_target > 0:
        f = np.bincount(codes.astype(np.int64) * n_target + target_codes, minlength=m * n_target)
        f = f.reshape(m, n_target)
    order = category_order(uniq, f, order_values)
    remap = np.empty(m, dtype=np.uint32)
    remap[np.asarray(order, dtype=np.int64)] = np.arange(m, dtype=np.uint32)
    return remap[codes], [uniq[i] for i in order]


def _exact_column(name, ex, keys) -> Column:
    """The Column of a QI with an exact dictionary (its keys are already ranks)."""
    off = ex.offsets()
    hi = float(off[-1]) if off.shape[0] else float("nan")
    return Column(name, "numeric", off, [], 0.0 if off.shape[0] else float("nan"), hi,
                  int((keys == MISSING).sum()), ex.kind == "int", exact=ex)


def _encode_numeric(name, s: pd.Series, xp, keys, j: int, columns: list):
    """Key a float-held numeric QI into ``keys[j]``; append its Column; ``(n missing, missing mask)``."""
    n = len(s)
    integer = pd.api.types.is_integer_dtype(s) and not pd.api.types.is_bool_dtype(s)
    arr = s.to_numpy(dtype=np.float32 if s.dtype == np.float32 else np.float64, na_value=np.nan)
    miss = np.isnan(arr)
    nm = int(miss.sum())
    if arr.dtype == np.float32:
        kj = float32_keys(to_device(arr, xp), xp)
        info, info_x = "f32", None
    else:
        kj, uniq = rank_keys(to_device(arr, xp), xp)
        info, info_x = to_host(uniq), uniq
    keys[j] = kj
    lo = float(np.nanmin(arr)) if nm < n else float("nan")
    hi = float(np.nanmax(arr)) if nm < n else float("nan")
    columns.append(Column(name, "numeric", info, [], lo, hi, nm, bool(integer),
                          info_x=info_x))
    return nm, miss


def encode(df: pd.DataFrame, schema: Schema, xp=np, orders: dict | None = None) -> Table:
    """Encode the QIs, sensitive attribute and target of ``df`` for the given backend.

    ``orders`` maps a categorical QI to the order its categories must be coded in (a
    hierarchy's leaf order, so that Mondrian's ordinal cuts follow the hierarchy).
    """
    orders = orders or {}
    n = len(df)
    target_codes, target_values = None, []
    if schema.target is not None:
        target_codes, target_values = codes_sorted(df[schema.target])
    sa_codes, sa_values = None, []
    if schema.sensitive is not None:
        if schema.sensitive == schema.target:
            sa_codes, sa_values = target_codes, target_values
        else:
            sa_codes, sa_values = codes_sorted(df[schema.sensitive])
    d = len(schema.quasi_identifiers)
    keys = xp.empty((d, n), dtype=xp.uint32)
    columns: list[Column] = []
    pattern = np.zeros(n, dtype=np.int64)
    any_missing = False
    n_num = 0
    for j, name in enumerate(schema.quasi_identifiers):
        s = df[name]
        if schema.kinds[name] == "categorical":
            codes, cats = _encode_categorical(s, target_codes, len(target_values), orders.get(name))
            keys[j] = to_device(codes, xp)
            columns.append(Column(name, "categorical", None, cats, n_missing=int(s.isna().sum())))
            continue
        ex = exact_of(s, name)
        if ex is not None:  # integers beyond 2**53, dates and times: ranked exactly
            columns.append(_exact_column(name, *ex))
            keys[j] = to_device(ex[1], xp)
            miss = ex[1] == MISSING
            nm = columns[-1].n_missing
            s = None
        elif not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            s = pd.to_numeric(s, errors="coerce")
        if s is not None:
            nm, miss = _encode_numeric(name, s, xp, keys, j, columns)
        if nm:
            any_missing = True
            pattern = pattern * 2 + miss
            n_num += 1
            if n_num % 60 == 0:  # keep the pattern id small: renumber it densely
                pattern = pd.factorize(pattern, sort=True)[0].astype(np.int64)
    blocks, n_blocks = None, 1
    if any_missing:
        codes, uniq = pd.factorize(pattern, sort=True)
        blocks, n_blocks = to_device(codes.astype(np.int64), xp), len(uniq)
    return Table(
        n_rows=n,
        columns=columns,
        keys=keys,
        blocks=blocks,
        n_blocks=n_blocks,
        sa=None if sa_codes is None else to_device(sa_codes, xp),
        sa_values=sa_values,
        sa_ordered=schema.sensitive_ordered,
        target=None if target_codes is None else to_device(target_codes, xp),
        target_values=target_values,
        xp=xp,
    )
