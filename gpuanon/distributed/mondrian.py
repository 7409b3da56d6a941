"""Distributed Mondrian on Dask: the same partitions, output and report as one process.

The rows are sharded across the workers (one shard per Parquet file, read by the worker itself,
or per piece of a frame scattered from here); every row carries its global row index. Then:

1. **Encode** (:mod:`gpuanon.table.dictionaries`): the global dictionaries are the chunk / combine /
   finalize reductions one process runs on one chunk; each worker profiles and encodes its shard. A user hierarchy (:mod:`.options`) is
   validated against the column's values over every shard, its leaf order is the column's code
   order, and it is bound to those codes once and travels in the encoding: the spans below, the
   homes' kernel, the published cells, verification and metrics read it as one process does.
2. **Levels**: all partitions larger than ``local_rows`` advance one level at a time, exactly as
   in :func:`kernels.mondrian.mondrian_partition`. Per level the workers return, per partition,
   each column's smallest and largest key and the categorical codes present; the coordinator
   combines them and takes the spans with the kernel's own :func:`~kernels.mondrian.partition_spans`
   (on one representative row per value, which gives the same spans). Along the widest column
   the exact lower median is found by radix selection: per round every worker counts, per
   partition, its keys in 256 bins of the next 8 bits among those matching the prefix found so
   far (the bits shared by the partition's smallest and largest key are skipped); the summed
   counts fix the next 8 bits of the median. Never sampling. In relaxed mode the selected key is
   ``(value << 32) | global row`` (ties split by row index, as the kernel does). The children's
   sizes and sensitive histograms are one more reduction; the criteria run here on them; a
   partition without an allowed cut tries the next widest column, as in the kernel.
3. **Move**: a partition of at most ``local_rows`` rows (and any final one) becomes a *group*;
   groups are spread over the workers in balanced runs and every shard sends each group's rows
   to its home (Dask moves the pieces between workers). A home holds whole groups in global row
   order and finishes the open ones with the single-node kernel (rows start together per group,
   so the kernel numbers and cuts them as one process would). The optimization step is
   partition-local: with ``optimize`` each home runs it on its whole partitions, and the homes'
   counts are summed (the partitions before it are summarized in the stages, for the entropy
   loss the step saved).
4. **Labels**: each home numbers its classes by their smallest global row; the coordinator
   merges these first rows (one integer per class) into the global numbering; labels go back to
   the shards that own the rows.
5. **Stages**: class statistics, verification (of the published cells, per home: every class is
   whole on one home) and the class summaries run on the homes, with the whole-table column
   statistics reduced over the shards (:mod:`.metrics`) or held in value ranges across the
   workers (:mod:`.ranges`); the coordinator combines scalars, class
   sizes and the summaries into every metric. Classes of different homes that publish the same
   cells (relaxed cuts, exact classes, two halves of a hierarchy node) are one output class,
   verified whole from their sizes and sensitive histograms (:mod:`.merge`). Each shard writes its anonymized rows, in input order, as
   one Parquet file of the output directory; nothing of the table passes through this process.

Examples
--------
>>> from gpuanon import Mondrian
>>> from gpuanon.datasets import load_adult
>>> df = load_adult().head(3000)
>>> m = Mondrian(k=5, quasi_identifiers=["age", "education"], backend="cpu", progress=False)
>>> res = run_distributed(m, "local:2", frames=[df.iloc[:1000], df.iloc[1000:]])  # doctest: +SKIP
>>> (res.labels == m.fit(df).labels_).all()  # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import numpy as np
import pandas as pd

from ..anonymize.plan import Plan
from ..anonymize.result import ClusterDetails, EncodingSummary, FitResult, RunOptions
from ..backend import TransferLog
from ..errors import InputError, SchemaError, shown
from ..cluster.connect import open_cluster
from .options import hierarchy_report
from .context import Cluster
from .recovery import unit
from .stages import (criteria_and_blocks, finish_on_homes, load_and_encode, load_shards, partition_levels,
                     verify_and_measure, write_output)
from ..cluster.runner import Runner
from .tasks import backend_of, output_metadata
from .values import Blocks, Encoded, Homes, Measured, Partitioned

log = logging.getLogger("gpuanon")

# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------

def _parquet_files(path) -> list[str]:
    p = os.fspath(path)
    if os.path.isdir(p):
        files = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".parquet") and not f.startswith((".", "_")))
        if not files:
            raise InputError(f"directory '{p}' holds no .parquet files; write the table as one or more Parquet "
                             f"files there (one per shard)")
        return files
    if p.endswith(".parquet") and os.path.isfile(p):
        return [p]
    raise InputError(f"'{p}' is neither a directory of Parquet files nor a .parquet file; a cluster run reads "
                     f"Parquet (convert the table with pandas' to_parquet)")


def _row_counts(files) -> list[int]:
    import pyarrow.parquet as pq  # noqa: PLC0415

    return [int(pq.ParquetFile(f).metadata.num_rows) for f in files]


def shard_sources(frames=None, paths=None) -> tuple[list, list[int]]:
    """The shards' sources (frames, or Parquet files read by the workers) and their row counts;
    one clear error for a missing, doubled, empty or unreadable table."""
    if (frames is None) == (paths is None):
        raise InputError("give the table either as frames (shards in row order) or as paths (Parquet files)")
    if paths is not None:
        files = _parquet_files(paths) if not isinstance(paths, (list, tuple)) else [os.fspath(p) for p in paths]
        sources, counts = files, _row_counts(files)
    else:
        frames = list(frames)
        if not frames or not all(isinstance(f, pd.DataFrame) for f in frames):
            raise InputError("frames must be a non-empty list of pandas DataFrames (the shards, in row order)")
        sources, counts = frames, [len(f) for f in frames]
    if int(sum(counts)) == 0:
        raise SchemaError("the input table is empty (0 rows); give a table with rows")
    return sources, counts


def check_run_options(local_rows=None, out_dir=None, overwrite: bool = False):
    """``local_rows`` a whole number >= 1 and ``out_dir`` new (or ``overwrite``); the output
    directory's normal name."""
    if local_rows is not None and (isinstance(local_rows, bool) or not isinstance(local_rows, (int, np.integer))
                                   or local_rows < 1):
        raise InputError(f"local_rows must be a whole number of rows >= 1, got {shown(local_rows)}")
    if out_dir is not None:
        out_dir = os.path.normpath(os.fspath(out_dir))  # "out/" and "out" are one folder
        if os.path.exists(out_dir) and not overwrite:
            raise InputError(f"output '{out_dir}' exists; choose a new directory or pass --overwrite")
    return out_dir


def run_distributed(est, cluster, *, frames=None, paths=None, out_dir=None, local_rows: int | None = None,
                    gather: bool = True, processes: bool | None = None, overwrite: bool = False,
                    timeout: float = 60.0, on_stage=None) -> FitResult:
    """Run a :class:`~gpuanon.Mondrian` estimator's parameters on a Dask cluster (the cluster
    opened once, here; :class:`gpuanon.distributed.estimator.OnCluster` is the estimator's runner).

    Parameters
    ----------
    est : Mondrian
        Its parameters (k, l, t, roles, mode, format, suppression budget, backend, the
        optimization step, hierarchies: the user's and automatic ones) make the run's plan
        (:meth:`gpuanon.anonymize.plan.Plan.of`, validated once; see :mod:`.options`).
    cluster : str or distributed.Client
        ``local:N``, ``cuda:N``, ``tcp://host:port`` or a client (see :mod:`gpuanon.cluster.connect`).
    frames : list of DataFrame, optional
        Shards in row order (scattered to the workers round robin).
    paths : directory or list of Parquet files, optional
        Shards read by the workers themselves (files in name order give the row order).
    out_dir : path, optional
        Write the output there as one Parquet file per shard (``part-00000.parquet`` ...), by
        the workers; written to a temporary sibling and renamed only when every shard is done.
    local_rows : int, optional
        A partition of at most this many rows moves to one worker and is finished there
        (default: the kept rows divided by the number of workers, rounded up).
    gather : bool
        Bring the labels and the output frame back here (the estimator's API); False keeps
        them on the workers (the command line with ``out_dir``).
    processes : bool, optional
        For ``local:N``: workers as processes (the default, as on a real cluster) or threads.
    timeout : float
        Seconds to wait for the scheduler (to connect, or when it stops answering) and for a worker
        when every worker was lost; then :class:`~gpuanon.errors.ClusterLost` (exit status 4).
    on_stage : callable, optional
        Called with each stage's name as the run enters it (fault-injection tests).

    Notes
    -----
    A worker lost at any stage is recovered from (:mod:`.recovery`): its shards are rebuilt on the
    workers that remain and the stage redone; the output is the same.
    """
    if (frames is None) == (paths is None):
        raise InputError("give the table either as frames (shards in row order) or as paths (Parquet files)")
    check_run_options(local_rows)
    sources, counts = shard_sources(frames, paths)
    out_dir = check_run_options(None, out_dir, overwrite)
    plan = Plan.of(est, int(sum(counts)))
    with open_cluster(cluster, backend=est.backend, processes=processes, connect_timeout=timeout) as handle:
        return run_on(handle, plan, RunOptions(est.backend, bool(est.progress)), sources, counts, out_dir=out_dir,
                      local_rows=local_rows, gather=gather, timeout=timeout, on_stage=on_stage)


def run_on(handle, plan, options, sources, counts, *, out_dir=None, local_rows: int | None = None,
           gather: bool = True, timeout: float = 60.0, on_stage=None) -> FitResult:
    """The run on an open cluster (``handle``, :func:`gpuanon.cluster.connect.open_cluster`): ``plan`` (its parameters
    validated) over the shards ``sources`` of ``counts`` rows; see :func:`run_distributed`. The stages
    in order, each returning what it made (:mod:`.stages`), each redone after a lost worker (:func:`.recovery.unit`)."""
    t_all = time.perf_counter()
    cluster = Cluster(handle, Runner(handle.client, handle.workers, timeout, on_stage), options, sources, counts)
    load_seconds = unit(cluster, "loading the shards", load_shards)
    encoded = unit(cluster, "the encoding", load_and_encode, plan)
    t0 = time.perf_counter()
    blocks = unit(cluster, "the block statistics", criteria_and_blocks, encoded, local_rows)
    partitioned = partition_levels(cluster, encoded, blocks)
    levels_seconds = time.perf_counter() - t0
    homes, measured, labels, written = unit(cluster, "the home stage (finishing, statistics, verification, output)",
                                            home_stage, encoded, blocks, partitioned, out_dir, gather)
    run = cluster.runner
    bytes_in, bytes_out = run.bytes_in, run.bytes_out
    worker_backend = unit(cluster, "the workers' backend", lambda c_: run.gather([run.submit(0, backend_of,
                                                                                              options.backend)])[0])
    cluster.shards = cluster.serials = None  # the futures go before the cluster does
    homes = dataclasses.replace(homes, futures=(), serials=())
    secs = {"encode": encoded.seconds + load_seconds, "partition_levels": levels_seconds,
            "partition_local": homes.seconds, "column_statistics": measured.column_statistics_seconds,
            "stages": measured.seconds, "output": written.seconds}
    secs["total"] = time.perf_counter() - t_all
    info = cluster_info(cluster, blocks, partitioned, homes, measured, bytes_in, bytes_out, secs)
    enc, fmt = measured.encoding, encoded.plan.output_format
    meta = output_metadata(enc, fmt)["encoding"]
    details = ClusterDetails(info, enc, meta, written.output,
                             [os.path.join(out_dir, f) for f in written.files] if out_dir else [],
                             blocks.sensitive_missing)
    return FitResult(labels, homes.n_partitions, int(blocks.suppressed), blocks.suppression_reason,
                     {"levels": partitioned.levels, "attempts": partitioned.attempts}, encoded.schema,
                     worker_backend, blocks.criteria, TransferLog(simulate=True), stage_seconds(secs),
                     optimization=None if homes.optimization is None else dict(homes.optimization),
                     optimize_loss_before=measured.loss_before,
                     hierarchies=hierarchy_report(enc, measured.metrics, measured.automatic),
                     verification=measured.verification, metrics=measured.metrics, cluster=details,
                     plan=encoded.plan, encoded=EncodingSummary(enc.columns, blocks.sensitive_missing, meta))


def home_stage(cluster: Cluster, encoded: Encoded, blocks: Blocks, partitioned: Partitioned, out_dir, gather: bool):
    """Everything on the homes, from the move to the output: redone whole when a worker is lost
    (the homes are made again from the shards). Returns ``(homes, measured, labels, written)``."""
    homes = finish_on_homes(cluster, encoded, blocks, partitioned)
    measured = verify_and_measure(cluster, encoded, blocks, homes)
    labels = np.concatenate(cluster.on_shards("labels_host")) if gather else None
    written = write_output(cluster, encoded, measured, homes, out_dir, gather)
    return homes, measured, labels, written


def cluster_info(cluster: Cluster, blocks: Blocks, partitioned: Partitioned, homes: Homes, measured: Measured,
                 bytes_in: int, bytes_out: int, secs: dict) -> dict:
    """The report's ``cluster`` section (and the cluster's ``seconds``), from the stages' values."""
    return {"recovery": cluster.recoveries, "levels": partitioned.levels, "attempts": partitioned.attempts,
            "radix_rounds": partitioned.radix_rounds, "local_rows": blocks.local_rows, "n_workers": cluster.slots,
            "n_shards": cluster.n_shards, "groups": homes.groups,
            "shuffle_bytes_between_workers": homes.bytes_between_workers, "per_level": list(partitioned.per_level),
            "home_kernel": [None] * cluster.slots, "column_statistics": measured.column_statistics,
            "classes_shared_by_workers": measured.classes_shared, "bytes_to_coordinator": bytes_in,
            "bytes_from_coordinator": bytes_out, "dashboard": cluster.handle.dashboard, "workers": cluster.slots,
            "seconds": secs}


def stage_seconds(secs: dict) -> dict:
    """A cluster run's seconds under the single-process report's stage names (and its own)."""
    out = {"encode": secs.get("encode", 0.0),
           "partition": secs.get("partition_levels", 0.0) + secs.get("partition_local", 0.0),
           "verify": secs.get("stages", 0.0),  # class statistics, verification and metrics, on the homes
           "write": secs.get("output", 0.0), "total": secs.get("total", 0.0)}
    out.update({f"cluster_{k}": v for k, v in secs.items()})
    return {k: round(float(v), 6) for k, v in out.items()}
