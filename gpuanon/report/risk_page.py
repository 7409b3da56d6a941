"""The risk page: re-identification risk of a table (``gpuanon risk --html``), or before and after an
anonymization, with plots read at a glance: prosecutor records at risk against the threshold and the
class-size distribution, before / after.

``before`` / ``after`` are :meth:`gpuanon.risk.RiskResult.to_dict` documents (either may be None).
"""

from __future__ import annotations

import json

import numpy as np

from ..jsonsafe import json_safe
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
         ("individual risk: share", ("individual", "global_risk_share"))]


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
    from matplotlib.ticker import ScalarFormatter  # noqa: PLC0415

    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("class size (rows)")
    ax.set_ylabel("share of rows, cumulative")
    ax.set_ylim(0, 1.02)
    ax.set_title("Class-size distribution: rows in classes of at most this size")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    return png_uri(fig)


def risk_context(risk: dict | None) -> dict | None:
    """The anonymize page's risk section from the report's ``risk`` (``{"before", "after", "threshold"}``)."""
    if not risk:
        return None
    before, after, tau = risk.get("before"), risk.get("after"), risk.get("threshold", 0.2)
    return {"threshold": fmt(tau), "rows": measure_rows(before, after),
            "plots": [("records at risk against the threshold", risk_curve_plot(before, after, tau)),
                      ("class-size distribution", class_size_plot(before, after))]}


def render_risk_html(before: dict | None, after: dict | None, *, title: str = "gpuanon re-identification risk",
                     header: str = "", threshold: float = 0.2) -> str:
    """The page for one table (``after`` only) or a before / after pair."""
    plots = [("records at risk against the threshold", risk_curve_plot(before, after, threshold)),
             ("class-size distribution", class_size_plot(before, after))]
    suda = [(side, doc["suda"]) for side, doc in (("before", before), ("after", after)) if doc and doc.get("suda")]
    return render_page("risk.html", title=title, header=header, threshold=fmt(threshold),
                       pair=before is not None and after is not None, rows=measure_rows(before, after),
                       qi=", ".join((after or before or {}).get("quasi_identifiers", [])), plots=plots, suda=suda,
                       json_summary="risk JSON", raw_json=json.dumps(json_safe({"before": before, "after": after}), indent=1, allow_nan=False)[:200_000])
