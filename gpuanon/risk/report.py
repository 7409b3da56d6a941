"""The ``risk`` section of an anonymization report: the measures of the input (before) and of the
published output (after), on the same QIs (an output's ``_min`` / ``_max`` pair stands for its QI).

The population is the same on both sides: a sampling fraction is turned into N = n_in / f once, and
the output (fewer rows where some were suppressed) is measured against that N (:func:`same_population`).

Two ways to the same figures: :func:`section_of_classes` from classes already grouped (``anonymize``
hands it the fit's own: :mod:`gpuanon.anonymize.risk_classes`), and :func:`risk_section` from the two
tables themselves (the input frame and the output as written, read back), the independent check;
:func:`differences` lists where two sections disagree.
"""

from __future__ import annotations

import math

from ..table.cells import resolve_qi_columns
from .measures import RiskResult, assess, assess_classes, suda_of
from .sampling import Population


def same_population(before: RiskResult) -> Population | None:
    """The population N that ``before`` was measured against, for the other side of a before / after."""
    return None if before.population is None else Population(size=before.population.population_size)


def risk_section(before, after, quasi_identifiers, *, population: int | None = None,
                 sampling_fraction: float | None = None, threshold: float = 0.2, suda: bool = False,
                 suda_max_size: int | None = None, backend: str | None = None) -> dict:
    """``{"before": RiskResult.to_dict(), "after": ..., "threshold": tau}``."""
    qi = list(quasi_identifiers)
    kw = dict(threshold=threshold, suda=suda, suda_max_size=suda_max_size, backend=backend)
    b = assess(before, qi, population=Population.of(population, sampling_fraction), **kw)
    a = assess(after, resolve_qi_columns(qi, after.columns), population=same_population(b), **kw)
    return {"before": b.to_dict(), "after": a.to_dict(), "threshold": threshold}


def section_of_classes(before, after, quasi_identifiers, output_columns, *, population: int | None = None,
                       sampling_fraction: float | None = None, threshold: float = 0.2, suda_tables=None,
                       suda_max_size: int | None = None, backend: str | None = None) -> dict:
    """The same section from the input's classes ``before`` and the output's ``after``
    (:class:`~gpuanon.risk.classes.Classes`), the output's QI columns named ``output_columns``.
    ``suda_tables``: ``(input frame, output frame)`` for SUDA2 / DIS-SUDA, which read the published
    cells column by column (None: no SUDA)."""
    qi = list(quasi_identifiers)
    b = assess_classes(before, qi, population=Population.of(population, sampling_fraction), threshold=threshold)
    same = same_population(b)
    a = assess_classes(after, output_columns, population=same, threshold=threshold)
    if suda_tables is not None:
        kw = dict(suda_max_size=suda_max_size, population=None if same is None else same.size, backend=backend)
        b.suda = suda_of(suda_tables[0], qi, n=before.n, **kw)
        a.suda = suda_of(suda_tables[1], output_columns, n=after.n, **kw)
    return {"before": b.to_dict(), "after": a.to_dict(), "threshold": threshold}


def differences(a, b, path: str = "") -> list:
    """The paths (``after.sample.n_classes``) where two sections (or any JSON values) differ; numbers
    must be equal (two NaNs are), lists element by element.

    >>> differences({"x": 1, "y": [1.0, 2.0]}, {"x": 1, "y": [1.0, 2.5]})
    ['y[1]']
    """
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                out.append(f"{path}.{k}".lstrip("."))
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [path.lstrip(".")]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b and type(a) is type(b) or (_number(a) and _number(b) and a == b) else [path.lstrip(".")]


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
