"""Reports a person would rather look at than read: a self-contained HTML page with PNG plots.

The page embeds every plot as a base64 PNG (no external files, no network): the run's
parameters and achieved k / l / t, a bar chart of ``U(target | column)`` before and after for
each QI (the thesis's figures 5.2 to 5.5), the class-size histogram, and the metrics table.

Examples
--------
>>> from gpuanon import Mondrian
>>> from gpuanon.datasets import load_adult
>>> m = Mondrian(k=5, quasi_identifiers=["age", "education"], sensitive="income",
...              target="income", backend="cpu", progress=False)
>>> _ = m.fit_transform(load_adult().head(3000))
>>> html = render_html(m.report_)
>>> html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
True
"""

from __future__ import annotations

import base64
import html as _html
import io
import json

import numpy as np

from .io import json_safe


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _plt():
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def entropy_bar_chart(before: dict, after: dict, title: str = "") -> str:
    """Grouped bars of U(target | column) before and after anonymization, as a PNG data URI."""
    plt = _plt()
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
    return _png(fig)


def class_size_histogram(hist: dict, k: int | None) -> str:
    """Bar chart of the class-size histogram (edges / counts), as a PNG data URI."""
    plt = _plt()
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
    return _png(fig)


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.0f}" if v.is_integer() and abs(v) >= 1e6 else f"{v:.6g}"
    return _html.escape(str(v))


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0} td,th{border:1px solid #ddd;padding:.3rem .6rem;text-align:left}
th{background:#f4f4f4} .ok{color:#1a7f37;font-weight:600} .bad{color:#c0392b;font-weight:600}
.cards{display:flex;gap:1rem;flex-wrap:wrap} .card{border:1px solid #ddd;border-radius:8px;padding:.6rem 1rem;min-width:9rem}
.card b{display:block;font-size:1.4rem} img{max-width:100%} .muted{color:#666;font-size:.9rem}
.wide{overflow-x:auto} table.scores td,table.scores th{font-size:.85rem;padding:.25rem .4rem}
"""


_ENTROPY_NOTE = (
    "<p class='muted'>U(target | column) on the column's domain: its categories, or its distinct values "
    "(256 equal-frequency bins when it has more). After anonymization each row's cell (interval, set, "
    "hierarchy node, <code>*</code>; a suppressed row is <code>*</code>) spreads the row over the original "
    "values inside it, in proportion to their rows; U after is computed from that spread. Loss = 1 - "
    "sum U after / sum U before. The label reading takes the generalized labels as categories: a label "
    "identifies its class and so also carries the other columns' information (a diagnostic only).</p>")


def _hierarchy_section(hier: dict) -> str:
    """Chosen hierarchy per column, and every rho candidate's U after and loss (SPEC 5.6)."""
    out = ["<h2>Generalization hierarchies</h2><p class='muted'>Automatic hierarchies: every candidate "
           "rho is applied to the final classes and scored by U after; the largest U (smallest loss) wins, "
           "ties to the smaller rho.</p>",
           "<table><tr><th>column</th><th>source</th><th>rho</th><th>height</th><th>U before</th>"
           "<th>U after</th><th>loss</th></tr>"]
    for c, h in hier.items():
        loss = h.get("loss")
        out.append(f"<tr><td>{_html.escape(str(c))}</td><td>{_fmt(h.get('source'))}</td><td>{_fmt(h.get('rho'))}</td>"
                   f"<td>{_fmt(h.get('height'))}</td><td>{_fmt(h.get('u_before'))}</td><td>{_fmt(h.get('u_after'))}</td>"
                   f"<td>{_fmt(None if loss is None else f'{100 * loss:.2f}%')}</td></tr>")
    out.append("</table>")
    cand = {c: h for c, h in hier.items() if h.get("candidates")}
    if cand:
        rhos = list(dict.fromkeys(r for h in cand.values() for r in h["candidates"]))
        out.append("<div class='wide'><table class='scores'><tr><th>column: loss (U after) per rho</th>"
                   + "".join(f"<th>rho = {_html.escape(r)}</th>" for r in rhos) + "</tr>")
        for c, h in cand.items():
            cells = []
            for r in rhos:
                u, loss = h["candidates"].get(r), (h.get("candidate_loss") or {}).get(r)
                txt = "" if u is None else (f"{100 * loss:.2f}% ({u:.4g})" if loss is not None else f"({u:.4g})")
                best = str(h.get("rho")) == r or (h.get("rho") is not None and r == f"{h['rho']:g}")
                cells.append(f"<td>{'<b>' if best else ''}{txt}{'</b>' if best else ''}</td>")
            out.append(f"<tr><td>{_html.escape(str(c))}</td>{''.join(cells)}</tr>")
        out.append("</table></div>")
    return "".join(out)


def render_html(report: dict, title: str = "gpuanon anonymization report") -> str:
    """A self-contained HTML page for an ``anonymize`` report (``Mondrian.report_``)."""
    m = report.get("metrics") or {}
    req, ach = report.get("requested", {}), report.get("achieved", {})
    ver = report.get("verification") or {}
    ok = ver.get("ok", True)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{_html.escape(title)}</h1>",
             f"<p class='muted'>input {_fmt(report.get('input'))} · backend {_fmt(report.get('backend'))}"
             f" ({_fmt(report.get('device'))}) · mode {_fmt(report.get('mode'))} · format "
             f"{_fmt(report.get('format'))}</p>"]
    cards = [("rows in", report.get("n_rows_in")), ("rows out", report.get("n_rows_out")),
             ("suppressed", report.get("n_suppressed")), ("classes", report.get("n_classes")),
             ("achieved k", ach.get("k")), ("achieved l", ach.get("l")),
             ("achieved t", None if ach.get("t") is None else round(ach["t"], 4)),
             ("entropy loss", None if m.get("entropy_loss") is None else f"{100 * m['entropy_loss']:.2f}%"),
             ("NCP", None if m.get("ncp") is None else round(m["ncp"], 4))]
    parts.append("<div class='cards'>" + "".join(f"<div class='card'>{_html.escape(a)}<b>{_fmt(b)}</b></div>"
                                                  for a, b in cards) + "</div>")
    parts.append(f"<p>Independent verification: <span class='{'ok' if ok else 'bad'}'>"
                 f"{'passed' if ok else 'FAILED'}</span></p>")
    parts.append("<h2>Parameters</h2><table><tr><th>parameter</th><th>requested</th><th>achieved</th></tr>")
    for key in ("k", "l", "t"):
        parts.append(f"<tr><td>{key}</td><td>{_fmt(req.get(key))}</td><td>{_fmt(ach.get(key))}</td></tr>")
    parts.append(f"<tr><td>l kind</td><td>{_fmt(req.get('l_kind'))}</td><td></td></tr>"
                 f"<tr><td>t distance</td><td>{_fmt(req.get('t_distance'))}</td><td></td></tr></table>")
    roles = report.get("roles", {})
    parts.append("<table>" + "".join(f"<tr><th>{_html.escape(k_)}</th><td>{_fmt(', '.join(map(str, v)) if isinstance(v, list) else v)}</td></tr>"
                                     for k_, v in roles.items() if k_ != "kinds") + "</table>")
    if m.get("entropy_coefficient_before"):
        parts.append("<h2>Entropy coefficient per quasi-identifier</h2>")
        parts.append(f"<img alt='entropy coefficient before and after' src='{entropy_bar_chart(m['entropy_coefficient_before'], m['entropy_coefficient_after'])}'>")
    if m.get("class_size", {}).get("histogram"):
        parts.append("<h2>Class sizes</h2>")
        parts.append(f"<img alt='class size histogram' src='{class_size_histogram(m['class_size']['histogram'], req.get('k'))}'>")
        cs = m["class_size"]
        parts.append(f"<p class='muted'>min {cs['min']} · median {cs['median']:g} · max {cs['max']} · mean {cs['mean']:.2f}</p>")
    parts.append("<h2>Information loss</h2><table><tr><th>metric</th><th>value</th></tr>")
    rows = [("entropy-coefficient loss", m.get("entropy_loss")),
            ("entropy-coefficient loss, label reading (diagnostic)", m.get("entropy_loss_labels")),
            ("Gionis-Tassa conditional entropy (bits)", (m.get("gionis_tassa") or {}).get("total_bits")),
            ("Gionis-Tassa, normalized", (m.get("gionis_tassa") or {}).get("normalized")),
            ("NCP", m.get("ncp")), ("discernibility DM", m.get("dm")), ("C_avg", m.get("c_avg")),
            ("classification metric CM", m.get("cm")), ("precision", m.get("precision"))]
    parts += [f"<tr><td>{_html.escape(a)}</td><td>{_fmt(b)}</td></tr>" for a, b in rows]
    parts.append("</table>")
    if m.get("ncp_per_column"):
        parts.append(_ENTROPY_NOTE)
        parts.append("<table><tr><th>column</th><th>U before</th><th>U after</th><th>U lost</th><th>NCP</th>"
                     "<th>GT bits</th><th>U after, label reading</th></tr>")
        bef, aft = m.get("entropy_coefficient_before") or {}, m.get("entropy_coefficient_after") or {}
        aft_l = m.get("entropy_coefficient_after_labels") or {}
        gt = (m.get("gionis_tassa") or {}).get("per_column_bits", {})
        binned = set(m.get("entropy_binned_columns") or [])
        for c, v in m["ncp_per_column"].items():
            b, a = bef.get(c), aft.get(c)
            lost = None if not b or a is None else f"{100 * (1 - a / b):.2f}%"
            name = _html.escape(str(c)) + (" <span class='muted'>(256 bins)</span>" if c in binned else "")
            parts.append(f"<tr><td>{name}</td><td>{_fmt(b)}</td><td>{_fmt(a)}</td><td>{_fmt(lost)}</td>"
                         f"<td>{_fmt(v)}</td><td>{_fmt(gt.get(c))}</td><td>{_fmt(aft_l.get(c))}</td></tr>")
        parts.append("</table>")
    hier = report.get("hierarchies") or {}
    if hier:
        parts.append(_hierarchy_section(hier))
    secs = report.get("seconds", {})
    parts.append("<h2>Timing</h2><table>" + "".join(f"<tr><td>{_html.escape(k_)}</td><td>{v:.3f} s</td></tr>"
                                                   for k_, v in secs.items()) + "</table>")
    parts.append("<details><summary>Full JSON report</summary><pre>"
                 + _html.escape(json.dumps(json_safe(report), indent=1, default=str, allow_nan=False)[:200_000]) + "</pre></details>")
    parts.append("</body></html>")
    return "".join(parts)


# ---------------------------------------------------------------------- model evaluation
_LOSS_TITLES = {"entropy_loss": "entropy-coefficient loss", "entropy_loss_labels": "entropy loss, label reading",
                "ncp": "NCP", "gionis_tassa": "Gionis-Tassa (normalized)",
                "dm": "discernibility DM", "cm": "classification metric CM", "c_avg": "C_avg"}


def accuracy_bars(results, score: str = "accuracy") -> str:
    """Grouped bars: one group per model, one bar per protection, as a PNG data URI."""
    plt = _plt()
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
    return _png(fig)


def drop_vs_metric(results, correlations: dict) -> str:
    """Accuracy drop against each information-loss metric (one panel per metric, one colour per model)."""
    plt = _plt()
    metrics = [m for m in _LOSS_TITLES if m in results and results[m].notna().any()]
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
        ax.set_title(f"{_LOSS_TITLES[metric]}\nSpearman rho (mean drop) = {'n/a' if rho is None else f'{rho:.2f}'}",
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
    return _png(fig)


def _score_table_html(results, scores) -> str:
    prots = list(dict.fromkeys(results["protection"]))
    models = list(dict.fromkeys(results["model"]))
    head = "<tr><th rowspan='2'>model</th>" + "".join(f"<th colspan='{len(scores)}'>{_html.escape(p)}</th>"
                                                        for p in prots) + "</tr>"
    head += "<tr>" + "".join(f"<th>{_html.escape(s.replace('_', ' '))}</th>" for _ in prots for s in scores) + "</tr>"
    body = []
    for mdl in models:
        sub = results[results["model"] == mdl].set_index("protection")
        cells = []
        for p in prots:
            for s in scores:
                v = sub[s].get(p, np.nan) if p in sub.index else np.nan
                col = results[results["protection"] == p][s].astype(float)
                top = np.isfinite(v) and v >= np.nanmax(col.to_numpy()) - 1e-12
                cells.append(f"<td>{'<b>' if top else ''}{'' if not np.isfinite(v) else f'{v:.3f}'}{'</b>' if top else ''}</td>")
        body.append(f"<tr><td>{_html.escape(str(sub['model_title'].iloc[0]))}</td>{''.join(cells)}</tr>")
    return "<div class='wide'><table class='scores'>" + head + "".join(body) + "</table></div>"


def render_evaluation_html(ev: dict, title: str = "gpuanon model evaluation") -> str:
    """A self-contained HTML page for an evaluation (:meth:`gpuanon.evaluate.Evaluation.to_dict`)."""
    import pandas as pd  # noqa: PLC0415

    res = pd.DataFrame(ev["results"])
    for c in res.columns:
        if c not in ("protection", "kind", "model", "model_title", "library"):
            res[c] = pd.to_numeric(res[c], errors="coerce")
    cfg, corr = ev.get("config", {}), ev.get("rank_correlations", {})
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{_html.escape(title)}</h1>",
             f"<p class='muted'>input {_fmt(cfg.get('input'))} · target {_fmt(cfg.get('target'))} (positive class "
             f"{_fmt(cfg.get('positive'))}) · {cfg.get('n_rows')} rows, stratified split {cfg.get('n_train')} training / "
             f"{cfg.get('n_test')} test, seed {cfg.get('random_state')} · backend {_fmt(cfg.get('backend'))} "
             f"({_fmt(cfg.get('device'))}) · {ev.get('seconds', 0):.1f} s</p>",
             "<p>Each protection is applied to the training part only; every model is trained on it and tested on "
             "the raw held-out rows (DISTPAB: the held-out rows pass through the same fitted perturbation).</p>"]
    parts.append("<h2>Accuracy and F1 per model and protection</h2>"
                 "<p class='muted'>F1 here is the macro average over classes (the thesis's tables 5.6 to 5.10); the "
                 "positive-class F1 is in the CSV. Bold: best model of the protection.</p>")
    parts.append(_score_table_html(res, ["accuracy", "f1_macro"]))
    parts.append(f"<img alt='accuracy per model and protection' src='{accuracy_bars(res)}'>")
    parts.append("<h2>Which information-loss metric predicted the accuracy drop?</h2>"
                 "<p class='muted'>Accuracy drop = raw accuracy - accuracy, per model. Spearman rank correlation across "
                 "the protections that have the metric (raw counts as a protection whose classes are its distinct "
                 "QI tuples); 1 means the metric orders the protections exactly as the drop does.</p>")
    if corr:
        models = list(dict.fromkeys(res["model"]))
        titles = dict(zip(res["model"], res["model_title"]))
        parts.append("<table><tr><th>metric</th>" + "".join(f"<th>{_html.escape(titles[m])}</th>" for m in models)
                     + "<th>mean drop</th></tr>")
        for metric, row in corr.items():
            parts.append(f"<tr><td>{_html.escape(_LOSS_TITLES.get(metric, metric))}</td>"
                         + "".join(f"<td>{_fmt(None if row.get(m) is None else round(row[m], 3))}</td>"
                                   for m in models + ['mean']) + "</tr>")
        parts.append("</table>")
        img = drop_vs_metric(res, corr)
        if img:
            parts.append(f"<img alt='accuracy drop against information-loss metrics' src='{img}'>")
    else:
        parts.append("<p>No 'raw' protection in this run, so there is no drop to correlate with.</p>")
    parts.append("<h2>Balanced accuracy and ROC AUC</h2><p class='muted'>For imbalanced targets these say more than "
                 "accuracy: a model that always predicts the majority class has balanced accuracy 0.5.</p>")
    parts.append(_score_table_html(res, ["balanced_accuracy", "roc_auc"]))
    parts.append("<h2>Protections</h2><table><tr><th>protection</th><th>training rows</th><th>features</th>"
                 "<th>classes</th><th>suppressed</th><th>entropy loss</th><th>NCP</th><th>GT norm.</th><th>DM</th>"
                 "<th>CM</th><th>seconds</th></tr>")
    for p in ev.get("protections", []):
        parts.append("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in (
            p.get("protection"), p.get("n_train"), p.get("n_features"), p.get("n_classes"), p.get("n_suppressed"),
            None if p.get("entropy_loss") is None else f"{100 * p['entropy_loss']:.2f}%", p.get("ncp"),
            p.get("gionis_tassa"), p.get("dm"), p.get("cm"), p.get("protect_seconds"))) + "</tr>")
    parts.append("</table>")
    libs = ev.get("libraries", {})
    parts.append("<h2>Models</h2><table><tr><th>model</th><th>library</th><th>mean train seconds</th></tr>")
    for mdl, g in res.groupby("model", sort=False):
        parts.append(f"<tr><td>{_html.escape(str(g['model_title'].iloc[0]))}</td><td>{_fmt(libs.get(mdl))}</td>"
                     f"<td>{g['train_seconds'].mean():.3f}</td></tr>")
    parts.append("</table>")
    parts.append("<details><summary>Full JSON</summary><pre>"
                 + _html.escape(json.dumps(json_safe(ev), indent=1, default=str, allow_nan=False)[:400_000]) + "</pre></details>")
    parts.append("</body></html>")
    return "".join(parts)
