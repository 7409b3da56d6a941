"""``evaluate --attacks``: every protection's release attacked (the training part the original, the held-out
rows the control), the risks in the report and on the page with the frontier plot. A raw release is singled
out almost always; a k = 10 release with every column but the target a QI (nothing passes through) is not;
DISTPAB's release publishes its numeric features only."""

import base64
import re

import numpy as np
import pytest

from gpuanon.datasets import get_dataset
from gpuanon.evaluate import run_evaluation
from gpuanon.report import render_evaluation_html


@pytest.fixture(scope="module")
def ev():
    df, _ = get_dataset("adult")
    df = df.iloc[np.random.default_rng(0).permutation(len(df))[:1200]].reset_index(drop=True)
    qi = [c for c in df.columns if c != "income"]
    return run_evaluation(df, "raw;k=10;distpab", "nb", quasi_identifiers=qi, target="income", attacks=200,
                          random_state=0)


def test_risks_per_protection(ev):
    doc = ev.to_dict()
    assert doc["config"]["attacks"] == 200
    by = {p["protection"]: p["attacks"] for p in doc["protections"]}
    raw, k10, dp = by["raw"], by["k=10"], by["distpab"]
    assert set(raw) == {"singling_out_univariate", "singling_out_multivariate", "linkability",
                        "linkability_tie_aware", "inference"}
    assert raw["singling_out_univariate"]["risk"] > 0.9 and raw["singling_out_multivariate"]["risk"] > 0.9
    for mode in ("singling_out_univariate", "singling_out_multivariate"):  # every column a QI: 0 within its interval
        assert k10[mode]["ci"][0] == 0.0, k10[mode]
    assert raw["inference"]["secret"] == "income" and raw["inference"]["n_attacks"] == 200
    # DISTPAB publishes the numeric features only: the columns of its successes are numeric ones
    assert set(dp["singling_out_multivariate"]["columns_of_successes"]) <= {
        "age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
    assert "inference" not in dp  # the target is not published


def test_page_shows_risks_and_frontier(ev):
    html = render_evaluation_html(ev.to_dict())
    assert "Attacks on each protection&#39;s release" in html or "Attacks on each protection's release" in html
    assert "singling out, multivariate" in html and "linkability, ties at random" in html
    imgs = re.findall(r"src='data:image/png;base64,([^']+)'", html)
    assert len(imgs) == 3  # accuracy, drop against metrics, the frontier
    assert base64.b64decode(imgs[-1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_attacks_no_section(ev):
    doc = ev.to_dict()
    for p in doc["protections"]:
        p.pop("attacks")
    doc["config"].pop("attacks")
    assert "Attacks on each protection" not in render_evaluation_html(doc)


def _anonymize(tmp_path, *extra):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    df, _ = get_dataset("adult")
    df.iloc[:600].to_csv(tmp_path / "in.csv", index=False)
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-m", "gpuanon", "anonymize", str(tmp_path / "in.csv"), "--qi",
                        "age,education,marital-status,race,gender", "--sensitive", "income", "--k", "10",
                        "--out", str(tmp_path / "out.csv"), "--report", str(tmp_path / "r.json"), *extra],
                       capture_output=True, text=True, env=env, timeout=300)
    doc = json.loads((tmp_path / "r.json").read_text()) if p.returncode == 0 else None
    return p, doc


def test_anonymize_attacks_with_a_control_fraction(tmp_path):
    import pandas as pd

    p, doc = _anonymize(tmp_path, "--attacks", "100", "--control-fraction", "0.25")
    assert p.returncode == 0, p.stderr
    a = doc["attacks"]
    assert a["n_attacks"] == 100 and a["control_rows"] == 150 and a["control_fraction"] == 0.25
    assert len(pd.read_csv(tmp_path / "out.csv")) == 450  # the control rows are not released
    r = a["risks"]
    # fnlwgt passes through: singling out carried by it, near 1
    so = r["singling_out_multivariate"]
    assert so["risk"] > 0.9 and max(so["columns_of_successes"], key=so["columns_of_successes"].get) == "fnlwgt"
    assert {"linkability", "linkability_tie_aware", "inference"} <= set(r)
    assert r["inference"]["control_rate"] is not None


@pytest.mark.parametrize("args,words", [(["--control-fraction", "0.5"], "--control-fraction belongs to --attacks"),
                                        (["--attacks", "--control-fraction", "1.5"], "--control-fraction 1.5")])
def test_anonymize_attack_errors(tmp_path, args, words):
    p, _ = _anonymize(tmp_path, *args)
    assert p.returncode != 0 and words in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "out.csv").exists()
