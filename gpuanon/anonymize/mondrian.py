"""The Mondrian anonymizer: the estimator, a facade over the runner that does the work.

``fit`` builds the run's :class:`~gpuanon.anonymize.plan.Plan` once (every parameter validated),
picks the runner (:func:`~gpuanon.anonymize.runners.runner_for`: this process, or with ``cluster``
a Dask cluster) and adopts the :class:`~gpuanon.anonymize.result.FitResult` it gives back;
``transform`` asks the same runner to publish it. The pipeline itself is the runner's
(:mod:`.pipeline` in one process, :mod:`gpuanon.distributed` on a cluster).

Examples
--------
>>> from gpuanon import Mondrian
>>> from gpuanon.datasets import load_adult
>>> df = load_adult().head(2000)
>>> m = Mondrian(k=5, quasi_identifiers=["age", "education", "gender"], sensitive="income",
...              backend="cpu")
>>> out = m.fit_transform(df)
>>> m.report_["achieved"]["k"] >= 5
True
"""

from __future__ import annotations

import copy
import dataclasses
import weakref

import numpy as np
import pandas as pd

from ..backend import count_transfers, stage, to_host
from ..table.encoding import Table
from ..errors import SchemaError
from ..estimator import Estimator, check_is_fitted
from ..report.assemble import anonymization_report
from ..table.schema import Schema
from .pipeline import InProcess
from .plan import MODES, Plan, check_input
from .result import FitResult, Published, RunOptions
from .runners import runner_for

__all__ = ["MODES", "Mondrian"]


class Mondrian(Estimator):
    """Mondrian k-anonymity with optional l-diversity and t-closeness.

    Parameters
    ----------
    k : int
        Every equivalence class has at least ``k`` rows (``k >= 2``).
    l : int
        l-diversity (0: off). ``l_kind`` is ``'distinct'`` (default), ``'entropy'`` or
        ``'recursive'`` (with ``c``).
    t : float or None
        t-closeness threshold (None: off); ``t_distance`` is ``'auto'`` (default: ``'ordered'`` for a
        numeric or ordinal sensitive attribute, else ``'equal'``; resolved at fit), ``'equal'`` (EMD),
        ``'ordered'`` (EMD over sorted values) or ``'kl'``.
    quasi_identifiers, sensitive, target, identifiers : column roles.
    numeric, categorical : QIs whose inferred kind to override.
    mode : {'strict', 'relaxed'}
    output_format : {'range', 'minmax', 'mean'}
    max_suppression : float
        Fraction of rows that may be suppressed (default 0.01).
    backend : {'auto', 'cpu', 'gpu'} or None (``GPUANON_BACKEND``)
    hierarchies : None, 'auto', or dict
        Generalization hierarchies of categorical QIs: ``'auto'`` builds the thesis's
        frequency-based hierarchies for every categorical QI (needs a target); a dict maps a
        column to a :class:`~gpuanon.hierarchy.Hierarchy`, an ARX CSV path, or ``'auto'`` (the
        key ``'*'`` with ``'auto'`` stands for every categorical QI not named).
        A class's value is then the lowest node covering its values.
    rho : number or None
        Percentile range of the automatic hierarchies; None chooses it per column (the
        candidate with the smallest entropy-coefficient loss).
    optimize : bool
        The optimization step: tuples occurring at least k times keep their original values.
    cluster : None, str or distributed.Client
        Run on a Dask cluster (:mod:`gpuanon.distributed`): ``'local:N'``, ``'cuda:N'``, a
        scheduler address ``'tcp://host:8786'`` or a client. The partitions, output and
        verification are those of one process (with ``optimize`` and hierarchies, automatic
        ones included); ``fit`` then runs the whole pipeline
        and ``transform`` returns its output.

    Attributes
    ----------
    labels_ : ndarray
        Class id of every input row (-1: suppressed); copied to the host at first access (the
        pipeline keeps its labels on the device).
    n_classes_ : int
        Number of partitions found by ``fit`` (the report's ``n_classes`` counts the output's
        equivalence classes, fewer when relaxed cuts give two partitions the same cells).
    schema_, table_, backend_ : learned state.
    report_, metrics_, verification_, output_metadata_ : the published output's report, metrics,
        independent verification and file metadata, kept by ``fit_transform`` (not by ``transform``).

    The estimator follows scikit-learn's conventions (keyword-only parameters, ``get_params`` /
    ``clone``). ``transform`` applies the fitted partitions to the table they were fitted on and
    refuses any other table. A fitted estimator pickles (the backend is kept by name); the
    unpickled one no longer holds the fitted frame, so its ``transform`` checks the row count only.
    """

    def __init__(self, *, k: int = 3, l: int = 0, t: float | None = None, l_kind: str = "distinct",
                 c: float = 1.0, t_distance: str = "auto", quasi_identifiers=None, sensitive=None,
                 target=None, identifiers=None, numeric=None, categorical=None,
                 sensitive_ordered: bool | None = None, mode: str = "strict",
                 output_format: str = "range", max_suppression: float = 0.01, backend: str | None = None,
                 progress: bool = True, hierarchies=None, rho=None, optimize: bool = False,
                 cluster=None):
        self.k, self.l, self.t = k, l, t
        self.l_kind, self.c, self.t_distance = l_kind, c, t_distance
        self.quasi_identifiers, self.sensitive, self.target = quasi_identifiers, sensitive, target
        self.identifiers, self.numeric, self.categorical = identifiers, numeric, categorical
        self.sensitive_ordered = sensitive_ordered
        self.mode, self.output_format, self.max_suppression = mode, output_format, max_suppression
        self.backend, self.progress = backend, progress
        self.hierarchies, self.rho, self.optimize = hierarchies, rho, optimize
        self.cluster = cluster

    # ------------------------------------------------------------------ the plan and the runner
    def validate(self, df: pd.DataFrame) -> Schema:
        """Check the parameters against ``df`` and return its roles and kinds (one clear error each)."""
        check_input(df, device_ok=False)
        return Plan.of(self, len(df)).with_roles(df).schema

    def plan(self, schema: Schema, n_rows: int) -> Plan:
        """The run's :class:`~gpuanon.anonymize.plan.Plan`: these parameters, validated against a table
        of ``n_rows`` rows, on ``schema``'s roles."""
        return dataclasses.replace(Plan.of(self, n_rows), schema=schema)

    def hierarchy_plan(self, df: pd.DataFrame, schema: Schema) -> dict:
        """``{column: Hierarchy or 'auto'}`` from the ``hierarchies`` parameter, validated
        (:func:`gpuanon.hierarchy.hierarchy_plan`)."""
        return self.plan(schema, len(df)).hierarchy_plan(df)

    #: a stage that takes at least this long says so in one log line when it ends
    STAGE_LOG_SECONDS = 0.5

    def runner(self, **options):
        """What runs the fit: this process, or with ``cluster`` a Dask cluster (through the runner
        registry, :mod:`.runners`); ``options`` are the runner's own (a cluster's ``local_rows`` ...)."""
        return runner_for(self.cluster, self._options(), **options)

    def _options(self) -> RunOptions:
        return RunOptions(self.backend, bool(self.progress), self.STAGE_LOG_SECONDS)

    # ------------------------------------------------------------------ fitting
    def fit(self, df: pd.DataFrame, y=None) -> "Mondrian":
        """Validate, encode and partition ``df``; sets ``labels_`` and ``n_classes_``.

        ``df`` is a pandas or a cuDF DataFrame; a cuDF frame is validated and profiled from one
        counted copy on the host (stage ``input``), its plain numeric QIs keyed where they are on
        the GPU backend, and ``transform`` returns a cuDF frame built on the device. On a cluster
        the whole pipeline runs with the fit (``report_`` and the rest are then set here).
        """
        runner = self.runner()
        self._adopt(runner.fit(Plan.of(self, runner.rows(df)), df))
        self._fitted_frame, self._fitted_shape = weakref.ref(df), (len(df), list(df.columns))
        return self

    def fit_encoded(self, schema: Schema, table: Table, backend, encode_seconds: float = 0.0,
                    plan: dict | None = None) -> "Mondrian":
        """Partition an already encoded table (sweeps encode once and fit many times).

        ``schema`` and ``table`` must come from :meth:`validate` / :func:`encode` on the same
        frame (``plan``: its hierarchy plan); the parameters are validated against ``table``.
        """
        self._adopt(InProcess(self._options()).fit_encoded(self.plan(schema, table.n_rows), table, backend, encode_seconds, plan))
        self._fitted_frame = None
        return self

    def _adopt(self, result: FitResult) -> None:
        """Keep the fit record ``result`` (``result_``) and set the public attributes from it."""
        self.result_ = result
        self.schema_, self.table_, self.backend_, self.criteria_ = (result.schema, result.table, result.backend,
                                                                    result.criteria)
        self.n_partitions_ = int(result.n_partitions)
        self.n_classes_ = int(result.n_partitions)
        self.n_suppressed_ = int(result.n_suppressed)
        self.partition_info_ = result.partition_info
        self.optimization_ = result.optimization
        self.hierarchies_ = result.hierarchies
        # labels already on the host (a cluster gathers them) are not copied again
        self._labels_host = result.labels if isinstance(result.labels, np.ndarray) else None
        if result.verification is not None:  # the runner published with the fit (a cluster)
            n_out = int(result.verification.n_rows)
            self._keep(Published(None, result.verification, result.metrics,
                                 {"encoding": result.encoding_metadata(), "format": result.plan.output_format},
                                 n_out + int(result.n_suppressed), n_out))

    def _keep(self, pub: Published) -> None:
        """Keep a publication's report, verification, metrics and file metadata."""
        self.verification_, self.metrics_, self.output_metadata_ = pub.verification, pub.metrics, pub.metadata
        self.report_ = anonymization_report(self.result_, n_rows_in=pub.n_rows_in, n_rows_out=pub.n_rows_out)

    # ------------------------------------------------------------------ output
    @property
    def labels_(self) -> np.ndarray:
        """Class id of every input row (-1: suppressed), as a host array (copied once, counted)."""
        if getattr(self, "result_", None) is None:
            raise AttributeError("labels_ is set by fit()")
        if self._labels_host is None:
            with count_transfers(log_=self.result_.transfers), stage("labels_"):
                self._labels_host = to_host(self.result_.labels)
        return self._labels_host

    def _check_frame(self, df, runner) -> None:
        ref = getattr(self, "_fitted_frame", None)
        if not runner.accepts(self.result_, df, ref() if ref is not None else None, ref,
                              getattr(self, "_fitted_shape", None)):
            raise SchemaError("transform() publishes the partitions fitted on one table and this is another; "
                              "pass the table given to fit(), or call fit_transform(new_table)")

    def __getstate__(self):
        """A pickle leaves out the weak reference to the fitted frame (see the class notes)."""
        return dict(super().__getstate__(), _fitted_frame=None)

    def transform(self, df: pd.DataFrame) -> pd.DataFrame:
        """Generalize the fitted partitions of ``df`` and verify the result independently.

        Changes no fitted state (``fit_transform`` keeps the output's ``report_`` and the rest).
        Raises :class:`~gpuanon.errors.VerificationError` when the independent check fails, and
        :class:`sklearn.exceptions.NotFittedError` before ``fit``.
        """
        check_is_fitted(self, "result_")
        runner = self.runner()
        self._check_frame(df, runner)
        # the run's timings, copies and report stay with the run
        res = dataclasses.replace(self.result_, timings=dict(self.result_.timings), plan=self.result_.plan.with_format(
            self.output_format), transfers=copy.deepcopy(self.result_.transfers))  # the format as set now
        return runner.publish(res, df).output

    def run_stages(self, df: pd.DataFrame | None, *, build_output: bool = True, fmt: str | None = None):
        """The second half of the pipeline on the fitted partitions (the sweep's, in this process:
        :meth:`gpuanon.anonymize.pipeline.InProcess.stages`). Returns ``(output frame or None,
        verification result)``; sets ``verification_`` and ``metrics_``."""
        out, res = InProcess(self._options()).stages(self.result_, df, build_output=build_output, fmt=fmt)
        self.verification_, self.metrics_ = res, self.result_.metrics
        return out, res

    def fit_transform(self, df: pd.DataFrame, y=None) -> pd.DataFrame:
        """``fit(df)`` then ``transform(df)``, keeping the output's report, metrics and verification."""
        self.fit(df)
        runner = self.runner()
        self._check_frame(df, runner)
        pub = runner.publish(self.result_, df)
        self._keep(pub)
        return pub.output
