"""``gpuanon anonymize DIR --cluster local:N --out DIR``, through a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # Dask clusters

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
QI = "age,education,marital-status,gender,race,hours-per-week"


def run(*args):
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from gpuanon.datasets import load_adult

    d = tmp_path_factory.mktemp("adult_parts")
    df = load_adult().iloc[:6000]
    for i, (a, b) in enumerate([(0, 2500), (2500, 2600), (2600, 6000)]):
        df.iloc[a:b].to_parquet(d / f"part-{i}.parquet", index=False)
    df.to_parquet(d.parent / "adult6000.parquet", index=False)
    return d


def test_cluster_run_equals_one_process(data_dir, tmp_path):
    out, rep = tmp_path / "out", tmp_path / "r.json"
    args = ["--qi", QI, "--sensitive", "income", "--target", "income", "--k", "5", "--l", "2"]
    r = run("anonymize", str(data_dir), "--cluster", "local:2", *args, "--out", str(out), "--report", str(rep))
    assert r.returncode == 0, r.stderr
    assert "dashboard" in r.stderr and "dask level 1" in r.stderr
    files = sorted(os.listdir(out))
    assert files == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    got = pd.concat([pd.read_parquet(out / f) for f in files], ignore_index=True)
    one = tmp_path / "one.parquet"
    r1 = run("anonymize", str(data_dir.parent / "adult6000.parquet"), *args, "--out", str(one))
    assert r1.returncode == 0, r1.stderr
    ref = pd.read_parquet(one)
    assert list(got.columns) == list(ref.columns)
    for c in ref.columns:
        assert got[c].astype(object).where(got[c].notna(), None).tolist() == \
            ref[c].astype(object).where(ref[c].notna(), None).tolist(), c
    report = json.loads(rep.read_text())
    assert report["cluster"]["n_workers"] == 2 and report["output"] == str(out)
    assert report["n_rows_in"] == 6000 and report["achieved"]["k"] >= 5 and report["verification"]["ok"]
    assert {"read", "encode", "partition", "verify", "write", "total"} <= set(report["seconds"])


def test_cluster_output_must_be_a_new_directory(data_dir, tmp_path):
    r = run("anonymize", str(data_dir), "--cluster", "local:2", "--qi", QI, "--k", "5", "--out", str(tmp_path / "o.csv"))
    assert r.returncode == 2 and "directory of Parquet files" in r.stderr and "o_out/" in r.stderr
    (tmp_path / "taken").mkdir()
    r = run("anonymize", str(data_dir), "--cluster", "local:2", "--qi", QI, "--k", "5", "--out", str(tmp_path / "taken"))
    assert r.returncode == 2 and "exists" in r.stderr


def test_bad_cluster_spec(data_dir, tmp_path):
    r = run("anonymize", str(data_dir), "--cluster", "local:zero", "--qi", QI, "--k", "5", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "local:N" not in r.stdout and "whole number" in r.stderr


def test_cluster_report_has_the_risk_section_of_one_process(data_dir, tmp_path):
    """The outputs are identical, so the risk before (the input) and after (the output) must be: with the
    output written (read back from the Parquet directory) and without (gathered), a population given."""
    args = ["--qi", QI, "--k", "5", "--format", "minmax", "--population", "60000", "--quiet"]
    one = tmp_path / "one.json"
    r1 = run("anonymize", str(data_dir.parent / "adult6000.parquet"), *args, "--out", str(tmp_path / "one.parquet"),
             "--report", str(one))
    assert r1.returncode == 0, r1.stderr
    ref = json.loads(one.read_text())["risk"]
    assert ref["before"]["sample"]["n_rows"] == 6000 and ref["after"]["population"]["population_size"] == 60000
    for name, extra in (("written", ["--out", str(tmp_path / "out")]), ("gathered", [])):
        rep = tmp_path / f"{name}.json"
        r = run("anonymize", str(data_dir), "--cluster", "local:2", *args, *extra, "--report", str(rep),
                "--html", str(tmp_path / f"{name}.html"))
        assert r.returncode == 0, r.stderr
        got = json.loads(rep.read_text())["risk"]
        assert got.pop("seconds") >= 0 and ref.get("seconds") is not None
        assert got == {k: v for k, v in ref.items() if k != "seconds"}, name
        assert "Re-identification risk, before and after" in (tmp_path / f"{name}.html").read_text()
