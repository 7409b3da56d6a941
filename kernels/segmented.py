"""Segmented reductions over rows kept contiguous per segment, for NumPy and CuPy."""

from __future__ import annotations

import numpy as np


def segment_reduce(ufunc_name: str, x, starts, xp=np, axis: int = -1):
    """``xp.<ufunc>.reduceat(x, starts, axis)`` for non-empty contiguous segments.

    ``starts`` must be strictly increasing and every segment non-empty.
    """
    uf = getattr(xp, ufunc_name)
    if xp is np:
        return uf.reduceat(x, starts, axis=axis)
    try:
        return uf.reduceat(x, starts, axis=axis)
    except (AttributeError, NotImplementedError, TypeError):
        # An array library without this reduceat: reduce on the host, hand the result back.
        host = getattr(np, ufunc_name).reduceat(x.get(), starts.get(), axis=axis)
        return xp.asarray(host)


def exclusive_cumsum(sizes, xp=np):
    """Start offsets of consecutive segments of the given sizes (int64)."""
    out = xp.zeros(sizes.shape[0], dtype=xp.int64)
    if sizes.shape[0] > 1:
        xp.cumsum(sizes[:-1], out=out[1:])
    return out


def segment_ids(sizes, xp=np):
    """The segment index of every row, for consecutive segments of the given sizes."""
    return xp.repeat(xp.arange(sizes.shape[0], dtype=xp.int64), sizes)


def group_starts(sorted_labels, xp=np):
    """Start offsets of runs of equal values in a sorted label array."""
    n = sorted_labels.shape[0]
    if n == 0:
        return xp.zeros(0, dtype=xp.int64)
    change = xp.ones(n, dtype=bool)
    change[1:] = sorted_labels[1:] != sorted_labels[:-1]
    return xp.nonzero(change)[0].astype(xp.int64)
