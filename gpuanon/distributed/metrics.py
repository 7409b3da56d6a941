"""The metrics of a cluster run: whole-table column statistics as reductions, class summaries per home.

Every metric of the contract's section 7 reads two things: each QI's whole-table statistics (its
distinct values with their rows per target value: entropies, the domain ``D_X``, the joint counts
before anonymization) and the per-class parts (sizes, target histograms, intervals, category sets
and the mass they spread over ``D_X``). Here:

* a column's whole-table statistics, the metrics layer's chunk / combine / finalize
  (:mod:`gpuanon.metrics.columns`) on many chunks: chunk (:func:`value_target_counts`, on a shard):
  per QI, the distinct ``(key, target)`` pairs and their rows; combine
  (:func:`combine_value_counts`): summed by pair; finalize (:func:`stats_from_counts`): the
  :class:`~gpuanon.metrics.ColumnStats` one process makes from its one chunk, equal to it (the
  same integer counts, the same finalize);
* each home puts them in its local table's ``column_stats`` and runs the single-process
  :func:`~gpuanon.metrics.columns_from_labels` on its whole classes; the coordinator concatenates
  the homes' class summaries (:func:`combine_summaries`: category sets re-numbered, the mass over
  ``D_X`` summed), merges classes with equal cells and runs
  :func:`~gpuanon.metrics.compute_metrics`.

The combined statistics hold one entry per distinct value of a QI: here are the categorical QIs
(whose dictionaries the coordinator holds anyway) and the numeric QIs of few values; numeric QIs
of many values are held in value ranges across the workers instead (:mod:`.ranges`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..backend import to_device, to_host
from ..metrics import ClassSummary, ColumnSummary
from ..metrics.columns import (ValueTargets, combine_value_targets, matrix_value_targets,
                               stats_from_value_targets, value_target_chunk, value_target_matrix,
                               value_target_runs)
from ..metrics.runs import release_buffers
from ..metrics.summary import merge_equal_classes


def value_target_counts(keys, target, nt: int, xp) -> list:
    """Chunk: per QI (rows of ``keys``), this shard's
    :class:`~gpuanon.metrics.columns.ValueTargets` as host runs
    (:func:`~gpuanon.metrics.columns.value_target_chunk`, :func:`~gpuanon.metrics.columns.value_target_runs`)."""
    out = [value_target_runs(value_target_chunk(keys[j], target, nt, xp))
           for j in range(keys.shape[0])]  # a loop over columns
    release_buffers()  # the sort buffers of this (worker) thread
    return out


def combine_value_counts(chunks: list, nt: int) -> list:
    """Combine: per QI, the shards' chunks summed per key
    (:func:`~gpuanon.metrics.columns.combine_value_targets`), as sorted distinct keys and their rows
    per target value ``(vals, (m, nt))``."""
    return [value_target_matrix(combine_value_targets([c[j] for c in chunks]), nt)
            for j in range(len(chunks[0]))]  # a loop over columns


def stats_from_counts(vals, counts_t, target_counts, has_target: bool, numeric: bool, xp):
    """Finalize: a column's :class:`~gpuanon.metrics.ColumnStats` from its value x target counts, by
    the finalize one process runs on its one chunk
    (:func:`~gpuanon.metrics.columns.stats_from_value_targets`)."""
    vt = matrix_value_targets(vals, counts_t, has_target)
    by_t = None if vt.by_target is None else [(to_device(k, xp), to_device(w, xp)) for k, w in vt.by_target]
    dev = ValueTargets(tuple(to_device(a, xp) if hasattr(a, "shape") else a for a in vt.whole), by_t)
    tc = None if target_counts is None else to_device(np.asarray(target_counts), xp)
    return stats_from_value_targets(dev, int(counts_t.shape[1]), tc, numeric, xp)


def summary_to_host(summary):
    """A class summary with every array on the host (to travel to the coordinator)."""
    def h(v):
        return to_host(v) if hasattr(v, "shape") else v

    cols = [dataclasses.replace(c, **{f.name: h(getattr(c, f.name)) for f in dataclasses.fields(c)
                                      if hasattr(getattr(c, f.name), "shape")}) for c in summary.columns]
    return dataclasses.replace(summary, sizes=h(summary.sizes), target_hist=h(summary.target_hist), columns=cols,
                               target_counts_before=h(summary.target_counts_before))


def combine_summaries(parts: list, n_in: int, n_suppressed: int):
    """One class summary of the whole output from the homes' (classes are whole on one home)."""
    parts = [p for p in parts if p is not None and p.sizes.shape[0]]
    first = parts[0]
    cat = np.concatenate
    cols = []
    for j, c0 in enumerate(first.columns):  # a loop over columns
        cs = [p.columns[j] for p in parts]
        c = ColumnSummary(c0.name, c0.kind, c0.counts, c0.u_before, c0.h_bits, dom_range=c0.dom_range,
                          domain_counts=c0.domain_counts, joint_before=c0.joint_before, binned=c0.binned,
                          height=c0.height)
        if all(x.joint_after is not None for x in cs):
            c.joint_after = sum(np.asarray(x.joint_after, dtype=np.float64) for x in cs)
        if c0.kind == "numeric":
            c.lo, c.hi, c.gt_h = cat([x.lo for x in cs]), cat([x.hi for x in cs]), cat([x.gt_h for x in cs])
            for f in ("gen_key", "width"):  # keys are global: a class's key pair is its cell
                if all(getattr(x, f) is not None for x in cs):
                    setattr(c, f, cat([getattr(x, f) for x in cs]))
        else:  # each home numbered its own category sets: one numbering of the union
            sets = cat([x.sets for x in cs], axis=0)
            off = np.cumsum([0] + [x.sets.shape[0] for x in cs[:-1]])
            ids = cat([np.asarray(x.set_id).reshape(-1) + o for x, o in zip(cs, off)])
            key = sets
            if c0.levels is not None:  # hierarchy nodes: a node is its leaves and its level
                c.levels = cat([x.levels for x in cs])
                lv = np.zeros(sets.shape[0], dtype=np.int64)
                lv[ids] = c.levels
                key = np.concatenate([sets.astype(np.int64), lv[:, None]], axis=1)
            u, one, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
            c.sets, c.set_id = sets[one], inv.reshape(-1)[ids]
        cols.append(c)
    th = None if first.target_hist is None else cat([p.target_hist for p in parts], axis=0)
    s = ClassSummary(cat([p.sizes for p in parts]), th, cols, int(n_in), int(n_suppressed),
                     first.target_counts_before, [])
    return merge_equal_classes(s)
