"""The evaluation page's attack section (``gpuanon evaluate --attacks``): each protection's risks with
their intervals, attack, control and baseline rates, the columns that carried the successful
singling-out predicates, and the privacy-utility frontier (mean accuracy against attack risk)."""

from __future__ import annotations

from .plots import png_uri, pyplot
from .render import fmt

TITLES = {"singling_out_univariate": "singling out, univariate", "singling_out_multivariate": "singling out, multivariate",
          "linkability": "linkability", "linkability_tie_aware": "linkability, ties at random", "inference": "inference"}


def _frontier(points: dict) -> str:
    """Mean accuracy against each attack's risk (one series per attack, one point per protection)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    cmap = plt.get_cmap("tab10")
    for i, (kind, pts) in enumerate(points.items()):
        pts = sorted(pts, key=lambda t: t[1])
        xs, ys = [t[1] for t in pts], [t[3] for t in pts]
        err = [[x - t[2][0] for x, t in zip(xs, pts)], [t[2][1] - x for x, t in zip(xs, pts)]]
        ax.errorbar(xs, ys, xerr=err, fmt="o", color=cmap(i % 10), label=TITLES.get(kind, kind), capsize=3, ms=4)
        for name, x, _, y in pts:
            ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("attack risk (interval at the confidence level)")
    ax.set_ylabel("mean accuracy over the models")
    ax.set_title("Privacy-utility frontier: accuracy against attack risk, per protection")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return png_uri(fig)


def attack_section(ev: dict, results) -> dict | None:
    """The section's context (every value formatted), or None when the evaluation ran no attacks."""
    prots = [p for p in ev.get("protections", []) if p.get("attacks")]
    if not prots:
        return None
    acc = results.groupby("protection", sort=False)["accuracy"].mean()
    rows, points = [], {}
    for p in prots:
        for kind, r in p["attacks"].items():
            cols = r.get("columns_of_successes") or {}
            carried = ", ".join(f"{c} ({n})" for c, n in sorted(cols.items(), key=lambda t: -t[1]) if n)
            rows.append([fmt(p["protection"]), TITLES.get(kind, kind), fmt(r["risk"]),
                         f"[{fmt(r['ci'][0])}, {fmt(r['ci'][1])}]", fmt(r["attack_rate"]), fmt(r["control_rate"]),
                         fmt(r["baseline_rate"]), carried or ("–" if cols else ""), "; ".join(r.get("warnings") or [])])
            if r["risk"] is not None and p["protection"] in acc.index and kind != "linkability_tie_aware":
                points.setdefault(kind, []).append((str(p["protection"]), r["risk"], r["ci"],
                                                    float(acc[p["protection"]])))
    return {"rows": rows, "n_attacks": fmt(ev.get("config", {}).get("attacks")),
            "frontier": _frontier(points) if points else ""}
