"""The Dask runner: ``Mondrian(cluster=...)`` and ``gpuanon anonymize --cluster`` fit here.

:class:`OnCluster` implements the runner protocol (:class:`gpuanon.anonymize.result.Runner`):
``fit(plan, source)`` opens the cluster once and runs the whole pipeline there
(:func:`.mondrian.run_on`): a frame is cut into one consecutive shard per worker and scattered, a
directory of Parquet files (or a list of them) is read by the workers themselves. The output, its
verification and metrics come with the fit; ``publish`` hands them on. Importing this module
registers the runner (:func:`gpuanon.anonymize.runners.register`), which is how ``cluster=``
reaches it without ``anonymize`` importing ``distributed``.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..anonymize.result import FitResult, Published, RunOptions
from ..anonymize.runners import register
from ..errors import SchemaError
from ..cluster.connect import open_cluster
from .mondrian import check_run_options, run_on, shard_sources


def split_frame(df: pd.DataFrame, n: int) -> list[pd.DataFrame]:
    """``n`` consecutive shards of nearly equal size (at least one row each)."""
    n = max(1, min(int(n), len(df)))
    bounds = np.linspace(0, len(df), n + 1).round().astype(np.int64)
    return [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _is_paths(source) -> bool:
    return isinstance(source, (str, os.PathLike, list, tuple))


class OnCluster:
    """The Dask runner (``cluster``: ``local:N``, ``cuda:N``, ``tcp://host:port`` or a client).

    ``local_rows``: a partition of at most this many rows is finished on one worker (default: the
    kept rows over the workers); ``timeout``: seconds for the scheduler to answer (default 20 to
    connect, 60 mid-run); ``out_dir``: the workers write the output there (Parquet, one file per
    shard; ``overwrite`` an existing one); ``gather``: bring the labels and the output here (the
    estimator's API; the command line keeps them on the workers when it writes ``out_dir``).
    """

    def __init__(self, cluster, options: RunOptions | None = None, *, local_rows: int | None = None,
                 timeout: float | None = None, out_dir=None, overwrite: bool = False, gather: bool = True,
                 processes: bool | None = None):
        self.cluster, self.options = cluster, options or RunOptions()
        self.local_rows, self.timeout, self.processes = local_rows, timeout, processes
        self.out_dir, self.overwrite, self.gather = out_dir, overwrite, gather

    def rows(self, source) -> int:
        """The rows of ``source`` (a pandas frame, or Parquet files: their metadata), checked not empty."""
        if not _is_paths(source) and not isinstance(source, pd.DataFrame):
            raise SchemaError(f"input must be a pandas DataFrame, got {type(source).__name__}")
        return int(sum(shard_sources(*((None, source) if _is_paths(source) else ([source], None)))[1]))

    def fit(self, plan, source) -> FitResult:
        """``plan`` over ``source`` on the cluster, opened once for the whole run."""
        check_run_options(self.local_rows)
        out_dir = check_run_options(None, self.out_dir, self.overwrite)
        timeout = 60.0 if self.timeout is None else self.timeout
        with open_cluster(self.cluster, backend=self.options.backend, processes=self.processes,
                          connect_timeout=20.0 if self.timeout is None else self.timeout) as handle:
            if _is_paths(source):
                sources, counts = shard_sources(paths=source)
            else:
                sources, counts = shard_sources(frames=split_frame(source, len(handle.workers)))
            return run_on(handle, plan, self.options, sources, counts, out_dir=out_dir, local_rows=self.local_rows,
                          gather=self.gather, timeout=timeout)

    def accepts(self, result: FitResult, df, fitted, fitted_ref, fitted_shape) -> bool:
        """The output was made with the fit: the fitted frame, or one of its shape, will do."""
        return df is fitted or (len(df), list(df.columns)) == fitted_shape

    def publish(self, result: FitResult, frame) -> Published:
        """The output made with the fit (None when the workers kept or wrote it), its verification and metrics."""
        v = result.verification
        meta = {"encoding": result.encoding_metadata(), "format": result.plan.output_format}
        return Published(result.cluster.output, v, result.metrics, meta, int(v.n_rows) + int(result.n_suppressed),
                         int(v.n_rows))


register("cluster", OnCluster)
