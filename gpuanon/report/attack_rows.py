"""The attack risks as every page shows them, in one place: one row per attack (the risk, its interval,
the attack, control and baseline rates, the successes, the warnings) and the columns that carried the
successful singling-out predicates. The attack page (``gpuanon attack --release --html``,
:mod:`~gpuanon.report.attack_page`) builds them from a full :func:`gpuanon.attack.evaluate` report, the
anonymize page's attack section from the report's ``attacks`` (:func:`gpuanon.attack.summary.risk_summary`
entries: a rate is its value alone there); ``templates/attack_rows.html`` lays them out for both.

>>> r = {"risk": 0.5, "ci": [0.25, 0.75], "attack_rate": 0.6, "control_rate": 0.2, "baseline_rate": 0.01,
...      "n_success": 30, "n_attacks": 50, "warnings": []}
>>> row = risk_row("linkability", r)
>>> row["risk"], row["ci"], row["attack"], row["control"], row["success"]
('0.5', '[0.25, 0.75]', '0.6', '0.2', '30 / 50')
"""

from __future__ import annotations

from .plots import png_uri, pyplot
from .render import fmt

#: the titles of :func:`gpuanon.attack.summary.risk_summary`'s keys
TITLES = {"singling_out_univariate": "singling out, univariate", "singling_out_multivariate": "singling out, multivariate",
          "linkability": "linkability", "linkability_tie_aware": "linkability, ties at random", "inference": "inference"}


def rate_text(d) -> str:
    """A rate: '–' when absent, ``value ± error`` for a full report's rate, its value for a summary's."""
    if d is None or d == {}:
        return "–"
    if isinstance(d, dict):
        return f"{fmt(d['value'])} ± {fmt(d['error'])}"
    return fmt(d)


def risk_interval(r: dict) -> tuple:
    """``(risk, low, high)`` of a full report's entry (``risk: {value, ci}``) or a summary's (``risk``, ``ci``)."""
    risk = r["risk"]
    if isinstance(risk, dict):
        return risk["value"], risk["ci"][0], risk["ci"][1]
    ci = r.get("ci") or (None, None)
    return risk, ci[0], ci[1]


def risk_row(name: str, r: dict) -> dict:
    """One attack's row, every value formatted."""
    v, lo, hi = risk_interval(r)
    return {"name": name, "risk": fmt(v), "ci": f"[{fmt(lo)}, {fmt(hi)}]", "attack": rate_text(r["attack_rate"]),
            "control": rate_text(r.get("control_rate")), "baseline": rate_text(r["baseline_rate"]),
            "success": f"{fmt(r['n_success'])} / {r['n_attacks']}", "note": "; ".join(r.get("warnings") or [])}


def carrier_rows(univariate: dict | None, multivariate: dict | None) -> list:
    """``(column, univariate, multivariate)`` successes per column that carried any, most first.

    >>> carrier_rows({"fnlwgt": 9, "age": 0}, {"age": 2, "fnlwgt": 4, "sex": 0})
    [('fnlwgt', 9, 4), ('age', 0, 2)]
    """
    uni, multi = univariate or {}, multivariate or {}
    cols = sorted(dict.fromkeys([*uni, *multi]), key=lambda c: -(uni.get(c, 0) + multi.get(c, 0)))
    return [(c, uni.get(c, 0), multi.get(c, 0)) for c in cols if uni.get(c, 0) + multi.get(c, 0)]


def risk_plot(items: list) -> list:
    """``[(alt, PNG data URI)]``: horizontal bars of the risks with their intervals; ``items`` ``(name, entry)``."""
    if not items:
        return []
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(items)))
    trip = [risk_interval(r) for _, r in items]
    vals = [v or 0.0 for v, _, _ in trip]
    lo = [v - (a or 0.0) for v, (_, a, _) in zip(vals, trip)]
    hi = [(b or 0.0) - v for v, (_, _, b) in zip(vals, trip)]
    ax.barh(range(len(items)), vals, xerr=[lo, hi], color="#4c72b0", capsize=3)
    ax.set_yticks(range(len(items)), [n for n, _ in items])
    ax.set_xlim(0, 1.05)
    ax.invert_yaxis()
    ax.set_xlabel("risk (interval at the confidence level)")
    fig.tight_layout()
    return [("risks with their intervals", png_uri(fig))]


def summary_context(attacks: dict | None) -> dict | None:
    """The anonymize page's attack section from the report's ``attacks`` (``anonymize --attacks``), or None."""
    if not attacks or not attacks.get("risks"):
        return None
    risks = attacks["risks"]
    items = []
    for kind, r in risks.items():
        name = TITLES.get(kind, kind)
        if kind == "inference" and r.get("secret") is not None:
            name = f"inference of '{r['secret']}'"
        items.append((name, r))
    uni = (risks.get("singling_out_univariate") or {}).get("columns_of_successes")
    multi = (risks.get("singling_out_multivariate") or {}).get("columns_of_successes")
    n_c = attacks.get("control_rows")
    control = ("no control rows: the risk is the attack rate" if not n_c else
               f"control: {n_c} input rows held out of the release (--control-fraction "
               f"{fmt(attacks.get('control_fraction'))})")
    return {"n_attacks": fmt(attacks.get("n_attacks")), "control": control,
            "rows": [risk_row(n, r) for n, r in items], "carriers": carrier_rows(uni, multi),
            "plots": risk_plot([(n, r) for n, r in items if risk_interval(r)[0] is not None])}
