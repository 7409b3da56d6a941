"""A cluster run's checks and combinations: the whole table's criteria and suppression (the
single-process messages), the whole-table column statistics, and the homes' verification and class
summaries combined into the output's. (The parameters and roles are the plan's to check:
:meth:`gpuanon.anonymize.plan.Plan.of`, :meth:`~gpuanon.anonymize.plan.Plan.with_roles`.)"""

from __future__ import annotations

import numpy as np

from . import ranges
from .. import metrics as metrics_mod
from ..release.verify import VerificationResult
from .metrics import combine_summaries, combine_value_counts


def suppression(plan, crit, enc, bsizes, bhist, n_total):
    """Blocks (missing-value patterns) failing the criteria on their own are suppressed, within budget."""
    keep = np.ones(enc.n_blocks, dtype=bool)
    suppressed, failed = 0, False
    if enc.patterns is not None:
        bad = ~crit.satisfied(bsizes, bhist, np)
        if bool(bad.any()):
            keep, failed = ~bad, True
            suppressed = int(bsizes[bad].sum())
    return suppressed, plan.suppression_reason(crit, failed, suppressed, n_total), keep


def column_statistics(run, shards, ss, home_of_shard, homes, hs, enc, n_total: int, progress: bool = False):
    """The whole table's per-QI statistics. Categorical QIs (whose dictionaries are here already)
    and numeric QIs with at most :data:`.ranges.RANGE_MIN_PAIRS` possible (value, target) pairs:
    their value x target counts, gathered (see :mod:`.metrics`). Other numeric QIs: held in value
    ranges across the workers, every home given its classes' positions (see :mod:`.ranges`).

    Returns ``({QI: (values, counts)}, target counts or None, {QI: ColumnStats}, info)``."""
    nt = max(len(enc.target_values), 1)
    gathered, ranged = [], []
    for j, c in enumerate(enc.columns):  # a loop over columns: distinct values known from the dictionaries
        distinct = c.n_categories if c.kind == "categorical" else (
            n_total if isinstance(c.info, str) else len(c.info) + 1)
        big = c.kind == "numeric" and min(n_total, distinct * nt) > ranges.RANGE_MIN_PAIRS
        (ranged if big else gathered).append(j)
    merged, tcounts = {}, None
    if gathered:
        run.stage = "whole-table column statistics"
        chunks = run.gather([run.call(home_of_shard[i], s, ss[i], "value_counts", nt, gathered)
                             for i, s in enumerate(shards)])
        merged = dict(zip(gathered, combine_value_counts(chunks, nt)))
        tcounts = merged[gathered[0]][1].sum(axis=0)
    has_target = enc.target is not None
    rstats, info = {}, {"columns": [], "rounds": 0, "bytes_between_workers": 0}
    if ranged:
        rstats, tcounts, info = ranges.range_statistics(run, shards, ss, home_of_shard, homes, hs, enc, ranged,
                                                        has_target, tcounts if has_target else None, progress)
    return merged, (tcounts if has_target else None), rstats, info


def combine_stages(hres, k: int, n_total: int, suppressed: int, enc, target_counts=None):
    """Combine the homes' verification and per-class results into the whole output's (``k``: the plan's)."""
    hres = [h for h in hres if h is not None]
    # classes are grouped by their published cells, as the verifier does, over every home: classes
    # of two homes with one cell tuple are one output class (verified whole by .merge)
    u, inv = np.unique(np.concatenate([h["hash"] for h in hres] + [np.zeros(0, dtype=np.uint64)]), return_inverse=True)
    sizes = np.bincount(inv.reshape(-1), weights=np.concatenate([h["sizes"] for h in hres] + [np.zeros(0)]),
                        minlength=u.shape[0]).astype(np.int64)
    vs = [h["verify"] for h in hres]
    failures = []
    for v in vs:
        failures += [f for f in v.failures if f not in failures]

    def pick(f, attr):
        vals = [getattr(v, attr) for v in vs if getattr(v, attr) is not None]
        return f(vals) if vals else None

    n_cls = int(sizes.shape[0])
    stats = {}
    if n_cls:
        stats = {"min": int(sizes.min()), "median": float(np.median(sizes)), "max": int(sizes.max()),
                 "mean": float(sizes.mean())}
    res = VerificationResult(int(sum(v.n_rows for v in vs)), n_cls, int(sizes.min()) if n_cls else 0,
                             pick(min, "l"), pick(min, "l_entropy"), pick(max, "t"), stats, failures,
                             int(sum(v.sensitive_missing for v in vs)))
    parts = [h["summary"] for h in hres if h["summary"] is not None]
    if not parts:  # no class at all (every row suppressed)
        return res, metrics_mod.compute_metrics(metrics_mod.ClassSummary(sizes, None, [], n_total, suppressed),
                                                k=int(k))

    s = combine_summaries(parts, n_total, suppressed)  # every metric, as in one process
    if target_counts is not None:
        s.target_counts_before = np.asarray(target_counts)
    return res, metrics_mod.compute_metrics(s, k=int(k))


def loss_before_step(hres, n_total: int, suppressed: int, target_counts=None) -> float | None:
    """The entropy-coefficient loss of the partitions before the optimization step (the report's
    ``optimization.entropy_loss_before``), from the homes' summaries of those partitions (each one
    whole on its home), as one process measures it: :func:`~gpuanon.metrics.entropy_coefficients`
    of their combined summary. None when no home kept them (no step, or no target)."""
    parts = [h["summary_before"] for h in hres if h is not None and h.get("summary_before") is not None]
    if not any(p.sizes.shape[0] for p in parts):
        return None
    s = combine_summaries(parts, n_total, suppressed)
    if target_counts is not None:
        s.target_counts_before = np.asarray(target_counts)
    return metrics_mod.entropy_coefficients(s)["entropy_loss"]
