"""The HTML pages: Jinja2 templates (``templates/``, package data), filled from a report dict.

Each ``render_*`` function turns a report into the template's context, every number already
formatted as text; the templates lay it out and escape it (autoescape). Plots are PNG data URIs
(:mod:`gpuanon.report.plots`), so a page is one self-contained file.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from ..output.jsonsafe import json_safe
from .attack_frontier import attack_section
from .attack_rows import summary_context
from .plots import LOSS_TITLES, accuracy_bars, class_size_histogram, drop_vs_metric, entropy_bar_chart
from .render import fmt, render_page
from .risk_page import risk_context


def _raw_json(doc, limit: int) -> str:
    return json.dumps(json_safe(doc), indent=1, default=str, allow_nan=False)[:limit]


def _pct(v):
    return None if v is None else f"{100 * v:.2f}%"


def _hierarchy_context(hier: dict) -> tuple[list, dict | None]:
    """Chosen hierarchy per column, and every rho candidate's loss (U after) (SPEC 5.6)."""
    rows = [{"column": c, "source": fmt(h.get("source")),
             "rho": "no hierarchy" if h.get("choice") == "none" else fmt(h.get("rho")), "height": fmt(h.get("height")),
             "u_before": fmt(h.get("u_before")), "u_after": fmt(h.get("u_after")), "loss": fmt(_pct(h.get("loss")))}
            for c, h in hier.items()]
    cand = {c: h for c, h in hier.items() if h.get("candidates")}
    if not cand:
        return rows, None
    rhos = list(dict.fromkeys(r for h in cand.values() for r in h["candidates"]))
    table = []
    for c, h in cand.items():
        cells = []
        for r in rhos:
            u, loss = h["candidates"].get(r), (h.get("candidate_loss") or {}).get(r)
            text = "" if u is None else (f"{100 * loss:.2f}% ({u:.4g})" if loss is not None else f"({u:.4g})")
            best = h["choice"] == r if h.get("choice") else (
                str(h.get("rho")) == r or (h.get("rho") is not None and r == f"{h['rho']:g}"))
            cells.append((text, best))
        table.append((c, cells))
    heads = ["no hierarchy" if r == "none" else f"rho = {r}" for r in rhos]
    return rows, {"rhos": heads, "rows": table}


def _optimization_context(opt: dict | None) -> list | None:
    """The optimization step's figures: exact classes kept, their rows, and the loss before and after."""
    if not opt:
        return None
    return [("exact classes kept (original values)", fmt(opt.get("exact_classes"))),
            ("rows in exact classes", fmt(opt.get("exact_rows"))),
            ("exact groups given back to the generalized rest", fmt(opt.get("returned_groups"))),
            ("entropy-coefficient loss before the step", fmt(_pct(opt.get("entropy_loss_before")))),
            ("entropy-coefficient loss after the step", fmt(_pct(opt.get("entropy_loss_after"))))]


def source_name(source) -> str | None:
    """What a page shows of its input: the file name (a local path stays on the machine that ran the
    command), or ``dataset:NAME`` as it is.

    >>> source_name("/home/me/private/in.csv"), source_name("dataset:adult")
    ('in.csv', 'dataset:adult')
    """
    if source is None:
        return None
    text = str(source)
    return text if text.startswith("dataset:") else os.path.basename(text.rstrip("/\\")) or text


def render_html(report: dict, title: str | None = None) -> str:
    """A self-contained HTML page for an ``anonymize`` report (``Mondrian.report_``); the title names the
    input file (not its folder) unless ``title`` is given."""
    m = report.get("metrics") or {}
    req, ach = report.get("requested", {}), report.get("achieved", {})
    ok = (report.get("verification") or {}).get("ok", True)
    name = source_name(report.get("input"))
    title = title or (f"gpuanon report: {name}" if name else "gpuanon anonymization report")
    header = (f"input {fmt(name)} · backend {fmt(report.get('backend'))} ({fmt(report.get('device'))})"
              f" · mode {fmt(report.get('mode'))} · format {fmt(report.get('format'))}")
    cards = [("rows in", report.get("n_rows_in")), ("rows out", report.get("n_rows_out")),
             ("suppressed", report.get("n_suppressed")), ("classes", report.get("n_classes")),
             ("achieved k", ach.get("k")), ("achieved l", ach.get("l")),
             ("entropy loss", _pct(m.get("entropy_loss"))),
             ("NCP", None if m.get("ncp") is None else round(m["ncp"], 4))]
    if req.get("t") is not None:  # an achieved t only where t was asked for
        cards.insert(6, ("achieved t", None if ach.get("t") is None else round(ach["t"], 4)))
    # a criterion not asked for shows '-' (l = 0 and t = None both mean "off")
    asked = {"k": req.get("k"), "l": req.get("l") or None, "t": req.get("t")}
    parameters = [(key, fmt(asked[key]), fmt(ach.get(key))) for key in ("k", "l", "t")]
    parameters += [("l kind", fmt(req.get("l_kind")), ""), ("t distance", fmt(req.get("t_distance")), "")]
    roles = [(k_, fmt(", ".join(map(str, v)) if isinstance(v, list) else v))
             for k_, v in report.get("roles", {}).items() if k_ != "kinds"]
    entropy_chart = None
    if m.get("entropy_coefficient_before"):
        entropy_chart = entropy_bar_chart(m["entropy_coefficient_before"], m["entropy_coefficient_after"])
    class_sizes = None
    if m.get("class_size", {}).get("histogram"):
        cs = m["class_size"]
        class_sizes = {"chart": class_size_histogram(cs["histogram"], req.get("k")),
                       "summary": f"min {cs['min']} · median {cs['median']:g} · max {cs['max']} · "
                                  f"mean {cs['mean']:.2f}"}
    gt = m.get("gionis_tassa") or {}
    losses = [("entropy-coefficient loss", m.get("entropy_loss")),
              ("entropy-coefficient loss, label reading (diagnostic)", m.get("entropy_loss_labels")),
              ("Gionis-Tassa conditional entropy (bits)", gt.get("total_bits")),
              ("Gionis-Tassa, normalized", gt.get("normalized")),
              ("NCP", m.get("ncp")), ("discernibility DM", m.get("dm")), ("C_avg", m.get("c_avg")),
              ("classification metric CM", m.get("cm")), ("precision", m.get("precision"))]
    per_column = []
    if m.get("ncp_per_column"):
        bef, aft = m.get("entropy_coefficient_before") or {}, m.get("entropy_coefficient_after") or {}
        aft_l = m.get("entropy_coefficient_after_labels") or {}
        gt_bits = gt.get("per_column_bits", {})
        binned = set(m.get("entropy_binned_columns") or [])
        for c, v in m["ncp_per_column"].items():
            b, a = bef.get(c), aft.get(c)
            per_column.append({"column": str(c), "binned": c in binned, "before": fmt(b), "after": fmt(a),
                               "lost": fmt(None if not b or a is None else f"{100 * (1 - a / b):.2f}%"),
                               "ncp": fmt(v), "gt_bits": fmt(gt_bits.get(c)), "after_labels": fmt(aft_l.get(c))})
    hierarchies, rho_candidates = _hierarchy_context(report.get("hierarchies") or {})
    return render_page("anonymize.html", title=title, header=header, cards=[(a, fmt(b)) for a, b in cards], ok=ok,
                   parameters=parameters, roles=roles, entropy_chart=entropy_chart, class_sizes=class_sizes,
                   losses=[(a, fmt(b)) for a, b in losses], per_column=per_column, hierarchies=hierarchies,
                   rho_candidates=rho_candidates, optimization=_optimization_context(report.get("optimization")),
                   timing=[(k_, f"{v:.3f} s") for k_, v in report.get("seconds", {}).items()],
                   risk=_risk(report.get("risk")), attacks=summary_context(report.get("attacks")), json_summary="Full JSON report", raw_json=_raw_json(report, 200_000))


def _risk(risk):
    return risk_context(risk)


# ---------------------------------------------------------------------- model evaluation
def _score_table(results, scores) -> dict:
    """Models down, (protection, score) across; the best model of each protection and score in bold."""
    prots = list(dict.fromkeys(results["protection"]))
    models = list(dict.fromkeys(results["model"]))
    titles = dict(zip(results["model"], results["model_title"]))
    cells = {}
    for s in scores:
        t = results.set_index(["model", "protection"])[s].astype(float).unstack().reindex(index=models, columns=prots)
        v = t.to_numpy()
        with np.errstate(invalid="ignore"):
            top = np.isfinite(v) & (v >= np.nanmax(np.where(np.isnan(v), -np.inf, v), axis=0) - 1e-12)
        cells[s] = (v, top)
    rows = [(str(titles[mdl]), [("" if not np.isfinite(cells[s][0][i, j]) else f"{cells[s][0][i, j]:.3f}",
                                 bool(cells[s][1][i, j])) for j in range(len(prots)) for s in scores])
            for i, mdl in enumerate(models)]
    return {"protections": prots, "scores": [s.replace("_", " ") for s in scores], "rows": rows}


def render_evaluation_html(ev: dict, title: str = "gpuanon model evaluation") -> str:
    """A self-contained HTML page for an evaluation (:meth:`gpuanon.evaluate.Evaluation.to_dict`)."""
    res = pd.DataFrame(ev["results"])
    for c in res.columns:
        if c not in ("protection", "kind", "model", "model_title", "library"):
            res[c] = pd.to_numeric(res[c], errors="coerce")
    cfg, corr = ev.get("config", {}), ev.get("rank_correlations", {})
    header = (f"input {fmt(cfg.get('input'))} · target {fmt(cfg.get('target'))} (positive class "
              f"{fmt(cfg.get('positive'))}) · {cfg.get('n_rows')} rows, stratified split {cfg.get('n_train')} "
              f"training / {cfg.get('n_test')} test, seed {cfg.get('random_state')} · backend "
              f"{fmt(cfg.get('backend'))} ({fmt(cfg.get('device'))}) · {ev.get('seconds', 0):.1f} s")
    correlations = None
    if corr:
        models = list(dict.fromkeys(res["model"]))
        titles = dict(zip(res["model"], res["model_title"]))
        correlations = {
            "models": [titles[m] for m in models],
            "rows": [(LOSS_TITLES.get(metric, metric),
                      [fmt(None if row.get(m) is None else round(row[m], 3)) for m in models + ["mean"]])
                     for metric, row in corr.items()],
            "chart": drop_vs_metric(res, corr)}
    protections = [[fmt(v) for v in (
        p.get("protection"), p.get("n_train"), p.get("n_features"), p.get("n_classes"), p.get("n_suppressed"),
        _pct(p.get("entropy_loss")), p.get("ncp"), p.get("gionis_tassa"), p.get("dm"), p.get("cm"),
        p.get("protect_seconds"))] for p in ev.get("protections", [])]
    libs = ev.get("libraries", {})
    models = [(str(g["model_title"].iloc[0]), fmt(libs.get(mdl)), f"{g['train_seconds'].mean():.3f}")
              for mdl, g in res.groupby("model", sort=False)]
    return render_page("evaluation.html", title=title, header=header,
                   accuracy_table=_score_table(res, ["accuracy", "f1_macro"]), accuracy_chart=accuracy_bars(res),
                   correlations=correlations, balanced_table=_score_table(res, ["balanced_accuracy", "roc_auc"]),
                   protections=protections, models=models, attacks=attack_section(ev, res), json_summary="Full JSON",
                   raw_json=_raw_json(ev, 400_000))
