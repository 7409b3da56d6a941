"""The record of one Mondrian fit, whichever runner made it (one process or a Dask cluster).

:class:`FitResult` is what both runners give back: ``Mondrian`` keeps it as ``result_`` and sets
its public attributes from it (:meth:`Mondrian._adopt`), and :func:`gpuanon.report.assemble.anonymization_report`
builds the report from it. A cluster run adds :class:`ClusterDetails` (what only a cluster has:
the levels, bytes moved, the workers' output); one process leaves it None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class ClusterDetails:
    """What a cluster run has beside a fit: ``info`` (levels, bytes per level, bytes moved between
    workers, the dashboard, ``seconds`` per cluster stage), the output when gathered, the files the
    workers wrote, the global encoding, and the rows with a missing sensitive value."""

    info: dict
    encoding: Any  # gpuanon.dictionaries.Dictionaries
    encoding_metadata: dict  # the report's ``encoding`` section, as one process writes it
    output: Any = None  # the anonymized table (pandas), when gathered
    out_files: list = field(default_factory=list)
    sensitive_missing: int = 0

    def section(self) -> dict:
        """The report's ``cluster`` section: ``info`` less its seconds (those are the report's)."""
        return {k: x for k, x in self.info.items() if k != "seconds"}


@dataclass
class FitResult:
    """One fit: the partitions and everything the report and the estimator's attributes read.

    ``labels`` is the class of every input row (-1: suppressed): on the device in one process, on
    the host (or None, when kept on the workers) on a cluster. ``table`` is the encoded table
    (one process; None on a cluster, where it lives on the workers); ``class_stats`` the class
    statistics once computed. ``timings`` are the stages' seconds under the report's names;
    ``compile_mark`` the kernel-compile clock at the start of the fit (None: not measured).
    ``verification`` and ``metrics`` are set by the stages after the partitions.
    """

    labels: Any
    n_partitions: int
    n_suppressed: int
    suppression_reason: str
    partition_info: dict
    schema: Any
    backend: Any
    criteria: Any
    transfers: Any
    timings: dict = field(default_factory=dict)
    table: Any = None
    class_stats: Any = None
    optimization: dict | None = None
    optimize_loss_before: float | None = None
    hierarchies: dict = field(default_factory=dict)
    verification: Any = None
    metrics: dict | None = None
    compile_mark: dict | None = None
    cluster: ClusterDetails | None = None

    @property
    def n_classes(self) -> int:
        """The output's equivalence classes (verified), or the partitions before verification."""
        return int(self.n_partitions if self.verification is None else self.verification.n_classes)

    def n_missing(self) -> dict:
        """``{QI: rows with a missing value}`` for the QIs that have any."""
        cols = self.table.columns if self.cluster is None else self.cluster.encoding.columns
        return {c.name: c.n_missing for c in cols if c.n_missing}

    def sensitive_missing(self) -> int:
        """Rows with a missing sensitive value (they protect nobody; no kind of l counts them)."""
        return self.table.sa_missing_rows() if self.cluster is None else int(self.cluster.sensitive_missing)

    def encoding_metadata(self) -> dict:
        """The report's and the written files' ``encoding`` section."""
        return self.table.encoding_metadata() if self.cluster is None else self.cluster.encoding_metadata


class Runner(Protocol):
    """What runs a Mondrian fit and gives back its record: one process
    (:class:`gpuanon.anonymize.mondrian.InProcess`) or a Dask cluster
    (:class:`gpuanon.distributed.estimator.OnCluster`); ``Mondrian.runner()`` chooses."""

    def fit(self, est, df) -> FitResult: ...
