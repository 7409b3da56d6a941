"""The Mondrian anonymizer: schema -> encode -> partition -> generalize -> verify.

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
import logging
import sys
import time
import weakref
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from kernels.counts import count_values
from kernels.mondrian import mondrian_partition
from kernels.segmented import compile_seconds

from .. import metrics as metrics_mod
from .. import verify as verify_mod
from ..backend import (TransferLog, count_transfers, frame_to_device, frame_to_host, get_backend, is_device_frame,
                      stage, synchronize, to_device, to_host, to_scalar)
from ..encoding import Table, encode, kernel_specs
from ..errors import SchemaError, VerificationError
from ..estimator import Estimator, check_is_fitted
from ..cells import output_qi_columns
from ..classes import ClassStats
from .generalize import generalize
from .plan import MODES, Plan, check_parameters
from .result import FitResult, Runner
from ..hierarchy import choose_rho, initial_hierarchies
from ..schema import Schema

log = logging.getLogger("gpuanon")
__all__ = ["MODES", "Mondrian"]


class _Progress:
    """One updating line on a terminal (stderr); silent otherwise."""

    def __init__(self, enabled: bool, n_rows: int):
        self.on = enabled and sys.stderr.isatty()
        self.n = n_rows

    def __call__(self, level: int, active: int, done: int):
        if self.on:
            pct = 100.0 * (self.n - active) / max(self.n, 1)
            sys.stderr.write(f"\rmondrian: level {level:3d}  classes {done:>9,d}  rows settled {pct:5.1f}%")
            sys.stderr.flush()

    def close(self):
        if self.on:
            sys.stderr.write("\n")


class InProcess:
    """The single-process runner: validate, encode and partition on this machine's backend."""

    def fit(self, est: "Mondrian", df) -> FitResult:
        return est._fit_here(df)


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

    # ------------------------------------------------------------------ validation
    def validate(self, df: pd.DataFrame) -> Schema:
        """Check the parameters against ``df`` and return its roles and kinds (one clear error each)."""
        if not isinstance(df, pd.DataFrame):
            raise SchemaError(f"input must be a pandas DataFrame, got {type(df).__name__}")
        if len(df) == 0:
            raise SchemaError("the input table is empty (0 rows); give a table with rows")
        check_parameters(self, len(df))
        schema = Schema.from_frame(df, self.quasi_identifiers, self.sensitive, self.target, self.identifiers,
                                   self.numeric, self.categorical, self.sensitive_ordered)
        if self.output_format == "minmax":
            for c in schema.numeric_qis:
                for suffix in ("_min", "_max"):
                    if f"{c}{suffix}" in df.columns:
                        raise SchemaError(
                            f"column '{c}{suffix}' already exists, and the minmax format would write "
                            f"quasi-identifier '{c}' there; rename it or use --format range")
        if (self.l or self.t is not None) and schema.sensitive is None:
            raise SchemaError("l-diversity and t-closeness need a sensitive attribute; pass --sensitive COL")
        return schema

    def plan(self, schema: Schema) -> Plan:
        """The run's :class:`~gpuanon.anonymize.plan.Plan`: these parameters on ``schema``'s roles."""
        return Plan.of(self, schema)

    # ------------------------------------------------------------------ fitting
    def hierarchy_plan(self, df: pd.DataFrame, schema: Schema) -> dict:
        """``{column: Hierarchy or 'auto'}`` from the ``hierarchies`` parameter, validated
        (:func:`gpuanon.hierarchy.hierarchy_plan`)."""
        return self.plan(schema).hierarchy_plan(df)

    def fit(self, df: pd.DataFrame, y=None) -> "Mondrian":
        """Validate, encode and partition ``df``; sets ``labels_`` and ``n_classes_``.

        ``df`` is a pandas or a cuDF DataFrame; a cuDF frame is validated and profiled from one
        counted copy on the host (stage ``input``), its plain numeric QIs keyed where they are on
        the GPU backend, and ``transform`` returns a cuDF frame built on the device.
        """
        self._adopt(self.runner().fit(self, df))
        self._fitted_frame, self._fitted_shape = weakref.ref(df), (len(df), list(df.columns))
        if self.result_.cluster is not None and self.result_.cluster.output is not None:
            self.report_ = self._report(len(df), int(self.verification_.n_rows))  # the stages ran with the fit
        return self

    def runner(self) -> Runner:
        """What runs the fit: this process, or with ``cluster`` the Dask runner (:mod:`gpuanon.distributed`)."""
        if self.cluster is None:
            return InProcess()
        from ..distributed.estimator import OnCluster  # noqa: PLC0415

        return OnCluster()

    def _fit_here(self, df) -> FitResult:
        """One process: validate, encode, partition (the runner :class:`InProcess`)."""
        transfers = TransferLog(simulate=False)
        mark = dict(compile_seconds)  # kernels first launched from here on are this fit's
        host = df
        if is_device_frame(df):
            with count_transfers(log_=transfers), stage("input"):
                host = frame_to_host(df)
        schema = self.validate(host)
        plan = self.hierarchy_plan(host, schema)
        be = get_backend(self.backend, n_rows=len(host))
        transfers.simulate = not be.is_gpu
        t1 = time.perf_counter()
        orders = Plan.leaf_orders(plan)
        with count_transfers(log_=transfers), self._stage("encode"):
            table = encode(host, schema, be.xp, orders=orders, device_frame=df if host is not df else None)
        return self._partition_encoded(schema, table, be, time.perf_counter() - t1, plan, transfers, mark)

    #: a stage that takes at least this long says so in one log line when it ends
    STAGE_LOG_SECONDS = 0.5

    @contextmanager
    def _stage(self, name: str):
        """Charge copies to stage ``name``, and say when a long stage is done (one line each)."""
        t0 = time.perf_counter()
        with stage(name):
            yield
            synchronize()  # device work queued by the stage is charged to it
        secs = time.perf_counter() - t0
        if self.progress and secs >= self.STAGE_LOG_SECONDS:
            log.info("%s done in %.2f s", name, secs)

    def fit_encoded(self, schema: Schema, table: Table, backend, encode_seconds: float = 0.0,
                    plan: dict | None = None) -> "Mondrian":
        """Partition an already encoded table (sweeps encode once and fit many times).

        ``schema`` and ``table`` must come from :meth:`validate` / :func:`encode` on the same
        frame; the parameters of this estimator are validated against ``table``.
        """
        self._adopt(self._partition_encoded(schema, table, backend, encode_seconds, plan,
                                            TransferLog(simulate=not backend.is_gpu), dict(compile_seconds)))
        self._fitted_frame = None
        return self

    def _partition_encoded(self, schema, table, be, encode_seconds, plan, transfers, mark) -> FitResult:
        with count_transfers(log_=transfers):
            result = self._fit_encoded(schema, table, be, encode_seconds, plan)
        result.transfers, result.compile_mark = transfers, mark
        return result

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
        self._labels_host = None
        if result.cluster is not None:  # the stages ran with the fit
            self._labels_host = result.labels
            self.verification_, self.metrics_ = result.verification, result.metrics
            self.cluster_info_ = result.cluster.info
            self.output_metadata_ = {"encoding": result.encoding_metadata(), "format": self.output_format}

    def _fit_encoded(self, schema, table, be, encode_seconds, plan) -> FitResult:
        xp = be.xp
        # the shared table is never modified: hierarchies are bound to this fit's own copy
        table = dataclasses.replace(table)
        timings: dict[str, float] = {"encode": encode_seconds}
        pl = self.plan(schema)
        q = to_device(table.sa_distribution(), xp) if self.t is not None else None  # once, on the device
        crit = pl.criteria(table.sa_ordered, table.sa_values, q)
        if crit.needs_histogram:
            pl.check_whole_table(crit, table.n_rows, count_values(table.sa, table.n_sa, xp)[None, :], xp)
        pl.check_k(table.n_rows)
        bound, freq_tables = initial_hierarchies(table, plan or {}, self.rho, xp)
        table.bind_hierarchies(bound)
        t1 = time.perf_counter()
        with self._stage("partition"):
            labels, n_parts, suppressed, sup_reason, info = self._partition(table, pl, crit, xp)
        timings["partition"] = time.perf_counter() - t1
        optimization = loss_before = None
        pre = (labels, n_parts)  # the partition before the optimization step
        if self.optimize:
            from .optimize import optimize_partitions  # noqa: PLC0415

            t1 = time.perf_counter()
            with self._stage("optimize"):
                labels, n_parts, optimization = optimize_partitions(table, labels, n_parts, crit, xp)
            timings["optimize"] = time.perf_counter() - t1
        hierarchies = {}
        if freq_tables or bound:
            t1 = time.perf_counter()
            with self._stage("hierarchies"):
                scorer = metrics_mod.HierarchyScorer(table, labels)
                hierarchies, bound = choose_rho(table, scorer, freq_tables, plan or {}, self.rho, bound, xp)
                table.bind_hierarchies(bound)
            timings["hierarchies"] = time.perf_counter() - t1
        if self.optimize and table.target is not None:  # the loss the step saved (report: optimization)
            t1 = time.perf_counter()
            with self._stage("optimize"):
                summary = metrics_mod.summary_from_labels(table, *pre)
                loss_before = metrics_mod.entropy_coefficients(summary)["entropy_loss"]
            timings["optimize"] += time.perf_counter() - t1
        # the labels stay on the device
        return FitResult(labels, n_parts, suppressed, sup_reason, info, schema, be, crit, None, timings, table,
                         optimization=optimization, optimize_loss_before=loss_before, hierarchies=hierarchies)

    def _partition(self, table: Table, pl: Plan, crit, xp):
        n = table.n_rows
        keep = None
        suppressed = 0
        failed = False
        if table.blocks is not None:
            # Missing-value blocks that cannot stand as a class on their own are suppressed.
            bsizes = count_values(table.blocks, table.n_blocks, xp)
            bh = None
            if crit.needs_histogram:
                bh = count_values(table.blocks * table.n_sa + table.sa, table.n_blocks * table.n_sa,
                                  xp).reshape(table.n_blocks, table.n_sa)
            bad = ~crit.satisfied(bsizes, bh, xp)
            if to_scalar(bad.any()):
                failed = True
                drop = bad[table.blocks]
                suppressed = int(to_scalar(drop.sum()))
                keep = xp.nonzero(~drop)[0]
        reason = pl.suppression_reason(crit, failed, suppressed, n)
        keys = table.keys if keep is None else table.keys[:, keep]
        blocks = table.blocks if keep is None else table.blocks[keep]
        sa = None
        if crit.needs_histogram:
            sa = table.sa if keep is None else table.sa[keep]
        prog = _Progress(self.progress, int(keys.shape[1]))
        try:
            lab, n_parts, info = mondrian_partition(
                keys,
                col_info=kernel_specs(table, xp),
                n_categories=[c.n_categories for c in table.columns],
                global_range=np.asarray([c.global_range for c in table.columns]),
                k=crit.k, allowed=crit.satisfied, blocks=blocks, sa=sa,
                n_sa=table.n_sa if crit.needs_histogram else 0,
                relaxed=pl.relaxed, xp=xp, progress=prog)
        finally:
            prog.close()
        if keep is None:
            labels = lab
        else:
            labels = xp.full(n, -1, dtype=xp.int64)
            labels[keep] = lab
        return labels, n_parts, suppressed, reason, info

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

    def _check_frame(self, df) -> None:
        ref = getattr(self, "_fitted_frame", None)
        fitted = ref() if ref is not None else None
        if df is fitted:
            return
        if self.result_.cluster is not None:  # the output was made with the fit: the same shape will do
            if (len(df), list(df.columns)) == self._fitted_shape:
                return
            raise SchemaError("transform() publishes the partitions fitted on one table and this is another; "
                              "pass the table given to fit(), or call fit_transform(new_table)")
        cols = list(self.schema_.quasi_identifiers)
        if fitted is not None and len(df) == len(fitted) and list(df.columns) == list(fitted.columns) \
                and df[cols].equals(fitted[cols]):
            return
        if fitted is None and ref is None and len(df) == self.table_.n_rows:
            return  # fitted through fit_encoded: the caller vouches for the table
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
        if self.result_.cluster is not None:  # fitted on a cluster: the output was made there
            self._check_frame(df)
            return self.result_.cluster.output
        run = object.__new__(type(self))  # the run's timings, copies and report stay with the run
        res = dataclasses.replace(self.result_, timings=dict(self.result_.timings),
                                  transfers=copy.deepcopy(self.result_.transfers))
        run.__dict__.update(self.__dict__, result_=res)
        return run._publish(df)

    def _publish(self, df):
        """``transform`` on this estimator itself: sets ``report_``, ``metrics_``, ``verification_``."""
        self._check_frame(df)
        on_device = is_device_frame(df)
        with count_transfers(log_=self.result_.transfers):
            src = df
            if on_device and not self.backend_.is_gpu:  # a cuDF frame on the CPU backend
                with stage("input"):
                    src = frame_to_host(df)
            out, res = self.run_stages(src, build_output=True)
            if on_device and not is_device_frame(out):
                with stage("output"):
                    out = frame_to_device(out)
        self.report_ = self._report(len(df), len(out))
        #: what a written output file carries beside its rows (the encoding and the cell format)
        self.output_metadata_ = {"encoding": self.table_.encoding_metadata(), "format": self.output_format}
        if not is_device_frame(out):
            out.attrs["gpuanon"] = self.output_metadata_
        return out

    def run_stages(self, df: pd.DataFrame | None, *, build_output: bool = True, fmt: str | None = None):
        """The second half of the pipeline on the fitted partitions: class statistics (once, on the
        device) -> generalize -> verify (independently, from the published cells) -> metrics.

        Returns ``(output frame or None, verification result)``; sets ``verification_`` and
        ``metrics_``. ``Mondrian.transform`` and the sweep both run it.
        """
        table, schema, result = self.table_, self.schema_, self.result_
        fmt = fmt or self.output_format
        labels, timings = result.labels, result.timings
        t1 = time.perf_counter()
        with self._stage("class_statistics"):
            cs = result.class_stats = ClassStats(table, labels, self.n_partitions_)
        timings["class_statistics"] = time.perf_counter() - t1
        out = None
        if build_output:
            t1 = time.perf_counter()
            with self._stage("generalize"):
                out = generalize(df, table, labels, self.n_partitions_, fmt, schema.identifiers, stats=cs)
            timings["generalize"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        with self._stage("verify"):
            res = self._verify(cs, fmt, out, df)
        timings["verify"] = time.perf_counter() - t1
        self.verification_ = result.verification = res
        if not res.ok:
            raise VerificationError("independent verification failed, nothing written: " + "; ".join(res.failures))
        t1 = time.perf_counter()
        with self._stage("metrics"):
            summary = metrics_mod.summary_from_labels(table, labels, self.n_partitions_, stats=cs)
            self.metrics_ = result.metrics = metrics_mod.compute_metrics(summary, k=int(self.k))
        timings["metrics"] = time.perf_counter() - t1
        return out, res

    #: tables up to this many rows are also checked on their published text (pandas group-by)
    TEXT_CHECK_ROWS = 100_000

    def _verify(self, cs: ClassStats, fmt: str, out, df):
        """Verify the published cells on the device; small tables also on their text, a cross-check
        whose failures are reported. The numbers reported are the cells' (a cluster's too): the text's
        sensitive codes follow the rows' order, so its sums over a class's values (``l_entropy``, ``t``)
        may differ in the last bit."""
        table, schema, xp = self.table_, self.schema_, self.table_.xp
        kw = self.plan(schema).verify_keywords(self.criteria_)
        sa, q = (None, None) if table.sa is None else (table.sa[cs.kept], to_device(table.sa_distribution(), xp))
        res = verify_mod.verify_encoded(cs.row_pos, cs.published_cells(fmt), sa, q, sensitive=str(schema.sensitive),
                                        sa_missing=self.criteria_.sa_missing, xp=xp, **kw)
        if res.ok and out is not None and len(out) <= self.TEXT_CHECK_ROWS:
            s = schema.sensitive
            text = verify_mod.verify(frame_to_host(out), output_qi_columns(schema.quasi_identifiers, fmt, schema.kinds),
                                     s, reference=frame_to_host(df[[s]])[s] if s is not None else None,
                                     sensitive_ordered=schema.sensitive_ordered, **kw)
            if (text.n_classes, text.k) != (res.n_classes, res.k):
                text.failures.append(f"the published text has {text.n_classes} classes (smallest {text.k}) but "
                                     f"its cells have {res.n_classes} (smallest {res.k})")
            if text.failures:
                return text
        return res

    def fit_transform(self, df: pd.DataFrame, y=None) -> pd.DataFrame:
        """``fit(df)`` then ``transform(df)``, keeping the output's report, metrics and verification."""
        self.fit(df)
        if self.result_.cluster is not None:
            return self.transform(df)
        return self._publish(df)

    def _report(self, n_rows_in: int, n_rows_out: int) -> dict[str, Any]:
        from ..report.assemble import anonymization_report  # noqa: PLC0415

        return anonymization_report(self, self.result_, n_rows_in=n_rows_in, n_rows_out=n_rows_out)
