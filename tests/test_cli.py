"""The command line, through a subprocess: outputs, reports, config files and every input error."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
ADULT_QI = "age,workclass,education,education-num,marital-status,occupation,relationship,race,gender,native-country"


def run(*args, cwd=None):
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_anonymize_adult_writes_verified_csv_and_report(tmp_path):
    out, rep = tmp_path / "a.csv", tmp_path / "a.json"
    r = run("anonymize", "--dataset", "adult", "--k", "10", "--out", str(out), "--report", str(rep))
    assert r.returncode == 0, r.stderr
    assert "backend cpu" in r.stderr
    report = json.loads(rep.read_text())
    for key in ("backend", "n_rows_in", "n_rows_out", "n_suppressed", "n_classes", "achieved", "seconds"):
        assert key in report
    assert set(report["achieved"]) >= {"k", "l", "t"}
    assert set(report["seconds"]) >= {"read", "encode", "partition", "generalize", "verify", "write", "total"}
    assert report["achieved"]["k"] >= 10
    assert report["n_rows_in"] == report["n_rows_out"] + report["n_suppressed"] == 32561
    df = pd.read_csv(out)
    assert len(df) == report["n_rows_out"]
    # the independent checker agrees, and fails a stricter request with exit status 1
    ok = run("check", str(out), "--qi", ADULT_QI, "--sensitive", "income", "--k", "10")
    assert ok.returncode == 0 and "OK" in ok.stdout
    bad = run("check", str(out), "--qi", ADULT_QI, "--sensitive", "income", "--k", "10000")
    assert bad.returncode == 1 and "NOT MET" in bad.stdout


@pytest.mark.slow
def test_parquet_minmax_l_and_t_from_config(tmp_path):
    cfg = tmp_path / "job.toml"
    out = tmp_path / "o.parquet"
    cfg.write_text(f'dataset = "adult"\nk = 5\nl = 2\nt = 0.3\nformat = "minmax"\nout = "{out}"\n')
    r = run("anonymize", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    df = pd.read_parquet(out)
    assert {"age_min", "age_max"} <= set(df.columns) and "age" not in df.columns
    from gpuanon.datasets import load_adult

    orig = tmp_path / "adult.csv"  # the table it was made from (an original of other columns is refused)
    load_adult().to_csv(orig, index=False)
    c = run("check", str(out), "--qi", ADULT_QI, "--sensitive", "income", "--k", "5", "--l", "2", "--t", "0.3",
            "--original", str(orig))
    assert c.returncode == 0, c.stdout + c.stderr


@pytest.mark.slow
def test_options_override_config(tmp_path):
    cfg = tmp_path / "job.toml"
    cfg.write_text('dataset = "adult"\nk = 5\n')
    rep = tmp_path / "r.json"
    r = run("anonymize", "--config", str(cfg), "--k", "20", "--report", str(rep))
    assert r.returncode == 0, r.stderr
    assert json.loads(rep.read_text())["achieved"]["k"] >= 20


@pytest.fixture()
def small_csv(tmp_path):
    p = tmp_path / "in.csv"
    pd.DataFrame({"age": [30, 31, 32, 40, 41, 42], "zip": list("aabbcc"),
                  "dx": ["x", "y", "x", "y", "x", "y"]}).to_csv(p, index=False)
    return p


@pytest.mark.slow
@pytest.mark.parametrize("args, words", [
    (["--qi", "agee,zip", "--k", "2"], ["'agee'", "did you mean 'age'"]),
    (["--qi", "age,zip", "--k", "1"], ["k must be an integer >= 2"]),
    (["--qi", "age,zip", "--k", "7"], ["larger than the table", "k <= 6"]),
    (["--qi", "age,zip", "--sensitive", "dx", "--k", "2", "--l", "3"], ["whole table", "lower l"]),
    (["--qi", "age,zip", "--numeric", "zip", "--k", "2"], ["'zip'", "declared numeric", "categorical"]),
    (["--qi", "age,zip", "--k", "2", "--t", "0.2"], ["sensitive attribute", "--sensitive"]),
])
def test_input_errors_exit_2_one_line_nothing_written(small_csv, tmp_path, args, words):
    out = tmp_path / "out.csv"
    r = run("anonymize", str(small_csv), *args, "--out", str(out))
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and "Traceback" not in r.stderr
    for w in words:
        assert w in err[0], err[0]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.csv")]


@pytest.mark.slow
def test_empty_table_and_unreadable_file(tmp_path):
    empty = tmp_path / "e.csv"
    empty.write_text("age,zip\n")
    r = run("anonymize", str(empty), "--qi", "age,zip", "--k", "2")
    assert r.returncode == 2 and "empty" in r.stderr and "Traceback" not in r.stderr
    r = run("anonymize", str(tmp_path / "nope.csv"), "--qi", "age", "--k", "2")
    assert r.returncode == 2 and "cannot read input file" in r.stderr
    r = run("anonymize", "--dataset", "adult", "--k", "3", "--out", str(tmp_path / "x.xlsx"))
    assert r.returncode == 2 and "unknown extension" in r.stderr


@pytest.mark.slow
def test_suppression_budget(tmp_path):
    p = tmp_path / "m.csv"
    df = pd.DataFrame({"age": [30.0, 31, 32, 40, 41, 42, None], "zip": list("aabbccd")})
    df.to_csv(p, index=False)
    r = run("anonymize", str(p), "--qi", "age,zip", "--k", "2", "--out", str(tmp_path / "o.csv"))
    assert r.returncode == 2 and "suppressed" in r.stderr and "--max-suppression" in r.stderr
    rep = tmp_path / "r.json"
    r = run("anonymize", str(p), "--qi", "age,zip", "--k", "2", "--max-suppression", "0.2",
            "--out", str(tmp_path / "o.csv"), "--report", str(rep))
    assert r.returncode == 0, r.stderr
    report = json.loads(rep.read_text())
    assert report["n_suppressed"] == 1 and report["n_rows_out"] == 6
    assert len(pd.read_csv(tmp_path / "o.csv")) == 6


def _subparsers(parser):
    """{'anonymize': parser, ..., 'hierarchy build': parser} of the command's parser."""
    import argparse

    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = sub
                out.update({f"{name} {n}": s for n, s in _subparsers(sub).items()})
    return out


def test_packaged_defaults_name_real_options():
    """Every key of defaults.toml is an option of its subcommand (a misspelt key would leave the real option
    without its default), and the parsed values are the packaged ones."""
    from gpuanon.cli import build_parser
    from gpuanon.cli.config import defaults

    subs = _subparsers(build_parser())
    checked = 0
    for name, sub in subs.items():
        dests = {a.dest for a in sub._actions}
        table = defaults(*name.split())
        assert set(table) <= dests, (name, set(table) - dests)
        checked += len(table)
    assert checked > 40
    args = build_parser().parse_args(["sweep", "--dataset", "adult", "--out", "s.csv"])
    assert (args.k_values, args.base_k, args.max_suppression, args.optimize) == ("3-15", 3, 0.01, False)
    args = build_parser().parse_args(["hierarchy", "build", "--dataset", "adult", "--column", "x", "--out", "h.csv"])
    assert (args.rho, args.kind, args.seed) == (10, "frequency", 0)


def test_config_file_between_defaults_and_options(tmp_path):
    """A --config file goes over the packaged defaults; options typed go over it; --hierarchy repeats add up."""
    from gpuanon.cli import build_parser
    from gpuanon.cli.config import load_config

    cfg = tmp_path / "job.toml"
    cfg.write_text('dataset = "adult"\nk = 5\nmax-suppression = 0.05\nqi = ["age", "education"]\n'
                   'hierarchy = "education=edu.csv"\n')
    keys = set(vars(build_parser().parse_args(["anonymize"]))) - {"command", "config", "quiet"}
    values = load_config(str(cfg), keys)
    assert values == {"dataset": "adult", "k": 5, "max_suppression": 0.05, "qi": "age,education",
                      "hierarchy": ["education=edu.csv"]}
    args = build_parser(values).parse_args(["anonymize", "--k", "20", "--hierarchy", "zip=zip.csv"])
    assert (args.k, args.max_suppression, args.mode, args.qi) == (20, 0.05, "strict", "age,education")
    assert args.hierarchy == ["education=edu.csv", "zip=zip.csv"] and values["hierarchy"] == ["education=edu.csv"]
    assert build_parser().parse_args(["anonymize"]).max_suppression == 0.01  # the packaged default again


@pytest.mark.parametrize("argv", [
    ["federate", "--dataset", "adult", "--seed", "3"],  # the seed is --random-state; silos read their own files
    ["federate", "--dataset", "adult", "--target-expr", "age > 40"],
    ["sweep", "--dataset", "adult", "--out", "s.csv", "--numeric", "age"],  # the sweep infers kinds itself
])
def test_options_a_command_would_ignore_are_refused(argv):
    from gpuanon.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2


def test_cli_files_are_package_data():
    """defaults.toml and the report's templates are listed in pyproject's package data (a wheel carries them)."""
    import fnmatch
    import tomllib

    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["gpuanon"]
    files = [p.relative_to(ROOT / "gpuanon").as_posix() for d in ("cli", "report")
             for p in (ROOT / "gpuanon" / d).rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert "cli/defaults.toml" in files and "report/templates/anonymize.html" in files
    for f in files:
        assert any(fnmatch.fnmatch(f, g) for g in globs), f
