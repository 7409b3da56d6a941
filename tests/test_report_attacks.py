"""The anonymize page's attack section (``anonymize --attacks --html``): the risks of the JSON report with their
intervals and rates, the warnings, the control, and the columns of the successful singling-out predicates; built
by the same row builder as the attack page."""

import html as html_mod
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuanon.datasets import get_dataset
from gpuanon.report import render_html
from gpuanon.report.attack_page import attack_rows
from gpuanon.report.attack_rows import carrier_rows, risk_row, summary_context
from gpuanon.report.render import fmt

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The thesis QIs at k = 10 on 600 Adult rows, a quarter held out as the control."""
    tmp = tmp_path_factory.mktemp("anon")
    df, _ = get_dataset("adult")
    df.iloc[:600].to_csv(tmp / "in.csv", index=False)
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "gpuanon", "anonymize", str(tmp / "in.csv"), "--qi",
                        "age,education,marital-status,race,gender", "--sensitive", "income", "--k", "10",
                        "--out", str(tmp / "out.csv"), "--report", str(tmp / "r.json"), "--html", str(tmp / "r.html"),
                        "--attacks", "80", "--control-fraction", "0.25"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads((tmp / "r.json").read_text()), (tmp / "r.html").read_text()


def _section(page: str) -> str:
    i = page.index("Attacks on the output</h2>")
    return page[i:page.index("<h2>Timing</h2>", i)]


def _cells(section: str) -> list:
    """The attack table's rows as lists of cell texts (unescaped)."""
    table = section[:section.index("</table>")]
    return [[html_mod.unescape(c) for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]


def test_page_shows_each_risk_of_the_json_with_its_interval_and_rates(run):
    doc, page = run
    risks = doc["attacks"]["risks"]
    rows = _cells(_section(page))
    names = ["singling out, univariate", "singling out, multivariate", "linkability", "linkability, ties at random",
             "inference of 'income'"]
    assert [r[0] for r in rows] == names
    for (kind, r), cells in zip(risks.items(), rows):
        assert cells[1] == fmt(r["risk"])
        assert cells[2] == f"[{fmt(r['ci'][0])}, {fmt(r['ci'][1])}]"
        assert cells[3:6] == [fmt(r["attack_rate"]), fmt(r["control_rate"]), fmt(r["baseline_rate"])]
        assert cells[6] == f"{fmt(r['n_success'])} / 80"
        assert cells[7] == "; ".join(r["warnings"]), kind
    assert "control: 150 input rows held out of the release (--control-fraction 0.25)" in _section(page)


def test_page_names_the_columns_of_the_successful_predicates(run):
    doc, page = run
    sec = _section(page)
    carriers = re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td><td>(\d+)</td></tr>",
                          sec[sec.index("Columns of the successful singling-out predicates"):])
    uni = doc["attacks"]["risks"]["singling_out_univariate"]["columns_of_successes"]
    multi = doc["attacks"]["risks"]["singling_out_multivariate"]["columns_of_successes"]
    # fnlwgt passes through the k = 10 release: it carries the most successful predicates
    assert carriers[0][0] == "fnlwgt"
    assert {c: (int(u), int(m)) for c, u, m in carriers} == {
        c: (uni.get(c, 0), multi.get(c, 0)) for c in set(uni) | set(multi) if uni.get(c, 0) + multi.get(c, 0)}
    assert sec.count("data:image/png;base64,") == 1  # the risks with their intervals


def test_a_warning_reaches_the_page():
    risks = {"linkability": {"risk": 0.0, "ci": [0.0, 0.02], "attack_rate": 0.0185, "control_rate": None,
                             "baseline_rate": 0.0185, "n_success": 0, "n_attacks": 100,
                             "warnings": ["the attack does no better than the baseline: results cannot be trusted"]}}
    ctx = summary_context({"n_attacks": 100, "control_rows": None, "control_fraction": None, "risks": risks})
    assert ctx["rows"][0]["note"].endswith("results cannot be trusted") and ctx["rows"][0]["control"] == "–"
    assert ctx["control"] == "no control rows: the risk is the attack rate" and ctx["carriers"] == []
    page = render_html({"attacks": {"n_attacks": 100, "risks": risks}})
    assert "results cannot be trusted" in _section(page)


def test_no_attacks_no_section():
    assert "Attacks on the output" not in render_html({})
    assert summary_context({"n_attacks": 5, "risks": {}}) is None


def test_one_row_builder_for_the_full_report_and_the_summary():
    """The attack page's rows (a full report's entry: rates with their errors) and the anonymize page's (its
    summary: the values) show the risk, interval and successes the same way."""
    full = {"risk": {"value": 0.25, "ci": [0.125, 0.375]}, "attack_rate": {"value": 0.4, "error": 0.05},
            "control_rate": {"value": 0.2, "error": 0.04}, "baseline_rate": {"value": 0.01, "error": 0.001},
            "n_success": 20, "n_attacks": 50, "warnings": []}
    summary = {"risk": 0.25, "ci": [0.125, 0.375], "attack_rate": 0.4, "control_rate": 0.2, "baseline_rate": 0.01,
               "n_success": 20, "n_attacks": 50, "warnings": []}
    a, b = risk_row("x", full), risk_row("x", summary)
    assert (a["risk"], a["ci"], a["success"]) == (b["risk"], b["ci"], b["success"]) == ("0.25", "[0.125, 0.375]",
                                                                                        "20 / 50")
    assert (a["attack"], b["attack"]) == ("0.4 ± 0.05", "0.4")
    doc = {"inference": {"y": full}}
    assert attack_rows(doc) == [risk_row("inference of 'y'", full)]
    assert carrier_rows(None, {"a": 0}) == []
