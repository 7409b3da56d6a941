"""The CPU backend's formulations of the Mondrian level's steps (NumPy only).

The device formulations in :mod:`kernels.mondrian` are shaped for thousands of threads and few
synchronizations: scatters over (partition, category) cells, whole-matrix passes, no host reads.
On the CPU those cost more than they save: a scatter over ``P x categories`` cells outgrows the
rows once the partitions are small, and reads of NumPy values are free. The kernel takes these
where ``xp is numpy``; each returns what its device counterpart returns, bit for bit (the
equality tests of the two backends hold them to it).

Distinct categories per segment: every row's categorical codes as bits of a few ``uint64`` words
(:class:`CodeMasks`: each column a bit field ``1 << code``, columns packed into words), built once
per fit; a level ORs the words of each segment (``reduceat``) and counts each field's bits. That
is O(rows x words) at any number of segments, where a count over ``P x categories`` cells grows
with ``P``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .segmented import segment_reduce

WORD_BITS = 64
MAX_WORDS = 4  # mask words per row at most; columns that do not fit count by a sort


class CodeMasks:
    """Where each categorical column's codes sit in the rows' mask words.

    ``ncats``: the columns' category counts. A column of at most 64 codes takes a bit field in the
    first word with room; a larger one whole words of its own (up to :data:`MAX_WORDS` words in
    all). ``parts[i]``: ``(word, offset, bits)`` fields of column ``i`` (empty: counted by a sort).

    >>> CodeMasks([7, 60, 2, 100]).parts
    [[(0, 0, 7)], [(1, 0, 60)], [(0, 7, 2)], [(2, 0, 64), (3, 0, 36)]]
    """

    def __init__(self, ncats):
        self.ncats = [int(c) for c in ncats]
        self.parts, used = [], []
        for c in self.ncats:
            need = -(-c // WORD_BITS)
            w = next((w for w, u in enumerate(used) if u + c <= WORD_BITS), len(used)) if need == 1 else len(used)
            if w + need > MAX_WORDS:  # no room: this column is counted by a sort
                self.parts.append([])
                continue
            if w == len(used):
                used += [0] * need
            self.parts.append([(w + i, used[w + i], min(WORD_BITS, c - i * WORD_BITS)) for i in range(need)])
            for i in range(need):
                used[w + i] += min(WORD_BITS, c - i * WORD_BITS)
        self.n_words = len(used)

    def words(self, K, cols):
        """``(n_words, n)`` uint64 masks of the rows of ``K`` (row ``cols[i]``: column ``i``'s codes)."""
        out = np.zeros((self.n_words, int(K.shape[1])), dtype=np.uint64)
        for i, parts in enumerate(self.parts):  # a loop over columns, once per fit
            if not parts:
                continue
            c = self.ncats[i]
            code = np.minimum(K[cols[i]], c).astype(np.intp)  # a code past the column's count sets no bit
            for p, (w, off, bits) in enumerate(parts):
                bit = np.zeros(c + 1, dtype=np.uint64)  # each code's bit in word w (0: not in this part)
                bit[p * WORD_BITS:p * WORD_BITS + bits] = np.left_shift(np.uint64(1), np.arange(bits, dtype=np.uint64)
                                                                        + np.uint64(off))
                out[w] |= bit.take(code)
        return out

    def counts(self, words, starts, K, cols, n_seg: int, dense: bool = False):
        """Distinct codes of every column in every segment, int64 ``(len(cols), n_seg)``.

        ``words``: the masks of the rows of ``K`` (rows contiguous per segment, ``starts``: the
        segment contract of :mod:`kernels.segmented`; ``dense``: as :func:`reduce_at`).

        >>> K = np.array([[0, 2, 2, 1, 1]], dtype=np.uint32)
        >>> m = CodeMasks([3])
        >>> m.counts(m.words(K, [0]), np.array([0, 3, 3]), K, [0], 3).tolist()
        [[2, 0, 1]]
        """
        out = np.zeros((len(self.ncats), n_seg), dtype=np.int64)
        if n_seg == 0:
            return out
        orr = reduce_at("bitwise_or", words, starts, dense) if self.n_words else None
        for i, parts in enumerate(self.parts):  # a loop over columns, on (n_seg,) arrays
            for w, off, bits in parts:
                field = orr[w] >> np.uint64(off) if off else orr[w]
                if bits < WORD_BITS:
                    field = field & np.uint64((1 << bits) - 1)
                out[i] += np.bitwise_count(field)
            if not parts:
                out[i] = _distinct_by_sort(K[cols[i]].astype(np.int64), starts, n_seg, int(K.shape[1]))
        return out


def chosen_values(K, col, sizes, rows):
    """``K[col[loc], rows]`` (``loc``: each row's segment, segments of ``sizes`` in order) by one
    ``repeat`` and one ``take`` on the rows of ``K`` seen as one flat array (its rows contiguous,
    as the kernel's are); a plain fancy index otherwise.

    >>> K = np.arange(12, dtype=np.uint32).reshape(3, 4)[:, :3]
    >>> chosen_values(K, np.array([2, 0]), np.array([1, 2]), np.array([0, 1, 2])).tolist()
    [8, 1, 2]
    """
    d, n = int(K.shape[0]), int(K.shape[1])
    step, item = K.strides[0], K.itemsize
    if d == 0 or n == 0 or K.strides[1] != item or step < 0 or step % item:
        return K[np.repeat(col, sizes), rows]
    flat = as_strided(K, shape=((d - 1) * (step // item) + n,), strides=(item,), writeable=False)
    return flat.take(np.repeat(col.astype(np.int64) * (step // item), sizes) + rows)


def strict_split(K, col, sizes, starts, total: int, n_rows: int, bits: int, need_loc: bool = False):
    """The CPU's strict-mode attempt on the pending partitions (``sizes``, ``starts``; ``total``
    rows in all, of the ``n_rows`` rows of ``K``; ``col``: each one's chosen column): the median
    cut of :func:`kernels.mondrian.mondrian_partition`, the same numbers by fewer passes.

    One sort of ``(partition, value)`` keys; a partition's lower median key ``m`` and top key
    give its bound ``b`` (``m + 1``, or ``m`` when ``m`` is the top: :func:`~kernels.mondrian.below_only`):
    the left child takes the keys below ``b``, so its size is one ``searchsorted`` and each row's
    side one comparison with its partition's bound (repeated, not gathered). ``bits``: the bit
    length of the largest key of ``K``; the keys are uint32 when the partitions fit in the bits
    left (else int64, the value in the low 32 bits).

    Returns ``rows`` (the pending rows' positions; ``slice(None)`` when every row is pending: no
    index array), ``loc`` (each pending row's partition, int32; None unless ``need_loc``),
    ``pofs`` (the partitions' offsets among the pending rows), ``nleft`` (the left children's
    sizes) and ``left`` (each pending row goes left).

    >>> K = np.array([[5, 1, 1, 9, 2, 9, 9]], dtype=np.uint32)
    >>> rows, loc, pofs, nleft, left = strict_split(K, np.array([0, 0]), np.array([3, 4]), np.array([0, 3]), 7, 7, 4)
    >>> rows, nleft.tolist(), left.tolist()  # medians 1 and 9; the second's is its top: left takes v < 9
    (slice(None, None, None), [2, 1], [False, True, True, False, True, False, False])
    """
    P = int(sizes.shape[0])
    pofs = np.zeros(P, dtype=np.int64)
    np.cumsum(sizes[:-1], out=pofs[1:])
    full = total == n_rows  # partitions are never empty: every row is pending, in order
    shift, kt = (bits, np.uint32) if bits < 32 and P <= (1 << (32 - bits)) else (32, np.int64)
    key = np.repeat(np.left_shift(np.arange(P, dtype=kt), kt(shift)), sizes)
    if full and P and bool((col == col[0]).all()):  # one column: its row as it is
        key |= K[int(col[0])]
        idx = None
    else:
        idx = np.arange(total, dtype=np.int64)
        if not full and P and bool((starts != pofs).any()):
            idx += np.repeat(starts - pofs, sizes)
        key |= chosen_values(K, col, sizes, idx).astype(kt, copy=False)
    skey = np.sort(key)
    med = skey[pofs + (sizes - 1) // 2]
    bound = med + (med != skey[pofs + sizes - 1]).astype(kt)  # below m + 1, or below m when m is the top
    nleft = np.searchsorted(skey, bound, side="left") - pofs
    left = key < np.repeat(bound, sizes)
    loc = np.repeat(np.arange(P, dtype=np.int32), sizes) if need_loc else None
    return (slice(None) if full else idx), loc, pofs, nleft, left


def mark_left(go_left, rows, left, ok, sizes, loc):
    """``go_left`` with the pending rows ``rows`` (:func:`strict_split`'s) set to ``left`` where
    their partition's cut is made (``ok``); a new array when every row is pending."""
    if isinstance(rows, slice):
        return left if bool(ok.all()) else left & np.repeat(ok, sizes)
    go_left[rows] = left & (np.repeat(ok, sizes) if loc is None else ok[loc])
    return go_left


def reduce_at(op: str, x, starts, dense: bool):
    """``segment_reduce(op, x, starts)`` along the last axis of ``x``; ``dense``: the caller knows
    every segment holds a row and ``starts[0] == 0`` (then NumPy's ``reduceat`` is the contract's
    reduction as it is, and the checks are skipped)."""
    if dense:
        return getattr(np, op).reduceat(x, starts, axis=-1)
    return segment_reduce(op, x, starts, np, axis=-1)


def extremes(K, starts, rows, n_seg: int, dense: bool):
    """Segment minima and maxima ``(d, n_seg)`` of the rows ``rows`` of ``K`` (the others hold 0).

    The spans read the extremes of numeric and hierarchy columns only; a categorical column's
    single value is told by its distinct count, so its keys are not reduced. ``dense``: as
    :func:`reduce_at`.
    """
    d = int(K.shape[0])
    if len(rows) == d and d > 1:  # every column: one call each for the whole matrix
        return reduce_at("minimum", K, starts, dense), reduce_at("maximum", K, starts, dense)
    mn = np.zeros((d, n_seg), dtype=K.dtype)
    mx = np.zeros((d, n_seg), dtype=K.dtype)
    for j in rows:  # a loop over columns: one contiguous row each, no copy
        mn[j] = reduce_at("minimum", K[j], starts, dense)
        mx[j] = reduce_at("maximum", K[j], starts, dense)
    return mn, mx


def split_children(go_left, cut, sizes, starts, perm, min_size: int, labels, first_rows: list, n_parts: int):
    """The CPU's regroup of a level: where the rows of the cut partitions go, the children's sizes,
    and the children smaller than ``min_size`` finished now (never cut: the next level would
    finish them), so that their rows leave the key matrix one level early.

    ``go_left``: each current row goes to its partition's left child (False outside the cut
    partitions ``cut``); ``sizes`` / ``starts``: the current partitions (rows contiguous, none
    empty); ``perm``: the original row of each current row. The children kept come in the order
    every cut partition's left child, then every cut partition's right child (each group in the
    partitions' order; a child's rows in their current order, so in original row order): two
    index lists and no scatter. The order of the partitions does not reach the labels (the kernel
    numbers partitions by their first original rows at the end). Writes the finished children's
    ids ``n_parts, n_parts + 1, ...`` into ``labels`` and their first original rows into
    ``first_rows``. Returns ``src`` (the kept rows' current positions, in their new order), the
    kept children's sizes and the new partition count. When no child or every child is small,
    none is finished here (the next level finishes them as before: the level count is unchanged).

    >>> labels, first = np.full(6, -1), []
    >>> split_children(np.array([1, 0, 0, 1, 1, 0], bool), np.array([True, True]), np.array([3, 3]),
    ...                np.array([0, 3]), np.array([5, 3, 0, 1, 4, 2]), 2, labels, first, 7)
    (array([3, 4, 1, 2]), array([2, 2]), 9)
    >>> labels.tolist(), [f.tolist() for f in first]
    ([-1, -1, 8, -1, -1, 7], [[5, 2]])
    """
    nl = np.add.reduceat(go_left, starts, dtype=np.int64)[cut]
    nr = sizes[cut] - nl
    small_l, small_r = nl < min_size, nr < min_size
    n_small = int(np.count_nonzero(small_l)) + int(np.count_nonzero(small_r))
    if n_small == 2 * nl.shape[0]:
        n_small = 0  # every child small: the next level finishes them all
    go_right = ~go_left if bool(cut.all()) else np.repeat(cut, sizes) & ~go_left
    if n_small == 0:
        src = np.concatenate([np.flatnonzero(go_left), np.flatnonzero(go_right)])
        return src, np.concatenate([nl, nr]), n_parts
    big = np.zeros((2, cut.shape[0]), dtype=bool)  # per partition: its left / right child is kept
    big[0, cut], big[1, cut] = ~small_l, ~small_r
    row_big_l, row_big_r = np.repeat(big[0], sizes), np.repeat(big[1], sizes)
    fin = np.concatenate([np.flatnonzero(go_left & ~row_big_l), np.flatnonzero(go_right & ~row_big_r)])
    fsizes = np.concatenate([nl[small_l], nr[small_r]])
    labels[perm[fin]] = n_parts + np.repeat(np.arange(fsizes.shape[0], dtype=np.int64), fsizes)
    first_rows.append(perm[fin[np.cumsum(fsizes) - fsizes]])  # rows keep their order per child
    src = np.concatenate([np.flatnonzero(go_left & row_big_l), np.flatnonzero(go_right & row_big_r)])
    return src, np.concatenate([nl[~small_l], nr[~small_r]]), n_parts + int(fsizes.shape[0])


class KeyRows:
    """The CPU's regroup of the key matrix: one buffer of ``d + 1`` rows, the columns in ``d``
    consecutive ones and one spare. Each column is gathered into the spare row next to it
    (``take`` with an output, no temporary and no copy back), which frees the column's old row for
    the next: the columns move down one row at a level, up one row at the next. One row more
    than the matrix itself, every column gathered once.

    >>> K = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.uint32)
    >>> rows = KeyRows()
    >>> K = rows.regroup(K, np.array([2, 0, 1])); K.tolist()
    [[3, 1, 2], [6, 4, 5]]
    >>> K = rows.regroup(K, np.array([1, 2, 0])); K.tolist()
    [[1, 2, 3], [4, 5, 6]]
    >>> rows.regroup(K, np.array([2, 0])).tolist()
    [[3, 1], [6, 4]]
    """

    def __init__(self, K=None, narrow: bool = False):
        self.buf, self.top = None, 0
        self.bits = int(K.max()).bit_length() if K is not None and K.size else 32  # of the largest key
        # the buffer's type: uint8 / uint16 when ``narrow`` (the keys are codes, no float32 bit patterns) and every key fits
        self.dtype = None if not narrow or self.bits > 16 else np.uint8 if self.bits <= 8 else np.uint16

    def regroup(self, K, src):
        """The rows of ``K`` (d, n) in the order ``src`` (m indices into ``n``): a view of the buffer.
        ``K`` is this buffer's last result, or any matrix the first time (it is not modified)."""
        d, m, n = int(K.shape[0]), int(src.shape[0]), int(K.shape[1])
        if self.buf is None:
            self.buf, self.top = np.empty((d + 1, m), dtype=self.dtype or K.dtype), 1
            if self.buf.dtype == K.dtype:
                np.take(K, src, axis=1, out=self.buf[1:], mode="clip")  # src holds valid positions only
            else:  # narrowed: every key fits (``bits``)
                self.buf[1:] = np.take(K, src, axis=1, mode="clip")
            return self.buf[1:]
        if self.top == 1:  # columns in rows 1..d: column j to row j, in increasing j
            for j in range(d):
                np.take(self.buf[j + 1, :n], src, out=self.buf[j, :m], mode="clip")
        else:  # columns in rows 0..d-1: column j to row j + 1, in decreasing j
            for j in range(d - 1, -1, -1):
                np.take(self.buf[j, :n], src, out=self.buf[j + 1, :m], mode="clip")
        self.top = 1 - self.top
        return self.buf[self.top:self.top + d, :m]


def _distinct_by_sort(code, starts, n_seg: int, n: int):
    """Distinct codes per segment by one sort of ``(segment, code)`` keys."""
    first = int(starts[0])  # rows before the first segment belong to none
    sizes = np.diff(np.append(starts, n))
    seg = np.repeat(np.arange(n_seg, dtype=np.int64), sizes)
    key = np.sort((seg << 32) | code[first:])
    new = np.ones(key.shape[0], dtype=bool)
    new[1:] = key[1:] != key[:-1]
    return np.bincount(key[new] >> 32, minlength=n_seg).astype(np.int64, copy=False)
