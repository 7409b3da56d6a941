"""A value is published as it was read, or not at all (issue 21 rows 1, 2, 7; SPEC section 1).

CSV input is read as text and typed by explicit rules: leading zeros keep a column as text, only
empty cells are missing unless ``--na-values`` names more, a quasi-identifier mixing numbers and text
is refused, pass-through columns are written back with the same characters, ISO dates are dates.
The expected cells are written by hand here and compared with Python's ``csv`` module's reading of the
input and output files (an independent parser).
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from expected import one_error_line, run_cli
from gpuanon.datasets import load_table
from gpuanon.errors import InputError


def _cells(path) -> dict:
    """Each column's field text as Python's csv module reads the file (gzip not used here)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return {name: [r[i] for r in rows[1:]] for i, name in enumerate(rows[0])}


def _write(path, header, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture()
def people(tmp_path):
    """12 rows: a numeric age, zips with leading zeros, a country with the code NA, a sensitive
    diagnosis, pass-through code (leading zeros, NA-like text) and note."""
    ages = [31, 32, 33, 34, 35, 36, 51, 52, 53, 54, 55, 56]
    zips = ["00501", "02139", "00501", "02139", "00501", "02139"] * 2
    country = ["NA", "US", "NA", "US", "", "NA"] * 2
    diag = ["flu", "cold", "flu", "cold", "asthma", "flu"] * 2
    code = ["0012", "1.50", "NA", "1e3", "None", "0"] * 2
    note = ["None", "null", "n/a", "yes", "NaN", ""] * 2
    rows = list(zip(ages, zips, country, diag, code, note))
    p = tmp_path / "people.csv"
    _write(p, ["age", "zip", "country", "diagnosis", "code", "note"], rows)
    return p


def test_leading_zeros_kept_in_qi_and_pass_through(people, tmp_path):
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(people), "--qi", "age,zip", "--categorical", "zip", "--sensitive", "diagnosis",
                "--k", "3", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got, src = _cells(out), _cells(people)
    assert got["code"] == src["code"]  # 0012 stays 0012, 1.50 stays 1.50, 1e3 stays 1e3
    zips = {z for cell in got["zip"] for z in cell.split("|")}
    assert zips <= {"00501", "02139"} and zips
    # without --categorical the zips are still codes (text), never numeric ranges such as 501-2139
    r = run_cli("anonymize", str(people), "--qi", "age,zip", "--sensitive", "diagnosis", "--k", "3",
                "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    zips = {z for cell in _cells(out)["zip"] for z in cell.split("|")}
    assert zips <= {"00501", "02139"} and zips


def test_numeric_declares_leading_zero_codes_numbers(people, tmp_path):
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(people), "--qi", "age,zip", "--numeric", "zip", "--sensitive", "diagnosis",
                "--k", "3", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert set(_cells(out)["zip"]) <= {"501-2139", "501", "2139"}
    df = load_table(people, types=__import__("gpuanon.datasets", fromlist=["ColumnTypes"]).ColumnTypes(
        numeric={"zip"}))
    assert df["zip"].dtype == np.int64 and df["zip"].tolist()[:2] == [501, 2139]
    assert df["code"].dtype == object or pd.api.types.is_string_dtype(df["code"])


def test_na_like_text_is_a_value_unless_named(people, tmp_path):
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(people), "--qi", "age,country", "--sensitive", "diagnosis", "--k", "3",
                "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got, src = _cells(out), _cells(people)
    assert got["note"] == src["note"] and got["code"] == src["code"]  # None, null, n/a, NaN, NA: values
    assert "missing cells: quasi-identifiers 2 (country 2); pass-through 2 (note 2)" in r.stderr
    # the country code NA is a value of its own, never merged with the two empty cells
    published = [set(c.split("|")) if c else set() for c in got["country"]]
    na_rows = [i for i, c in enumerate(src["country"]) if c == "NA"]
    assert all("NA" in published[i] for i in na_rows)
    df = load_table(people)
    assert int(df["country"].isna().sum()) == 2 and int((df["country"] == "NA").sum()) == 6
    # with --na-values NA the code is missing, in every column
    r = run_cli("anonymize", str(people), "--qi", "age,country", "--sensitive", "diagnosis", "--k", "3",
                "--na-values", "NA,n/a", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "missing cells: quasi-identifiers 8 (country 8); pass-through 6 (code 2, note 4)" in r.stderr
    got = _cells(out)
    assert all("NA" not in c.split("|") for c in got["country"])
    assert got["code"] == ["" if c == "NA" else c for c in src["code"]]
    assert got["note"] == ["" if c == "n/a" else c for c in src["note"]]


def test_qi_of_numbers_and_text_is_refused(tmp_path):
    ages = ["31", "thirty", "33", "45 years", "35", "36", "51", "52", "thirty", "54", "55", "56"]
    p = tmp_path / "ages.csv"
    _write(p, ["age", "sex", "diagnosis"], [(a, "FM"[i % 2], "xy"[i % 3 == 0]) for i, a in enumerate(ages)])
    err = one_error_line(run_cli("anonymize", str(p), "--qi", "age,sex", "--k", "3", "--out", str(tmp_path / "o.csv"),
                                 cwd=tmp_path))
    assert "quasi-identifier 'age'" in err and "'thirty'" in err and "'45 years'" in err
    assert "(3 cells)" in err and "--categorical age" in err
    assert not (tmp_path / "o.csv").exists()
    err = one_error_line(run_cli("anonymize", str(p), "--qi", "sex", "--sensitive", "age", "--k", "3", cwd=tmp_path))
    assert "sensitive attribute 'age'" in err
    # declared text, the ages are categories published as read
    r = run_cli("anonymize", str(p), "--qi", "age,sex", "--categorical", "age", "--k", "2",
                "--out", str(tmp_path / "o.csv"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {"thirty", "45 years"} <= {v for c in _cells(tmp_path / "o.csv")["age"] for v in c.split("|")}
    # a pass-through column of numbers and text simply stays text
    df = load_table(p)
    assert list(df["age"]) == ages


def test_numeric_option_refuses_text_cells(tmp_path):
    p = tmp_path / "t.csv"
    _write(p, ["age", "sex"], [("31", "F"), ("n/k", "M"), ("33", "F")])
    r = run_cli("check", str(p), "--qi", "age", "--k", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # check reads a published table: generalized cells are text
    err = one_error_line(run_cli("anonymize", str(p), "--qi", "age,sex", "--numeric", "age", "--k", "1",
                                 cwd=tmp_path))
    assert "--numeric age" in err and "'n/k' (1 cell)" in err and "declared numeric" in err


_AWKWARD = ["0012", "1.50", "1e3", "NA", "", 'say "hi"', "a,b", "naïve ☃", " lead", "trail ", "-0", "007.50",
            "TRUE", "2020-01-31", "null", "1,000", "+5", "0x1F", "line\nbreak", "None"]


@pytest.mark.parametrize("quotes_needed", [True, False])
def test_pass_through_cells_written_as_read(tmp_path, quotes_needed):
    """CSV -> CSV: every pass-through cell has the same characters in the output as in the input."""
    awkward = _AWKWARD if quotes_needed else [c for c in _AWKWARD if not any(ch in c for ch in '",\n')]
    rng = np.random.default_rng(3)
    n, n_cols = 60, 8
    header = ["age", "sex"] + [f"p{j}" for j in range(n_cols)]
    rows = [[str(20 + i % 40), "FM"[i % 2]] + [awkward[(i * (j + 3) + j) % len(awkward)] for j in range(n_cols)]
            for i in range(n)]
    rng.shuffle(rows)
    p = tmp_path / "awkward.csv"
    _write(p, header, rows)
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(p), "--qi", "age,sex", "--k", "4", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got, src = _cells(out), _cells(p)
    for j in range(n_cols):
        assert got[f"p{j}"] == src[f"p{j}"], j
    text = out.read_text(encoding="utf-8")
    assert text.startswith("age,sex,p0") != quotes_needed  # text is quoted only where some cell must be
    if not quotes_needed:
        assert '"' not in text


def test_iso_dates_become_datetimes(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("day,at,zoned,mixed,nodate,code\n"
                 "2020-01-31,2020-01-31T08:15:00,2020-01-31T08:15Z,2020-01-31,2020-13-45x,1\n"
                 "2021-12-01,2021-12-01 23:59:59.5,2021-12-01T23:59+02:00,31/01/2020,x,2\n"
                 ",,,,,3\n")
    df = load_table(p)
    # days are dates (any year 0001-9999), date-times nanosecond timestamps
    import datetime as dt  # noqa: PLC0415

    assert df["day"].dtype == object and df["at"].dtype == "datetime64[ns]"
    assert df["day"].tolist()[:2] == [dt.date(2020, 1, 31), dt.date(2021, 12, 1)]
    assert df["day"].iloc[2] is None
    assert df["at"].iloc[1] == pd.Timestamp("2021-12-01 23:59:59.5")
    assert str(df["zoned"].dtype) == "datetime64[ns, UTC]"
    assert df["zoned"].iloc[1] == pd.Timestamp("2021-12-01T21:59Z")
    assert not pd.api.types.is_datetime64_any_dtype(df["mixed"]) and df["mixed"].iloc[1] == "31/01/2020"
    assert df["code"].dtype == np.int64
    from gpuanon.datasets import ColumnTypes

    with pytest.raises(InputError, match=r"--dates mixed: .*'31/01/2020' \(1 cell\)"):
        load_table(p, types=ColumnTypes(dates={"mixed"}))
    err = one_error_line(run_cli("check", str(p), "--qi", "code", "--dates", "nodate", "--k", "1", cwd=tmp_path))
    assert "--dates nodate" in err


def test_integers_exact_and_missing_counted_by_reader(tmp_path):
    p = tmp_path / "i.csv"
    p.write_text("a,b,c,d,e,f\n9007199254740993,18446744073709551615,1,+3,-0.5,9007199254740993\n"
                 "-9223372036854775808,1,,4,1e3,\n")
    df = load_table(p)
    assert df["a"].dtype == np.int64 and df["a"].iloc[0] == 9007199254740993
    assert df["b"].dtype == np.uint64 and df["b"].iloc[0] == 2 ** 64 - 1
    assert df["c"].dtype == np.float64 and np.isnan(df["c"].iloc[1])
    assert df["d"].tolist() == [3, 4] and df["e"].tolist() == [-0.5, 1000.0]
    # beyond 2^53 beside a missing cell: pandas' nullable integers, not a rounded double
    assert int(df["f"].iloc[0]) == 9007199254740993 and pd.isna(df["f"].iloc[1])


def test_sep_for_attack_and_federate(tmp_path):
    r = run_cli("attack", "--help", cwd=tmp_path)
    assert "--sep" in r.stdout and "--na-values" in r.stdout
    r = run_cli("federate", "--help", cwd=tmp_path)
    assert "--sep" in r.stdout
    from gpuanon.federated.experiment import load_frame
    from gpuanon.federated.run import make_config

    p = tmp_path / "s.csv"
    p.write_text("x;y;label\n1;2;a\n3;4;b\n")
    cfg = make_config(None, str(p), target="label", sep=";")
    assert list(load_frame(cfg).columns) == ["x", "y", "label"]


def test_na_values_and_dates_for_federate(tmp_path, monkeypatch, capsys):
    """``federate --na-values`` and ``--dates`` mean what they mean for every other command: the
    experiment carries them to every reader of the CSV (the whole table, a silo's file, the test rows)."""
    from gpuanon.cli import main
    from gpuanon.federated import run as fed_run
    from gpuanon.federated.experiment import load_frame, silo_rows, test_rows

    r = run_cli("federate", "--help", cwd=tmp_path)
    assert "--na-values" in r.stdout and "--dates" in r.stdout
    p = tmp_path / "s.csv"
    p.write_text("x;when;label\nNA;2020-01-31;a\n3;soon;b\n")
    got = {}

    def fake_run(cfg, **kw):  # the configuration the command made; no Flower run
        got["cfg"] = cfg
        return {"final": dict.fromkeys(("accuracy", "precision", "recall", "f1"), 0.0), "seconds": 0.0}

    monkeypatch.setattr(fed_run, "run_federated", fake_run)
    assert main(["federate", str(p), "--target", "label", "--sep", ";", "--na-values", "NA,n/a", "-q"]) == 0
    cfg = got["cfg"]
    assert cfg["na_values"] == ["NA", "n/a"] and cfg["dates"] == []
    df = load_frame(cfg)
    assert df["x"].isna().tolist() == [True, False] and df["x"].dtype == np.float64  # NA is missing: x is numeric
    assert df["when"].tolist() == ["2020-01-31", "soon"]  # not every cell a date: text
    assert load_frame(dict(cfg, na_values=[]))["x"].tolist() == ["NA", "3"]  # without it NA is a value
    assert silo_rows(cfg, {"silo": 0, "data-path": str(p)})[1]["x"].isna().tolist() == [True, False]
    assert test_rows(dict(cfg, test_path=str(p)))["x"].isna().tolist() == [True, False]
    assert main(["federate", str(p), "--target", "label", "--sep", ";", "--dates", "when", "-q"]) == 0
    assert got["cfg"]["dates"] == ["when"]
    with pytest.raises(InputError, match="--dates when: column 'when' has cells that are not ISO dates"):
        load_frame(got["cfg"])
    capsys.readouterr()
    assert main(["federate", "--dataset", "adult", "--na-values", "NA", "-q"]) == 2  # as every command
    assert "--na-values applies to a CSV / TSV input file, not to --dataset" in capsys.readouterr().err
    pq = tmp_path / "s.parquet"
    load_frame(cfg).to_parquet(pq)
    assert main(["federate", str(pq), "--target", "label", "--dates", "when", "-q"]) == 2
    assert "--dates applies to CSV / TSV input" in capsys.readouterr().err


def test_header_and_cells_of_a_text_first_read(tmp_path):
    """Leading spaces are read past in numbers and header names; text keeps them (a cell of blanks only is
    missing); a pass-through keeps them."""
    from gpuanon.datasets import ColumnTypes

    p = tmp_path / "s.csv"
    p.write_text("a, b, c\n1, x, y\n 2, ,z\n")
    df = load_table(p)
    assert list(df.columns) == ["a", "b", "c"] and df["b"].iloc[0] == " x" and pd.isna(df["b"].iloc[1])
    assert df["a"].tolist() == [1, 2]
    df = load_table(p, types=ColumnTypes(as_read={"c"}))
    assert df["c"].tolist() == [" y", "z"]
    buf = io.StringIO()
    df.to_csv(buf, index=False)


def test_parquet_output_types_pass_through_by_the_rules(people, tmp_path):
    """CSV -> Parquet: pass-through columns typed by the reader's rules (numbers as numbers, codes with
    leading zeros and NA-like text as text)."""
    src = _cells(people)
    df = pd.read_csv(people, dtype=str, keep_default_na=False)
    df["amount"] = [f"{i}.25" for i in range(len(df))]
    df.to_csv(people, index=False)
    out = tmp_path / "o.parquet"
    r = run_cli("anonymize", str(people), "--qi", "age,zip", "--sensitive", "diagnosis", "--k", "3",
                "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = pd.read_parquet(out)
    assert got["amount"].dtype == np.float64 and got["amount"].iloc[1] == 1.25
    assert got["code"].tolist() == src["code"]
