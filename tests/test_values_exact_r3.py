"""Values as read, exactly (issue 30, items 1, 2, 7, 8): dates of any year 0001-9999, nullable integer
QIs, exact means of integers beyond 2**53, and decimals.

Every check reads the published file with this test's own parser (ISO dates compared as text, which
orders them as the calendar does; integers and decimals as Python ``int`` / ``Decimal``), never
through gpuanon's reader.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuanon import Mondrian
from gpuanon.datasets import ColumnTypes, load_table
from gpuanon.output.io import write_table

RUN = [sys.executable, "-m", "gpuanon"]
_INT_CELL = re.compile(r"^(-?\d+)$|^(\d+)-(\d+)$|^\[(-?\d+), (-?\d+)\]$")


def _anonymize(inp, out, *args):
    r = subprocess.run(RUN + ["anonymize", str(inp), "--out", str(out), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _texts(path) -> pd.DataFrame:
    """A published table as text cells (None where empty): CSV read as strings; Parquet cells as text
    (dates ISO, integers and decimals their digits)."""
    if str(path).endswith(".csv"):
        with open(path, encoding="utf-8") as fh:
            names = fh.readline().rstrip("\n").split(",")
        opts = pacsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=True)
        tbl = pacsv.read_csv(path, convert_options=opts, parse_options=pacsv.ParseOptions(ignore_empty_lines=False))
        tbl = pa.table([c.cast(pa.string()) for c in tbl.columns], names=tbl.column_names)
    else:
        tbl = pq.read_table(path)
        tbl = pa.table([c.cast(pa.string()) for c in tbl.columns], names=tbl.column_names)
    return pd.DataFrame({n: pd.Series(tbl.column(n).to_pylist(), dtype=object) for n in tbl.column_names})


def _date_bounds(cell):
    lo, _, hi = cell.partition("..")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", lo) and (not hi or re.fullmatch(r"\d{4}-\d\d-\d\d", hi)), cell
    return lo, hi or lo


def _int_bounds(cell):
    m = _INT_CELL.match(cell)
    assert m, cell
    g = [x for x in m.groups() if x is not None]
    return (int(g[0]), int(g[0])) if len(g) == 1 else (int(g[0]), int(g[1]))


def _check_dates(pub: pd.DataFrame, orig: list, col: str, fmt: str):
    """Every original date (ISO text, None: missing) inside its published cell."""
    if fmt == "minmax":
        cells = list(zip(pub[col + "_min"], pub[col + "_max"]))
    else:
        cells = [(None, None) if c is None else _date_bounds(c) for c in pub[col]]
    for v, (lo, hi) in zip(orig, cells):
        if v is None:
            assert lo is None and hi is None
        elif fmt == "mean":  # the class's mean: inside the class, checked per published tuple below
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", lo), lo
        else:
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", lo) and re.fullmatch(r"\d{4}-\d\d-\d\d", hi), (lo, hi)
            assert lo <= v <= hi, (v, lo, hi)


def _check_ints(pub: pd.DataFrame, orig: list, col: str, fmt: str):
    if fmt == "minmax":
        cells = list(zip(pub[col + "_min"], pub[col + "_max"]))
    else:
        cells = [(None, None) if c is None else (c, c) for c in pub[col]]
    for v, (lo, hi) in zip(orig, cells):
        if v is None:
            assert lo is None and hi is None
            continue
        assert lo is not None
        if fmt == "mean":  # a class mean of integers (a float): checked by _means_inside
            continue
        assert "." not in lo and "e" not in lo.lower(), lo  # an integer, not a float
        if fmt == "range":
            a, b = _int_bounds(lo)
        else:
            a, b = int(lo), int(hi)
        assert a <= v <= b, (v, a, b)


def _means_inside(pub: pd.DataFrame, orig: pd.DataFrame, qis, col, parse):
    """A published mean lies within the smallest and largest original of the rows publishing the same
    tuple (one class, or several published alike)."""
    groups: dict = {}
    for i, key in enumerate(zip(*(pub[c] for c in qis))):
        groups.setdefault(key, []).append(i)
    for rows in groups.values():
        vals = [parse(orig[col].iloc[i]) for i in rows if orig[col].iloc[i] is not None]
        means = {pub[col].iloc[i] for i in rows}
        assert len(means) == 1
        m = means.pop()
        if not vals:
            assert m is None
            continue
        assert min(vals) <= parse(m) <= max(vals), (m, min(vals), max(vals))


# ---- item 1: dates outside 1677-09-21 .. 2262-04-11 -------------------------------------------------

@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_sentinel_dates_published_as_the_dates_read(tmp_path, fmt, ext):
    rng = np.random.default_rng(0)
    dates = ["2021-05-01", "2022-07-15", "9999-12-31", "0001-01-01", "2262-04-12", "1677-09-20"]
    n = 200
    d = [dates[i] for i in rng.integers(0, len(dates), n)]
    age = rng.integers(20, 70, n)
    src = tmp_path / "in.csv"
    pd.DataFrame({"age": age, "end_date": d}).to_csv(src, index=False)
    out = tmp_path / f"out.{ext}"
    _anonymize(src, out, "--qi", "age,end_date", "--k", "5", "--format", fmt)
    pub = _texts(out)
    assert len(pub) == n
    _check_dates(pub, d, "end_date", fmt)
    if fmt == "mean":
        _means_inside(pub, pd.DataFrame({"end_date": d}), ["age", "end_date"], "end_date", str)
    if ext == "parquet" and fmt != "range":
        names = ["end_date_min", "end_date_max"] if fmt == "minmax" else ["end_date"]
        schema = pq.read_schema(out)
        assert all(schema.field(c).type == pa.date32() for c in names), schema
    if fmt != "mean":  # the check reads the new types, and a wrong cell fails it
        chk = subprocess.run(RUN + ["check", str(out), "--qi", "age,end_date", "--k", "5", "--original", str(src)],
                             capture_output=True, text=True)
        assert chk.returncode == 0 and chk.stdout.strip().endswith("OK"), chk.stdout + chk.stderr


def test_a_wrong_sentinel_date_cell_fails_the_check(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    d = ["9999-12-31", "0001-01-01"] * 10
    pd.DataFrame({"age": [30] * 20, "end_date": d}).to_csv(src, index=False)
    _anonymize(src, out, "--qi", "age,end_date", "--k", "20")
    text = out.read_text()
    assert "0001-01-01..9999-12-31" in text
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace("0001-01-01..9999-12-31", "0002-01-01..9999-12-31"))
    chk = subprocess.run(RUN + ["check", str(bad), "--qi", "age,end_date", "--k", "20", "--original", str(src)],
                         capture_output=True, text=True)
    assert "end_date" in chk.stdout and "outside" in chk.stdout and not chk.stdout.strip().endswith("OK"), chk.stdout


def test_wide_date_times_keep_their_time(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    d = ["9999-12-31T23:59:59", "0001-01-01T00:00:01", "2020-01-01T10:30:00"] * 4
    pd.DataFrame({"t": d}).to_csv(src, index=False)
    _anonymize(src, out, "--qi", "t", "--k", "4", "--format", "minmax")
    pub = _texts(out)
    assert sorted(set(zip(pub["t_min"], pub["t_max"]))) == [
        ("0001-01-01 00:00:01", "0001-01-01 00:00:01"), ("2020-01-01 10:30:00", "2020-01-01 10:30:00"),
        ("9999-12-31 23:59:59", "9999-12-31 23:59:59")]
    _anonymize(src, out, "--qi", "t", "--k", "6", "--format", "range")
    assert set(_texts(out)["t"]) <= {"0001-01-01T00:00:01..2020-01-01T10:30:00",
                                      "2020-01-01T10:30:00..9999-12-31T23:59:59",
                                      "0001-01-01T00:00:01..9999-12-31T23:59:59"}


# ---- item 2: integer QIs with empty cells ----------------------------------------------------------

@pytest.mark.parametrize("fmt", ["range", "minmax"])
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_integer_qi_with_blanks_stays_integer(tmp_path, fmt, ext):
    rng = np.random.default_rng(1)
    n = 120
    kids = [None if v == 4 else int(v) for v in rng.integers(0, 5, n)]
    src = tmp_path / "in.csv"
    src.write_text("age,kids\n" + "".join(f"{a},{'' if k is None else k}\n"
                                           for a, k in zip(rng.integers(20, 60, n), kids)))
    out = tmp_path / f"out.{ext}"
    _anonymize(src, out, "--qi", "age,kids", "--k", "5", "--format", fmt, "--max-suppression", "0.2")
    pub = _texts(out)
    orig = pd.read_csv(src, dtype=str, keep_default_na=False)
    if len(pub) == n:
        _check_ints(pub, [None if k is None else k for k in kids], "kids", fmt)
    else:  # suppressed rows are gone; the others keep their order: compare the kept ones by age too
        assert all(c is None or "." not in c for c in (pub["kids"] if fmt == "range" else pub["kids_min"]))
    if ext == "parquet" and fmt == "minmax":
        assert pq.read_schema(out).field("kids_min").type == pa.int64()
    assert len(orig) == n


@pytest.mark.parametrize("writer", ["pandas", "arrow"])
def test_parquet_nullable_int64_qi_stays_integer(tmp_path, writer):
    vals = [None if i % 10 == 2 else 20 + i for i in range(60)]
    src, out = tmp_path / "in.parquet", tmp_path / "out.csv"
    if writer == "pandas":
        pd.DataFrame({"age": pd.array(vals, dtype="Int64")}).to_parquet(src)
    else:
        pq.write_table(pa.table({"age": pa.array(vals, pa.int64())}), src)
    _anonymize(src, out, "--qi", "age", "--k", "5")
    pub = _texts(out)
    _check_ints(pub, vals, "age", "range")
    assert any("-" in c for c in pub["age"] if c)


# ---- item 7: means of integers beyond 2**53 ----------------------------------------------------------

@pytest.mark.parametrize("base,step,ext", [(-(2**62), 11, "csv"), (2**62, 3, "parquet")])
def test_exact_integer_means_inside_their_class(tmp_path, base, step, ext):
    rng = np.random.default_rng(7)
    n = 300
    ids = [base + step * int(i) for i in rng.integers(0, 40, n)]
    src = tmp_path / f"in.{ext}"
    df = pd.DataFrame({"acct": np.array(ids, dtype=np.int64), "age": rng.integers(20, 30, n)})
    df.to_csv(src, index=False) if ext == "csv" else df.to_parquet(src)
    out = tmp_path / "out.csv"
    _anonymize(src, out, "--qi", "acct,age", "--k", "3", "--format", "mean")
    pub = _texts(out)
    assert all(re.fullmatch(r"-?\d+", c) for c in pub["acct"]), pub["acct"].head()
    _means_inside(pub, pd.DataFrame({"acct": [str(v) for v in ids]}), ["acct", "age"], "acct", int)


def test_exact_integer_mean_is_the_rounded_rational():
    ids = np.array([2**62 + 1, 2**62 + 2, 2**62 + 2, 2**62 + 10, -(2**62)], dtype=np.int64)
    df = pd.DataFrame({"acct": ids})
    out = Mondrian(k=5, quasi_identifiers=["acct"], output_format="mean", backend="cpu",
                   progress=False).fit_transform(df)
    exact = Fraction(sum(int(v) for v in ids), len(ids))
    want = round(exact)  # Python rounds a Fraction half to even
    assert out["acct"].dtype == np.int64 and set(out["acct"].tolist()) == {want}


# ---- the property: random wide dates and nullable integers, CSV / Parquet in and out ----------------

_DATE = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(["range", "minmax", "mean"]),
       ext_in=st.sampled_from(["csv", "parquet"]), ext_out=st.sampled_from(["csv", "parquet"]))
def test_property_dates_and_nullable_integers(tmp_path, data, fmt, ext_in, ext_out):
    n = data.draw(st.integers(8, 40))
    pool = data.draw(st.lists(_DATE, min_size=1, max_size=6))
    days = [data.draw(st.sampled_from(pool)) for _ in range(n)]
    ints = data.draw(st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=n, max_size=n))
    ints[0] = ints[0] if ints[0] is not None else 7  # a column with at least one value
    k = data.draw(st.integers(2, 4))
    src = tmp_path / f"in_{fmt}_{ext_in}_{ext_out}.{ext_in}"
    iso = [d.isoformat() for d in days]
    if ext_in == "csv":
        src.write_text("d,n\n" + "".join(f"{a},{'' if b is None else b}\n" for a, b in zip(iso, ints)))
        df = load_table(src, types=ColumnTypes(checked={"d": "quasi-identifier", "n": "quasi-identifier"}))
    else:
        pq.write_table(pa.table({"d": pa.array(days, pa.date32()), "n": pa.array(ints, pa.int64())}), src)
        df = load_table(src)
    assert pd.api.types.is_integer_dtype(df["n"].dtype)
    out = Mondrian(k=k, quasi_identifiers=["d", "n"], output_format=fmt, backend="cpu", progress=False,
                   max_suppression=1.0).fit_transform(df)
    dst = tmp_path / f"out_{fmt}_{ext_in}.{ext_out}"
    write_table(out, dst)
    pub = _texts(dst)
    kept = [i for i in range(n)] if len(pub) == n else None
    if kept is None:  # rows were suppressed (a missing-value block under k): nothing to compare row by row
        return
    _check_dates(pub, iso, "d", fmt)
    _check_ints(pub, ints, "n", fmt)
    if fmt == "mean":
        _means_inside(pub, pd.DataFrame({"d": iso}), ["d", "n"], "d", str)
        _means_inside(pub, pd.DataFrame({"n": pd.Series(ints, dtype=object)}), ["d", "n"], "n", Fraction)
    if ext_out == "parquet":
        schema = pq.read_schema(dst)
        if fmt == "minmax":
            assert schema.field("d_min").type == pa.date32() and pa.types.is_integer(schema.field("n_min").type)
        if fmt == "mean":
            assert schema.field("d").type == pa.date32()


# ---- item 8: decimals ---------------------------------------------------------------------------------

def _dec_bounds(cell):
    m = re.fullmatch(r"\[(-?[\d.]+), (-?[\d.]+)\]", cell) or re.fullmatch(r"([\d.]+)-([\d.]+)", cell)
    return (Decimal(m.group(1)), Decimal(m.group(2))) if m else (Decimal(cell), Decimal(cell))


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_decimals_are_exact_numbers(tmp_path, fmt, ext):
    rng = np.random.default_rng(8)
    n = 60
    vals = [Decimal("12345678901234567.5") + Decimal(int(i)) / 2 for i in rng.integers(-40, 30, n)]
    src = tmp_path / f"in.{ext}"
    if ext == "parquet":
        pq.write_table(pa.table({"amt": pa.array(vals, pa.decimal128(20, 1)),
                                 "age": pa.array(rng.integers(20, 40, n))}), src)
    else:
        src.write_text("amt,age\n" + "".join(f"{v},{a}\n" for v, a in zip(vals, rng.integers(20, 40, n))))
    out = tmp_path / f"out.{ext}"
    r = _anonymize(src, out, "--qi", "amt,age", "--k", "5", "--format", fmt)
    assert "'amt' holds decimal numbers" in r.stderr, r.stderr  # says how the column was typed
    pub = _texts(out)
    assert len(pub) == n
    if fmt == "range":
        for v, cell in zip(vals, pub["amt"]):
            assert "e" not in cell.lower() and "|" not in cell, cell  # a number range, not a set
            lo, hi = _dec_bounds(cell)
            assert lo <= v <= hi, (v, cell)
    elif fmt == "minmax":
        for v, lo, hi in zip(vals, pub["amt_min"], pub["amt_max"]):
            assert Decimal(lo) <= v <= Decimal(hi), (v, lo, hi)
        if ext == "parquet":
            assert pa.types.is_decimal(pq.read_schema(out).field("amt_min").type)
    else:
        _means_inside(pub, pd.DataFrame({"amt": pd.Series(vals, dtype=object)}), ["amt", "age"], "amt", Decimal)
    if fmt != "mean":
        chk = subprocess.run(RUN + ["check", str(out), "--qi", "amt,age", "--k", "5", "--original", str(src)],
                             capture_output=True, text=True)
        assert chk.returncode == 0 and chk.stdout.strip().endswith("OK"), chk.stdout + chk.stderr


def test_containment_check_reads_wide_dates_and_decimals():
    from gpuanon.release.verify import cells_inside

    orig = pd.DataFrame({"d": pd.Series([dt.date(9999, 12, 31), dt.date(1, 1, 1)], dtype=object),
                         "x": pd.Series([Decimal("12345678901234567.5"), Decimal("-0.25")], dtype=object),
                         "n": pd.array([3, None], dtype="Int64")})
    good = pd.DataFrame({"d": ["0001-01-01..9999-12-31"] * 2, "x": ["[-0.25, 12345678901234567.5]"] * 2,
                         "n": ["3", None]})
    assert cells_inside(good, orig, ["d", "x", "n"]) == {"d": 0, "x": 0, "n": 0}
    bad = pd.DataFrame({"d": ["0001-01-01..9999-12-30"] * 2, "x": ["[-0.25, 12345678901234567.4]"] * 2,
                        "n": ["2-4", "1"]})
    assert cells_inside(bad, orig, ["d", "x", "n"]) == {"d": 1, "x": 1, "n": 1}


def test_whole_numbers_beyond_64_bits_stay_exact(tmp_path):
    """A CSV pass-through column of integers beyond 64 bits is written to Parquet as exact decimals
    (not rounded doubles) and to CSV as read; as a quasi-identifier it is refused in one line naming
    ``--categorical`` (it cannot be keyed exactly as a number)."""
    big = ["123456789012345678901", "-98765432109876543210", "18446744073709551617", "", "7", "8"]
    src = tmp_path / "in.csv"
    src.write_text("age,big\n" + "".join(f"{30 + i},{b}\n" for i, b in enumerate(big)))
    for ext in ("csv", "parquet"):
        out = tmp_path / f"out.{ext}"
        r = _anonymize(src, out, "--qi", "age", "--k", "2")
        assert r.returncode == 0, r.stderr
        if ext == "parquet":
            col = pq.read_table(out).column("big")
            assert pa.types.is_decimal(col.type)
            got = ["" if v is None else str(v) for v in col.to_pylist()]
        else:
            got = [row.split(",")[1].strip('"') for row in out.read_text().splitlines()[1:]]
        assert sorted(got) == sorted(big), got
    r = subprocess.run(RUN + ["anonymize", str(src), "--out", str(tmp_path / "q.csv"), "--qi", "age,big", "--k", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--categorical big" in r.stderr and not (tmp_path / "q.csv").exists(), r.stderr
    assert "Traceback" not in r.stderr
