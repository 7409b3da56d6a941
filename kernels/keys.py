"""Order-preserving unsigned 32-bit keys for quasi-identifier columns.

Mondrian only compares values of one column with each other, so every QI column is stored as a
``uint32`` key whose order and equality are those of the values:

* ``f32``: float32 columns, the IEEE bits mapped so that unsigned order is numeric order
  (``-0.0`` is folded into ``+0.0``); decoding is exact.
* ``rank``: any other numeric column, its dense rank among the sorted distinct values; decoding
  is a look-up in that sorted array, exact.
* categorical columns: their integer codes.

Missing numeric values get :data:`MISSING`, larger than every real key.
"""

from __future__ import annotations

import numpy as np

from .host import scalar

MISSING = np.uint32(0xFFFFFFFF)
_SIGN = np.uint32(0x80000000)
_NEG_ZERO = np.uint32(0x7FFFFFFF)  # the key -0.0's bits map to (only they)


def float32_keys(x, xp=np):
    """Keys of a float32 array (NaN -> :data:`MISSING`)."""
    if xp is np:  # the CPU: the same keys in fewer passes (a negative value's bits flipped, else the sign set)
        x = np.asarray(x, dtype=np.float32)  # read only
        keys = np.right_shift(x.view(np.int32), 31).view(np.uint32)  # all ones where negative, else 0
        keys |= _SIGN
        keys ^= x.view(np.uint32)
        keys[keys == _NEG_ZERO] = _SIGN  # -0.0 as +0.0
        nan = np.isnan(x)
        if nan.any():
            keys[nan] = MISSING
        return keys
    x = xp.asarray(x, dtype=xp.float32) + xp.float32(0.0)  # -0.0 -> +0.0
    bits = x.view(xp.uint32)
    neg = (bits & _SIGN) != 0
    keys = xp.where(neg, ~bits, bits | _SIGN)
    return xp.where(xp.isnan(x), MISSING, keys).astype(xp.uint32, copy=False)


def decode_float32_keys(keys, xp=np):
    """Inverse of :func:`float32_keys` for non-missing keys, as float64."""
    keys = xp.asarray(keys, dtype=xp.uint32)
    pos = (keys & _SIGN) != 0
    bits = xp.where(pos, keys & ~_SIGN, ~keys).astype(xp.uint32)
    return bits.view(xp.float32).astype(xp.float64)


_DENSE_SPAN = 1 << 16  # integer values within this many of each other (or of the rows) are ranked by a count


def _dense_integer_ranks(x, miss, has_missing: bool):
    """The CPU's :func:`rank_keys` of whole numbers in a short range: one count over the range and a
    cumulative sum instead of a sort (the same keys and values); None for any other column, and
    where a ``-0.0`` is present (the sort would pick which zero the values hold)."""
    v = x[~miss] if has_missing else x
    if v.shape[0] == 0:
        return None
    lo, hi = float(v.min()), float(v.max())
    if not (-2.0**52 < lo and hi < 2.0**52) or hi - lo > max(_DENSE_SPAN, 2 * v.shape[0]):
        return None
    iv = v.astype(np.int64)
    if not np.array_equal(iv, v) or (lo <= 0.0 <= hi and np.signbit(v[v == 0.0]).any()):
        return None
    ioff = iv - np.int64(lo)
    present = np.zeros(int(hi - lo) + 1, dtype=bool)
    present[ioff] = True
    rank = np.cumsum(present, dtype=np.int64).astype(np.uint32) - np.uint32(1)
    if has_missing:
        keys = np.full(x.shape[0], MISSING, dtype=np.uint32)
        keys[~miss] = rank[ioff]
    else:
        keys = rank[ioff]
    return keys, np.flatnonzero(present).astype(np.float64) + lo


def rank_keys(x, xp=np):
    """Dense-rank keys of a numeric array: ``(keys, sorted distinct non-missing values)``."""
    x = xp.asarray(x, dtype=xp.float64)
    miss = xp.isnan(x)
    has_missing = bool(scalar(miss.any()))
    if xp is np:
        dense = _dense_integer_ranks(x, miss, has_missing)
        if dense is not None:
            return dense
    uniq, inv = xp.unique(x, return_inverse=True)  # NaNs collapse into one, sorted last
    keys = inv.reshape(-1).astype(xp.uint32)
    if has_missing:
        keys[miss] = MISSING
        uniq = uniq[~xp.isnan(uniq)]
    return keys, uniq


def decode_keys(keys, info, xp=np):
    """Values (float64) of numeric keys; ``info`` is ``'f32'`` or the sorted distinct values."""
    if isinstance(info, str):
        return decode_float32_keys(keys, xp)
    if int(info.shape[0]) == 0:  # a column with no value at all: everything is missing
        return xp.full(keys.shape, xp.nan, dtype=xp.float64)
    safe = xp.minimum(keys, xp.uint32(max(int(info.shape[0]) - 1, 0)))
    return xp.asarray(info)[safe.astype(xp.int64)]
