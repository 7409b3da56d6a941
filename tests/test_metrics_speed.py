"""The CPU's shortcuts around the partition give the bits of the general paths they stand for.

* ``x log x`` and ``entr`` of small host tables from ``math.log`` (no ``scipy.special`` import) equal
  SciPy's ``xlogy`` / ``entr`` (the C library's ``log`` both);
* ``xlog2x_counts``' gather from a table of ``v log2 v`` equals ``xlog2x`` of every count;
* the verifier's tuple ids of categorical / number columns (codes folded column by column) equal the
  pandas group-by's ``ngroup`` numbering;
* the set texts of one-word category masks (a plain ``unique``) equal those of the row ``unique``.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
import scipy.special

from gpuanon.release import verify as verify_mod
from gpuanon.anonymize import generalize as gen
from gpuanon.metrics import entropy, formulas


def test_small_table_logs_equal_scipys(monkeypatch):
    monkeypatch.delitem(sys.modules, "scipy.special")  # the math.log path runs while SciPy is not loaded
    ints = np.arange(0, entropy.SMALL_LOG, dtype=np.float64)
    assert np.array_equal(entropy.xlogx(ints, np), scipy.special.xlogy(ints, ints))
    rng = np.random.default_rng(0)
    for scale in (1.0, 1e-3, 1e6):
        x = rng.random(entropy.SMALL_LOG) * scale
        x[:3] = (0.0, -0.0, np.inf)
        assert np.array_equal(entropy.entr(x, np), scipy.special.entr(x))
        assert np.array_equal(entropy.xlogx(x, np), scipy.special.xlogy(x, x))
    m = rng.random((7, 3))
    assert np.array_equal(entropy.entr(m, np), scipy.special.entr(m))
    bad = np.array([0.5, -1.0, np.nan])  # negative or NaN entries: SciPy's own rules
    np.testing.assert_array_equal(entropy.entr(bad, np), scipy.special.entr(bad))


@pytest.mark.parametrize("n,top", [(10, 3), (5000, 40), (3, 100_000), (20_000, 19_000)])
def test_count_table_gather_equals_the_logs_of_every_count(n, top):
    c = np.random.default_rng(n).integers(0, top + 1, n)
    want = scipy.special.xlogy(c.astype(np.float64), c.astype(np.float64)) / np.log(2.0)
    assert np.array_equal(formulas.xlog2x_counts(c, np), want)
    assert formulas.xlogx_sum(c, np) == want[c > 1].sum()


def test_coded_tuple_ids_number_groups_as_the_group_by():
    rng = np.random.default_rng(1)
    for trial in range(150):
        n = int(rng.integers(1, 200))
        cols = {}
        for j in range(int(rng.integers(1, 4))):
            kind = int(rng.integers(0, 3))
            if kind == 0:
                cols[f"c{j}"] = pd.Categorical(rng.choice(["a", "b|c", "", None], n))
            elif kind == 1:
                cols[f"c{j}"] = rng.choice([0.0, -0.0, 1.5, np.nan, 2.0], n)
            else:
                cols[f"c{j}"] = rng.integers(-3, 3, n)
        df = pd.DataFrame(cols)
        names = list(df.columns)
        want = df.groupby(names, dropna=False, sort=False, observed=True).ngroup().to_numpy(dtype=np.int64)
        gid, n_cls = verify_mod.class_ids(df, names)
        assert np.array_equal(gid, want), trial
        assert n_cls == len(set(want.tolist()))
    text = pd.DataFrame({"a": ["x", "y", "x"], "b": pd.Categorical(["p", "p", "p"])})
    assert verify_mod._coded_ids(text, ["a", "b"]) is None  # object text: the group-by itself


def test_one_word_mask_texts_equal_the_row_unique():
    rng = np.random.default_rng(2)
    cats = ["a", "b|c", None, "d\\e"] + [f"v{i}" for i in range(40)]
    masks = rng.integers(1, 2**44, (500, 1), dtype=np.int64).astype(np.uint64)
    masks[::7] = np.uint64(1 << 2)  # a class whose one value is missing
    got = gen._mask_texts(masks, cats).to_pylist()
    two = np.concatenate([masks, np.zeros_like(masks)], axis=1)  # the same sets, two words: the row path
    assert got == gen._mask_texts(two, cats + [f"w{i}" for i in range(30)]).to_pylist()
    assert got[0] is None and "b\\|c" in "".join(t for t in got if t)


def test_coded_tuple_ids_renumbered_where_the_tuple_outgrows_an_int64():
    """Many wide columns: the ids are renumbered on the way (the product of the column sizes passes
    2**62) and still number the tuples as the group-by does."""
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({f"c{j}": pd.Categorical(rng.choice([f"v{i}" for i in range(400)] + [None], n))
                       for j in range(9)})
    df["c0"] = df["c1"]  # repeated tuples too
    df.loc[::3, [f"c{j}" for j in range(2, 9)]] = "v0"
    names = list(df.columns)
    want = df.groupby(names, dropna=False, sort=False, observed=True).ngroup().to_numpy(dtype=np.int64)
    gid, n_cls = verify_mod.class_ids(df, names)
    assert np.array_equal(gid, want)
    assert n_cls == len(set(want.tolist())) < n


@pytest.mark.parametrize("words", [1, 2])
def test_mask_text_codes_equal_the_codes_of_the_per_class_texts(words):
    """The codes and distinct texts made from the distinct sets are those of the per-class texts
    (first appearance over the classes; the set of the missing value alone: -1)."""
    rng = np.random.default_rng(3 + words)
    n_cat = 40 if words == 1 else 100
    cats = ["a", "b|c", None, "d\\e"] + [f"v{i}" for i in range(n_cat - 4)]
    masks = rng.integers(1, 2**40, (700, words), dtype=np.int64).astype(np.uint64)
    masks[::5] = masks[1]  # sets shared by classes
    masks[::7] = 0
    masks[::7, 0] = np.uint64(1 << 2)  # a class whose one value is missing
    if words == 2:
        masks[:, 1] &= np.uint64((1 << (n_cat - 64)) - 1)
    codes, texts = gen._mask_text_codes(masks, cats)
    want_codes, want_texts = gen._text_codes(gen._mask_texts(masks, cats))
    assert np.array_equal(codes, want_codes) and (codes == -1).any()
    assert texts.tolist() == want_texts.tolist() and texts.dtype == want_texts.dtype


@pytest.mark.parametrize("case", ["full", "few", "halves", "extremes", "signed"])
def test_dense_ids_of_64_bit_keys_equal_numpys_unique(case):
    # the CPU's two packed sorts (4096 entries or more of 64-bit keys) against numpy.unique's inverse
    rng = np.random.default_rng(7)
    m = 20_011
    if case == "full":
        a = rng.integers(0, 2**64 - 1, m, dtype=np.uint64)
    elif case == "few":
        a = rng.integers(0, 37, m).astype(np.uint64)
    elif case == "halves":  # equal high halves, ties broken by the low ones
        a = (rng.integers(0, 50, m).astype(np.uint64) << np.uint64(32)) | rng.integers(0, 3, m).astype(np.uint64)
    elif case == "extremes":
        a = np.full(m, 2**64 - 1, dtype=np.uint64)
        a[::7] = 0
    else:  # non-negative int64 (the merged classes' tuple ids)
        a = rng.integers(0, 2**62, m, dtype=np.int64)
        a[1::5] = a[::5][: a[1::5].shape[0]]
    ids, n = formulas.dense_ids(a)
    uniq, inv = np.unique(a, return_inverse=True)
    assert ids.dtype == np.int64 and n == uniq.shape[0]
    np.testing.assert_array_equal(ids, inv.reshape(-1))
    ids_x, n_x = formulas.dense_ids_x(a)
    np.testing.assert_array_equal(ids_x, inv.reshape(-1))
    assert int(n_x) == n
