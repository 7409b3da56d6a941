"""Partitions -> output values: generalization of every QI per equivalence class.

Numeric QI: the class's ``[min, max]``, written as ``range`` text (see :mod:`gpuanon.cells`:
``lo-hi``, ``[lo, hi]`` when the lower bound is negative, the single value when equal),
``minmax`` columns (``<col>_min``, ``<col>_max``) or its ``mean``. Categorical QI with a
hierarchy: the label of the lowest node covering the class's values (``*`` is the root: the cell
is suppressed). Without one: the set of the class's distinct values, joined by ``|`` in code
order (one escaping rule for every cell: ``|`` and ``\\`` inside a value are escaped with ``\\``).
Every categorical cell is text, a single value too (``108``, ``1.5``, ``True``: the value's
``str``), so a column of integer, float or bool categories is one string column in every format.
The output keeps the input's columns and row order; suppressed rows are removed; identifiers are
dropped.

The class statistics (:class:`gpuanon.classes.ClassStats`) are built once on the device after
partitioning and shared by generalization, the published cells the verifier groups by, and the
metrics. Text is
made once per class and published as a ``pandas.Categorical`` indexed by the row's class (a
dictionary column in Parquet); ``minmax`` and ``mean`` columns are gathered from per-class
values. Nothing here loops over rows or classes in Python.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..backend import device_column, device_frame, is_device_frame, stage, to_device, to_host
from ..cells import in_input_order, is_missing, minmax_dtype, range_texts, set_text
from ..classes import ClassStats
from ..encoding import Table

FORMATS = ("range", "minmax", "mean")


def _mask_texts(masks: np.ndarray, cats: list) -> np.ndarray:
    """Text of each class's category set: one string per distinct mask."""
    uniq, inv = np.unique(masks, axis=0, return_inverse=True)
    texts = np.empty(uniq.shape[0], dtype=object)
    for u in range(uniq.shape[0]):  # a loop over distinct generalized values
        codes = [w * 64 + b for w in range(uniq.shape[1]) for b in range(64) if (int(uniq[u, w]) >> b) & 1]
        if len(codes) == 1:
            v = cats[codes[0]]
            texts[u] = None if is_missing(v) else set_text([v])  # text, whatever the value's type
        else:
            texts[u] = set_text(cats[c] for c in codes)
    return texts[inv.reshape(-1)]


def _categorical(class_values: np.ndarray, row_pos: np.ndarray) -> pd.Categorical:
    """A column of per-class values as a Categorical indexed by each row's class (missing: NaN)."""
    codes, uniq = pd.factorize(pd.Series(class_values, dtype=object), use_na_sentinel=True)
    return pd.Categorical.from_codes(codes[row_pos], categories=pd.Index(uniq, dtype=object), validate=False)


def class_values(cs: ClassStats, fmt: str) -> dict:
    """Per-class output values of every QI (host arrays): ``{output column: values per class}``."""
    out: dict[str, np.ndarray] = {}
    for j, col in enumerate(cs.table.columns):
        if col.kind == "categorical" or fmt == "range":
            out[col.name] = class_texts(cs, j, fmt)
        elif fmt == "mean":
            out[col.name] = to_host(cs.numeric_mean(j))
        else:
            lo, hi = (to_host(a) for a in cs.numeric_minmax(j))
            out[col.name + "_min"], out[col.name + "_max"] = lo, hi
    return out


class _HostColumns:
    """Output columns as pandas objects: per-class values come to the host once and are gathered
    there by each row's class (text as a ``Categorical`` whose codes index the classes' texts)."""

    def __init__(self, cs: ClassStats, n_rows_in: int):
        row_pos = to_host(cs.row_pos)
        self.row_pos = row_pos.astype(np.int32) if cs.n < 2**31 - 1 else row_pos  # half the index to gather
        self.kept = to_host(cs.kept) if cs.n_kept != n_rows_in else None

    def text(self, class_texts: np.ndarray):
        return _categorical(class_texts, self.row_pos)

    def values(self, per_class, dtype):
        return to_host(per_class).astype(dtype)[self.row_pos]

    def passthrough(self, series):
        return (series.take(self.kept) if self.kept is not None else series).reset_index(drop=True)

    def frame(self, columns: dict):
        return pd.DataFrame(columns, columns=list(columns), copy=False)


class _DeviceColumns:
    """Output columns as cuDF objects built on the device: per-class values are gathered by each
    row's class where they are; only the classes' texts (one per distinct cell) go up."""

    def __init__(self, cs: ClassStats, n_rows_in: int):
        self.cs = cs
        self.xp = cs.xp
        self.kept = cs.kept if cs.n_kept != n_rows_in else None

    def text(self, class_texts: np.ndarray):
        codes, uniq = pd.factorize(pd.Series(class_texts, dtype=object), use_na_sentinel=True)
        row_codes = to_device(codes.astype(np.int32), self.xp)[self.cs.row_pos]
        return device_column(row_codes, categories=uniq)

    def values(self, per_class, dtype):
        return device_column(per_class.astype(dtype)[self.cs.row_pos])

    def passthrough(self, series):
        return (series.take(self.kept) if self.kept is not None else series).reset_index(drop=True)

    def frame(self, columns: dict):
        return device_frame(columns)


def class_texts(cs: ClassStats, j: int, fmt: str) -> np.ndarray:
    """The published text of every class on QI ``j`` (host, one entry per class)."""
    col = cs.table.columns[j]
    bound = cs.table.hierarchies.get(col.name)
    if bound is not None:
        node, level = (to_host(a) for a in cs.hierarchy_nodes(j))
        h = bound.hierarchy
        text = h.labels_of(node)
        leaf = level == 0  # a single value: its text, as a set of one (escaped) value
        if leaf.any():
            leaf_value = np.empty(h.n_nodes, dtype=object)
            cats = np.empty(len(col.categories), dtype=object)
            cats[:] = [None if is_missing(v) else set_text([v]) for v in col.categories]
            leaf_value[to_host(bound.code_levels[:, 0])] = cats
            text[leaf] = leaf_value[node[leaf]]
        return text
    if col.kind == "categorical":
        return _mask_texts(to_host(cs.category_masks(j)), col.categories)
    lo, hi = (to_host(a) for a in cs.numeric_minmax(j))
    return range_texts(lo, hi, col.integer)


def generalize(df, table: Table, labels, n_classes: int, fmt: str, identifiers=(),
               stats: ClassStats | None = None):
    """The anonymized frame: kept rows in input order, QIs generalized per class.

    A pandas input gives a pandas output; a cuDF input (on the GPU backend) gives a cuDF output
    built on the device: the ``minmax`` / ``mean`` columns never leave it, text columns send one
    text per distinct cell up, and the other columns are gathered from the input where it is.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format '{fmt}' is not one of {', '.join(FORMATS)}")
    cs = stats if stats is not None else ClassStats(table, labels, n_classes)
    drop = set(c for c in identifiers if c in df.columns)
    with stage("output"):
        build = _DeviceColumns(cs, len(df)) if is_device_frame(df) else _HostColumns(cs, len(df))
        new_cols: dict[str, object] = {}
        for j, col in enumerate(table.columns):
            if col.kind == "categorical" or fmt == "range":
                new_cols[col.name] = build.text(class_texts(cs, j, fmt))
            elif fmt == "mean":
                new_cols[col.name] = build.values(cs.numeric_mean(j), np.float64)
            else:
                dt = minmax_dtype(col, df[col.name].dtype)  # keep int / float32 columns as they are
                lo, hi = cs.numeric_minmax(j)
                new_cols[col.name + "_min"] = build.values(lo, dt)
                new_cols[col.name + "_max"] = build.values(hi, dt)
        # the input's column order (minmax pairs at their column's place), no copies
        frames = in_input_order(df.columns, new_cols, table.qi_names, drop, lambda c: build.passthrough(df[c]))
        return build.frame(frames)
