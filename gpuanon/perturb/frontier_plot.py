"""The frontier's picture: attack resistance against accuracy, one curve per method (a PNG).

Reads a frontier table (:data:`gpuanon.perturb.frontier.COLUMNS`) and nothing else; matplotlib is
imported only when :func:`plot_frontier` is called.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..output.io import atomic_path

__all__ = ["plot_frontier"]


def plot_frontier(table: pd.DataFrame, path, title: str = "", raw_accuracy: float | None = None) -> None:
    """PNG: attack minimum against mean accuracy, one curve per method, points labelled by noise.

    RP has no noise: its rows are one point, drawn once. ``raw_accuracy`` (the unperturbed
    data's mean accuracy) is drawn as a dotted vertical line. Written atomically.
    """
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415


    style = {"distpab": ("DISTPAB", "tab:blue", "o"), "gp": ("GP (best of 10)", "tab:orange", "s"),
             "rp": ("RP (best of 10, no noise)", "tab:green", "^")}
    fig, ax = plt.subplots(figsize=(7.0, 5.0), dpi=110)
    for method in style:  # the frontier's METHODS, in their order
        t = table[table["method"] == method]
        if t.empty:
            continue
        label, color, marker = style[method]
        if method == "rp":
            label = label.replace("best of 10", f"best of {int(t['draws'].iloc[0])}")
            t = t.iloc[:1]
        elif method == "gp":
            label = label.replace("best of 10", f"best of {int(t['draws'].iloc[0])}")
        ax.plot(t["accuracy_mean"], t["attack_min"], marker=marker, color=color, label=label,
                linestyle="-" if len(t) > 1 else "none", markersize=6)
        if method != "rp":
            for x, yv, nz in zip(t["accuracy_mean"], t["attack_min"], t["noise"]):
                ax.annotate(f"{nz:g}", (x, yv), textcoords="offset points", xytext=(5, 4), fontsize=8,
                            color=color)
    if raw_accuracy is not None and np.isfinite(raw_accuracy):
        ax.axvline(raw_accuracy, color="grey", linestyle=":", linewidth=1,
                   label=f"raw data accuracy ({raw_accuracy:.3f})")
    ax.set_xlabel("mean accuracy (k-NN, SVM, LR; CV on perturbed data)")
    ax.set_ylabel("attack minimum over naive, ICA, known I/O\n(higher resists better)")
    ax.set_title(title or "privacy-utility frontier", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
