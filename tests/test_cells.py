"""The published cell format: text made from per-class values is a bijection, and reads back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuanon import Mondrian
from gpuanon.table.cells import parse_numeric_cells, parse_range, range_texts, set_text, split_set_text


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=2, max_size=2),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_range_text_reads_back_exactly(pair, integer):
    lo, hi = sorted(pair)
    if integer:
        lo, hi = float(np.trunc(lo) % 1e15), float(np.trunc(hi) % 1e15)
        lo, hi = min(lo, hi), max(lo, hi)
    (text,) = range_texts(np.array([lo]), np.array([hi]), integer)
    assert parse_range(text) == (lo + 0.0, hi + 0.0)
    if lo < 0 and lo != hi:
        assert text.startswith("[")  # a negative bound is never next to the separator dash


def test_range_texts_distinct_intervals_distinct_texts():
    rng = np.random.default_rng(0)
    lo = np.round(rng.normal(0, 50, 2000), 2)
    hi = lo + np.abs(np.round(rng.normal(0, 5, 2000), 2)) * rng.integers(0, 2, 2000)
    texts = range_texts(lo, hi, False)
    pairs = set(zip(lo.tolist(), hi.tolist()))
    assert len(set(texts.tolist())) == len(pairs)
    back = parse_numeric_cells(pd.Series(texts, name="x"))
    assert np.array_equal(back[0], lo + 0.0) and np.array_equal(back[1], hi + 0.0)


def test_missing_interval_is_missing():
    t = range_texts(np.array([np.nan, 1.0]), np.array([np.nan, 2.0]), True)
    assert t[0] is None and t[1] == "1-2"


@given(st.lists(st.text(alphabet="ab|\\ ", min_size=1, max_size=6), min_size=1, max_size=4, unique=True))
@settings(max_examples=300, deadline=None)
def test_set_text_round_trip(values):
    assert split_set_text(set_text(values)) == values


def test_single_value_with_separator_is_escaped_in_the_output():
    # one value 'rent|lease' must not read back as the set {rent, lease}
    df = pd.DataFrame({"tenure": ["rent|lease"] * 3 + ["own"] * 3 + ["a\\b"] * 3,
                       "age": [30, 31, 32, 40, 41, 42, 50, 51, 52]})
    out = Mondrian(k=3, quasi_identifiers=["tenure", "age"], backend="cpu", progress=False).fit_transform(df)
    cells = out["tenure"].astype(str).tolist()
    assert cells[:3] == ["rent\\|lease"] * 3
    assert [split_set_text(c) for c in cells] == [["rent|lease"]] * 3 + [["own"]] * 3 + [["a\\b"]] * 3


def test_negative_ranges_are_unambiguous_and_checked():
    df = pd.DataFrame({"lon": [-93.2465, -93.2457, -93.25, 1.5, 2.5, 3.5], "s": list("abcabc")})
    out = Mondrian(k=3, quasi_identifiers=["lon"], backend="cpu", progress=False).fit_transform(df)
    texts = out["lon"].astype(str).tolist()
    assert texts[0] == "[-93.25, -93.2457]" and texts[3] == "1.5-3.5"
    lo, hi = parse_numeric_cells(out["lon"])
    v = df["lon"].to_numpy()
    assert ((lo <= v) & (v <= hi)).all()


def test_text_columns_are_categoricals_indexed_by_class():
    from gpuanon.datasets import load_adult

    df = load_adult().head(3000)
    m = Mondrian(k=5, quasi_identifiers=["age", "education", "gender"], backend="cpu", progress=False)
    out = m.fit_transform(df)
    for c in ("age", "education", "gender"):
        assert isinstance(out[c].dtype, pd.CategoricalDtype)
        assert len(out[c].cat.categories) <= m.n_classes_


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_published_cells_group_like_the_text(fmt):
    """The verifier's encoded cells and the written text give the same classes (a bijection)."""
    from gpuanon.datasets import load_adult
    from gpuanon.table.cells import output_qi_columns
    from gpuanon.release.classes import ClassStats
    from gpuanon.release.verify import class_ids, verify_encoded

    df = load_adult().head(4000)
    qis = ["age", "education", "hours-per-week", "race"]
    m = Mondrian(k=4, quasi_identifiers=qis, output_format=fmt, mode="relaxed", backend="cpu", progress=False)
    out = m.fit_transform(df)
    cs = ClassStats(m.table_, np.asarray(m.labels_), m.n_partitions_)
    r = verify_encoded(cs.row_pos, cs.published_cells(fmt), k=4)
    _, n_text = class_ids(out, output_qi_columns(qis, fmt, m.schema_.kinds))
    assert r.n_classes == n_text and r.ok
