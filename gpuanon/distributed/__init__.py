"""Scale-out on Dask: clusters, sharded tables and distributed Mondrian (contract section 12).

* opening the cluster is :mod:`gpuanon.cluster.connect`'s (``local:N`` / ``cuda:N`` / ``tcp://host:port`` /
  a ``distributed.Client``) and the tasks run through :class:`gpuanon.cluster.runner.Runner`, both
  shared with DISTPAB's entities.
* the table's dictionaries are :mod:`gpuanon.table.dictionaries`' chunk / combine / finalize reductions
  (the ones a single process runs on one chunk): every worker profiles and encodes its shard
  (:mod:`.tasks`), the coordinator combines and finalizes (:mod:`.stages`).
* :mod:`~gpuanon.distributed.mondrian` -- Mondrian levels over the shards (spans, exact lower
  medians by radix selection, child sizes and sensitive histograms are reductions), then every
  partition that fits one worker moves there whole and is finished by the single-node kernel;
  class statistics, verification, class summaries and the Parquet output run where the classes are.
  Its stages (:mod:`.stages`) are functions of the open :class:`~.context.Cluster` and of the values
  of the stages before them, each returning a frozen value (:mod:`.values`).
* :mod:`~gpuanon.distributed.metrics` -- whole-table column statistics as a reduction; the homes'
  class summaries joined into every metric.
* :mod:`~gpuanon.distributed.recovery` -- a lost worker's shards rebuilt on the workers that
  remain (read again from their source, the coordinator's recorded changes replayed) and the stage
  redone; a lost scheduler or every worker lost: :class:`~gpuanon.errors.ClusterLost` (exit status 4).
* :mod:`~gpuanon.distributed.estimator` -- ``OnCluster``, the runner of ``Mondrian(cluster=...)`` and of
  ``gpuanon anonymize DIR --cluster SPEC --out DIR`` (:mod:`gpuanon.cli.anonymize`, one path for both
  runners), registered with :mod:`gpuanon.anonymize.runners` when imported; nothing here imports ``cli``.

Opening a cluster has one path, :mod:`gpuanon.cluster.connect` (not re-exported here).
"""

from .mondrian import run_distributed

__all__ = ["run_distributed"]
