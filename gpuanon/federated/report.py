"""The federated run's HTML page: learning curves per protection, final scores beside the centralized
baseline (and the thesis's tables 7.1 / 7.2 on Adult), the silos, the bytes on the wire.

Built like :mod:`gpuanon.report`'s pages: the packaged ``federated.html`` template, matplotlib PNGs
embedded as base64, no external files.
"""

from __future__ import annotations

import json

import numpy as np

from ..report.plots import png_uri, pyplot
from ..report.render import fmt, render_page, table_context

_CURVES = (("accuracy", "accuracy"), ("f1", "F1 (positive class)"), ("loss", "test loss"))


def learning_curves(runs: dict) -> str:
    """Accuracy, F1 and loss of the global model on the raw test rows against the round, one line per run."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    cmap = plt.get_cmap("tab10")
    for i, (name, doc) in enumerate(runs.items()):
        rounds = ([doc["initial"]] if doc.get("initial") else []) + list(doc["rounds"])
        x = [r["round"] for r in rounds]
        for ax, (key, _) in zip(axes, _CURVES):
            ax.plot(x, [r[key] for r in rounds], marker="o", ms=2.5, lw=1.4, color=cmap(i % 10), label=name)
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    for ax, (_, title) in zip(axes, _CURVES):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(frameon=False, fontsize=8, title="protection")
    fig.tight_layout()
    return png_uri(fig)


def final_bars(table: list) -> str:
    """Final federated accuracy and F1 beside the centralized ones, per protection."""
    plt = pyplot()
    prots = [r["protection"] for r in table]
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    x = np.arange(len(prots))
    for ax, key in zip(axes, ("accuracy", "f1")):
        ax.bar(x - 0.2, [r[f"fed_{key}"] for r in table], 0.4, label="federated", color="#4c72b0")
        cen = [r.get(f"central_{key}") for r in table]
        if sum(v is not None for v in cen) > 1:
            ax.bar(x + 0.2, [np.nan if v is None else v for v in cen], 0.4, label="centralized", color="#dd8452")
        elif any(v is not None for v in cen):  # the raw centralized baseline, as a line across
            ax.axhline(next(v for v in cen if v is not None), color="#dd8452", ls="--", lw=1.5,
                       label="centralized (raw)")
        ax.set_xticks(x, prots, rotation=20, ha="right")
        ax.set_title(f"final {key}", fontsize=10)
        ax.set_ylim(0.0, 1.0)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(frameon=False, fontsize=8)
        if not any((r.get(f"fed_{key}") or 0) > 0 for r in table):  # nothing to draw: say why on the chart
            ax.text(0.5, 0.5, f"federated {key} is 0 in every run:\nno positive test row found",
                    transform=ax.transAxes, ha="center", va="center", fontsize=9, color="#b00020")
    fig.tight_layout()
    return png_uri(fig)


def scores_note(table: list) -> str | None:
    """A line under the final-scores chart when its federated F1 bars have nothing to show."""
    zero = [r["protection"] for r in table if not (r.get("fed_f1") or 0) > 0]
    if not zero:
        return None
    return (f"Federated F1 is 0 for {', '.join(zero)}: the global model finds none of the positive class's test "
            "rows (typically it predicts the majority class for every row), so those F1 bars are empty. See the warnings above; more --rounds, a larger "
            "--learning-rate or --class-weight balanced help.")


def render_federated_html(doc: dict, title: str = "gpuanon federated learning") -> str:
    """A page for one run (:func:`gpuanon.federated.run.run_federated`) or a comparison
    (:func:`gpuanon.federated.compare`), from the report package's ``federated.html`` template."""
    runs = doc["runs"] if "runs" in doc else {doc["config"]["protection"]: doc}
    first = next(iter(runs.values()))
    cfg = first["config"]
    model = cfg["model"]
    header = (f"data {fmt(cfg.get('dataset') or cfg.get('input'))} · target {fmt(cfg['target'])} "
              f"(positive class {fmt(first.get('positive'))}) · {cfg['silos']} silos ({cfg['split']}"
              + (f", alpha {cfg['alpha']}" if cfg['split'] == 'dirichlet' else "") + f") · model {model['name']} "
              f"(hidden {tuple(model['hidden'])}, {model['optimizer']} lr {model['learning_rate']}, batch "
              f"{model['batch_size']}, class weight {model.get('class_weight', 'none')}) · {cfg['rounds']} rounds x {cfg['local_epochs']} local epochs · seed "
              f"{cfg['seed']} · {doc.get('seconds', 0):.1f} s")
    table = doc.get("table") or [{"protection": n, **{f"fed_{k}": r["final"][k] for k in ("accuracy", "precision",
                                                                                           "recall", "f1")},
                                  "seconds": r["seconds"]} for n, r in runs.items()]
    cols = [c for c in ["protection", "fed_accuracy", "fed_precision", "fed_recall", "fed_f1", "drop_vs_raw",
                        "central_accuracy", "central_precision", "central_recall", "central_f1",
                        "thesis_accuracy", "thesis_precision", "thesis_recall", "thesis_f1", "seconds"]
            if any(c in r for r in table)]
    silos = []
    for name, r in runs.items():
        br, note = r["bytes"]["per_round"], None
        if br:
            note = (f"per round: {br[0]['down']} bytes down and {br[0]['up']} bytes up over "
                    f"{len(br[0]['per_silo'])} silos (the model has {r.get('n_parameters')} parameters)"
                    + (f"; DISTPAB phases: {r['bytes']['setup_per_silo'][0].get('distpab_up')} bytes up, "
                       f"{r['bytes']['setup_per_silo'][0].get('distpab_down')} bytes down per silo"
                       if "distpab" in r else ""))
        silos.append({"name": name, "bytes_note": note,
                      "silos": table_context(r["silos"], ["silo", "rows_in", "rows", "classes", "suppressed",
                                                          "entropy_loss", "ncp", "bytes_prepare_up",
                                                          "bytes_encode_up"])})
    warnings = list(doc.get("warnings") or [])
    return render_page("federated.html", title=title, header=header, warnings=warnings,
                       scores_note=scores_note(table), curves_chart=learning_curves(runs),
                       scores=table_context(table, cols), scores_chart=final_bars(table), runs=silos,
                       json_summary="Full JSON", raw_json=json.dumps(doc, indent=1, default=str)[:400_000])
