"""Sweeps over k, l and t on one encoded table: what does each setting cost?

The table is read and encoded once; every run partitions it, generalizes, verifies the result
independently, and scores it with every metric (the per-column statistics of the original
table are computed once and reused). Defaults follow the thesis: k = 3..15 (figure 5.1), plus
l-diversity l = 2, 3 and t-closeness t = 0.2, 0.3, 0.4 at k = 3, and the optimized k-anonymity
at k = 3 (table 5.4).

Examples
--------
>>> from gpuanon.datasets import load_adult
>>> df = load_adult().head(3000)
>>> res = run_sweep(df, ["age", "education", "gender"], sensitive="income", target="income",
...                 ks=[3, 5], ls=[2], ts=[], backend="cpu")
>>> res[["criterion", "k", "l"]].values.tolist()
[['optimized k-anonymity', 3, 0], ['k-anonymity', 3, 0], ['k-anonymity', 5, 0], ['l-diversity', 3, 2]]
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

import numpy as np
import pandas as pd

from ..attack.summary import attack_release
from ..backend import get_backend
from ..table.encoding import encode
from ..errors import PrivacyError
from ..estimator import clone
from ..output.io import atomic_path
from ..report.attack_frontier import sweep_frontier_figure
from ..report.markdown import markdown_table
from ..report.plots import pyplot
from .mondrian import Mondrian

log = logging.getLogger("gpuanon")

COLUMNS = ["criterion", "k", "l", "t", "n_classes", "n_suppressed", "entropy_loss", "entropy_loss_labels", "ncp",
           "dm", "cm", "c_avg", "gionis_tassa_normalized", "rho", "achieved_k", "achieved_l", "achieved_t",
           "verified", "seconds"]

# The thesis's table 5.4 (Adult, 48,842 rows; partitions, loss in %), for the side-by-side table.
THESIS_TABLE_5_4 = {
    "optimized k-anonymity (k=3)": (9246, 5.76),
    "k-anonymity (k=3)": (9246, 7.46),
    "l-diversity (k=3, l=2)": (4919, 9.29),
    "t-closeness (k=3, t=0.2)": (2925, 32.66),
    "t-closeness (k=3, t=0.3)": (7134, 7.92),
    "t-closeness (k=3, t=0.4)": (7863, 8.07),
}


def metric_columns(met: dict, hierarchies: dict | None = None) -> dict:
    """The sweep's metric columns of one run, from its metrics dict (and its chosen hierarchies).

    ``entropy_loss`` is section 7's loss (cells read on each QI's domain); ``entropy_loss_labels``
    the label reading, a diagnostic; ``rho`` the percentile range chosen per automatic
    hierarchy column (``col=rho;...``; ``col=none`` where no hierarchy won).
    """
    rho = ";".join(f"{c}={h['rho']:g}" if h.get("rho") is not None else f"{c}=none"
                   for c, h in (hierarchies or {}).items() if h.get("rho") is not None or h.get("choice") == "none")
    return {"entropy_loss": met["entropy_loss"], "entropy_loss_labels": met.get("entropy_loss_labels"),
            "ncp": met["ncp"], "dm": met["dm"], "cm": met["cm"], "c_avg": met["c_avg"],
            "gionis_tassa_normalized": met["gionis_tassa"]["normalized"], "rho": rho}


#: the attacks' risk summaries (:func:`gpuanon.attack.summary.risk_summary`'s keys) a sweep with attacks
#: reports: each as ``risk_KIND`` with its interval ``risk_KIND_low`` / ``risk_KIND_high``
ATTACK_KINDS = ("singling_out_univariate", "singling_out_multivariate", "linkability", "linkability_tie_aware",
                "inference")
ATTACK_COLUMNS = [f"risk_{kind}{end}" for kind in ATTACK_KINDS for end in ("", "_low", "_high")] + ["attack_seconds"]


def attack_columns(risks: dict) -> dict:
    """The sweep's risk columns of one run from its :func:`~gpuanon.attack.summary.attack_release` summary
    (an attack that did not apply, say inference without a published secret, is left empty).

    >>> attack_columns({"linkability": {"risk": 0.25, "ci": [0.1, 0.4]}})["risk_linkability_high"]
    0.4
    """
    out = {}
    for kind in ATTACK_KINDS:
        r = risks.get(kind) or {}
        lo, hi = r.get("ci") or (None, None)
        out.update({f"risk_{kind}": r.get("risk"), f"risk_{kind}_low": lo, f"risk_{kind}_high": hi})
    return out


def attack_run(m: Mondrian, df: pd.DataFrame, attacks: dict) -> dict:
    """The attacks on one grid point's output, published as ``anonymize`` publishes it (the estimator's
    format; its QIs the attacker's known columns, its sensitive column the secret): its risk columns.
    ``attacks``: ``n_attacks``, ``control`` (rows of the same population not in ``df``, or None), ``seed``."""
    out, _ = m.run_stages(df)  # the fitted partitions generalized: the output anonymize would write
    out = out.to_pandas() if hasattr(out, "to_pandas") else out
    schema = m.result_.schema
    risks = attack_release(out, df, attacks.get("control"), quasi_identifiers=list(schema.quasi_identifiers),
                           secret=schema.sensitive, n_attacks=int(attacks["n_attacks"]), seed=attacks.get("seed", 0))
    return attack_columns(risks)


def grid(ks: Iterable[int], ls: Iterable[int], ts: Iterable[float], base_k: int = 3) -> list[dict]:
    """The runs of a sweep: k-anonymity at every k, then l and t at ``base_k``."""
    runs = [{"criterion": "k-anonymity", "k": int(k), "l": 0, "t": None} for k in ks]
    runs += [{"criterion": "l-diversity", "k": int(base_k), "l": int(l), "t": None} for l in ls]
    runs += [{"criterion": "t-closeness", "k": int(base_k), "l": 0, "t": float(t)} for t in ts]
    return runs


def run_params(run: dict) -> dict:
    """The Mondrian parameters of one run of :func:`grid` (its ``criterion`` is only a label).

    >>> run_params({"criterion": "l-diversity", "k": 3, "l": 2, "t": None})
    {'k': 3, 'l': 2, 't': None}
    """
    params = {key: run[key] for key in ("k", "l", "t") if key in run}
    if "optimize" in run:
        params["optimize"] = bool(run["optimize"])
    return params


def run_sweep(df: pd.DataFrame, quasi_identifiers, *, sensitive=None, target=None, identifiers=None,
              ks=range(3, 16), ls=(2, 3), ts=(0.2, 0.3, 0.4), base_k: int = 3, mode: str = "strict",
              l_kind: str = "distinct", t_distance: str = "auto", max_suppression: float = 0.01,
              backend=None, progress=None, hierarchies=None, rho=None, optimize: bool = False,
              optimized_variant: bool = True, attacks: dict | None = None) -> pd.DataFrame:
    """Run Mondrian over a grid on one encoded table; one row of metrics per run: every run is
    ``clone(base).set_params(**run_params(run))`` of one base estimator holding the shared parameters.

    A run whose criteria cannot be met (say, l larger than the distinct sensitive values) is
    kept with its error in the ``error`` column instead of stopping the sweep. ``attacks``
    (``{"n_attacks": N, "control": rows or None, "seed": s}``): each run's output is attacked
    (:func:`attack_run`) and the rows get :data:`ATTACK_COLUMNS`.
    """
    runs = grid(ks, ls, ts, base_k)
    if optimized_variant and not optimize and any(r["criterion"] == "k-anonymity" and r["k"] == base_k for r in runs):
        runs.insert(0, {"criterion": "optimized k-anonymity", "k": int(base_k), "l": 0, "t": None, "optimize": True})
    if not runs:
        raise ValueError("the sweep grid is empty: give at least one k, l or t")
    base = Mondrian(k=runs[0]["k"], l_kind=l_kind, t_distance=t_distance, quasi_identifiers=quasi_identifiers,
                    sensitive=sensitive, target=target, identifiers=identifiers, mode=mode,
                    max_suppression=max_suppression, backend=backend, progress=False, hierarchies=hierarchies,
                    rho=rho, optimize=bool(optimize))
    schema = base.validate(df)
    plan = base.hierarchy_plan(df, schema)
    be = get_backend(backend, n_rows=len(df))
    t0 = time.perf_counter()
    orders = {c: [h.leaves[i] for i in h.leaf_order()] for c, h in plan.items() if h != "auto"}
    table = encode(df, schema, be.xp, orders=orders)
    enc_s = time.perf_counter() - t0
    models = [clone(base).set_params(**run_params(run)) for run in runs]
    for m in models:  # a bad grid value fails before any work, not halfway through
        m.validate(df)
    rows = []
    for i, (run, m) in enumerate(zip(runs, models)):
        t1 = time.perf_counter()
        row = {k_: v for k_, v in run.items() if k_ != "optimize"}
        try:
            m.validate(df)
            m.fit_encoded(schema, table, be, encode_seconds=enc_s, plan=plan)
            # the one pipeline's second half: class statistics, verification from the published
            # cells (as minmax), metrics; no output frame is built
            _, res = m.run_stages(df, build_output=False, fmt="minmax")
            met = m.metrics_
            row.update(n_classes=res.n_classes, n_suppressed=m.n_suppressed_, **metric_columns(met, m.hierarchies_),
                       achieved_k=res.k, achieved_l=res.l, achieved_t=res.t, verified=res.ok, error="")
        except PrivacyError as exc:
            row.update(error=str(exc), verified=False)
        row["seconds"] = round(time.perf_counter() - t1, 6)
        if attacks and not row["error"]:  # after the run's own seconds: the attacks are timed apart
            t1 = time.perf_counter()
            row.update(attack_run(m, df, attacks), attack_seconds=round(time.perf_counter() - t1, 6))
        rows.append(row)
        if progress:
            progress(i + 1, len(runs), row)
    res = pd.DataFrame(rows)
    cols = COLUMNS + (ATTACK_COLUMNS if attacks else []) + ["error"]
    for c in cols:
        if c not in res.columns:
            res[c] = np.nan
    return res[cols]


def label(row) -> str:
    """A table-5.4-style row label: 'k-anonymity (k=3)', 'l-diversity (k=3, l=2)', 't-closeness (t=0.2)'."""
    if row["criterion"] == "optimized k-anonymity":
        return f"optimized k-anonymity (k={int(row['k'])})"
    if row["criterion"] == "l-diversity":
        return f"l-diversity (k={int(row['k'])}, l={int(row['l'])})"
    if row["criterion"] == "t-closeness":
        return f"t-closeness (k={int(row['k'])}, t={row['t']:g})"
    return f"k-anonymity (k={int(row['k'])})"


#: the markdown table's risk columns (a sweep with attacks)
RISK_HEADS = {"singling_out_univariate": "singling out (uni)", "singling_out_multivariate": "singling out (multi)",
              "linkability": "linkability", "linkability_tie_aware": "linkability (random ties)",
              "inference": "inference"}


def risk_text(row, kind: str) -> str:
    """A risk and its interval as the sweep's table shows it: '0.981 [0.961, 1.000]'; '' where none.

    >>> risk_text({"risk_inference": 0.5, "risk_inference_low": 0.25, "risk_inference_high": 0.75}, "inference")
    '0.500 [0.250, 0.750]'
    """
    v, lo, hi = (row.get(f"risk_{kind}{end}") for end in ("", "_low", "_high"))
    if v is None or pd.isna(v):
        return ""
    return f"{float(v):.3f} [{float(lo):.3f}, {float(hi):.3f}]"


def thesis_table(res: pd.DataFrame, base_k: int = 3, reference: dict | None = None) -> pd.DataFrame:
    """Rows in the shape of the thesis's table 5.4: k-anonymity at ``base_k``, then l and t variants.

    ``reference`` (e.g. :data:`THESIS_TABLE_5_4`) maps a run label to ``(partitions, loss %)``;
    its figures are added as two columns beside ours.
    """
    sel = res[((res["criterion"] == "k-anonymity") & (res["k"] == base_k)) | (res["criterion"] != "k-anonymity")]
    sel = sel.iloc[np.argsort(sel["criterion"].map({"optimized k-anonymity": 0, "k-anonymity": 1, "l-diversity": 2,
                                                     "t-closeness": 3}).to_numpy(), kind="stable")]
    out = pd.DataFrame({
        "run": [label(r) for _, r in sel.iterrows()],
        "classes": sel["n_classes"].to_numpy(),
        "entropy_loss_%": (100 * sel["entropy_loss"].astype(float)).round(2).to_numpy(),
        "ncp": sel["ncp"].astype(float).round(4).to_numpy(),
        "dm": sel["dm"].astype("Int64").astype(object).to_numpy(),
        "cm": sel["cm"].astype(float).round(4).to_numpy(),
    })
    for kind, name in RISK_HEADS.items():  # a sweep with attacks: each risk with its interval
        if f"risk_{kind}" in sel.columns:
            out[f"risk: {name}"] = [risk_text(r, kind) for _, r in sel.iterrows()]
    if reference is not None:
        out["thesis_partitions"] = [reference.get(r, (None, None))[0] for r in out["run"]]
        out["thesis_loss_%"] = [reference.get(r, (None, None))[1] for r in out["run"]]
    return out


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (float, np.floating)):
        return f"{int(v):d}" if float(v).is_integer() and abs(v) >= 1e5 else f"{v:g}"
    return str(v)


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-style markdown table (:func:`gpuanon.report.markdown_table`): missing cells empty,
    large whole numbers exact."""
    return markdown_table(table.map(_cell))


def plot_sweep(res: pd.DataFrame, path: str) -> None:
    """Loss and number of classes against k (the thesis's figure 5.1), written as PNG."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415


    kr = res[(res["criterion"] == "k-anonymity") & res["n_classes"].notna()].sort_values("k")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(kr["k"], 100 * kr["entropy_loss"].astype(float), "o-", color="#c44e52", label="entropy-coefficient loss (%)")
    ax.plot(kr["k"], 100 * kr["ncp"].astype(float), "s--", color="#8172b2", label="NCP (%)")
    ax.set_xlabel("k")
    ax.set_ylabel("loss (%)")
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(kr["k"], kr["n_classes"], "^-", color="#4c72b0", label="classes")
    ax2.set_ylabel("number of classes")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, frameon=False, loc="upper left", bbox_to_anchor=(0.0, -0.15), ncol=3)
    ax.set_title("Information loss and classes against k")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_sweep_attacks(res: pd.DataFrame, path: str) -> bool:
    """The sweep's privacy-utility frontier (information loss against each attack risk, one labelled point
    per grid point; :func:`gpuanon.report.attack_frontier.sweep_frontier_figure`) written as PNG; False
    (nothing written) when no grid point has a risk."""
    fig = sweep_frontier_figure(res)
    if fig is None:
        return False
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    pyplot().close(fig)
    return True
