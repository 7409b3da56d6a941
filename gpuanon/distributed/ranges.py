"""Whole-table statistics of large numeric QIs, held in value ranges across the workers.

The metrics of a numeric QI read its whole-table distribution: the rows and ``sum c log2 c`` of
its distinct values (the entropy ``H(X)``, ``U(T | X)``, every class's interval entropy for
Gionis-Tassa), the equal-frequency bins of its domain ``D_X`` and, per class, the rows before
the class's smallest value and up to its largest (the mass the class spreads over ``D_X``). A
column of millions of distinct values is too large to gather on one process, and its counts
are not additive across shards (a value's ``c log c`` needs its global ``c``). So, per column:

1. **chunk** (:func:`shard_chunk`, on every shard): the distinct ``(key, target)`` pairs and
   their rows, kept on the shard; a sample of its keys comes back;
2. **splitters** (here): ``W - 1`` keys cutting the key space into one range per worker, at
   the samples' weighted quantiles (load balance only: the figures are exact whatever they are);
3. **shuffle** (:func:`shard_piece` -> :func:`owner_build`): every shard sends each worker the
   pairs of its range; the worker (the range's *owner*) sums them into exact per-value counts and
   returns a few totals per column: distinct values, rows, missing rows, ``sum c log2 c``,
   ``sum n_xt log2 n_xt``, rows per target value;
4. **offsets** (here): exclusive sums of the totals give every range its global value index, rows
   and ``c log c`` before it, and the whole column's ``H(X)`` and ``U(T | X)``;
5. **domain** (:func:`owner_edges`): the bins' first values (the quantiles ``i * n / 256`` of the
   present rows land in exactly one range each), then the joint counts before anonymization per
   bin and target value (:func:`owner_joint`), summed here;
6. **queries** (:func:`home_queries` -> :func:`owner_answer` -> :func:`home_take`): every home
   sends each class's smallest and largest key (its output classes and, after the optimization
   step, its partitions before it) to the owners of those keys and gets back the
   global value index, the rows and the ``c log c`` before it: the positions, rows and interval
   entropy :func:`~gpuanon.metrics.summary_from_labels` computes from the values in one process.

Every number is the single process's up to the order of floating-point sums. Per column the
shuffle moves the distinct pairs once (at most 16 bytes a row) and the queries 2 keys and 3
answers per class; columns go in rounds of :data:`COLUMNS_PER_ROUND` to bound the memory.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.keys import MISSING
from kernels.segmented import segment_reduce

from ..backend import to_device, to_host, to_scalar
from ..metrics import ColumnStats
from ..metrics.entropy import N_BINS, NumericDomain
from ..metrics.formulas import entropy_bits_x, xlog2x, xlogx_sum

log = logging.getLogger("gpuanon")

#: numeric QIs with more possible (value, target) pairs than this take the range path
RANGE_MIN_PAIRS = 1 << 16
#: columns per round of the range path (bounds the pairs held at once)
COLUMNS_PER_ROUND = 4
#: keys sampled per shard, column and worker to place the splitters
SAMPLES_PER_WORKER = 64
#: one past the largest key: the last range's end
KEY_END = 1 << 32


@dataclass
class OwnedRange:
    """One column's distinct values in one key range, on their owner (device arrays)."""

    vals: Any  # sorted distinct keys (int64)
    ct: Any  # (V, n_targets) rows per value and target
    cum_rows: Any  # rows before each value (V + 1), within the range
    cum_clog: Any  # sum c log2 c before each value (V + 1), within the range
    off_v: int = 0
    off_rows: int = 0
    off_clog: float = 0.0


# --------------------------------------------------------------------------------------------
# on the shards
# --------------------------------------------------------------------------------------------

def shard_chunk(shard, cols, nt: int, n_samples: int) -> dict:
    """Chunk: per column, the shard's distinct ``(key, target)`` pairs (``key * nt + t``) and rows,
    kept here; returns ``{column: (sampled keys, pairs)}``."""
    xp = shard.xp
    t = xp.zeros(shard.n, dtype=xp.int64) if shard.target is None else shard.target.astype(xp.int64)
    shard.range_pairs, shard.range_nt = {}, int(nt)
    out = {}
    for j in cols:  # a loop over columns
        u, c = xp.unique(shard.keys[j].astype(xp.int64) * nt + t, return_counts=True)
        shard.range_pairs[j] = (u, c.astype(xp.int64))
        m = int(u.shape[0])
        pos = xp.linspace(0, max(m - 1, 0), min(m, n_samples)).astype(xp.int64)
        out[j] = (to_host(u[pos] // nt), m)
    return out


def shard_piece(shard, splitters: dict, d: int) -> dict:
    """The shard's pairs in worker ``d``'s range of every column (host arrays, to travel)."""
    xp, nt = shard.xp, shard.range_nt
    out = {}
    for j, sp in splitters.items():  # a loop over columns
        u, c = shard.range_pairs[j]
        a, b = to_host(xp.searchsorted(u, to_device(np.asarray(sp[d:d + 2], dtype=np.int64) * nt, xp)))
        out[j] = (to_host(u[a:b]), to_host(c[a:b]))
    return out


def _run_starts(a, xp):
    """True where a sorted array's run of equal values starts."""
    return xp.concatenate([xp.ones(min(int(a.shape[0]), 1), dtype=bool), a[1:] != a[:-1]])


def shard_drop(shard) -> None:
    shard.range_pairs = None


# --------------------------------------------------------------------------------------------
# on the owners (a home owns the range of its index)
# --------------------------------------------------------------------------------------------

def owner_build(home, cols, nt: int, pieces, sources) -> tuple[dict, int]:
    """Sum the shards' pairs of this worker's range into per-value counts; returns per column
    ``{V, rows, missing, sx, s2, tcounts}`` (``sx = sum c log2 c``, ``s2`` over value x target),
    and the bytes of the pieces that came from other workers (``sources``: each piece's worker)."""
    xp = home.xp
    home.ranges = {}
    out = {}
    for j in cols:  # a loop over columns
        pairs = to_device(np.concatenate([p[j][0] for p in pieces]), xp)
        cnt = to_device(np.concatenate([p[j][1] for p in pieces]), xp)
        # every piece is sorted: a stable sort merges the runs (timsort on the CPU)
        order = xp.argsort(pairs, kind="stable")
        pairs, cnt = pairs[order], cnt[order]
        starts = xp.nonzero(_run_starts(pairs, xp))[0]
        u, tot = pairs[starts], segment_reduce("add", cnt, starts, xp, axis=0)
        keys = u // nt
        first = _run_starts(keys, xp)
        vals = keys[first]
        t = u % nt
        ct = xp.zeros((vals.shape[0], nt), dtype=xp.int64)
        ct[xp.cumsum(first) - 1, t] = tot
        counts = segment_reduce("add", tot, xp.nonzero(first)[0], xp, axis=0)
        cum_rows = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(counts)])
        cum_clog = xp.concatenate([xp.zeros(1, dtype=xp.float64), xp.cumsum(xlog2x(counts.astype(xp.float64)))])
        v = int(vals.shape[0])
        missing = int(to_scalar(counts[-1])) if v and int(to_scalar(vals[-1])) == int(MISSING) else 0
        home.ranges[j] = OwnedRange(vals, ct, cum_rows, cum_clog)
        out[j] = {"V": v, "rows": int(to_scalar(cum_rows[-1])), "missing": missing,
                  "sx": float(to_scalar(cum_clog[-1])), "s2": float(to_scalar(xlogx_sum(tot, xp))),
                  "tcounts": to_host(xp.bincount(t, weights=tot.astype(xp.float64), minlength=nt).astype(xp.int64))}
    moved = sum(a.nbytes + b.nbytes for p, src in zip(pieces, sources) if src != home.index for a, b in p.values())
    return out, int(moved)


def owner_edges(home, offsets: dict, quantiles: dict) -> dict:
    """Record the range's global offsets; return the bins starting in it: per column ``(global
    value index, rows before it)`` of every first value of a bin (all present values when the
    column is not binned: ``quantiles[j]`` is None)."""
    xp = home.xp
    out = {}
    for j, (off_v, off_rows, off_clog) in offsets.items():  # a loop over columns
        r = home.ranges[j]
        r.off_v, r.off_rows, r.off_clog = int(off_v), int(off_rows), float(off_clog)
        v = int(r.vals.shape[0])
        vp = v - int(bool(v) and int(to_scalar(r.vals[-1])) == int(MISSING))
        q = quantiles[j]
        if q is None:
            idx = xp.arange(vp, dtype=xp.int64)
        else:
            incl = r.cum_rows[1:vp + 1] + r.off_rows  # rows up to each present value, global
            qq = to_device(np.asarray(q, dtype=np.int64), xp)
            mine = qq[(qq >= r.off_rows) & (qq < r.off_rows + r.cum_rows[vp])]
            idx = xp.unique(xp.searchsorted(incl, mine, side="right"))
        out[j] = (to_host(idx + r.off_v), to_host(r.cum_rows[idx] + r.off_rows))
    return out


def owner_joint(home, bin_starts: dict) -> dict:
    """Per column, rows per bin of ``D_X`` and target value in this range ``(n_bins, nt)``."""
    xp = home.xp
    out = {}
    for j, bs in bin_starts.items():  # a loop over columns
        r = home.ranges[j]
        v, nt = int(r.vals.shape[0]), int(r.ct.shape[1])
        # a bin is a run of consecutive values: differences of the running rows per target value
        at = xp.clip(to_device(np.asarray(bs, dtype=np.int64), xp) - r.off_v, 0, v)
        cum = xp.concatenate([xp.zeros((1, nt), dtype=xp.int64), xp.cumsum(r.ct, axis=0)])
        out[j] = to_host((cum[at[1:]] - cum[at[:-1]]).astype(xp.float64))
    return out


def owner_answer(home, cols, queries) -> None:
    """Answer every home's keys (``queries[d][j] = (keys, left)``): the global value index of the
    first value >= the key (``left``) or > it, and the rows and ``c log c`` before that value."""
    xp = home.xp
    home.answers = []
    for q in queries:  # a loop over homes
        a = {}
        for j in cols:  # a loop over columns
            keys, left = (to_device(x, xp) for x in q[j])
            r = home.ranges[j]
            idx = xp.empty(keys.shape[0], dtype=xp.int64)
            lt = xp.nonzero(left)[0]
            rt = xp.nonzero(~left)[0]
            idx[lt] = xp.searchsorted(r.vals, keys[lt], side="left")
            idx[rt] = xp.searchsorted(r.vals, keys[rt], side="right")
            a[j] = (to_host(idx + r.off_v), to_host(r.cum_rows[idx] + r.off_rows),
                    to_host(r.cum_clog[idx] + r.off_clog))
        home.answers.append(a)


def answer_piece(home, d: int) -> dict:
    return home.answers[d]


def owner_drop(home) -> None:
    home.ranges = home.answers = None


# --------------------------------------------------------------------------------------------
# on the homes (as holders of classes)
# --------------------------------------------------------------------------------------------

def home_queries(home, enc, splitters: dict) -> None:
    """Every class's smallest and largest key of each column, split by the owner of the key: the
    classes of each of the home's class sets (:meth:`~.worker.Home.class_sets`), one after another."""
    xp = home.xp
    w = len(next(iter(splitters.values()))) - 1
    pieces = [dict() for _ in range(w)]
    home.range_order = {}
    sets = home.class_sets(enc) if home.n else []
    for j, sp in splitters.items():  # a loop over columns
        ends = [cs.key_minmax(j) for cs in sets]  # a loop over class sets (one or two)
        ns = [int(kmin.shape[0]) for kmin, _ in ends]
        n = sum(ns)
        keys = xp.concatenate([e[0] for e in ends] + [e[1] for e in ends] + [xp.zeros(0, dtype=xp.int64)])
        keys = keys.astype(xp.int64)
        dest = xp.searchsorted(to_device(np.asarray(sp[1:-1], dtype=np.int64), xp), keys, side="right")
        order = xp.argsort(dest, kind="stable")
        bounds = to_host(xp.searchsorted(dest[order], xp.arange(w + 1, dtype=dest.dtype)))
        ks, left = keys[order], order < n
        home.range_order[j] = (order, ns)
        for d in range(w):  # a loop over workers
            pieces[d][j] = (to_host(ks[bounds[d]:bounds[d + 1]]), to_host(left[bounds[d]:bounds[d + 1]]))
    home.query_pieces = pieces


def query_piece(home, d: int) -> dict:
    return home.query_pieces[d]


def home_take(home, answers) -> None:
    """Put the owners' answers back in class order: per class set ``i`` and column ``j``,
    ``home.positions[i][j] = (a, b, rows before a, rows before b, interval entropy)``, as
    :func:`~gpuanon.metrics.summary_from_labels` reads them."""
    xp = home.xp
    home.positions = getattr(home, "positions", None) or {}
    for j, (order, ns) in home.range_order.items():  # a loop over columns
        got = []
        for f in range(3):
            x = to_device(np.concatenate([a[j][f] for a in answers]), xp)
            full = xp.empty_like(x)
            full[order] = x
            got.append(full)
        pos, rows, clog = got
        n, lo = sum(ns), 0
        for i, m in enumerate(ns):  # a loop over class sets (one or two)
            a, b = slice(lo, lo + m), slice(n + lo, n + lo + m)
            lo += m
            ca, cb = rows[a], rows[b]
            s = (cb - ca).astype(xp.float64)
            e = clog[b] - clog[a]  # sum c log2 c over the class's values
            safe = xp.where(s > 0, s, 1.0)
            h = xp.maximum(xp.where(s > 0, xp.log2(safe) - e / safe, 0.0), 0.0)
            home.positions.setdefault(i, {})[j] = (pos[a], pos[b], ca, cb, h)
    home.range_order = home.query_pieces = None


# --------------------------------------------------------------------------------------------
# here
# --------------------------------------------------------------------------------------------

def choose_splitters(samples: list, w: int) -> np.ndarray:
    """``w + 1`` keys ``0 = s_0 <= ... <= s_w = 2**32``: worker ``d`` owns ``[s_d, s_{d+1})``,
    at the weighted quantiles of the shards' samples (each sample stands for its shard's pairs)."""
    keys = [np.asarray(k, dtype=np.int64) for k, m in samples if m]
    wts = [np.full(k.shape[0], m / max(k.shape[0], 1)) for (k, m) in samples if m]
    out = np.zeros(w + 1, dtype=np.int64)
    out[w] = KEY_END
    if not keys or w == 1:
        if w > 1:
            out[1:w] = KEY_END
        return out
    k, wt = np.concatenate(keys), np.concatenate(wts)
    order = np.argsort(k, kind="stable")
    k, cw = k[order], np.cumsum(wt[order])
    at = np.searchsorted(cw, cw[-1] * np.arange(1, w) / w, side="left")
    out[1:w] = k[np.minimum(at, k.shape[0] - 1)]
    return np.maximum.accumulate(out)


def whole_column(tots: list, has_target: bool, nt: int, target_counts):
    """The whole column's figures from its owners' totals: offsets per owner, and ``(V, n,
    missing rows, H(X), U(T | X) or None)``."""
    v = np.asarray([t["V"] for t in tots], dtype=np.int64)
    rows = np.asarray([t["rows"] for t in tots], dtype=np.int64)
    sx_d = np.asarray([t["sx"] for t in tots], dtype=np.float64)
    offs = [(int(a), int(b), float(c)) for a, b, c in zip(np.cumsum(v) - v, np.cumsum(rows) - rows,
                                                         np.concatenate([[0.0], np.cumsum(sx_d)[:-1]]))]
    n, sx = int(rows.sum()), float(sx_d.sum())
    h_x = np.float64(max(0.0, np.log2(n) - sx / n)) if n > 0 else np.float64(0.0)
    u = None
    if has_target and target_counts is not None and nt >= 2:
        h_t = float(entropy_bits_x(np.asarray(target_counts), np))
        h_t_x = (sx - sum(t["s2"] for t in tots)) / max(n, 1)
        u = np.float64(min(max((h_t - h_t_x) / h_t, 0.0), 1.0) if h_t > 0 and n > 0 else 0.0)
    return offs, int(v.sum()), n, int(sum(t["missing"] for t in tots)), h_x, u


def range_statistics(run, shards, ss, home_of_shard, homes, hs, enc, cols, has_target: bool, target_counts=None,
                     progress: bool = False):
    """The whole-table :class:`~gpuanon.metrics.ColumnStats` of numeric QIs ``cols`` (values held
    on their owners) and every home's class positions on them (``home.positions``).

    Returns ``({column: ColumnStats on the host}, target counts, info)``."""
    w, s_n = len(homes), len(shards)
    nt = max(len(enc.target_values), 1)
    stats, moved, rounds = {}, 0, 0
    secs = dict.fromkeys(("chunk", "shuffle", "domain", "queries"), 0.0)
    clock = [time.perf_counter()]

    def lap(name):
        now = time.perf_counter()
        secs[name] += now - clock[0]
        clock[0] = now
    for r0 in range(0, len(cols), COLUMNS_PER_ROUND):  # a loop over rounds of columns
        batch = list(cols[r0:r0 + COLUMNS_PER_ROUND])
        rounds += 1
        run.stage = f"whole-table statistics of {', '.join(enc.columns[j].name for j in batch)}"
        samples = run.gather([run.apply(home_of_shard[i], s, ss[i], shard_chunk, batch, nt, SAMPLES_PER_WORKER * w)
                              for i, s in enumerate(shards)])
        split = {j: choose_splitters([x[j] for x in samples], w) for j in batch}
        lap("chunk")
        pieces = {(i, d): run.apply(home_of_shard[i], s, ss[i], shard_piece, split, d)
                  for i, s in enumerate(shards) for d in range(w)}
        built = run.gather([run.apply(d, h, hs[d], owner_build, batch, nt, [pieces[(i, d)] for i in range(s_n)],
                                      home_of_shard) for d, h in enumerate(homes)])
        tots = [t for t, _ in built]
        moved += sum(b for _, b in built)
        del pieces
        run.gather([run.apply(home_of_shard[i], s, ss[i], shard_drop) for i, s in enumerate(shards)])
        if target_counts is None and has_target:
            target_counts = np.sum([t[batch[0]]["tcounts"] for t in tots], axis=0)
        lap("shuffle")
        figs = {j: whole_column([t[j] for t in tots], has_target, nt, target_counts) for j in batch}
        quant = {}
        for j in batch:  # a loop over columns
            _, v, n, miss, _, _ = figs[j]
            vp, n_present = v - int(miss > 0), n - miss
            quant[j] = (np.arange(N_BINS, dtype=np.int64) * n_present) // N_BINS if vp > N_BINS else None
        edges = run.gather([run.apply(d, h, hs[d], owner_edges, {j: figs[j][0][d] for j in batch}, quant)
                            for d, h in enumerate(homes)])
        doms = {}
        for j in batch:  # a loop over columns
            _, v, n, miss, _, _ = figs[j]
            tail = [v - 1] if miss else []
            starts = np.concatenate([e[j][0] for e in edges] + [np.asarray(tail + [v], dtype=np.int64)])
            cum = np.concatenate([e[j][1] for e in edges] + [np.asarray(([n - miss] if miss else []) + [n],
                                                                        dtype=np.int64)])
            doms[j] = NumericDomain(starts.astype(np.int64), None, np.diff(cum), quant[j] is not None, bool(miss),
                                    start_cum=cum.astype(np.int64))
        joints = {}
        if has_target and nt >= 2:
            got = run.gather([run.apply(d, h, hs[d], owner_joint, {j: doms[j].bin_start for j in batch})
                              for d, h in enumerate(homes)])
            joints = {j: np.sum([g[j] for g in got], axis=0) for j in batch}
        elif has_target:
            joints = {j: doms[j].bin_counts[:, None].astype(np.float64) for j in batch}
        for j in batch:  # a loop over columns
            _, _, _, _, h_x, u = figs[j]
            stats[j] = ColumnStats(None, None, u, h_x, doms[j], joints.get(j))
        lap("domain")
        run.stage = f"class positions on {', '.join(enc.columns[j].name for j in batch)}"
        run.gather([run.apply(d, h, hs[d], home_queries, enc, split) for d, h in enumerate(homes)])
        qp = {(d, o): run.apply(d, h, hs[d], query_piece, o) for d, h in enumerate(homes) for o in range(w)}
        run.gather([run.apply(o, h, hs[o], owner_answer, batch, [qp[(d, o)] for d in range(w)])
                    for o, h in enumerate(homes)])
        ap = {(o, d): run.apply(o, h, hs[o], answer_piece, d) for o, h in enumerate(homes) for d in range(w)}
        run.gather([run.apply(d, h, hs[d], home_take, [ap[(o, d)] for o in range(w)]) for d, h in enumerate(homes)])
        del qp, ap
        run.gather([run.apply(d, h, hs[d], owner_drop) for d, h in enumerate(homes)])
        lap("queries")
        if progress:
            log.info("dask column statistics: %d of %d value-range column(s) done (%s)", min(r0 + len(batch), len(cols)),
                     len(cols), ", ".join(enc.columns[j].name for j in batch))
    info = {"columns": [enc.columns[j].name for j in cols], "rounds": rounds, "bytes_between_workers": int(moved),
            "seconds": {k: round(v, 6) for k, v in secs.items()}}
    return stats, target_counts, info


def stats_to(st, xp):
    """A host :class:`~gpuanon.metrics.ColumnStats` of the range path on ``xp``'s device."""
    d = st.domain
    dom = dataclasses.replace(d, bin_start=to_device(d.bin_start, xp), bin_counts=to_device(d.bin_counts, xp),
                              start_cum=to_device(d.start_cum, xp))
    return st._replace(u_raw=None if st.u_raw is None else to_device(np.asarray(st.u_raw), xp),
                       h_x=to_device(np.asarray(st.h_x), xp), domain=dom,
                       joint_before=None if st.joint_before is None else to_device(st.joint_before, xp))
