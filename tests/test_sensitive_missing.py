"""A missing sensitive value protects nobody (SPEC section 3): it is not one of the l distinct values,
not a value of recursive (c, l), entropy l is computed over the known values, and t-closeness keeps
it as a value of its own. Hand-worked tables, and a brute-force check of every output class against
a plain Python count."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpuanon.anonymize.criteria import Criteria, missing_code
from gpuanon.anonymize.mondrian import Mondrian
from gpuanon.errors import PrivacyError
from gpuanon.release.verify import verify, verify_encoded
from kernels.reference import _plain_ok


def _table(n=300, n_missing=30, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.choice(["a", "b", "c", "d"], n).astype(object)
    s[rng.choice(n, n_missing, replace=False)] = None
    return pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.integers(1000, 1100, n), "s": s})


def _plain_l(out: pd.DataFrame, qis, sensitive="s"):
    """Per output class: (distinct known values, exp(entropy of the known values), known counts)."""
    res = []
    for _, grp in out.groupby(qis, dropna=False, sort=False):
        counts = {}
        for v in grp[sensitive]:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            counts[v] = counts.get(v, 0) + 1
        nk = sum(counts.values())
        h = -sum((x / nk) * math.log(x / nk) for x in counts.values())
        res.append((len(counts), math.exp(h), sorted(counts.values(), reverse=True)))
    return res


# ----------------------------------------------------------------------------- hand-worked

def test_criteria_ignore_the_missing_column():
    # known values a:2 b:1 c:1, missing (the last code): 5
    h = np.array([[2, 1, 1, 5]])
    sizes = np.array([9])
    assert missing_code(["a", "b", "c", float("nan")]) == 3
    assert bool(Criteria(k=2, l=3, sa_missing=3).satisfied(sizes, h)[0])
    assert not bool(Criteria(k=2, l=4, sa_missing=3).satisfied(sizes, h)[0])
    # entropy over the known values: p = (1/2, 1/4, 1/4), exp(H) = 2 ** 1.5 = 2.83
    assert bool(Criteria(k=2, l=2, l_kind="entropy", sa_missing=3).satisfied(sizes, h)[0])
    assert not bool(Criteria(k=2, l=3, l_kind="entropy", sa_missing=3).satisfied(sizes, h)[0])
    # recursive (2, 2): known counts (4, 1): 4 < 2 * 1 fails; with the 2 missing counted it would pass
    h2 = np.array([[4, 1, 0, 2]])
    assert not bool(Criteria(k=2, l=2, l_kind="recursive", c=2.0, sa_missing=3).satisfied(np.array([7]), h2)[0])
    assert bool(Criteria(k=2, l=2, l_kind="recursive", c=2.0).satisfied(np.array([7]), h2)[0])


def test_whole_table_with_three_known_values_refuses_l4():
    df = _table()
    df["s"] = df["s"].replace("d", "c")  # three known values and 30 missing
    with pytest.raises(PrivacyError, match=r"3 distinct value\(s\) besides 30 row\(s\) with a missing value"):
        Mondrian(k=5, l=4, quasi_identifiers=["age", "zip"], sensitive="s").fit(df)


def test_check_refuses_a_class_of_three_known_values_and_a_missing_one():
    out = pd.DataFrame({"q": ["x"] * 4 + ["y"] * 4,
                        "s": ["a", "b", "c", None, "a", "b", "c", "d"]})
    res = verify(out, ["q"], "s", k=2, l=4)
    assert res.l == 3 and not res.ok and res.sensitive_missing == 1
    assert any("3 distinct" in f for f in res.failures)
    assert verify(out, ["q"], "s", k=2, l=3).ok


def test_entropy_and_t_by_hand():
    # one class: a a b c + two missing; the whole table (reference) is the same rows plus "d"
    out = pd.DataFrame({"q": ["x"] * 6, "s": ["a", "a", "b", "c", None, np.nan]})
    ref = pd.Series(["a", "a", "b", "c", None, np.nan, "d"], dtype=object)
    res = verify(out, ["q"], "s", k=2, l=3, l_kind="entropy", t=1.0, reference=ref)
    assert res.l_entropy == pytest.approx(2 ** 1.5)
    assert not res.ok  # exp(H) = 2.83 < 3
    assert verify(out, ["q"], "s", k=2, l=2, l_kind="entropy").ok
    # t keeps missing as a value of its own: p = (2, 1, 1, 0, 2) / 6, q = (2, 1, 1, 1, 2) / 7
    p = np.array([2, 1, 1, 0, 2]) / 6
    q = np.array([2, 1, 1, 1, 2]) / 7
    assert res.t == pytest.approx(0.5 * np.abs(p - q).sum())
    assert res.sensitive_missing == 2


def test_encoded_verification_ignores_the_missing_code():
    # two classes over codes a=0 b=1 c=2 missing=3
    gid = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=np.int64)
    sa = np.array([0, 1, 2, 3, 0, 1, 3, 3], dtype=np.int64)
    q = np.bincount(sa, minlength=4) / 8
    kw = dict(k=2, l=3, xp=np)
    res = verify_encoded(gid, [np.arange(2, dtype=np.uint64)], sa, q, sa_missing=3, **kw)
    assert res.l == 2 and not res.ok and res.sensitive_missing == 3
    res = verify_encoded(gid, [np.arange(2, dtype=np.uint64)], sa, q, sa_missing=3, l_kind="entropy",
                         **dict(kw, l=2))
    assert res.l_entropy == pytest.approx(2.0) and res.ok  # class 2: a, b equally often


def test_reference_mondrian_ignores_missing():
    sa = np.array([0, 1, 2, 3, 3])
    rows = np.arange(5)
    assert _plain_ok(rows, sa, 2, 4, "distinct", None, "equal", None, 1.0)
    assert not _plain_ok(rows, sa, 2, 4, "distinct", None, "equal", None, 1.0, sa_missing=3)
    assert _plain_ok(rows, sa, 2, 3, "distinct", None, "equal", None, 1.0, sa_missing=3)


# ----------------------------------------------------------------------------- brute force

@pytest.mark.parametrize("l_kind,l,c", [("distinct", 4, 1.0), ("distinct", 3, 1.0), ("entropy", 3, 1.0),
                                         ("recursive", 3, 2.0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_output_class_meets_l_without_missing(l_kind, l, c, seed):
    df = _table(seed=seed, n_missing=40 + 10 * seed)
    qis = ["age", "zip"]
    m = Mondrian(k=4, l=l, l_kind=l_kind, c=c, quasi_identifiers=qis, sensitive="s")
    out = m.fit_transform(df)
    classes = _plain_l(out, qis)
    assert len(classes) == m.n_classes_
    for n_dist, exp_h, counts in classes:
        if l_kind == "distinct":
            assert n_dist >= l
        elif l_kind == "entropy":
            assert exp_h >= l - 1e-9
        else:
            assert counts[0] < c * sum(counts[l - 1:])
    assert m.report_["achieved"]["l"] == min(x[0] for x in classes)
    assert m.report_["n_sensitive_missing"] == int(df["s"].isna().sum())
    assert m.verification_.sensitive_missing == int(df["s"].isna().sum())


def test_summary_line_counts_missing_sensitive_rows(tmp_path):
    from gpuanon.cli import main

    src = tmp_path / "in.csv"
    _table().to_csv(src, index=False)
    rep = tmp_path / "r.json"
    rc = main(["anonymize", str(src), "--qi", "age,zip", "--sensitive", "s", "--k", "5", "--l", "4",
               "--out", str(tmp_path / "o.csv"), "--report", str(rep)])
    assert rc == 0
    import json

    report = json.loads(rep.read_text())
    assert report["n_sensitive_missing"] == 30
    out = pd.read_csv(tmp_path / "o.csv")
    assert min(x[0] for x in _plain_l(out, ["age", "zip"])) >= 4
    assert main(["check", str(tmp_path / "o.csv"), "--qi", "age,zip", "--sensitive", "s", "--k", "5",
                 "--l", "4"]) == 0
