"""The risk page: re-identification risk of a table (``gpuanon risk --html``), or before and after an
anonymization, with plots read at a glance: prosecutor records at risk against the threshold and the
class-size distribution, and with SUDA the DIS-SUDA scores in sdcMicro's bands and each QI's
contribution, before / after.

``before`` / ``after`` are :meth:`gpuanon.risk.RiskResult.to_dict` documents (either may be None).
"""

from __future__ import annotations

import json

import numpy as np

from ..output.jsonsafe import json_safe
from .render import fmt, render_page
from .plots import png_uri, pyplot

_ROWS = [("rows counted (n)", ("sample", "n")), ("rows left out (every QI suppressed)", ("sample", "n_suppressed")),
         ("classes (J)", ("sample", "n_classes")), ("sample uniques", ("sample", "sample_uniques")),
         ("sample uniqueness", ("sample", "sample_uniqueness")),
         ("prosecutor: highest risk", ("sample", "prosecutor", "highest")),
         ("prosecutor: lowest risk", ("sample", "prosecutor", "lowest")),
         ("prosecutor: success rate (J / n)", ("sample", "prosecutor", "average")),
         ("prosecutor: records at risk", ("sample", "prosecutor", "records_at_risk")),
         ("journalist: highest risk", ("sample", "journalist", "highest")),
         ("journalist: success rate", ("sample", "journalist", "average")),
         ("journalist: records at risk", ("sample", "journalist", "records_at_risk")),
         ("marketer: success rate", ("sample", "marketer", "average")),
         ("population uniques (Dankar)", ("population", "dankar", "uniques")),
         ("population uniqueness (Dankar)", ("population", "dankar", "fraction")),
         ("Dankar's model", ("population", "dankar", "model")),
         ("Zayatz", ("population", "zayatz", "fraction")), ("Pitman", ("population", "pitman", "fraction")),
         ("SNB", ("population", "snb", "fraction")),
         ("individual risk: expected re-identifications", ("individual", "global_risk")),
         ("individual risk: share", ("individual", "global_risk_share")),
         ("SUDA: records with a minimal sample unique", ("suda", "records_with_msu")),
         ("SUDA: minimal sample uniques (MSUs)", ("suda", "msu_total")),
         ("SUDA: highest score", ("suda", "score_max")),
         ("DIS-SUDA: file-level disclosure probability", ("suda", "dis")),
         ("DIS-SUDA: highest score", ("suda", "dis_max")), ("DIS-SUDA: mean score", ("suda", "dis_mean"))]


def _get(doc, path):
    for p in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(p)
    return doc


def measure_rows(before: dict | None, after: dict | None) -> list:
    """``[(title, before text, after text)]`` for every measure present on either side."""
    rows = []
    for title, path in _ROWS:
        b, a = _get(before, path), _get(after, path)
        if b is None and a is None:
            continue
        rows.append((title, fmt(b), fmt(a)))
    return rows


def _sides(before, after):
    """``(doc, legend label, colour)`` of each side; one table alone is "table"."""
    if before is None or after is None:
        return [(before or after, "table", "#4c72b0")]
    return [(before, "before", "#4c72b0"), (after, "after", "#dd8452")]


def _curve(doc: dict, taus: np.ndarray) -> np.ndarray:
    """Prosecutor records at risk at each tau, exactly, from the class-size histogram."""
    h = doc["class_size_histogram"]
    s = np.array([int(k) for k in h], dtype=float)
    rows = s * np.array(list(h.values()), dtype=float)
    n = rows.sum()
    return np.array([rows[1.0 / s > t].sum() / n if n else 0.0 for t in taus])


def risk_curve_plot(before: dict | None, after: dict | None, threshold: float) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    taus = np.linspace(0.0, 1.0, 801)
    for doc, label, color in _sides(before, after):
        if doc and doc["class_size_histogram"]:
            ax.step(taus, _curve(doc, taus), where="post", label=label, color=color)
    ax.axvline(threshold, color="#c44e52", linestyle="--", label=f"threshold {threshold:g}")
    ax.set_xlabel("threshold tau (a record is at risk when 1 / its class size > tau)")
    ax.set_ylabel("records at risk (share)")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0, 1)
    ax.set_title("Prosecutor records at risk against the threshold")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return png_uri(fig)


def class_size_plot(before: dict | None, after: dict | None) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for doc, label, color in _sides(before, after):
        if doc and doc["class_size_histogram"]:
            h = doc["class_size_histogram"]
            s = np.array([int(k) for k in h], dtype=float)
            c = np.array(list(h.values()), dtype=float)
            order = np.argsort(s)
            ax.step(s[order], np.cumsum((s * c)[order]) / (s * c).sum(), where="post", label=label, color=color)
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("class size (rows)")
    ax.set_ylabel("share of rows, cumulative")
    ax.set_ylim(0, 1.02)
    ax.set_title("Class-size distribution: rows in classes of at most this size")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return png_uri(fig)


def _suda_sides(before, after):
    """``(suda dict, label, colour)`` of each side that has SUDA."""
    return [(d["suda"], label, color) for d, label, color in _sides(before, after) if d and d.get("suda")]


def _bars(ax, labels, sides, values, horizontal=False):
    """Grouped bars: one group per label, one bar per side (``values[i][j]``: side i, label j)."""
    width = 0.8 / len(sides)
    x = np.arange(len(labels))
    for i, (_, label, color) in enumerate(sides):
        pos = x + (i - (len(sides) - 1) / 2) * width
        (ax.barh if horizontal else ax.bar)(pos, values[i], width, label=label, color=color)
    return x


def dis_suda_plot(before: dict | None, after: dict | None) -> str:
    """Records per DIS-SUDA band (sdcMicro's ``print.suda2``: 0, (0, 0.1], ..., > 0.7), before / after."""
    plt = pyplot()
    sides = _suda_sides(before, after)
    bands = list(sides[0][0]["histogram"])
    counts = [[s["histogram"].get(b, 0) for b in bands] for s, _, _ in sides]
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    x = _bars(ax, bands, sides, counts)
    width = 0.8 / len(sides)
    for i, row in enumerate(counts):  # the count above each bar: the log axis hides small ones' size
        for j, c in enumerate(row):
            if c:
                ax.annotate(f"{c:,}", (x[j] + (i - (len(sides) - 1) / 2) * width, c), ha="center", va="bottom",
                            fontsize=7, rotation=90 if len(sides) > 1 else 0, xytext=(0, 2),
                            textcoords="offset points")
    ax.set_yscale("log")
    top = max(max(r) for r in counts)
    ax.set_ylim(0.8, max(10, top) * (30 if len(sides) > 1 else 4))
    ax.set_xticks(x, bands, rotation=30, ha="right")
    ax.set_xlabel("DIS-SUDA score band")
    ax.set_ylabel("records (log)")
    ax.set_title("DIS-SUDA scores: records per band (an empty band has no bar)")
    ax.legend(frameon=False, loc="upper right", ncol=len(sides))
    ax.grid(axis="y", alpha=0.3)
    return png_uri(fig)


def suda_contributions_plot(before: dict | None, after: dict | None) -> str:
    """Each QI's share of the SUDA scores (its MSUs' scores over the total), before / after."""
    plt = pyplot()
    sides = _suda_sides(before, after)
    qis = list(dict.fromkeys(q for s, _, _ in sides for q in s["contributions"]))
    qis.sort(key=lambda q: -max(s["contributions"].get(q, 0.0) for s, _, _ in sides))
    values = [[100 * s["contributions"].get(q, 0.0) for q in qis] for s, _, _ in sides]
    fig, ax = plt.subplots(figsize=(6.5, max(2.4, 0.22 * len(qis) * len(sides) + 1.4)))
    none = [label for s, label, _ in sides if not s.get("msu_total")]
    y = _bars(ax, qis, [(s, label + (" (no MSU)" if label in none else ""), c) for s, label, c in sides], values,
              horizontal=True)
    ax.set_yticks(y, qis)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.0, max(max(v) for v in values)) * 1.12)
    ax.set_xlabel("share of the SUDA scores from MSUs containing the QI (%);\nan MSU of several QIs counts for each")
    ax.set_title("Contribution of each quasi-identifier to the special uniques")
    ax.legend(frameon=False, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return png_uri(fig)


def risk_plots(before: dict | None, after: dict | None, threshold: float) -> list:
    """``[(alt text, PNG data URI)]``: the records-at-risk curve and the class sizes."""
    return [("records at risk against the threshold", risk_curve_plot(before, after, threshold)),
            ("class-size distribution", class_size_plot(before, after))]


def suda_plots(before: dict | None, after: dict | None) -> list:
    """The DIS-SUDA bands and the QI contributions, where SUDA ran on a side (else ``[]``)."""
    if not _suda_sides(before, after):
        return []
    return [("DIS-SUDA scores per band", dis_suda_plot(before, after)),
            ("contribution of each quasi-identifier to the SUDA scores", suda_contributions_plot(before, after))]


def risk_context(risk: dict | None) -> dict | None:
    """The anonymize page's risk section from the report's ``risk`` (``{"before", "after", "threshold"}``)."""
    if not risk:
        return None
    before, after, tau = risk.get("before"), risk.get("after"), risk.get("threshold", 0.2)
    return {"threshold": fmt(tau), "rows": measure_rows(before, after), "plots": risk_plots(before, after, tau),
            "suda_plots": suda_plots(before, after)}


def render_risk_html(before: dict | None, after: dict | None, *, title: str = "gpuanon re-identification risk",
                     header: str = "", threshold: float = 0.2) -> str:
    """The page for one table (``after`` only) or a before / after pair."""
    plots = risk_plots(before, after, threshold)
    return render_page("risk.html", title=title, header=header, threshold=fmt(threshold),
                       pair=before is not None and after is not None, rows=measure_rows(before, after),
                       qi=", ".join((after or before or {}).get("quasi_identifiers", [])), plots=plots,
                       suda_plots=suda_plots(before, after),
                       json_summary="risk JSON", raw_json=json.dumps(json_safe({"before": before, "after": after}), indent=1, allow_nan=False)[:200_000])
