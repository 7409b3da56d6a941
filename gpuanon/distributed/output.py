"""A shard's output columns from the pieces the homes send back (:meth:`.worker.Shard.build_output`).

A text column comes as pieces ``(kind, codes, dictionary)``: each home's codes into its own
dictionary of the classes' texts. The shard unites them into one column whose categories are the
texts its rows use, in order of first appearance, as one process writes a column: a part file's
bytes depend on its rows alone, not on the number of workers nor on which home finished which
partition.
"""

from __future__ import annotations

import numpy as np


def union_texts(parts, order):
    """One categorical column from pieces ``(kind, codes, dictionary)`` (code -1: missing), its rows
    taken in ``order``. Dictionaries that are all the homes' own (object arrays) are united by
    pandas; otherwise by Arrow (no Python object per row). The column's categories are then the
    texts its rows use, in order of first appearance (:func:`in_row_order`)."""
    import pandas as pd  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    if all(isinstance(p[2], np.ndarray) for p in parts):
        cats = pd.api.types.union_categoricals(
            [pd.Categorical.from_codes(p[1], categories=pd.Index(p[2], dtype=object), validate=False) for p in parts],
            ignore_order=True)
        codes = cats.codes[order] if len(order) else cats.codes
        return in_row_order(codes, np.asarray(cats.categories, dtype=object))
    parts = [p if not isinstance(p[2], np.ndarray) else (p[0], p[1], pa.array(p[2], type=pa.string())) for p in parts]
    dicts = pa.concat_arrays([p[2] for p in parts]) if parts else pa.array([], type=pa.string())
    off = np.cumsum([0] + [len(p[2]) for p in parts[:-1]])
    codes = np.concatenate([np.where(p[1] >= 0, p[1] + o, -1) for p, o in zip(parts, off)]) if parts else \
        np.zeros(0, dtype=np.int64)
    uniq = pc.unique(dicts)
    remap = pc.index_in(dicts, value_set=uniq).to_numpy(zero_copy_only=False).astype(np.int64)
    codes = np.where(codes >= 0, remap[np.maximum(codes, 0)] if remap.shape[0] else codes, -1)[order]
    return in_row_order(codes, uniq.to_numpy(zero_copy_only=False))


def in_row_order(codes, cats):
    """A Categorical of ``codes`` into ``cats`` (-1: missing) whose categories are only the texts
    the rows use, in order of their first appearance: what one process writes for these rows
    (its classes, numbered by first row, factorized in that order), whichever homes sent them in
    which order -- so a part file's bytes depend on its rows alone, not on the workers."""
    import pandas as pd  # noqa: PLC0415

    used = pd.unique(codes)  # distinct codes in order of first appearance (a hash pass, no sort)
    used = used[used >= 0]
    lut = np.full(len(cats) + 1, -1, dtype=np.int32)  # the last slot: code -1 stays -1
    lut[used] = np.arange(used.shape[0], dtype=np.int32)
    return pd.Categorical.from_codes(lut[codes], categories=pd.Index(cats[used], dtype=object), validate=False)
