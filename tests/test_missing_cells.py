"""A missing categorical value is shown one way: an empty cell alone, the marker ``\\N`` inside a set
(never ``NaN``, which is a category's name), and every reader parses the marker back as missing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expected import run_cli
from gpuanon import Mondrian
from gpuanon.table.cells import MISSING_IN_SET, cell_key, set_text, split_set_text
from gpuanon.datasets import load_table
from gpuanon.evaluate import FeatureSpace
from gpuanon.metrics import output_metrics
from gpuanon.release.verify import verify

JOBS = [None, "NaN", "Unknown", None, "NaN", "Unknown", "x", None, "NaN", "x", "Unknown", None]


def _frame() -> pd.DataFrame:
    n = len(JOBS)
    return pd.DataFrame({"job": pd.Series(JOBS, dtype=object), "age": np.arange(20, 20 + n),
                         "sa": list("abcabcabcabc"), "y": [0, 1] * (n // 2)})


@given(st.lists(st.one_of(st.none(), st.sampled_from(["NaN", "N", "\\N", "\\", "|", "a|b", "\\\\N"])),
                min_size=1, max_size=5, unique=True))
@settings(max_examples=200, deadline=None)
def test_marker_never_collides_with_a_value(values):
    text = set_text(values)
    assert split_set_text(text) == values
    # the marker appears once per missing value and never from a value's text
    parts = [p for p in split_set_text(text) if p is None]
    assert len(parts) == sum(v is None for v in values)


def test_set_cells_tell_missing_from_a_category_named_nan():
    df = _frame()
    out = Mondrian(k=len(df), quasi_identifiers=["job"], backend="cpu", progress=False).fit_transform(df)
    (cell,) = set(out["job"].astype(str))
    assert MISSING_IN_SET in cell.split("|") and "NaN" in cell.split("|")
    assert sorted(split_set_text(cell), key=str) == sorted([None, "NaN", "Unknown", "x"], key=str)


def test_a_missing_value_alone_is_an_empty_cell():
    df = pd.DataFrame({"job": pd.Series([None] * 3 + ["NaN"] * 3 + ["a"] * 3, dtype=object), "age": range(9)})
    out = Mondrian(k=3, quasi_identifiers=["job"], backend="cpu", progress=False).fit_transform(df)
    assert out["job"].isna().tolist() == [True] * 3 + [False] * 6
    assert out["job"].astype(object).tolist()[3:] == ["NaN"] * 3 + ["a"] * 3


def test_readers_parse_the_marker_back():
    df = _frame()
    out = Mondrian(k=6, quasi_identifiers=["job", "age"], backend="cpu", progress=False).fit_transform(df)
    # every row's own value (missing: None) is a member of its published set
    for v, cell in zip(df["job"], out["job"].astype(object), strict=True):
        members = [None] if cell_key(cell) is None else split_set_text(cell)
        assert cell_key(v) in members, (v, cell)
    output_metrics(out, df, ["job", "age"], "y", k=6)  # reads every set back against the original's values
    fs = FeatureSpace.from_frame(df, quasi_identifiers=["job", "age"])
    X = fs.transform_generalized(out)
    assert np.isfinite(X).all() and X.shape[0] == len(df)


@pytest.mark.slow
def test_round_trip_through_csv_and_parquet_and_check(tmp_path):
    df = _frame()
    src = tmp_path / "in.parquet"
    df.to_parquet(src)
    for ext in ("csv", "parquet"):
        out = tmp_path / f"o.{ext}"
        r = run_cli("anonymize", str(src), "--qi", "job", "--sensitive", "sa", "--k", str(len(df)),
                    "--out", str(out), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        pub = load_table(out)
        (cell,) = set(pub["job"])
        assert sorted(split_set_text(cell), key=str) == sorted([None, "NaN", "Unknown", "x"], key=str), ext
        rep = tmp_path / f"r_{ext}.json"
        r = run_cli("check", str(out), "--qi", "job", "--sensitive", "sa", "--k", "12", "--l", "3", "--t", "0.5",
                    "--original", str(src), "--target", "y", "--report", str(rep), cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        got = json.loads(rep.read_text())
        res = verify(pub, ["job"], "sa", k=12, l=3, t=0.5)
        assert (got["k"], got["l"], got["t"]) == (res.k, res.l, res.t) == (12, 3, 0.0)
        assert got["metrics"]["entropy_loss"] is not None  # the sets were read back against the original


def test_a_hierarchy_leaf_for_a_missing_value_is_an_empty_cell():
    from gpuanon.hierarchy import masking_hierarchy

    jobs = pd.Series([None] * 3 + ["a|c"] * 3 + ["x\\y"] * 3, dtype=object)
    df = pd.DataFrame({"job": jobs, "age": range(9)})
    m = Mondrian(k=3, quasi_identifiers=["job"], hierarchies={"job": masking_hierarchy(jobs)}, backend="cpu",
                 progress=False)
    out = m.fit_transform(df)
    assert out["job"].isna().tolist() == [True] * 3 + [False] * 6
    assert out["job"].astype(object).tolist()[3:] == ["a\\|c"] * 3 + ["x\\\\y"] * 3
