"""Match counts of predicates on a sample of rows as bit sets: one 64-bit word per 64 sample rows.

Per column, the sample rows a condition may hold for are looked up, not compared row by row: numeric
``lo <= b`` is a prefix of the rows sorted by ``lo`` and ``hi >= a`` a suffix of those sorted by ``hi``
(each prefix / suffix precomputed as a bit set, ``searchsorted`` picks it); a categorical condition is
the bit set of its cell id (the rows whose cell meets it, or with ``neg`` holds a value outside it).
A predicate's matches are the popcount of the AND of its used columns' bit sets: a few word gathers
per predicate and column, whatever the sample's size. The semantics are
:func:`gpuanon.attack.predicates.holds`' (tested against it).
"""

from __future__ import annotations

import numpy as np

#: bool cells built at once for a categorical column's lookup table (ids x sample rows)
ID_BLOCK = 1 << 24


def pack(m: np.ndarray, words: int) -> np.ndarray:
    """``(k, s)`` bool to ``(k, words)`` uint64, bit ``j`` of the row set when ``m[:, j]``."""
    out = np.zeros((m.shape[0], words * 8), dtype=np.uint8)
    packed = np.packbits(m, axis=1, bitorder="little")
    out[:, :packed.shape[1]] = packed
    return out.view(np.uint64)


def _prefixes(order: np.ndarray, words: int) -> np.ndarray:
    """``(len(order) + 1, words)``: row ``k`` the bit set of the first ``k`` sample positions of ``order``."""
    one = np.zeros((len(order) + 1, words), dtype=np.uint64)
    one[np.arange(1, len(order) + 1), order // 64] = np.left_shift(np.uint64(1), (order % 64).astype(np.uint64))
    return np.bitwise_or.accumulate(one, axis=0)


def _numeric(q, name: str, u: np.ndarray, lo: np.ndarray, hi: np.ndarray, words: int) -> np.ndarray:
    """Bit sets of the sample rows (cells ``[lo, hi]``) that predicates ``u``'s condition on ``name`` may hold for."""
    nan = np.isnan(lo)
    ok = np.flatnonzero(~nan)
    lo_o, hi_o = ok[np.argsort(lo[ok], kind="stable")], ok[np.argsort(hi[ok], kind="stable")]
    lo_s, hi_s = lo[lo_o], hi[hi_o]
    by_lo, by_hi = _prefixes(lo_o, words), _prefixes(hi_o, words)  # first k by lo, by hi
    all_hi = by_hi[-1]
    a, b, inv = q.a[name][u], q.b[name][u], q.inv[name][u]
    # inside: lo <= b and hi >= a; inv: lo < a or hi > b
    m = by_lo[np.searchsorted(lo_s, b, side="right")]
    m &= all_hi & ~by_hi[np.searchsorted(hi_s, a, side="left")]
    if inv.any():
        lo_lt_a = by_lo[np.searchsorted(lo_s, a[inv], side="left")]
        hi_gt_b = all_hi & ~by_hi[np.searchsorted(hi_s, b[inv], side="right")]
        m[inv] = lo_lt_a | hi_gt_b
    if nan.any():
        m |= np.where(q.null[name][u][:, None], pack(nan[None, :], words), np.uint64(0))
    return m


def _categorical(q, c, u: np.ndarray, cells: np.ndarray, words: int) -> np.ndarray:
    """Bit sets of the sample rows (cell ids ``cells``) that predicates ``u``'s condition on ``c`` may hold for."""
    p, neg = q.p[c.name][u], q.neg[c.name][u]
    key = p * 2 + neg  # one lookup row per (cell id, neg) the predicates use
    ids, inverse = np.unique(key, return_inverse=True)
    tab = np.empty((len(ids), words), dtype=np.uint64)
    step = max(1, ID_BLOCK // max(len(cells), 1))
    for s in range(0, len(ids), step):  # blocks of ids
        pid, pneg = ids[s:s + step] // 2, ids[s:s + step] % 2 == 1
        r, pp = cells[None, :], pid[:, None]
        m = c.holds(r, pp, pneg[:, None])
        tab[s:s + step] = pack(np.asarray(m, dtype=bool), words)
    return tab[inverse.reshape(-1)]


def sample_counts(q, columns, table, sample: np.ndarray) -> np.ndarray:
    """How many of ``table``'s ``sample`` rows each predicate may match (exact)."""
    words = max(1, -(-len(sample) // 64))
    acc = np.broadcast_to(pack(np.ones((1, len(sample)), dtype=bool), words), (q.n, words)).copy()
    for c in columns:  # a loop over columns
        u = np.flatnonzero(q.used[c.name])
        if not len(u):
            continue
        if c.kind == "numeric":
            m = _numeric(q, c.name, u, table.lo[c.name][sample], table.hi[c.name][sample], words)
        else:
            m = _categorical(q, c, u, table.cell[c.name][sample], words)
        acc[u] = acc[u] & m
    return np.bitwise_count(acc).sum(axis=1, dtype=np.int64)
