"""The thesis's optimization step (the contract, section 4), as whole-array passes.

Inside each Mondrian partition, a QI tuple that occurs at least ``k`` times (and whose rows meet l
and t by themselves) keeps its original values and becomes its own equivalence class; the
partition's remaining rows are generalized together. When that remainder is non-empty but
smaller than ``k`` (or fails l or t), exact groups are given back to it, smallest first, until
it passes (a partition given everything back is the original partition, which passes).

Examples
--------
>>> import numpy as np, pandas as pd
>>> from gpuanon.table.schema import Schema
>>> from gpuanon.table.encoding import encode
>>> from gpuanon.anonymize.criteria import Criteria
>>> df = pd.DataFrame({"a": [1, 1, 1, 2, 3, 4]})
>>> t = encode(df, Schema.from_frame(df, ["a"]))
>>> labels, n, info = optimize_partitions(t, np.zeros(6, dtype=np.int64), 1, Criteria(k=3))
>>> labels.tolist(), info["exact_classes"]
([0, 0, 0, 1, 1, 1], 1)
"""

from __future__ import annotations

import numpy as np

from kernels.counts import count_values

from ..backend import to_scalar
from .criteria import Criteria
from ..table.encoding import Table


def _dense(x, xp):
    """Dense ids ``0..m-1`` of the values of ``x`` (sorted order) and ``m``."""
    u, inv = xp.unique(x, return_inverse=True)
    return inv.reshape(-1).astype(xp.int64), int(u.shape[0])


def tuple_ids(keys, rows, xp=np):
    """Exact id of the whole QI tuple of each of ``rows`` (equal tuples, equal ids)."""
    tid = xp.zeros(rows.shape[0], dtype=xp.int64)
    m = 1
    for j in range(keys.shape[0]):
        kj, card = _dense(keys[j][rows], xp)
        tid, m = _dense(tid * card + kj, xp)
    return tid, m


def optimize_partitions(table: Table, labels, n_parts: int, crit: Criteria, xp=np):
    """Split every partition into exact-match classes and a generalized remainder.

    Returns new labels (numbered by smallest row index, -1 kept for suppressed rows), the
    number of classes, and ``{"exact_classes", "exact_rows", "returned_groups", "rounds"}``.
    """
    labels = xp.asarray(labels)
    kept = xp.nonzero(labels >= 0)[0]
    lab = labels[kept]
    tid, m = tuple_ids(table.keys, kept, xp)
    g, ng = _dense(lab * m + tid, xp)  # group = (partition, tuple)
    gsize = count_values(g, ng, xp)
    gpart = xp.zeros(ng, dtype=xp.int64)
    gpart[g] = lab
    psize = count_values(lab, n_parts, xp)
    ghist = phist = None
    if crit.needs_histogram:
        nsa = len(table.sa_values)
        sa = table.sa[kept].astype(xp.int64)
        ghist = count_values(g * nsa + sa, ng * nsa, xp).reshape(ng, nsa)
        phist = count_values(lab * nsa + sa, n_parts * nsa, xp).reshape(n_parts, nsa)
        # bin (partition of the group, sensitive value) of every cell of ghist
        gcell = (gpart[:, None] * nsa + xp.arange(nsa, dtype=xp.int64)[None, :]).reshape(-1)
    exact = crit.satisfied(gsize, ghist, xp)
    # a group that is the whole partition gains nothing: leave it generalized (same values)
    exact &= gsize < psize[gpart]
    returned = rounds = 0
    while True:
        rounds += 1
        w = xp.where(exact, gsize, 0)
        rsize = psize - count_values(gpart, n_parts, xp, weights=w)
        rhist = None
        if ghist is not None:
            given = xp.where(exact[:, None], ghist, 0).reshape(-1)
            rhist = phist - count_values(gcell, n_parts * nsa, xp, weights=given).reshape(n_parts, nsa)
        bad = (rsize > 0) & ~crit.satisfied(rsize, rhist, xp)
        if not to_scalar(bad.any()):
            break
        cand = xp.nonzero(exact & bad[gpart])[0]
        # the smallest exact group of each failing partition (ties: lowest group id) goes back
        order = cand[xp.lexsort(xp.stack([cand, gsize[cand], gpart[cand]]))]
        firsts = xp.ones(order.shape[0], dtype=bool)
        firsts[1:] = gpart[order][1:] != gpart[order][:-1]
        exact[order[firsts]] = False
        returned += int(to_scalar(firsts.sum()))
    # new labels: exact groups after the partitions, then canonical numbering by first row
    ex_ids = xp.cumsum(exact) - 1
    new = xp.where(exact[g], n_parts + ex_ids[g], lab)
    n_exact = int(to_scalar(exact.sum()))
    total = n_parts + n_exact
    first = xp.full(total, labels.shape[0], dtype=xp.int64)
    order = xp.argsort(new, kind="stable")
    sn = new[order]
    starts = xp.ones(sn.shape[0], dtype=bool)
    starts[1:] = sn[1:] != sn[:-1]
    first[sn[starts]] = kept[order][starts]  # rows are in original order within each label
    present = first < labels.shape[0]
    relabel = xp.full(total, -1, dtype=xp.int64)
    pos = xp.argsort(xp.where(present, first, labels.shape[0]), kind="stable")
    n_present = int(to_scalar(present.sum()))
    relabel[pos[:n_present]] = xp.arange(n_present, dtype=xp.int64)
    out = xp.full(labels.shape[0], -1, dtype=xp.int64)
    out[kept] = relabel[new]
    info = {"exact_classes": n_exact, "exact_rows": int(to_scalar(xp.where(exact, gsize, 0).sum())),
            "returned_groups": returned, "rounds": rounds}
    return out, n_present, info
