"""The report's plots: matplotlib figures (Agg) returned as base64 PNG data URIs, embedded in the pages."""

from __future__ import annotations

import base64
import io

import numpy as np

#: information-loss metrics of an evaluation, and their titles in the pages and plots
LOSS_TITLES = {"entropy_loss": "entropy-coefficient loss", "entropy_loss_labels": "entropy loss, label reading",
                "ncp": "NCP", "gionis_tassa": "Gionis-Tassa (normalized)",
                "dm": "discernibility DM", "cm": "classification metric CM", "c_avg": "C_avg"}


def png_uri(fig) -> str:
    """``fig`` as a PNG data URI (110 dpi, tight), the figure closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def entropy_bar_chart(before: dict, after: dict, title: str = "") -> str:
    """Grouped bars of U(target | column) before and after anonymization, as a PNG data URI."""
    plt = pyplot()
    cols = list(before)
    x = np.arange(len(cols))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(cols) + 2), 3.6))
    ax.bar(x - 0.2, [before[c] for c in cols], 0.4, label="original", color="#4c72b0")
    ax.bar(x + 0.2, [after[c] for c in cols], 0.4, label="anonymized", color="#dd8452")
    ax.set_xticks(x, cols, rotation=35, ha="right")
    ax.set_ylabel("U(target | column)")
    ax.set_ylim(0, max(0.05, max(list(before.values()) + list(after.values())) * 1.15))
    ax.set_title(title or "Entropy (uncertainty) coefficient per quasi-identifier")
    ax.legend(frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return png_uri(fig)


def class_size_histogram(hist: dict, k: int | None) -> str:
    """Bar chart of the class-size histogram (edges / counts), as a PNG data URI."""
    plt = pyplot()
    edges, counts = np.asarray(hist["edges"]), np.asarray(hist["counts"])
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#55a868", edgecolor="white")
    if k:
        ax.axvline(k, color="#c44e52", linestyle="--", label=f"k = {k}")
        ax.legend(frameon=False)
    ax.set_xlabel("class size (rows)")
    ax.set_ylabel("classes")
    ax.set_yscale("log" if counts.max() > 50 * max(1, np.median(counts[counts > 0])) else "linear")
    ax.set_title("Equivalence-class sizes")
    ax.grid(axis="y", alpha=0.3)
    return png_uri(fig)


def accuracy_bars(results, score: str = "accuracy") -> str:
    """Grouped bars: one group per model, one bar per protection, as a PNG data URI."""
    plt = pyplot()
    prots = list(dict.fromkeys(results["protection"]))
    models = list(dict.fromkeys(results["model_title"]))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(models) + 2), 3.8))
    w = 0.8 / max(len(prots), 1)
    cmap = plt.get_cmap("tab10")
    for i, p in enumerate(prots):
        sub = results[results["protection"] == p].set_index("model_title")[score]
        ax.bar(np.arange(len(models)) + (i - (len(prots) - 1) / 2) * w, [sub.get(m, np.nan) for m in models], w,
               label=p, color=cmap(i % 10))
    lo = float(np.nanmin(results[score].to_numpy(dtype=float)))
    ax.set_ylim(max(0.0, lo - 0.05), 1.0)
    ax.set_xticks(np.arange(len(models)), models, rotation=25, ha="right")
    ax.set_ylabel(score.replace("_", " "))
    ax.set_title(f"{score.replace('_', ' ').capitalize()} on raw held-out rows, per protection of the training part")
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="protection")
    ax.grid(axis="y", alpha=0.3)
    return png_uri(fig)


def drop_vs_metric(results, correlations: dict) -> str:
    """Accuracy drop against each information-loss metric (one panel per metric, one colour per model)."""
    plt = pyplot()
    metrics = [m for m in LOSS_TITLES if m in results and results[m].notna().any()]
    if not metrics:
        return ""
    cols = 3
    rows = -(-len(metrics) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.3 * rows), squeeze=False)
    cmap = plt.get_cmap("tab10")
    models = list(dict.fromkeys(results["model"]))
    for ax, metric in zip(axes.ravel(), metrics):
        for i, mdl in enumerate(models):
            sub = results[(results["model"] == mdl) & results[metric].notna() & results["accuracy_drop"].notna()]
            ax.scatter(sub[metric].astype(float), sub["accuracy_drop"].astype(float), s=22, color=cmap(i % 10),
                       label=sub["model_title"].iloc[0] if len(sub) else mdl)
        rho = (correlations.get(metric) or {}).get("mean")
        ax.set_title(f"{LOSS_TITLES[metric]}\nSpearman rho (mean drop) = {'n/a' if rho is None else f'{rho:.2f}'}",
                     fontsize=9)
        ax.set_xlabel(metric, fontsize=8)
        ax.set_ylabel("accuracy drop vs raw", fontsize=8)
        ax.axhline(0, color="#999", lw=0.8)
        ax.grid(alpha=0.3)
        if metric == "dm":
            ax.set_xscale("log")
    for ax in axes.ravel()[len(metrics):]:
        ax.axis("off")
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(9, len(labels)), frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return png_uri(fig)
