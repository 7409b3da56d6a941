"""The risk plots in the pages: the DIS-SUDA bands and the QI contributions appear with ``--suda`` (risk page
and the anonymize page's risk section), before / after in one chart, and not without it; strict JSON."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from gpuanon.report import render_html
from gpuanon.report.risk_page import dis_suda_plot, render_risk_html, risk_context, suda_contributions_plot
from gpuanon.risk import assess

from expected import CHROMIUM, chromium_screenshot, run_cli
from test_report import PNG_SIGNATURE, _png_images, parse

SUDA_ALTS = {"DIS-SUDA scores per band", "contribution of each quasi-identifier to the SUDA scores"}
RAW = pd.DataFrame({"a": list("AABBCDEFGH") * 3, "b": list("xyxyxyzzzw") * 3, "c": [str(i % 7) for i in range(30)]})
ANON = RAW.assign(c="*")


def _docs(suda):
    return (assess(RAW, ["a", "b", "c"], suda=suda).to_dict(), assess(ANON, ["a", "b", "c"], suda=suda).to_dict())


def _strict(doc):
    return json.loads(json.dumps(doc, allow_nan=False), parse_constant=lambda c: pytest.fail(c))


@pytest.mark.parametrize("pair", [True, False])
def test_risk_page_shows_suda_plots_only_with_suda(pair):
    before, after = _docs(True)
    tags, text = parse(render_risk_html(before if pair else None, after))
    imgs = _png_images(tags)
    assert SUDA_ALTS <= set(imgs) and len(imgs) == 4 and all(v[:8] == PNG_SIGNATURE for v in imgs.values())
    assert "Special uniques (SUDA2, DIS-SUDA)" in text and "DIS-SUDA: highest score" in text
    assert "SudaResult" not in text and "{'" not in text  # no raw result text any more
    tags, text = parse(render_risk_html(*_docs(False)))
    assert len(_png_images(tags)) == 2 and "Special uniques" not in text and "DIS-SUDA" not in text


def test_anonymize_page_risk_section_has_suda_plots(tmp_path):
    before, after = _docs(True)
    report = {"risk": {"before": before, "after": after, "threshold": 0.2}}
    assert {alt for alt, _ in risk_context(report["risk"])["suda_plots"]} == SUDA_ALTS
    tags, text = parse(render_html(report))
    assert SUDA_ALTS <= set(_png_images(tags)) and "Special uniques (SUDA2, DIS-SUDA)" in text
    b0, a0 = _docs(False)
    tags, text = parse(render_html({"risk": {"before": b0, "after": a0, "threshold": 0.2}}))
    assert not SUDA_ALTS & set(_png_images(tags)) and "Special uniques" not in text
    doc = _strict(report)  # the report's SUDA part is strict JSON: bands, contributions, Dis (None when U = P = 0)
    assert list(doc["risk"]["before"]["suda"]["histogram"])[0] == "0" and doc["risk"]["after"]["suda"]["dis"] is None


def test_suda_plots_draw_what_the_result_says():
    """The band chart's bars are the histogram's counts (log axis), one group per band, both sides; the
    contribution bars are the shares in percent. Read back from the figure, not the PNG."""
    import matplotlib.pyplot as plt

    before, after = _docs(True)
    shown = {}
    orig = plt.Figure.savefig

    def keep(fig, *a, **kw):
        ax = fig.axes[0]
        shown["heights"] = [p.get_height() for p in ax.patches]
        shown["widths"] = [p.get_width() for p in ax.patches]
        shown["ticks"] = [t.get_text() for t in (ax.get_xticklabels() + ax.get_yticklabels())]
        return orig(fig, *a, **kw)

    plt.Figure.savefig = keep
    try:
        dis_suda_plot(before, after)
        heights = shown["heights"]
        suda_contributions_plot(before, after)
    finally:
        plt.Figure.savefig = orig
    bands = list(before["suda"]["histogram"])
    assert heights == [before["suda"]["histogram"][b] for b in bands] + [after["suda"]["histogram"][b] for b in bands]
    assert after["suda"]["histogram"]["0"] == 30 and before["suda"]["histogram"]["0"] < 30
    qis = sorted(before["suda"]["contributions"], key=lambda q: -before["suda"]["contributions"][q])
    assert np.allclose(shown["widths"][:3], [100 * before["suda"]["contributions"][q] for q in qis])
    assert shown["widths"][3:] == [0.0] * 3 and set(qis) <= set(shown["ticks"])


def _run_pages(tmp_path, suda):
    raw, anon = tmp_path / "raw.csv", tmp_path / "anon.csv"
    RAW.to_csv(raw, index=False)
    ANON.to_csv(anon, index=False)
    rep, html = tmp_path / "r.json", tmp_path / "r.html"
    r = run_cli("risk", str(anon), "--qi", "a,b,c", "--original", str(raw), "--sampling-fraction", "0.1",
                *(["--suda"] if suda else []), "--report", str(rep), "--html", str(html), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return _strict(json.loads(rep.read_text())), html


def test_risk_command_pages_with_and_without_suda(tmp_path):
    doc, html = _run_pages(tmp_path, True)
    assert doc["risk_original"]["suda"]["n_qis"] == 3 and doc["risk"]["suda"]["records_with_msu"] == 0
    tags, text = parse(html.read_text())
    assert SUDA_ALTS <= set(_png_images(tags)) and "raw.csv" in text and str(tmp_path) not in text
    doc, html = _run_pages(tmp_path, False)
    assert doc["risk"]["suda"] is None and "Special uniques" not in parse(html.read_text())[1]


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not installed")
def test_risk_page_renders_in_chromium(tmp_path):
    import matplotlib.image as mpimg

    _, html = _run_pages(tmp_path, True)
    shot = tmp_path / "shot.png"
    r = chromium_screenshot(html, shot, tmp_path, size="1200,3200")
    assert shot.exists(), r.stderr[-2000:]
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (3200, 1200) and pixels.std() > 0
