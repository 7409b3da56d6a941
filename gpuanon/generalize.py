"""Partitions -> output values: generalization of every QI per equivalence class.

Numeric QI: the class's ``[min, max]``, written as ``range`` text (see :mod:`gpuanon.cells`:
``lo-hi``, ``[lo, hi]`` when the lower bound is negative, the single value when equal),
``minmax`` columns (``<col>_min``, ``<col>_max``) or its ``mean``. Categorical QI with a
hierarchy: the label of the lowest node covering the class's values (``*`` is the root: the cell
is suppressed). Without one: the set of the class's distinct values, joined by ``|`` in code
order (one escaping rule for every cell: ``|`` and ``\\`` inside a value are escaped with ``\\``).
The output keeps the input's columns and row order; suppressed rows are removed; identifiers are
dropped.

The class statistics (:class:`ClassStats`) are built once on the device after partitioning and
shared by generalization, the published cells the verifier groups by, and the metrics. Text is
made once per class and published as a ``pandas.Categorical`` indexed by the row's class (a
dictionary column in Parquet); ``minmax`` and ``mean`` columns are gathered from per-class
values. Nothing here loops over rows or classes in Python.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.hierarchy import lowest_common_node
from kernels.keys import MISSING
from kernels.segmented import group_starts, segment_reduce

from .backend import device_column, device_frame, is_device_frame, stage, to_device, to_host
from .cells import is_missing, needs_escape, range_texts, set_text
from .encoding import Table

FORMATS = ("range", "minmax", "mean")


class ClassStats:
    """Per-class statistics of every QI for a labelling of the kept rows, on the table's device.

    Built once after partitioning; every per-column statistic is computed at first use and kept,
    so generalization, the published cells and the metrics share one sort by class.
    """

    def __init__(self, table: Table, labels, n_classes: int):
        xp = table.xp
        self.table = table
        self.xp = xp
        kept = xp.nonzero(labels >= 0)[0]
        lab = labels[kept]
        order = xp.argsort(lab, kind="stable")
        self.rows = kept[order]  # kept rows sorted by class
        slab = lab[order]
        self.starts = group_starts(slab, xp)
        self.sizes = xp.diff(xp.concatenate([self.starts, xp.asarray([slab.shape[0]], dtype=xp.int64)]))
        self.class_ids = slab[self.starts]
        self.n_classes = n_classes
        self.kept = kept
        self.n_kept = int(kept.shape[0])
        self.row_class = lab  # class id of each kept row, in original row order
        pos_of_id = xp.zeros(max(n_classes, 1), dtype=xp.int64)
        pos_of_id[self.class_ids] = xp.arange(self.class_ids.shape[0], dtype=xp.int64)
        self.row_pos = pos_of_id[lab]  # class position (0..#classes-1) of each kept row, input order
        self._cache: dict = {}

    @property
    def n(self) -> int:
        """Number of classes (distinct labels among the kept rows)."""
        return int(self.starts.shape[0])

    def _memo(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def key_minmax(self, j: int):
        """Smallest and largest key (uint32) of every class on column ``j``."""
        def f():
            k = self.table.keys[j][self.rows]
            return (segment_reduce("minimum", k, self.starts, self.xp, axis=0),
                    segment_reduce("maximum", k, self.starts, self.xp, axis=0))
        return self._memo(("keys", j), f)

    def numeric_minmax(self, j: int):
        kmin, kmax = self.key_minmax(j)
        return self.table.numeric_values(j, kmin), self.table.numeric_values(j, kmax)

    def numeric_mean(self, j: int):
        def f():
            t, xp = self.table, self.xp
            v = t.numeric_values(j, t.keys[j][self.rows])
            return segment_reduce("add", v, self.starts, xp, axis=0) / self.sizes
        return self._memo(("mean", j), f)

    def code_minmax(self, j: int):
        """Smallest and largest code of every class on categorical column ``j``."""
        lo, hi = self.key_minmax(j)
        return lo.astype(self.xp.int64), hi.astype(self.xp.int64)

    def hierarchy_nodes(self, j: int, code_levels=None):
        """Lowest common hierarchy node of every class on column ``j`` and its level (device arrays).

        Codes follow the hierarchy's leaf order, so the node covering a class covers its smallest
        and largest code: the first level where their paths meet.
        """
        lv = self.table.hierarchies[self.table.columns[j].name].code_levels if code_levels is None else code_levels
        xp = self.xp

        def f():
            lo, hi = self.code_minmax(j)
            return lowest_common_node(lv, lo, hi, xp)
        if code_levels is not None:
            return f()
        return self._memo(("nodes", j, id(lv)), f)

    def category_masks(self, j: int):
        """(n_classes, words) uint64 bitmask of the codes present in each class."""
        def f():
            t, xp = self.table, self.xp
            code = t.keys[j][self.rows].astype(xp.int64)
            ncat = t.columns[j].n_categories
            words = max(1, -(-ncat // 64))
            out = xp.zeros((self.starts.shape[0], words), dtype=xp.uint64)
            for w in range(words):  # a loop over 64-category words, not over classes
                bit = xp.where(code // 64 == w, xp.left_shift(xp.uint64(1), (code % 64).astype(xp.uint64)),
                               xp.uint64(0))
                out[:, w] = segment_reduce("bitwise_or", bit.astype(xp.uint64), self.starts, xp, axis=0)
            return out
        return self._memo(("masks", j), f)

    def set_ids(self, j: int):
        """A uint64 per class, equal exactly when the classes hold the same set of categories."""
        def f():
            xp = self.xp
            m = self.category_masks(j)
            if m.shape[1] == 1:
                return m[:, 0]
            order = xp.lexsort(m.T[::-1])
            sm = m[order]
            new = xp.ones(m.shape[0], dtype=bool)
            new[1:] = (sm[1:] != sm[:-1]).any(axis=1)
            ids = xp.empty(m.shape[0], dtype=xp.uint64)
            ids[order] = (xp.cumsum(new.astype(xp.int64)) - 1).astype(xp.uint64)
            return ids
        return self._memo(("setid", j), f)

    def histogram(self, codes, n_values: int):
        """(classes, n_values) counts of ``codes`` (a per-row code array) in every class."""
        xp = self.xp
        pos = xp.repeat(xp.arange(self.starts.shape[0], dtype=xp.int64), self.sizes)
        return xp.bincount(pos * n_values + codes[self.rows].astype(xp.int64),
                           minlength=self.starts.shape[0] * n_values).reshape(-1, n_values)

    def target_hist(self):
        t = self.table
        if t.target is None:
            return None
        return self._memo("target_hist", lambda: self.histogram(t.target, max(len(t.target_values), 1)))

    def published_cells(self, fmt: str) -> list:
        """The canonical published cell of every class on every output QI column (uint64, device).

        Numeric ``range`` / ``minmax``: the interval's two order-preserving keys ``lo << 32 | hi``
        (the ``_min`` and ``_max`` columns of ``minmax`` are one interval); ``mean``: the bits of
        the mean; categorical: the set's bitmask or id, or the hierarchy node. This is what the
        verifier groups rows by; the text is made from the same per-class values.
        """
        xp = self.xp
        out = []
        for j, col in enumerate(self.table.columns):
            if col.kind == "categorical":
                if col.name in self.table.hierarchies:
                    out.append(self.hierarchy_nodes(j)[0].astype(xp.uint64))
                else:
                    out.append(self.set_ids(j))
            elif fmt == "mean":
                m = self.numeric_mean(j) + 0.0
                out.append(xp.where(xp.isnan(m), xp.nan, m).view(xp.uint64))
            else:
                lo, hi = self.key_minmax(j)
                out.append((lo.astype(xp.uint64) << xp.uint64(32)) | hi.astype(xp.uint64))
        return out


def _mask_texts(masks: np.ndarray, cats: list) -> np.ndarray:
    """Text of each class's category set: one string per distinct mask."""
    uniq, inv = np.unique(masks, axis=0, return_inverse=True)
    texts = np.empty(uniq.shape[0], dtype=object)
    for u in range(uniq.shape[0]):  # a loop over distinct generalized values
        codes = [w * 64 + b for w in range(uniq.shape[1]) for b in range(64) if (int(uniq[u, w]) >> b) & 1]
        if len(codes) == 1:
            v = cats[codes[0]]
            texts[u] = None if is_missing(v) else (set_text([v]) if needs_escape(v) else v)
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
        leaf = level == 0  # a single value stays the original value (with its type)
        if leaf.any():
            leaf_value = np.empty(h.n_nodes, dtype=object)
            cats = np.empty(len(col.categories), dtype=object)
            cats[:] = [set_text([v]) if needs_escape(v) else v for v in col.categories]
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
    frames: dict[str, object] = {}
    with stage("output"):
        build = _DeviceColumns(cs, len(df)) if is_device_frame(df) else _HostColumns(cs, len(df))
        new_cols: dict[str, object] = {}
        for j, col in enumerate(table.columns):
            if col.kind == "categorical" or fmt == "range":
                new_cols[col.name] = build.text(class_texts(cs, j, fmt))
            elif fmt == "mean":
                new_cols[col.name] = build.values(cs.numeric_mean(j), np.float64)
            else:
                src_dtype = df[col.name].dtype
                if col.n_missing == 0 and (col.integer or src_dtype == np.float32):
                    dt = src_dtype  # keep int / float32 columns as they are
                else:
                    dt = np.float64
                lo, hi = cs.numeric_minmax(j)
                new_cols[col.name + "_min"] = build.values(lo, dt)
                new_cols[col.name + "_max"] = build.values(hi, dt)
        # assemble in the input's column order (minmax pairs at their column's place), no copies
        qi = set(table.qi_names)
        for c in df.columns:
            if c in drop:
                continue
            if c in new_cols:
                frames[c] = new_cols[c]
            elif c in qi and c + "_min" in new_cols:
                frames[c + "_min"] = new_cols[c + "_min"]
                frames[c + "_max"] = new_cols[c + "_max"]
            else:
                frames[c] = build.passthrough(df[c])
        return build.frame(frames)


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
