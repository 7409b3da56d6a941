"""Predicates over encoded cells, held as arrays (one entry per predicate), and their match counts.

A predicate is a conjunction of per-column conditions. Numeric: the value lies in ``[a, b]`` (or,
with ``inv``, outside it); a missing value matches when ``null``. Categorical: the value is in cell
``p``'s set (or, with ``neg``, a non-missing value outside it). A row whose cell is a set *may match*
when some value it allows satisfies the condition; a point row matches exactly as anonymeter's
equality and comparison queries do. Counts are whole-array: conditions are evaluated column by column
on a sample of rows as bit sets, then on (predicate, candidate row) pairs, and a predicate is dropped
once it matches two rows (only 0, 1 or "2 or more" matter to singling out).
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field

import numpy as np

from . import pairs as pair_index
from .bitsets import sample_counts
from .cells import same_cells

#: (predicate, row) pairs checked at once (:func:`_pair_matches`; 8 MB per int64 array: measured 8-14 % faster than
#: 4M pairs on the checks of a 1M-row release's singling out)
BLOCK = 1 << 20
#: rows of the first look (bit sets, :mod:`.bitsets`) that drops the predicates matching two of them
SAMPLE = 1024
#: candidates per predicate in the first round of exact counting (each round takes four times more)
CHUNK = 16


@dataclass
class Predicates:
    n: int
    used: dict = field(default_factory=dict)
    a: dict = field(default_factory=dict)
    b: dict = field(default_factory=dict)
    inv: dict = field(default_factory=dict)
    null: dict = field(default_factory=dict)
    p: dict = field(default_factory=dict)
    neg: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, columns, n: int) -> "Predicates":
        q = cls(n)
        for c in columns:
            q.used[c.name] = np.zeros(n, dtype=bool)
            if c.kind == "numeric":
                q.a[c.name], q.b[c.name] = np.full(n, -np.inf), np.full(n, np.inf)
                q.inv[c.name], q.null[c.name] = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
            else:
                q.p[c.name], q.neg[c.name] = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        return q

    def take(self, idx) -> "Predicates":
        pick = lambda d: {k: v[idx] for k, v in d.items()}  # noqa: E731
        return Predicates(len(idx), pick(self.used), pick(self.a), pick(self.b), pick(self.inv), pick(self.null),
                          pick(self.p), pick(self.neg))

    @staticmethod
    def concat(parts: list) -> "Predicates":
        parts = [q for q in parts if q.n]
        if not parts:
            return Predicates(0)
        cat = lambda name: {k: np.concatenate([getattr(q, name)[k] for q in parts])  # noqa: E731
                            for k in getattr(parts[0], name)}
        return Predicates(sum(q.n for q in parts), cat("used"), cat("a"), cat("b"), cat("inv"), cat("null"),
                          cat("p"), cat("neg"))

    def keys(self, columns) -> np.ndarray:
        """One float row per predicate (unused columns zeroed): equal rows are the same predicate."""
        parts = []
        for c in columns:
            u = self.used[c.name]
            if c.kind == "numeric":
                for arr in (self.a[c.name], self.b[c.name], self.inv[c.name], self.null[c.name]):
                    parts.append(np.where(u, arr.astype(np.float64), 0.0))
            else:
                parts += [np.where(u, self.p[c.name], -1).astype(np.float64), np.where(u, self.neg[c.name], 0.0)]
            parts.append(u.astype(np.float64))
        return np.column_stack(parts) if parts else np.zeros((self.n, 0))

    def column_counts(self, columns, mask) -> dict:
        """For the predicates in ``mask``: how many use each column."""
        return {c.name: int(self.used[c.name][mask].sum()) for c in columns}


def interval_mask(xp, a, b, inv, lo, hi):
    """Whether cells ``[lo, hi]`` may hold a value inside ``[a, b]`` (``inv``: outside it), broadcast;
    missing cells are the caller's."""
    return xp.where(inv, ~((lo >= a) & (hi <= b)), (lo <= b) & (hi >= a))


def _numeric_mask(q: Predicates, name: str, u, lo, hi) -> np.ndarray:
    """``(len(u), len(lo))``: whether the numeric conditions of predicates ``u`` may hold for cells ``[lo, hi]``."""
    a, b = q.a[name][u][:, None], q.b[name][u][:, None]
    nan = np.isnan(lo)
    with np.errstate(invalid="ignore"):
        if np.array_equal(lo, hi, equal_nan=True):  # points: inside and within agree
            m = (lo <= b) & (lo >= a)
            inv = q.inv[name][u]
            if inv.any():
                m ^= inv[:, None]
        else:
            m = interval_mask(np, a, b, q.inv[name][u][:, None], lo, hi)
    if nan.any():
        m = np.where(nan, q.null[name][u][:, None], m)
    return m


def holds(q: Predicates, columns, table, rows) -> np.ndarray:
    """``(q.n, len(rows))``: whether each predicate may match each of ``table``'s ``rows``."""
    out = np.ones((q.n, len(rows)), dtype=bool)
    for c in columns:  # a loop over columns
        u = np.flatnonzero(q.used[c.name])
        if not len(u):
            continue
        if c.kind == "numeric":
            m = _numeric_mask(q, c.name, u, table.lo[c.name][rows], table.hi[c.name][rows])
        else:
            r, p = table.cell[c.name][rows][None, :], q.p[c.name][u][:, None]
            neg = q.neg[c.name][u][:, None]
            m = c.holds(r, p, neg)
        out[u] &= m
    return out


def _has_nan(table, name: str) -> bool:
    """Whether numeric column ``name`` of ``table`` has a missing cell (once per table and column)."""
    key = ("has_nan", name)
    if key not in table.memo:
        table.memo[key] = bool(np.isnan(table.lo[name]).any())
    return table.memo[key]


def _condition(q: Predicates, c, table, qid, rows) -> np.ndarray:
    """Whether predicate ``qid[i]``'s condition on column ``c`` may hold for row ``rows[i]`` (pairs)."""
    name = c.name
    if c.kind == "numeric":
        lo = table.lo[name][rows]
        hi = lo if table.hi[name] is table.lo[name] else table.hi[name][rows]  # points: one gather
        a, b = q.a[name][qid], q.b[name][qid]
        with np.errstate(invalid="ignore"):
            m = (lo <= b) & (hi >= a)
            if q.inv[name].any():
                inv = q.inv[name][qid]
                m = np.where(inv, ~((lo >= a) & (hi <= b)), m)
        if not _has_nan(table, name):
            return m
        nan = np.isnan(lo)
        return np.where(nan, q.null[name][qid], m)
    r, p, neg = table.cell[name][rows], q.p[name][qid], q.neg[name][qid]
    return c.holds(r, p, neg)


@dataclass
class _Index:
    """Rows of a table sorted per column, for the candidate rows of one condition: numeric, the rows
    with an unbounded cell, then the bounded ones by ``lo``, then the missing ones; categorical, by cell."""

    n: int
    perm: dict = field(default_factory=dict)
    key: dict = field(default_factory=dict)  # numeric: sorted lo of bounded cells; categorical: point offsets
    info: dict = field(default_factory=dict)  # numeric: (n_wild, n_bounded, widest); categorical: set-block start
    rows: np.ndarray | None = None
    pairs: dict = field(default_factory=dict)  # (outer, inner) column names: their :class:`.pairs.PairIndex`
    build_pairs: bool = True  # whether a pair index may be built (not on subsets: they take their parent's)
    columns: dict = field(default_factory=dict)  # per column name: its ranks and groups (:mod:`.pairs`)
    source: object = None  # a weak reference to the table it was built on (:func:`row_index`)
    cols: list = field(default_factory=list)  # the columns it was built for


def _sort_key(v: np.ndarray) -> np.ndarray:
    """``v`` (finite) as 16-bit offsets from its minimum when it holds integers spanning fewer than 2^16 (the same
    order and ties: a stable sort of either is the same, and 16-bit keys sort by radix), else ``v``."""
    if not len(v):
        return v
    low, high = v.min(), v.max()
    if high - low < (1 << 16) and np.array_equal(v, np.floor(v)):
        return (v - low).astype(np.uint16)
    return v


def _index(columns, table, rows) -> _Index:
    ix = _Index(len(rows))
    for c in columns:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = table.lo[c.name][rows], table.hi[c.name][rows]
            nan = np.isnan(lo)
            wild = ~nan & ~(np.isfinite(lo) & np.isfinite(hi))
            fin = ~nan & ~wild
            order = np.argsort(_sort_key(lo[fin]), kind="stable")
            ix.perm[c.name] = np.concatenate([rows[wild], rows[fin][order], rows[nan]])
            ix.key[c.name] = lo[fin][order]
            width = (hi - lo)[fin]
            ix.info[c.name] = (int(wild.sum()), int(fin.sum()), float(width.max()) if width.size else 0.0)
        else:
            cell = table.cell[c.name][rows]
            top = int(cell.max()) if len(cell) else 0
            # 16-bit ids sort by radix (the same stable order)
            order = np.argsort(cell.astype(np.int16) if 0 <= top < (1 << 15) and cell.min() >= 0 else cell,
                               kind="stable")
            ix.perm[c.name] = rows[order]
            ix.key[c.name] = np.searchsorted(cell[order], np.arange(c.n_cats + 1))
            ix.info[c.name] = int(ix.key[c.name][-1])
    return ix


def _ranges(q: Predicates, c, ix: _Index, qid) -> tuple:
    """Candidate rows of the condition on ``c`` of predicates ``qid``: ``(owner, start, end)`` ranges
    in ``ix.perm[c]`` (a superset of the rows the condition may hold for)."""
    name, n = c.name, ix.n
    if c.kind == "numeric":
        n_wild, n_fin, widest = ix.info[name]
        a, b = q.a[name][qid], q.b[name][qid]
        s = n_wild + np.searchsorted(ix.key[name], a - widest, side="left")
        e = n_wild + np.searchsorted(ix.key[name], b, side="right")
        e = np.maximum(e, s)
        inv = q.inv[name][qid]
        s, e = np.where(inv, 0, s), np.where(inv, n, e)
        null = q.null[name][qid] & ~inv
        owners = [qid, qid[null], np.where(inv, qid, qid)[:0]]
        starts = [s, np.full(int(null.sum()), n_wild + n_fin), np.zeros(0, dtype=np.int64)]
        ends = [e, np.full(int(null.sum()), n), np.zeros(0, dtype=np.int64)]
        wild = qid[~inv] if n_wild else qid[:0]
        owners.append(wild)
        starts.append(np.zeros(len(wild), dtype=np.int64))
        ends.append(np.full(len(wild), n_wild, dtype=np.int64))
    else:
        off, set_start, nc = ix.key[name], ix.info[name], c.n_cats
        p, neg = q.p[name][qid], q.neg[name][qid]
        point = ~neg & (p < nc)
        owners, starts, ends = [qid[neg], qid[point]], [np.zeros(int(neg.sum()), dtype=np.int64), off[p[point]]], \
            [np.full(int(neg.sum()), n), off[p[point] + 1]]
        big = ~neg & (p >= nc)
        if big.any():
            qi, cat = np.nonzero(c.sets[p[big] - nc])
            owners.append(qid[big][qi])
            starts.append(off[cat])
            ends.append(off[cat + 1])
        if set_start < n:  # rows whose cell is a set may match any predicate
            owners.append(qid[~neg])
            starts.append(np.full(int((~neg).sum()), set_start))
            ends.append(np.full(int((~neg).sum()), n))
    return np.concatenate(owners), np.concatenate(starts).astype(np.int64), np.concatenate(ends).astype(np.int64)


def _range_sizes(q: Predicates, c, ix: _Index, qid) -> np.ndarray:
    own, s, e = _ranges(q, c, ix, qid)
    pos = np.searchsorted(qid, own)
    return np.bincount(pos, weights=e - s, minlength=len(qid))


def _pair_matches(q: Predicates, used, table, own, st, ln, perm, exact) -> np.ndarray:
    """Owners and rows of the (predicate, candidate) pairs that match: ranges ``[st, st + ln)`` of ``perm``, every
    used condition checked on the pairs but those the range already meets exactly (``exact``: two positions in
    ``used`` per range, -1 for none), in blocks of about BLOCK pairs."""
    out = []
    cum = np.cumsum(ln)
    cuts = np.searchsorted(cum, np.arange(BLOCK, int(cum[-1]) + BLOCK, BLOCK)) + 1 if len(cum) else []
    prev = 0
    for cut in list(cuts) + [len(own)]:  # blocks of about BLOCK pairs
        sl = slice(prev, max(prev, min(cut, len(own))))
        prev = sl.stop
        lb = ln[sl]
        if not lb.sum():
            continue
        owner = np.repeat(own[sl], lb)
        first = np.cumsum(lb) - lb  # each entry's first pair
        rows = pair_index.gather(perm, st[sl], lb, first)
        ok = np.ones(len(rows), dtype=bool)
        for j, c2 in enumerate(used):  # a loop over columns: the pairs of the entries whose predicate uses c2
            ent = q.used[c2.name][own[sl]] & (exact[0][sl] != j) & (exact[1][sl] != j)
            if not ent.any():
                continue
            need = np.repeat(ent, lb)  # one byte per pair
            need &= ok  # the pairs no earlier condition ruled out
            sel = np.flatnonzero(need)
            if len(sel):
                ok[sel] = _condition(q, c2, table, owner[sel], rows[sel])
        out.append((owner[ok], rows[ok]))
    if not out:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate([o for o, _ in out]), np.concatenate([r for _, r in out])


def _pair_anchors(q: Predicates, used, table, ix: _Index, qid, size: np.ndarray):
    """The predicates whose two most selective conditions together allow fewer rows than any one
    (:mod:`.pairs`): their ranges ``(owner, start, end)`` lists, the row lists they index (each ``ix.n``
    long, concatenated in that order), the conditions each range meets exactly (the inner one, and a
    categorical outer one; positions in ``used``) and which of ``qid`` they are."""
    own, st, en, perms, ex = [], [], [], [], []
    where = {c.name: j for j, c in enumerate(used)}
    two = np.zeros(len(qid), dtype=bool)
    best = size.min(axis=0)
    for key, (outer, inner, pos) in pair_index.choose(q, used, ix, qid, size).items():  # a loop over column pairs
        if key not in ix.pairs:
            ix.pairs[key] = pair_index.build(outer, inner, table, ix)
        pi = ix.pairs[key]
        o, s, e = pair_index.ranges(pi, q, outer, inner, qid[pos])
        at = np.searchsorted(qid, o)
        total = np.bincount(at, weights=e - s, minlength=len(qid))
        better = np.zeros(len(qid), dtype=bool)
        better[pos] = total[pos] < best[pos]
        keep = better[at]
        two |= better  # those with no range match nothing
        if keep.any():
            own.append(o[keep])
            st.append(s[keep] + len(perms) * ix.n)
            en.append(e[keep] + len(perms) * ix.n)
            perms.append(pi.perm)
            ex.append(np.array([[where[inner.name]], [where[outer.name] if pi.edges is None else -1]]).repeat(
                int(keep.sum()), axis=1))
    return own, st, en, perms, ex, two


def _exact_counts(q: Predicates, columns, table, ix: _Index, qid, cap: int = 2, pairs: list | None = None):
    """Match counts of predicates ``qid`` (sorted), exact up to ``cap``: the candidate rows of each one's
    most selective condition, every condition checked on those (predicate, row) pairs, all columns' pairs
    together; the candidates are taken in growing chunks, and a predicate that has matched ``cap`` rows
    stops. ``pairs``: a list that receives the matching (predicate, row) pairs found."""
    used = [c for c in columns if q.used[c.name][qid].any()]
    if not used:
        if pairs is not None:
            pairs.append((np.repeat(qid, ix.n), np.tile(ix.rows, len(qid))))
        return np.full(len(qid), ix.n)
    size = np.stack([np.where(q.used[c.name][qid], _range_sizes(q, c, ix, qid), np.inf) for c in used])
    own, st, en, perms, ex, two = _pair_anchors(q, used, table, ix, qid, size)
    anchor = np.where(two, -1, np.argmin(size, axis=0))
    for j, c in enumerate(used):  # the predicates anchored on each column, as ranges of one row list
        mine = qid[anchor == j]
        if len(mine):
            o, s, e = _ranges(q, c, ix, mine)
            own.append(o)
            st.append(s + len(perms) * ix.n)
            en.append(e + len(perms) * ix.n)
            perms.append(ix.perm[c.name])
            # points and one interval / category: the range holds exactly the rows meeting the condition
            sure = pair_index.conditions(q, c, o) if pair_index.eligible(c, ix) else np.zeros(len(o), dtype=bool)
            ex.append(np.stack([np.where(sure, j, -1), np.full(len(o), -1)]))
    own, st, en, ex = np.concatenate(own), np.concatenate(st), np.concatenate(en), np.concatenate(ex, axis=1)
    perm = perms  # the row lists, indexed as one (see _gather)
    counts = np.zeros(len(qid), dtype=np.int64)
    pos = np.searchsorted(qid, own)
    chunk = CHUNK
    live = np.flatnonzero(en > st)
    while len(live):  # rounds of growing chunks (a few, not one per predicate)
        ln = np.minimum(en[live] - st[live], chunk)
        hit, hit_rows = _pair_matches(q, used, table, own[live], st[live], ln, perm, ex[:, live])
        counts += np.bincount(np.searchsorted(qid, hit), minlength=len(qid))
        if pairs is not None:
            pairs.append((hit, hit_rows))
        st[live] += ln
        live = live[(st[live] < en[live]) & (counts[pos[live]] < cap)]
        chunk *= 4
    return counts


def subset_index(ix: _Index, columns, keep: np.ndarray) -> _Index:
    """The index of a subset of its rows (``keep``: bool over the table's rows), in the same orders."""
    sub = _Index(int(keep[ix.rows].sum()))
    sub.rows = ix.rows[keep[ix.rows]]
    sub.build_pairs = False
    for key, pi in ix.pairs.items():  # a loop over the parent's pair indexes: its rows in the same order
        k = keep[pi.perm]
        sub.pairs[key] = pair_index.PairIndex(pi.perm[k], pi.key[k], pi.n_ranks, pi.edges, pi.values)
    for c in columns:  # a loop over columns
        perm = ix.perm[c.name]
        k = keep[perm]
        sub.perm[c.name] = perm[k]
        if c.kind == "numeric":
            n_wild, n_fin, widest = ix.info[c.name]
            kw, kf = k[:n_wild], k[n_wild:n_wild + n_fin]
            sub.key[c.name] = ix.key[c.name][kf]
            sub.info[c.name] = (int(kw.sum()), int(kf.sum()), widest)
        else:
            pos = np.concatenate([[0], np.cumsum(k)])
            sub.key[c.name] = pos[ix.key[c.name]]
            sub.info[c.name] = int(pos[ix.info[c.name]])
    return sub


#: live indexes by (columns, rows): a table whose cells equal those of the table an index was built on takes
#: it rather than sorting the same rows again (e.g. a release that is the original, unchanged)
_SHARED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def row_index(columns, table, rows=None) -> _Index:
    """The per-column sorted rows of ``table`` (``rows``, default all) that :func:`match_counts` reuses; built
    once per table, columns and rows (kept in ``table.memo``), or shared with a live table of equal cells."""
    rows = np.arange(table.n) if rows is None else np.asarray(rows)
    key = ("row_index", tuple(c.name for c in columns), len(rows), hashlib.blake2b(rows.tobytes()).hexdigest())
    if key not in table.memo:
        ix = _SHARED.get(key)
        source = ix.source() if ix is not None else None
        same = source is not None and len(ix.cols) == len(columns) and all(
            a is b for a, b in zip(ix.cols, columns))  # the same encoding's columns (their categories)
        if not same or not same_cells(columns, table, source):
            ix = _index(columns, table, rows)
            ix.rows, ix.source, ix.cols = rows, weakref.ref(table), list(columns)
            _SHARED[key] = ix
        table.memo[key] = ix
    return table.memo[key]


def match_counts(q: Predicates, columns, table, rng, rows=None, index: _Index | None = None) -> np.ndarray:
    """How many of ``table``'s ``rows`` (default all) each predicate may match, capped at 2: a dense
    check on a random sample of rows drops the predicates that match two there, the others are counted
    exactly from the candidates of their most selective condition."""
    if index is not None:
        rows = index.rows
    rows = np.arange(table.n) if rows is None else np.asarray(rows)
    counts = np.zeros(q.n, dtype=np.int64)
    if not q.n or not len(rows):
        return counts
    sample = rows[rng.permutation(len(rows))[:SAMPLE]]
    hit = sample_counts(q, columns, table, sample)
    if len(sample) == len(rows):  # the sample is every row: its counts are the counts
        return np.minimum(hit, 2)
    counts[hit >= 2] = 2
    rest = np.flatnonzero(hit < 2)
    if len(rest):
        ix = index if index is not None else row_index(columns, table, rows)
        counts[rest] = _exact_counts(q, columns, table, ix, rest)
    return np.minimum(counts, 2)


def match_pairs(q: Predicates, columns, table, index: _Index, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``index`` each predicate matches, for the predicates that match at most ``cap``:
    ``(predicate, row)`` pairs and ``over`` (bool per predicate: matches more than ``cap``, pairs left out)."""
    qid = np.arange(q.n)
    if not q.n or not index.n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(q.n, dtype=bool)
    found: list = []
    counts = _exact_counts(q, columns, table, index, qid, cap + 1, found)
    over = counts > cap
    own = np.concatenate([o for o, _ in found]) if found else np.zeros(0, dtype=np.int64)
    rows = np.concatenate([r for _, r in found]) if found else np.zeros(0, dtype=np.int64)
    keep = ~over[own]
    return own[keep], rows[keep], over
