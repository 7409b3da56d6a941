"""SUDA2 / DIS-SUDA (SPEC 13): against a brute-force MSU enumeration, hand-worked tables, sdcMicro's
own test expectations and numbers computed by sdcMicro 5.8.1's ``Suda2`` code (tests/data)."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import pathlib
from collections import Counter
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuanon.errors import InputError
from gpuanon.risk import suda
from gpuanon.risk.suda import MAX_LEVEL, suda2, suda2_frame

DATA = pathlib.Path(__file__).resolve().parent / "data" / "suda_sdcmicro.json.gz"


def brute_force(rows, max_size=None, f=0.01):
    """Every QI subset, uniqueness by counting tuples in a dict, minimality by every proper subset
    (the empty set included: a one-row table is unique on it). A negative value is missing: a value
    of its own for counting, never part of the record's MSU (sdcMicro)."""
    n, m = len(rows), len(rows[0])
    top = m if max_size is None else min(max_size, m)
    subsets = [s for k in range(m + 1) for s in itertools.combinations(range(m), k)]
    counts = {s: Counter(tuple(r[c] for c in s) for r in rows) for s in subsets}

    def unique(s, r):
        return counts[s][tuple(rows[r][c] for c in s)] == 1

    msus = []
    for r in range(n):
        mine = []
        for s in subsets:
            if not s or len(s) > top or any(rows[r][c] < 0 for c in s) or not unique(s, r):
                continue
            proper = (t for k in range(len(s)) for t in itertools.combinations(s, k))
            if not any(unique(t, r) for t in proper):
                mine.append(s)
        msus.append(mine)
    score = [sum(math.factorial(m - len(s)) for s in mine) for mine in msus]
    full = Counter(tuple(r) for r in rows)
    u = sum(1 for r in rows if full[tuple(r)] == 1)
    p = sum(1 for r in rows if full[tuple(r)] == 2)
    q = 1 + (8 - m) / 20
    adj = sum(s ** -q for s in score if s > 0)
    dis = u * f / (u * f + p * (1 - f)) if u * f + p * (1 - f) > 0 else None
    dis_score = [1 / (1 + (u / dis - u) / (s ** q * adj)) if s > 0 else 0.0 for s in score]
    total = sum(score)
    contrib = [sum(math.factorial(m - len(s)) for mine in msus for s in mine if c in s) / total
               if total else 0.0 for c in range(m)]
    return score, dis_score, [len(x) for x in msus], u, p, dis, contrib, msus


def _agree(res, ref):
    score, dis_score, nmsu, u, p, dis, contrib, msus = ref
    assert res.score.tolist() == score
    assert res.msu_count.tolist() == nmsu
    assert res.msu_min_size.tolist() == [min(map(len, x)) if x else 0 for x in msus]
    assert (res.n_unique, res.n_pairs) == (u, p)
    assert res.dis == pytest.approx(dis, rel=1e-12) if dis is not None else res.dis is None
    np.testing.assert_allclose(res.dis_score, dis_score, rtol=1e-12, atol=0)
    np.testing.assert_allclose(list(res.contributions.values()), contrib, rtol=1e-12)


@st.composite
def tables(draw):
    m = draw(st.integers(1, 6))
    n = draw(st.integers(1, 40))
    alphabet = [draw(st.integers(1, 4)) for _ in range(m)]
    with_missing = draw(st.booleans())
    low = -1 if with_missing else 0
    rows = [[draw(st.integers(low, a - 1)) for a in alphabet] for _ in range(n)]
    return rows, draw(st.one_of(st.none(), st.integers(1, m))), draw(st.sampled_from([0.01, 0.1, 0.5, 1.0]))


@settings(max_examples=150, deadline=None)
@given(tables())
def test_equals_brute_force(case):
    rows, max_size, f = case
    res = suda2(np.array(rows), max_size=max_size, sampling_fraction=f)
    _agree(res, brute_force(rows, max_size, f))
    assert res.max_size == (len(rows[0]) if max_size is None else max_size)


@settings(max_examples=60, deadline=None)
@given(tables())
def test_bit_by_bit_ranks_equal_brute_force(case):
    """The fallback for levels with too many subsets for a rank table (T - {c} ranked bit by bit)."""
    rows, max_size, f = case
    with mock.patch.object(suda, "MAX_RANK_TABLE", 0):
        res = suda2(np.array(rows), max_size=max_size, sampling_fraction=f)
    _agree(res, brute_force(rows, max_size, f))


def test_drop_ranks_rank_each_subset_one_smaller():
    """Ranks of t - {c} against ranks found by listing the (k - 1)-subsets in colex order."""
    for m, k in ((5, 2), (6, 3), (7, 5)):
        colex = lambda j: sorted(itertools.combinations(range(m), j), key=lambda t: t[::-1])  # noqa: E731
        where = {t: i for i, t in enumerate(colex(k - 1))}
        table = suda._drop_ranks(m, k)
        for r, t in enumerate(colex(k)):
            assert table[r].tolist() == [where[t[:j] + t[j + 1:]] for j in range(k - 1)]


def test_hand_worked_table():
    """Seven rows, M = 3 (columns a, b, c), worked by hand. Value counts: a = 1 x3, 2 x2, 3, 4;
    b = 1 x3, 2 x2 (rows 2, 4), 3, 4; c = 1 x4, 2, 3 x2.

        row  a b c   MSUs (unique, no proper subset unique)          score = sum (3 - |m|)!
        0,1  1 1 1   none: the two rows are equal (a class of size 2, P = 2)          0
        2    1 2 1   {a,b} = (1,2), {b,c} = (2,1); no single value unique          1 + 1 = 2
        3    2 1 1   {a,b} = (2,1), {a,c} = (2,1); {b,c} = (1,1) is rows 0,1,3     1 + 1 = 2
        4    2 2 2   {c} (c = 2 once); {a,b} = (2,2) (a = 2 and b = 2 twice each)  2 + 1 = 3
        5    3 3 3   {a}, {b}; c = 3 twice, so no {c}                             2 + 2 = 4
        6    4 4 3   {a}, {b}                                                      2 + 2 = 4
    U = 5 (rows 2-6), P = 2; f = 0.01: Dis = 0.05 / (0.05 + 1.98) = 5 / 203, U / Dis - U = 198.
    Q = 1 + (8 - 3) / 20 = 1.25; DIS of row 5 = 1 / (1 + 198 / (4^1.25 A)) with
    A = 2 x 2^-1.25 + 3^-1.25 + 2 x 4^-1.25.
    Contributions (total score 15): a is in {a,b} x3, {a,c}, {a} x2: 1+1+1+1+2+2 = 8 -> 8/15;
    b in {a,b} x3, {b,c}, {b} x2: 8/15; c in {b,c}, {a,c}, {c}: 1+1+2 = 4/15.
    """
    rows = [[1, 1, 1], [1, 1, 1], [1, 2, 1], [2, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 3]]
    res = suda2(np.array(rows), names=["a", "b", "c"])
    assert res.score.tolist() == [0, 0, 2, 2, 3, 4, 4]
    assert res.msu_count.tolist() == [0, 0, 2, 2, 2, 2, 2]
    assert (res.n_unique, res.n_pairs) == (5, 2)
    assert res.dis == pytest.approx(5 / 203, rel=1e-15)
    a = 2 * 2 ** -1.25 + 3 ** -1.25 + 2 * 4 ** -1.25
    assert res.dis_score[5] == pytest.approx(1 / (1 + 198 / (4 ** 1.25 * a)), rel=1e-14)
    assert res.dis_score[0] == 0
    assert res.contributions == pytest.approx({"a": 8 / 15, "b": 8 / 15, "c": 4 / 15})
    assert res.histogram()["0"] == 2
    assert sum(res.histogram().values()) == 7


def test_sdcmicro_own_expectations():
    """sdcMicro's tests/testthat/test_suda2.R: the 3-row contribution example (50, 37.5, 37.5 %),
    the book example (scores of rows 5-8: 4, 2, 6, 8) and the SDC guideline table."""
    res = suda2(np.array([[2, 0, 0], [1, 3, 6], [1, 0, 0]]))
    assert [100 * v for v in res.contributions.values()] == [50, 37.5, 37.5]
    book = pd.DataFrame({
        "age": ["20s"] * 7 + ["60s"], "gender": ["male"] * 4 + ["female"] * 3 + ["male"],
        "income": ["50k+", "50k+"] + ["50k-"] * 6,
        "education": ["highschool"] * 4 + ["university", "highschool", "middleschool", "university"]})
    assert suda2_frame(book, list(book.columns)).score[4:].tolist() == [4, 2, 6, 8]
    guide = pd.DataFrame({
        "Residence": ["U", "U", "U", "U", "R", "U", "U", "U", "U", "U"],
        "Gender": ["F", "F", "F", "M", "F", "M", "F", "M", "F", "F"],
        "Education": ["SI", "SI", "PI", "SC", "SC", "SC", "PC", "PS", "SI", "SI"],
        "Labor": ["E", "E", "N", "E", "U", "E", "N", "U", "N", "N"]})
    assert suda2_frame(guide, list(guide.columns)).score.tolist() == [0, 0, 6, 0, 12, 0, 6, 10, 0, 0]


def _sdcmicro_cases():
    with gzip.open(DATA, "rt") as fh:
        return json.load(fh)["cases"]


@pytest.mark.parametrize("case", _sdcmicro_cases(), ids=lambda c: c["name"])
def test_matches_sdcmicro(case):
    """Scores and contributions equal to sdcMicro's (tests/data/make_suda_sdcmicro.py); DIS-SUDA to
    sdcMicro's single precision (it keeps f, Dis and U / Dis - U in floats)."""
    frame = pd.DataFrame(case["columns"])
    res = suda2_frame(frame, list(frame.columns), sampling_fraction=case["fraction"])
    assert res.score.tolist() == case["score"]
    np.testing.assert_allclose([100 * v for v in res.contributions.values()],
                               case["contribution"], rtol=1e-9)
    np.testing.assert_allclose(res.dis_score, case["dis"], rtol=1e-5, atol=1e-12)
    assert list(res.histogram().values()) == case["bands"]  # print.suda2's table


def test_missing_never_in_msu():
    rows = np.array([[0, -1], [0, 1], [1, 1]])
    res = suda2(rows)
    # row 0 is unique only through its missing b: no MSU; row 2 is unique on a
    assert res.score.tolist() == [0, 1, 1]  # row 1: {a, b} = (0, 1); row 2: {a} -> (2 - 1)! = 1
    assert res.n_unique == 3


def test_frame_and_errors():
    frame = pd.DataFrame({"a": ["x", "y", None], "b": [1.0, 1.0, 2.0]})
    res = suda2_frame(frame, ["a", "b"])
    assert res.to_dict()["n_records"] == 3
    json.dumps(res.to_dict(per_record=True), allow_nan=False)
    with pytest.raises(InputError, match="--suda-max-size 2 "):  # C(30, 3) = 4,060 subsets
        suda2(np.zeros((MAX_LEVEL // 1000, 30), dtype=np.int8))
    assert suda2(np.zeros((MAX_LEVEL // 1000, 30), dtype=np.int8), max_size=1).score.sum() == 0
    with pytest.raises(InputError, match="fewer rows"):
        suda2(np.zeros((MAX_LEVEL // 10, 11), dtype=np.int8))
    with pytest.raises(InputError, match="--suda-max-size"):
        suda2(np.zeros((3, 2), dtype=int), max_size=0)
    with pytest.raises(InputError, match="--sampling-fraction"):
        suda2(np.zeros((3, 2), dtype=int), sampling_fraction=0)
    with pytest.raises(InputError, match="--qi"):
        suda2_frame(frame, ["a", "zz"])
    empty = suda2(np.zeros((0, 3), dtype=int))
    assert empty.n_records == 0 and empty.dis is None
    json.dumps(empty.to_dict(), allow_nan=False)


def test_device_double_matches_numpy():
    """The CuPy path on the strict CPU stand-in (tests/cupy_double.py): same result as NumPy, and
    no host read or upload outside gpuanon.backend's count."""
    pytest.importorskip("cupy", reason="the device double reads CuPy's API from the cupy wheel")
    from cupy_double import DeviceDouble  # noqa: PLC0415

    from gpuanon import backend as B  # noqa: PLC0415

    rng = np.random.default_rng(5)
    codes = rng.integers(-1, 4, size=(300, 6))
    cpu = suda2(codes, sampling_fraction=0.1)
    dev = DeviceDouble()
    with B.use_device_module(dev):
        gpu = suda2(B.to_device(codes, dev), sampling_fraction=0.1)
    s = dev.stats.summary()
    assert s["ops"] > 0 and s["syncs_escaped"] == 0 and s["uploads_escaped"] == 0, s["escaped_sites"]
    assert gpu.to_dict(per_record=True) == cpu.to_dict(per_record=True)
