"""What a new user hit on five real tables (issue 12): each defect and friction item, through the CLI."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expected import ROOT, one_error_line, run_cli
from gpuanon.datasets import load_table
from gpuanon.errors import InputError
from gpuanon.output.io import json_safe, write_json
from gpuanon.metrics import parse_numeric_cells


def _strict_json(path) -> dict:
    """JSON as browsers read it: NaN / Infinity are errors."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(Path(path).read_text(), parse_constant=refuse)


@pytest.fixture()
def table(tmp_path) -> Path:
    """60 rows: numeric and categorical QIs, a numeric sensitive column, a passenger."""
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.choice(list("abcdef"), n),
                       "income": rng.integers(1, 9, n) * 1000.0, "delay": rng.normal(10, 10, n).round(1),
                       "note": rng.choice(["x", "y"], n)})
    p = tmp_path / "in.csv"
    df.to_csv(p, index=False)
    return p


# ---------------------------------------------------------------------------- defect 1
@pytest.mark.slow
def test_out_naming_a_folder_is_one_line_error(table, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    err = one_error_line(run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--out", str(folder),
                                  cwd=tmp_path))
    assert "folder" in err and "name a file inside it" in err
    folder_csv = tmp_path / "results.csv"  # a folder whose name looks like a table
    folder_csv.mkdir()
    err = one_error_line(run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--out", str(folder_csv),
                                  cwd=tmp_path))
    assert "folder" in err
    err = one_error_line(run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--report", str(folder),
                                  cwd=tmp_path))
    assert "folder" in err
    assert folder.is_dir() and not any(folder.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["same", "relative", "dotted"])
def test_out_equal_to_the_input_is_refused_and_the_input_kept(table, tmp_path, spelling):
    before = table.read_bytes()
    out = {"same": str(table), "relative": "in.csv", "dotted": "./sub/../in.csv"}[spelling]
    (tmp_path / "sub").mkdir()
    err = one_error_line(run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--out", out,
                                  cwd=tmp_path))
    assert "input file" in err and "overwritten" in err and "--out" in err
    assert table.read_bytes() == before


@pytest.mark.slow
def test_other_commands_refuse_to_overwrite_their_input(table, tmp_path):
    before = table.read_bytes()
    err = one_error_line(run_cli("perturb", str(table), "--features", "age,income", "--centralized",
                                  "--out", str(table), cwd=tmp_path))
    assert "--out" in err and "input file" in err
    cfg = tmp_path / "job.toml"
    cfg.write_text(f'input = "{table}"\nqi = "age,zip"\nk = 3\nout = "{table}"\n')
    err = one_error_line(run_cli("anonymize", "--config", str(cfg), cwd=tmp_path))
    assert "input file" in err
    assert table.read_bytes() == before


# ---------------------------------------------------------------------------- defect 2
@pytest.mark.slow
def test_report_is_strict_json_with_missing_values(tmp_path):
    rng = np.random.default_rng(1)
    n = 40
    df = pd.DataFrame({"age": rng.integers(20, 60, n).astype(float), "zip": rng.choice(list("abc"), n),
                       "empty": np.nan, "sa": rng.choice(["x", "y", None], n),
                       "y": rng.choice([1.0, 2.0, np.nan], n)})
    p, out, rep = tmp_path / "m.csv", tmp_path / "o.csv", tmp_path / "r.json"
    df.to_csv(p, index=False)
    r = run_cli("anonymize", str(p), "--qi", "age,zip,empty", "--sensitive", "sa", "--target", "y", "--k", "4",
                "--out", str(out), "--report", str(rep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = rep.read_text()
    assert "NaN" not in text and "Infinity" not in text
    report = _strict_json(rep)
    assert report["n_rows_in"] == n


def test_write_json_turns_nan_and_inf_into_null(tmp_path):
    p = tmp_path / "r.json"
    write_json({"a": float("nan"), "b": [np.float32("inf"), -np.inf, 1.5], "c": {"d": pd.NA, np.int64(3): 4},
                "e": np.array([np.nan, 2.0])}, p)
    assert _strict_json(p) == {"a": None, "b": [None, None, 1.5], "c": {"d": None, "3": 4}, "e": [None, 2.0]}
    assert json_safe((1, np.bool_(True))) == [1, True]


# ---------------------------------------------------------------------------- defect 3
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=30))
def test_load_table_parses_every_float_exactly(tmp_path_factory, values):
    p = tmp_path_factory.mktemp("f") / "x.csv"
    p.write_text("x\n" + "\n".join(repr(v) for v in values) + "\n")
    got = load_table(p)["x"].to_numpy(dtype=np.float64)
    assert [float(v) for v in got] == [float(repr(v)) for v in values]


def _exact_column(path, col) -> list[float]:
    """The file's values parsed by Python's float(), independent of pandas."""
    lines = Path(path).read_text().splitlines()
    j = lines[0].split(",").index(col)
    return [float(ln.split(",")[j]) for ln in lines[1:]]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["minmax", "range"])
def test_every_value_lies_inside_its_published_interval(tmp_path, fmt):
    rng = np.random.default_rng(3)
    n = 3000
    x = rng.uniform(1, 100, n) * 10.0 ** rng.integers(-3, 4, n)  # 17 significant digits, many magnitudes
    y = rng.uniform(0, 1, n)
    p = tmp_path / "f.csv"
    with open(p, "w") as f:
        f.write("x,y,g\n")
        for a, b, g in zip(x, y, rng.choice(list("ab"), n)):
            f.write(f"{float(a)!r},{float(b)!r},{g}\n")
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(p), "--qi", "x,y", "--k", "2", "--format", fmt, "--max-suppression", "0",
                "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pub = pd.read_csv(out, float_precision="round_trip", dtype={"x": str, "y": str} if fmt == "range" else None)
    assert len(pub) == n  # rows and order kept
    for col in ("x", "y"):
        exact = np.array(_exact_column(p, col))
        if fmt == "minmax":
            lo, hi = pub[f"{col}_min"].to_numpy(), pub[f"{col}_max"].to_numpy()
        else:
            lo, hi = parse_numeric_cells(pub[col])
        outside = int(((exact < lo) | (exact > hi)).sum())
        assert outside == 0, f"{outside} of {n} values of {col} lie outside their interval"


# ---------------------------------------------------------------------------- defect 5 and 6
@pytest.mark.slow
def test_entirely_missing_qi_is_warned_with_how_it_was_treated(table, tmp_path):
    df = pd.read_csv(table).assign(blank=np.nan, blank2=np.nan, blank3=np.nan)
    p, rep = tmp_path / "b.csv", tmp_path / "r.json"
    df.to_csv(p, index=False)
    r = run_cli("anonymize", str(p), "--qi", "age,zip,blank,blank2,blank3", "--numeric", "blank2",
                "--categorical", "blank3", "--k", "3", "--report", str(rep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warn = {re.search(r"'(\w+)'", ln).group(1): ln for ln in r.stderr.splitlines() if "entirely missing" in ln}
    assert set(warn) == {"blank", "blank2", "blank3"}, r.stderr
    # an empty CSV column reads as numbers: the warning says so and how to declare it categorical
    assert "treated as numeric" in warn["blank"] and "--categorical blank " in warn["blank"]
    assert "treated as numeric:" in warn["blank2"] and "--categorical" not in warn["blank2"]
    assert "treated as categorical" in warn["blank3"]
    assert all("drop it from --qi" in w for w in warn.values())
    kinds = _strict_json(rep)["roles"]["kinds"]
    assert (kinds["blank"], kinds["blank2"], kinds["blank3"]) == ("numeric", "numeric", "categorical")


@pytest.mark.slow
def test_identifier_like_qi_is_warned(table, tmp_path):
    df = pd.read_csv(table)
    df.insert(0, "patient_id", np.arange(1000, 1000 + len(df)))
    df["code"] = [f"c{i}" for i in range(len(df))]
    p = tmp_path / "id.csv"
    df.to_csv(p, index=False)
    r = run_cli("anonymize", str(p), "--qi", "patient_id,code,age,zip,delay", "--k", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warn = [ln for ln in r.stderr.splitlines() if "looks like an identifier" in ln]
    assert {re.search(r"'(\w+)'", w).group(1) for w in warn} == {"patient_id", "code"}, r.stderr
    assert all("--identifiers" in w for w in warn)


# ---------------------------------------------------------------------------- defect 7
@pytest.mark.slow
def test_default_t_distance_is_ordered_for_a_numeric_sensitive_attribute(table, tmp_path):
    rep = tmp_path / "r.json"
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(table), "--qi", "age,zip", "--sensitive", "income", "--k", "3", "--t", "0.3",
                "--out", str(out), "--report", str(rep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = _strict_json(rep)
    assert report["requested"]["t_distance"] == "auto"
    assert report["achieved"]["t_distance"] == "ordered"
    # the independent check resolves 'auto' the same way
    c = run_cli("check", str(out), "--qi", "age,zip", "--sensitive", "income", "--k", "3", "--t", "0.3",
                "--original", str(table), cwd=tmp_path)
    assert c.returncode == 0 and "ordered" in c.stdout, c.stdout + c.stderr
    r = run_cli("anonymize", str(table), "--qi", "age,zip", "--sensitive", "note", "--k", "3", "--t", "0.3",
                "--report", str(rep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _strict_json(rep)["achieved"]["t_distance"] == "equal"
    c = run_cli("check", str(out), "--qi", "age,zip", "--k", "3", cwd=tmp_path)  # no sensitive attribute
    assert c.returncode == 0 and "Traceback" not in c.stderr, c.stderr
    assert "achieved k=" in c.stdout and "l=" not in c.stdout and "t=" not in c.stdout


def test_mondrian_resolves_auto_at_fit():
    from gpuanon import Mondrian

    df = pd.DataFrame({"a": np.arange(40) % 10, "s": np.arange(40) % 7})
    m = Mondrian(k=4, t=0.5, quasi_identifiers=["a"], sensitive="s", backend="cpu", progress=False)
    assert m.t_distance == "auto"
    m.fit_transform(df)
    assert m.criteria_.t_distance == "ordered" and m.report_["achieved"]["t_distance"] == "ordered"
    m = Mondrian(k=4, t=0.5, quasi_identifiers=["a"], sensitive="s", sensitive_ordered=False, backend="cpu",
                 progress=False).fit(df)
    assert m.criteria_.t_distance == "equal"


# ---------------------------------------------------------------------------- defect 8
@pytest.mark.slow
def test_recursive_cl_error_names_a_larger_c(tmp_path):
    df = pd.DataFrame({"age": np.arange(30), "dx": ["flu"] * 20 + ["hiv"] * 6 + ["tb"] * 4})
    p = tmp_path / "r.csv"
    df.to_csv(p, index=False)
    err = one_error_line(run_cli("anonymize", str(p), "--qi", "age", "--sensitive", "dx", "--k", "2", "--l", "2",
                                  "--l-kind", "recursive", "--c", "1", cwd=tmp_path))
    assert "raise c above 2" in err and "--c 3" in err and "another sensitive attribute" not in err
    r = run_cli("anonymize", str(p), "--qi", "age", "--sensitive", "dx", "--k", "2", "--l", "2",
                "--l-kind", "recursive", "--c", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # the remedy the message names works


# ---------------------------------------------------------------------------- defect 9 and 10
def _bad_files(tmp_path) -> dict:
    files = {}
    files["empty"] = tmp_path / "empty.csv"
    files["empty"].write_bytes(b"")
    files["latin"] = tmp_path / "latin.csv"
    files["latin"].write_bytes("age,city\n30,Malm\xf6\n31,K\xf6ln\n".encode("latin-1"))
    files["parquet"] = tmp_path / "data.csv"
    pd.DataFrame({"a": [1, 2]}).to_parquet(files["parquet"])
    files["truncated"] = tmp_path / "t.csv.gz"
    blob = gzip.compress(b"a,b\n" + b"1,2\n" * 20000)
    files["truncated"].write_bytes(blob[: len(blob) // 2])
    files["corrupt"] = tmp_path / "c.parquet"
    files["corrupt"].write_bytes(b"this is not parquet")
    return files


@pytest.mark.slow
@pytest.mark.parametrize("kind, words", [
    ("empty", ["empty (0 bytes)"]),
    ("latin", ["not valid utf-8", "--encoding latin-1"]),
    ("parquet", ["Parquet file, not a CSV", "rename it to .parquet"]),
    ("truncated", ["truncated"]),
    ("corrupt", ["not a Parquet file, or a truncated one"]),
])
def test_read_errors_say_what_is_wrong(tmp_path, kind, words):
    path = _bad_files(tmp_path)[kind]
    err = one_error_line(run_cli("anonymize", str(path), "--qi", "age", "--k", "2", cwd=tmp_path))
    for w in words:
        assert w in err, err
    assert "check the path" not in err


@pytest.mark.slow
def test_encoding_option_reads_latin1(tmp_path):
    path = _bad_files(tmp_path)["latin"]
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(path), "--qi", "age,city", "--k", "2", "--encoding", "latin-1",
                "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Malmö" in out.read_text(encoding="utf-8")
    err = one_error_line(run_cli("anonymize", str(path), "--qi", "age", "--k", "2", "--encoding", "klingon",
                                  cwd=tmp_path))
    assert "--encoding 'klingon'" in err


@pytest.mark.slow
def test_duplicate_headers_are_refused_with_their_names(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("age,zip,age,dx,dx\n1,a,2,x,y\n")
    err = one_error_line(run_cli("anonymize", str(p), "--qi", "zip", "--k", "2", cwd=tmp_path))
    assert "'age' (columns 1, 3)" in err and "'dx' (columns 4, 5)" in err and "rename" in err
    with pytest.raises(InputError, match="appear more than once"):
        load_table(p)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["a", "a"]), tmp_path / "d.pq")
    with pytest.raises(InputError, match=r"'a' \(columns 1, 2\)"):
        load_table(tmp_path / "d.pq")


# ---------------------------------------------------------------------------- defect 11
@pytest.mark.slow
def test_perturb_names_the_columns_it_leaves_out(table, tmp_path):
    out, rep = tmp_path / "p.csv", tmp_path / "p.json"
    r = run_cli("perturb", str(table), "--features", "age,income", "--label", "note", "--centralized",
                "--out", str(out), "--report", str(rep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stderr.splitlines() if "left out of the output" in ln]
    assert len(line) == 1 and "zip, delay" in line[0] and "--passengers" in line[0], r.stderr
    assert _strict_json(rep)["dropped_columns"] == ["zip", "delay"]
    assert set(pd.read_csv(out).columns) == {"age", "income", "note"}


# ---------------------------------------------------------------------------- defect 12
@pytest.mark.slow
def test_summary_line_names_only_what_was_asked(table, tmp_path):
    r = run_cli("anonymize", str(table), "--qi", "zip", "--k", "60", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stderr.splitlines() if "rows in" in ln][0]
    assert "None" not in line and "t=-" not in line and "l=" not in line
    assert "1 class," in line and "1 classes" not in line and "(k = 60 asked)" in line
    r = run_cli("anonymize", str(table), "--qi", "age,zip", "--sensitive", "note", "--k", "3", "--l", "2",
                cwd=tmp_path)
    line = [ln for ln in r.stderr.splitlines() if "rows in" in ln][0]
    assert "(l = 2 asked)" in line and "t = " not in line


# ---------------------------------------------------------------------------- friction
@pytest.mark.slow
def test_target_expr_derives_a_binary_target(table, tmp_path):
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    r = run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--target-expr", "delay > 15",
                "--target", "late", "--out", str(out), "--report", str(rep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    src = pd.read_csv(table)
    got = pd.read_csv(out)
    assert got["late"].tolist() == (src["delay"] > 15).tolist()
    assert _strict_json(rep)["roles"]["target"] == "late"


@pytest.mark.slow
@pytest.mark.parametrize("expr, words", [
    ("delai > 15", ["cannot be evaluated", "delai"]),
    ("delay >", ["cannot be evaluated"]),
    ("late = delay > 15", ["no '='"]),
    ("delay.__class__", ["'__'"]),
    ("15", ["not one value per row"]),
])
def test_target_expr_errors_are_one_line(table, tmp_path, expr, words):
    err = one_error_line(run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--target-expr", expr,
                                  cwd=tmp_path))
    assert "--target-expr" in err
    for w in words:
        assert w in err, err


@pytest.mark.slow
def test_target_expr_keeps_missing_values_missing(tmp_path):
    p = tmp_path / "m.csv"
    pd.DataFrame({"age": np.arange(12), "delay": [1.0, 20, None] * 4}).to_csv(p, index=False)
    out = tmp_path / "o.csv"
    r = run_cli("anonymize", str(p), "--qi", "age", "--k", "3", "--target-expr", "delay > 15", "--out", str(out),
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "4 row(s) have a missing value in delay" in r.stderr
    assert pd.read_csv(out)["target"].isna().sum() == 4


def _adult_sample(tmp_path, rows=1200, gaps=False) -> Path:
    from gpuanon.datasets import load_adult

    df = load_adult().sample(rows, random_state=0).reset_index(drop=True)
    if gaps:
        df.loc[:4, "fnlwgt"] = np.nan
    p = tmp_path / "adult.csv"
    df.to_csv(p, index=False)
    return p


@pytest.mark.slow
def test_evaluate_says_the_backend_once(tmp_path):
    p = _adult_sample(tmp_path)
    r = run_cli("evaluate", str(p), "--qi", "age,education,race", "--target", "income",
                "--protections", "raw;k=3;k=5;distpab", "--models", "nb", "--out", str(tmp_path / "e.csv"),
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("gpuanon: backend ")]) == 1, r.stderr


@pytest.mark.slow
def test_evaluate_takes_target_expr(tmp_path):
    p = _adult_sample(tmp_path)
    out = tmp_path / "e.csv"
    r = run_cli("evaluate", str(p), "--qi", "age,education,race", "--target-expr", "`hours-per-week` > 40",
                "--protections", "raw;k=3", "--models", "nb", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert set(pd.read_csv(out)["protection"]) == {"raw", "k=3"}
    assert _strict_json(tmp_path / "e.json")["config"]["target"] == "target"


@pytest.mark.slow
def test_evaluate_validates_every_protection_before_running_any(tmp_path):
    p = _adult_sample(tmp_path, gaps=True)
    for prots, words in (("raw;k=3;distpab", ["distpab", "fnlwgt (5 missing)"]),
                         ("raw;k=3;k=3,t_distance=hamming", ["k=3,t_distance=hamming", "hamming"]),
                         ("raw;k=3;k=3,l=9", ["l = 9"])):
        r = run_cli("evaluate", str(p), "--qi", "age,education,race", "--target", "income", "--protections", prots,
                    "--models", "nb", "--out", str(tmp_path / "e.csv"), cwd=tmp_path)
        err = one_error_line(r)
        for w in words:
            assert w in err, err
        assert "protection raw:" not in r.stderr and "protection k=3:" not in r.stderr  # nothing ran


def test_readme_main_command_writes_into_an_ignored_folder():
    readme = (ROOT / "README.md").read_text()
    cmd = re.search(r"<!-- main-command -->\s*```\n(.*?)\n```", readme, re.S).group(1)
    ignored = [ln.strip().rstrip("/") for ln in (ROOT / ".gitignore").read_text().splitlines() if ln.strip()]
    outs = re.findall(r"--(?:out|report) (\S+)", cmd)
    assert outs and all(Path(o).parts[0] in ignored for o in outs), outs
    folder = Path(outs[0]).parent
    assert f"mkdir -p {folder}" in cmd
    assert "SPEC.md" not in readme  # the contract is not in the repository; docs/ is
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link


def test_summary_line_plurals_and_distance():
    from gpuanon.cli import summary_line

    rep = {"n_rows_in": 5, "n_rows_out": 4, "n_suppressed": 1, "n_classes": 2,
           "requested": {"k": 2, "l": 0, "t": 0.25, "t_distance": "auto"},
           "achieved": {"k": 2, "l": 2, "t": 0.125, "t_distance": "ordered"}}
    line = summary_line(rep)
    assert line.startswith("5 rows in, 4 out, 1 suppressed; 2 classes")
    assert "0.1250 (ordered, t = 0.25 asked)" in line and "l = " not in line
