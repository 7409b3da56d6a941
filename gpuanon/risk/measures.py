"""The risk measures of one table (SPEC section 13): :func:`assess` groups the rows by their QI values
as published and computes the sample-based measures, the population models for a :class:`Population`,
sdcMicro's individual risk with sampling weights, and SUDA2 / DIS-SUDA on request; the result
dataclasses and their strict JSON form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..backend import frame_to_host, get_backend, is_device_frame, to_host
from ..errors import InputError
from ..output.jsonsafe import json_safe
from .classes import SUPPRESSED, Classes, group, to_host_frame
from .population import PopulationRisk, population_uniqueness
from .sample import AttackerRisk, IndividualRisk, class_risk, individual, journalist, marketer, prosecutor
from .sampling import Population, check_threshold
from .suda import suda2

if TYPE_CHECKING:  # SUDA2 / DIS-SUDA live in gpuanon.risk.suda
    from .suda import SudaResult  # noqa: F401

__all__ = ["RiskResult", "SampleRisk", "assess", "assess_classes", "check_population", "records_at_risk_curve",
           "suda_codes", "suda_of"]


@dataclass
class SampleRisk:
    """The sample-based measures: rows (``n_rows`` read, ``n`` counted, ``n_suppressed`` left out
    because every QI is ``*``), classes, sample uniques, and the three attacker models (journalist
    with ``population_source``: ``population_table``, ``weights`` or ``sample`` (F_j = f_j))."""

    n_rows: int
    n: int
    n_suppressed: int
    n_classes: int
    sample_uniques: int
    sample_uniqueness: float
    class_size: dict
    prosecutor: AttackerRisk
    journalist: AttackerRisk
    marketer: float
    population_source: str

    def to_dict(self) -> dict:
        return {"n_rows": self.n_rows, "n": self.n, "n_suppressed": self.n_suppressed, "n_classes": self.n_classes,
                "sample_uniques": self.sample_uniques, "sample_uniqueness": self.sample_uniqueness,
                "class_size": dict(self.class_size), "prosecutor": self.prosecutor.to_dict(),
                "journalist": self.journalist.to_dict(), "marketer": {"average": self.marketer},
                "population_source": self.population_source}


@dataclass
class RiskResult:
    """What :func:`assess` returns. ``class_size_histogram``: ``{size: classes of that size}``;
    ``per_record`` (on request): one row per input row (class, f, F, prosecutor and individual risk;
    NaN for a suppressed row); ``suda``: the SUDA2 / DIS-SUDA result (``gpuanon.risk.suda``)."""

    quasi_identifiers: list
    sample: SampleRisk
    population: PopulationRisk | None = None
    individual: IndividualRisk | None = None
    suda: "SudaResult | None" = None
    class_size_histogram: dict = field(default_factory=dict)
    per_record: Any = None

    def to_dict(self) -> dict:
        """Strict JSON: NaN and infinities become None."""
        out = {"quasi_identifiers": list(self.quasi_identifiers), "sample": self.sample.to_dict(),
               "population": None if self.population is None else self.population.to_dict(),
               "individual": None if self.individual is None else self.individual.to_dict(),
               "suda": None if self.suda is None else self.suda.to_dict(),
               "class_size_histogram": {str(k): int(v) for k, v in self.class_size_histogram.items()},
               "records_at_risk_curve": records_at_risk_curve(self.class_size_histogram)}
        return json_safe(out)


def records_at_risk_curve(histogram: dict, thresholds=None) -> dict:
    """Prosecutor records at risk (share of the counted rows with 1 / f > tau) at each threshold."""
    if thresholds is None:
        thresholds = [round(0.05 * i, 2) for i in range(1, 20)]
    sizes = np.array(list(histogram.keys()), dtype=np.float64)
    counts = np.array(list(histogram.values()), dtype=np.float64)
    n = float((sizes * counts).sum())
    return {"thresholds": list(thresholds),
            "records_at_risk": [float((sizes * counts)[1.0 / sizes > t].sum() / n) if n else 0.0 for t in thresholds]}


def check_population(n_rows: int, population=None, sampling_fraction=None, threshold: float = 0.2) -> None:
    """The population options' one-line errors, before any work (``n_rows``: the table's rows)."""
    check_threshold(threshold)
    spec = Population.of(population, sampling_fraction)  # both given, a fraction outside (0, 1], not whole
    if spec is not None and spec.size is not None:
        spec.size_for(n_rows, "the table's {n} rows")


def _suda_column(s) -> np.ndarray:
    """The codes of one published column: missing and ``*`` are -1."""
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    codes = codes.astype(np.int64, copy=False)
    star = np.flatnonzero(np.asarray(uniques, dtype=object) == SUPPRESSED)
    if star.size:
        codes = np.where(codes == star[0], -1, codes)
    return codes


def suda_codes(frame, columns) -> tuple[np.ndarray, list]:
    """``(codes rows x M, QI names)`` for SUDA2 from the published cells: one QI per column, a
    ``X_min`` / ``X_max`` pair one QI ``X``; a missing cell or the suppression marker ``*`` is missing
    (a negative code: it never joins an MSU, sdcMicro's rule for NA)."""
    cols = list(columns)
    frame = to_host_frame(frame[cols])  # the QIs only (a cuDF frame: one copy of them)
    codes, names, i = [], [], 0
    while i < len(cols):
        c = cols[i]
        code = _suda_column(frame[c])
        if c.endswith("_min") and i + 1 < len(cols) and cols[i + 1] == c[:-4] + "_max":
            hi = _suda_column(frame[cols[i + 1]])
            code = np.where((code >= 0) | (hi >= 0), (code + 1) * (int(hi.max(initial=0)) + 2) + hi + 1, -1)
            c, i = c[:-4], i + 1
        codes.append(code)
        names.append(c)
        i += 1
    out = np.stack(codes, axis=1) if codes else np.zeros((len(frame), 0), dtype=np.int64)
    return out, names


def assess_classes(g: Classes, quasi_identifiers, *, population: int | None = None,
                   sampling_fraction: float | None = None, threshold: float = 0.2) -> RiskResult:
    """:func:`assess`'s measures (no SUDA, no per-record table) of classes already grouped (``g``,
    e.g. :func:`gpuanon.risk.classes.merged_classes`), named by ``quasi_identifiers``."""
    threshold = check_threshold(threshold)
    spec = Population.of(population, sampling_fraction)
    return _result(list(quasi_identifiers), g, None if spec is None else spec.size_for(g.n), threshold, False)


def suda_of(frame, quasi_identifiers, *, suda_max_size: int | None = None, population: int | None = None,
            n: int | None = None, backend: str | None = None):
    """SUDA2 / DIS-SUDA of ``frame``'s published QIs as :func:`assess` runs it (``n`` rows counted
    against the population ``population``: DIS-SUDA's fraction n / N)."""
    xp = np
    if is_device_frame(frame) or backend not in (None, "cpu"):
        xp = get_backend(backend if backend is not None else "gpu", quiet=True, n_rows=len(frame)).xp
    if is_device_frame(frame) and xp is np:
        frame = frame_to_host(frame)
    return _suda(frame, list(quasi_identifiers), suda_max_size, None if population is None else n / population, xp)


def _suda(frame, qi, suda_max_size, sampling_fraction, xp):
    """SUDA2 / DIS-SUDA (:func:`gpuanon.risk.suda.suda2`) of the published QIs, on ``xp``'s device;
    DIS-SUDA's sampling fraction is n / N when a population is given, else sdcMicro's 0.01."""
    codes, names = suda_codes(frame, qi)
    kw = {} if sampling_fraction is None else {"sampling_fraction": sampling_fraction}
    return suda2(codes, max_size=suda_max_size, names=names, xp=xp, **kw)


def assess(frame, quasi_identifiers, *, population: int | None = None, sampling_fraction: float | None = None,
           weights=None, population_table=None, threshold: float = 0.2, suda: bool = False,
           suda_max_size: int | None = None, per_record: bool = False, backend: str | None = None) -> RiskResult:
    """The re-identification risk of ``frame`` (pandas or cuDF) on ``quasi_identifiers``.

    Parameters
    ----------
    population, sampling_fraction : the population size N, or n / N (at most one): adds the
        population uniqueness models.
    weights : a column name (or one number per row): sampling weights; F_j = their sum per class.
    population_table : a frame holding the QIs: the population the sample was drawn from; F_j = its
        rows per QI combination (every sample combination must occur in it).
    threshold : tau of the records at risk (strict 1 / f > tau), default 0.2.
    suda, suda_max_size : SUDA2 / DIS-SUDA (``gpuanon.risk.suda``), MSUs up to that size.
    per_record : also return ``per_record``, one row of risks per input row.
    backend : ``cpu`` / ``gpu`` / ``auto`` (default: the device of a cuDF frame, else the CPU).
    """
    threshold = check_threshold(threshold)
    if weights is not None and population_table is not None:
        raise InputError("give sampling weights or a population table, not both")
    qi = list(quasi_identifiers)
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    if not len(frame):
        raise InputError("the table has no rows (a header only): there is no risk to measure; give a table with rows")
    spec = Population.of(population, sampling_fraction)  # the option errors before any work
    if isinstance(weights, str) and weights in qi:
        raise InputError(f"weights column '{weights}' is also a quasi-identifier; name another column "
                         f"with --weights, or leave it out of --qi")
    xp = np
    if is_device_frame(frame) or backend not in (None, "cpu"):
        be = get_backend(backend if backend not in (None,) else "gpu", quiet=True, n_rows=len(frame))
        xp = be.xp
    if is_device_frame(frame) and xp is np:
        frame = frame_to_host(frame)
    g: Classes = group(frame, qi, xp=xp, weights=weights, population_table=population_table)
    N = None if spec is None else spec.size_for(g.n)
    res = _result(qi, g, N, threshold, per_record)
    if suda:
        res.suda = _suda(frame, qi, suda_max_size, None if N is None else g.n / N, xp)
    return res


def _result(qi, g: Classes, N, threshold, per_record) -> RiskResult:
    xp = g.xp
    sizes = g.sizes
    pop = g.pop_sizes if g.pop_sizes is not None else sizes.astype(xp.float64)
    if g.n:
        hs, hc = xp.unique(sizes, return_counts=True)
        hs, hc = to_host(hs), to_host(hc)
    else:
        hs = hc = np.zeros(0, dtype=np.int64)
    hist = {int(s): int(c) for s, c in zip(hs, hc)}
    uniques = hist.get(1, 0)
    stats = {}
    if g.n:
        cum = np.cumsum(hc)  # the median class size, from the histogram
        J = int(cum[-1])
        lo, hi = hs[np.searchsorted(cum, (J - 1) // 2 + 1)], hs[np.searchsorted(cum, J // 2 + 1)]
        med = (float(lo) + float(hi)) / 2.0
        stats = {"min": int(hs.min()), "median": med, "max": int(hs.max()), "mean": g.n / g.n_classes}
    sample = SampleRisk(g.n_rows, g.n, g.n_suppressed, g.n_classes, uniques, uniques / g.n if g.n else 0.0, stats,
                        prosecutor(sizes, threshold, xp), journalist(sizes, pop, threshold, xp) if g.n else
                        AttackerRisk(0.0, 0.0, 0.0, 0.0, threshold), marketer(sizes, pop) if g.n else 0.0,
                        g.pop_source or "sample")
    popres = None
    if N is not None and g.n:
        popres = population_uniqueness(hs, hc, population_size=N)
    ind = individual(sizes, pop, threshold, xp) if g.pop_sizes is not None and g.n else None
    res = RiskResult(qi, sample, popres, ind, None, hist)
    if per_record:
        res.per_record = _per_record(g, pop)
    return res


def _per_record(g: Classes, pop):
    xp = g.xp
    rc = to_host(g.row_class)
    f = to_host(g.sizes).astype(np.float64)
    F = to_host(pop).astype(np.float64)
    r = to_host(class_risk(g.sizes, pop, xp)) if g.pop_sizes is not None else None
    ok = rc >= 0
    idx = np.where(ok, rc, 0)
    out = {"class": np.where(ok, rc, -1), "class_size": np.where(ok, f[idx], np.nan),
           "population_class_size": np.where(ok, F[idx], np.nan),
           "prosecutor_risk": np.where(ok, 1.0 / f[idx], np.nan)}
    if r is not None:
        out["individual_risk"] = np.where(ok, r[idx], np.nan)
    return pd.DataFrame(out)
