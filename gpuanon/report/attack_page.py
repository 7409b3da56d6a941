"""The attack page (``gpuanon attack --release ... --html``): each risk with its interval, the attack,
control and baseline rates, the warnings, and which columns carried the successful singling-out
predicates; a plot of the risks with their intervals."""

from __future__ import annotations

import json

from ..jsonsafe import json_safe
from .plots import png_uri, pyplot
from .render import fmt, render_page


def _rate(d) -> str:
    return "–" if not d else f"{fmt(d['value'])} ± {fmt(d['error'])}"


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
    rows = []
    for name, r in items:
        risk = r["risk"]
        rows.append({"name": name, "risk": fmt(risk["value"]), "ci": f"[{fmt(risk['ci'][0])}, {fmt(risk['ci'][1])}]",
                     "attack": _rate(r["attack_rate"]), "control": _rate(r.get("control_rate")),
                     "baseline": _rate(r["baseline_rate"]), "success": f"{fmt(r['n_success'])} / {r['n_attacks']}",
                     "note": "; ".join(r.get("warnings") or [])})
    return rows


def _plot(rows_raw: list) -> list:
    if not rows_raw:
        return []
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(rows_raw)))
    names = [n for n, _ in rows_raw]
    vals = [r["risk"]["value"] or 0.0 for _, r in rows_raw]
    lo = [v - (r["risk"]["ci"][0] or 0.0) for v, (_, r) in zip(vals, rows_raw)]
    hi = [(r["risk"]["ci"][1] or 0.0) - v for v, (_, r) in zip(vals, rows_raw)]
    ax.barh(range(len(names)), vals, xerr=[lo, hi], color="#4c72b0", capsize=3)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlim(0, 1.05)
    ax.invert_yaxis()
    ax.set_xlabel("risk (interval at the confidence level)")
    fig.tight_layout()
    return [("risks with their intervals", png_uri(fig))]


def render_attack_html(doc: dict, *, title: str = "gpuanon attacks on a release", header: str = "") -> str:
    so = doc.get("singling_out") or {}
    uni, multi = (so.get("univariate") or {}).get("columns_of_successes", {}), \
        (so.get("multivariate") or {}).get("columns_of_successes", {})
    carriers = sorted(set(uni) | set(multi), key=lambda c: -(uni.get(c, 0) + multi.get(c, 0)))
    carriers = [(c, uni.get(c, 0), multi.get(c, 0)) for c in carriers if uni.get(c, 0) + multi.get(c, 0)]
    raw = [(f"singling out, {m}", r) for m, r in so.items()]
    if doc.get("linkability"):
        raw += [("linkability", doc["linkability"]), ("linkability, random ties", doc["linkability"]["tie_aware"]),
                ("linkability, ties kept", doc["linkability"]["ties_kept"])]
    raw += [(f"inference of '{s}'", r) for s, r in (doc.get("inference") or {}).items()]
    return render_page("attack.html", title=title, header=header, confidence=fmt(doc.get("confidence_level")),
                       rows=attack_rows(doc), carriers=carriers, plots=_plot(raw), json_summary="attack JSON",
                       raw_json=json.dumps(json_safe(doc), indent=1, allow_nan=False)[:200_000])
