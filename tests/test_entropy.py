"""The entropy-coefficient loss of SPEC section 7 as amended: cells read on each QI's domain D_X.

Hand-made tables worked out by hand (a partially covered bin of a 512-value column and a
suppressed row), the two ends (exact values: 0; every cell '*': 1), plain record loops from
tests/test_metrics.py on tables with binned columns, missing values, hierarchies and means, the
equal-frequency bins, and the golden Adult figures that SPEC section 7 lists.
"""

import math

import numpy as np
import pandas as pd
import pytest

from gpuanon import Mondrian
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
from gpuanon.metrics.entropy import (interval_joint, numeric_domain, set_joint, suppressed_joint,
                             uncertainty_from_joint)
from gpuanon.metrics import compute_metrics, summary_from_labels, summary_from_output
from test_metrics import assert_close, ref_domain, ref_u_prime


def h2(p):
    """Binary entropy in bits."""
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


# ---------------------------------------------------------------------------------------------
# by hand: 512 distinct values -> 256 bins of two values; a class covers half of bin 127
# ---------------------------------------------------------------------------------------------

def test_partially_covered_bin_and_suppressed_row_by_hand():
    x = np.arange(512)
    original = pd.DataFrame({"x": x, "t": (x >= 256).astype(int)})
    # output: row x = 0 suppressed; rows 255, 256, 257 (t = 0, 1, 1) form one class [255, 257];
    # every other row keeps its value.
    keep = x != 0
    cells = np.where((x >= 255) & (x <= 257), "255-257", x.astype(str))[keep]
    out = pd.DataFrame({"x": cells, "t": original["t"][keep].to_numpy()})
    s = summary_from_output(out, original, ["x"], {"x": "numeric"}, target="t")
    col = s.columns[0]
    # D_X: 512 distinct values > 256 -> 256 equal-frequency bins; bin i = {2i, 2i + 1}
    assert col.binned and col.domain_counts.tolist() == [2] * 256
    # before: every bin is pure (t = 1 from bin 128 on): H(T|X) = 0 -> U = 1
    # the class [255, 257] covers 255 (one of the two rows of bin 127) and bin 128 whole:
    # n(C) = 3, w = (1/3, 2/3), not (2/4, 2/4) as whole bins would give. Its rows (t = 0, 1, 1) put
    # t0 1/3, t1 2/3 on bin 127 and t0 2/3, t1 4/3 on bin 128.
    assert col.joint_after[127].tolist() == pytest.approx([1 + 1 / 3, 2 / 3])  # + the exact row 254
    assert col.joint_after[128].tolist() == pytest.approx([2 / 3, 4 / 3])
    # the suppressed row (t = 0) is '*': 1/256 of t0 on every bin. Q over N = 512:
    #   bin 0: t0 1 + e; bins 1-126: t0 2 + e; bin 127: t0 4/3 + e, t1 2/3; bin 128: t0 2/3 + e,
    #   t1 4/3; bins 129-255: t0 e, t1 2  (e = 1/256). H(T) = 1 bit (256 rows of each target).
    e = 1 / 256
    n_b = 2 + e
    h_cond = n_b / 512 * (h2((4 / 3 + e) / n_b) + h2((2 / 3 + e) / n_b) + 127 * h2(e / n_b))
    u_after = 1 - h_cond
    assert u_after == pytest.approx(0.982690, abs=1e-6)
    m = compute_metrics(s, k=1)
    assert m["entropy_coefficient_before"]["x"] == pytest.approx(1.0)
    assert m["entropy_coefficient_after"]["x"] == pytest.approx(u_after, rel=1e-12)
    assert m["entropy_loss"] == pytest.approx(1 - u_after, rel=1e-9)
    assert m["entropy_binned_columns"] == ["x"]
    # the record loops agree
    assert ref_u_prime(original, out, "x", "numeric", "t") == pytest.approx(u_after, rel=1e-9)


def test_categorical_sets_hierarchy_nodes_star_and_missing_by_hand():
    # c: a x2, b x1, NaN x1 (a category); y: a -> (0, 0), b -> 1, NaN -> 1. U before = 1.
    original = pd.DataFrame({"c": ["a", "a", "b", None], "y": [0, 0, 1, 1]})
    # cells: row 0 'a'; row 1 '*'; rows 2, 3 the set {b, NaN} (a missing value in a set is written \N)
    out = pd.DataFrame({"c": ["a", "*", "b|\\N", "b|\\N"], "y": [0, 0, 1, 1]})
    m = compute_metrics(summary_from_output(out, original, ["c"], {"c": "categorical"}, target="y"), k=1)
    # Q: row 0 -> a: t0 1. row 1 ('*', n = 4) -> a: t0 1/2, b: t0 1/4, NaN: t0 1/4.
    # rows 2, 3 ({b, NaN}, n = 2) -> b: t1 1, NaN: t1 1.
    # a (3/2, 0): pure; b (1/4, 1) and NaN (1/4, 1): h(1/5) each, weight 5/4 / 4.
    u = 1 - 2 * (1.25 / 4) * h2(0.2)
    assert m["entropy_coefficient_before"]["c"] == pytest.approx(1.0)
    assert m["entropy_coefficient_after"]["c"] == pytest.approx(u)
    assert ref_u_prime(original, out, "c", "categorical", "y") == pytest.approx(u)
    # a hierarchy node label reads as the leaves under it: 'bN' = {b, NaN}
    from gpuanon.hierarchy import Hierarchy

    h = Hierarchy.from_labels(["a", "b", "NaN"], [["a", "*"], ["bN", "*"], ["bN", "*"]], name="c")
    out_h = out.assign(c=["a", "*", "bN", "bN"])
    m_h = compute_metrics(summary_from_output(out_h, original, ["c"], {"c": "categorical"}, target="y",
                                              hierarchies={"c": h}), k=1)
    assert m_h["entropy_coefficient_after"]["c"] == pytest.approx(u)


def test_missing_numeric_values_are_their_own_element():
    # x: 1, 2, NaN, NaN; the missing rows stay missing (their own class): only [1, 2] is generalized.
    original = pd.DataFrame({"x": [1.0, 2.0, np.nan, np.nan], "y": [0, 1, 1, 1]})
    out = pd.DataFrame({"x": ["1-2", "1-2", None, None], "y": [0, 1, 1, 1]})
    m = compute_metrics(summary_from_output(out, original, ["x"], {"x": "numeric"}, target="y"), k=2)
    # before: 1 -> 0, 2 -> 1, NaN -> (1, 1): U = 1. after: 1 and 2 each (1/2, 1/2), NaN pure.
    # H(T) = h(1/4); H(T|X') = 2/4 * 1 = 0.5
    u = 1 - 0.5 / h2(0.25)
    assert m["entropy_coefficient_before"]["x"] == pytest.approx(1.0)
    assert m["entropy_coefficient_after"]["x"] == pytest.approx(u)
    assert ref_u_prime(original, out, "x", "numeric", "y") == pytest.approx(u)


def test_exact_values_give_zero_and_stars_give_one():
    rng = np.random.default_rng(5)
    n = 900
    original = pd.DataFrame({"x": rng.normal(size=n).round(3),  # ~800 distinct: binned
                             "a": rng.integers(0, 30, n),  # 30 distinct: one element each
                             "c": rng.choice(["p", "q", "r", "s"], n),
                             "y": rng.integers(0, 3, n)})
    kinds = {"x": "numeric", "a": "numeric", "c": "categorical"}
    original["y"] = (original["y"] + (original["x"] > 0) + (original["c"] == "p")) % 3
    m = compute_metrics(summary_from_output(original, original, ["x", "a", "c"], kinds, target="y"), k=1)
    assert m["entropy_loss"] == pytest.approx(0.0, abs=1e-12)
    assert m["entropy_coefficient_before"] == pytest.approx(m["entropy_coefficient_after"], abs=1e-12)
    star = original.assign(x=f"{original['x'].min()}-{original['x'].max()}",
                           a=f"{original['a'].min()}-{original['a'].max()}", c="*")
    m = compute_metrics(summary_from_output(star, original, ["x", "a", "c"], kinds, target="y"), k=1)
    assert m["entropy_loss"] == pytest.approx(1.0, abs=1e-12)
    assert all(v == pytest.approx(0.0, abs=1e-12) for v in m["entropy_coefficient_after"].values())
    # one class holding every row (the anonymizer's own path): also 1
    mon = Mondrian(k=n, quasi_identifiers=["x", "a", "c"], target="y", backend="cpu", progress=False)
    mon.fit_transform(original)
    assert mon.report_["metrics"]["entropy_loss"] == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# the domain: equal-frequency bins
# ---------------------------------------------------------------------------------------------

def test_equal_frequency_bins_never_split_equal_values():
    rng = np.random.default_rng(1)
    v = np.concatenate([np.full(3000, 7.0), rng.normal(size=5000).round(4)])  # one very heavy value
    vals, counts = np.unique(v, return_counts=True)
    dom = numeric_domain(counts, has_missing=False)
    assert dom.binned and dom.n_bins <= 256
    assert int(dom.bin_counts.sum()) == len(v)
    # a bin is a run of whole distinct values; the heavy value is one bin of 3000 rows (plus none)
    heavy = int(np.searchsorted(vals, 7.0))
    b = int(dom.bin_of(np.array([heavy]))[0])
    assert dom.bin_start[b] <= heavy < dom.bin_start[b + 1]
    assert dom.bin_counts[b] >= 3000
    # the other bins hold about n / 256 rows each
    others = np.delete(dom.bin_counts, b)
    assert others.max() <= 2 * len(v) / 256 + counts.max() * 0 + 40
    # the plain reference gives the same bin to every value
    ref = ref_domain(list(v), "numeric")
    ours = dom.bin_of(np.searchsorted(vals, v))
    assert pd.crosstab(np.asarray(ref), ours).gt(0).sum(axis=1).eq(1).all()
    assert len(set(ref)) == dom.n_bins


def test_missing_is_a_bin_of_its_own():
    counts = np.array([1] * 300 + [5])  # 300 present values, then the missing value
    dom = numeric_domain(counts, has_missing=True)
    assert dom.binned and dom.bin_counts[-1] == 5 and dom.bin_start[-2] == 300
    assert int(dom.bin_counts[:-1].sum()) == 300
    small = numeric_domain(np.array([2, 3, 4]), has_missing=True)
    assert not small.binned and small.bin_counts.tolist() == [2, 3, 4]


def test_joint_helpers_by_hand():
    # values 0..3 with counts 1, 2, 1, 4, one value per bin; a class over values 1..2 with targets (2, 1)
    dom = numeric_domain(np.array([1, 2, 1, 4]), has_missing=False)
    q = interval_joint(np.array([1]), np.array([3]), dom, np.array([[2, 1]]))
    # n(C) = 3: value 1 gets 2/3 of the rows, value 2 1/3
    np.testing.assert_allclose(q, [[0, 0], [4 / 3, 2 / 3], [2 / 3, 1 / 3], [0, 0]])
    q = set_joint(np.array([0, 1]), np.array([[True, True, False], [False, False, True]]),
                  np.array([1, 3, 2]), np.array([[4, 0], [1, 1]]))
    np.testing.assert_allclose(q, [[1, 0], [3, 0], [1, 1]])
    assert suppressed_joint(np.array([1.0, 3.0]), np.array([2.0, 2.0])).tolist() == [[0.5, 0.5], [1.5, 1.5]]
    assert uncertainty_from_joint(np.zeros((2, 2))) == 0.0
    assert uncertainty_from_joint([[5, 0], [7, 0]]) == 0.0  # constant target


# ---------------------------------------------------------------------------------------------
# both summary paths and the record loops agree (binned column, missing values, suppression)
# ---------------------------------------------------------------------------------------------

def _synthetic(n=2500, seed=3):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.normal(size=n).round(3), "a": rng.integers(18, 80, n).astype(float),
                       "c": rng.choice(list("pqrstu"), n)})
    df["y"] = np.where(df["x"] + 0.03 * df["a"] + (df["c"] == "p") + rng.normal(size=n) > 1.5, "hi", "lo")
    df.loc[rng.choice(n, 40, replace=False), "a"] = np.nan  # a missing block
    df.loc[rng.choice(n, 3, replace=False), "x"] = np.nan  # a block of 3 < k: suppressed
    return df


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_summary_paths_and_loops_agree_on_a_binned_column(fmt):
    df = _synthetic()
    m = Mondrian(k=8, quasi_identifiers=["x", "a", "c"], target="y", output_format=fmt, backend="cpu",
                 progress=False, max_suppression=0.05)
    out = m.fit_transform(df)
    assert m.report_["n_suppressed"] > 0
    a = compute_metrics(summary_from_labels(m.table_, m.labels_), k=8)
    assert a["entropy_binned_columns"] == ["x"]
    kinds = {"x": "numeric", "a": "numeric", "c": "categorical"}
    if fmt == "mean":  # means need the rows: give their positions in the original table
        s = summary_from_output(out, df, ["x", "a", "c"], kinds, target="y", rows=np.flatnonzero(m.labels_ >= 0))
        assert any("class means" in note for note in s.notes)
        b = compute_metrics(s, k=8)
        for key in ("entropy_loss", "entropy_coefficient_before", "entropy_coefficient_after"):
            assert_close(b[key], a[key])
        return
    b = compute_metrics(summary_from_output(out, df, ["x", "a", "c"], kinds, target="y"), k=8)
    assert_close(b, a)
    for c in ("x", "a", "c"):
        assert a["entropy_coefficient_after"][c] == pytest.approx(ref_u_prime(df, out, c, kinds[c], "y"), rel=1e-9)


def test_hierarchy_output_summary_equals_the_anonymizer_summary():
    df = load_adult().head(4000)
    qis = ["age", "workclass", "education", "marital-status", "occupation"]
    m = Mondrian(k=5, quasi_identifiers=qis, sensitive="income", target="income", hierarchies="auto",
                 backend="cpu", progress=False)
    out = m.fit_transform(df)
    hmap = {name: b.hierarchy for name, b in m.table_.hierarchies.items()}
    b = compute_metrics(summary_from_output(out, df, qis, m.schema_.kinds, target="income", hierarchies=hmap), k=5)
    a = m.report_["metrics"]
    for key in ("entropy_loss", "entropy_coefficient_before", "entropy_coefficient_after"):
        assert_close(b[key], a[key])
    # the rho choice reported every candidate's loss; the chosen one has the smallest
    for c, info in m.hierarchies_.items():
        losses = info["candidate_loss"]
        assert losses[info["choice"]] == pytest.approx(min(losses.values()))
        assert info["u_after"] == pytest.approx(a["entropy_coefficient_after"][c], rel=1e-9)


# ---------------------------------------------------------------------------------------------
# golden: SPEC section 7's Adult figures (bundled Adult, thesis QIs, target income, defaults)
# ---------------------------------------------------------------------------------------------

SPEC_ADULT = [  # (parameters, loss in %)
    ({"k": 3}, 3.41), ({"k": 5}, 6.42), ({"k": 10}, 12.22), ({"k": 15}, 16.00), ({"k": 50}, 27.72),
    ({"k": 3, "optimize": True}, 3.35), ({"k": 3, "l": 2}, 17.46),
    ({"k": 3, "t": 0.2}, 85.63), ({"k": 3, "t": 0.3}, 41.80), ({"k": 3, "t": 0.4}, 31.57),
]


@pytest.fixture(scope="module")
def adult():
    return load_adult()


@pytest.mark.parametrize("params,loss", SPEC_ADULT, ids=[str(p) for p, _ in SPEC_ADULT])
def test_golden_adult_losses_of_spec_section_7(adult, params, loss):
    m = Mondrian(quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income", backend="cpu",
                 progress=False, **params)
    m.fit_transform(adult)
    assert 100 * m.report_["metrics"]["entropy_loss"] == pytest.approx(loss, abs=0.1)


@pytest.mark.slow
def test_cli_check_scores_a_users_table_against_its_original(tmp_path):
    import json

    from expected import run_cli

    df = load_adult().head(3000)
    df.to_csv(tmp_path / "orig.csv", index=False)
    qis = ["age", "education", "marital-status", "gender"]
    m = Mondrian(k=5, quasi_identifiers=qis, sensitive="income", target="income", output_format="mean",
                 backend="cpu", progress=False)
    m.fit_transform(df).to_csv(tmp_path / "out.csv", index=False)
    r = run_cli("check", "out.csv", "--qi", ",".join(qis), "--sensitive", "income", "--k", "5", "--original",
                "orig.csv", "--target", "income", "--report", "chk.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = m.report_["metrics"]["entropy_loss"]
    assert f"entropy-coefficient loss {100 * want:.2f}%" in r.stdout
    doc = json.loads((tmp_path / "chk.json").read_text())
    assert doc["metrics"]["entropy_loss"] == pytest.approx(want, rel=1e-9)  # means read as class intervals
    assert any("class means" in n for n in doc["metrics"]["notes"])
