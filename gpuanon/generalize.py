"""Partitions -> output values: generalization of every QI per equivalence class.

Numeric QI: the class's ``[min, max]``, written as ``range`` text (``"lo-hi"``, or the single
value when equal), ``minmax`` columns (``<col>_min``, ``<col>_max``) or its ``mean``.
Categorical QI with a hierarchy: the label of the lowest node covering the class's values (``*``
is the root: the cell is suppressed). Without one: the set of the class's distinct values,
joined by ``|`` in code order (the single
value when there is one; inside a set, ``|`` and ``\\`` in a value are escaped with ``\\``). The output keeps the input's columns and row order; suppressed rows
are removed; identifiers are dropped.

Per-class statistics are whole-array segmented reductions over rows sorted by class; strings are
built once per distinct generalized value, never per row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.segmented import group_starts, segment_reduce

from .backend import to_host
from .encoding import Table

FORMATS = ("range", "minmax", "mean")
SET_SEPARATOR = "|"


def _fmt_numbers(x: np.ndarray, integer: bool) -> np.ndarray:
    """Text of numbers (NaN -> None); integers without a decimal point."""
    out = np.empty(x.shape[0], dtype=object)
    x = x + 0.0  # no "-0.0"
    ok = ~np.isnan(x)
    if integer:
        out[ok] = pd.Series(x[ok].astype(np.int64)).astype(str).to_numpy()
    else:
        out[ok] = pd.Series(x[ok]).map(repr).to_numpy() if ok.sum() < 2_000_000 else x[ok].astype(str)
    out[~ok] = None
    return out


def _category_text(cats, idx) -> str:
    """One value inside a set cell: ``\\`` and ``|`` escaped with a backslash; missing is ``NaN``."""
    v = cats[idx]
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "NaN"
    return str(v).replace("\\", "\\\\").replace(SET_SEPARATOR, "\\" + SET_SEPARATOR)


class ClassStats:
    """Per-class statistics of every QI for a labelling of the kept rows."""

    def __init__(self, table: Table, labels, n_classes: int):
        xp = table.xp
        self.table = table
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
        self.row_class = lab  # class of each kept row, in original row order

    def numeric_minmax(self, j: int):
        t, xp = self.table, self.table.xp
        k = t.keys[j][self.rows]
        kmin = segment_reduce("minimum", k, self.starts, xp, axis=0)
        kmax = segment_reduce("maximum", k, self.starts, xp, axis=0)
        return t.numeric_values(j, kmin), t.numeric_values(j, kmax)

    def numeric_mean(self, j: int):
        t, xp = self.table, self.table.xp
        v = t.numeric_values(j, t.keys[j][self.rows])
        return segment_reduce("add", v, self.starts, xp, axis=0) / self.sizes

    def code_minmax(self, j: int):
        """Smallest and largest code of every class on categorical column ``j``."""
        t, xp = self.table, self.table.xp
        code = t.keys[j][self.rows]
        return (segment_reduce("minimum", code, self.starts, xp, axis=0).astype(xp.int64),
                segment_reduce("maximum", code, self.starts, xp, axis=0).astype(xp.int64))

    def hierarchy_nodes(self, j: int):
        """Lowest common hierarchy node of every class on column ``j`` and its level (host arrays).

        Codes follow the hierarchy's leaf order, so the node covering a class covers its smallest
        and largest code: the first level where their paths meet.
        """
        lv = self.table.columns[j].code_levels
        xp = self.table.xp
        lo, hi = self.code_minmax(j)
        a, b = lv[lo], lv[hi]
        level = xp.argmax(a == b, axis=1)
        return to_host(a[xp.arange(a.shape[0]), level]), to_host(level)

    def category_masks(self, j: int):
        """(n_classes, words) uint64 bitmask of the codes present in each class."""
        t, xp = self.table, self.table.xp
        code = t.keys[j][self.rows].astype(xp.int64)
        ncat = t.columns[j].n_categories
        words = max(1, -(-ncat // 64))
        out = xp.zeros((self.starts.shape[0], words), dtype=xp.uint64)
        for w in range(words):  # a loop over 64-category words, not over classes
            bit = xp.where(code // 64 == w, xp.left_shift(xp.uint64(1), (code % 64).astype(xp.uint64)), xp.uint64(0))
            out[:, w] = segment_reduce("bitwise_or", bit.astype(xp.uint64), self.starts, xp, axis=0)
        return out


def _mask_texts(masks: np.ndarray, cats: list) -> np.ndarray:
    """Text of each class's category set: one string per distinct mask."""
    uniq, inv = np.unique(masks, axis=0, return_inverse=True)
    texts = np.empty(uniq.shape[0], dtype=object)
    for u in range(uniq.shape[0]):  # a loop over distinct generalized values
        codes = [w * 64 + b for w in range(uniq.shape[1]) for b in range(64) if (int(uniq[u, w]) >> b) & 1]
        if len(codes) == 1:
            v = cats[codes[0]]
            texts[u] = None if (v is None or (isinstance(v, float) and np.isnan(v))) else v
        else:
            texts[u] = SET_SEPARATOR.join(_category_text(cats, c) for c in codes)
    return texts[inv.reshape(-1)]


def generalize(df: pd.DataFrame, table: Table, labels, n_classes: int, fmt: str, identifiers=()) -> pd.DataFrame:
    """The anonymized frame: kept rows in input order, QIs generalized per class."""
    if fmt not in FORMATS:
        raise ValueError(f"format '{fmt}' is not one of {', '.join(FORMATS)}")
    xp = table.xp
    cs = ClassStats(table, labels, n_classes)
    kept_host = to_host(cs.kept)
    # class position (0..#classes-1 in class-id order) of every kept row, in input order
    pos_of_id = xp.zeros(n_classes, dtype=xp.int64)
    pos_of_id[cs.class_ids] = xp.arange(cs.class_ids.shape[0], dtype=xp.int64)
    row_pos = to_host(pos_of_id[cs.row_class])
    drop = set(c for c in identifiers if c in df.columns)
    subset = len(kept_host) != len(df)
    new_cols: dict[str, object] = {}
    for j, col in enumerate(table.columns):
        if col.kind == "categorical" and col.hierarchy is not None:
            node, level = cs.hierarchy_nodes(j)
            h = col.hierarchy
            text = h.labels_of(node)
            leaf = level == 0  # a single value stays the original value (with its type)
            if leaf.any():
                leaf_value = np.empty(h.n_nodes, dtype=object)
                cats = np.empty(len(col.categories), dtype=object)
                cats[:] = col.categories
                leaf_value[to_host(col.code_levels[:, 0])] = cats
                text[leaf] = leaf_value[node[leaf]]
            new_cols[col.name] = text[row_pos]
            continue
        if col.kind == "categorical":
            masks = to_host(cs.category_masks(j))
            new_cols[col.name] = _mask_texts(masks, col.categories)[row_pos]
            continue
        src_dtype = df[col.name].dtype
        if fmt == "mean":
            new_cols[col.name] = to_host(cs.numeric_mean(j))[row_pos]
            continue
        lo, hi = (to_host(a) for a in cs.numeric_minmax(j))
        if fmt == "minmax":
            if col.n_missing == 0 and (col.integer or src_dtype == np.float32):
                dt = src_dtype  # keep int / float32 columns as they are
            else:
                dt = np.float64
            new_cols[col.name + "_min"] = lo.astype(dt)[row_pos]
            new_cols[col.name + "_max"] = hi.astype(dt)[row_pos]
        else:
            los, his = _fmt_numbers(lo, col.integer), _fmt_numbers(hi, col.integer)
            same = (lo == hi) | np.isnan(lo)
            both = np.array([f"{a}-{b}" if a is not None else None for a, b in zip(los, his)], dtype=object)
            new_cols[col.name] = np.where(same, los, both)[row_pos]
    # assemble in the input's column order (minmax pairs at their column's place), no copies
    qi = set(table.qi_names)
    frames = {}
    for c in df.columns:
        if c in drop:
            continue
        if c in new_cols:
            frames[c] = new_cols[c]
        elif c in qi and c + "_min" in new_cols:
            frames[c + "_min"] = new_cols[c + "_min"]
            frames[c + "_max"] = new_cols[c + "_max"]
        else:
            s = df[c]
            frames[c] = (s.take(kept_host) if subset else s).reset_index(drop=True)
    return pd.DataFrame(frames, columns=list(frames), copy=False)


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
