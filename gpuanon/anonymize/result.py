"""The record of one Mondrian fit, whichever runner made it (one process or a Dask cluster).

:class:`FitResult` is what both runners give back (``Runner.fit``): it carries the run's
:class:`~gpuanon.anonymize.plan.Plan`, ``Mondrian`` keeps it as ``result_`` and sets its public
attributes from it, and :func:`gpuanon.report.assemble.anonymization_report` builds the report from
it. Its ``encoded`` side (the encoded :class:`~gpuanon.table.encoding.Table` of one process, or a
cluster's :class:`EncodingSummary`) answers the report's encoding questions the same way for both.
A cluster run adds :class:`ClusterDetails` (what only a cluster has: the levels, bytes moved, the
workers' output); one process leaves it None. :class:`Published` is a runner's ``publish``.
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
    encoding: Any  # gpuanon.table.dictionaries.Dictionaries
    encoding_metadata: dict  # the report's ``encoding`` section, as one process writes it
    output: Any = None  # the anonymized table (pandas), when gathered
    out_files: list = field(default_factory=list)
    sensitive_missing: int = 0

    def section(self) -> dict:
        """The report's ``cluster`` section: ``info`` less its seconds (those are the report's)."""
        return {k: x for k, x in self.info.items() if k != "seconds"}


@dataclass(frozen=True)
class RunOptions:
    """How a fit runs, for either runner: the ``backend`` asked for (None: ``GPUANON_BACKEND`` or
    auto), whether long stages say so (``progress``) and from how many seconds
    (``stage_log_seconds``). What it computes is the plan's."""

    backend: str | None = None
    progress: bool = True
    stage_log_seconds: float = 0.5


@dataclass
class EncodingSummary:
    """A cluster's global encoding as the report reads it (the workers hold the encoded table):
    the QI ``columns``, the rows with a missing sensitive value and the ``encoding`` section; the
    same questions as :class:`~gpuanon.table.encoding.Table` answers in one process."""

    columns: list
    sensitive_missing: int
    metadata: dict

    def sa_missing_rows(self) -> int:
        return int(self.sensitive_missing)

    def encoding_metadata(self) -> dict:
        return self.metadata


@dataclass
class FitResult:
    """One fit: the partitions and everything the report and the estimator's attributes read.

    ``labels`` is the class of every input row (-1: suppressed): on the device in one process, on
    the host (or None, when kept on the workers) on a cluster. ``table`` is the encoded table
    (one process; None on a cluster, where it lives on the workers); ``class_stats`` the class
    statistics once computed. ``timings`` are the stages' seconds under the report's names;
    ``compile_mark`` the kernel-compile clock at the start of the fit (None: not measured).
    ``verification`` and ``metrics`` are set by the stages after the partitions (a cluster runs
    them with the fit). ``plan`` is the run's plan; ``encoded`` what the report's encoding questions
    are asked of (the table in one process, an :class:`EncodingSummary` on a cluster).
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
    plan: Any = None
    encoded: Any = None

    @property
    def n_classes(self) -> int:
        """The output's equivalence classes (verified), or the partitions before verification."""
        return int(self.n_partitions if self.verification is None else self.verification.n_classes)

    def n_missing(self) -> dict:
        """``{QI: rows with a missing value}`` for the QIs that have any."""
        return {c.name: c.n_missing for c in self.encoded.columns if c.n_missing}

    def sensitive_missing(self) -> int:
        """Rows with a missing sensitive value (they protect nobody; no kind of l counts them)."""
        return int(self.encoded.sa_missing_rows())

    def encoding_metadata(self) -> dict:
        """The report's and the written files' ``encoding`` section."""
        return self.encoded.encoding_metadata()


@dataclass
class Published:
    """A runner's ``publish``: the anonymized table (None when it stays on the workers), the
    independent verification, the metrics, the written file's metadata, and the rows in and out
    (what the report, :func:`gpuanon.report.assemble.anonymization_report`, counts)."""

    output: Any
    verification: Any
    metrics: dict | None
    metadata: dict
    n_rows_in: int
    n_rows_out: int


class Runner(Protocol):
    """What runs a Mondrian fit and publishes it: one process
    (:class:`gpuanon.anonymize.pipeline.InProcess`) or a Dask cluster
    (:class:`gpuanon.distributed.estimator.OnCluster`); :func:`gpuanon.anonymize.runners.runner_for` chooses."""

    def fit(self, plan, source) -> FitResult: ...

    def publish(self, result: FitResult, frame) -> Published: ...
