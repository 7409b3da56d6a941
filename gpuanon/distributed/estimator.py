"""``Mondrian(..., cluster=...)``: the estimator's fit on a Dask cluster.

:func:`fit_on_cluster` runs the whole pipeline on the cluster (the frame is cut into one
consecutive shard per worker and scattered) and returns its
:class:`~gpuanon.anonymize.result.FitResult`; the estimator sets its learned state from it as after
a single-process fit and transform (``transform`` returns the output computed with the fit).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..anonymize.result import FitResult
from ..errors import SchemaError
from .cluster import open_cluster
from .mondrian import run_distributed


def split_frame(df: pd.DataFrame, n: int) -> list[pd.DataFrame]:
    """``n`` consecutive shards of nearly equal size (at least one row each)."""
    n = max(1, min(int(n), len(df)))
    bounds = np.linspace(0, len(df), n + 1).round().astype(np.int64)
    return [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


class OnCluster:
    """The Dask runner of ``Mondrian(cluster=...)`` (:class:`gpuanon.anonymize.result.Runner`)."""

    def __init__(self, local_rows: int | None = None):
        self.local_rows = local_rows

    def fit(self, est, df) -> FitResult:
        if not isinstance(df, pd.DataFrame):
            raise SchemaError(f"input must be a pandas DataFrame, got {type(df).__name__}")
        return fit_on_cluster(est, df, local_rows=self.local_rows)


def fit_on_cluster(est, df: pd.DataFrame, *, local_rows: int | None = None) -> FitResult:
    """Run ``est``'s parameters on its ``cluster`` over ``df``; the output and labels gathered."""
    with open_cluster(est.cluster, backend=est.backend) as handle:
        frames = split_frame(df, len(handle.workers))
        return run_distributed(est, handle.client, frames=frames, local_rows=local_rows)
