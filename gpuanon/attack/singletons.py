"""Every multivariate singling-out predicate of a release, found per column set rather than drawn.

anonymeter's multivariate generator draws a random release row and ``n_cols`` random columns and keeps the
predicate when it matches exactly one release row. Kept draws are uniform over the successful (row, column
set) pairs, and the first occurrences of distinct predicates in a stream of such draws come in the order of
independent exponential clocks, one per predicate, at the rate of the pairs that give it. So the same law
is had exactly by listing every successful pair and racing those clocks: :func:`successes` lists them,
:func:`draw` races them. Where successes are rare (about 3 in 100,000 draws on a 1M-row raw release) this
costs one pass per column set instead of hundreds of millions of draws.

Listing, per column set: a row's predicate certainly matches another row when that row lies strictly beyond
it on each numeric column (``>= lo``: the other's ``hi`` in a higher bin than ``lo``; ``<= hi``: its ``lo`` in a
lower bin), holds the same categorical cell, is missing where the predicate says "is missing", and anything
where the row's cell is ``*``. Those rows are counted for every row at once from a histogram of the rows over
binned cells and its cumulative sums (a box sum by inclusion-exclusion); a row with one such other row cannot
single out. The few rows left are counted exactly by :func:`match_counts`, the reference.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .predicates import Predicates, match_counts, row_index

#: most cells of one column set's histogram (numeric bins are merged to fit); also at most one per row
BUDGET = 1 << 18
#: fewest cells allowed by the per-row cap
BUDGET_MIN = 4096
#: predicates counted exactly in one call of match_counts
VERIFY_BATCH = 200_000


def medians(e, rows) -> dict:
    """Per numeric column, the median of the release cells' midpoints (anonymeter's split of ``>=`` / ``<=``)."""
    med = {}
    for c in e.columns:
        if c.kind == "numeric":
            lo, hi = e.release.lo[c.name][rows], e.release.hi[c.name][rows]
            with np.errstate(invalid="ignore"):
                mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, np.nan)
            med[c.name] = float(np.nanmedian(mid)) if np.isfinite(mid).any() else 0.0
    return med


def from_records(e, rows, used: np.ndarray, medians: dict) -> Predicates:
    """Multivariate predicates from release rows ``rows`` on the columns ``used`` (bool, per column)."""
    q = Predicates.empty(e.columns, len(rows))
    for j, c in enumerate(e.columns):
        u = used[:, j].copy()
        if c.kind == "numeric":
            lo, hi = e.release.lo[c.name][rows], e.release.hi[c.name][rows]
            miss, star = np.isnan(lo), np.isinf(lo) & np.isinf(hi)
            u &= ~star  # '*' says nothing
            with np.errstate(invalid="ignore"):
                up = (lo + hi) / 2 > medians[c.name]
            q.a[c.name] = np.where(miss, np.inf, np.where(up, lo, -np.inf))
            q.b[c.name] = np.where(miss, -np.inf, np.where(up, np.inf, hi))
            q.null[c.name] = miss
        else:
            q.p[c.name] = e.release.cell[c.name][rows]
        q.used[c.name] = u
    return q


def _bin_of(vals: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(vals, x, side="right") + 1`` for ``x`` in ``vals`` (sorted, distinct, finite) or
    infinite (NaN: any bin); whole numbers over a short range by a lookup table instead of a search."""
    span = float(vals[-1] - vals[0]) if len(vals) else np.inf
    if span > 4 * len(x) + 1024 or not np.array_equal(vals, np.floor(vals)):
        return np.searchsorted(vals, x, side="right") + 1
    table = np.zeros(int(span) + 1, dtype=np.int64)
    table[(vals - vals[0]).astype(np.int64)] = np.arange(2, len(vals) + 2)
    fin = np.isfinite(x)
    return np.where(fin, table[np.where(fin, x - vals[0], 0).astype(np.int64)], np.where(x > 0, len(vals) + 1, 1))


class _Numeric:
    """A numeric column's cells over the release rows as bins (0 missing, 1 ``-inf``, then one per distinct
    finite end, ``+inf`` with the largest), the predicate's mode per row (0 '*', 1 ``>= lo``, 2 ``<= hi``,
    3 "is missing", as :func:`from_records`), and, per number of bins asked, the bins merged by row counts."""

    kind = "numeric"

    def __init__(self, lo, hi, median, sorted_lo=None):
        points = lo is hi or np.array_equal(lo, hi, equal_nan=True)  # raw values: each end found once
        if points and sorted_lo is not None:  # the finite values already sorted (a row index): their distinct ones
            vals = sorted_lo[np.concatenate([[True], sorted_lo[1:] != sorted_lo[:-1]])] if len(sorted_lo) else sorted_lo
        else:
            vals = np.unique(lo[np.isfinite(lo)] if points else np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]]))
        miss, star = np.isnan(lo), np.isinf(lo) & np.isinf(hi)
        self.lo = np.where(miss, 0, _bin_of(vals, lo))
        self.hi = self.lo if points else np.where(miss, 0, _bin_of(vals, hi))
        with np.errstate(invalid="ignore"):
            up = (lo + hi) / 2 > median
        self.mode = np.where(miss, 3, np.where(star, 0, np.where(up, 1, 2))).astype(np.int8)  # narrow: gathered
        f = len(vals) + 2  # bins 0 .. fine
        # per row, its slot in a level's per-mode tables ([lo bins, hi bins, missing, '*']) and its other end
        self.slot = np.where(self.mode == 1, self.lo, np.where(self.mode == 2, f + self.hi, np.where(
            self.mode == 3, 2 * f, 2 * f + 1))).astype(np.int32)
        self.up, self.down = self.mode == 1, self.mode == 2
        self.other = np.where(self.up, self.hi, self.lo)
        self.point = self.hi is self.lo or bool(np.array_equal(self.lo, self.hi))
        self.star = bool(star.any())
        self.fine = len(vals) + 1  # the largest bin
        self.levels: dict = {}
        self.cum = None

    def level(self, target: int) -> dict:
        """Bins merged to about ``target`` (each heavy value kept alone), and per row: its coordinate as a
        matched row (``lo`` / ``hi`` bin), its box as a predicate on the directional axis (see
        :func:`_directional`), whether the box is upward, and whether the row lies in its own box."""
        if target >= self.fine:
            target = self.fine
        if target in self.levels:
            return self.levels[target]
        if target < self.fine:
            if self.cum is None:  # the rows' ends per bin (the missing bin none), cumulated: once per column
                w = np.bincount(self.lo, minlength=self.fine + 1) + np.bincount(self.hi, minlength=self.fine + 1)
                w[0] = 0
                self.cum = np.cumsum(w), w
            cum, w = self.cum
            key = (target * (cum - w)) // max(int(cum[-1]), 1) + (target * cum) // max(int(cum[-1]), 1)
            key[0] = -1
            # np.unique(key, return_inverse=True)[1]: the key never decreases, its distinct values counted along
            mapping = np.concatenate([[0], np.cumsum(key[1:] != key[:-1])])
        else:
            mapping = np.arange(self.fine + 1)
        top = int(mapping[-1])
        single = np.bincount(mapping) == 1
        mapping = mapping.astype(np.int32)  # narrow: the histograms' passes over the rows read less
        cl = mapping[self.lo]
        ch = cl if self.point else mapping[self.hi]
        # per fine bin (then gathered once per row by its slot): the box's bound ``>= lo`` / ``<= hi`` ...
        lo_q = np.where(single[mapping], mapping, mapping + 1)
        hi_q = np.where(single[mapping], mapping, mapping - 1)
        ends = np.array([0, top + 2], dtype=np.int32)
        box = np.concatenate([np.where(lo_q > top, top + 1, lo_q), np.where(hi_q < 1, top + 1, hi_q), ends])[self.slot]
        wide = np.concatenate([mapping, mapping, ends])[self.slot]  # with the row's own bins
        q = np.concatenate([lo_q, hi_q, ends])[self.slot]
        co = mapping[self.other]  # ... and whether the row's other end lies in its own box
        inside = ~((self.up & (co < q)) | (self.down & (co > q)))
        lv = {"top": top, "lo": cl, "hi": ch, "box": box, "wide": wide, "up": self.up, "inside": inside}
        self.levels[target] = lv
        return lv


def _axes(e, rows, medians: dict, ix=None) -> list:
    """Per column: a :class:`_Numeric`, or a categorical column's cells over ``rows`` (dict); ``ix``: the release's
    row index over ``rows`` (:func:`row_index`), whose sorted bounded ``lo`` are a point column's finite values."""
    out = []
    for c in e.columns:  # a loop over columns
        if c.kind == "numeric":
            lo = e.release.lo[c.name][rows]  # a point column's one array kept one (its bins found once)
            hi = lo if e.release.hi[c.name] is e.release.lo[c.name] else e.release.hi[c.name][rows]
            out.append(_Numeric(lo, hi, medians[c.name], None if ix is None else ix.key[c.name]))
        else:
            cell = e.release.cell[c.name][rows]
            out.append({"kind": "categorical", "size": c.n_cats + len(c.sets), "cell": cell,
                        "cell32": cell.astype(np.int32), "sets": bool(len(c.sets))})
    return out


def _categorical_key(cats: list, budget: int) -> tuple[np.ndarray, int]:
    """One code per row for the categorical cells of a column set, and how many codes."""
    size = math.prod(a["size"] for a in cats)
    if size > budget:  # too many combinations for a dense axis: the ones that occur
        _, key = np.unique(np.column_stack([a["cell"] for a in cats]), axis=0, return_inverse=True)
        return key.ravel(), int(key.max()) + 1
    key = cats[0]["cell32"]  # int32: size <= budget
    for a in cats[1:]:  # a loop over the set's other columns
        key = key * np.int32(a["size"]) + a["cell32"]
    return key, size


def _directional(h: np.ndarray, axis: int, up: bool) -> np.ndarray:
    """Along ``axis`` (bins 0 .. top): [the missing bin, the sums of bins 1..b (or b..top when ``up``) for
    b = 1 .. top, 0 (an empty box), the sum of every bin (no condition)], in ``h``'s dtype."""
    top = h.shape[axis] - 1

    def at(sl):
        return (slice(None),) * axis + (sl,)

    shape = list(h.shape)
    shape[axis] = top + 3
    out = np.empty(shape, dtype=h.dtype)
    out[at(slice(0, 1))] = h[at(slice(0, 1))]
    out[at(slice(top + 1, top + 2))] = 0
    if top:
        body = h[at(slice(1, None))]
        if up:  # written reversed into a reversed view: the sums from b to the top
            np.cumsum(body[at(slice(None, None, -1))], axis=axis, dtype=h.dtype, out=out[at(slice(top, 0, -1))])
        else:
            np.cumsum(body, axis=axis, dtype=h.dtype, out=out[at(slice(1, top + 1))])
        every = out[at(slice(1, 2))] if up else out[at(slice(top, top + 1))]
        np.add(out[at(slice(0, 1))], every, out=out[at(slice(top + 2, top + 3))])
    else:
        out[at(slice(top + 2, top + 3))] = h[at(slice(0, 1))]
    return out


def _bounds(ax: list, n: int, idx: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows ``idx``: a lower bound on the other rows (of all ``n``) their predicates on these columns match
    (see the module), and the rows in their boxes widened by their own bins (an upper bound on the rows
    matched, themselves included, where :func:`_widened_bounds` says so)."""
    cats = [a for a in ax if not isinstance(a, _Numeric)]
    nums = [a for a in ax if isinstance(a, _Numeric)]
    ckey, csize = _categorical_key(cats, budget) if cats else (np.zeros(n, dtype=np.int32), 1)
    if not nums:  # the predicate's cell on every column: the rows holding the same cells
        same = np.bincount(ckey, minlength=csize)[ckey[idx]]
        return same - 1, same
    lv, room = [None] * len(nums), budget / csize
    for i, j in enumerate(np.argsort([a.fine for a in nums], kind="stable")):  # fewest bins first: exact if they fit
        target = 1 << max(1, int(np.log2(max(room, 2)) / (len(nums) - i)))
        lv[j] = nums[j].level(nums[j].fine if nums[j].fine <= target else target)
        room /= lv[j]["top"] + 1
    sizes = [v["top"] + 1 for v in lv]
    k = len(lv)
    pattern = np.zeros(len(idx), dtype=np.int64)  # hi bins matched on upward axes of non-point columns
    direction = np.zeros(len(idx), dtype=np.int64)  # upward boxes (downward where the column says nothing)
    inside = np.ones(len(idx), dtype=bool)
    box = wide = ckey[idx].astype(np.int64)
    for j, (a, v) in enumerate(zip(nums, lv)):  # a loop over the set's numeric columns
        up = v["up"][idx]
        if not a.point:
            pattern |= up.astype(np.int64) << j
        direction |= up.astype(np.int64) << j
        inside &= v["inside"][idx]
        box = box * (sizes[j] + 2) + v["box"][idx]  # on the directional axes (each top + 3 long)
        wide = wide * (sizes[j] + 2) + v["wide"][idx]
    key = (pattern * (1 << k) + direction).astype(np.int16)
    order = np.argsort(key, kind="stable")
    cut = np.concatenate([[0], np.cumsum(np.bincount(key))])
    hists: dict = {}
    count, upper = np.zeros(len(idx), dtype=np.int64), np.zeros(len(idx), dtype=np.int64)
    for kk in np.flatnonzero(cut[1:] > cut[:-1]):  # at most 4^k tables, usually one or a few
        pat, dirs = int(kk) >> k, int(kk) & ((1 << k) - 1)
        if pat not in hists:
            flat = ckey if csize * math.prod(sizes) < 1 << 31 else ckey.astype(np.int64)
            for j, v in enumerate(lv):  # a loop over the set's numeric columns
                flat = flat * flat.dtype.type(sizes[j]) + (v["hi"] if (pat >> j) & 1 else v["lo"])
            hists[pat] = np.bincount(flat, minlength=csize * math.prod(sizes)).astype(np.int32).reshape(
                [csize] + sizes)
        t = hists[pat]
        for j in range(k):  # a loop over the set's numeric columns; tables sharing the first directions shared
            memo = (pat, j, dirs & ((2 << j) - 1))
            if memo not in hists:
                hists[memo] = _directional(t, j + 1, bool((dirs >> j) & 1))
            t = hists[memo]
        r = order[cut[kk]:cut[kk + 1]]
        count[r], upper[r] = t.ravel()[box[r]], t.ravel()[wide[r]]
    return count - inside, upper


def _widened_bounds(ax: list, idx: np.ndarray) -> np.ndarray:
    """Whether the widened box holds every row that rows ``idx``' predicates may match: no set cells in the
    categorical columns, and no '*' cells in a numeric column where the predicate says "is missing"."""
    ok = np.ones(len(idx), dtype=bool)
    for a in ax:  # a loop over the set's columns
        if not isinstance(a, _Numeric):
            ok &= not a["sets"]
        elif a.star:
            ok &= a.mode[idx] != 3
    return ok


def _codes(a, rows=None) -> np.ndarray:
    """A column's cells as one integer per row (for sorting)."""
    if isinstance(a, _Numeric):
        return a.lo * (a.fine + 1) + a.hi
    return a["cell"]


def _sorted_cells(a, code: np.ndarray, mode: np.ndarray) -> tuple:
    """A column's cells from its sort code (:func:`_sort_words`): a categorical cell, or a numeric row's mode
    (``mode``), ``lo`` and ``hi`` bins."""
    if not isinstance(a, _Numeric):
        return (code,)
    if a.point:
        return mode, code, code
    return mode, code // np.uint64(a.fine + 1), code % np.uint64(a.fine + 1)


def _certain(a, own: tuple, other: tuple) -> np.ndarray:
    """Whether a row's predicate's condition on this column certainly holds for another row (``own`` / ``other``:
    the two rows' cells as :func:`_sorted_cells` gives them)."""
    if not isinstance(a, _Numeric):
        return own[0] == other[0]
    m, lo, hi = own
    lo_s, hi_s = other[1], other[2]
    out = m == 0
    out |= (m == 1) & (hi_s >= lo)
    out |= (m == 2) & (lo_s <= hi) & (lo_s > 0)
    out |= (m == 3) & (lo_s == 0)
    return out


def _distinct(a) -> int:
    """How many distinct cells a column has over the rows (counted on its small codes where it can)."""
    if not isinstance(a, _Numeric):
        return int(np.count_nonzero(np.bincount(a["cell"])))
    if a.point:
        return int(np.count_nonzero(np.bincount(a.lo)))
    return len(np.unique(_codes(a)))


def _sort_words(ax: list, cols) -> tuple[list, dict]:
    """The columns' codes (in the order ``cols``) packed into as few 64-bit words as hold them, first column
    in the high bits: sorting the words lexicographically sorts the rows by the codes (a point column by its
    ``lo`` bin alone, which orders it as its code does); and per column, its word, shift and bits."""
    words, word, used, where = [], None, 64, {}
    for j in cols:  # a loop over columns
        a = ax[j]
        code = a.lo if isinstance(a, _Numeric) and a.point else _codes(a)
        bits = max(int(code.max()).bit_length(), 1) if len(code) else 1
        if used + bits > 64:
            if word is not None:
                words.append(word)
            word, used = code.astype(np.uint64), bits
        else:
            word = (word << np.uint64(bits)) | code.astype(np.uint64)
            used += bits
        where[j] = [len(words), used, bits]  # the shift: the bits packed after it (fixed below)
    words.append(word)
    for j in where:  # a loop over columns
        k, at, bits = where[j]
        total = max(u for kk, u, _ in where.values() if kk == k)
        where[j] = (k, total - at, bits)
    return words, where


def _partner_bits(ax: list, n: int) -> list:
    """Per column, per row (uint8): bit ``i`` set where the row's ``i``-th partner certainly matches the row's
    predicate on that column; the partners are a row's neighbours in sorts of the rows by their cells (the
    columns with fewest distinct cells first, and the other way round), the next and the previous. A row
    cannot single out on a column set whose columns' bits share one (that partner matches it on all)."""
    distinct = [_distinct(a) for a in ax]
    out = [np.zeros(n, dtype=np.uint8) for _ in ax]
    if n < 2:  # no other row
        return out
    nums = [j for j, a in enumerate(ax) if isinstance(a, _Numeric)]
    modes = []  # the numeric columns' modes, 2 bits each, 32 columns a word
    for g in range(0, len(nums), 32):  # a loop over words
        m = np.zeros(n, dtype=np.uint64)
        for t, j in enumerate(nums[g:g + 32]):  # a loop over columns
            m |= ax[j].mode.astype(np.uint64) << np.uint64(2 * t)
        modes.append(m)
    for i, cols in enumerate((np.argsort(distinct, kind="stable"), np.argsort(distinct, kind="stable")[::-1])):
        words, where = _sort_words(ax, cols)
        order = np.argsort(words[0], kind="stable") if len(words) == 1 else np.lexsort(words[::-1])
        sw, sm = [w[order] for w in words], [m[order] for m in modes]  # the cells in that order: a few gathers
        for g in range(0, len(ax), 32):  # the columns' two bits in sorted order, 32 columns a word
            word = np.zeros(n, dtype=np.uint64)
            for j in range(g, min(g + 32, len(ax))):  # a loop over columns
                k, shift, nb = where[j]
                code = (sw[k] >> np.uint64(shift)) & np.uint64((1 << nb) - 1)
                t = nums.index(j) if j in nums else 0
                mode = ((sm[t // 32] >> np.uint64(2 * (t % 32))) & np.uint64(3)) if j in nums else None
                own = _sorted_cells(ax[j], code, mode)
                both = np.empty(n, dtype=np.uint8)  # bit 0: the next row certainly matches; bit 1: the previous
                for at, to, b in ((slice(0, -1), slice(1, None), 0), (slice(-1, None), slice(0, 1), 0),  # wraps
                                  (slice(1, None), slice(0, -1), 1), (slice(0, 1), slice(-1, None), 1)):
                    hit = _certain(ax[j], tuple(x[at] for x in own), tuple(x[to] for x in own)).view(np.uint8)
                    if b:
                        both[at] |= hit << 1
                    else:
                        both[at] = hit
                word |= both.astype(np.uint64) << np.uint64(2 * (j - g))
            back = np.empty(n, dtype=np.uint64)
            back[order] = word  # in row order
            for j in range(g, min(g + 32, len(ax))):  # a loop over columns
                out[j] |= ((back >> np.uint64(2 * (j - g))) & np.uint64(3)).astype(np.uint8) << np.uint8(2 * i)
    return out


def _alive(bits: list, sets: list):
    """Per column set (in ``sets``' order, each a tuple of columns): the rows no partner rules out there, those
    whose columns' partner bits (:func:`_partner_bits`) share none; sets sharing all but their last column
    share the AND of those columns' bits."""
    n = len(bits[0]) if bits else 0
    head, both, last = None, None, np.empty(n, dtype=np.uint8)
    for S in sets:  # a loop over column sets
        if S[:-1] != head:
            head, both = S[:-1], np.full(n, 0xFF, dtype=np.uint8)
            for j in head:  # a loop over the set's columns
                both &= bits[j]
        np.bitwise_and(both, bits[S[-1]], out=last)
        yield np.flatnonzero(last == 0)


def successes(e, rows, n_cols: int, medians: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, column set) pair whose predicate matches exactly one of the release's ``rows``:
    positions in ``rows`` and the sets as a bool ``(pairs, columns)`` matrix. ``rng`` draws the samples of
    match_counts (the pairs do not depend on it)."""
    cols = e.columns
    ix = row_index(cols, e.release, rows)
    ax = _axes(e, rows, medians, ix)
    n = len(rows)
    bits = _partner_bits(ax, n) if n > 1 else [np.zeros(n, dtype=np.uint8) for _ in ax]
    budget = min(BUDGET, max(BUDGET_MIN, n))  # cells beyond the rows cost more than the rows they rule out
    sets = list(itertools.combinations(range(len(cols)), n_cols))
    cand_row, cand_set, found_row, found_set = [], [], [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for s, (S, left) in enumerate(zip(sets, _alive(bits, sets))):  # a loop over column sets (each a whole-array pass)
        if len(left):
            sub = [ax[j] for j in S]
            low, high = _bounds(sub, n, left, budget)
            sure = (high == 1) & _widened_bounds(sub, left)  # nothing else even in the widened box
            found_row.append(left[(low < 1) & sure])
            found_set.append(np.full(len(found_row[-1]), s, dtype=np.int64))
            left = left[(low < 1) & ~sure]
        cand_row.append(left)
        cand_set.append(np.full(len(left), s, dtype=np.int64))
    cand_row, cand_set = np.concatenate(cand_row), np.concatenate(cand_set)
    found_row, found_set = np.concatenate(found_row), np.concatenate(found_set)
    member = np.zeros((len(sets), len(cols)), dtype=bool)
    for s, S in enumerate(sets):  # a loop over column sets
        member[s, list(S)] = True
    ok = np.zeros(len(cand_row), dtype=bool)
    for start in range(0, len(cand_row), VERIFY_BATCH):  # batches of candidates, counted exactly
        sl = slice(start, start + VERIFY_BATCH)
        q = from_records(e, rows[cand_row[sl]], member[cand_set[sl]], medians)
        ok[sl] = match_counts(q, cols, e.release, rng, index=ix) == 1
    rows_ok = np.concatenate([found_row, cand_row[ok]])
    sets_ok = np.concatenate([found_set, cand_set[ok]])
    order = np.lexsort([rows_ok, sets_ok])  # by set, then row: the same list whichever way it was found
    return rows_ok[order], member[sets_ok[order]]


def draw(q: Predicates, hashes: np.ndarray, n: int, rng) -> np.ndarray:
    """Positions in ``q`` (every successful pair's predicate, ``hashes`` one per predicate) of the first ``n``
    distinct predicates that uniform draws of pairs would meet, in that order: an exponential clock per
    distinct predicate at the rate of its pairs, the earliest first."""
    uniq, first, weight = np.unique(hashes, return_index=True, return_counts=True)
    clock = rng.exponential(size=len(uniq)) / weight
    return first[np.argsort(clock, kind="stable")[:n]]

