"""gpuanon.release.verify on hand-made tables whose k, l and t are worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpuanon.release.verify import class_ids, verify

# Two classes on one QI; sensitive values 1..4 (numeric, so ordered by default).
#   class A: [1, 1, 1]          p_A = (1, 0, 0, 0)
#   class B: [2, 2, 3, 4, 4]    p_B = (0, 2/5, 1/5, 2/5)
#   whole table (8 rows):       q   = (3/8, 2/8, 1/8, 2/8)
# equal EMD   A: 0.5 (5/8 + 2/8 + 1/8 + 2/8) = 5/8;  B: 0.5 (3/8 + 3/20 + 3/40 + 3/20) = 3/8
# ordered EMD A: cumsum(p - q) = (5/8, 3/8, 2/8, 0), sum 10/8, / (m - 1 = 3) = 5/12
#             B: cumsum(p - q) = (-3/8, -9/40, -6/40, 0), sum |.| = 30/40, / 3 = 1/4
# KL          A: log(1 / (3/8)) = log(8/3);  B: 4/5 log(8/5) + 1/5 log(8/5) = log(8/5)
# distinct l: A 1, B 3; entropy: A 0 -> exp = 1; k = 3.
HAND = pd.DataFrame({"zip": ["A"] * 3 + ["B"] * 5, "s": [1, 1, 1, 2, 2, 3, 4, 4], "other": range(8)})


def test_hand_table_achieved_values():
    r = verify(HAND, ["zip"], "s", t_distance="equal", sensitive_ordered=False)
    assert (r.n_rows, r.n_classes, r.k, r.l) == (8, 2, 3, 1)
    assert r.l_entropy == pytest.approx(1.0)
    assert r.t == pytest.approx(5 / 8, abs=1e-12)
    assert r.size_stats == {"min": 3, "median": 4.0, "max": 5, "mean": 4.0}
    assert r.ok  # nothing requested, nothing fails


def test_hand_table_ordered_emd():
    r = verify(HAND, ["zip"], "s", t_distance="ordered")
    assert r.t == pytest.approx(5 / 12, abs=1e-12)
    assert verify(HAND, ["zip"], "s", t=0.42, t_distance="ordered").ok
    bad = verify(HAND, ["zip"], "s", t=0.41, t_distance="ordered")
    assert not bad.ok and any("t-closeness" in f for f in bad.failures)


def test_ordered_emd_needs_value_order_not_appearance_order():
    # the same table with its rows reversed: the ordered distance must not change
    r = verify(HAND.iloc[::-1].reset_index(drop=True), ["zip"], "s", t_distance="ordered")
    assert r.t == pytest.approx(5 / 12, abs=1e-12)


def test_hand_table_kl():
    r = verify(HAND, ["zip"], "s", t_distance="kl")
    assert r.t == pytest.approx(math.log(8 / 3), abs=1e-12)
    assert verify(HAND, ["zip"], "s", t=0.99, t_distance="kl").ok  # log(8/3) = 0.981
    assert not verify(HAND, ["zip"], "s", t=0.97, t_distance="kl").ok


def test_hand_table_equal_emd_with_string_sa():
    out = HAND.assign(s=HAND["s"].map({1: "d", 2: "c", 3: "b", 4: "a"}))
    r = verify(out, ["zip"], "s", t=0.7)
    assert r.t == pytest.approx(5 / 8, abs=1e-12) and r.ok
    assert not verify(out, ["zip"], "s", t=0.6).ok


def test_reference_distribution_is_the_whole_input():
    # the output lost a class: its own distribution would differ from the input's
    out = HAND.iloc[3:].reset_index(drop=True)  # only class B
    ref = HAND["s"]
    r = verify(out, ["zip"], "s", t_distance="equal", reference=ref)
    assert r.t == pytest.approx(3 / 8, abs=1e-12)
    r_self = verify(out, ["zip"], "s", t_distance="equal")
    assert r_self.t == pytest.approx(0.0, abs=1e-12)


def test_k_l_t_pass_and_fail():
    ok = pd.DataFrame({"age": ["20-30"] * 3 + ["31-40"] * 3, "y": ["a", "b", "b", "a", "a", "b"]})
    r = verify(ok, ["age"], "y", k=3, l=2, t=0.2)
    # q = (1/2, 1/2); classes (1/3, 2/3) and (2/3, 1/3): EMD 1/6 each
    assert r.ok and r.k == 3 and r.l == 2 and r.t == pytest.approx(1 / 6)
    r = verify(ok, ["age"], "y", k=4)
    assert not r.ok and any("k-anonymity" in f and "3" in f for f in r.failures)
    bad_l = ok.assign(y=["a", "a", "a", "a", "b", "b"])
    r = verify(bad_l, ["age"], "y", k=3, l=2)
    assert not r.ok and any("l-diversity" in f for f in r.failures)
    r = verify(ok, ["age"], "y", t=0.1)
    assert not r.ok and any("t-closeness" in f for f in r.failures)


def test_entropy_and_recursive_l_diversity():
    # one class with counts (3, 1, 1): entropy = -(3/5 log 3/5 + 2/5 log 1/5)
    out = pd.DataFrame({"q": ["x"] * 5, "s": ["a", "a", "a", "b", "c"]})
    h = -(0.6 * math.log(0.6) + 2 * 0.2 * math.log(0.2))
    r = verify(out, ["q"], "s", l=2, l_kind="entropy")
    assert r.l_entropy == pytest.approx(math.exp(h)) and r.ok  # exp(h) = 2.59
    assert not verify(out, ["q"], "s", l=3, l_kind="entropy").ok
    # recursive (c, 2): r1 = 3 < c (r2 + r3) = 2c  <=>  c > 1.5
    assert verify(out, ["q"], "s", l=2, l_kind="recursive", c=2.0).ok
    assert not verify(out, ["q"], "s", l=2, l_kind="recursive", c=1.5).ok
    # recursive (c, 3): r1 = 3 < c r3 = c  <=>  c > 3
    assert verify(out, ["q"], "s", l=3, l_kind="recursive", c=3.5).ok
    assert not verify(out, ["q"], "s", l=3, l_kind="recursive", c=3.0).ok
    # recursive with l larger than the distinct values present: fails
    assert not verify(out, ["q"], "s", l=4, l_kind="recursive", c=100.0).ok


def test_missing_values_in_qis_compare_equal():
    out = pd.DataFrame({
        "a": [None, np.nan, None, "x", "x", "x"],
        "b_min": [np.nan, np.nan, np.nan, 1.0, 1.0, 1.0],
        "b_max": [np.nan, np.nan, np.nan, 2.0, 2.0, 2.0],
        "s": ["u", "v", "w", "u", "v", "w"],
    })
    r = verify(out, ["a", "b_min", "b_max"], "s", k=3, l=3)
    assert r.ok and r.n_classes == 2 and r.k == 3 and r.l == 3
    gid, n = class_ids(out, ["a", "b_min", "b_max"])
    assert n == 2 and len(set(gid[:3])) == 1 and gid[0] != gid[3]
    # a missing value is not equal to a present one
    out2 = out.assign(a=[None, "x", None, "x", "x", "x"])
    assert not verify(out2, ["a", "b_min", "b_max"], "s", k=3).ok


def test_missing_sensitive_value_counts_toward_no_l():
    # SPEC section 3 (amended): a missing sensitive value protects nobody
    out = pd.DataFrame({"q": ["x"] * 4, "s": ["a", None, "a", None]})
    r = verify(out, ["q"], "s", l=2)
    assert r.l == 1 and not r.ok and r.sensitive_missing == 2


def test_multi_column_classes_and_large_category_counts():
    # many distinct values per column: tuple ids must not collide
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1000, 5000)
    b = rng.integers(0, 1000, 5000)
    out = pd.DataFrame({"a": a, "b": b, "c": a * 1000 + b})
    _, n_ab = class_ids(out, ["a", "b"])
    _, n_c = class_ids(out, ["c"])
    assert n_ab == n_c == len(set(zip(a.tolist(), b.tolist())))


def test_sensitive_value_missing_from_reference_and_bad_calls():
    out = pd.DataFrame({"q": ["x"] * 3, "s": ["a", "b", "zzz"]})
    r = verify(out, ["q"], "s", reference=pd.Series(["a", "b", "a"]))
    assert not r.ok and any("not in the reference" in f for f in r.failures)
    with pytest.raises(KeyError, match="nope"):
        verify(out, ["nope"], "s")
    r = verify(out, ["q"], None, l=2)
    assert not r.ok and any("no sensitive column" in f for f in r.failures)


def test_empty_table():
    out = pd.DataFrame({"q": pd.Series([], dtype=object), "s": pd.Series([], dtype=object)})
    r = verify(out, ["q"], "s", k=3, l=2, t=0.1)
    assert r.n_rows == 0 and r.n_classes == 0 and r.ok


def test_large_integers_are_not_merged():
    big = 2**53  # big and big + 1 are one float64
    out = pd.DataFrame({"q": np.array([big, big, big + 1, big + 1], dtype=np.int64)})
    gid, n = class_ids(out, ["q"])
    assert n == 2 and gid.tolist() == [0, 0, 1, 1]


def test_large_nullable_integers_with_missing_are_not_merged():
    big = 2**53
    out = pd.DataFrame({"q": pd.array([big, big + 1, None, None], dtype="Int64")})
    gid, n = class_ids(out, ["q"])
    assert n == 3
    assert not verify(out, ["q"], k=2).ok  # two classes of one row
