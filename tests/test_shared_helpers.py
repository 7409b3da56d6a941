"""One helper each: the places that once held their own copy now call the same function, and that
function is checked against an independent computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon.errors import SchemaError


def test_merge_moments_matches_numpy_on_every_split():
    """Per-feature (missing values left out) and co-moment forms, against NumPy on the whole data."""
    from gpuanon.federated.protocol import moments_chunk, moments_combine
    from gpuanon.perturb.stats import local_stats, merge_all

    rng = np.random.default_rng(3)
    X = rng.normal(size=(301, 4)) * [1, 10, 100, 0.1] + [5, -3, 0, 1e3]
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.1] = np.nan
    Xn[:40, 2] = np.nan  # the first part has no value of feature 2
    for cuts in ([40], [40, 41, 200], [1, 2, 3, 300]):
        n, mean, m2 = moments_combine([moments_chunk(p) for p in np.split(Xn, cuts)])
        np.testing.assert_allclose(n, (~np.isnan(Xn)).sum(axis=0))
        np.testing.assert_allclose(mean, np.nanmean(Xn, axis=0), rtol=1e-12)
        np.testing.assert_allclose(m2 / n, np.nanvar(Xn, axis=0), rtol=1e-10)
        s = merge_all([local_stats(p) for p in np.split(X, cuts)])
        np.testing.assert_allclose(s.mean, X.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(s.comoment / (s.n - 1), np.cov(X, rowvar=False), rtol=1e-10)


def test_the_federated_split_is_the_evaluation_split():
    from gpuanon.datasets import get_dataset
    from gpuanon.evaluate import stratified_split
    from gpuanon.federated.experiment import plan

    cfg = {"dataset": "adult", "rows": 3000, "target": "income", "test_size": 0.25, "seed": 7, "silos": 3,
           "split": "iid", "alpha": 0.5}
    p = plan(cfg)
    df, _ = get_dataset("adult", rows=3000, seed=0)
    sp = stratified_split(df.reset_index(drop=True), "income", 0.25, 7)
    pd.testing.assert_frame_equal(p.train, sp.train)
    pd.testing.assert_frame_equal(p.test, sp.test)
    # stratified: each part keeps the table's class shares (within one row)
    share = df["income"].value_counts()
    got = sp.test["income"].value_counts()
    assert all(abs(got[c] - 0.25 * share[c]) <= 1 for c in share.index)
    assert np.all(np.diff(sp.idx_train) > 0) and len(set(sp.idx_train) & set(sp.idx_test)) == 0


def test_stratified_split_refuses_a_class_of_one_row():
    from gpuanon.evaluate import stratified_split

    df = pd.DataFrame({"x": range(10), "y": ["a"] * 5 + ["b"] * 4 + ["rare"]})
    with pytest.raises(SchemaError, match="'rare' occurs once"):
        stratified_split(df, "y", 0.3, 0)


def test_the_cluster_hash_is_the_verifiers_splitmix64():
    """splitmix64 against its published reference values (seed 0's first outputs: Vigna's splitmix64.c)."""
    from gpuanon.release import verify

    gamma = np.uint64(0x9E3779B97F4A7C15)
    states = np.arange(1, 4, dtype=np.uint64) * gamma - gamma  # the finalizer adds gamma itself
    got = [int(v) for v in verify.splitmix64(states)]
    assert got == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
