"""A cluster run's checks and combinations: the estimator's validation on a sample and the whole
table's criteria and suppression (the single-process messages), the whole-table column
statistics, and the homes' verification and class summaries combined into the output's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..anonymize.criteria import blocks_reason, check_suppression, whole_table_error
from ..errors import PrivacyError, SchemaError

def validate(est, sample: pd.DataFrame, n_total: int):
    """The estimator's own validation on a sample of the first shard; k against the whole table."""
    k = est.k
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise SchemaError(f"k must be an integer >= 2, got {k!r}; k-anonymity needs k >= 2 (e.g. --k 3)")
    if k > n_total:
        raise PrivacyError(f"k = {k} is larger than the table ({n_total} rows); choose k <= {n_total}")
    probe = est.__class__(**{**est.get_params(), "k": 2})
    return probe.validate(sample if len(sample) >= 2 else pd.concat([sample, sample]))


def whole_table_check(est, crit, n_total, whole, sensitive) -> None:
    """The single-process estimator's check that the whole table meets l and t, same messages."""
    whole = np.asarray(whole)[None, :]
    if not bool(crit.satisfied(np.asarray([n_total]), whole, np)[0]):
        raise whole_table_error(est.l_kind, int(est.l), float(est.c), sensitive, whole)


def suppression(est, crit, enc, bsizes, bhist, n_total):
    """Blocks (missing-value patterns) failing the criteria on their own are suppressed, within budget."""
    keep = np.ones(enc.n_blocks, dtype=bool)
    suppressed, reason = 0, ""
    if enc.patterns is not None:
        bad = ~crit.satisfied(bsizes, bhist, np)
        if bool(bad.any()):
            keep = ~bad
            suppressed = int(bsizes[bad].sum())
            reason = blocks_reason(suppressed, crit)
    check_suppression(suppressed, n_total, est.max_suppression, reason)
    return suppressed, reason, keep


def column_statistics(run, shards, ss, home_of_shard, enc, n_total: int):
    """The whole table's per-QI value x target counts (see :mod:`.metrics`), when they are small:
    ``(per QI (values, counts), target counts)``, or ``(None, None)``."""
    from .metrics import DISTINCT_LIMIT, combine_value_counts  # noqa: PLC0415

    nt = max(len(enc.target_values), 1)
    bound = 0
    for c in enc.columns:  # a loop over columns: distinct values known from the dictionaries
        distinct = c.n_categories if c.kind == "categorical" else (
            n_total if isinstance(c.info, str) else len(c.info) + 1)
        bound += min(n_total, distinct * nt)
    if bound > DISTINCT_LIMIT:
        return None, None
    run.stage = "whole-table column statistics"
    chunks = run.gather([run.call(home_of_shard[i], s, ss[i], "value_counts", nt) for i, s in enumerate(shards)])
    merged = combine_value_counts(chunks, nt)
    tcounts = merged[0][1].sum(axis=0) if merged else None
    return merged, (tcounts if enc.target is not None else None)


def combine_stages(hres, est, n_total: int, suppressed: int, enc, target_counts=None):
    """Combine the homes' verification and per-class results into the whole output's."""
    from .. import metrics as metrics_mod  # noqa: PLC0415
    from ..verify import VerificationResult  # noqa: PLC0415

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
                             pick(min, "l"), pick(min, "l_entropy"), pick(max, "t"), stats, failures)
    summary = metrics_mod.ClassSummary(sizes, None, [], n_total, suppressed)
    m = metrics_mod.compute_metrics(summary, k=int(est.k))
    if hres and hres[0]["target_max"] is not None:
        tmax = sum(float((h["sizes"] - h["target_max"]).sum()) for h in hres)
        m["cm"] = float((tmax + suppressed) / max(n_total, 1))
    n_out = int(sizes.sum())
    per_ncp = {c.name: sum(h["ncp_sum"][c.name] for h in hres) / max(n_out, 1) for c in enc.columns}
    qis = [c.name for c in enc.columns]
    w = np.full(len(qis), 1.0 / max(len(qis), 1))
    m["ncp"] = float(sum(wi * per_ncp[c] for wi, c in zip(w, qis)))
    m["ncp_per_column"] = per_ncp
    m["ncp_weights"] = dict(zip(qis, map(float, w)))
    for key in ("entropy_coefficient_before", "entropy_coefficient_after", "entropy_loss",
                "entropy_coefficient_before_labels", "entropy_coefficient_after_labels", "entropy_loss_labels",
                "gionis_tassa"):
        m[key] = None
    m["not_on_cluster"] = ["entropy coefficients", "gionis_tassa"]
    if getattr(enc, "hierarchies", None):  # hierarchy levels come with the class summaries only
        m["not_on_cluster"].append("precision")
    if hres and all(h["summary"] is not None for h in hres):  # every metric, as in one process
        from .metrics import combine_summaries  # noqa: PLC0415

        s = combine_summaries([h["summary"] for h in hres], n_total, suppressed)
        if target_counts is not None:
            s.target_counts_before = np.asarray(target_counts)
        m = metrics_mod.compute_metrics(s, k=int(est.k))
    return res, m
