"""`gpuanon perturb` and `gpuanon attack` through a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")
ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [["--centralized"], ["--entities", "3"]])
def test_perturb_then_attack(tmp_path, mode):
    out, rep, arep = tmp_path / "p.csv", tmp_path / "p.json", tmp_path / "a.json"
    r = run("perturb", "--dataset", "wine", *mode, "--write-row-id", "--seed", "3", "--out", out, "--report", rep)
    assert r.returncode == 0, r.stderr
    assert "never publish" in r.stderr
    report = json.loads(rep.read_text())
    for key in ("phi", "angle_degrees", "axis", "features", "variances", "bytes_per_entity", "n_entities",
                "backend", "seconds"):
        assert key in report, key
    assert set(report["seconds"]) >= {"stats", "search", "perturb", "total"}
    assert report["n_entities"] == (1 if "--centralized" in mode else 3)
    assert len(report["variances"]) == len(report["features"]) == 13
    assert report["phi"] == pytest.approx(min(v for v in report["variances"] if v > 0), rel=1e-9)
    p = pd.read_csv(out)
    assert len(p) == 178 and sorted(p["row_id"]) == list(range(178))
    from gpuanon.datasets import load_sklearn

    orig = load_sklearn("wine")
    # the label travels with its row through the shuffle, features are changed
    assert (p["target"].to_numpy() == orig["target"].to_numpy()[p["row_id"]]).all()
    f = report["features"][0]
    assert not np.allclose(p[f].to_numpy(), orig[f].to_numpy()[p["row_id"]])
    a = run("attack", "--dataset", "wine", "--perturbed", out, "--report", arep)
    assert a.returncode == 0, a.stderr
    res = json.loads(arep.read_text())
    assert "target" not in res["features"] and len(res["features"]) == 13
    assert res["min"] > 0


@pytest.mark.slow
def test_perturb_errors(tmp_path):
    p = tmp_path / "in.csv"
    # 8 rows: enough for the default 4 entities of 2 rows each, so the feature check is what refuses
    pd.DataFrame({"a": [1.0, 2, 3, 4, 5, 6, 7, 8], "c": [2.0, 1, 4, 3, 6, 5, 8, 7], "b": ["x", "y"] * 4,
                  "y": [0, 1] * 4}).to_csv(p, index=False)
    r = run("perturb", p, "--features", "a,b", "--label", "y", "--out", tmp_path / "o.csv")
    assert r.returncode == 2 and "'b'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o.csv").exists()
    r = run("perturb", p, "--features", "a,c", "--label", "y", "--entities", "0", "--out", tmp_path / "o.csv")
    assert r.returncode == 2 and "--entities" in r.stderr
    no_id = tmp_path / "noid.csv"
    pd.DataFrame({"a": [1.0, 2]}).to_csv(no_id, index=False)
    r = run("attack", "--original", p, "--perturbed", no_id)
    assert r.returncode == 2 and "--write-row-id" in r.stderr


def test_perturb_cluster_refusals(tmp_path, capsys):
    """--cluster needs entities on workers, --cluster-timeout a positive number: one line, before any work."""
    from gpuanon.cli import main

    out = tmp_path / "o.csv"
    assert main(["perturb", "--dataset", "wine", "--centralized", "--cluster", "local:2", "--out", str(out)]) == 2
    assert "--cluster runs the entities on Dask workers" in capsys.readouterr().err
    assert main(["perturb", "--dataset", "wine", "--cluster", "local:2", "--cluster-timeout", "0",
                 "--out", str(out)]) == 2
    assert "--cluster-timeout must be a number of seconds > 0" in capsys.readouterr().err
    assert main(["perturb", "--dataset", "wine", "--cluster", "nowhere:2", "--out", str(out)]) == 2
    assert "cluster 'nowhere:2' is not understood" in capsys.readouterr().err
    assert not out.exists()
