"""Dates and times as QIs: ordered like numbers, published as date ranges, read back exactly.

A Parquet table with a ``when`` timestamp and a ``day`` date32 QI goes through the estimator and
the command line (CSV and Parquet outputs, every format). The test reads the published ranges
with its own parser (``lo..hi`` split, ``pandas.Timestamp``) and checks that every original value
lies inside its class's range and that k holds by its own group-by; the report must load with
strict JSON, and no warning may leak (the command runs under ``-W error``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuanon import Mondrian
from gpuanon.release.verify import cells_inside, verify

N = 120


def _strict(path):
    def refuse(x):
        raise ValueError(f"not strict JSON: {x}")
    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(7)
    when = pd.Timestamp("2021-03-01 08:00") + pd.to_timedelta(rng.integers(0, 86_400 * 90, N), unit="s")
    day = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 700, N), unit="D")
    df = pd.DataFrame({"age": rng.integers(20, 70, N), "when": when.astype("datetime64[us]"), "day": day,
                       "note": [f"n{i}" for i in range(N)], "y": rng.integers(0, 3, N)})
    t = pa.Table.from_pandas(df, preserve_index=False)
    t = t.set_column(t.column_names.index("day"), "day", t.column("day").cast(pa.date32()))
    path = tmp_path_factory.mktemp("dates") / "in.parquet"
    pq.write_table(t, path)
    return path


def _read_range(text):
    """The test's own reading of a published date cell: ``lo..hi`` or one date / date-time."""
    a, sep, b = str(text).partition("..")
    return pd.Timestamp(a), pd.Timestamp(b if sep else a)


def _check_ranges(out, orig, cols=("when", "day")):
    for c in cols:
        lo_hi = [_read_range(t) for t in out[c]]
        vals = pd.to_datetime(orig[c])
        for v, (a, b) in zip(vals, lo_hi):
            assert a <= v <= b, (c, v, a, b)


def test_estimator_publishes_date_ranges(table):
    orig = pd.read_parquet(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = Mondrian(k=6, quasi_identifiers=["age", "when", "day"], sensitive="y", backend="cpu", progress=False)
        out = m.fit_transform(orig)
    assert m.schema_.kinds["when"] == "numeric" and m.schema_.kinds["day"] == "numeric"
    assert len(out) == N
    days = out["day"].astype(str)
    assert days.str.fullmatch(r"\d{4}-\d\d-\d\d(\.\.\d{4}-\d\d-\d\d)?").all()  # day resolution
    assert out["when"].astype(str).str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\.\S+)?").all()
    assert out["when"].str.contains(r"\.\.").any()
    _check_ranges(out, orig)
    assert out.groupby(["age", "when", "day"]).size().min() >= 6
    assert verify(out, ["age", "when", "day"], "y", k=6).ok
    assert cells_inside(out, orig, ["age", "when", "day"]) == {"age": 0, "when": 0, "day": 0}


def test_minmax_is_two_date_columns_and_mean_a_date(table):
    orig = pd.read_parquet(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mm = Mondrian(k=5, quasi_identifiers=["when", "day"], output_format="minmax", backend="cpu",
                      progress=False).fit_transform(orig)
        mean = Mondrian(k=5, quasi_identifiers=["when", "day"], output_format="mean", backend="cpu",
                        progress=False).fit_transform(orig)
    assert mm["when_min"].dtype == orig["when"].dtype and mm["when_max"].dtype == orig["when"].dtype
    assert all(isinstance(v, type(orig["day"].iloc[0])) for v in mm["day_min"])  # dates stay dates
    for c in ("when", "day"):
        v = pd.to_datetime(orig[c])
        assert ((pd.to_datetime(mm[c + "_min"]) <= v) & (v <= pd.to_datetime(mm[c + "_max"]))).all()
    assert mean["when"].dtype == orig["when"].dtype
    assert all(isinstance(v, type(orig["day"].iloc[0])) for v in mean["day"])  # the mean of dates: a date
    assert cells_inside(mm, orig, ["when", "day"]) == {"when": 0, "day": 0}
    g = pd.DataFrame({"m": mean["when"], "lo": mm["when_min"], "hi": mm["when_max"]})
    assert ((g["lo"] <= g["m"]) & (g["m"] <= g["hi"])).all()  # the same partition: each mean in its range


def test_time_zone_published_with_its_offset():
    when = pd.date_range("2021-03-27 22:00", periods=24, freq="37min", tz="Europe/Paris")
    df = pd.DataFrame({"when": when})
    out = Mondrian(k=4, quasi_identifiers=["when"], backend="cpu", progress=False).fit_transform(df)
    lo_hi = [_read_range(t) for t in out["when"]]
    assert all(a.tzinfo is not None for a, _ in lo_hi)
    assert any("+02:00" in t for t in out["when"]) and any("+01:00" in t for t in out["when"])  # DST
    for v, (a, b) in zip(df["when"], lo_hi):
        assert a <= v <= b
    assert cells_inside(out, df, ["when"]) == {"when": 0}


@pytest.mark.parametrize("ext,fmt", [("csv", "range"), ("parquet", "range"), ("csv", "minmax"),
                                     ("parquet", "minmax"), ("parquet", "mean")])
def test_cli_dates(table, tmp_path, ext, fmt):
    out, rep = tmp_path / f"o.{ext}", tmp_path / "r.json"
    run = [sys.executable, "-W", "error", "-m", "gpuanon"]
    r = subprocess.run(run + ["anonymize", str(table), "--qi", "age,when,day", "--sensitive", "y", "--k", "5",
                              "--format", fmt, "--out", str(out), "--report", str(rep)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    doc = _strict(rep)
    cols = {c["name"]: c for c in doc["encoding"]["columns"]}
    assert cols["day"]["min"] <= cols["day"]["max"] and len(cols["day"]["min"]) == 10  # ISO dates
    orig = pd.read_parquet(table)
    pub = pd.read_csv(out) if ext == "csv" else pd.read_parquet(out)
    if fmt == "range":
        _check_ranges(pub, orig)
    if fmt != "mean":
        chk = subprocess.run(run + ["check", str(out), "--qi", "age,when,day", "--sensitive", "y", "--k", "5",
                                    "--original", str(table), "--target", "y", "--report", str(tmp_path / "c.json")],
                             capture_output=True, text=True)
        assert chk.returncode == 0 and chk.stdout.strip().endswith("OK"), chk.stdout + chk.stderr
        c = _strict(tmp_path / "c.json")
        assert c["cells_outside"] == {"age": 0, "when": 0, "day": 0}
        assert 0 < c["metrics"]["ncp"] < 1


def test_report_ncp_uses_time_widths(table):
    """NCP of a date QI is its classes' width over the whole range, as for a number of days."""
    orig = pd.read_parquet(table)
    m = Mondrian(k=5, quasi_identifiers=["day"], backend="cpu", progress=False)
    out = m.fit_transform(orig)
    as_days = orig.assign(day=(pd.to_datetime(orig["day"]) - pd.Timestamp("2019-01-01")).dt.days)
    n = Mondrian(k=5, quasi_identifiers=["day"], backend="cpu", progress=False)
    n.fit_transform(as_days)
    assert m.metrics_["ncp"] == pytest.approx(n.metrics_["ncp"], rel=1e-12)
    assert out["day"].nunique() == n.transform(as_days)["day"].nunique()


def test_model_features_read_dates_as_their_ranges(table):
    """Raw dates and published date ranges are one feature space: each raw date inside its range."""
    from gpuanon.evaluate.features import FeatureSpace

    orig = pd.read_parquet(table)[["age", "when", "day", "y"]]
    m = Mondrian(k=5, quasi_identifiers=["age", "when", "day"], target="y", backend="cpu", progress=False)
    out = m.fit_transform(orig)
    fs = FeatureSpace.from_frame(orig.drop(columns="y"), ["age", "when", "day"])
    raw, gen = fs.transform_raw(orig.drop(columns="y")), fs.transform_generalized(out.drop(columns="y"))
    assert ((gen[:, ::2] <= raw[:, ::2]) & (raw[:, 1::2] <= gen[:, 1::2])).all()
    assert (gen[:, 3] > gen[:, 2]).any()  # some 'when' ranges are wide
