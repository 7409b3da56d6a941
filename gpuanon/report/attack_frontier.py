"""The evaluation page's attack section (``gpuanon evaluate --attacks``): each protection's risks with
their intervals, attack, control and baseline rates, the columns that carried the successful
singling-out predicates, and the privacy-utility frontier (mean accuracy against attack risk); and the
sweep's frontier (``gpuanon sweep --attacks``: information loss against attack risk, per grid point)."""

from __future__ import annotations

from .attack_rows import TITLES
from .plots import png_uri, pyplot
from .render import fmt


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


#: the sweep's frontier panels: the risk columns (anonymize/sweep.py ATTACK_COLUMNS) plotted, one panel each
SWEEP_PANELS = ("singling_out_univariate", "singling_out_multivariate", "linkability", "inference")
#: the sweep's information-loss columns on the frontier's y axis (in %), with their markers
SWEEP_LOSSES = (("entropy_loss", "entropy-coefficient loss", "o"), ("ncp", "NCP", "s"))


def sweep_point_label(row) -> str:
    """A grid point's short label on the frontier: 'k=5', 'l=2', 't=0.3', 'opt k=3'.

    >>> sweep_point_label({"criterion": "t-closeness", "k": 3, "l": 0, "t": 0.3})
    't=0.3'
    """
    if row["criterion"] == "l-diversity":
        return f"l={int(row['l'])}"
    if row["criterion"] == "t-closeness":
        return f"t={float(row['t']):g}"
    return ("opt " if row["criterion"] == "optimized k-anonymity" else "") + f"k={int(row['k'])}"


def sweep_frontier_figure(res):
    """The sweep's privacy-utility frontier: information loss (entropy-coefficient loss and NCP, in %)
    against each attack's risk with its interval, one point per grid point (labelled); a matplotlib
    figure, or None when no grid point has a risk."""
    kinds = [k for k in SWEEP_PANELS if f"risk_{k}" in res and res[f"risk_{k}"].notna().any()]
    if not kinds:
        return None
    plt = pyplot()
    cols = min(2, len(kinds))
    rows = -(-len(kinds) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.3 * rows), squeeze=False)
    for ax, kind in zip(axes.ravel(), kinds):
        sub = res[res[f"risk_{kind}"].notna()]
        x = sub[f"risk_{kind}"].astype(float).to_numpy()
        err = [x - sub[f"risk_{kind}_low"].astype(float).to_numpy(), sub[f"risk_{kind}_high"].astype(float).to_numpy() - x]
        for i, (col, name, marker) in enumerate(SWEEP_LOSSES):
            y = 100 * sub[col].astype(float).to_numpy()
            ax.errorbar(x, y, xerr=err, fmt=marker, color=plt.get_cmap("tab10")(i), label=f"{name} (%)", capsize=3,
                        ms=4, alpha=0.85)
            for (_, row), xv, yv in zip(sub.iterrows(), x, y):
                ax.annotate(sweep_point_label(row), (xv, yv), fontsize=7 - i, xytext=(3, 3), textcoords="offset points",
                            color="black" if i == 0 else "#555")
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel(f"{TITLES.get(kind, kind)} risk (interval)")
        ax.set_ylabel("information loss (%)")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=8)
    for ax in axes.ravel()[len(kinds):]:
        ax.axis("off")
    fig.suptitle("Privacy-utility frontier of the sweep: information loss against attack risk, per grid point")
    fig.tight_layout()
    return fig
