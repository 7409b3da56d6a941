"""The metrics of a cluster run: whole-table column statistics as reductions, class summaries per home.

Every metric of the contract's section 7 reads two things: each QI's whole-table statistics (its
distinct values with their rows per target value: entropies, the domain ``D_X``, the joint counts
before anonymization) and the per-class parts (sizes, target histograms, intervals, category sets
and the mass they spread over ``D_X``). Here:

* chunk (:func:`value_target_counts`, on a shard): per QI, the distinct ``(key, target)`` pairs
  and their rows; combine (:func:`combine_value_counts`): summed by pair;
  finalize (:func:`stats_from_counts`): the :class:`~gpuanon.metrics.ColumnStats` the
  single-process :func:`~gpuanon.metrics.column_stats` makes from the rows, made from the counts;
* each home puts them in its local table's ``column_stats`` and runs the single-process
  :func:`~gpuanon.metrics.summary_from_labels` on its whole classes; the coordinator concatenates
  the homes' class summaries (:func:`combine_summaries`: category sets re-numbered, the mass over
  ``D_X`` summed), merges classes with equal cells and runs
  :func:`~gpuanon.metrics.compute_metrics`.

The combined statistics hold one entry per distinct value of a QI: here are the categorical QIs
(whose dictionaries the coordinator holds anyway) and the numeric QIs of few values; numeric QIs
of many values are held in value ranges across the workers instead (:mod:`.ranges`).
"""

from __future__ import annotations

import numpy as np

from kernels.keys import MISSING

from ..backend import to_device, to_host, to_scalar

def value_target_counts(keys, target, nt: int, xp) -> list:
    """Chunk: per QI, ``(pair, rows)`` host arrays; ``pair = key * nt + target code``."""
    out = []
    t = xp.zeros(keys.shape[1], dtype=xp.int64) if target is None else target.astype(xp.int64)
    for j in range(keys.shape[0]):  # a loop over columns
        u, c = xp.unique(keys[j].astype(xp.int64) * nt + t, return_counts=True)
        out.append((to_host(u), to_host(c)))
    return out


def combine_value_counts(chunks: list, nt: int) -> list:
    """Combine: per QI, sorted distinct keys and their rows per target value ``(vals, (m, nt))``."""
    out = []
    for j in range(len(chunks[0])):  # a loop over columns
        pairs = np.concatenate([c[j][0] for c in chunks])
        cnt = np.concatenate([c[j][1] for c in chunks])
        u, inv = np.unique(pairs, return_inverse=True)
        tot = np.bincount(inv.reshape(-1), weights=cnt, minlength=u.shape[0]).astype(np.int64)
        vals, vinv = np.unique(u // nt, return_inverse=True)
        m = np.zeros((vals.shape[0], nt), dtype=np.int64)
        m[vinv.reshape(-1), u % nt] = tot
        out.append((vals.astype(np.uint32), m))
    return out


def stats_from_counts(vals, counts_t, target_counts, has_target: bool, numeric: bool, xp):
    """Finalize: a column's :class:`~gpuanon.metrics.ColumnStats` from its value x target counts,
    as :func:`gpuanon.metrics.column_stats` computes it from the rows."""
    from ..metrics.formulas import entropy_bits_x, xlogx_sum  # noqa: PLC0415
    from ..metrics.summary import column_domain, finalize_column_stats  # noqa: PLC0415

    vals = to_device(vals, xp)
    ct = to_device(counts_t, xp)
    counts = ct.sum(axis=1)
    nt = int(ct.shape[1])
    has_missing = bool(numeric and vals.shape[0] and int(to_scalar(vals[-1])) == int(MISSING))
    h_x, dom, done = column_domain(vals, counts, has_missing, numeric, has_target, nt, target_counts, xp)
    if done is not None:
        return done
    starts = dom.bin_start[:-1]
    joint = xp.stack([xp.add.reduceat(ct[:, t], starts) if xp is np else _reduceat(ct[:, t], starts, xp)
                      for t in range(nt)], axis=1).astype(xp.float64)
    s2 = sum(xlogx_sum(ct[:, t], xp) for t in range(nt))
    h_t = entropy_bits_x(to_device(np.asarray(target_counts), xp), xp)
    return finalize_column_stats(vals, counts, h_x, dom, joint, s2, h_t, xp)


def _reduceat(x, starts, xp):
    from kernels.segmented import segment_reduce  # noqa: PLC0415

    return segment_reduce("add", x, starts, xp, axis=0)


def summary_to_host(summary):
    """A class summary with every array on the host (to travel to the coordinator)."""
    import dataclasses  # noqa: PLC0415

    def h(v):
        return to_host(v) if hasattr(v, "shape") else v

    cols = [dataclasses.replace(c, **{f.name: h(getattr(c, f.name)) for f in dataclasses.fields(c)
                                      if hasattr(getattr(c, f.name), "shape")}) for c in summary.columns]
    return dataclasses.replace(summary, sizes=h(summary.sizes), target_hist=h(summary.target_hist), columns=cols,
                               target_counts_before=h(summary.target_counts_before))


def combine_summaries(parts: list, n_in: int, n_suppressed: int):
    """One class summary of the whole output from the homes' (classes are whole on one home)."""
    from ..metrics import ClassSummary, ColumnSummary  # noqa: PLC0415
    from ..metrics.summary import merge_equal_classes  # noqa: PLC0415

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
