"""Counts of known length and index compaction of known size, without a device synchronization.

``cupy.bincount`` reads the device twice before it counts (``(x < 0).any()`` and ``int(x.max())``,
to size its output) and makes two extra passes over its input; ``cupy.nonzero`` and boolean-mask
indexing read the number of hits. Where the caller already knows the length on the host (the
number of bins, the number of hits), these do the same work as one scatter and no read.
"""

from __future__ import annotations

import numpy as np


def count_values(idx, length: int, xp=np, weights=None):
    """``bincount(idx, weights, minlength=length)`` with exactly ``length`` bins, as int64.

    ``idx``: a 1-D integer array whose values lie in ``[0, length)``. ``weights``: ``None`` (count
    the rows) or a 1-D integer or bool array of the same length as ``idx`` (sum them per bin).
    Sums are exact int64 in any order, so both backends give the same result; float weights are
    refused (a scatter-add of floats depends on the order of the device's atomics: use
    :func:`kernels.segmented.segment_sum`, a fixed-order sum, on rows sorted by ``idx``).

    On NumPy this is ``numpy.bincount`` (or ``numpy.add.at`` for weights), and an index outside
    ``[0, length)`` raises ``ValueError``. On a device it is one scatter-add into a zeroed array
    (``xp.add.at``: atomic adds, no synchronization, one pass); the indices are not checked there
    (a check would read the device), and CuPy wraps an out-of-range index.

    >>> count_values(np.array([0, 2, 2, 3]), 5)
    array([1, 0, 2, 1, 0])
    >>> count_values(np.array([0, 2, 2]), 3, weights=np.array([5, 1, 1]))
    array([5, 0, 2])
    >>> count_values(np.array([0, 7]), 5)
    Traceback (most recent call last):
    ...
    ValueError: idx: values must lie in [0, 5) (the number of bins); got one outside
    """
    length = int(length)
    if weights is not None and np.dtype(weights.dtype).kind not in "iub":
        raise TypeError(f"weights: must hold integers or bools, got {np.dtype(weights.dtype).name}; "
                        "sum floats with kernels.segmented.segment_sum (a fixed order)")
    if xp is np:
        idx = np.asarray(idx)
        if idx.shape[0] and (int(idx.min()) < 0 or int(idx.max()) >= length):
            raise ValueError(f"idx: values must lie in [0, {length}) (the number of bins); got one outside")
        if weights is None:
            return np.bincount(idx, minlength=length).astype(np.int64, copy=False)
        out = np.zeros(length, dtype=np.int64)
        np.add.at(out, idx, np.asarray(weights).astype(np.int64, copy=False))
        return out
    out = xp.zeros(length, dtype=xp.int64)
    if weights is None:
        xp.add.at(out, idx, 1)
    else:
        xp.add.at(out, idx, weights.astype(xp.int64))
    return out


def indices_of(mask, count: int, xp=np):
    """``nonzero(mask)[0]`` (int64, ascending) when the number of ``True`` values, ``count``, is known.

    On a device: each hit's rank by a cumulative sum and one scatter of the positions (misses go to
    a spare slot that is dropped), no synchronization; ``count`` must be right (it is not checked
    there). On NumPy: ``numpy.flatnonzero``.

    >>> indices_of(np.array([False, True, True, False, True]), 3)
    array([1, 2, 4])
    """
    count = int(count)
    if xp is np:
        out = np.flatnonzero(mask).astype(np.int64, copy=False)
        if out.shape[0] != count:
            raise ValueError(f"count: the mask holds {out.shape[0]} True values, not {count}")
        return out
    n = mask.shape[0]
    rank = xp.cumsum(mask.astype(xp.int64)) - 1
    out = xp.empty(count + 1, dtype=xp.int64)
    out[xp.where(mask, rank, count)] = xp.arange(n, dtype=xp.int64)
    return out[:count]
