"""``sweep --attacks``: every grid point's output attacked; its risk columns are attack_release's on the
output anonymize publishes for that point (an independent fit), the rest of the row as without attacks."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpuanon import Mondrian
from gpuanon.anonymize.sweep import (ATTACK_COLUMNS, COLUMNS, attack_columns, plot_sweep_attacks, risk_text,
                                     run_params, run_sweep, thesis_table, to_markdown)
from gpuanon.attack.summary import attack_release, split_control
from gpuanon.datasets import load_adult

ROOT = Path(__file__).resolve().parents[1]
QI = ["age", "education", "marital-status", "race", "gender"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
N_ATTACKS = 30


@pytest.fixture(scope="module")
def data():
    rest, control = split_control(load_adult().head(900), 0.3, seed=2)
    return rest, control


@pytest.fixture(scope="module")
def swept(data):
    rest, control = data
    kw = dict(sensitive="income", target="income", ks=[3, 10], ls=[2, 3], ts=[0.3], backend="cpu")
    plain = run_sweep(rest, QI, **kw)
    attacked = run_sweep(rest, QI, **kw, attacks={"n_attacks": N_ATTACKS, "control": control, "seed": 4})
    return plain, attacked


def test_risk_columns_are_attack_release_on_each_grid_points_output(data, swept):
    rest, control = data
    _, res = swept
    assert list(res.columns) == COLUMNS + ATTACK_COLUMNS + ["error"]
    checked = 0
    for _, row in res.iterrows():
        if row["error"]:
            assert all(math.isnan(row[c]) for c in ATTACK_COLUMNS)  # l = 3 on a two-valued income: no output
            continue
        run = {k: row[k] for k in ("k", "l", "t")} | ({"optimize": True} if row["criterion"].startswith("opt") else {})
        run["t"] = None if pd.isna(run["t"]) else run["t"]
        m = Mondrian(quasi_identifiers=QI, sensitive="income", target="income", backend="cpu", progress=False,
                     **run_params(run))
        out = m.fit_transform(rest)
        want = attack_columns(attack_release(out, rest, control, quasi_identifiers=QI, secret="income",
                                             n_attacks=N_ATTACKS, seed=4))
        for c, v in want.items():
            assert (v is None and math.isnan(row[c])) or row[c] == v, (row["criterion"], row["k"], c)
        checked += 1
    assert checked == 5  # optimized k=3, k=3, k=10, l=2, t=0.3 (l=3 failed)
    assert res["risk_singling_out_multivariate"].notna().sum() == checked


def test_the_rest_of_each_row_is_the_sweep_without_attacks(swept):
    plain, res = swept
    same = [c for c in COLUMNS if c != "seconds"] + ["error"]
    pd.testing.assert_frame_equal(plain[same], res[same])
    assert (res.loc[res["error"] == "", "attack_seconds"] > 0).all()


def test_markdown_table_gets_each_risk_with_its_interval(swept):
    _, res = swept
    t = thesis_table(res, base_k=3)
    assert [c for c in t.columns if c.startswith("risk: ")] == [
        "risk: singling out (uni)", "risk: singling out (multi)", "risk: linkability",
        "risk: linkability (random ties)", "risk: inference"]
    row = res[res["criterion"] == "t-closeness"].iloc[0]
    cell = t.loc[t["run"] == "t-closeness (k=3, t=0.3)", "risk: inference"].iloc[0]
    assert cell == (f"{row['risk_inference']:.3f} [{row['risk_inference_low']:.3f}, "
                    f"{row['risk_inference_high']:.3f}]")
    assert t.loc[t["run"] == "l-diversity (k=3, l=3)", "risk: linkability"].iloc[0] == ""
    assert "| risk: singling out (uni) |" in to_markdown(t)


def test_risk_text_by_hand():
    assert risk_text({"risk_linkability": 0.0, "risk_linkability_low": 0.0, "risk_linkability_high": 0.0192087},
                     "linkability") == "0.000 [0.000, 0.019]"
    assert risk_text({"risk_linkability": float("nan")}, "linkability") == ""


def test_frontier_plot_is_a_png(swept, tmp_path):
    _, res = swept
    assert plot_sweep_attacks(res, str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").read_bytes()[:8] == PNG_SIGNATURE
    assert not plot_sweep_attacks(res.drop(columns=ATTACK_COLUMNS), str(tmp_path / "none.png"))
    assert not (tmp_path / "none.png").exists()


def _sweep(tmp_path, *extra):
    load_adult().head(600).to_csv(tmp_path / "in.csv", index=False)
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", "sweep", str(tmp_path / "in.csv"), "--qi", ",".join(QI),
                           "--sensitive", "income", "--target", "income", "--k-values", "3,10", "--l-values", "",
                           "--t-values", "", "--out", str(tmp_path / "s.csv"), *extra],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def test_cli_sweep_attacks_writes_the_risk_columns_and_the_frontier(tmp_path):
    p = _sweep(tmp_path, "--attacks", "20", "--control-fraction", "0.25", "--seed", "3")
    assert p.returncode == 0, p.stderr
    res = pd.read_csv(tmp_path / "s.csv", keep_default_na=False, na_values=[""])
    assert set(ATTACK_COLUMNS) <= set(res.columns) and res["risk_singling_out_univariate"].notna().all()
    # the control rows (150 of 600) are not in any grid point's release; the risks are the seeded attacks'
    rest, control = split_control(load_adult().head(600), 0.25, seed=3)
    m = Mondrian(k=10, quasi_identifiers=QI, sensitive="income", target="income", backend="cpu", progress=False)
    want = attack_columns(attack_release(m.fit_transform(rest), rest, control, quasi_identifiers=QI, secret="income",
                                         n_attacks=20, seed=3))
    got = res[(res["criterion"] == "k-anonymity") & (res["k"] == 10)].iloc[0]
    assert got["risk_inference"] == pytest.approx(want["risk_inference"], rel=1e-12)
    assert got["risk_singling_out_multivariate"] == pytest.approx(want["risk_singling_out_multivariate"], rel=1e-12)
    assert (tmp_path / "s_frontier.png").read_bytes()[:8] == PNG_SIGNATURE
    assert "risk: singling out (multi)" in (tmp_path / "s_table.md").read_text()
    assert "risks: singling out" in p.stderr


@pytest.mark.parametrize("args,words", [(["--control-fraction", "0.5"], "--control-fraction belongs to --attacks"),
                                        (["--attack-plot", "a.png"], "--attack-plot belongs to --attacks"),
                                        (["--attacks", "0"], "--attacks 0"),
                                        (["--attacks", "--control-fraction", "2"], "--control-fraction 2")])
def test_cli_sweep_attack_errors(tmp_path, args, words):
    p = _sweep(tmp_path, *args)
    assert p.returncode != 0 and words in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "s.csv").exists()
