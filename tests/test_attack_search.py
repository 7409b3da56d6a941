"""The attacks' searches against brute force on small random tables full of ties: the sample counts as
bit sets against the dense check, distinct rows by lexsort against np.unique, the inference's pruned
nearest row and one-neighbour linkability over distinct cells against every (target, release row)
distance (anonymeter's first row, the random rule's smallest rank, ties kept)."""

import numpy as np
import pandas as pd
import pytest

from gpuanon.attack import bitsets, cells, search
from gpuanon.attack.distance import distances, kinds, pair_distances
from gpuanon.attack.neighbours import _nearest, _rank
from gpuanon.attack.predicates import Predicates, holds
from gpuanon.attack.singling import from_records, random_predicates, univariate_candidates


def _tables(seed: int, n: int = 60, generalized: bool = False):
    rng = np.random.default_rng(seed)

    def frame(m):
        return pd.DataFrame({"a": rng.integers(0, 4, m).astype(float), "b": rng.choice(["x", "y", "z"], m),
                             "c": rng.choice(["p", "q"], m), "d": rng.integers(0, 3, m) * 0.5})

    orig, ctrl = frame(n), frame(n)
    rel = orig.copy()
    rel.loc[rng.random(n) < 0.1, "d"] = np.nan
    orig.loc[rng.random(n) < 0.05, "a"] = np.nan
    if generalized:
        lo = rel["a"].fillna(0).astype(int)
        rel["a"] = [f"{x}-{x + 1}" if i % 3 else "*" for i, x in enumerate(lo)]
        rel.loc[rng.random(n) < 0.3, "c"] = "p|q"
    return cells.encode(rel, orig, ctrl, ["a", "b", "c", "d"])


@pytest.mark.parametrize("seed", range(6))
def test_bit_set_sample_counts_are_the_dense_counts(seed):
    e = _tables(seed, generalized=seed % 2 == 1)
    rng = np.random.default_rng(seed)
    rows = cells.unique_rows(e.release, e.columns)
    used = rng.random((50, len(e.columns))) < 0.5
    q = Predicates.concat([from_records(e, rows[rng.integers(0, len(rows), 50)], used, {"a": 1.5, "d": 0.5}),
                           random_predicates(e, rows, 80, 2, rng), univariate_candidates(e, rows)])
    for t in (e.release, e.original, e.control):
        for sample in (np.arange(t.n), rng.permutation(t.n)[:17], rng.permutation(t.n)[:64]):
            want = holds(q, e.columns, t, sample).sum(axis=1)
            assert np.array_equal(bitsets.sample_counts(q, e.columns, t, sample), want)


def test_unique_keys_is_numpys_unique_over_rows():
    rng = np.random.default_rng(0)
    for _ in range(100):
        k = rng.integers(0, 3, (int(rng.integers(1, 40)), int(rng.integers(1, 4)))).astype(float)
        k[rng.random(k.shape) < 0.1] = np.inf
        _, first, cnt = np.unique(k, axis=0, return_index=True, return_counts=True)
        got = cells.unique_keys(k)
        assert np.array_equal(got[0], first) and np.array_equal(got[1], cnt)


@pytest.mark.parametrize("collide", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_distinct_rows_by_hash_are_numpys_first_rows(seed, collide, monkeypatch):
    """unique_rows hashes each row; equal hashes are compared, and a collision (forced here: every row the
    same hash) sorts the rows instead. Either way: np.unique's first positions over the rows' cells."""
    if collide:
        monkeypatch.setattr(cells, "splitmix64", lambda z: z * np.uint64(0))
    e = _tables(seed, generalized=seed % 2 == 1)
    for t in (e.release, e.original, e.control):
        key = np.column_stack([t.cell[c.name].astype(float) if c.name in t.cell else
                               np.column_stack([t.lo[c.name], t.hi[c.name]]) for c in e.columns])
        key = np.where(np.isnan(key), np.inf, key)
        want = np.sort(np.unique(key, axis=0, return_index=True)[1])
        got = cells.unique_rows(t, e.columns)
        assert np.array_equal(got, want)
        assert cells.unique_rows(t, e.columns) is got  # once per table and columns


@pytest.mark.parametrize("seed", range(4))
def test_distinct_rows_taken_from_an_equal_table_only(seed):
    """unique_rows(t, like=u) takes u's distinct rows only when u holds t's cells bit for bit (a raw release of
    the original); otherwise t's own, either way np.unique's first positions over t's cells."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.integers(0, 3, 80).astype(float), "b": rng.choice(["x", "y"], 80)})
    df.loc[rng.random(80) < 0.1, "a"] = np.nan
    other = df.copy()
    other.loc[0, "b"] = "y" if other.loc[0, "b"] == "x" else "x"  # one cell differs
    for rel, shared in ((df.copy(), True), (other, False)):
        e = cells.encode(rel, df, None, ["a", "b"])
        mine = cells.unique_rows(e.release, e.columns)
        got = cells.unique_rows(e.original, e.columns, like=e.release)
        key = np.column_stack([np.where(np.isnan(e.original.lo["a"]), np.inf, e.original.lo["a"]),
                               e.original.cell["b"]])
        assert np.array_equal(got, np.sort(np.unique(key, axis=0, return_index=True)[1]))
        assert (got is mine) == shared


@pytest.mark.parametrize("seed", range(8))
def test_pruned_nearest_row_is_the_brute_force_first_nearest(seed, monkeypatch):
    monkeypatch.setattr(search, "PAIRS", 7)  # several chunks
    e = _tables(seed, generalized=seed % 2 == 1)
    cols = e.columns
    for t in (e.original, e.control):
        trows = np.arange(t.n)
        want = np.argmin(distances(e, cols, t, trows), axis=1)
        assert np.array_equal(search.first_nearest(e, cols, t, trows), want)
        d = distances(e, cols, t, trows)
        rr = np.random.default_rng(seed).integers(0, e.release.n, t.n)
        assert np.array_equal(pair_distances(e, cols, t, trows, rr, kinds(e, cols)), d[trows, rr])


def _link_brute(e, a_cols, b_cols, table, trows, rng):
    first = rand = ties = 0
    n = e.release.n
    for blk in search.blocks(len(trows), n, n // search.RANK_SHARE):
        ra = _rank(rng.permutation(n))
        rb = _rank(rng.permutation(n))
        fa, xa, ta = _nearest(distances(e, a_cols, table, trows[blk]), ra)
        fb, xb, tb = _nearest(distances(e, b_cols, table, trows[blk]), rb)
        first += int((fa == fb).sum())
        rand += int((xa == xb).sum())
        ties += int((ta & tb).any(axis=1).sum())
    return first, rand, ties


@pytest.mark.parametrize("seed", range(8))
def test_one_neighbour_linkability_over_distinct_cells_is_the_brute_force(seed, monkeypatch):
    if seed % 3 == 2:
        monkeypatch.setattr(search, "BLOCK", 64)  # several blocks of targets
    e = _tables(seed, n=80, generalized=seed % 2 == 1)
    a_cols, b_cols = e.columns[:2], e.columns[2:]
    for t in (e.original, e.control):
        trows = np.random.default_rng(seed).permutation(t.n)[:50]
        got = search.link_one(e, a_cols, b_cols, t, trows, np.random.default_rng(seed))
        assert got == _link_brute(e, a_cols, b_cols, t, trows, np.random.default_rng(seed))
