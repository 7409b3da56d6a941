"""bench/ab.py, the speed gate: its verdict rule on hand-worked ratios, and one real pair of runs.

The timings themselves are not tested (noise on shared machines); what is tested is the rule the
exit status follows, that a revision is exported and run from its own tree (not from whatever
gpuanon an editable install points at), and that a case a tree cannot run is "n/a".
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ab():
    spec = importlib.util.spec_from_file_location("bench_ab", os.path.join(REPO, "bench", "ab.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_verdict_rule_hand_worked():
    ab = _ab()
    # tight pairs 30 % slower: median 1.30, q1 1.30, q3 1.31, spread 0.005 -> 1.30 > 1.105
    v, st = ab.verdict([1.30, 1.31, 1.29, 1.30, 1.32], 0.10)
    assert v == "slower" and st["median"] == pytest.approx(1.30) and st["spread"] == pytest.approx(0.005)
    # noisy pairs: median 1.12, q1 1.00, q3 1.25, spread 0.125 -> 1.12 <= 1.225: within the noise
    v, st = ab.verdict([1.12, 1.00, 1.30, 0.90, 1.25], 0.10)
    assert v == "same" and st["spread"] == pytest.approx(0.125)
    # 12 % slower with no spread: beyond 1.10
    assert ab.verdict([1.12] * 5, 0.10)[0] == "slower"
    assert ab.verdict([1.08] * 5, 0.10)[0] == "same"
    assert ab.verdict([0.5, 0.52, 0.49], 0.10)[0] == "faster"
    assert ab.verdict([2.0, 2.0], 0.10)[0] == "few pairs"  # two pairs: no spread to judge by


@pytest.mark.slow
def test_ab_runs_an_exported_revision(tmp_path):
    """HEAD's commit exported with git archive, run against the working tree: two whole-command pairs,
    the JSON written; a case needing a module the export lacks answers n/a (checked with a tree
    that has no gpuanon.risk: a copy of the export with that package removed)."""
    ab = _ab()
    base = ab.materialise("HEAD", str(tmp_path / "cache"))
    assert os.path.isfile(os.path.join(base["tree"], "gpuanon", "__init__.py"))
    assert ab.materialise("HEAD", str(tmp_path / "cache"))["tree"] == base["tree"]  # reused
    out = tmp_path / "ab.json"
    p = subprocess.run([sys.executable, os.path.join(REPO, "bench", "ab.py"), "HEAD", "--cases", "cli_version",
                        "--pairs", "2", "--cache", str(tmp_path / "cache"), "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads(out.read_text())
    case = doc["cases"][0]
    assert case["name"] == "cli_version" and case["verdict"] == "few pairs" and len(case["pairs"]) == 2
    assert [pr["order"] for pr in case["pairs"]] == ["AB", "BA"]
    assert all(pr["base"]["cpu"] > 0 and pr["head"]["peak_rss_mb"] > 0 for pr in case["pairs"])

    import shutil

    old = tmp_path / "old"
    shutil.copytree(base["tree"], old)
    shutil.rmtree(old / "gpuanon" / "risk")
    r = ab.run_one(str(old), ab.CASES["risk_1M"][0], "cpu", str(tmp_path), 120)
    assert "no gpuanon.risk" in r.get("na", ""), r  # not today's gpuanon.risk through the editable install
