"""SUDA2's search for up to 16 QIs: every record unique on all M columns gets a bit set over the 2^M
QI subsets, whole-array on NumPy or CuPy.

A record r is *non-unique* on S when another record equals it on S; these sets are closed under
subsets, so they are the subsets of the marks: sets on which r is known to have a twin. The marks come
from a tree over the subsets (S grows from its tree parent S - {max S}): one value sort of packed
(parent class, column, code, row) keys splits every class of a level by every column above its top at
once; a class of two or more rows that holds a record unique on all M columns is kept. A kept class
of at most ``SMALL`` rows is not split further: each of its candidate records is compared with each
other row of it column by column, and the set of columns on which the two agree is a mark (every
superset of the class's set on which r has a twin lies inside one such agreement set); a larger one
marks its set for its candidates and is split at the next level. Then, bit-parallel over 64 subsets
per word: close each record's marks downwards (the non-unique sets, exactly), and its MSUs are the
sets S outside them whose S - {c} are all inside, with no missing value of the record in S.
"""

from __future__ import annotations

import math

import numpy as np

from gpuanon import backend

#: a kept class of at most this many rows is resolved by comparing its rows pairwise
SMALL = 12
#: the most bytes of marks (records unique on all M columns x 2^M) this search takes on
MAX_MARK_BYTES = 1 << 28


def fits(m: int, n_unique: int) -> bool:
    """Whether the bit-set search takes M QIs and ``n_unique`` candidate records."""
    return m <= 16 and n_unique * max(1 << m, 64) <= MAX_MARK_BYTES


def sorted_pairs(xp, keys, rows, row_bits):
    """(key, row) pairs sorted by key: one value sort of key << row_bits | row where that fits in 63
    bits (NumPy's SIMD sort, CuPy's radix sort: several times faster than an argsort), else an
    argsort."""
    if (backend.to_scalar(keys.max()) + 1) << row_bits < 2**62:
        packed = xp.sort((keys << row_bits) | rows)
        return packed >> row_bits, packed & ((1 << row_bits) - 1)
    order = xp.argsort(keys)
    return keys[order], rows[order]


def _packer(xp, pat, m):
    """Agreement masks of row pairs: a function (rows a, rows b) -> int64 mask of equal columns, on
    the codes packed into one word where they fit (one XOR per pair), else column by column."""
    widths = [max(backend.to_scalar(pat[:, c].max()), 1).bit_length() for c in range(m)]
    if sum(widths) <= 63:
        offs = np.concatenate([[0], np.cumsum(widths)[:-1]]).tolist()
        packed = xp.zeros(pat.shape[0], dtype=xp.int64)
        for c in range(m):
            packed |= pat[:, c].astype(xp.int64) << offs[c]

        def agree(a, b):
            x = packed[a] ^ packed[b]
            out = xp.zeros(a.shape[0], dtype=xp.int64)
            for c in range(m):
                out |= (((x >> offs[c]) & ((1 << widths[c]) - 1)) == 0).astype(xp.int64) << c
            return out
        return agree
    cols = [xp.ascontiguousarray(pat[:, c]) for c in range(m)]

    def agree_cols(a, b):
        out = xp.zeros(a.shape[0], dtype=xp.int64)
        for c in range(m):
            out |= (cols[c][a] == cols[c][b]).astype(xp.int64) << c
        return out
    return agree_cols


def _marks(xp, pat, weight, m):
    """Byte marks (candidate x subset, ``width`` subsets a candidate) of sets on which a candidate
    (a pattern of weight 1) has a twin, enough that their closure under subsets is all of them."""
    g = int(weight.shape[0])
    is_one = weight == 1
    u_of = xp.cumsum(is_one) - 1
    n_u = backend.to_scalar(is_one.sum())
    width = max(1 << m, 64)
    marks = xp.zeros(n_u * width, dtype=xp.uint8)
    total = backend.to_scalar(weight.sum())
    if total < 2 or n_u == 0:
        return marks, n_u, width
    marks[u_of[xp.flatnonzero(is_one)] * width] = 1  # the empty set
    agree = _packer(xp, pat, m)
    flat = xp.ascontiguousarray(pat).reshape(-1).astype(xp.int64)
    kmax = backend.to_scalar(pat.max()) + 1
    row_bits = max(g - 1, 1).bit_length()
    p_row = xp.arange(g, dtype=xp.int64)
    p_gid = xp.zeros(g, dtype=xp.int64)
    g_mask = xp.zeros(1, dtype=xp.int64)
    g_top = xp.full(1, -1, dtype=xp.int64)
    g_size = xp.full(1, total, dtype=xp.float64)
    g_abs = xp.zeros(1, dtype=xp.int64)
    while p_row.shape[0]:
        # every entry once per column above its group's top: (entry, column) by one repeat
        n_ext = (m - 1) - g_top[p_gid]
        n_all = backend.to_scalar(n_ext.sum())
        if n_all == 0:
            break
        src = xp.repeat(xp.arange(p_row.shape[0], dtype=xp.int64), n_ext)
        col = xp.arange(n_all, dtype=xp.int64) - (xp.cumsum(n_ext) - n_ext)[src] + g_top[p_gid][src] + 1
        rows = p_row[src]
        keys = (p_gid[src] * m + col) * kmax + flat[rows * m + col]
        ks, rows = sorted_pairs(xp, keys, rows, row_bits)
        start = xp.ones(ks.shape[0], dtype=bool)
        start[1:] = ks[1:] != ks[:-1]
        rid = xp.cumsum(start) - 1
        starts = xp.flatnonzero(start)
        n_runs = int(starts.shape[0])
        size = xp.bincount(rid, weights=weight[rows], minlength=n_runs)
        one = is_one[rows]
        has_one = xp.bincount(rid, weights=one, minlength=n_runs) > 0
        pair = ks[starts] // kmax
        r_pg, r_col = pair // m, pair % m
        # a column that does not split a class is constant on all below it: absorbed into their
        # marks, and the child it would make (the same rows) is not searched
        same = size == g_size[r_pg]
        hit = xp.flatnonzero(same)
        r_abs = g_abs | _or_by_group(xp, r_pg[hit], 1 << r_col[hit], int(g_size.shape[0]), m)
        r_mask = g_mask[r_pg] | (1 << r_col)
        keep = has_one & (size >= 2)
        big = keep & (size > SMALL) & ~same
        e = xp.flatnonzero(big[rid] & one)
        marks[u_of[rows[e]] * width + (r_mask | r_abs[r_pg])[rid[e]]] = 1
        e = xp.flatnonzero(keep[rid] & same[rid] & one)
        marks[u_of[rows[e]] * width + (r_mask | r_abs[r_pg])[rid[e]]] = 1
        _pair_marks(xp, marks, agree, rows, rid, starts, one, keep & ~big & ~same, u_of, width)
        kr = xp.flatnonzero(big)
        kept = xp.flatnonzero(big[rid])
        p_row = rows[kept]
        p_gid = (xp.cumsum(big) - 1)[rid[kept]]
        g_mask, g_top, g_size, g_abs = r_mask[kr], r_col[kr], size[kr], r_abs[r_pg[kr]]
    return marks, n_u, width


def _or_by_group(xp, group, bits, n_groups, m):
    """Bitwise OR of ``bits`` per ``group`` (0 where none)."""
    out = xp.zeros(n_groups, dtype=xp.int64)
    for c in range(m):
        on = xp.flatnonzero((bits >> c) & 1)
        out[group[on]] |= 1 << c
    return out


def _pair_marks(xp, marks, agree, rows, rid, starts, one, small, u_of, width):
    """Mark, for every candidate entry of a small kept run, its agreement set with each other row
    of the run."""
    ce = xp.flatnonzero(small[rid] & one)
    if ce.shape[0] == 0:
        return
    ends = xp.concatenate([starts[1:], xp.full(1, rows.shape[0], dtype=xp.int64)])
    st = starts[rid[ce]]
    n_other = ends[rid[ce]] - st - 1
    n_pairs = backend.to_scalar(n_other.sum())
    if n_pairs == 0:
        return
    first = xp.cumsum(n_other) - n_other
    src = xp.repeat(xp.arange(ce.shape[0], dtype=xp.int64), n_other)
    j = xp.arange(n_pairs, dtype=xp.int64) - first[src]
    me = ce[src]
    other = st[src] + j
    other += other >= me
    a = agree(rows[me], rows[other])
    marks[u_of[rows[me]] * width + a] = 1


def _bit_masks(m, size):
    """Per-word constant masks over positions 0..63: low[b] (bit b of the position clear), and the
    valid MSU positions by word (non-empty, at most ``size`` columns, below 2^M)."""
    pos = np.arange(64, dtype=np.uint64)
    low = [int(np.bitwise_or.reduce(np.where((pos >> np.uint64(b)) & np.uint64(1), 0,
                                             np.uint64(1) << pos))) for b in range(6)]
    n_words = max(1 << m, 64) // 64
    subset = np.arange(n_words * 64, dtype=np.int64)
    ok = (subset > 0) & (subset < (1 << m)) & (np.bitwise_count(subset) <= size)
    valid = np.packbits(ok, bitorder="little").view(np.uint64)
    return low, valid, n_words


def search_bits(xp, pat, weight, m, size, missing_bits):
    """MSUs of every pattern (see the module's text): (score, MSU count, smallest MSU size, per-column
    score sums, MSUs per size), as ``suda._search`` returns them."""
    g = int(weight.shape[0])
    marks, n_u, width = _marks(xp, pat, weight, m)
    low, valid, n_words = _bit_masks(m, size)
    words = xp.packbits(marks.reshape(n_u, width), axis=1, bitorder="little").view(xp.uint64)
    del marks
    for b in range(m):  # close downwards: D[S] |= D[S + {b}]
        if b < 6:
            words |= (words >> np.uint64(1 << b)) & np.uint64(low[b])
        else:
            v = words.reshape(n_u, -1, 2, 1 << (b - 6))
            v[:, :, 0, :] |= v[:, :, 1, :]
    msu = ~words & backend.to_device(valid, xp)[None, :]
    for b in range(m):  # and every S - {b} inside
        if b < 6:
            msu &= ((words << np.uint64(1 << b)) & ~np.uint64(low[b])) | np.uint64(low[b])
        else:
            v = msu.reshape(n_u, -1, 2, 1 << (b - 6))
            v[:, :, 1, :] &= words.reshape(n_u, -1, 2, 1 << (b - 6))[:, :, 0, :]
    cand = xp.flatnonzero(weight == 1)
    for c in range(m):  # no missing value of the record in its MSU
        hit = xp.flatnonzero(missing_bits[cand] >> c & 1)
        if hit.shape[0]:
            without = ((np.arange(n_words * 64) >> c) & 1) == 0
            keep = backend.to_device(np.packbits(without, bitorder="little").view(np.uint64), xp)
            msu[hit] &= keep[None, :]
    return _tally_bits(xp, msu, cand, g, m, size, n_words)


def _tally_bits(xp, msu, cand, g, m, size, n_words):
    flat = msu.reshape(-1)
    nz = xp.flatnonzero(flat)
    bits = xp.unpackbits(flat[nz].view(xp.uint8), bitorder="little").reshape(-1, 64)
    at, b = xp.nonzero(bits)
    subset = (nz[at] % n_words) * 64 + b
    row = cand[nz[at] // n_words]
    k = xp.zeros(subset.shape[0], dtype=xp.int64)
    for c in range(m):
        k += (subset >> c) & 1
    fact = backend.to_device(np.array([float(math.factorial(m - j)) for j in range(m + 1)]), xp)
    score = xp.bincount(row, weights=fact[k], minlength=g)
    count = xp.bincount(row, minlength=g)
    min_size = xp.zeros(g, dtype=xp.int64)
    for j in range(size, 0, -1):
        min_size = xp.where(xp.bincount(row[k == j], minlength=g) > 0, j, min_size)
    by_k = backend.to_host(xp.bincount(k, minlength=m + 1))
    contrib = []
    for c in range(m):
        per_k = backend.to_host(xp.bincount(k, weights=(subset >> c) & 1, minlength=m + 1))
        contrib.append(sum(float(math.factorial(m - j)) * float(per_k[j]) for j in range(1, m + 1)))
    by_size = [int(by_k[j]) for j in range(1, size + 1)]
    return score, count, min_size, contrib, by_size
