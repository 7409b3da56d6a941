"""The anonymization stage: k-anonymity, l-diversity and t-closeness by Mondrian partitioning.

- :mod:`~gpuanon.anonymize.criteria` -- k / l / t over partition sizes and histograms;
- :mod:`~gpuanon.anonymize.mondrian` -- the ``Mondrian`` estimator and its one pipeline
  (encode -> partition -> optimize -> hierarchies -> class statistics -> generalize -> verify ->
  metrics -> report);
- :mod:`~gpuanon.anonymize.optimize` -- the thesis's optimization step;
- :mod:`~gpuanon.anonymize.generalize` -- the published frame, built from the class statistics;
- :mod:`~gpuanon.anonymize.sweep` -- k / l / t grids on one encoded table.
"""

from .criteria import Criteria
from .mondrian import Mondrian
from .sweep import run_sweep

__all__ = ["Criteria", "Mondrian", "run_sweep"]
