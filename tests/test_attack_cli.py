"""``gpuanon attack --release`` through a subprocess: the report and page, the hand-worked counts of
tests/test_attack_hand.py, a raw copy, one-line errors; the --perturbed mode is unchanged (test_cli_perturb)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", "attack", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture()
def tables(tmp_path):
    from test_attack_hand import CITY, CONTROL, ORIG, RELEASE

    paths = {k: tmp_path / f"{k}.csv" for k in ("release", "original", "control")}
    RELEASE.to_csv(paths["release"], index=False)
    ORIG.to_csv(paths["original"], index=False)
    CONTROL.to_csv(paths["control"], index=False)
    CITY.to_arx_csv(tmp_path / "city.csv")
    paths["city"] = tmp_path / "city.csv"
    return paths


def test_report_and_page(tables, tmp_path):
    rep, page = tmp_path / "r.json", tmp_path / "r.html"
    p = run("--release", str(tables["release"]), "--original", str(tables["original"]), "--control",
            str(tables["control"]), "--secret", "inc", "--n-attacks", "12", "--aux", "age,city|job,hours",
            "--hierarchy", f"city={tables['city']}", "--seed", "3", "--report", str(rep), "--html", str(page))
    assert p.returncode == 0, p.stderr
    doc = json.loads(rep.read_text())
    assert doc["singling_out"]["univariate"]["n_success"] == 4
    assert doc["linkability"]["n_success"] == 2 and doc["linkability"]["ties_kept"]["n_success"] == 12
    assert doc["inference"]["inc"]["n_success"] == 7.5
    html = page.read_text()
    assert "inference of &#39;inc&#39;" in html and "hours" in html
    assert "singling out (univariate)" in p.stdout


def test_raw_copy_is_at_risk(tables, tmp_path):
    rep = tmp_path / "r.json"
    p = run("--release", str(tables["original"]), "--original", str(tables["original"]), "--attacks",
            "singling-out,inference", "--secret", "inc", "--n-attacks", "12", "--report", str(rep))
    assert p.returncode == 0, p.stderr
    doc = json.loads(rep.read_text())
    assert doc["inference"]["inc"]["n_success"] == 12  # each row finds itself
    assert doc["singling_out"]["univariate"]["n_success"] == doc["singling_out"]["univariate"]["queries"] > 0


@pytest.mark.parametrize("args, words", [
    (["--attacks", "inference"], "--secret"),
    (["--aux", "age,city"], "--aux"),
    (["--aux", "age,city|city"], "disjoint"),
    (["--secret", "nope"], "'nope'"),
    (["--attacks", "guessing"], "unknown attack"),
    (["--confidence", "2"], "--confidence"),
])
def test_one_line_errors(tables, args, words):
    p = run("--release", str(tables["release"]), "--original", str(tables["original"]),
            "--hierarchy", f"city={tables['city']}", "--n-attacks", "5", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert words in p.stderr and "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("gpuanon: error:")]
    assert len(errors) == 1 and words in errors[0], p.stderr


def test_release_needs_original(tables):
    p = run("--release", str(tables["release"]))
    assert p.returncode == 2 and "--original" in p.stderr
