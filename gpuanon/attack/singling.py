"""Singling out (anonymeter 1.1.0's ``SinglingOutEvaluator``, on cells).

Predicates are built from the release (duplicate rows dropped, as anonymeter does) and kept when they
may match exactly one release row. Univariate: per column, the one missing value, ``<= min``,
``>= max``, and every cell held by one release row. Multivariate: a random release row and ``n_cols``
random columns; a numeric cell ``[lo, hi]`` above the column's median (of cell midpoints) gives
``>= lo``, else ``<= hi``; a categorical cell gives "in the cell's set"; a missing cell "is missing".
The generator draws until it has ``n`` distinct predicates, and stops only when many draws in a row
find nothing new (``exhausted``: the release has no more); where draws would be too many, it lists every
singling-out (row, column set) pair and draws among them with the same law (:mod:`.singletons`). Success: the predicate matches exactly one
original row (duplicates dropped); the control the same (rescaled by Cohen and Nissim's model when the
sizes differ); the baseline from random predicates over the release's cells (anonymeter's operators).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..release.verify import splitmix64
from . import device_match
from .cells import Encoded, unique_keys, unique_rows
from .predicates import Predicates, match_counts, match_pairs, row_index, subset_index
from .singletons import draw, from_records, medians, successes
from .stats import results

#: control rows per predicate listed once for the correction's subsamples (predicates matching more are counted on each)
PAIR_CAP = 64
#: most predicates drawn in one batch of the multivariate generator
BATCH_MAX = 100_000
#: cost of one random draw over that of one (row, column set) pair of the exact pass (Adult: 3.7 us a draw, 0.7 us a pair)
DRAW_COST = 4
#: most model evaluations of the correction's fit (SciPy's default for two parameters is 200)
MAX_NFEV = 10_000


def _random_columns(rng, n: int, n_cols_total: int, n_cols: int) -> np.ndarray:
    """``(n, n_cols_total)`` bool: ``n_cols`` distinct random columns per predicate."""
    pick = np.argsort(rng.random((n, n_cols_total)), axis=1)[:, :n_cols]
    used = np.zeros((n, n_cols_total), dtype=bool)
    np.put_along_axis(used, pick, True, axis=1)
    return used


def univariate_candidates(e: Encoded, rows) -> Predicates:
    """anonymeter's univariate predicates over the release rows ``rows``."""
    parts = []
    for c in e.columns:  # a loop over columns
        if c.kind == "numeric":
            lo, hi = e.release.lo[c.name][rows], e.release.hi[c.name][rows]
            miss = np.isnan(lo)
            a, b, null = [], [], []
            if miss.sum() == 1:
                a, b, null = [np.inf], [-np.inf], [True]
            if (~miss).any():
                a += [-np.inf, np.nanmax(hi)]
                b += [np.nanmin(lo), np.inf]
                null += [False, False]
            first, cnt = _cell_counts(e, rows, c)
            rare = first[(cnt == 1) & ~miss[first]]
            q = Predicates.empty(e.columns, len(a) + len(rare))
            q.a[c.name] = np.concatenate([a, lo[rare]]).astype(np.float64)
            q.b[c.name] = np.concatenate([b, hi[rare]]).astype(np.float64)
            q.null[c.name] = np.concatenate([null, np.zeros(len(rare), dtype=bool)]).astype(bool)
        else:
            cnt = np.bincount(e.release.cell[c.name][rows])  # np.unique's counts (cell ids are small, >= 0)
            vals = np.flatnonzero(cnt)
            cnt = cnt[vals]
            q = Predicates.empty(e.columns, int((cnt == 1).sum()))
            q.p[c.name] = vals[cnt == 1]
        q.used[c.name][:] = True
        parts.append(q)
    return Predicates.concat(parts) if parts else Predicates.empty(e.columns, 0)


def _points(e: Encoded, c) -> bool:
    """Whether a numeric column's release cells are points held once (raw values: ``lo`` is ``hi``)."""
    return e.release.lo[c.name] is e.release.hi[c.name]


def _memo(e: Encoded, name: str, rows, c, make):
    """``make()`` kept in the release's memo per column and row list (the ``rows`` object itself: the same
    distinct rows are asked by the candidates and both modes' baselines)."""
    key = (name, c.name, id(rows))
    hit = e.release.memo.get(key)
    if hit is None or hit[0] is not rows:  # the object kept with its value: its id is not reused meanwhile
        hit = e.release.memo[key] = (rows, make())
    return hit[1]


def _numeric_key(e: Encoded, rows, c) -> np.ndarray:
    """A numeric column's release cells over ``rows`` as ``(lo, hi)`` pairs, missing as ``inf``."""
    lo, hi = e.release.lo[c.name][rows], e.release.hi[c.name][rows]
    return np.column_stack([np.where(np.isnan(lo), np.inf, lo), np.where(np.isnan(lo), np.inf, hi)])


def _cell_counts(e: Encoded, rows, c) -> tuple[np.ndarray, np.ndarray]:
    """A numeric column's distinct cells over ``rows``: :func:`unique_keys` of :func:`_numeric_key` (a point
    column's on its one field), each one's first position and count."""
    def make():
        key = _numeric_key(e, rows, c)
        return unique_keys(key[:, :1] if _points(e, c) else key)  # points: both fields equal
    return _memo(e, "cell_counts", rows, c, make)


def _distinct_cells(e: Encoded, rows, c) -> np.ndarray:
    """The distinct release cells of column ``c`` over ``rows`` in order: category ids, or numeric ``(lo, hi)``
    pairs (missing as ``inf``, as ``np.unique(key, axis=0)``)."""
    if c.kind == "numeric":
        return _memo(e, "distinct_cells", rows, c, lambda: _numeric_key(e, np.asarray(rows)[_cell_counts(e, rows, c)[0]], c))
    return _memo(e, "distinct_cells", rows, c,  # np.unique (ids >= 0)
                 lambda: np.flatnonzero(np.bincount(e.release.cell[c.name][rows])))


def random_predicates(e: Encoded, rows, n: int, n_cols: int, rng) -> Predicates:
    """The baseline: ``n`` predicates, each on ``n_cols`` random columns with a random release cell and a
    random operator (numeric ``== != > < >= <=``, categorical ``== !=``)."""
    q = Predicates.empty(e.columns, n)
    used = _random_columns(rng, n, len(e.columns), n_cols)
    for j, c in enumerate(e.columns):  # a loop over columns
        q.used[c.name] = used[:, j]
        if c.kind == "numeric":
            key = _distinct_cells(e, rows, c)
            pick = key[rng.integers(0, len(key), n)]
            vlo, vhi = pick[:, 0], pick[:, 1]
            miss = np.isposinf(vlo) & np.isposinf(vhi)
            op = rng.integers(0, 6, n)  # == != > < >= <=
            a = np.select([op <= 1, op == 2, op == 3, op == 4],
                          [vlo, np.nextafter(vhi, np.inf), -np.inf, vlo], -np.inf)
            b = np.select([op <= 1, op == 2, op == 3, op == 4], [vhi, np.inf, np.nextafter(vlo, -np.inf), np.inf], vhi)
            q.a[c.name] = np.where(miss, np.where(op == 0, np.inf, -np.inf), a)  # missing: == is null, else not
            q.b[c.name] = np.where(miss, np.where(op == 0, -np.inf, np.inf), b)
            q.inv[c.name] = ~miss & (op == 1)
            q.null[c.name] = miss & (op == 0)
        else:
            vals = _distinct_cells(e, rows, c)
            q.p[c.name] = vals[rng.integers(0, len(vals), n)]
            q.neg[c.name] = rng.integers(0, 2, n) == 1
    return q


def _hashes(keys: np.ndarray) -> np.ndarray:
    """One 64-bit hash per predicate (row of ``keys``), splitmix64 over the float bits of its fields."""
    h = np.zeros(len(keys), dtype=np.uint64)
    bits = np.ascontiguousarray(keys + 0.0).view(np.uint64)  # + 0.0: no -0.0
    for j in range(keys.shape[1]):  # a loop over fields
        h = splitmix64(h ^ bits[:, j])
    return h


def _new(have: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Positions in ``new`` (hashes) of the first occurrence of each predicate not in ``have``."""
    _, first = np.unique(new, return_index=True)
    first = np.sort(first)
    return first[~np.isin(new[first], have)]


def _every_singleton(e: Encoded, rows, n: int, n_cols: int, med: dict, rng):
    """Rejection sampling's law without the rejections: every successful (row, column set) pair listed,
    then the first ``n`` distinct predicates of uniform draws among them (:mod:`.singletons`); all of them,
    ``exhausted``, when there are fewer."""
    pos, sets = successes(e, rows, n_cols, med, rng)
    q = from_records(e, rows[pos], sets, med)
    pick = draw(q, _hashes(q.keys(e.columns)), n, rng)
    return q.take(pick), len(pick) < n


def generate(e: Encoded, rows, n: int, mode: str, n_cols: int, rng, patience: int | None = None,
             exact: bool | None = None):
    """Up to ``n`` distinct predicates that may match exactly one release row; ``exhausted`` when the
    release could not give ``n``. Multivariate: random draws (anonymeter's), or, when the first batch's
    yield says the draws would cost more than one pass per column set (``exact`` forces either), every
    singling-out pair listed and drawn from with the same law."""
    cols = e.columns
    if mode == "univariate":
        cand = univariate_candidates(e, rows)
        cand = cand.take(rng.permutation(cand.n))
        ok = np.flatnonzero(match_counts(cand, cols, e.release, rng, index=row_index(cols, e.release, rows)) == 1)
        ok = ok[_new(np.zeros(0, dtype=np.uint64), _hashes(cand.keys(cols)[ok]))][:n]
        return cand.take(ok), len(ok) < n
    med = medians(e, rows)
    n_cols = min(n_cols, len(cols))
    got, keys, idle = [], np.zeros(0, dtype=np.uint64), 0
    patience = patience or max(20 * n, 20000)
    if exact:
        return _every_singleton(e, rows, n, n_cols, med, rng)
    have, ix = 0, row_index(cols, e.release, rows)
    drawn = found = 0
    exhaustive = math.comb(len(cols), n_cols) * len(rows)  # the exact pass: (row, column set) pairs
    while have < n and idle < patience:
        if drawn and exact is None and (n - have) * drawn / max(found, 1) * DRAW_COST > exhaustive:
            return _every_singleton(e, rows, n, n_cols, med, rng)
        # sized by the yield so far (new predicates per draw): a few large batches, not hundreds of small ones
        want = 2 * (n - have) if not drawn else 1.5 * (n - have) * (drawn + 1) / (found + 1)
        batch = int(min(max(want, 512), BATCH_MAX))
        recs = rows[rng.integers(0, len(rows), batch)]
        q = from_records(e, recs, _random_columns(rng, batch, len(cols), n_cols), med)
        ok = np.flatnonzero(match_counts(q, cols, e.release, rng, index=ix) == 1)
        k = _hashes(q.take(ok).keys(cols))
        fresh = _new(keys, k)[:n - have]
        drawn, found = drawn + batch, found + len(fresh)
        if len(fresh):
            got.append(q.take(ok[fresh]))
            keys = np.concatenate([keys, k[fresh]])
            have += len(fresh)
            idle = 0
        else:
            idle += batch
    return (Predicates.concat(got) if got else Predicates.empty(cols, 0)), have < n


def _correction_counts(q: Predicates, e: Encoded, crow, rng) -> tuple[np.ndarray, np.ndarray]:
    """anonymeter's subsamples of the control for the correction: 10 sizes from 1,000 to every row, 5 draws of
    each, a draw a uniform draw without replacement of ``crow``; here the 5 draws of each size are the prefixes
    of 5 random orders of ``crow`` (one permutation each, nested sizes). Returns the sizes and, per subsample,
    how many predicates match exactly one of its rows."""
    n = len(crow)
    grid = np.linspace(min(1000, n), n, 10).astype(int)
    orders = [rng.permutation(n) for _ in range(5)]  # drawn first: match_counts' own draws do not move them
    full = row_index(e.columns, e.control, crow)
    # the control rows each predicate matches (those matching few): a subsample's count from its two earliest
    own, mrows, over = match_pairs(q, e.columns, e.control, full, PAIR_CAP)
    q_over = q.take(np.flatnonzero(over))
    whole = n == e.control.n  # every control row distinct: crow is 0 .. n - 1, a position its own row
    succ = np.zeros((len(grid), len(orders)), dtype=np.int64)
    rank = np.full(e.control.n, n, dtype=np.int64)  # a row's place in the order (n: not in crow, never drawn)
    for r, order in enumerate(orders):  # a loop over the 5 draws
        rank[order if whole else crow[order]] = np.arange(n)
        pr = rank[mrows]
        srt = np.lexsort((pr, own))  # per predicate, its rows by place
        o, p = own[srt], pr[srt]
        start = np.flatnonzero(np.concatenate([[True], o[1:] != o[:-1]])) if len(o) else np.zeros(0, dtype=np.int64)
        first, second = np.full(q.n, n, dtype=np.int64), np.full(q.n, n, dtype=np.int64)
        first[o[start]] = p[start]
        two = start[(start + 1 < len(o)) & (o[np.minimum(start + 1, len(o) - 1)] == o[start])]
        second[o[two]] = p[two + 1]
        # a predicate matches one row of the first ``size`` when its earliest row is in them and its second not
        succ[:, r] = np.searchsorted(np.sort(first), grid) - np.searchsorted(np.sort(second), grid)
        for j, size in enumerate(grid if q_over.n else []):  # the others counted on each subsample
            sub = subset_index(full, e.columns, rank < size)
            succ[j, r] += int((match_counts(q_over, e.columns, e.control, rng, index=sub) == 1).sum())
    return np.repeat(grid, len(orders)), succ.ravel()


def _fit_correction(q: Predicates, e: Encoded, crow, n_ori: int, rng) -> float:
    """anonymeter's ``fit_correction_term``: successes on subsamples of the control
    (:func:`_correction_counts`), the model ``norm * ((1 - w)^0 ... )`` of Cohen and Nissim fitted, its ratio
    at the original's and control's size."""
    from scipy.optimize import curve_fit  # noqa: PLC0415

    def integral(n, w_min, w_max):
        return ((n * w_min + 1) * (1 - w_min) ** n - (n * w_max + 1) * (1 - w_max) ** n) / (n + 1)

    def model(x, w_eff, norm):
        return norm * integral(x, 0, w_eff)

    sizes, succ = _correction_counts(q, e, crow, rng)
    sizes, succ = sizes.astype(np.float64), succ.astype(np.float64)
    w0 = 1 / sizes.max()
    p0 = (w0, 1 / integral(sizes.max(), 0, w0))
    # max_nfev: room for a nearly flat fit (few successes); a fit that converges sooner is unchanged by it
    popt, _ = curve_fit(model, sizes, succ, bounds=(0, (1, np.inf)), p0=p0, max_nfev=MAX_NFEV)
    return float(model(n_ori, *popt) / model(len(crow), *popt))


def singling_out(e: Encoded, n_attacks: int, mode: str = "multivariate", n_cols: int = 3, seed: int = 0,
                 confidence_level: float = 0.95, dev=None) -> dict:
    """One singling-out evaluation: predicates, successes, baseline, control, risk (``dev``: the cells on the
    device, :class:`.device.Cells`: the successes counted there, the same report)."""
    rng = np.random.default_rng(seed)
    count = match_counts if dev is None else partial(device_match.match_counts, dev)
    rrow = unique_rows(e.release, e.columns)
    orow = unique_rows(e.original, e.columns, like=e.release)
    q, exhausted = generate(e, rrow, n_attacks, mode, n_cols, rng)
    win = count(q, e.columns, e.original, rng, orow) == 1
    base = random_predicates(e, rrow, n_attacks, 1 if mode == "univariate" else min(n_cols, len(e.columns)), rng)
    n_base = int((count(base, e.columns, e.original, rng, orow) == 1).sum())
    n_control = correction = None
    if e.control is not None:
        crow = unique_rows(e.control, e.columns)
        n_control = float((count(q, e.columns, e.control, rng, crow) == 1).sum())
        if len(crow) != len(orow) and q.n:
            correction = _fit_correction(q, e, crow, len(orow), rng)
            n_control *= correction
    res = results(n_attacks, int(win.sum()), n_base, n_control, confidence_level)
    res.update(mode=mode, n_cols=n_cols if mode == "multivariate" else 1, queries=q.n, exhausted=bool(exhausted),
               control_correction=correction, columns_of_successes=q.column_counts(e.columns, win))
    if exhausted:
        res["warnings"].append(f"the release gave only {q.n} distinct {mode} predicates that single out one of its "
                               f"rows (of {n_attacks} asked); rates are over the {n_attacks} asked, as anonymeter's")
    return res
