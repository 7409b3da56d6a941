"""The encoded table every algorithm runs on, and the dictionaries to decode it.

QIs become one ``(d, n)`` uint32 key matrix (order-preserving keys, see :mod:`kernels.keys`;
integers beyond 2**53 and dates / times are ranked on their exact values, :mod:`gpuanon.table.exact`);
the sensitive attribute and the target become integer codes. Data frames exist only at the edges.
:func:`kernel_specs` describes the columns to the Mondrian kernel (:mod:`kernels.specs`).

Hierarchies are not part of the encoding: a fit binds them to its own copy of the table
(:meth:`Table.bind_hierarchies`; ``Table.hierarchies`` maps a QI to its bound hierarchy).

The dictionaries themselves (sorted values, category code order, missing patterns) are made by
the chunk / combine / finalize reductions of :mod:`gpuanon.table.dictionaries`; :func:`encode` is their
one-chunk case, and a cluster runs the same functions on its shards.

Examples
--------
>>> import pandas as pd
>>> from gpuanon.table.schema import Schema
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
from kernels.keys import MISSING, decode_keys
from kernels.specs import CategoricalSpec, ColumnSpec, HierarchySpec, NumericSpec

from ..backend import namespace_by_name, to_device, to_host
from .dictionaries import Column, Dictionaries, codes_sorted, encode_chunk, finalize, profile_chunk
from .schema import Schema
from .values import is_na, jsonable, sort_key

__all__ = ["Column", "Dictionaries", "Table", "codes_sorted", "encode", "is_na", "kernel_specs", "sort_key"]


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

    @classmethod
    def of(cls, dicts: Dictionaries, arrays: dict, xp) -> "Table":
        """The table of some rows: their encoded ``arrays`` (``keys``, ``blocks``, ``sa``, ``target``,
        as :func:`~gpuanon.table.dictionaries.encode_chunk` makes them) and the whole table's ``dicts``."""
        blocks = arrays["blocks"]
        return cls(n_rows=int(arrays["keys"].shape[1]), columns=dicts.columns, keys=arrays["keys"], blocks=blocks,
                   n_blocks=1 if blocks is None else dicts.n_blocks, sa=arrays["sa"], sa_values=dicts.sa_values,
                   sa_ordered=dicts.sa_ordered, target=arrays["target"], target_values=dicts.target_values, xp=xp)

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
            "sensitive_values": [jsonable(v) for v in self.sa_values],
            "sensitive_ordered": self.sa_ordered,
            "target_values": [jsonable(v) for v in self.target_values],
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
    >>> from gpuanon.table.schema import Schema
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


def encode(df: pd.DataFrame, schema: Schema, xp=np, orders: dict | None = None, resident=None,
           factorized: dict | None = None) -> Table:
    """Encode the QIs, sensitive attribute and target of ``df`` for the given backend.

    The one-chunk case of :mod:`gpuanon.table.dictionaries`: the profile of the whole table, finalized
    (the combine of one profile is that profile), and the table's codes with its dictionaries --
    which are the chunk's own, so its numeric keys and sorted values made on the device are kept
    as they are. ``orders`` maps a categorical QI to the order its categories must be coded in (a
    hierarchy's leaf order, so that Mondrian's ordinal cuts follow the hierarchy). ``resident``: the
    device-resident part of the input (:func:`gpuanon.table.resident.split_resident`; ``df`` holds the
    rest): its plain numeric QIs are keyed on the device where they are, nothing of them uploaded.
    ``factorized``: the text QIs' codes as :meth:`~gpuanon.table.schema.Schema.from_frame` hashed them on
    ``df`` (not hashed again).
    """
    profile, chunk = profile_chunk(df, schema, xp, resident=resident, factorized=factorized)
    dicts = finalize(profile, schema, orders)
    for j, uniq_x in chunk.uniq_x.items():  # a loop over columns: the device copy of each dictionary
        dicts.columns[j].info_x = uniq_x
    return Table.of(dicts, encode_chunk(chunk, dicts, xp), xp)
