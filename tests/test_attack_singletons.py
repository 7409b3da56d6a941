"""The exact multivariate singling-out generator (gpuanon.attack.singletons) against brute force: every
(row, column set) pair whose predicate matches exactly one release row, on small random releases with
intervals, '*', sets, missing cells and duplicates; and its draws against rejection sampling's law."""

import itertools

import numpy as np
import pandas as pd
import pytest

from gpuanon.attack import cells, singletons
from gpuanon.attack.predicates import holds
from gpuanon.attack.singling import _hashes, generate


def _release(seed: int, n: int = 80, generalized: bool = True):
    rng = np.random.default_rng(seed)

    def frame(m):
        return pd.DataFrame({"a": rng.integers(0, 6, m).astype(float), "b": rng.choice(["x", "y", "z"], m),
                             "c": rng.choice(["p", "q", "r"], m), "d": rng.integers(0, 4, m) * 0.5,
                             "e": rng.integers(0, 40, m).astype(float)})

    orig, ctrl = frame(n), frame(n)
    rel = orig.copy()
    rel.loc[rng.random(n) < 0.1, "d"] = np.nan
    rel.loc[rng.random(n) < 0.05, "b"] = np.nan
    if generalized:
        lo = rel["a"].astype(int)
        rel["a"] = [f"{x}-{x + int(rng.integers(0, 3))}" if i % 4 else "*" for i, x in enumerate(lo)]
        rel.loc[rng.random(n) < 0.15, "c"] = "*"
        rel.loc[rng.random(n) < 0.2, "c"] = "p|q"
    return cells.encode(rel, orig, ctrl, ["a", "b", "c", "d", "e"])


def _brute(e, rows, n_cols):
    med = singletons.medians(e, rows)
    got = set()
    for S in itertools.combinations(range(len(e.columns)), n_cols):
        used = np.zeros((len(rows), len(e.columns)), dtype=bool)
        used[:, list(S)] = True
        q = singletons.from_records(e, rows, used, med)
        one = holds(q, e.columns, e.release, rows).sum(axis=1) == 1  # every pair, densely
        got |= {(int(r), S) for r in np.flatnonzero(one)}
    return got


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n_cols", [1, 2, 3])
def test_successes_are_the_brute_force_singletons(seed, n_cols, monkeypatch):
    if seed % 2:  # merged numeric bins and the sparse categorical key
        monkeypatch.setattr(singletons, "BUDGET", 24)
        monkeypatch.setattr(singletons, "BUDGET_MIN", 24)
    e = _release(seed, generalized=seed % 4 < 2)
    rows = cells.unique_rows(e.release, e.columns)
    if seed % 3 == 0:  # duplicate rows kept: they match each other
        rows = np.concatenate([rows, rows[:10]])
    pos, sets = singletons.successes(e, rows, n_cols, singletons.medians(e, rows), np.random.default_rng(seed))
    got = {(int(r), tuple(np.flatnonzero(s))) for r, s in zip(pos, sets)}
    want = _brute(e, rows, n_cols)
    assert got == want and len(pos) == len(got)
    assert want or n_cols < 3  # the tables give some


def test_draws_follow_rejection_samplings_law():
    """On a tiny release: the first distinct predicate of the exact draw is each successful predicate with
    probability (its pairs) / (all successful pairs), as rejection sampling's first kept draw; chi-square."""
    from scipy.stats import chisquare

    e = _release(3, n=14)
    rows = cells.unique_rows(e.release, e.columns)
    med = singletons.medians(e, rows)
    pos, sets = singletons.successes(e, rows, 2, med, np.random.default_rng(0))
    q = singletons.from_records(e, rows[pos], sets, med)
    h = _hashes(q.keys(e.columns))
    uniq, weight = np.unique(h, return_counts=True)
    assert len(uniq) >= 5
    firsts = np.array([h[singletons.draw(q, h, 1, np.random.default_rng(s))[0]] for s in range(4000)])
    seen = np.searchsorted(uniq, firsts)
    obs = np.bincount(seen, minlength=len(uniq))
    exp = weight / weight.sum() * len(firsts)
    assert chisquare(obs, exp).pvalue > 1e-3
    # the first two, ordered: P(a then b) = w_a / W * w_b / (W - w_a), as drawing pairs and skipping repeats
    pairs = [tuple(h[singletons.draw(q, h, 2, np.random.default_rng(10_000 + s))]) for s in range(4000)]
    a, b = uniq[np.argmax(weight)], uniq[np.argmin(weight)]
    W, wa, wb = weight.sum(), weight.max(), weight.min()
    p = wa / W * wb / (W - wa)
    k = sum(x == (a, b) for x in pairs)
    assert abs(k - p * 4000) < 4 * np.sqrt(4000 * p * (1 - p)) + 1


def test_exact_generator_gives_every_singleton_when_fewer_than_asked():
    e = _release(5, n=30)
    rows = cells.unique_rows(e.release, e.columns)
    want = {(int(r), S) for r, S in _brute(e, rows, 3)}
    q, exhausted = generate(e, rows, 10_000, "multivariate", 3, np.random.default_rng(0), exact=True)
    assert exhausted and 0 < q.n <= len(want)
    assert len(np.unique(_hashes(q.keys(e.columns)))) == q.n


@pytest.mark.parametrize("kind", ["short", "negative", "fractions", "wide"])
def test_bins_by_table_are_searchsorted(kind):
    """A numeric column's bins: whole numbers over a short range looked up in a table, the others searched;
    either way ``searchsorted(vals, x, side="right") + 1`` (infinite ends in the first / last bins)."""
    rng = np.random.default_rng(len(kind))
    x = {"short": rng.integers(0, 90, 5000), "negative": rng.integers(-700, 300, 5000) * 1.0,
         "fractions": rng.integers(0, 90, 5000) / 4, "wide": rng.integers(0, 10**9, 5000)}[kind].astype(float)
    vals = np.unique(x)
    x = np.concatenate([x, [np.inf, -np.inf, vals[0], vals[-1]]])
    got = singletons._bin_of(vals, x)
    assert np.array_equal(got, np.searchsorted(vals, x, side="right") + 1)
    assert list(got[-4:]) == [len(vals) + 1, 1, 2, len(vals) + 1]


@pytest.mark.parametrize("bits", [3, 20, 40, 63])
def test_sort_words_sort_as_lexsort_and_give_back_each_code(bits):
    """The partner sorts' packed words: lexicographically sorted they order the rows as np.lexsort of the
    codes, and each column's code is read back from its word, shift and width (one word or several)."""
    rng = np.random.default_rng(bits)
    codes = [rng.integers(0, 1 << bits, 500, dtype=np.int64) // rng.integers(1, 9) for _ in range(5)]
    codes[2] = codes[2] % 3  # ties: the later columns decide
    ax = [{"kind": "categorical", "cell": c} for c in codes]
    cols = [3, 0, 2, 4, 1]
    words, where = singletons._sort_words(ax, cols)
    assert (len(words) > 1) == (bits >= 20)
    order = np.lexsort(words[::-1])
    assert np.array_equal(order, np.lexsort([codes[j] for j in cols][::-1]))
    for j, (k, shift, nb) in where.items():
        got = (words[k] >> np.uint64(shift)) & np.uint64((1 << nb) - 1)
        assert np.array_equal(got, codes[j].astype(np.uint64))


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf - inf in the index's cell widths
@pytest.mark.parametrize("seed", range(4))
def test_point_bins_from_the_row_index_are_np_uniques(seed):
    """A point column's distinct finite values read off the release's row index (sorted) give the same bins as
    np.unique over the rows: ties, missing, infinite and signed zero values, duplicate rows."""
    from gpuanon.attack.predicates import row_index
    rng = np.random.default_rng(seed)
    n = 200
    v = rng.choice([-0.0, 0.0, 1.5, 2.0, np.inf, -np.inf, np.nan, 7.0], n)
    df = pd.DataFrame({"v": v, "w": rng.integers(0, 50, n).astype(float), "b": rng.choice(["x", "y"], n)})
    e = cells.encode(df, df, None, ["v", "w", "b"])
    rows = cells.unique_rows(e.release, e.columns)
    if seed % 2:
        rows = np.concatenate([rows, rows[:7]])
    med = singletons.medians(e, rows)
    plain = singletons._axes(e, rows, med)
    fast = singletons._axes(e, rows, med, row_index(e.columns, e.release, rows))
    for a, b in zip(plain, fast):
        if isinstance(a, singletons._Numeric):
            assert a.fine == b.fine and np.array_equal(a.lo, b.lo) and np.array_equal(a.hi, b.hi)
