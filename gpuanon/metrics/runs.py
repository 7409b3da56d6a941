"""Distinct values and their counts of sorted encoded columns: on a device with known sizes.

:func:`runs` compacts a sorted column with ``nonzero`` (on a device a read of the number of hits);
:func:`device_runs` first reads, for a group of columns together in one counted copy, the four
numbers the compactions and the column's domain need, then compacts with known sizes
(:func:`kernels.counts.indices_of`, a scatter of known length): one sync per group of columns.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from kernels.counts import indices_of
from kernels.keys import MISSING

from ..backend import to_host
from .entropy import N_BINS

#: bytes of sorted columns held at once on a device while their counts are read together
GROUP_BYTES = 1 << 30


def runs(sorted_keys, xp):
    """Distinct values of a sorted array and how often each occurs."""
    n = sorted_keys.shape[0]
    if n == 0:
        return sorted_keys, xp.zeros(0, dtype=xp.int64)
    new = xp.ones(n, dtype=bool)
    new[1:] = sorted_keys[1:] != sorted_keys[:-1]
    start = xp.nonzero(new)[0]
    if xp is np:  # the counts written in place: no column-long concatenated copy of the starts
        del new
        counts = np.empty(start.shape[0], dtype=np.int64)
        np.subtract(start[1:], start[:-1], out=counts[:-1])
        counts[-1] = n - start[-1]
        return sorted_keys[start], counts
    return sorted_keys[start], xp.diff(xp.concatenate([start, xp.full(1, n, dtype=start.dtype)]))


def run_counts(sorted_keys):
    """How often each distinct value of a sorted host array occurs (:func:`runs`' counts, int64).

    >>> run_counts(np.array([1, 1, 4, 7, 7, 7], dtype=np.uint32)).tolist()
    [2, 1, 3]
    """
    n = int(sorted_keys.shape[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=new[1:])
    start = np.flatnonzero(new)
    del new
    counts = np.empty(start.shape[0], dtype=np.int64)
    np.subtract(start[1:], start[:-1], out=counts[:-1])
    counts[-1] = n - start[-1]
    return counts


_TLS = threading.local()


def sorted_copy(a, xp, slot: int, mask=None):
    """A sorted copy of ``a`` (or of ``a[mask]``); on the CPU into a reused per-thread buffer.

    Fresh multi-hundred-megabyte arrays cost as much in page faults as the sort itself.
    """
    if xp is not np:
        return xp.sort(a if mask is None else a[mask])
    bufs = _TLS.__dict__.setdefault("bufs", {})
    buf = bufs.get(slot)
    m = int(a.shape[0]) if mask is None else int(np.count_nonzero(mask))
    if buf is None or buf.shape[0] < m or buf.dtype != a.dtype:  # a subset's buffer: its rows
        buf = bufs[slot] = None
        buf = bufs[slot] = np.empty(m, dtype=a.dtype)
    out = buf[:m]
    if mask is None:
        np.copyto(out, a)
    else:
        np.compress(mask, a, out=out)
    out.sort()
    return out


def sorted_by_target(a, target, nt: int):
    """On the CPU: ``(sorted a, [sorted a[target == t] for t in 0 .. nt - 1])``, the sorted rows of
    each target value (views of this thread's sort buffers: slot ``nt`` for target 0, slot ``t``
    for the others, as :func:`~gpuanon.metrics.columns.value_target_chunk` uses them) and the whole
    column merged from them (slot 0: their concatenation sorted by NumPy's stable sort, a merge of
    ``nt`` sorted runs). One sort of every row instead of the column's and its target values' again.
    The same sorted keys: a sort of values has one result. Target codes outside ``0 .. nt - 1``:
    the column sorted whole."""
    parts = [sorted_copy(a, np, nt if t == 0 else t, target == t) for t in range(nt)]
    n = int(a.shape[0])
    if sum(int(p.shape[0]) for p in parts) != n:
        return sorted_copy(a, np, 0), parts
    bufs = _TLS.__dict__.setdefault("bufs", {})
    buf = bufs.get(0)
    if buf is None or buf.shape[0] < n or buf.dtype != a.dtype:
        buf = bufs[0] = None
        buf = bufs[0] = np.empty(n, dtype=a.dtype)
    out, at = buf[:n], 0
    for p in parts:  # a loop over target values
        out[at:at + p.shape[0]] = p
        at += p.shape[0]
    out.sort(kind="stable")  # runs of sorted keys merged (timsort finds the runs)
    return out, parts


def release_buffers() -> None:
    """Free this thread's sort buffers."""
    _TLS.__dict__.pop("bufs", None)


_TRIM: list = []


def trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing where the C
    library has none). A column's temporaries below the allocator's mapping threshold are freed into
    the heap of the thread that made them, where they would stay resident while the next columns run.
    """
    if not _TRIM:
        try:
            _TRIM.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError, TypeError):
            _TRIM.append(None)
    if _TRIM[0] is not None:
        _TRIM[0](0)


def _flags(srt, xp):
    """Run starts of a sorted column and every row's value index (the running count of starts)."""
    new = xp.ones(int(srt.shape[0]), dtype=bool)
    new[1:] = srt[1:] != srt[:-1]
    return new, xp.cumsum(new, dtype=xp.int64) - 1


def _four(srt, xp, numeric: bool):
    """Distinct values, values seen more than once, [missing present, distinct equal-frequency bins]:
    a small int64 array on the device.

    The bins are :func:`~gpuanon.metrics.entropy.numeric_domain`'s: the value index of the sorted
    row at each quantile is the running count of value changes there.
    """
    n = int(srt.shape[0])
    new, rank = _flags(srt, xp)
    parts = [rank[-1] + 1, (new[:-1] & ~new[1:]).sum()]  # values; values whose run goes on
    if numeric:
        n_present = xp.searchsorted(srt, xp.full(1, MISSING, dtype=srt.dtype), side="left")
        q = (xp.arange(N_BINS, dtype=xp.int64) * n_present) // N_BINS  # rows at the quantiles
        rq = rank[xp.minimum(q, n - 1)]
        parts += [srt[-1] == MISSING, (rq[1:] != rq[:-1]).sum() + 1]
    else:
        parts += [xp.zeros((), dtype=xp.int64), xp.zeros((), dtype=xp.int64)]
    return xp.stack(parts).astype(xp.int64)


def _compact(srt, xp, numeric: bool, four):
    """``(vals, counts, rep, has_missing, n_starts)`` of a sorted device column from its four numbers."""
    n = int(srt.shape[0])
    nv, n_rep = int(four[0]), int(four[1])
    has_missing, n_starts = (bool(four[2]), int(four[3])) if numeric else (False, None)
    new, rank = _flags(srt, xp)
    start = xp.empty(nv + 1, dtype=xp.int64)
    start[xp.where(new, rank, nv)] = xp.arange(n, dtype=xp.int64)  # rows inside a run go to the spare slot
    start[nv] = n
    counts = xp.diff(start)
    return srt[start[:nv]], counts, indices_of(counts > 1, n_rep, xp), has_missing, n_starts


def device_runs(srt, xp, numeric: bool):
    """:func:`runs` of one sorted, non-empty device column with one counted read of four numbers.

    ``(vals, counts, rep, has_missing, n_starts)``: ``rep`` the indices of the counts above 1;
    ``n_starts`` the number of distinct equal-frequency bins of a numeric column.
    """
    return _compact(srt, xp, numeric, to_host(_four(srt, xp, numeric)))


def column_groups(nbytes: list, limit: int | None = None) -> list[int]:
    """How many columns each group of :func:`device_runs_many` holds, in order (one counted read per
    group): columns join a group while its sorted copies fit ``limit`` (:data:`GROUP_BYTES`).
    So the metrics stage's reads grow with the rows: 28 uint32 columns make one group at 2M rows,
    two at 10.5M (1.18 GB).

    >>> column_groups([4, 4, 4], 8), column_groups([9, 1], 8), column_groups([], 8)
    ([2, 1], [1, 1], [])
    """
    limit = GROUP_BYTES if limit is None else limit
    out: list[int] = []
    size = 0
    for nb in nbytes:
        if out and size + nb <= limit:
            out[-1] += 1
            size += nb
        else:
            out.append(1)
            size = nb
    return out


def device_runs_many(columns: dict, xp) -> dict:
    """:func:`device_runs` of several columns ``{j: (keys, numeric)}`` (unsorted, non-empty): each
    group of columns whose sorted copies fit :data:`GROUP_BYTES` is read in one counted copy.
    Returns ``{j: (vals, counts, rep, has_missing, n_starts)}``."""
    out: dict = {}
    todo = list(columns.items())
    for n_cols in column_groups([keys.nbytes for keys, _ in columns.values()]):  # a loop over groups
        group = [(j, xp.sort(keys), numeric) for j, (keys, numeric) in todo[:n_cols]]
        del todo[:n_cols]
        host = to_host(xp.stack([_four(srt, xp, numeric) for _, srt, numeric in group]))
        for (j, srt, numeric), four in zip(group, host):
            out[j] = _compact(srt, xp, numeric, four)
    return out
