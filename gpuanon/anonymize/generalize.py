"""Partitions -> output values: generalization of every QI per equivalence class.

Numeric QI: the class's ``[min, max]``, written as ``range`` text (see :mod:`gpuanon.table.cells`:
``lo-hi``, ``[lo, hi]`` when the lower bound is negative, the single value when equal),
``minmax`` columns (``<col>_min``, ``<col>_max``) or its ``mean``. Categorical QI with a
hierarchy: the label of the lowest node covering the class's values (``*`` is the root: the cell
is suppressed). Without one: the set of the class's distinct values, joined by ``|`` in code
order (one escaping rule for every cell: ``|`` and ``\\`` inside a value are escaped with ``\\``;
a missing value is an empty cell alone, ``\\N`` inside a set: :data:`gpuanon.table.cells.MISSING_IN_SET`).
Every categorical cell is text, a single value too (``108``, ``1.5``, ``True``: the value's
``str``), so a column of integer, float or bool categories is one string column in every format.
The output keeps the input's columns and row order; suppressed rows are removed; identifiers are
dropped.

The class statistics (:class:`gpuanon.release.classes.ClassStats`) are built once on the device after
partitioning and shared by generalization, the published cells the verifier groups by, and the
metrics. Text is
made once per class and published as a ``pandas.Categorical`` indexed by the row's class (a
dictionary column in Parquet); ``minmax`` and ``mean`` columns are gathered from per-class
values where the classes are (on a GPU: on the device, then one copy per dtype of the finished
columns for a pandas frame, none for a cuDF frame). Nothing here loops over rows or classes in Python.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..backend import device_column, device_frame, frame_to_device, is_device_frame, stage, to_device, to_host
from ..table.cells import (SET_SEPARATOR, escape_value, in_input_order, minmax_dtype, range_text_array,
                     set_text)
from ..release.classes import ClassStats
from ..table.encoding import Table
from ..table.values import is_na
from ..table.exact import bound_values, mean_values, range_texts

FORMATS = ("range", "minmax", "mean")


def _mask_set_texts(masks: np.ndarray, cats: list, first_seen: bool = False):
    """``(texts, inv, alone_missing)``: the text of every distinct category set among the classes'
    ``masks`` (an Arrow string array; null for the set of the missing value alone), each class's
    set (``inv``) and which sets are that one. The codes present are read off the bits of all
    distinct masks at once, and each set's escaped category texts are joined by Arrow.
    ``first_seen``: one-word masks hashed (distinct sets in order of first appearance), no sort."""
    n_cat = len(cats)
    if first_seen and masks.shape[1] == 1:
        inv, uniq = pd.factorize(masks[:, 0], sort=False)
        uniq = np.asarray(uniq, dtype=masks.dtype)[:, None]
    elif masks.shape[1] == 1:  # one word: a plain sort (unique rows of one column sort a structured view)
        uniq, inv = np.unique(masks[:, 0], return_inverse=True)
        uniq = uniq[:, None]
    else:
        uniq, inv = np.unique(masks, axis=0, return_inverse=True)
    words = np.ascontiguousarray(uniq.astype("<u8", copy=False)).view(np.uint8)  # bit b of word w: code 64 w + b
    bits = np.unpackbits(words, axis=1, bitorder="little")[:, :n_cat]
    row, code = np.nonzero(bits)  # codes in increasing order within each distinct mask
    counts = np.bincount(row, minlength=uniq.shape[0])
    offsets = np.zeros(uniq.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # one text per category (a loop over the column's categories, not over classes)
    escaped = pa.array([escape_value(v) for v in cats], pa.string())
    missing = np.array([is_na(v) for v in cats], dtype=bool)
    lists = (pa.ListArray if offsets[-1] < 2**31 else pa.LargeListArray).from_arrays(
        pa.array(offsets, pa.int32() if offsets[-1] < 2**31 else pa.int64()), escaped.take(pa.array(code)))
    texts = pc.binary_join(lists, SET_SEPARATOR)
    first = code[np.minimum(offsets[:-1], max(code.shape[0] - 1, 0))] if code.shape[0] else np.zeros(0, np.int64)
    alone_missing = (counts == 1) & missing[first] if code.shape[0] else np.zeros(uniq.shape[0], dtype=bool)
    if alone_missing.any():  # a class whose one value is missing publishes a missing cell
        texts = pc.if_else(pa.array(alone_missing), pa.scalar(None, pa.string()), texts)
    return texts, inv.reshape(-1), alone_missing


def _mask_texts(masks: np.ndarray, cats: list):
    """Text of each class's category set (an Arrow string array, one per class; null for a class
    whose one value is missing): :func:`_mask_set_texts`, one per class."""
    texts, inv, _ = _mask_set_texts(masks, cats)
    return texts.take(pa.array(inv))


def _mask_text_codes(masks: np.ndarray, cats: list):
    """``(codes, distinct texts)`` of the classes' category sets as :func:`_text_codes` gives them of
    :func:`_mask_texts` (texts in order of first appearance over the classes, a missing cell -1),
    from the distinct sets: distinct sets have distinct texts (the escaping is one to one)."""
    texts, inv, alone_missing = _mask_set_texts(masks, cats, first_seen=True)
    if masks.shape[1] == 1:  # the sets came in order of first appearance: shown ones keep it
        shown = ~alone_missing
        code_of = np.cumsum(shown, dtype=np.int64) - 1
        code_of[alone_missing] = -1
        return code_of[inv], texts.filter(pa.array(shown)).to_numpy(zero_copy_only=False)
    first, order = pd.factorize(inv, sort=False)  # the sets in order of first appearance over the classes
    order = order.astype(np.int64, copy=False)
    shown = ~alone_missing[order]
    code_of = np.cumsum(shown, dtype=np.int64) - 1
    code_of[~shown] = -1
    return code_of[first], texts.take(order[shown]).to_numpy(zero_copy_only=False)


def _text_codes(texts):
    """``(codes, distinct texts)`` of per-class texts (an Arrow array or an object array), in order of
    first appearance; a missing text has code -1."""
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        enc = pc.dictionary_encode(texts)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        codes = pc.fill_null(enc.indices, -1).to_numpy()
        return codes, enc.dictionary.to_numpy(zero_copy_only=False)
    codes, uniq = pd.factorize(pd.Series(texts, dtype=object), use_na_sentinel=True)
    return codes, np.asarray(uniq, dtype=object)


def _categorical(class_texts, row_pos: np.ndarray) -> pd.Categorical:
    """A column of per-class texts (or their ``(codes, distinct texts)``, a tuple) as a Categorical
    indexed by each row's class (missing: NaN)."""
    codes, uniq = class_texts if isinstance(class_texts, tuple) else _text_codes(class_texts)
    return pd.Categorical.from_codes(codes[row_pos], categories=pd.Index(uniq, dtype=object), validate=False)


def class_values(cs: ClassStats, fmt: str) -> dict:
    """Per-class output values of every QI (host arrays): ``{output column: values per class}``."""
    out: dict[str, np.ndarray] = {}
    for j, col in enumerate(cs.table.columns):
        if col.kind == "categorical" or fmt == "range":
            out[col.name] = class_texts(cs, j, fmt)
        elif fmt == "mean":
            out[col.name] = to_host(cs.numeric_mean(j)) if col.exact is None else mean_values(col.exact,
                                                                                             *cs.exact_mean(j))
        elif col.exact is not None:
            lo, hi = (to_host(a) for a in cs.key_minmax(j))
            out[col.name + "_min"], out[col.name + "_max"] = bound_values(col.exact, lo), bound_values(col.exact, hi)
        else:
            lo, hi = (to_host(a) for a in cs.numeric_minmax(j))
            out[col.name + "_min"], out[col.name + "_max"] = lo, hi
    return out


class _HostColumns:
    """Output columns as pandas objects. Text: a ``Categorical`` whose codes index the classes'
    texts, gathered on the host by each row's class. Numbers: on the CPU, per-class values gathered
    by each row's class; from device classes, :func:`_gathered_on_device` gathers the finished
    columns where the classes are and reads them in one copy per dtype (no host gather)."""

    def __init__(self, cs: ClassStats, n_rows_in: int):
        self.cs = cs
        self.kept = to_host(cs.kept) if cs.n_kept != n_rows_in else None
        self._row_pos = None

    @property
    def row_pos(self) -> np.ndarray:
        """Each kept row's class position on the host (read at first use: a text or exact column)."""
        if self._row_pos is None:
            self._row_pos = to_host(self.cs.row_pos).astype(np.intp, copy=False)
        return self._row_pos

    def text(self, class_texts):
        return _categorical(class_texts, self.row_pos)

    def values(self, per_class, dtype):
        if isinstance(dtype, pd.api.extensions.ExtensionDtype):  # nullable integers: NaN is missing
            return pd.array(to_host(per_class), dtype=dtype)[self.row_pos]
        return to_host(per_class).astype(dtype).take(self.row_pos)

    def exact(self, per_class):
        """Per-class exact values (an array of the output's dtype) gathered by each row's class."""
        return per_class[self.row_pos]

    def passthrough(self, series):
        return (series.take(self.kept) if self.kept is not None else series).reset_index(drop=True)

    def frame(self, columns: dict):
        return pd.DataFrame(columns, columns=list(columns), copy=False)


def _gathered_on_device(cs: ClassStats, wanted: dict) -> dict:
    """``{output column: host array}``: per-class device values (``wanted``: ``{name: (values,
    dtype)}``) gathered by each kept row's class on the device, one take per dtype's stack of
    columns, and read in one copy per dtype. A nullable integer dtype is gathered as float64 (NaN:
    missing) and made a pandas array on the host."""
    xp = cs.xp
    groups: dict = {}
    for name, (per_class, dtype) in wanted.items():  # a loop over columns
        dev = np.dtype(np.float64) if isinstance(dtype, pd.api.extensions.ExtensionDtype) else np.dtype(dtype)
        groups.setdefault(dev, []).append(name)
    out: dict = {}
    for dev, names in groups.items():  # a loop over dtypes
        # cast while stacked (a NumPy / CuPy cast: the values are exact in the output's dtype)
        stack = xp.stack([wanted[c][0] for c in names], dtype=dev, casting="unsafe")
        host = to_host(xp.take(stack, cs.row_pos, axis=1))  # (columns, kept rows): rows are the columns
        del stack
        for r, c in enumerate(names):
            dtype = wanted[c][1]
            out[c] = pd.array(host[r], dtype=dtype) if isinstance(dtype, pd.api.extensions.ExtensionDtype) \
                else host[r]
    return out


class _DeviceColumns:
    """Output columns as cuDF objects built on the device: per-class values are gathered by each
    row's class where they are; only the classes' texts (one per distinct cell) go up."""

    def __init__(self, cs: ClassStats, n_rows_in: int):
        self.cs = cs
        self.xp = cs.xp
        self.kept = cs.kept if cs.n_kept != n_rows_in else None

    def text(self, class_texts):
        codes, uniq = _text_codes(class_texts)
        row_codes = to_device(codes.astype(np.int32), self.xp)[self.cs.row_pos]
        return device_column(row_codes, categories=uniq)

    def values(self, per_class, dtype):
        if isinstance(dtype, pd.api.extensions.ExtensionDtype):  # nullable integers: NaN is null
            return device_column(per_class[self.cs.row_pos]).nans_to_nulls().astype(dtype.numpy_dtype.name)
        return device_column(per_class.astype(dtype)[self.cs.row_pos])

    def exact(self, per_class):
        """Per-class exact values (host; integers beyond 2**53, dates) gathered on the host, sent up once."""
        return frame_to_device(pd.DataFrame({"v": per_class[to_host(self.cs.row_pos)]}))["v"]

    def passthrough(self, series):
        return (series.take(self.kept) if self.kept is not None else series).reset_index(drop=True)

    def frame(self, columns: dict):
        return device_frame(columns)


def class_texts(cs: ClassStats, j: int, fmt: str) -> np.ndarray:
    """The published text of every class on QI ``j`` (host object array, one entry per class)."""
    texts = class_text_array(cs, j, fmt)
    return texts if isinstance(texts, np.ndarray) else texts.to_numpy(zero_copy_only=False)


def class_text_array(cs: ClassStats, j: int, fmt: str, minmax=None):
    """The published text of every class on QI ``j``, one entry per class: an Arrow string array
    built by Arrow's compute functions (an object array for a hierarchy's labels). ``minmax``: a
    numeric column's per-class smallest and largest values on the host, when already read."""
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
            cats[:] = [None if is_na(v) else set_text([v]) for v in col.categories]
            leaf_value[to_host(bound.code_levels[:, 0])] = cats
            text[leaf] = leaf_value[node[leaf]]
        return text
    if col.kind == "categorical":
        return _mask_texts(to_host(cs.category_masks(j)), col.categories)
    if col.exact is not None:  # bounds read from the exact dictionary
        return range_texts(col.exact, *(to_host(a) for a in cs.key_minmax(j)))
    lo, hi = (to_host(a) for a in (cs.numeric_minmax(j) if minmax is None else minmax))
    return range_text_array(lo, hi, col.integer)


def _host_together(arrays: list, xp) -> list:
    """Per-class device arrays (one length) on the host: one counted copy of a stack per dtype."""
    out: list = [None] * len(arrays)
    groups: dict = {}
    for i, a in enumerate(arrays):
        groups.setdefault(np.dtype(a.dtype), []).append(i)
    for idx in groups.values():  # a loop over dtypes
        host = to_host(xp.stack([arrays[i] for i in idx]))
        for r, i in enumerate(idx):
            out[i] = host[r]
    return out


def _numeric_on_host(cs: ClassStats, table: Table) -> dict:
    """``{(j, 0 or 1): host array}``: every numeric QI's per-class smallest and largest values (for
    its ``range`` text), read together."""
    want: dict = {}
    for j, col in enumerate(table.columns):  # a loop over columns
        if col.kind == "categorical" or col.exact is not None:
            continue
        want[(j, 0)], want[(j, 1)] = cs.numeric_minmax(j)
    return dict(zip(want, _host_together(list(want.values()), cs.xp))) if want else {}


def read_ahead(cs: ClassStats, fmt: str) -> None:
    """Compute now, charged to stage ``output``, the per-class values :func:`generalize` reads from the
    class statistics ``cs`` (each kept there once computed), in its order: a run that verifies and
    measures before it makes the output frame pays the same copies at the same stage as one that
    generalizes first (the verifier and the metrics then find them computed, as before)."""
    with stage("output"):
        for j, col in enumerate(cs.table.columns):  # a loop over columns
            if col.kind == "categorical":
                if col.name in cs.table.hierarchies:
                    cs.hierarchy_nodes(j)
                else:
                    cs.category_masks(j)
            elif fmt == "mean":
                cs.exact_mean(j) if col.exact is not None else cs.numeric_mean(j)
            else:
                cs.key_minmax(j)


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
        # a host frame from device classes: the numbers gathered on the device, read in one copy per dtype
        gather = isinstance(build, _HostColumns) and cs.xp is not np
        pre = _numeric_on_host(cs, table) if gather and fmt == "range" else {}
        on_device: dict = {}
        for j, col in enumerate(table.columns):
            if col.kind == "categorical" and isinstance(build, _HostColumns) and col.name not in cs.table.hierarchies:
                new_cols[col.name] = build.text(_mask_text_codes(to_host(cs.category_masks(j)), col.categories))
            elif col.kind == "categorical" or fmt == "range":
                mm = (pre[(j, 0)], pre[(j, 1)]) if (j, 1) in pre else None
                new_cols[col.name] = build.text(class_text_array(cs, j, fmt, mm))
            elif col.exact is not None:  # integers beyond 2**53, dates and times: exact values
                if fmt == "mean":
                    new_cols[col.name] = build.exact(mean_values(col.exact, *cs.exact_mean(j)))
                else:
                    lo, hi = (bound_values(col.exact, to_host(a), df[col.name].dtype) for a in cs.key_minmax(j))
                    new_cols[col.name + "_min"], new_cols[col.name + "_max"] = build.exact(lo), build.exact(hi)
            elif fmt == "mean":
                new_cols[col.name] = None
                on_device[col.name] = (cs.numeric_mean(j), np.float64)
            else:
                dt = minmax_dtype(col, df[col.name].dtype)  # keep int / float32 columns as they are
                lo, hi = cs.numeric_minmax(j)
                new_cols[col.name + "_min"] = new_cols[col.name + "_max"] = None
                on_device[col.name + "_min"], on_device[col.name + "_max"] = (lo, dt), (hi, dt)
        if gather and on_device:
            new_cols.update(_gathered_on_device(cs, on_device))
        else:
            new_cols.update({c: build.values(v, dt) for c, (v, dt) in on_device.items()})
        # the input's column order (minmax pairs at their column's place), no copies
        frames = in_input_order(df.columns, new_cols, table.qi_names, drop, lambda c: build.passthrough(df[c]))
        return build.frame(frames)
