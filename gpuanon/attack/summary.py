"""The attacks on one protection's release in a few numbers: what ``gpuanon evaluate --attacks`` adds to
each protection of its report (SPEC 14; docs/attack.md).

:func:`attack_release` runs the attacks that apply to the release (singling out always, linkability when
two known columns are published, inference when the secret is) with the rows it was made from and rows
of the same population that were not; :func:`risk_summary` keeps each risk with its interval and the
attack, control and baseline rates, and the columns that carried the successful singling-out predicates.

>>> import pandas as pd
>>> o = pd.DataFrame({"age": [20, 30, 40, 50, 60, 70], "sex": list("fmfmfm"), "y": list("abaabb")})
>>> s = attack_release(o, o, None, quasi_identifiers=["age", "sex"], secret="y", n_attacks=6)
>>> sorted(s)
['inference', 'linkability', 'linkability_tie_aware', 'singling_out_multivariate', 'singling_out_univariate']
"""

from __future__ import annotations

import numpy as np

from . import evaluate
from ..errors import InputError


def _published(release, c: str) -> bool:
    return c in release.columns or (f"{c}_min" in release.columns and f"{c}_max" in release.columns)


def _entry(r: dict) -> dict:
    rate = lambda d: None if not d else d["value"]  # noqa: E731
    return {"risk": r["risk"]["value"], "ci": r["risk"]["ci"], "attack_rate": rate(r["attack_rate"]),
            "control_rate": rate(r.get("control_rate")), "baseline_rate": rate(r["baseline_rate"]),
            "n_success": r["n_success"], "n_attacks": r["n_attacks"], "warnings": r.get("warnings", [])}


def risk_summary(doc: dict) -> dict:
    """Each risk of an :func:`gpuanon.attack.evaluate` report with its interval and rates, one key each."""
    out = {}
    for mode, r in (doc.get("singling_out") or {}).items():
        out[f"singling_out_{mode}"] = {**_entry(r), "columns_of_successes": r["columns_of_successes"]}
    if doc.get("linkability"):
        r = doc["linkability"]
        out["linkability"] = _entry(r)
        out["linkability_tie_aware"] = _entry({**r, **r["tie_aware"]})
    for s, r in (doc.get("inference") or {}).items():
        out["inference"] = {**_entry(r), "secret": s}
    return out


def attack_release(release, original, control=None, *, quasi_identifiers, secret=None, n_attacks: int = 500,
                   seed: int = 0) -> dict:
    """:func:`risk_summary` of the attacks that apply to ``release`` (made from ``original``; ``control``
    the rows of the same population it was not made from, or None)."""
    cols = [c for c in original.columns if _published(release, c)]
    qi = [c for c in quasi_identifiers if c in cols and c != secret]
    attacks = ["singling-out"] + (["linkability"] if len(qi) >= 2 else [])
    secrets = [secret] if secret is not None and secret in cols and qi else []
    if secrets:
        attacks.append("inference")
    doc = evaluate(release, original, control, quasi_identifiers=qi or None, secrets=secrets, columns=cols,
                   attacks=attacks, n_attacks=n_attacks, seed=seed)
    return risk_summary(doc)


def split_control(df, fraction: float, seed: int = 0):
    """``(rest, control)``: a seeded random ``fraction`` of the rows held out as the attacks' control (rows
    of the same population that the release is not made from); both in table order."""
    n_c = int(round(fraction * len(df)))
    if not 0 < n_c < len(df):
        raise InputError(f"--control-fraction {fraction} leaves {n_c} control row(s) of {len(df)}; choose a fraction "
                         "in (0, 1) that keeps rows on both sides, e.g. --control-fraction 0.5")
    held = np.zeros(len(df), dtype=bool)
    held[np.random.default_rng(seed).permutation(len(df))[:n_c]] = True
    return df[~held].reset_index(drop=True), df[held].reset_index(drop=True)
