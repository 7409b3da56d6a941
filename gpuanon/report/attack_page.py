"""The attack page (``gpuanon attack --release ... --html``): each risk with its interval, the attack,
control and baseline rates, the warnings, and which columns carried the successful singling-out
predicates; a plot of the risks with their intervals. The rows are :mod:`~gpuanon.report.attack_rows`'s,
as on the anonymize page's attack section."""

from __future__ import annotations

import json

from ..output.jsonsafe import json_safe
from .attack_rows import carrier_rows, risk_plot, risk_row
from .render import fmt, render_page


def attack_rows(doc: dict) -> list:
    """One row per attack (and the tie-aware linkability), already formatted."""
    items = []
    for mode, r in (doc.get("singling_out") or {}).items():
        items.append((f"singling out, {mode}", r))
    if doc.get("linkability"):
        r = doc["linkability"]
        items.append((f"linkability, {r['n_neighbours']} neighbour(s)", r))
        items.append(("linkability, ties broken at random", {**r, **r["tie_aware"]}))
        items.append(("linkability, ties kept (upper bound)", {**r, **r["ties_kept"]}))
    for s, r in (doc.get("inference") or {}).items():
        items.append((f"inference of '{s}'", r))
    return [risk_row(name, r) for name, r in items]


def render_attack_html(doc: dict, *, title: str = "gpuanon attacks on a release", header: str = "") -> str:
    so = doc.get("singling_out") or {}
    carriers = carrier_rows((so.get("univariate") or {}).get("columns_of_successes"),
                            (so.get("multivariate") or {}).get("columns_of_successes"))
    raw = [(f"singling out, {m}", r) for m, r in so.items()]
    if doc.get("linkability"):
        raw += [("linkability", doc["linkability"]), ("linkability, random ties", doc["linkability"]["tie_aware"]),
                ("linkability, ties kept", doc["linkability"]["ties_kept"])]
    raw += [(f"inference of '{s}'", r) for s, r in (doc.get("inference") or {}).items()]
    return render_page("attack.html", title=title, header=header, confidence=fmt(doc.get("confidence_level")),
                       rows=attack_rows(doc), carriers=carriers, plots=risk_plot(raw), json_summary="attack JSON",
                       raw_json=json.dumps(json_safe(doc), indent=1, allow_nan=False)[:200_000])
