"""What runs on a Dask worker: one shard of the table, and one home of whole partitions.

A :class:`Shard` is a slice of consecutive input rows (one Parquet file, or one piece of a
frame). It keeps its frame (for the output), its encoded keys and codes, every row's global row
index, and the row's current state: its active partition at this level (``part``), or the group
it will move with (``group``). Every per-level function is a whole-array chunk over the shard's
rows; the coordinator combines their small results. A :class:`Home` holds the whole groups sent
to its worker, in global row order, and finishes them with the single-node kernel.

Functions here run on the workers and take the shard (a Dask future's value, mutated in place)
as first argument; they return host arrays only.
"""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import pyarrow as pa

from kernels.counts import count_values
from kernels.mondrian import goes_left, mondrian_partition
from kernels.segmented import group_starts, segment_ids, segment_reduce

from .. import metrics as metrics_mod
from ..release import verify as verify_mod
from ..anonymize.generalize import class_values
from ..anonymize.optimize import optimize_partitions
from ..backend import get_backend, to_device, to_host, to_scalar
from ..table.cells import in_input_order, minmax_dtype
from ..release.classes import ClassStats
from ..table.encoding import Table, kernel_specs
from ..hierarchy import ColumnHierarchy
from .metrics import stats_from_counts, summary_to_host, value_target_counts
from .output import union_texts
from .ranges import stats_to

_U32_MAX = np.uint32(0xFFFFFFFF)


class Shard:
    """One worker's slice of the table (consecutive global rows ``offset .. offset + n - 1``)."""

    def __init__(self, index: int, offset: int, frame, backend):
        self.index, self.offset, self.frame, self.backend = index, int(offset), frame, backend
        self.serial = uuid.uuid4().hex  # a shard rebuilt after its worker died gets another
        self.n = int(len(frame))
        self.xp = get_backend(backend, quiet=True).xp
        self.keys = self.sa = self.target = self.blocks = None
        self.part = self.group = self.labels = None
        self._level = None
        self._attempt = None
        self.output = None
        self.steps = 0  # changes recorded by the coordinator applied so far (see tasks.step)

    # ---------------------------------------------------------------- set-up
    def set_encoded(self, enc: dict) -> None:
        xp = self.xp
        self.keys, self.sa, self.target, self.blocks = enc["keys"], enc["sa"], enc["target"], enc["blocks"]
        self.gidx = xp.arange(self.n, dtype=xp.int64) + self.offset
        self.labels = xp.full(self.n, -1, dtype=xp.int64)

    def block_stats(self, n_blocks: int, n_sa: int):
        """Chunk: rows per block and (with ``n_sa``) sensitive histograms per block."""
        xp = self.xp
        b = self.blocks if self.blocks is not None else xp.zeros(self.n, dtype=xp.int64)
        sizes = to_host(count_values(b, n_blocks, xp))
        hist = None
        if n_sa:
            hist = to_host(count_values(b * n_sa + self.sa.astype(xp.int64), n_blocks * n_sa, xp).reshape(n_blocks, n_sa))
        return sizes, hist

    def start(self, block_part, block_group) -> None:
        """Rows enter their block's first partition (or its group when it already fits a worker);
        rows of suppressed blocks get neither."""
        xp = self.xp
        b = self.blocks if self.blocks is not None else xp.zeros(self.n, dtype=xp.int64)
        self.part = to_device(np.asarray(block_part, dtype=np.int64), xp)[b]
        self.group = to_device(np.asarray(block_group, dtype=np.int64), xp)[b]
        self._level = None

    # ---------------------------------------------------------------- one level
    def _segments(self):
        """Active rows sorted by partition: (rows, starts, ids present) -- made once per level."""
        if self._level is None:
            xp = self.xp
            rows = xp.nonzero(self.part >= 0)[0]
            p = self.part[rows]
            order = xp.argsort(p, kind="stable")
            rows, sp = rows[order], p[order]
            starts = group_starts(sp, xp)
            self._level = (rows, starts, sp[starts] if rows.shape[0] else sp[:0])
        return self._level

    def level_stats(self, P: int, cat_cols, n_cats):
        """Chunk: per partition, every column's smallest and largest key and the categorical codes
        present (the span's inputs)."""
        xp = self.xp
        rows, starts, ids = self._segments()
        d = self.keys.shape[0]
        mn = np.full((d, P), _U32_MAX, dtype=np.uint32)
        mx = np.zeros((d, P), dtype=np.uint32)
        pres = {}
        if rows.shape[0]:
            K = self.keys[:, rows]
            ih = to_host(ids)
            mn[:, ih] = to_host(segment_reduce("minimum", K, starts, xp, axis=1))
            mx[:, ih] = to_host(segment_reduce("maximum", K, starts, xp, axis=1))
            sizes = xp.diff(xp.concatenate([starts, xp.full(1, rows.shape[0], dtype=xp.int64)]))
            loc = ids[segment_ids(sizes, xp, n=int(rows.shape[0]))]
            for j, nc in zip(cat_cols, n_cats):  # a loop over categorical columns
                cnt = count_values(loc * nc + K[j].astype(xp.int64), P * nc, xp)
                pres[j] = to_host(cnt.reshape(P, nc) > 0)
        else:
            for j, nc in zip(cat_cols, n_cats):
                pres[j] = np.zeros((P, nc), dtype=bool)
        return mn, mx, pres

    def _pending_rows(self, token, pend):
        """Rows of the pending partitions and each one's index into ``pend`` (kept per attempt)."""
        if self._attempt is not None and self._attempt[0] == token:
            return self._attempt[1], self._attempt[2]
        xp = self.xp
        rows, starts, ids = self._segments()
        pend_x = to_device(np.asarray(pend, dtype=np.int64), xp)
        if rows.shape[0] == 0:
            sel, loc = rows, rows
        else:
            sizes = xp.diff(xp.concatenate([starts, xp.full(1, rows.shape[0], dtype=xp.int64)]))
            pos = xp.searchsorted(pend_x, ids)  # pend is sorted
            hit = (pos < pend_x.shape[0]) & (pend_x[xp.minimum(pos, pend_x.shape[0] - 1)] == ids)
            seg_loc = xp.where(hit, pos, -1)[segment_ids(sizes, xp, n=int(rows.shape[0]))]
            keep = seg_loc >= 0
            sel, loc = rows[keep], seg_loc[keep]
        self._attempt = (token, sel, loc)
        return sel, loc

    def _select_keys(self, rows, loc, col, relaxed):
        xp = self.xp
        colx = to_device(np.asarray(col, dtype=np.int64), xp)
        v = self.keys[colx[loc], rows].astype(xp.uint64)
        if relaxed:  # ties split by global row index: the key (value, row) is unique
            v = (v << xp.uint64(32)) | self.gidx[rows].astype(xp.uint64)
        return v

    def radix_counts(self, token, pend, col, relaxed, prefix, shift: int, bits: int):
        """Chunk of one radix-selection round: per pending partition, how many of its rows whose
        key's bits above ``shift + bits`` equal ``prefix`` fall in each of the ``2**bits`` bins."""
        xp = self.xp
        rows, loc = self._pending_rows(token, pend)
        nb = 1 << bits
        if rows.shape[0] == 0:
            return np.zeros((len(pend), nb), dtype=np.int64)
        v = self._select_keys(rows, loc, col, relaxed)
        pre = to_device(np.asarray(prefix, dtype=np.uint64), xp)
        hi_shift = shift + bits
        match = (v >> xp.uint64(hi_shift)) == pre[loc] if hi_shift < 64 else xp.ones(v.shape[0], dtype=bool)
        b = ((v >> xp.uint64(shift)) & xp.uint64(nb - 1)).astype(xp.int64)
        cnt = count_values(loc * nb + b, len(pend) * nb, xp, weights=match)
        return to_host(cnt.reshape(len(pend), nb))

    def _left(self, rows, loc, col, relaxed, thr, use_lt):
        xp = self.xp
        v = self._select_keys(rows, loc, col, relaxed)
        t = to_device(np.asarray(thr, dtype=np.uint64), xp)[loc]
        if relaxed:
            return v <= t
        return goes_left(v, t, to_device(np.asarray(use_lt, dtype=bool), xp)[loc], xp)

    def split_counts(self, token, pend, col, relaxed, thr, use_lt, n_sa: int):
        """Chunk: rows of every pending partition's left child and (with ``n_sa``) its histogram."""
        xp = self.xp
        rows, loc = self._pending_rows(token, pend)
        m = len(pend)
        if rows.shape[0] == 0:
            return np.zeros(m, dtype=np.int64), (np.zeros((m, n_sa), dtype=np.int64) if n_sa else None)
        left = self._left(rows, loc, col, relaxed, thr, use_lt)
        nleft = to_host(count_values(loc, m, xp, weights=left))
        hl = None
        if n_sa:
            hl = to_host(count_values(loc * n_sa + self.sa[rows].astype(xp.int64), m * n_sa, xp,
                                      weights=left).reshape(m, n_sa))
        return nleft, hl

    def apply_level(self, cut_idx, ccol, relaxed, cthr, cuse_lt, final_group, child_part, child_group) -> None:
        """Move every active row to its child (or its final partition's group) for the next level."""
        xp = self.xp
        rows = xp.nonzero(self.part >= 0)[0]
        self._level = self._attempt = None
        if rows.shape[0] == 0:
            return
        p = self.part[rows]
        ci = to_device(np.asarray(cut_idx, dtype=np.int64), xp)[p]
        is_cut = ci >= 0
        fg = to_device(np.asarray(final_group, dtype=np.int64), xp)
        new_part = xp.full(rows.shape[0], -1, dtype=xp.int64)
        new_group = fg[p]
        if to_scalar(is_cut.any()):
            crow, cc = rows[is_cut], ci[is_cut]
            left = self._left(crow, cc, ccol, relaxed, cthr, cuse_lt)
            child = 2 * cc + (~left).astype(xp.int64)
            new_part[is_cut] = to_device(np.asarray(child_part, dtype=np.int64), xp)[child]
            new_group[is_cut] = to_device(np.asarray(child_group, dtype=np.int64), xp)[child]
        self.part[rows] = new_part
        self.group[rows] = new_group

    # ---------------------------------------------------------------- the move
    def piece_for(self, home_of_group, dest: int) -> dict:
        """The rows whose group lives on home ``dest``, in global row order (host arrays)."""
        xp = self.xp
        g = self.group
        hog = to_device(np.asarray(home_of_group, dtype=np.int64), xp)
        sel = xp.nonzero((g >= 0) & (hog[xp.maximum(g, 0)] == dest))[0]
        piece = {"gidx": self.gidx[sel], "keys": self.keys[:, sel], "group": g[sel],
                 "sa": None if self.sa is None else self.sa[sel],
                 "target": None if self.target is None else self.target[sel]}
        out = {k: (None if v is None else to_host(v)) for k, v in piece.items()}
        out["nbytes"] = int(sum(v.nbytes for v in out.values() if v is not None))
        out["source"] = self.index
        return out

    def take_labels(self, pieces) -> None:
        """Labels sent back by the homes: ``(global row indices, labels)`` pairs."""
        xp = self.xp
        for gi, lab in pieces:
            if gi.shape[0]:
                self.labels[to_device(gi - self.offset, xp)] = to_device(lab, xp)

    def labels_host(self):
        return to_host(self.labels)

    def value_counts(self, nt: int, cols):
        """Chunk of the whole-table column statistics of QIs ``cols`` (see :mod:`.metrics`)."""
        rows = to_device(np.asarray(list(cols), dtype=np.int64), self.xp)  # a counted copy of the column ids
        return value_target_counts(self.keys[rows], self.target, nt, self.xp)

    def build_output(self, pieces, qis, kinds: dict, columns, fmt: str, identifiers):
        """This shard's anonymized rows, in input order: its own columns, QIs replaced by the
        generalized values the homes sent back (``(global rows, {column: values})`` pieces)."""
        gi = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, dtype=np.int64)
        order = np.argsort(gi, kind="stable")
        kept = gi[order] - self.offset
        df = self.frame
        by_col = {c.name: c for c in columns}
        new = {}
        for name in (pieces[0][1] if pieces else {}):
            kind = pieces[0][1][name][0]
            if kind == "text":  # each home's codes into its own dictionary: one dictionary here
                new[name] = union_texts([p[1][name] for p in pieces], order)
                continue
            vals = np.concatenate([p[1][name][1] for p in pieces])[order]
            base = name[:-4] if name.endswith(("_min", "_max")) and name[:-4] in by_col else name
            col = by_col.get(base)
            if fmt == "minmax" and col is not None and col.kind == "numeric":
                new[name] = vals.astype(minmax_dtype(col, df[base].dtype))
            else:
                new[name] = vals.astype(np.float64)
        whole = len(kept) == len(df)
        frames = in_input_order(df.columns, new, qis, set(identifiers or ()),
                                lambda c: (df[c] if whole else df[c].take(kept)).reset_index(drop=True))
        return pd.DataFrame(frames, columns=list(frames), copy=False)


def local_table(enc, keys, sa, target, xp):
    """A :class:`~gpuanon.table.encoding.Table` over some rows, with the whole table's dictionaries and
    its bound hierarchies (on ``xp``'s device)."""
    t = Table.of(enc, {"keys": keys, "blocks": None, "sa": sa, "target": target}, xp)
    bound = enc.hierarchies
    if bound:
        t.bind_hierarchies({c: ColumnHierarchy(b.hierarchy, to_device(b.code_levels, xp)) for c, b in bound.items()})
    return t


def kernel_col_info(table, xp):
    """The kernel's per-column description, from the code path the single-process estimator uses."""
    return kernel_specs(table, xp)


class Home:
    """Whole groups of rows sent to one worker, in global row order, finished there."""

    def __init__(self, index: int, pieces, backend):
        self.index, self.backend = index, backend
        self.serial = uuid.uuid4().hex
        xp = self.xp = get_backend(backend, quiet=True).xp
        pieces = sorted(pieces, key=lambda p: p["source"])  # shards hold consecutive global rows
        self.received_bytes = int(sum(p["nbytes"] for p in pieces))
        self.remote_bytes = 0
        cat = np.concatenate
        self.gidx = to_device(cat([p["gidx"] for p in pieces]), xp)
        self.keys = to_device(cat([p["keys"] for p in pieces], axis=1), xp)
        self.group = to_device(cat([p["group"] for p in pieces]), xp)
        self.sa = None if pieces[0]["sa"] is None else to_device(cat([p["sa"] for p in pieces]), xp)
        self.target = None if pieces[0]["target"] is None else to_device(cat([p["target"] for p in pieces]), xp)
        self.n = int(self.gidx.shape[0])
        self.local = self.labels = None
        self.n_classes = 0
        self.before = None  # (labels, partitions) before the optimization step, when it ran with a target
        self.info = {}

    def finish(self, group_final, enc, crit, relaxed: bool, k: int, optimize: bool = False):
        """Partition the groups that are not final with the single-node kernel, then (``optimize``)
        run the optimization step on this home's partitions (each one is whole here; with a target
        the partitions before it are kept, ``before``, for the entropy loss the step saved); number
        every class of this home by its smallest global row index. Returns those indices (host,
        sorted) and the optimization step's counts (None without it)."""
        xp = self.xp
        lab = xp.full(self.n, -1, dtype=xp.int64)
        if self.n == 0:
            self.local, self.n_classes = lab, 0
            return np.zeros(0, dtype=np.int64), None
        fin = to_device(np.asarray(group_final, dtype=bool), xp)[self.group]
        act = xp.nonzero(~fin)[0]
        m1 = 0
        if act.shape[0]:
            table = local_table(enc, self.keys[:, :0], None, None, xp)
            crit_x = crit.with_q(None if crit.q is None else to_device(crit.q, xp))
            needs = crit_x.needs_histogram
            lab_a, m1, info = mondrian_partition(
                self.keys[:, act], col_info=kernel_col_info(table, xp),
                n_categories=[c.n_categories for c in enc.columns],
                global_range=np.asarray([c.global_range for c in enc.columns]),
                k=int(k), allowed=crit_x.satisfied, blocks=self.group[act],
                sa=self.sa[act] if needs else None, n_sa=len(enc.sa_values) if needs else 0,
                relaxed=relaxed, xp=xp)
            lab[act] = lab_a
            self.info = dict(info)
        frows = xp.nonzero(fin)[0]
        n_parts = m1
        if frows.shape[0]:
            _, inv = xp.unique(self.group[frows], return_inverse=True)
            lab[frows] = m1 + inv.reshape(-1)
            n_parts += int(inv.max()) + 1
        opt = None
        if optimize:  # partition-local: rows in global order, so exact classes as in one process

            crit_x = crit.with_q(None if crit.q is None else to_device(crit.q, xp))
            if self.target is not None:  # the classes before the step: the report's entropy loss before it
                self.before = (lab, n_parts)
            lab, _, opt = optimize_partitions(local_table(enc, self.keys, self.sa, None, xp), lab, n_parts, crit_x, xp)
        order = xp.argsort(lab, kind="stable")
        starts = group_starts(lab[order], xp)
        first_pos = order[starts]  # rows are in global order: a class's first row is its smallest
        m = int(first_pos.shape[0])
        rank = xp.argsort(first_pos)
        relabel = xp.empty(m, dtype=xp.int64)
        relabel[rank] = xp.arange(m, dtype=xp.int64)
        self.local = relabel[lab]
        self.n_classes = m
        return to_host(self.gidx[first_pos[rank]]), opt

    def set_labels(self, global_ids) -> None:
        self.labels = to_device(np.asarray(global_ids, dtype=np.int64), self.xp)[self.local]

    def label_piece(self, lo: int, hi: int):
        """``(global row indices, labels)`` of this home's rows in ``[lo, hi)`` (one origin shard)."""
        xp = self.xp
        a, b = to_host(xp.searchsorted(self.gidx, to_device(np.array([lo, hi], dtype=np.int64), xp))).tolist()
        return to_host(self.gidx[a:b]), to_host(self.labels[a:b])

    # ---------------------------------------------------------------- stages
    def class_stats(self, enc):
        """This home's :class:`~gpuanon.release.classes.ClassStats` (made once; its table has the whole
        table's dictionaries)."""
        if getattr(self, "_cs", None) is None:
            self._cs = ClassStats(local_table(enc, self.keys, self.sa, self.target, self.xp), self.local,
                                  self.n_classes)
        return self._cs

    def class_sets(self, enc) -> list:
        """The labellings whose class summaries the metrics read: this home's output classes and,
        when kept (``before``), its partitions before the optimization step (one table, made once)."""
        out = [self.class_stats(enc)]
        if self.before is not None:
            if getattr(self, "_cs_before", None) is None:
                self._cs_before = ClassStats(out[0].table, *self.before)
            out.append(self._cs_before)
        return out

    def stages(self, enc, fmt: str, verify_kw: dict, q, col_stats: dict, target_counts=None,
               range_stats=None):
        """Class statistics, verification of the published cells and the metrics' per-class parts,
        for this home's classes (each one whole here). Returns small host results.

        ``col_stats``: per QI the whole table's ``(values, rows per target)`` (see :mod:`.metrics`);
        ``range_stats``: per other QI its :class:`~gpuanon.metrics.ColumnStats` from the value
        ranges, with every class's positions already here (see :mod:`.ranges`). With them the home's
        class summary is the single-process one's share.
        """
        xp = self.xp
        if self.n == 0:
            self.values = {}
            return None
        cs = self.class_stats(enc)
        table = cs.table
        for j, (vals, ct) in col_stats.items():  # a loop over columns
            table.column_stats[j] = stats_from_counts(vals, ct, target_counts, self.target is not None,
                                                      enc.columns[j].kind == "numeric", xp)
        for j, st in (range_stats or {}).items():  # a loop over columns
            table.column_stats[j] = stats_to(st, xp)
        # the output's classes, then (optimization step) the partitions before it: each one's summary
        positions = getattr(self, "positions", None) or {}  # per class set (see .ranges)
        sums = [summary_to_host(metrics_mod.summary_from_labels(table, s.row_class, s.n_classes, stats=s,
                                                                positions=positions.get(i)))
                for i, s in enumerate(self.class_sets(enc))]
        summary, before = sums[0], (sums[1] if len(sums) > 1 else None)
        self.positions = self.before = self._cs_before = None
        cells = cs.published_cells(fmt)
        sa = qx = None
        if self.sa is not None and verify_kw.get("_has_sa", True):
            sa, qx = self.sa, q
        kw = {k: v for k, v in verify_kw.items() if not k.startswith("_")}
        res = verify_mod.verify_encoded(cs.row_pos, cells, sa, qx, xp=xp, **kw)
        # one hash per class of its tuple of published cells: classes of different homes that
        # publish the same cells are one output class (found by the coordinator)
        h = xp.zeros(cs.n, dtype=xp.uint64)
        for c in cells:  # a loop over columns
            h = verify_mod.splitmix64(h ^ c.astype(xp.uint64), xp)
        sizes = cs.sizes
        out = {"verify": res, "hash": to_host(h), "sizes": to_host(sizes), "summary": summary,
               "summary_before": before}

        self.values = {}
        for name, v in class_values(cs, fmt).items():  # text: a dictionary and a code per class
            if v.dtype == object:
                codes, uniq = pd.factorize(pd.Series(v, dtype=object), use_na_sentinel=True)
                self.values[name] = ("text", codes.astype(np.int32), np.asarray(uniq, dtype=object))
            else:
                self.values[name] = ("number", v, None)
        self.row_pos = to_host(cs.row_pos)
        return out

    def output_piece(self, lo: int, hi: int, remote: bool = False):
        """Generalized QI values of this home's rows in ``[lo, hi)``: ``(global rows, {column: values})``.

        A text column is ``("text", codes, dictionary)``: for a shard on this worker the home's own
        dictionary (shared, not copied); for one on another worker (``remote``) only the texts the
        rows use, as an Arrow array (it travels as buffers, not as one Python object per text)."""
        gi, _ = self.label_piece(lo, hi)
        xp = self.xp
        a = int(to_scalar(xp.searchsorted(self.gidx, xp.full(1, lo, dtype=xp.int64))))
        pos = self.row_pos[a:a + gi.shape[0]]
        out = {}
        for c, (kind, v, uniq) in self.values.items():  # a loop over columns
            v = v[pos]
            if kind == "text" and remote:  # only the texts these rows use (renumbered by a lookup, no sort)
                seen = np.zeros(len(uniq) + 1, dtype=bool)
                seen[v] = True  # code -1 (missing) marks the extra last slot
                used = np.flatnonzero(seen[:-1])
                lut = np.full(len(uniq) + 1, -1, dtype=np.int32)
                lut[used] = np.arange(used.shape[0], dtype=np.int32)
                v = lut[v]
                uniq = pa.array(uniq[used], type=pa.string())
            out[c] = (kind, v, uniq)
        return gi, out
