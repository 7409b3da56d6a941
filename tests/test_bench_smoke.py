"""Smoke test of bench/bench_mondrian.py: a --quick --skip-peer run prints one valid JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_bench_quick_json(tmp_path):
    out_file = tmp_path / "bench.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run(
        [sys.executable, os.path.join("bench", "bench_mondrian.py"), "--quick", "--skip-peer",
         "--backend", "cpu", "--out", str(out_file)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)  # stdout is exactly one JSON document
    assert json.loads(out_file.read_text()) == doc

    for key in ("environment", "runs", "peer_runs", "comparison", "targets", "errors"):
        assert key in doc
    assert doc["errors"] == []
    env_ = doc["environment"]
    for key in ("backend", "device", "versions", "cpu_count"):
        assert key in env_
    assert {"python", "numpy", "pandas"} <= set(env_["versions"])
    assert env_["backend"] == "cpu"

    runs = {(r["dataset"], r["k"]): r for r in doc["runs"]}
    assert set(runs) == {("adult", 3), ("hepmass", 10)}
    assert runs[("adult", 3)]["rows"] == 30162
    assert runs[("hepmass", 10)]["rows"] == 20000
    for r in doc["runs"]:
        for stage in ("read", "encode", "partition", "generalize", "verify", "total"):
            assert r["seconds"][stage] >= 0
        assert r["n_classes"] > 0
        assert r["peak_rss_bytes"] > 0
        assert 0 <= r["ncp_set"] <= 1 and 0 <= r["ncp_arx"] <= 1
        assert r["achieved_k"] >= r["k"]
        assert "gpu" not in r  # CPU runs never touch CuPy

    assert doc["peer_runs"] == [] and doc["comparison"] == []
    names = {t["name"] for t in doc["targets"]}
    assert "adult_k3_partition" in names
    for t in doc["targets"]:
        assert {"name", "measured", "pass"} <= set(t)


@pytest.mark.slow
def test_gpu_check_small_on_the_cpu(tmp_path):
    """bench/gpu_check.py --backend cpu --small runs every part of the GPU machine's check at tiny
    sizes on the CPU (what it cannot catch: anything the device does; it checks the script's code
    paths, its JSON and its table)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, os.path.join("bench", "gpu_check.py"), "--out", str(tmp_path),
                        "--backend", "cpu", "--small"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((tmp_path / "gpu_check.json").read_text())
    assert doc["errors"] == [] and doc["mode"] == "small" and doc["backend"] == "cpu"
    parts = doc["parts"]
    assert list(parts) == ["tests_equal", "mondrian_hepmass_big", "mondrian_adult", "distpab", "risk", "suda", "attacks",
                           "cli", "cluster", "tests_rest", "mondrian_hepmass_1m", "threshold"]  # in order of value
    assert parts["attacks"]["rows"] == 20_000 and parts["attacks"]["n_attacks"] == 500
    assert all(r["equal_to_cpu"] and r["warm"] > 0 for r in parts["attacks"]["kinds"].values())
    assert parts["risk"]["rows"] == 40_000 and parts["risk"]["warm"] > 0
    assert parts["suda"]["m"] == 10 and parts["suda"]["rows"] == 32_561 and parts["suda"]["seconds"] > 0
    for name in ("tests_equal", "tests_rest"):
        assert parts[name]["exit_status"] == 0 and "skipped" in parts[name]["summary"]
    listed = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "--collect-only", "-q", "-p", "no:cacheprovider",
                             os.path.join("tests", "test_gpu.py")], cwd=REPO, env=env, capture_output=True, text=True)
    n_gpu = sum(1 for line in listed.stdout.splitlines() if "::" in line)
    assert n_gpu >= 40 and parts["tests_equal"]["counts"]["skipped"] + parts["tests_rest"]["counts"]["skipped"] == n_gpu
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["complete"] and summary["done"] == list(parts) and not summary["failed"] + summary["pending"]
    for name in ("mondrian_adult", "mondrian_hepmass_1m", "mondrian_hepmass_big"):
        for run in ("cold", "warm"):
            r = parts[name][run]
            assert r["fit_transform"] > 0 and r["stages"]["partition"] >= 0 and r["backend"] == "cpu"
            assert r["transfers"]["calls"] > 0 and "stages" in r["transfers"]
    assert parts["mondrian_hepmass_1m"]["equal_to_cpu"] == {"labels": True, "output": True}
    assert parts["distpab"]["warm"]["seconds"]["total"] > 0
    assert parts["cli"]["warm"]["seconds"]["total"] > 0 and parts["cli"]["warm"]["bytes_out"] > 0
    assert [r["rows"] for r in parts["threshold"]["runs"]] == [2_000, 8_000]
    if "skipped" not in parts["cluster"]:
        assert parts["cluster"]["equal_to_one_process"] == {"labels": True, "output": True}
    assert {t["name"] for t in doc["targets"]} >= {"hepmass_10.5M_fit_transform_warm", "adult_k3_fit_transform_warm",
                                                   "risk_10.5M_warm", "adult_suda_m10_warm"}
    suda = next(t for t in doc["targets"] if t["name"] == "adult_suda_m10_warm")
    assert suda["measured_s"] == parts["suda"]["seconds"] and suda["target_s"] == 1.0
    assert all(t["met"] is None for t in doc["targets"])  # a CPU run measures no GPU target
    md = (tmp_path / "gpu_check.md").read_text()
    assert "## Targets" in md and "| mondrian_hepmass_1m | ok |" in md and "| suda | ok | Adult M = 10" in md
    for v in ("numpy", "pandas", "cupy", "cudf"):
        assert f"| {v} |" in md


@pytest.mark.slow
def test_bench_scaling_quick_runs_the_cluster(tmp_path):
    """bench/bench_scaling.py --quick: the one-process run and the Dask runs on 1 and 2 workers, each with
    a result and no error (the cluster's details read from the fit record)."""
    env = dict(os.environ, GPUANON_BACKEND="cpu")
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, os.path.join("bench", "bench_scaling.py"), "--quick", "--data-dir",
                        str(tmp_path / "data")], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    runs = json.loads(p.stdout)["runs"]
    assert [(r["mode"], r["workers"]) for r in runs if r["mode"] == "dask"] == [("dask", 1), ("dask", 2)]
    for r in runs:
        assert r.get("error") is None and r["rows_per_second"] > 0, r
        assert r["n_classes"] > 0
    dask = [r for r in runs if r["mode"] == "dask"]
    assert all(r["bytes_to_coordinator"] > 0 and r["output_files"] == 4 for r in dask)
