"""Re-identification risk of a table, raw or anonymized (SPEC section 13; docs/risk.md).

``assess(frame, quasi_identifiers, ...)`` groups the rows by their QI values as published
(:mod:`.classes`), and computes ARX's sample-based measures (prosecutor, journalist, marketer,
sample uniqueness: :mod:`.sample`), the population uniqueness models (Zayatz, Pitman, SNB,
Dankar's rule: :mod:`.population`) for a population size or sampling fraction (:mod:`.sampling`), sdcMicro's
individual risk with sampling weights, and SUDA2 / DIS-SUDA on request (``gpuanon.risk.suda``).
It reads only the table and the QI names, never the anonymizer (like :mod:`gpuanon.release.verify`).
This module is the package's index; the work is in :mod:`.measures`.

>>> import pandas as pd
>>> df = pd.DataFrame({"age": ["20-30"] * 3 + ["31-40"] * 2 + ["41-50"], "zip": ["1*"] * 6})
>>> r = assess(df, ["age", "zip"])
>>> r.sample.n_classes, r.sample.sample_uniques, r.sample.prosecutor.highest
(3, 1, 1.0)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .classes import SUPPRESSED
from .measures import (RiskResult, SampleRisk, assess, assess_classes, check_population, records_at_risk_curve,
                       suda_codes, suda_of)
from .population import DankarEstimate, ModelEstimate, PopulationRisk
from .sample import AttackerRisk, IndividualRisk
from .sampling import MAX_POPULATION, Population

if TYPE_CHECKING:  # SUDA2 / DIS-SUDA live in gpuanon.risk.suda
    from .suda import SudaResult  # noqa: F401

__all__ = ["MAX_POPULATION", "SUPPRESSED", "AttackerRisk", "DankarEstimate", "IndividualRisk", "ModelEstimate",
           "Population", "PopulationRisk", "RiskResult", "SampleRisk", "assess", "assess_classes", "check_population",
           "records_at_risk_curve", "suda_codes", "suda_of"]
