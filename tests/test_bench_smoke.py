"""Smoke test of bench/bench_mondrian.py: a --quick --skip-peer run prints one valid JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
