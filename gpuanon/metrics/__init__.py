"""Information-loss metrics (the contract, section 7).

Every metric is computed from a :class:`ClassSummary`: one row per equivalence class (its size,
its target histogram, and for every QI its generalized value), plus the original columns'
value counts. A summary is built either from the anonymizer's encoded table and class
statistics (:func:`summary_from_labels`, on the device the table lives on: nothing per class or
per value comes back, only the metrics' numbers) or from any output table and the original table
(:func:`summary_from_output`, pandas on the host), so users' own tables and a peer's partitions
are scored by the same code.

Metrics: the entropy (uncertainty) coefficient ``U(T | X)`` per QI before and after and the
total loss; Gionis-Tassa conditional-entropy loss (raw and normalized); NCP (weighted);
discernibility; ``C_avg``; the classification metric; Sweeney's precision (for
hierarchy-generalized columns); class-size statistics; suppressed rows.

The package: :mod:`~gpuanon.metrics.formulas` (entropies and other formulas on counts, NumPy or
CuPy), :mod:`~gpuanon.metrics.columns` (a column's whole-table statistics: chunk / combine / finalize,
one process's and a cluster's), :mod:`~gpuanon.metrics.summary` (class summaries of the anonymizer's
classes, the hierarchy scorer), :mod:`~gpuanon.metrics.compute` (every metric from a
summary), :mod:`~gpuanon.metrics.output` (summaries of any output table against its original;
NCP of any partitioning).

Examples
--------
>>> import numpy as np, pandas as pd
>>> df = pd.DataFrame({"age": [20, 30, 40, 50], "c": ["a", "a", "b", "c"]})
>>> round(ncp(df, ["age", "c"], np.array([0, 0, 1, 1]), {"age": "numeric", "c": "categorical"}), 4)
0.3333
>>> round(entropy_loss([0.361, 0.221, 0.266, 0.279, 0.005], [0.259, 0.242, 0.209, 0.218, 0.007]), 3)
0.174
"""

from ..table.cells import SET_SEPARATOR, cell_text, parse_numeric_cells, split_set_text
from .compute import (column_ncp, compute_metrics, entropy_coefficients, label_entropy_coefficients,
                      suppressed_target_counts)
from .formulas import (entropy_bits, entropy_loss, interval_entropy, interval_entropy_at, precision, set_entropy,
                       uncertainty_coefficient)
from .output import ncp, ncp_per_column, output_metrics, summary_from_output
from .columns import ColumnStats, before_stats, column_stats
from .summary import (ClassSummary, ColumnSummary, HierarchyScorer, merge_equal_classes, release_buffers,
                      summary_from_labels)

__all__ = [
    "SET_SEPARATOR", "ClassSummary", "ColumnStats", "ColumnSummary", "HierarchyScorer", "before_stats",
    "cell_text", "column_ncp", "column_stats", "compute_metrics", "entropy_bits", "entropy_coefficients",
    "entropy_loss", "interval_entropy", "interval_entropy_at", "label_entropy_coefficients",
    "merge_equal_classes", "ncp", "ncp_per_column", "output_metrics", "parse_numeric_cells", "precision",
    "release_buffers", "set_entropy", "split_set_text", "summary_from_labels", "summary_from_output",
    "suppressed_target_counts", "uncertainty_coefficient",
]
