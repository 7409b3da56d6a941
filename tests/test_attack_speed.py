"""The attacks' fast paths against plain references: exact match counts in growing chunks and a staged
sample (any chunk / stage size gives the brute-force counts), the control rows listed once for Cohen and
Nissim's correction (the same counts as matching every subsample), the linkability tie rules by
thresholds (the same choices as cumulative sums over the ties), and the tie-aware rate on a raw copy of
the Adult half against its hand count (the chance that a random choice among equally near rows links)."""

import numpy as np
import pandas as pd
import pytest

from gpuanon.attack import cells, evaluate, neighbours, pairs, predicates, singling
from gpuanon.attack.predicates import Predicates, match_counts, match_pairs, row_index, subset_index
from gpuanon.attack.singling import from_records, random_predicates
from gpuanon.attack.predicates import holds
from test_attack_hand import CITY, CONTROL, ORIG, RELEASE, _brute
from test_attack_search import _tables


def _predicates(e, seed):
    rng = np.random.default_rng(seed)
    rows = cells.unique_rows(e.release, e.columns)
    used = rng.random((40, len(e.columns))) < 0.5
    return Predicates.concat([from_records(e, rows[rng.integers(0, len(rows), 40)], used, {"age": 39.5, "hours": 40.0}),
                              random_predicates(e, rows, 60, 2, rng)]), rng


@pytest.mark.parametrize("chunk,sample", [(1, 2), (2, 3), (64, 256), (1, 0), (1, 65), (4, 11)])
def test_chunked_counts_match_brute_force(monkeypatch, chunk, sample):
    monkeypatch.setattr(predicates, "CHUNK", chunk)
    monkeypatch.setattr(predicates, "SAMPLE", sample)
    e = cells.encode(RELEASE, ORIG, CONTROL, list(ORIG.columns), {"city": CITY})
    for seed in range(3):
        q, rng = _predicates(e, seed)
        for frame, table, is_rel in ((RELEASE, e.release, True), (ORIG, e.original, False)):
            want = _brute(q, e, frame, list(ORIG.columns), is_rel)
            assert np.array_equal(match_counts(q, e.columns, table, rng), np.minimum(want.sum(axis=1), 2))


@pytest.mark.parametrize("cap", [0, 1, 2, 5])
def test_match_pairs_and_subsamples(monkeypatch, cap):
    monkeypatch.setattr(predicates, "CHUNK", 1)  # several rounds on 12 rows
    e = cells.encode(RELEASE, ORIG, CONTROL, list(ORIG.columns), {"city": CITY})
    q, rng = _predicates(e, 7)
    as_original = cells.Encoded(e.columns, e.release, e.control, None)  # the brute force reads "original"
    want = _brute(q, as_original, CONTROL, list(ORIG.columns), False)  # (predicates, control rows)
    full = row_index(e.columns, e.control)
    own, rows, over = match_pairs(q, e.columns, e.control, full, cap)
    assert np.array_equal(over, want.sum(axis=1) > cap)
    got = np.zeros_like(want)
    got[own, rows] = True
    assert np.array_equal(got, want & ~over[:, None])
    assert len(own) == int(got.sum())  # each pair once
    for _ in range(5):  # a subsample's counts from the pairs, as matching it
        keep = rng.random(e.control.n) < 0.6
        from_pairs = np.bincount(own[keep[rows]], minlength=q.n)
        direct = match_counts(q, e.columns, e.control, rng, index=subset_index(full, e.columns, keep))
        assert np.array_equal(np.minimum(from_pairs, 2)[~over], direct[~over])
        assert np.array_equal(np.minimum((want & keep[None, :]).sum(axis=1), 2), direct)


@pytest.mark.parametrize("groups", [1, 2, 5, 64])
@pytest.mark.parametrize("seed", range(6))
def test_counts_anchored_on_column_pairs_match_brute_force(monkeypatch, seed, groups):
    """Every predicate that can is anchored on a pair index (built whatever it saves, outer groups of a few
    rows): the counts, the pairs and a subsample's counts are still the dense check's."""
    monkeypatch.setattr(pairs, "GROUPS", groups)
    monkeypatch.setattr(pairs, "SMALL", 0)
    monkeypatch.setattr(pairs, "BUILD_ROWS", -np.inf)
    monkeypatch.setattr(predicates, "SAMPLE", 0)
    monkeypatch.setattr(predicates, "CHUNK", 2)
    e = _tables(seed, n=80, generalized=seed % 2 == 1)
    rng = np.random.default_rng(seed)
    rows = cells.unique_rows(e.release, e.columns)
    used = rng.random((60, len(e.columns))) < 0.6
    q = Predicates.concat([from_records(e, rows[rng.integers(0, len(rows), 60)], used, {"a": 1.5, "d": 0.5}),
                           random_predicates(e, rows, 60, 2, rng), random_predicates(e, rows, 40, 3, rng)])
    built = 0
    for t in (e.release, e.original, e.control):
        want = holds(q, e.columns, t, np.arange(t.n))
        full = row_index(e.columns, t)
        assert np.array_equal(match_counts(q, e.columns, t, rng, index=full), np.minimum(want.sum(axis=1), 2))
        built += len(full.pairs)
        own, prow, over = match_pairs(q, e.columns, t, full, 3)
        got = np.zeros_like(want)
        got[own, prow] = True
        assert np.array_equal(over, want.sum(axis=1) > 3) and np.array_equal(got, want & ~over[:, None])
        keep = rng.random(t.n) < 0.5
        sub = subset_index(full, e.columns, keep)
        assert np.array_equal(match_counts(q, e.columns, t, rng, index=sub),
                              np.minimum((want & keep[None, :]).sum(axis=1), 2))
    assert built  # the pair anchors were taken


def _chosen_by_cumsum(d, k, order):
    """The rules written with cumulative sums over the ties (the first ``need`` in position / random order)."""
    dk = np.partition(d, k - 1, axis=1)[:, k - 1][:, None]
    lt, eq = d < dk, d == dk
    need = k - lt.sum(axis=1, keepdims=True)
    rand = np.empty_like(eq)
    rand[:, order] = np.cumsum(eq[:, order], axis=1) <= need
    return lt | (eq & (np.cumsum(eq, axis=1) <= need)), lt | (eq & rand), d <= dk


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_tie_rules_match_cumulative_sums(k):
    rng = np.random.default_rng(k)
    d = rng.integers(0, 4, (50, 40)).astype(np.float64) / 3  # many ties
    d[:5] = 0.5  # rows that tie everywhere
    order = rng.permutation(40)
    got = neighbours._chosen(d, k, neighbours._rank(order))
    want = _chosen_by_cumsum(d, k, order)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    assert (got[0].sum(axis=1) == k).all() and (got[1].sum(axis=1) == k).all()


def test_tie_aware_rate_on_a_raw_copy_is_the_chance_a_random_choice_links():
    from gpuanon.datasets import get_dataset

    df, _ = get_dataset("adult")
    half = df.iloc[np.random.default_rng(0).permutation(len(df))[:6000]].reset_index(drop=True)
    a_cols, b_cols = ["age", "workclass", "education", "marital-status"], ["occupation", "race", "gender",
                                                                            "native-country"]
    r = evaluate(half, half, None, attacks=["linkability"], aux=(a_cols, b_cols), n_attacks=2000, seed=0)["linkability"]
    # by hand: a target's equally near rows on each side are its duplicates there (distance 0); one random
    # pick on each links with chance |both| / (|A| |B|)
    size = lambda cols: half.groupby(cols, dropna=False)[cols[0]].transform("size").to_numpy()  # noqa: E731
    p = float(np.mean(size(a_cols + b_cols) / (size(a_cols) * size(b_cols))))
    rate = r["tie_aware"]["n_success"] / 2000
    assert abs(rate - p) < 4 * np.sqrt(p * (1 - p) / 2000) + 0.005, (rate, p)
    # ties kept: the target itself is among the equally near rows on both sides, always
    assert r["ties_kept"]["n_success"] == 2000
    assert p < 0.1 and r["ties_kept"]["risk"]["value"] > 0.99


def test_one_neighbour_positions_match_the_masks():
    rng = np.random.default_rng(5)
    d = rng.integers(0, 3, (60, 30)).astype(np.float64) / 2
    ra, rb = neighbours._rank(rng.permutation(30)), neighbours._rank(rng.permutation(30))
    e = rng.integers(0, 3, (60, 30)).astype(np.float64) / 2
    (ca, xa, ta), (cb, xb, tb) = neighbours._chosen(d, 1, ra), neighbours._chosen(e, 1, rb)
    (fa, qa, sa), (fb, qb, sb) = neighbours._nearest(d, ra), neighbours._nearest(e, rb)
    assert np.array_equal(fa == fb, (ca & cb).any(axis=1))
    assert np.array_equal(qa == qb, (xa & xb).any(axis=1))  # positions, whatever each side's random order
    assert np.array_equal(sa, ta) and np.array_equal(sb, tb)


def _control_tables(n: int, dup: bool):
    rng = np.random.default_rng(n + dup)

    def frame(m):
        return pd.DataFrame({"a": rng.integers(0, 40, m).astype(float), "b": rng.choice(["x", "y", "z"], m),
                             "e": rng.permutation(2 * m)[:m].astype(float)})  # distinct rows

    orig, ctrl = frame(n), frame(n)
    if dup:  # repeated control rows: the subsamples draw among the distinct ones (crow not every row)
        ctrl = pd.concat([ctrl, ctrl.iloc[: n // 5]], ignore_index=True)
    return cells.encode(orig.copy(), orig, ctrl, ["a", "b", "e"])


@pytest.mark.parametrize("cap", [0, 2, 64])
@pytest.mark.parametrize("dup", [False, True])
def test_correction_subsamples_are_permutation_prefixes_counted_densely(monkeypatch, cap, dup):
    """Cohen and Nissim's 50 subsamples: the 10 sizes' draws are the prefixes of 5 seeded permutations of the
    control's distinct rows; their success counts (from the listed pairs, and by match_counts for predicates
    over the cap) against every predicate checked densely on every subsample."""
    monkeypatch.setattr(singling, "PAIR_CAP", cap)
    e = _control_tables(1500, dup)
    rows = cells.unique_rows(e.release, e.columns)
    rng = np.random.default_rng(3)
    used = rng.random((300, len(e.columns))) < 0.7
    q = Predicates.concat([from_records(e, rows[rng.integers(0, len(rows), 300)], used, {"a": 20.0, "e": 1500.0}),
                           random_predicates(e, rows, 100, 1, rng)])
    crow = cells.unique_rows(e.control, e.columns)
    assert (len(crow) < e.control.n) == dup and len(crow) > 1000
    sizes, succ = singling._correction_counts(q, e, crow, np.random.default_rng(9))
    draw = np.random.default_rng(9)
    orders = [draw.permutation(len(crow)) for _ in range(5)]
    dense = holds(q, e.columns, e.control, crow)  # (predicates, distinct control rows)
    grid = np.linspace(1000, len(crow), 10).astype(int)
    want = [(dense[:, o[:size]].sum(axis=1) == 1).sum() for size in grid for o in orders]
    assert np.array_equal(sizes, np.repeat(grid, 5)) and np.array_equal(succ, want)
    assert 0 < min(want) and len(set(want)) > 1
