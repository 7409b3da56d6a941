"""``gpuanon risk`` through a subprocess: outputs, before / after, and every input error (exit 2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture()
def tables(tmp_path):
    """A 12-row sample (the hand-worked table of tests/test_risk.py) and its population."""
    from test_risk import HAND, POP

    s, p = tmp_path / "s.csv", tmp_path / "p.csv"
    HAND.to_csv(s, index=False)
    POP.to_csv(p, index=False)
    return s, p


def test_risk_writes_report_html_and_per_record(tables, tmp_path):
    s, p = tables
    rep, html, pr = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "pr.csv"
    r = run("risk", str(s), "--qi", "a,z", "--weights", "w", "--population", "100", "--report", str(rep),
            "--html", str(html), "--per-record", str(pr))
    assert r.returncode == 0, r.stderr
    doc = json.loads(rep.read_text())["risk"]
    # read back from CSV: the empty cell of row 11 is missing, '?' a value, '*' '*' suppressed
    assert doc["sample"]["n"] == 11 and doc["sample"]["n_classes"] == 7 and doc["sample"]["n_suppressed"] == 1
    assert doc["sample"]["population_source"] == "weights" and doc["individual"]["global_risk"] > 0
    assert doc["population"]["population_size"] == 100
    assert "11 rows counted" in r.stdout and "individual risk" in r.stdout
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == 2
    per = pd.read_csv(pr)
    assert len(per) == 12 and per["class"].iloc[8] == -1


def test_risk_population_table_and_original_side_by_side(tables, tmp_path):
    s, p = tables
    anon = tmp_path / "anon.csv"
    pd.DataFrame({"a": ["*"] * 12, "z": ["1"] * 6 + ["2"] * 6, "w": [1] * 12}).to_csv(anon, index=False)
    rep = tmp_path / "r.json"
    r = run("risk", str(anon), "--qi", "a,z", "--original", str(s), "--report", str(rep))
    assert r.returncode == 0, r.stderr
    d = json.loads(rep.read_text())
    assert d["risk"]["sample"]["n_classes"] == 2 and d["risk_original"]["sample"]["n_classes"] == 7
    assert "before:" in r.stdout and "after:" in r.stdout
    r2 = run("risk", str(s), "--qi", "a,z", "--population-table", str(p), "--report", str(rep))
    assert r2.returncode == 0, r2.stderr
    j = json.loads(rep.read_text())["risk"]["sample"]["journalist"]
    assert j["average"] == pytest.approx(4.1 / 11, abs=1e-15)


def test_risk_dataset_adult():
    r = run("risk", "--dataset", "adult", "--qi", "age,education,marital-status,occupation,race,gender,"
            "native-country", "--sampling-fraction", "0.01")
    assert r.returncode == 0, r.stderr
    assert "32,561 rows counted" in r.stdout and "Dankar -> pitman" in r.stdout


@pytest.mark.parametrize("args, words", [
    (["--population", "5"], ["population size 5", "below"]),
    (["--sampling-fraction", "0"], ["outside (0, 1]"]),
    (["--sampling-fraction", "1.5"], ["outside (0, 1]"]),
    (["--weights", "a"], ["also a quasi-identifier"]),
    (["--weights", "zz"], ["weights column 'zz'"]),
    (["--qi", "a,zz"], ["'zz'", "not a column"]),
    (["--suda-max-size", "2"], ["--suda-max-size applies to --suda"]),
    (["--population", "100", "--sampling-fraction", "0.5"], ["not both"]),
])
def test_risk_input_errors_exit_2_one_line(tables, tmp_path, args, words):
    s, _ = tables
    rep = tmp_path / "r.json"
    argv = ["risk", str(s)] + (["--qi", "a,z"] if "--qi" not in args else []) + args + ["--report", str(rep)]
    r = run(*argv)
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in err[0], err[0]
    assert not rep.exists()


def test_risk_population_table_errors(tables, tmp_path):
    s, p = tables
    bad = tmp_path / "bad.csv"
    pd.read_csv(p, keep_default_na=False, na_values=[""]).query("a != 'D'").to_csv(bad, index=False)
    r = run("risk", str(s), "--qi", "a,z", "--population-table", str(bad))
    assert r.returncode == 2 and "does not contain 1 of the sample's QI combinations" in r.stderr, r.stderr
    pd.read_csv(p).drop(columns="z").to_csv(bad, index=False)
    r = run("risk", str(s), "--qi", "a,z", "--population-table", str(bad))
    assert r.returncode == 2 and "has no column 'z'" in r.stderr, r.stderr
    r = run("risk", str(s), "--qi", "a,z", "--population-table", str(p), "--report", str(p))
    assert r.returncode == 2 and "population-table" in r.stderr, r.stderr


def test_anonymize_report_has_risk_before_and_after(tmp_path):
    rep = tmp_path / "a.json"
    qi = "age,education,marital-status,occupation,race,gender,native-country"
    r = run("anonymize", "--dataset", "adult", "--qi", qi, "--k", "5", "--report", str(rep),
            "--sampling-fraction", "0.01", "--format", "minmax", "--suda", "--html", str(tmp_path / "a.html"))
    assert r.returncode == 0, r.stderr
    risk = json.loads(rep.read_text())["risk"]
    b, a = risk["before"], risk["after"]
    # the input, grouped on the same QIs as the ARX reference of tests/test_risk.py, but typed by the reader
    assert b["sample"]["n"] == 32561 and b["population"]["population_size"] == 3256100
    # the output: every class of at least k = 5 rows; the same population N; age as its _min / _max pair
    assert a["sample"]["prosecutor"]["highest"] <= 1 / 5 and a["sample"]["sample_uniques"] == 0
    assert a["population"]["population_size"] == 3256100 and a["population"]["dankar"]["uniques"] == 0.0
    assert "age_min" in a["quasi_identifiers"] and a["sample"]["prosecutor"]["records_at_risk"] == 0.0
    # SUDA on both sides, the age_min / age_max pair one QI; DIS-SUDA at n / N = 0.01; the page's SUDA plots
    assert b["suda"]["n_qis"] == a["suda"]["n_qis"] == 7 and set(a["suda"]["contributions"]) == set(qi.split(","))
    assert b["suda"]["n_unique"] == 11972 and b["suda"]["sampling_fraction"] == 0.01  # ARX's sample uniques
    assert a["suda"]["records_with_msu"] == 0 and a["suda"]["histogram"]["0"] == 32561
    page = (tmp_path / "a.html").read_text()
    assert "Special uniques (SUDA2, DIS-SUDA)" in page and "alt='DIS-SUDA scores per band'" in page


def test_anonymize_risk_options_checked_before_the_run(tmp_path):
    rep = tmp_path / "a.json"
    r = run("anonymize", "--dataset", "adult", "--k", "5", "--report", str(rep), "--sampling-fraction", "2")
    assert r.returncode == 2 and "outside (0, 1]" in r.stderr and "partition" not in r.stderr, r.stderr
    r = run("anonymize", "--dataset", "adult", "--k", "5", "--report", str(rep), "--population", "100")
    assert r.returncode == 2 and "below the table's 32,561 rows" in r.stderr, r.stderr


def test_anonymize_max_risk_chooses_k(tmp_path):
    rep = tmp_path / "m.json"
    r = run("anonymize", "--dataset", "adult", "--max-risk", "0.15", "--report", str(rep))
    assert r.returncode == 0, r.stderr
    d = json.loads(rep.read_text())
    assert d["max_risk"]["k"] == 7 and d["requested"]["k"] == 7  # ceil(1 / 0.15) = 7
    assert d["risk"]["after"]["sample"]["prosecutor"]["highest"] <= 0.15
    assert d["metrics"]["entropy_loss"] is not None  # the loss it costs
    for argv, words in ((["--max-risk", "0"], "outside (0, 1]"), (["--max-risk", "0.2", "--k", "3"], "not both")):
        r = run("anonymize", "--dataset", "adult", *argv)
        assert r.returncode == 2 and words in r.stderr, r.stderr


def test_bench_risk_prints_one_json_document():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_risk.py"), "--rows", "20000"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["raw"]["classes"] == 20000 and doc["raw"]["dankar_model"] in ("zayatz", "pitman")
    assert 0 < doc["classed"]["classes"] < 20000 and doc["classed"]["seconds"] > 0


@pytest.mark.parametrize("r, k", [(1.0, 2), (0.5, 2), (0.34, 3), (1 / 3, 3), (0.3333333333, 4), (0.3333, 4), (0.2, 5), (0.15, 7),
                                  (0.1, 10), (0.07, 15), (0.01, 100)])
def test_max_risk_k_is_the_smallest_k_whose_bound_meets_r(r, k):
    """k = max(2, ceil(1 / R)): 1 / k <= R, and 1 / (k - 1) > R unless k = 2 (a class of k - 1 rows, which
    Mondrian with k - 1 may make, would be above R)."""
    import argparse

    from gpuanon.cli.anonymize import k_for_max_risk

    args = argparse.Namespace(max_risk=r, k=None)
    doc = k_for_max_risk(args)
    assert args.k == doc["k"] == k and 1 / k <= r and (k == 2 or 1 / (k - 1) > r)
