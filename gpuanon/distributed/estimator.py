"""``Mondrian(..., cluster=...)``: the estimator's fit on a Dask cluster, and its report.

:func:`fit_on_cluster` runs the whole pipeline on the cluster (the frame is cut into one
consecutive shard per worker and scattered), then sets the estimator's learned state as a
single-process fit and transform would: ``labels_``, ``n_classes_``, ``n_partitions_``,
``verification_``, ``metrics_``, ``report_`` (with a ``cluster`` section: levels, bytes per
level, bytes moved between workers, the dashboard). ``transform`` returns the output computed
with the fit.
"""

from __future__ import annotations

import weakref

import numpy as np
import pandas as pd

from ..backend import TransferLog
from ..errors import SchemaError
from .cluster import open_cluster
from .mondrian import DistributedResult, output_metadata, run_distributed
from .worker import local_table


def split_frame(df: pd.DataFrame, n: int) -> list[pd.DataFrame]:
    """``n`` consecutive shards of nearly equal size (at least one row each)."""
    n = max(1, min(int(n), len(df)))
    bounds = np.linspace(0, len(df), n + 1).round().astype(np.int64)
    return [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def fit_on_cluster(est, df: pd.DataFrame, *, local_rows: int | None = None):
    """Fit (and transform) ``est`` on its ``cluster``; returns ``est``."""
    if not isinstance(df, pd.DataFrame):
        raise SchemaError(f"input must be a pandas DataFrame, got {type(df).__name__}")
    with open_cluster(est.cluster, backend=est.backend) as handle:
        frames = split_frame(df, len(handle.workers))
        res = run_distributed(est, handle.client, frames=frames, local_rows=local_rows)
    apply_result(est, res, df)
    return est


def apply_result(est, res: DistributedResult, df: pd.DataFrame | None) -> None:
    """Set the estimator's learned state from a cluster run."""
    est.schema_ = res.schema
    est.backend_ = res.backend
    est.criteria_ = res.criteria
    est.table_ = None  # the encoded table lives on the workers
    est._labels = res.labels
    est._labels_host = res.labels
    est._transfers = TransferLog(simulate=True)
    est.n_partitions_ = int(res.n_partitions)
    est.n_classes_ = int(res.n_partitions)
    est.n_suppressed_ = int(res.n_suppressed)
    est._suppression_reason = res.suppression_reason
    est.partition_info_ = {k: res.info[k] for k in ("levels", "attempts")}
    est.optimization_ = res.optimization
    est.hierarchies_ = res.hierarchies
    est.verification_ = res.verification
    est.metrics_ = res.metrics
    est.cluster_info_ = res.info
    est._cluster_output = res.output
    est.output_metadata_ = output_metadata(res.encoding, est.output_format)
    est._fitted_frame = None
    est._cluster_frame = None if df is None else (weakref.ref(df), len(df), list(df.columns))
    if df is not None and res.output is not None:
        est.report_ = cluster_report(est, res, len(df))


def cluster_report(est, res: DistributedResult, n_rows_in: int) -> dict:
    """The report of a cluster run: the single-process report's fields, and ``cluster``."""
    s, v = res.schema, res.verification
    missing = {c.name: c.n_missing for c in res.encoding.columns if c.n_missing}
    n_out = int(v.n_rows)
    return {
        "backend": res.backend.name,
        "backend_reason": res.backend.reason,
        "device": res.backend.device,
        "n_rows_in": int(n_rows_in),
        "n_rows_out": n_out,
        "n_suppressed": int(res.n_suppressed),
        "suppression_reason": res.suppression_reason,
        "n_missing": missing,
        "n_sensitive_missing": int(res.sensitive_missing),
        "n_partitions": int(res.n_partitions),
        "n_classes": int(v.n_classes),
        "requested": {"k": int(est.k), "l": int(est.l or 0), "l_kind": est.l_kind, "t": est.t,
                      "t_distance": est.t_distance},
        "achieved": {"k": v.k, "l": v.l, "t": v.t, "t_distance": res.criteria.t_distance},
        "class_size": v.size_stats,
        "mode": est.mode,
        "format": est.output_format,
        "roles": s.to_dict(),
        "partition": {k: res.info[k] for k in ("levels", "attempts")},
        "metrics": res.metrics,
        "hierarchies": res.hierarchies,
        # the loss before the step is not measured in a cluster (one process reports it)
        "optimization": None if res.optimization is None else dict(res.optimization, entropy_loss_before=None,
                                                                   entropy_loss_after=None),
        "encoding": local_table(res.encoding, np.zeros((len(res.encoding.columns), 0), dtype=np.uint32), None, None,
                                np).encoding_metadata(),
        "seconds": _stage_seconds(res.info.get("seconds", {})),
        "transfers": TransferLog(simulate=True).to_dict(),
        "cluster": {k: x for k, x in res.info.items() if k != "seconds"},
    }


def _stage_seconds(secs: dict) -> dict:
    """A cluster run's seconds under the single-process report's stage names (and its own)."""
    out = {"encode": secs.get("encode", 0.0),
           "partition": secs.get("partition_levels", 0.0) + secs.get("partition_local", 0.0),
           "verify": secs.get("stages", 0.0),  # class statistics, verification and metrics, on the homes
           "write": secs.get("output", 0.0), "total": secs.get("total", 0.0)}
    out.update({f"cluster_{k}": v for k, v in secs.items()})
    return {k: round(float(v), 6) for k, v in out.items()}


def cluster_output(est, df):
    """``transform`` after a cluster fit: the output made by the fit, for the table it was fitted on."""
    ref, n, cols = est._cluster_frame
    if df is not ref() and (len(df) != n or list(df.columns) != cols):
        raise SchemaError("transform() publishes the partitions fitted on one table and this is another; "
                          "pass the table given to fit(), or call fit_transform(new_table)")
    return est._cluster_output

