"""The anonymize report's risk section from the fit's own classes (gpuanon.anonymize.risk_classes)
against the independent computation: the input frame and the output written and read back, grouped
by gpuanon.risk.assess as ``gpuanon risk`` groups any table. Every figure must be equal."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpuanon import Mondrian
from gpuanon.anonymize.risk_classes import fit_classes
from gpuanon.datasets import load_adult
from gpuanon.output.io import write_table
from gpuanon.risk.classes import group_rows, merged_classes
from gpuanon.risk.report import differences, risk_section, section_of_classes

ROOT = Path(__file__).resolve().parents[1]
QI = ["age", "education", "marital-status", "occupation", "race", "gender", "native-country", "hours-per-week"]


@pytest.fixture(scope="module")
def adult():
    return load_adult()


def both(df, tmp_path, qi=QI, fmt="range", suffix=".parquet", **kw):
    """``(fast section, read-back section, fitted estimator)`` of one run (sampling fraction 0.01)."""
    m = Mondrian(quasi_identifiers=qi, output_format=fmt, backend="cpu", progress=False, **kw)
    out = m.fit_transform(df)
    before, after, cols = fit_classes(m.result_, df, fmt)
    fast = section_of_classes(before, after, qi, cols, sampling_fraction=0.01)
    path = tmp_path / f"out{suffix}"
    write_table(out, path, metadata=m.output_metadata_)
    back = pd.read_parquet(path, columns=cols) if suffix == ".parquet" else pd.read_csv(path, usecols=cols)
    slow = risk_section(df, back, qi, sampling_fraction=0.01)
    return fast, slow, m


CASES = {
    "k3": dict(k=3),
    "k10": dict(k=10),
    "k10_minmax_relaxed": dict(k=10, mode="relaxed", fmt="minmax"),
    "k3_mean": dict(k=3, fmt="mean"),
    "k5_l2": dict(k=5, l=2, sensitive="income"),
    "k5_t": dict(k=5, t=0.3, sensitive="income"),
    "k10_hierarchies": dict(k=10, target="income", hierarchies="auto"),
    "k10_optimize": dict(k=10, target="income", optimize=True),
    "k3_relaxed_hierarchies_optimize": dict(k=3, mode="relaxed", target="income", hierarchies="auto", optimize=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fit_section_equals_read_back_on_adult(adult, tmp_path, name):
    kw = dict(CASES[name])
    fast, slow, m = both(adult, tmp_path, fmt=kw.pop("fmt", "range"), **kw)
    assert differences(fast, slow) == []
    assert fast == slow
    a = fast["after"]["sample"]
    assert a["n"] == m.verification_.n_rows and a["n_classes"] == m.verification_.n_classes
    assert fast["after"]["population"]["population_size"] == fast["before"]["population"]["population_size"] == 3256100
    if "relaxed" in name or "optimize" in name or "hierarchies" in name:
        assert a["n_classes"] <= m.n_partitions_


def test_relaxed_partitions_sharing_cells_are_one_class(adult, tmp_path):
    """Relaxed cuts split equal values: partitions publishing the same cells merge (fewer classes)."""
    qi = ["age", "gender", "race"]
    fast, slow, m = both(adult, tmp_path, qi=qi, k=10, mode="relaxed")
    assert fast == slow
    assert fast["after"]["sample"]["n_classes"] < m.n_partitions_


def test_suppressed_rows_and_missing_values(adult, tmp_path):
    """Missing-value blocks too small for k are suppressed (left out of the output, so of "after")."""
    df = adult.copy()
    df["age"] = df["age"].astype("float64")
    df.loc[[3, 70], "age"] = np.nan  # a block of two rows with a missing age: suppressed at k = 5
    df.loc[np.arange(0, len(df), 40), "hours-per-week"] = np.nan
    fast, slow, m = both(df, tmp_path, k=5, fmt="minmax")
    assert m.n_suppressed_ >= 2
    assert fast == slow
    assert fast["after"]["sample"]["n_rows"] == len(df) - m.n_suppressed_


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
@pytest.mark.parametrize("hierarchies", ["auto", None])
def test_all_categorical_classes_published_as_star_are_left_out(tmp_path, mode, hierarchies):
    """Every QI categorical: a class whose every cell is ``*`` (a hierarchy's root, or the value ``*``
    itself) is a suppressed row to a reader, as an input row whose every QI is ``*``."""
    rng = np.random.default_rng(3)
    n = 3000
    df = pd.DataFrame({"a": rng.choice(list("abcdefgh"), n), "b": rng.choice(["x", "y", "z", "w", "*"], n),
                       "y": rng.integers(0, 2, n)})
    df.loc[:300, ["a", "b"]] = "*"  # 301 input rows all '*'
    df.loc[400:700, ["a", "b"]] = ["q", "*"]
    fast, slow, m = both(df, tmp_path, qi=["a", "b"], k=50, target="y", hierarchies=hierarchies, mode=mode)
    assert fast == slow
    assert fast["before"]["sample"]["n_suppressed"] == 301
    assert fast["after"]["sample"]["n_suppressed"] >= 281  # relaxed cuts publish some of them with others


def test_numeric_qi_read_from_text_groups_by_its_values(tmp_path):
    """A numeric QI held as text ("5" and "5.0": one number, two values) is grouped by its values."""
    df = pd.DataFrame({"n": pd.Series(["5", "5.0", "7", "8"] * 50, dtype=object), "c": list("abcde") * 40})
    fast, slow, _ = both(df, tmp_path, qi=["n", "c"], k=5, numeric=["n"])
    assert fast == slow
    assert fast["before"]["sample"]["n_classes"] == 20  # 4 texts x 5 letters (15 by the numbers)


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_hepmass_shaped(tmp_path, fmt):
    from gpuanon.datasets import get_dataset

    df, roles = get_dataset("hepmass", rows=20000, seed=0)
    fast, slow, _ = both(df, tmp_path, qi=roles["quasi_identifiers"], fmt=fmt, k=10)
    assert fast == slow


@pytest.mark.slow
def test_hepmass_shaped_200k_minmax(tmp_path):
    from gpuanon.datasets import get_dataset

    df, roles = get_dataset("hepmass", rows=200_000, seed=0)
    fast, slow, _ = both(df, tmp_path, qi=roles["quasi_identifiers"], fmt="minmax", k=10)
    assert fast == slow


def test_merged_classes_by_hand():
    """Five partitions: 2 and 4 publish the same cells (one class of 3 + 4 rows), 3 is all '*'."""
    cells = [np.array([1, 2, 7, 2, 5], dtype=np.uint64), np.array([0, 9, 9, 9, 0], dtype=np.uint64)]
    sizes = np.array([3, 3, 5, 4, 6])
    g = merged_classes(cells, sizes, np.array([False, False, True, False, False]), 21, np)
    assert (g.n, g.n_rows, g.n_suppressed, g.n_classes) == (16, 21, 5, 3)
    assert sorted(g.sizes.tolist()) == [3, 6, 7]
    assert g.row_class[2] == -1 and g.row_class[1] == g.row_class[3]


def test_group_rows_every_row_its_own_and_collisions():
    w = [np.arange(10, dtype=np.uint64), np.zeros(10, dtype=np.uint64)]
    gid, n = group_rows(w, np)
    assert n == 10 and len(set(gid.tolist())) == 10
    w = [np.array([1, 1, 2, 2, 1], dtype=np.uint64), np.array([3, 3, 4, 4, 5], dtype=np.uint64)]
    gid, n = group_rows(w, np)
    assert n == 3 and gid[0] == gid[1] and gid[2] == gid[3] and gid[4] not in (gid[0], gid[2])


def test_differences():
    assert differences({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 1, "c": [1, 3]}}) == ["a.c[1]"]
    assert differences({"a": float("nan")}, {"a": float("nan")}) == []
    assert differences({"a": 1}, {"b": 1}) == ["a", "b"]


def run(*args):
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.mark.parametrize("out, extra", [("o.csv", ["--format", "range", "--optimize", "--target", "income"]),
                                        ("o.parquet", ["--format", "minmax", "--mode", "relaxed"]),
                                        ("o.csv.gz", ["--format", "mean", "--l", "2", "--sensitive", "income"])])
def test_cli_risk_check_readback_agrees(tmp_path, out, extra):
    rep = tmp_path / "r.json"
    r = run("anonymize", "--dataset", "adult", "--k", "5", "--sampling-fraction", "0.01", "--risk-check", "readback",
            "--out", str(tmp_path / out), "--report", str(rep), "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    risk = json.loads(rep.read_text())["risk"]
    assert risk["check"]["method"] == "readback" and risk["check"]["source"] == str(tmp_path / out)
    assert risk["check"]["agree"] is True and risk["check"]["differences"] == []
    r2 = run("anonymize", "--dataset", "adult", "--k", "5", "--sampling-fraction", "0.01", "--report", str(rep),
             "--quiet", *extra)
    plain = json.loads(rep.read_text())["risk"]
    assert "check" not in plain
    assert {k: plain[k] for k in ("before", "after")} == {k: risk[k] for k in ("before", "after")}


def test_cli_risk_check_is_a_choice(tmp_path):
    r = run("anonymize", "--dataset", "adult", "--k", "5", "--risk-check", "reread", "--report", str(tmp_path / "r"))
    assert r.returncode == 2 and "invalid choice" in r.stderr and "Traceback" not in r.stderr
