"""The ``risk`` section of an anonymization report: the measures of the input (before) and of the
published output (after), on the same QIs (an output's ``_min`` / ``_max`` pair stands for its QI).

The population is the same on both sides: a sampling fraction is turned into N = n_in / f once, and
the output (fewer rows where some were suppressed) is measured against that N.
"""

from __future__ import annotations

from ..cells import resolve_qi_columns
from . import assess


def risk_section(before, after, quasi_identifiers, *, population: int | None = None,
                 sampling_fraction: float | None = None, threshold: float = 0.2, suda: bool = False,
                 suda_max_size: int | None = None, backend: str | None = None) -> dict:
    """``{"before": RiskResult.to_dict(), "after": ..., "threshold": tau}``."""
    qi = list(quasi_identifiers)
    kw = dict(threshold=threshold, suda=suda, suda_max_size=suda_max_size, backend=backend)
    b = assess(before, qi, population=population, sampling_fraction=sampling_fraction, **kw)
    N = b.population.population_size if b.population is not None else None
    a = assess(after, resolve_qi_columns(qi, after.columns), population=N, **kw)
    return {"before": b.to_dict(), "after": a.to_dict(), "threshold": threshold}
