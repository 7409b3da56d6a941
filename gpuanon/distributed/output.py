"""A shard's output columns from the pieces the homes send back (:meth:`.worker.Shard.build_output`).

A text column comes as pieces ``(kind, codes, dictionary)``: each home's codes into its own
dictionary of the classes' texts. The shard unites them into one column whose categories are the
texts its rows use, in order of first appearance, as one process writes a column: a part file's
bytes depend on its rows alone, not on the number of workers nor on which home finished which
partition.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def union_texts(parts, order):
    """One categorical column from pieces ``(kind, codes, dictionary)`` (code -1: missing), its rows
    taken in ``order``: its categories are the texts its rows use, in order of first appearance.

    The pieces' codes are numbered into their dictionaries laid end to end; the codes that occur,
    in order of first appearance (one hash pass over integers), pick the texts, and the texts are
    factorized (a text two homes both sent is one category). Dictionaries that are all the homes'
    own (object arrays) are handled by pandas; otherwise by Arrow (no Python object per row)."""
    sizes = [len(p[2]) for p in parts]
    off = np.cumsum([0] + sizes[:-1])
    codes = np.concatenate([np.where(p[1] >= 0, p[1] + o, -1).astype(np.int32) for p, o in zip(parts, off)])
    codes = codes[order] if len(order) else codes
    used = pd.unique(codes)  # codes in order of first appearance (integers: no text hashed per row)
    used = used[used >= 0]
    if all(isinstance(p[2], np.ndarray) for p in parts):
        first, cats = pd.factorize(np.concatenate([p[2] for p in parts])[used])
        cats = np.asarray(cats, dtype=object)
    else:
        dicts = pa.concat_arrays([p[2] if not isinstance(p[2], np.ndarray) else pa.array(p[2], type=pa.string())
                                  for p in parts])
        enc = pc.dictionary_encode(dicts.take(pa.array(used)))  # in order of first appearance
        first, cats = enc.indices.to_numpy(), enc.dictionary.to_numpy(zero_copy_only=False)
    lut = np.full(int(sum(sizes)) + 1, -1, dtype=np.int32)  # the last slot: code -1 stays -1
    lut[used] = first
    return pd.Categorical.from_codes(lut[codes], categories=pd.Index(cats, dtype=object), validate=False)
