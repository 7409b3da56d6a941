"""The single-process runner: the Mondrian pipeline on this machine's backend.

:class:`InProcess` implements the runner protocol (:class:`~gpuanon.anonymize.result.Runner`):
``fit(plan, source)`` (roles -> encode -> partition -> optimize -> hierarchies) gives back a
:class:`~gpuanon.anonymize.result.FitResult` carrying the plan; ``publish(result, frame)`` runs the
second half on the fitted partitions (class statistics -> generalize -> verify -> metrics). The
sweep encodes once and fits many plans (:meth:`InProcess.fit_encoded`, :meth:`InProcess.stages`).
The estimator (:class:`~gpuanon.anonymize.mondrian.Mondrian`) only builds the plan, picks the
runner and adopts the result.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from contextlib import contextmanager

import numpy as np

from kernels.counts import count_values
from kernels.mondrian import mondrian_partition
from kernels.segmented import compile_seconds

from .. import metrics as metrics_mod
from ..release import verify as verify_mod
from ..backend import (TransferLog, count_transfers, frame_to_device, frame_to_host, get_backend,
                       is_device_frame, stage, synchronize, to_device, to_scalar)
from ..table.cells import output_qi_columns
from ..release.classes import ClassStats
from ..table.encoding import Table, encode, kernel_specs
from ..errors import VerificationError
from ..hierarchy import choose_rho, initial_hierarchies
from ..table.resident import split_resident
from .generalize import generalize, read_ahead
from .optimize import optimize_partitions
from .plan import Plan, check_input
from .result import FitResult, Published, RunOptions

log = logging.getLogger("gpuanon")


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
    """The single-process runner: roles, encoding, partitions and the published output on this
    machine's backend (``options``: :class:`~gpuanon.anonymize.result.RunOptions`)."""

    #: tables up to this many rows are also checked on their published text (pandas group-by)
    TEXT_CHECK_ROWS = 100_000
    #: tables up to this many rows (or TEXT_CHECK_ROWS) have their output frame made before they are
    #: verified and measured; larger ones after (the frame and those stages' temporaries were the peak)
    OUTPUT_FIRST_ROWS = 100_000

    def __init__(self, options: RunOptions | None = None):
        self.options = options or RunOptions()

    @contextmanager
    def _stage(self, name: str):
        """Charge copies to stage ``name``, and say when a long stage is done (one line each)."""
        t0 = time.perf_counter()
        with stage(name):
            yield
            synchronize()  # device work queued by the stage is charged to it
        secs = time.perf_counter() - t0
        if self.options.progress and secs >= self.options.stage_log_seconds:
            log.info("%s done in %.2f s", name, secs)

    # ------------------------------------------------------------------ fitting
    def rows(self, source) -> int:
        """The rows of ``source`` (a pandas or cuDF frame), checked not empty."""
        check_input(source)
        return len(source)

    def fit(self, plan: Plan, source) -> FitResult:
        """Roles, encoding and partitions of ``source`` (a pandas or cuDF frame). A cuDF frame on the
        GPU backend keeps its plain numeric QIs on the device (checked from their facts, keyed where
        they are: :func:`~gpuanon.table.resident.split_resident`); the columns the host must see come in
        one counted copy, stage ``input`` (on the CPU backend: the whole frame)."""
        transfers = TransferLog(simulate=False)
        mark = dict(compile_seconds)  # kernels first launched from here on are this fit's
        host, resident, be = source, None, None
        if is_device_frame(source):
            be = get_backend(self.options.backend, n_rows=len(source))
            with count_transfers(log_=transfers), stage("input"):
                if be.is_gpu:
                    host, resident = split_resident(source, plan.roles, be.xp, plan.hierarchies)
                else:
                    host = frame_to_host(source)
        factorized: dict = {}  # the text QIs hashed once, for the roles and the encoding
        plan = plan.with_roles(host, resident, factorized)
        hplan = plan.hierarchy_plan(host)
        be = be or get_backend(self.options.backend, n_rows=len(host))
        transfers.simulate = not be.is_gpu
        t1 = time.perf_counter()
        with count_transfers(log_=transfers), self._stage("encode"):
            table = encode(host, plan.schema, be.xp, orders=Plan.leaf_orders(hplan), resident=resident,
                           factorized=factorized)
        return self.fit_encoded(plan, table, be, time.perf_counter() - t1, hplan, transfers, mark)

    def fit_encoded(self, plan: Plan, table: Table, be, encode_seconds: float = 0.0, hplan: dict | None = None,
                    transfers: TransferLog | None = None, mark: dict | None = None) -> FitResult:
        """Partition an encoded ``table`` under ``plan`` (its roles set; ``hplan``: its hierarchy plan)."""
        transfers = TransferLog(simulate=not be.is_gpu) if transfers is None else transfers
        mark = dict(compile_seconds) if mark is None else mark
        with count_transfers(log_=transfers):
            result = self._partition_table(plan, table, be, encode_seconds, hplan)
        result.transfers, result.compile_mark = transfers, mark
        return result

    def _partition_table(self, plan: Plan, table: Table, be, encode_seconds, hplan) -> FitResult:
        xp = be.xp
        # the shared table is never modified: hierarchies are bound to this fit's own copy
        table = dataclasses.replace(table)
        timings: dict[str, float] = {"encode": encode_seconds}
        q = to_device(table.sa_distribution(), xp) if plan.t is not None else None  # once, on the device
        crit = plan.criteria(table.sa_ordered, table.sa_values, q)
        if crit.needs_histogram:
            plan.check_whole_table(crit, table.n_rows, count_values(table.sa, table.n_sa, xp)[None, :], xp)
        bound, freq_tables = initial_hierarchies(table, hplan or {}, plan.rho, xp)
        table.bind_hierarchies(bound)
        t1 = time.perf_counter()
        with self._stage("partition"):
            labels, n_parts, suppressed, sup_reason, info = self._partition(table, plan, crit, xp)
        timings["partition"] = time.perf_counter() - t1
        optimization = loss_before = None
        pre = (labels, n_parts)  # the partition before the optimization step
        if plan.optimize:
            t1 = time.perf_counter()
            with self._stage("optimize"):
                labels, n_parts, optimization = optimize_partitions(table, labels, n_parts, crit, xp)
            timings["optimize"] = time.perf_counter() - t1
        hierarchies = {}
        if freq_tables or bound:
            t1 = time.perf_counter()
            with self._stage("hierarchies"):
                scorer = metrics_mod.HierarchyScorer(table, labels)
                hierarchies, bound = choose_rho(table, scorer, freq_tables, hplan or {}, plan.rho, bound, xp)
                table.bind_hierarchies(bound)
            timings["hierarchies"] = time.perf_counter() - t1
        if plan.optimize and table.target is not None:  # the loss the step saved (report: optimization)
            t1 = time.perf_counter()
            with self._stage("optimize"):
                summary = metrics_mod.summary_from_labels(table, *pre)
                loss_before = metrics_mod.entropy_coefficients(summary)["entropy_loss"]
            timings["optimize"] += time.perf_counter() - t1
        # the labels stay on the device
        return FitResult(labels, n_parts, suppressed, sup_reason, info, plan.schema, be, crit, None, timings, table,
                         optimization=optimization, optimize_loss_before=loss_before, hierarchies=hierarchies,
                         plan=plan, encoded=table)

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
        prog = _Progress(self.options.progress, int(keys.shape[1]))
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

    # ------------------------------------------------------------------ publishing
    def accepts(self, result: FitResult, df, fitted, fitted_ref, fitted_shape) -> bool:
        """Whether ``df`` is the table ``result`` was fitted on: the same frame (``fitted``, alive), or
        its QI columns equal; fitted through ``fit_encoded`` (no reference kept): the row count."""
        if df is fitted:
            return True
        cols = list(result.schema.quasi_identifiers)
        if fitted is not None and len(df) == len(fitted) and list(df.columns) == list(fitted.columns) \
                and df[cols].equals(fitted[cols]):
            return True
        return fitted is None and fitted_ref is None and len(df) == result.table.n_rows

    def publish(self, result: FitResult, frame) -> Published:
        """The published table of ``frame`` (the fitted one), verified: the stages on ``result``
        (its verification, metrics and class statistics set), a cuDF frame published as one."""
        on_device = is_device_frame(frame)
        with count_transfers(log_=result.transfers):
            src = frame
            if on_device and not result.backend.is_gpu:  # a cuDF frame on the CPU backend
                with stage("input"):
                    src = frame_to_host(frame)
            out, res = self.stages(result, src, build_output=True)
            if on_device and not is_device_frame(out):
                with stage("output"):
                    out = frame_to_device(out)
        #: what a written output file carries beside its rows (the encoding and the cell format)
        meta = {"encoding": result.table.encoding_metadata(), "format": result.plan.output_format}
        if not is_device_frame(out):
            out.attrs["gpuanon"] = meta
        return Published(out, res, result.metrics, meta, len(frame), len(out))

    def stages(self, result: FitResult, df, *, build_output: bool = True, fmt: str | None = None):
        """The second half of the pipeline on the fitted partitions: class statistics (once, on the
        device) -> generalize -> verify (independently, from the published cells) -> metrics; a table
        above ``OUTPUT_FIRST_ROWS`` rows is verified and measured first and its output frame made last.

        Returns ``(output frame or None, verification result)``; sets ``result``'s ``class_stats``,
        ``verification`` and ``metrics``. ``publish`` and the sweep both run it.
        """
        table, plan = result.table, result.plan
        fmt = fmt or plan.output_format
        labels, timings, n_parts = result.labels, result.timings, int(result.n_partitions)
        t1 = time.perf_counter()
        with self._stage("class_statistics"):
            cs = result.class_stats = ClassStats(table, labels, n_parts)
        timings["class_statistics"] = time.perf_counter() - t1
        out = None
        # a large table is verified and measured before its output frame is made (the frame is the
        # largest thing alive; the text cross-check, which reads it, runs only on small tables)
        frame_first = build_output and len(df) <= max(self.TEXT_CHECK_ROWS, self.OUTPUT_FIRST_ROWS)
        if frame_first:
            out = self._generalize(result, df, cs, fmt)
        ahead = 0.0
        if build_output and not frame_first:  # what generalize reads from the class statistics, charged to it as before
            t1 = time.perf_counter()
            read_ahead(cs, fmt)
            ahead = time.perf_counter() - t1
        t1 = time.perf_counter()
        with self._stage("verify"):
            res = self._verify(result, cs, fmt, out, df)
        timings["verify"] = time.perf_counter() - t1
        result.verification = res
        if not res.ok:
            raise VerificationError("independent verification failed, nothing written: " + "; ".join(res.failures))
        t1 = time.perf_counter()
        with self._stage("metrics"):
            summary = metrics_mod.summary_from_labels(table, labels, n_parts, stats=cs)
            result.metrics = metrics_mod.compute_metrics(summary, k=plan.k)
        timings["metrics"] = time.perf_counter() - t1
        if build_output and not frame_first:
            del summary
            out = self._generalize(result, df, cs, fmt, ahead)
        return out, res

    def _generalize(self, result: FitResult, df, cs: ClassStats, fmt: str, ahead: float = 0.0):
        """The output frame (stage ``generalize``; ``ahead``: seconds of its reads made earlier)."""
        t1 = time.perf_counter()
        with self._stage("generalize"):
            out = generalize(df, result.table, result.labels, int(result.n_partitions), fmt,
                             result.schema.identifiers, stats=cs)
        result.timings["generalize"] = ahead + time.perf_counter() - t1
        return out

    def _verify(self, result: FitResult, cs: ClassStats, fmt: str, out, df):
        """Verify the published cells on the device; small tables also on their text, a cross-check
        whose failures are reported. The numbers reported are the cells' (a cluster's too): the text's
        sensitive codes follow the rows' order, so its sums over a class's values (``l_entropy``, ``t``)
        may differ in the last bit."""
        table, schema, crit = result.table, result.schema, result.criteria
        xp = table.xp
        kw = result.plan.verify_keywords(crit)
        sa, q = (None, None) if table.sa is None else (table.sa[cs.kept], to_device(table.sa_distribution(), xp))
        res = verify_mod.verify_encoded(cs.row_pos, cs.published_cells(fmt), sa, q, sensitive=str(schema.sensitive),
                                        sa_missing=crit.sa_missing, xp=xp, **kw)
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
