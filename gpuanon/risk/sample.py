"""Sample-based risk (ARX ``RiskModelSampleSummary``) and individual risk (sdcMicro ``indivRisk``).

From the class sizes f_j (n = sum f_j, J classes) and the population class sizes F_j (a population
table's counts or the sums of sampling weights; F_j = f_j without either):

* prosecutor: highest 1 / min f_j, lowest 1 / max f_j, average (success rate) J / n, records at
  risk at tau: (1/n) sum of f_j over the classes with 1 / f_j > tau (strict);
* journalist: the same with F_j, average max(J / sum F_j, (1/n) sum f_j / F_j);
* marketer: (1/n) sum f_j / F_j;
* sample uniqueness: classes of size 1 / n;
* individual risk (Benedetti-Franconi, sdcMicro's ``approx``): p = f / F, r = p/(1-p) ln(1/p) for
  f = 1, p/(1-p) - (p/(1-p))^2 ln(1/p) for f = 2, p / (f - (1 - p)) for f > 2, 1/f where f = F;
  global risk sum_j f_j r_j (expected re-identifications), its share of n.

Each is a few whole-array reductions over the classes (on the device for CuPy arrays).

>>> import numpy as np
>>> p = prosecutor(np.array([1, 2, 3]), 0.4)
>>> p.highest, p.lowest, p.average, p.records_at_risk
(1.0, 0.3333333333333333, 0.5, 0.5)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..backend import to_scalar


@dataclass
class AttackerRisk:
    """One attacker model's risks at ``threshold`` (records_at_risk: share of the counted rows)."""

    highest: float
    lowest: float
    average: float
    records_at_risk: float
    threshold: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class IndividualRisk:
    """Benedetti-Franconi individual risk: ``global_risk`` = expected re-identifications (sum over
    records), ``global_risk_share`` = that / n; ``highest`` / ``mean`` over records; records with
    a risk above ``threshold``."""

    global_risk: float
    global_risk_share: float
    highest: float
    mean: float
    records_above_threshold: int
    threshold: float

    def to_dict(self) -> dict:
        return asdict(self)


def _f(x) -> float:
    return float(to_scalar(x))


def prosecutor(sizes, threshold: float, xp=np) -> AttackerRisk:
    n = _f(sizes.sum())
    if n == 0:
        return AttackerRisk(0.0, 0.0, 0.0, 0.0, threshold)
    at_risk = _f(xp.where(1.0 / sizes > threshold, sizes, 0).sum()) / n
    return AttackerRisk(1.0 / _f(sizes.min()), 1.0 / _f(sizes.max()), int(sizes.shape[0]) / n, at_risk,
                        threshold)


def journalist(sizes, pop, threshold: float, xp=np) -> AttackerRisk:
    n = _f(sizes.sum())
    if n == 0:
        return AttackerRisk(0.0, 0.0, 0.0, 0.0, threshold)
    at_risk = _f(xp.where(1.0 / pop > threshold, sizes, 0).sum()) / n
    avg = max(int(sizes.shape[0]) / _f(pop.sum()), _f((sizes / pop).sum()) / n)
    return AttackerRisk(1.0 / _f(pop.min()), 1.0 / _f(pop.max()), avg, at_risk, threshold)


def marketer(sizes, pop) -> float:
    n = _f(sizes.sum())
    return _f((sizes / pop).sum()) / n if n else 0.0


def class_risk(sizes, pop, xp=np):
    """Benedetti-Franconi risk of each class (f_j, F_j)."""
    f = sizes.astype(xp.float64)
    with np.errstate(all="ignore"):
        p = f / pop
        q = p / (1.0 - p)
        lg = xp.log(1.0 / p)
        r = xp.where(f == 1, q * lg, xp.where(f == 2, q - q * q * lg, p / (f - (1.0 - p))))
        r = xp.where(f == pop, 1.0 / f, r)
    return r


def individual(sizes, pop, threshold: float, xp=np) -> IndividualRisk:
    r = class_risk(sizes, pop, xp)
    n = _f(sizes.sum())
    total = _f((r * sizes).sum())
    return IndividualRisk(total, total / n if n else 0.0, _f(r.max()) if n else 0.0, total / n if n else 0.0,
                          int(to_scalar(xp.where(r > threshold, sizes, 0).sum())), threshold)
