"""Attacks on a hand-worked 12-row release (intervals, sets, a hierarchy label, '*'): every success count
worked out by hand in the comments, and the vectorized predicate counts against a brute-force check."""

import math

import numpy as np
import pandas as pd
import pytest

from gpuanon.attack import evaluate
from gpuanon.attack.cells import encode, unique_rows
from gpuanon.attack.predicates import Predicates, holds, match_counts
from gpuanon.attack.singling import from_records, random_predicates
from gpuanon.attack.stats import results
from gpuanon.hierarchy import Hierarchy

ORIG = pd.DataFrame({
    "age": [21, 24, 27, 33, 35, 38, 41, 44, 47, 52, 55, 58],
    "city": ["A1", "A2", "A1", "B1", "B2", "B1", "A2", "A1", "A2", "B2", "B1", "B2"],
    "job": ["x", "y", "x", "y", "z", "z", "x", "y", "y", "x", "z", "x"],
    "hours": [10, 40, 40, 40, 60, 40, 40, 40, 40, 40, 40, 40],
    "inc": ["lo", "lo", "hi", "lo", "hi", "hi", "lo", "hi", "lo", "hi", "lo", "hi"],
})
# four classes of three: age intervals, the city hierarchy's labels, job sets and '*'; hours passes
# through; the secret inc is published as the set lo|hi in the first class
RELEASE = pd.DataFrame({
    "age": ["20-29"] * 3 + ["30-39"] * 3 + ["40-49"] * 3 + ["50-59"] * 3,
    "city": ["North"] * 3 + ["South"] * 3 + ["North"] * 3 + ["South"] * 3,
    "job": ["x|y"] * 3 + ["y|z"] * 3 + ["x|y"] * 3 + ["*"] * 3,
    "hours": ORIG["hours"],
    "inc": ["lo|hi"] * 3 + ["lo", "hi", "hi", "lo", "hi", "lo", "hi", "lo", "hi"],
})
# the control: other people; two work 10 hours, one 60
CONTROL = ORIG.assign(age=ORIG["age"] + 1, hours=[10, 10, 40, 40, 60, 40, 40, 40, 40, 40, 40, 40])
CITY = Hierarchy.from_labels(["A1", "A2", "B1", "B2"], [["North", "*"], ["North", "*"], ["South", "*"], ["South", "*"]])


def _run(**kw):
    return evaluate(RELEASE, ORIG, CONTROL, hierarchies={"city": CITY}, seed=3, **kw)


def test_univariate_singling_out_by_hand():
    # Release rows without duplicates: 9 (class 1: hours 10 / 40; class 2: lo-40, hi-60, hi-40; classes 3 and
    # 4: two each). Univariate candidates: age <= 20 and age >= 59 may match 2 rows each (a class's two
    # distinct rows); no city / job / inc cell is held by one row; hours <= 10, hours >= 60, hours == 10 and
    # hours == 60 may match one row each: 4 predicates. Originals: each matches exactly one row (rows 0, 4):
    # 4 successes. Control: two rows work 10 hours, one 60: hours >= 60 and == 60 succeed, 2.
    r = _run(attacks=["singling-out"], n_attacks=10)["singling_out"]["univariate"]
    assert r["queries"] == 4 and r["exhausted"]
    assert r["n_success"] == 4
    assert r["n_control"] == 2
    assert r["columns_of_successes"]["hours"] == 4 and r["columns_of_successes"]["age"] == 0


def test_linkability_by_hand():
    # A = (age, city): each original row is at distance 0 from its class's three rows (its age in the
    # interval, its city under the label), anonymeter's rule takes the first: 0, 3, 6, 9.
    # B = (job, hours): the first row at distance 0: row 0 for (x, 10), row 4 for (z, 60), row 3 for (z, 40)
    # ('y|z' holds z), row 1 for every other (x or y, 40). Links by the first rows: row 0 (0 = 0) and row 5
    # (3 = 3): 2. With ties kept, every row's class shares a row with its B ties: 12.
    r = _run(attacks=["linkability"], n_attacks=12, aux=(["age", "city"], ["job", "hours"]))["linkability"]
    assert r["n_success"] == 2
    assert r["ties_kept"]["n_success"] == 12
    assert r["n_success"] <= r["ties_kept"]["n_success"] and r["tie_aware"]["n_success"] <= 12


def test_inference_by_hand():
    # The nearest release row on (age, city, job, hours), the first at distance 0: rows 0, 1, 1 for the first
    # class (guess lo|hi: 1/2 each), then 3, 4, 3, 6, 6, 6, 9, 9, 9: guesses lo, hi, lo, lo, lo, lo, hi, hi,
    # hi against lo, hi, hi, lo, hi, lo, hi, lo, hi: 6 right. Total 1.5 + 6 = 7.5.
    r = _run(attacks=["inference"], n_attacks=12, secrets=["inc"])["inference"]["inc"]
    assert r["n_success"] == pytest.approx(7.5)
    assert r["n_attacks"] == 12


def _brute(q: Predicates, e, table_frame, columns, is_release):
    """Whether each predicate may match each row: Python sets, one row and one predicate at a time."""
    out = np.zeros((q.n, len(table_frame)), dtype=bool)
    for i in range(q.n):
        for r in range(len(table_frame)):
            ok = True
            for c in e.columns:
                if c.name not in columns or not q.used[c.name][i]:
                    continue
                t = e.release if is_release else e.original
                if c.kind == "numeric":
                    lo, hi = t.lo[c.name][r], t.hi[c.name][r]
                    a, b = q.a[c.name][i], q.b[c.name][i]
                    if math.isnan(lo):
                        ok &= bool(q.null[c.name][i])
                    elif q.inv[c.name][i]:
                        ok &= not (a <= lo and hi <= b)
                    else:
                        ok &= lo <= b and hi >= a
                else:
                    n = c.n_cats
                    members = lambda cell: {cell} if cell < n else set(np.flatnonzero(c.sets[cell - n]))  # noqa: E731
                    row, pred = members(t.cell[c.name][r]), members(q.p[c.name][i])
                    if q.neg[c.name][i]:
                        ok &= bool(row - pred - {c.missing})
                    else:
                        ok &= bool(row & pred)
            out[i, r] = ok
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_predicate_counts_match_brute_force(seed):
    e = encode(RELEASE, ORIG, CONTROL, list(ORIG.columns), {"city": CITY})
    rng = np.random.default_rng(seed)
    rows = unique_rows(e.release, e.columns)
    used = rng.random((40, len(e.columns))) < 0.5
    q = Predicates.concat([from_records(e, rows[rng.integers(0, len(rows), 40)], used, {"age": 39.5, "hours": 40.0}),
                           random_predicates(e, rows, 60, 2, rng)])
    for frame, table, is_rel in ((RELEASE, e.release, True), (ORIG, e.original, False)):
        want = _brute(q, e, frame, list(ORIG.columns), is_rel)
        assert np.array_equal(holds(q, e.columns, table, np.arange(len(frame))), want)
        assert np.array_equal(match_counts(q, e.columns, table, rng), np.minimum(want.sum(axis=1), 2))


def test_statistics_as_anonymeter():
    # Wilson's estimate and the residual risk written out: z = 1.959963984540054 at 95 %
    z = 1.959963984540054
    n, s, c = 500, 450, 30
    rate = (s + z * z / 2) / (n + z * z)
    err = z / (n + z * z) * math.sqrt(s * (n - s) / n + z * z / 4)
    crate = (c + z * z / 2) / (n + z * z)
    cerr = z / (n + z * z) * math.sqrt(c * (n - c) / n + z * z / 4)
    risk = (rate - crate) / (1 - crate)
    rerr = math.sqrt((err / (1 - crate)) ** 2 + (cerr * (rate - 1) / (1 - crate) ** 2) ** 2)
    r = results(n, s, 20, c)
    assert r["attack_rate"]["value"] == pytest.approx(rate, abs=1e-12)
    assert r["risk"]["value"] == pytest.approx(risk, abs=1e-12)
    assert r["risk"]["ci"] == pytest.approx([risk - rerr, risk + rerr], abs=1e-12)
    assert not r["warnings"]
    low = results(100, 3, 10, 0)
    assert low["warnings"] and "cannot be trusted" in low["warnings"][0]
    assert low["risk"]["ci"][0] == 0.0  # clipped


def test_same_seed_same_report():
    a = _run(attacks=["singling-out", "linkability", "inference"], n_attacks=12, secrets=["inc"],
             aux=(["age", "city"], ["job", "hours"]))
    b = _run(attacks=["singling-out", "linkability", "inference"], n_attacks=12, secrets=["inc"],
             aux=(["age", "city"], ["job", "hours"]))
    a.pop("cpu_seconds"), b.pop("cpu_seconds")
    assert a == b
