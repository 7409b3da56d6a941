"""The HTML report: self-contained (no network), plots embedded as valid PNGs, the numbers shown."""

import base64
import io
import os
import re
import shutil
from html.parser import HTMLParser

import pytest

from gpuanon import Mondrian
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
from gpuanon.report import render_html

from expected import CHROMIUM, chromium_screenshot, run_cli

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Collect(HTMLParser):
    """Every tag's attributes, and the visible text (script/style excluded)."""

    def __init__(self):
        super().__init__()
        self.tags, self.text, self._skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("style", "script"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def parse(html):
    p = _Collect()
    p.feed(html)
    return p.tags, " ".join(" ".join(p.text).split())


@pytest.fixture(scope="module")
def report():
    m = Mondrian(k=5, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
                 backend="cpu", progress=False)
    m.fit_transform(load_adult().head(4000))
    return m.report_


@pytest.fixture(scope="module")
def html(report):
    return render_html(report)


def _png_images(tags):
    out = {}
    for tag, attrs in tags:
        if tag == "img":
            src = attrs.get("src", "")
            assert src.startswith("data:image/png;base64,"), src[:80]
            out[attrs.get("alt", "")] = base64.b64decode(src.split(",", 1)[1], validate=True)
    return out


def test_html_is_self_contained(html):
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    tags, _ = parse(html)
    for tag, attrs in tags:
        for a in ("src", "href", "srcset", "data", "action"):
            v = (attrs.get(a) or "").strip().lower()
            assert not v.startswith(("http:", "https:", "//", "file:")), (tag, a, v[:80])
        assert tag not in ("script", "link", "iframe"), tag
    # no remote reference anywhere in markup or CSS (the JSON dump is escaped text, not a src)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "@import" not in html and "url(" not in html


def test_plots_are_embedded_valid_pngs(html):
    import matplotlib.image as mpimg

    tags, _ = parse(html)
    imgs = _png_images(tags)
    assert len(imgs) == 2
    assert any("entropy" in alt for alt in imgs) and any("class size" in alt for alt in imgs)
    for alt, data in imgs.items():
        assert data[:8] == PNG_SIGNATURE, alt
        pixels = mpimg.imread(io.BytesIO(data), format="png")
        assert pixels.shape[0] > 100 and pixels.shape[1] > 200, alt
        assert pixels.std() > 0, alt  # not a blank image


def test_html_shows_k_and_the_metrics(html, report):
    _, text = parse(html)
    m = report["metrics"]
    assert f"achieved k {report['achieved']['k']}" in text
    assert report["achieved"]["k"] >= 5
    # the parameters table: k requested 5, achieved report['achieved']['k']
    assert re.search(rf"\bk 5 {report['achieved']['k']}\b", text)
    assert "Information loss" in text
    for label, value in (("NCP", m["ncp"]), ("discernibility DM", m["dm"]), ("C_avg", m["c_avg"]),
                         ("classification metric CM", m["cm"]), ("entropy-coefficient loss", m["entropy_loss"]),
                         ("Gionis-Tassa, normalized", m["gionis_tassa"]["normalized"])):
        assert f"{label} {value:.6g}" in text, label
    assert f"{100 * m['entropy_loss']:.2f}%" in text
    assert "Entropy coefficient per quasi-identifier" in text and "Class sizes" in text
    # one row per QI in the per-column table
    for c in ADULT_QUASI_IDENTIFIERS:
        assert f"{c} {m['entropy_coefficient_before'][c]:.6g} {m['entropy_coefficient_after'][c]:.6g}" in text, c
    cs = m["class_size"]
    assert f"min {cs['min']} · median {cs['median']:g} · max {cs['max']}" in text


def test_html_escapes_text(report):
    r = dict(report, input="<script>alert(1)</script>")
    html = render_html(r, title="a <b> & c")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<title>a &lt;b&gt; &amp; c</title>" in html


@pytest.fixture(scope="module")
def cli_html(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    r = run_cli("anonymize", "--dataset", "adult", "--k", "5", "--html", str(d / "r.html"), cwd=d)
    assert r.returncode == 0, r.stderr
    return d / "r.html"


@pytest.mark.slow
def test_cli_anonymize_writes_html(cli_html):
    html = cli_html.read_text()
    tags, text = parse(html)
    assert "gpuanon report: dataset:adult" in text
    assert "Independent verification: passed" in text
    k = int(re.search(r"achieved k (\d+)", text).group(1))
    assert k >= 5
    assert "rows in 32561" in text
    imgs = _png_images(tags)
    # class sizes, entropy bars, and the risk section's records at risk and class-size distribution
    assert len(imgs) == 4 and all(v[:8] == PNG_SIGNATURE for v in imgs.values())
    assert {"records at risk against the threshold", "class-size distribution"} <= set(imgs)
    assert "Re-identification risk, before and after" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    for stage in ("read", "encode", "partition", "generalize", "verify", "metrics", "write", "total"):
        assert re.search(rf"\b{stage} \d+\.\d{{3}} s\b", text), stage


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not installed")
def test_html_renders_in_chromium(cli_html, tmp_path):
    import matplotlib.image as mpimg

    shot = tmp_path / "shot.png"
    r = chromium_screenshot(cli_html, shot, tmp_path)
    assert shot.exists(), r.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    data = shot.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    pixels = mpimg.imread(io.BytesIO(data), format="png")
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1000
    assert pixels.std() > 0  # not a single colour
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_html_shows_large_dm_exactly(report):
    r = dict(report, metrics=dict(report["metrics"], dm=2187693.0))
    _, text = parse(render_html(r))
    assert "discernibility DM 2187693" in text


def test_html_shows_hierarchies_and_every_rho_candidate():
    qis = ["age", "workclass", "education", "marital-status"]
    m = Mondrian(k=5, quasi_identifiers=qis, sensitive="income", target="income", hierarchies="auto",
                 backend="cpu", progress=False)
    m.fit_transform(load_adult().head(3000))
    rep = m.report_
    _, text = parse(render_html(rep))
    assert "Generalization hierarchies" in text
    met = rep["metrics"]
    assert f"entropy-coefficient loss, label reading (diagnostic) {met['entropy_loss_labels']:.6g}" in text
    for c, info in rep["hierarchies"].items():
        assert info["candidate_loss"][info["choice"]] == min(info["candidate_loss"].values())
        assert "none" in info["candidates"]  # no hierarchy is a candidate of every automatic column
        # the summary row: column, source, chosen rho (or no hierarchy), height, U before, U after, loss
        rho, height = ("no hierarchy", "–") if info["rho"] is None else (info["rho"], info["height"])
        assert (f"{c} auto {rho} {height} {info['u_before']:.6g} {info['u_after']:.6g} "
                f"{100 * info['loss']:.2f}%") in text, c
        for r, loss in info["candidate_loss"].items():  # every candidate's loss and U after
            assert f"{100 * loss:.2f}% ({info['candidates'][r]:.4g})" in text, (c, r)
    for c in qis:  # U before / after / lost per QI
        b, a = met["entropy_coefficient_before"][c], met["entropy_coefficient_after"][c]
        assert f"{c} {b:.6g} {a:.6g} {100 * (1 - a / b):.2f}%" in text, c


def test_raw_json_in_the_page_is_strict(report):
    r = dict(report)
    r["n_missing"] = {"x": float("nan")}
    r["extra"] = [float("inf"), 1.5]
    page = render_html(r)
    raw = page.split("<pre>")[-1].split("</pre>")[0]
    assert "NaN" not in raw and "Infinity" not in raw and "null" in raw


def test_pages_are_rendered_templates(html):
    """The page comes from the packaged templates: no template syntax left, the packaged style sheet inside."""
    from importlib import resources

    css = resources.files("gpuanon.report").joinpath("templates", "style.css").read_text()
    assert "{{" not in html and "{%" not in html and "{#" not in html
    assert css.strip() in html
    tags, _ = parse(html)
    assert [t for t, _ in tags[:4]] == ["html", "head", "meta", "title"]
    assert sum(t == "h1" for t, _ in tags) == 1 and sum(t == "details" for t, _ in tags) == 1


def _evaluation(protections=("raw", "k=3")):
    rows = []
    for i, p in enumerate(protections):
        for j, (m, title) in enumerate((("lr", "Logistic Regression"), ("nb", "GaussianNB <x>"))):
            acc = 0.8 - 0.05 * i + 0.01 * j
            rows.append({"protection": p, "kind": "raw", "model": m, "model_title": title, "library": "sklearn",
                         "accuracy": acc, "f1_macro": acc - 0.1, "balanced_accuracy": acc - 0.05,
                         "roc_auc": None if m == "nb" else acc + 0.05, "train_seconds": 0.5 + j,
                         "accuracy_drop": 0.05 * i, "ncp": 0.1 * i, "entropy_loss": 0.02 * i})
    corr = {"ncp": {"lr": 1.0, "nb": 1.0, "mean": 1.0}} if "raw" in protections else {}
    return {"results": rows, "config": {"input": "dataset:adult", "target": "income", "n_rows": 100},
            "rank_correlations": corr, "protections": [{"protection": p, "entropy_loss": 0.02 * i, "ncp": 0.1 * i}
                                                        for i, p in enumerate(protections)],
            "libraries": {"lr": "sklearn", "nb": "sklearn"}, "seconds": 1.25}


def test_evaluation_page_marks_the_best_model_and_escapes():
    from gpuanon.report import render_evaluation_html

    page = render_evaluation_html(_evaluation())
    tags, text = parse(page)
    assert "GaussianNB &lt;x&gt;" in page and "<x>" not in page
    # the best model of each protection is bold: nb's accuracy (0.810) under raw, not lr's (0.800)
    assert "<tr><td>GaussianNB &lt;x&gt;</td><td><b>0.810</b></td>" in page
    assert "<tr><td>Logistic Regression</td><td>0.800</td>" in page
    assert "Logistic Regression 0.800 0.700 0.750 0.650" in text
    assert "NCP 1 1 1" in text  # the rank-correlation row: per model, then the mean
    assert "2.00%" in text and "1.2 s" in text
    assert len(_png_images(tags)) == 2  # accuracy bars, drop against the metrics
    _, text = parse(render_evaluation_html(_evaluation(("k=3", "k=10"))))
    assert "No 'raw' protection in this run" in text
