"""The anonymization stage: k-anonymity, l-diversity and t-closeness by Mondrian partitioning.

- :mod:`~gpuanon.anonymize.criteria` -- k / l / t over partition sizes and histograms;
- :mod:`~gpuanon.anonymize.plan` -- the run's plan, made and validated once per fit;
- :mod:`~gpuanon.anonymize.mondrian` -- the ``Mondrian`` estimator, a facade: it builds the plan,
  picks the runner (:mod:`~gpuanon.anonymize.runners`, the registry) and adopts its fit record
  (:mod:`~gpuanon.anonymize.result`);
- :mod:`~gpuanon.anonymize.pipeline` -- the single-process runner and its one pipeline
  (encode -> partition -> optimize -> hierarchies -> class statistics -> generalize -> verify ->
  metrics);
- :mod:`~gpuanon.anonymize.optimize` -- the thesis's optimization step;
- :mod:`~gpuanon.anonymize.generalize` -- the published frame, built from the class statistics;
- :mod:`~gpuanon.anonymize.sweep` -- k / l / t grids on one encoded table.
"""

from .criteria import Criteria
from .mondrian import Mondrian
from .sweep import run_sweep

__all__ = ["Criteria", "Mondrian", "run_sweep"]
