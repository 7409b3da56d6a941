"""Success rates and risks as anonymeter 1.1.0 computes them (``anonymeter/stats/confidence.py``).

A rate is Wilson's score estimate ``(S + z^2/2) / (N + z^2)`` with error
``z / (N + z^2) * sqrt(S (N - S) / N + z^2 / 4)``, ``z = Phi^-1((1 + CL) / 2)``. The residual risk is
``(attack - control) / (1 - control)`` with the propagated error, the value and the interval clipped
to ``[0, 1]``; without a control the risk is the attack rate. When the baseline rate reaches the attack
rate, the results cannot be trusted (a warning in the result).

>>> r = results(500, 450, 20, 30)
>>> round(r["attack_rate"]["value"], 6), round(r["risk"]["value"], 6)
(0.89695, 0.88998)
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ..errors import InputError


def probit(confidence_level: float) -> float:
    """``Phi^-1((1 + CL) / 2)`` (the standard library's normal quantile, as SciPy's ``norm.ppf``)."""
    return NormalDist().inv_cdf(0.5 * (1.0 + confidence_level))


def success_rate(n_total: float, n_success: float, confidence_level: float) -> dict:
    """Wilson's estimate of a success rate and its error (``value``, ``error``)."""
    if not 0 <= confidence_level <= 1:
        raise InputError(f"the confidence level must be in [0, 1], got {confidence_level}; e.g. --confidence 0.95")
    z = probit(confidence_level)
    z2 = z * z
    var = n_success * (n_total - n_success) / n_total if n_total else 0.0
    den = n_total + z2
    return {"value": (n_success + 0.5 * z2) / den, "error": (z / den) * math.sqrt(max(var, 0.0) + 0.25 * z2)}


def residual(attack: dict, control: dict) -> dict:
    """``(attack - control) / (1 - control)`` and its propagated error (not clipped)."""
    a, c = attack["value"], control["value"]
    if c >= 1:
        return {"value": float("nan"), "error": float("nan")}
    d_a = 1 / abs(1 - c)
    d_c = (a - 1) / (1 - c) ** 2
    return {"value": (a - c) / (1 - c), "error": math.sqrt((attack["error"] * d_a) ** 2 + (control["error"] * d_c) ** 2)}


def bind(rate: dict) -> dict:
    """A risk: the value and ``value -+ error`` clipped to ``[0, 1]``."""
    v, e = rate["value"], rate["error"]
    if math.isnan(v):
        return {"value": None, "ci": [None, None]}
    clip = lambda x: min(max(x, 0.0), 1.0)  # noqa: E731
    return {"value": clip(v), "ci": [clip(v - e), clip(v + e)]}


def results(n_attacks, n_success: float, n_baseline: float, n_control: float | None = None,
            confidence_level: float = 0.95) -> dict:
    """anonymeter's ``EvaluationResults``: the three rates, the risk and its warnings. ``n_attacks`` is one
    number or ``(attack, baseline, control)``."""
    n_a, n_b, n_c = n_attacks if isinstance(n_attacks, tuple) else (n_attacks,) * 3
    attack = success_rate(n_a, n_success, confidence_level)
    base = success_rate(n_b, n_baseline, confidence_level)
    control = None if n_control is None else success_rate(n_c, n_control, confidence_level)
    warnings = []
    if base["value"] >= attack["value"]:
        warnings.append(f"the attack does no better than the baseline (attack rate {attack['value']:.4f}, "
                        f"baseline {base['value']:.4f}): results cannot be trusted")
    if control is not None and control["value"] >= 1:
        warnings.append("the control attack always succeeds: the residual risk cannot be measured")
    risk = bind(attack if control is None else residual(attack, control))
    return {"n_attacks": n_a, "n_success": n_success, "n_baseline": n_baseline, "n_control": n_control,
            "confidence_level": confidence_level, "attack_rate": attack, "baseline_rate": base,
            "control_rate": control, "risk": risk, "baseline_risk": bind(base), "warnings": warnings}
