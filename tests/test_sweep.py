"""Sweeps over k, l and t: one verified, scored row per run; impossible runs reported, not raised."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpuanon import Mondrian
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
from gpuanon.anonymize.sweep import COLUMNS, grid, run_sweep, thesis_table, to_markdown

ROOT = Path(__file__).resolve().parents[1]
KS = [3, 4, 5, 8, 10, 20]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def df():
    return load_adult().head(4000)


@pytest.fixture(scope="module")
def res(df):
    # income has 2 distinct values: l = 2 works, l = 3 is impossible
    return run_sweep(df, ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income", ks=KS, ls=[2, 3],
                     ts=[0.3], backend="cpu", optimized_variant=False)


def test_default_sweep_adds_the_optimized_variant_first(df):
    r = run_sweep(df, ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income", ks=[3, 5], ls=[], ts=[],
                  backend="cpu")
    assert r["criterion"].tolist() == ["optimized k-anonymity", "k-anonymity", "k-anonymity"]
    assert r["verified"].map(bool).all() and (r["achieved_k"] >= r["k"]).all()
    # exact-match classes are extra classes: never fewer than the standard run at the same k
    assert r["n_classes"].iloc[0] >= r["n_classes"].iloc[1]
    assert thesis_table(r)["run"].tolist()[:2] == ["optimized k-anonymity (k=3)", "k-anonymity (k=3)"]


def test_one_row_per_run_with_every_column(res):
    assert len(res) == len(KS) + 2 + 1
    for c in ("criterion", "k", "l", "t", "n_classes", "entropy_loss", "ncp", "dm", "cm", "seconds", "error"):
        assert c in res.columns, c
    assert list(res.columns) == COLUMNS + ["error"]
    assert res["criterion"].tolist() == ["k-anonymity"] * len(KS) + ["l-diversity"] * 2 + ["t-closeness"]
    assert res["k"].tolist() == KS + [3, 3, 3]
    assert res["l"].tolist() == [0] * len(KS) + [2, 3, 0]
    assert res["t"].isna().sum() == len(KS) + 2 and res["t"].iloc[-1] == pytest.approx(0.3)
    assert (res["seconds"] >= 0).all()
    assert [r["criterion"] for r in grid(KS, [2, 3], [0.3])] == res["criterion"].tolist()


def test_every_possible_run_is_verified_and_meets_its_criteria(res):
    ok = res[res["error"] == ""]
    assert len(ok) == len(res) - 1
    assert ok["verified"].map(bool).all()
    assert (ok["achieved_k"] >= ok["k"]).all()
    lrow = ok[ok["criterion"] == "l-diversity"].iloc[0]
    assert lrow["achieved_l"] >= 2
    trow = ok[ok["criterion"] == "t-closeness"].iloc[0]
    assert trow["achieved_t"] <= 0.3 + 1e-9
    for c in ("n_classes", "entropy_loss", "ncp", "dm", "cm", "c_avg", "gionis_tassa_normalized"):
        assert ok[c].notna().all(), c
    assert (ok["n_suppressed"] == 0).all()
    # DM >= N^2 / #classes (Cauchy-Schwarz), C_avg >= 1, CM and NCP in [0, 1]
    assert (ok["dm"] >= 4000 ** 2 / ok["n_classes"] - 1e-6).all()
    assert (ok["c_avg"] >= 1).all() and ok["cm"].between(0, 1).all() and ok["ncp"].between(0, 1).all()


def test_k_anonymity_rows_trend_with_k(res):
    kr = res[res["criterion"] == "k-anonymity"].sort_values("k")
    # Not guaranteed for Mondrian in general; checked to hold on this slice of Adult
    # (1026, 748, 599, 370, 291, 144 classes; NCP 0.061 .. 0.248).
    assert kr["n_classes"].is_monotonic_decreasing
    assert kr["ncp"].is_monotonic_increasing
    # always true: every class has >= k rows, so #classes <= N / k, and DM >= k * N
    assert (kr["n_classes"] <= 4000 / kr["k"]).all()
    assert (kr["dm"] >= kr["k"] * 4000).all()


def test_sweep_rows_match_single_runs(df, res):
    # the sweep encodes once and reuses per-column statistics: a row equals a fresh fit
    for crit, kw in (("k-anonymity", {"k": 5}), ("l-diversity", {"k": 3, "l": 2}),
                     ("t-closeness", {"k": 3, "t": 0.3})):
        m = Mondrian(quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
                     backend="cpu", progress=False, **kw)
        m.fit_transform(df)
        met = m.report_["metrics"]
        sel = res[(res["criterion"] == crit) & (res["k"] == kw["k"])]
        row = sel.iloc[0]
        assert row["n_classes"] == m.report_["n_classes"]
        for c in ("entropy_loss", "ncp", "dm", "cm", "c_avg"):
            assert row[c] == pytest.approx(met[c], rel=1e-12), (crit, c)
        assert row["gionis_tassa_normalized"] == pytest.approx(met["gionis_tassa"]["normalized"], rel=1e-12)


def test_impossible_run_is_reported_not_raised(res):
    bad = res[(res["criterion"] == "l-diversity") & (res["l"] == 3)]
    assert len(bad) == 1
    row = bad.iloc[0]
    assert "l-diversity" in row["error"] and "distinct" in row["error"]
    assert not row["verified"]
    assert math.isnan(row["n_classes"]) and math.isnan(row["dm"])


def test_empty_grid_is_an_error(df):
    with pytest.raises(ValueError, match="empty"):
        run_sweep(df, ADULT_QUASI_IDENTIFIERS, sensitive="income", ks=[], ls=[], ts=[], backend="cpu")


def test_thesis_table_shape(res):
    t = thesis_table(res, base_k=3)
    assert list(t.columns) == ["run", "classes", "entropy_loss_%", "ncp", "dm", "cm"]
    # k-anonymity at base_k, then every l and t run (the impossible one as an empty row)
    assert t["run"].tolist() == ["k-anonymity (k=3)", "l-diversity (k=3, l=2)", "l-diversity (k=3, l=3)",
                                 "t-closeness (k=3, t=0.3)"]
    k3 = res[(res["criterion"] == "k-anonymity") & (res["k"] == 3)].iloc[0]
    assert t["entropy_loss_%"].iloc[0] == pytest.approx(round(100 * k3["entropy_loss"], 2))
    assert t["dm"].iloc[0] == k3["dm"]
    assert t.iloc[2][["classes", "entropy_loss_%", "ncp", "dm", "cm"]].isna().all()
    md = to_markdown(t).splitlines()
    assert len(md) == 2 + len(t)
    assert md[0] == "| run | classes | entropy_loss_% | ncp | dm | cm |"
    assert md[1].count("---") == 6
    assert all(line.startswith("| ") and line.endswith(" |") for line in md)
    assert "| l-diversity (k=3, l=3) |  |  |  |  |  |" in md


@pytest.mark.slow
def test_cli_sweep_writes_csv_png_and_markdown(tmp_path):
    out = tmp_path / "s.csv"
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "gpuanon", "sweep", "--dataset", "adult", "--k-values", "3,5",
                        "--l-values", "2", "--t-values", "0.3", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = pd.read_csv(out)
    assert len(res) == 5
    assert res["criterion"].tolist() == ["optimized k-anonymity", "k-anonymity", "k-anonymity", "l-diversity",
                                         "t-closeness"]
    assert res["verified"].all()
    assert (res["achieved_k"] >= res["k"]).all()
    png = tmp_path / "s.png"
    assert png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 10_000
    md = (tmp_path / "s_table.md").read_text()
    assert md.startswith("| run | classes |")
    assert "k-anonymity (k=3)" in md and "l-diversity (k=3, l=2)" in md and "t-closeness (k=3, t=0.3)" in md
    assert md in r.stdout  # the table is also printed


def test_markdown_keeps_dm_exact_when_a_run_failed():
    rows = [
        {"criterion": "k-anonymity", "k": 3, "l": 0, "t": None, "n_classes": 10, "entropy_loss": 0.1,
         "ncp": 0.2, "dm": 1234567.0, "cm": 0.1, "error": ""},
        {"criterion": "l-diversity", "k": 3, "l": 9, "t": None, "n_classes": None, "entropy_loss": None,
         "ncp": None, "dm": None, "cm": None, "error": "the whole table fails l-diversity"},
    ]
    md = to_markdown(thesis_table(pd.DataFrame(rows)))
    assert "| 1234567 |" in md, md


def test_loss_rises_with_k_and_the_label_reading_is_a_diagnostic(res):
    from scipy.stats import spearmanr

    k = res[(res["criterion"] == "k-anonymity") & res["n_classes"].notna()]
    # SPEC section 7 (amended): the loss grows with k; the label reading falls (a label carries its class)
    assert spearmanr(k["k"], k["entropy_loss"]).statistic >= 0.8
    assert (k["entropy_loss"].between(0, 1)).all()
    assert k["entropy_loss_labels"].notna().all()
    assert (k["rho"].fillna("") == "").all()  # no hierarchies, no rho


def test_thesis_table_beside_the_thesis(res):
    from gpuanon.anonymize.sweep import THESIS_TABLE_5_4

    t = thesis_table(res, base_k=3, reference=THESIS_TABLE_5_4)
    assert list(t.columns) == ["run", "classes", "entropy_loss_%", "ncp", "dm", "cm", "thesis_partitions",
                               "thesis_loss_%"]
    row = t[t["run"] == "k-anonymity (k=3)"].iloc[0]
    assert (row["thesis_partitions"], row["thesis_loss_%"]) == (9246, 7.46)
    assert pd.isna(t[t["run"] == "l-diversity (k=3, l=3)"].iloc[0]["thesis_loss_%"])  # not in the thesis


def test_metric_columns_name_the_chosen_rho():
    from gpuanon.anonymize.sweep import metric_columns

    met = {"entropy_loss": 0.1, "entropy_loss_labels": -0.2, "ncp": 0.3, "dm": 4, "cm": 0.5, "c_avg": 1.5,
           "gionis_tassa": {"normalized": 0.6}}
    row = metric_columns(met, {"education": {"rho": 10}, "race": {"rho": 2.5}, "zip": {"rho": None}})
    assert row["rho"] == "education=10;race=2.5"
    assert row["entropy_loss_labels"] == -0.2 and row["gionis_tassa_normalized"] == 0.6
    assert metric_columns(met)["rho"] == ""
