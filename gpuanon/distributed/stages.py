"""The stages of a cluster run (:func:`gpuanon.distributed.mondrian.run_distributed`), one function each.

Every stage reads and extends one :class:`ClusterRun` (the shards, the plan, the encoding, the
partitions' state, the seconds and the report's ``cluster`` section): ``load_and_encode`` ->
``criteria_and_blocks`` -> ``partition_levels`` (each level: ``level_spans``, ``find_cuts``,
``regroup``) -> ``finish_on_homes`` -> ``verify_and_measure`` -> ``write_output``. The order, the
tasks and their arguments are those of the single function they were cut from.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kernels.mondrian import below_only, cut_allowed, partition_spans

from ..anonymize.plan import Plan
from ..dictionaries import combine, finalize
from ..errors import SchemaError, VerificationError
from . import tasks
from .checks import column_statistics, combine_stages, loss_before_step, suppression
from .levels import radix_select, representative_rows
from .merge import merge_shared, shared_hashes, with_shared
from .recovery import mutate_shards, place_shard, unit
from .options import bind_plan, choose_automatic, combine_optimization, frequency_tables, hierarchy_plan_of
from .worker import kernel_col_info, local_table

log = logging.getLogger("gpuanon")


@dataclass
class ClusterRun:
    """One cluster run's state, filled stage by stage (``est``: the run's options, backend and progress,
    :class:`~gpuanon.anonymize.result.RunOptions`; ``plan``: the run's plan, its roles set by the encoding)."""

    est: Any
    handle: Any
    run: tasks.Runner
    sources: list
    counts: list
    local_rows: int | None
    plan: Plan
    secs: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    # filled by the stages
    shards: list = field(default_factory=list)
    ss: list = field(default_factory=list)
    homes: list = field(default_factory=list)
    hs: list = field(default_factory=list)
    schema: Any = None
    enc: Any = None
    tables: Any = None
    crit: Any = None
    q: Any = None
    bsizes: Any = None
    bhist: Any = None
    hist_needed: bool = False
    suppressed: int = 0
    reason: str = ""
    keep_block: Any = None
    n_sa_missing: int = 0
    lr: int = 1
    group_sizes: list = field(default_factory=list)
    group_final: list = field(default_factory=list)
    n_groups: int = 0
    n_parts: int = 0
    optimization: dict | None = None
    loss_before: float | None = None  # the entropy loss of the partitions before the optimization step
    verification: Any = None
    metrics: dict | None = None
    automatic: Any = None
    levels: dict = field(default_factory=dict)  # the levels' counts and their log
    journal: list = field(default_factory=list)  # every shard's recorded changes, (fn, args), in order
    losses: dict = field(default_factory=dict)  # shard -> how many workers holding it were lost

    @property
    def W(self) -> int:
        return len(self.run.workers)  # as the run started: a worker that leaves mid-run is the Runner's to report

    @property
    def S(self) -> int:
        return len(self.sources)

    @property
    def n_total(self) -> int:
        return int(sum(self.counts))

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)

    def home_of_shard(self, i: int) -> int:
        return i % self.W

    def on_shards(self, name: str, *args) -> list:
        """``shard.name(*args)`` on every shard's worker, gathered in shard order."""
        return self.run.gather([self.run.call(self.home_of_shard(i), s, self.ss[i], name, *args)
                                for i, s in enumerate(self.shards)])

    def on_homes(self, name: str, *args) -> list:
        """``home.name(*args)`` on every worker's home, gathered in worker order."""
        return self.run.gather([self.run.call(d, h, self.hs[d], name, *args) for d, h in enumerate(self.homes)])


def load_shards(c: ClusterRun) -> None:
    """Every shard made on its worker from its source (:func:`.recovery.place_shard`)."""
    t0 = time.perf_counter()
    c.run.stage = "loading the shards"
    c.shards = [place_shard(c, i) for i in range(c.S)]
    c.ss = c.run.gather([c.run.submit(c.home_of_shard(i), tasks.serial_of, s) for i, s in enumerate(c.shards)])
    c.secs["load"] = time.perf_counter() - t0


def load_and_encode(c: ClusterRun) -> None:
    """The roles from a sample (the plan's one check of them), the global encoding and its hierarchies."""
    run, t0 = c.run, time.perf_counter()
    first = int(np.nonzero(np.asarray(c.counts) > 0)[0][0])  # the first shard with rows
    sample = run.gather([run.submit(c.home_of_shard(first), tasks.head, c.shards[first], 1000)])[0]
    c.plan = c.plan.with_roles(sample)
    schema = c.schema = c.plan.schema
    run.stage = "encoding"
    profile = combine(run.gather([run.submit(c.home_of_shard(i), tasks.profile, s, schema)
                                  for i, s in enumerate(c.shards)]))
    hplan = hierarchy_plan_of(c.plan, profile)
    enc = c.enc = finalize(profile, schema, Plan.leaf_orders(hplan))
    exact = [col.name for col in enc.columns if col.exact is not None]
    if exact and c.plan.output_format != "range":  # the workers' output pieces hold float columns
        raise SchemaError(f"quasi-identifier '{exact[0]}' holds dates or integers beyond 2**53, which a cluster run "
                          f"publishes as ranges only; use --format range, run it in one process (without --cluster) "
                          f"or declare it categorical (--categorical {exact[0]})")
    bind_plan(enc, hplan)
    del profile
    mutate_shards(c, tasks.encode, enc, schema)
    c.tables = frequency_tables(run, c.shards, c.ss, [c.home_of_shard(i) for i in range(c.S)], enc, hplan)
    bind_plan(enc, hplan, c.tables, c.plan.rho)
    c.secs["encode"] = time.perf_counter() - t0 + c.secs.pop("load", 0.0)


def criteria_and_blocks(c: ClusterRun) -> None:
    """The criteria, the whole-table checks, the blocks suppressed, the partitions kept whole here."""
    enc, pl = c.enc, c.plan
    n_sa = len(enc.sa_values)
    c.run.stage = "block statistics"
    bst = c.on_shards("block_stats", enc.n_blocks, n_sa)
    c.bsizes = np.sum([b[0] for b in bst], axis=0)
    c.bhist = np.sum([b[1] for b in bst], axis=0) if n_sa else None
    if n_sa:
        tot = c.bhist.sum(axis=0).astype(np.float64)
        c.q = tot / max(tot.sum(), 1.0)
    crit = c.crit = pl.criteria(enc.sa_ordered, enc.sa_values, c.q)
    c.n_sa_missing = 0 if crit.sa_missing is None else int(c.bhist.sum(axis=0)[crit.sa_missing])
    c.hist_needed = crit.needs_histogram and n_sa > 0
    if crit.needs_histogram:
        pl.check_whole_table(crit, c.n_total, c.bhist.sum(axis=0)[None, :], np)
    c.suppressed, c.reason, c.keep_block = suppression(pl, crit, enc, c.bsizes, c.bhist if c.hist_needed else None,
                                                       c.n_total)
    n_kept = c.n_total - c.suppressed
    c.lr = int(c.local_rows) if c.local_rows is not None else max(1, -(-n_kept // c.W))


def _new_groups(c: ClusterRun, sizes, final: bool) -> np.ndarray:
    """Number partitions that leave the levels as groups (moved whole to one worker)."""
    ids = c.n_groups + np.arange(sizes.shape[0])
    c.n_groups += int(sizes.shape[0])
    c.group_sizes.append(sizes)
    c.group_final.append(np.full(sizes.shape[0], final, dtype=bool))
    return ids


def partition_levels(c: ClusterRun) -> None:
    """Partitions larger than ``local_rows`` advance one level at a time, as in the kernel."""
    enc = c.enc
    present = np.nonzero(c.keep_block & (c.bsizes > 0))[0]
    psz = c.bsizes[present].astype(np.int64)
    stay = psz > c.lr
    block_part = np.full(enc.n_blocks, -1, dtype=np.int64)
    block_group = np.full(enc.n_blocks, -1, dtype=np.int64)
    block_part[present[stay]] = np.arange(int(stay.sum()))
    block_group[present[~stay]] = _new_groups(c, psz[~stay], False)
    sizes = psz[stay]
    hist = c.bhist[present[stay]].astype(np.int64) if c.hist_needed else None
    mutate_shards(c, "start", block_part, block_group)
    c.levels = {"levels": 0, "attempts": 0, "rounds": 0, "token": 0, "log": []}
    while sizes.shape[0] > 0:
        sizes, hist = unit(c, f"level {c.levels['levels'] + 1}", one_level, sizes, hist)


def one_level(c: ClusterRun, sizes, hist):
    """One level: spans, cuts, the shards regrouped; the next level's partitions' sizes and histograms."""
    lv, run = c.levels, c.run
    lv["levels"] += 1
    b_in, b_out = run.bytes_in, run.bytes_out
    mn, mx, span = level_spans(c, lv, sizes)
    cuts = find_cuts(c, lv, sizes, hist, mn, mx, span)
    sizes, hist, row = regroup(c, lv, sizes, hist, cuts)
    row.update(bytes_to_coordinator=run.bytes_in - b_in, bytes_from_coordinator=run.bytes_out - b_out)
    lv["log"].append(row)
    if c.est.progress:
        log.info("dask level %d: %d partition(s), %d cut, %d final, %d moved to one worker", lv["levels"],
                 row["partitions"], row["cut"], row["final"], row["to_workers"])
    return sizes, hist


def level_spans(c: ClusterRun, lv: dict, sizes):
    """Per partition, each column's smallest and largest key and categorical codes, and the spans."""
    enc = c.enc
    n_cat = [col.n_categories for col in enc.columns]
    cat_cols = [j for j, col in enumerate(enc.columns) if col.kind == "categorical"]
    c.run.stage = f"level {lv['levels']} (statistics)"
    st = c.on_shards("level_stats", int(sizes.shape[0]), cat_cols, [n_cat[j] for j in cat_cols])
    mn = np.minimum.reduce([x[0] for x in st])
    mx = np.maximum.reduce([x[1] for x in st])
    pres = {j: np.logical_or.reduce([x[2][j] for x in st]) for j in cat_cols}
    del st
    kinds = {q: c.schema.kinds[q] for q in c.schema.quasi_identifiers}
    K_rep, m_rep = representative_rows(mn, mx, pres, kinds)
    if "col_info" not in lv:  # the kernel's column specs, from the code path of one process
        lv["col_info"] = kernel_col_info(local_table(enc, np.zeros((len(kinds), 0), dtype=np.uint32), None, None,
                                                     np), np)
    span = np.asarray(partition_spans(K_rep, m_rep, col_info=lv["col_info"], n_categories=n_cat,
                                      global_range=np.asarray([col.global_range for col in enc.columns]), xp=np),
                      dtype=np.float64)
    span[sizes < 2 * c.crit.k] = 0.0
    return mn, mx, span


def find_cuts(c: ClusterRun, lv: dict, sizes, hist, mn, mx, span) -> dict:
    """Each partition's cut: the widest column with an allowed cut at its exact lower median."""
    P, relaxed, crit, run = int(sizes.shape[0]), c.plan.relaxed, c.crit, c.run
    n_sa = len(c.enc.sa_values)
    cut = {"cut": np.zeros(P, dtype=bool), "col": np.zeros(P, dtype=np.int64), "thr": np.zeros(P, dtype=np.uint64),
           "use": np.zeros(P, dtype=bool), "nl": np.zeros(P, dtype=np.int64),
           "hl": np.zeros((P, n_sa), dtype=np.int64) if c.hist_needed else None}
    pend = np.nonzero(span.max(axis=1) > 0)[0]
    while pend.shape[0] > 0:  # a loop over "next widest column" attempts
        sp = span[pend]
        col = np.argmax(sp, axis=1)
        live = sp[np.arange(pend.shape[0]), col] > 0
        pend, col = pend[live], col[live]
        if pend.shape[0] == 0:
            break
        lv["attempts"] += 1
        lv["token"] += 1
        token = lv["token"]
        lo = mn[col, pend].astype(np.uint64)
        hi = mx[col, pend].astype(np.uint64)
        if relaxed:
            lo = lo << np.uint64(32)
            hi = (hi << np.uint64(32)) | np.uint64(0xFFFFFFFF)
        run.stage = f"level {lv['levels']} (medians)"

        def count_round(prefix, shift, bits, _t=token, _p=pend, _c=col):
            return np.sum(c.on_shards("radix_counts", _t, _p, _c, relaxed, prefix, shift, bits), axis=0)

        thr, nr = radix_select(count_round, lo, hi, (sizes[pend] - 1) // 2)
        lv["rounds"] += nr
        use_lt = np.zeros(pend.shape[0], dtype=bool) if relaxed else below_only(thr, mx[col, pend].astype(np.uint64))
        run.stage = f"level {lv['levels']} (child sizes)"
        got = c.on_shards("split_counts", token, pend, col, relaxed, thr, use_lt, n_sa if c.hist_needed else 0)
        nleft = np.sum([g[0] for g in got], axis=0)
        nright = sizes[pend] - nleft
        hl = hr = None
        if c.hist_needed:
            hl = np.sum([g[1] for g in got], axis=0)
            hr = hist[pend] - hl
        ok = cut_allowed(nleft, nright, hl, hr, crit.satisfied, np)
        sel = pend[ok]
        cut["cut"][sel], cut["col"][sel], cut["thr"][sel] = True, col[ok], thr[ok]
        cut["use"][sel], cut["nl"][sel] = use_lt[ok], nleft[ok]
        if c.hist_needed:
            cut["hl"][sel] = hl[ok]
        span[pend, col] = -1.0
        pend = pend[~ok]
    return cut


def regroup(c: ClusterRun, lv: dict, sizes, hist, cut: dict):
    """Apply the level's cuts on every shard; partitions without a cut and small children leave."""
    P, n_sa = int(sizes.shape[0]), len(c.enc.sa_values)
    cidx = np.nonzero(cut["cut"])[0]
    fin = np.nonzero(~cut["cut"])[0]
    C = int(cidx.shape[0])
    cut_idx = np.full(P, -1, dtype=np.int64)
    cut_idx[cidx] = np.arange(C)
    final_group = np.full(P, -1, dtype=np.int64)
    final_group[fin] = _new_groups(c, sizes[fin], True)
    cnl = cut["nl"]
    csz = np.stack([cnl[cidx], sizes[cidx] - cnl[cidx]], axis=1).reshape(-1)
    chist = None
    if c.hist_needed:
        chl = cut["hl"]
        chist = np.stack([chl[cidx], hist[cidx] - chl[cidx]], axis=1).reshape(-1, n_sa)
    keep = csz > c.lr
    child_part = np.full(2 * C, -1, dtype=np.int64)
    child_part[keep] = np.arange(int(keep.sum()))
    child_group = np.full(2 * C, -1, dtype=np.int64)
    child_group[~keep] = _new_groups(c, csz[~keep], False)
    c.run.stage = f"level {lv['levels']} (regroup)"
    mutate_shards(c, "apply_level", cut_idx, cut["col"][cidx], c.plan.relaxed, cut["thr"][cidx], cut["use"][cidx],
                final_group, child_part, child_group)
    row = {"level": lv["levels"], "partitions": P, "cut": C, "final": int(fin.shape[0]),
           "to_workers": int((~keep).sum())}
    return csz[keep], (chist[keep] if c.hist_needed else None), row


def finish_on_homes(c: ClusterRun) -> None:
    """Move every group whole to its home; the homes finish them with the kernel; global labels."""
    t0, run, W, S, est = time.perf_counter(), c.run, c.W, c.S, c.est
    gsz = np.concatenate(c.group_sizes).astype(np.int64) if c.group_sizes else np.zeros(0, dtype=np.int64)
    gfin = np.concatenate(c.group_final) if c.group_final else np.zeros(0, dtype=bool)
    before = np.cumsum(gsz) - gsz
    tot = max(int(gsz.sum()), 1)
    home_of_group = np.minimum(W - 1, ((before + gsz / 2.0) * W // tot).astype(np.int64))
    run.stage = "moving partitions to their workers"
    pieces = {(i, d): run.call(c.home_of_shard(i), s, c.ss[i], "piece_for", home_of_group, d)
              for i, s in enumerate(c.shards) for d in range(W)}
    c.homes = [run.submit(d, tasks.make_home, d, est.backend, *[pieces[(i, d)] for i in range(S)]) for d in range(W)]
    c.hs = run.gather([run.submit(d, tasks.serial_of, h) for d, h in enumerate(c.homes)])
    workers = c.run.workers
    pairs = [(i, d) for i in range(S) for d in range(W)]
    sizes_moved = run.gather([c.handle.client.submit(lambda p: (p["nbytes"], p["source"]), pieces[(i, d)],
                                                     workers=[workers[c.home_of_shard(i)]], pure=False)
                              for i, d in pairs])
    moved = sum(nb for (nb, src), (i, d) in zip(sizes_moved, pairs) if c.home_of_shard(i) != d)
    del pieces
    run.stage = "finishing partitions on their workers"
    fin = c.on_homes("finish", gfin, c.enc, c.crit, c.plan.relaxed, c.plan.k, c.plan.optimize)
    firsts = [f for f, _ in fin]
    c.optimization = combine_optimization([o for _, o in fin]) if c.plan.optimize else None
    allf = np.concatenate(firsts)
    c.n_parts = n_parts = int(allf.shape[0])
    gid = np.empty(n_parts, dtype=np.int64)
    gid[np.argsort(allf)] = np.arange(n_parts, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum([f.shape[0] for f in firsts])])
    run.gather([run.call(d, h, c.hs[d], "set_labels", gid[bounds[d]:bounds[d + 1]]) for d, h in enumerate(c.homes)])
    run.stage = "returning labels"
    offsets = c.offsets
    lab_pieces = {(d, i): run.call(d, h, c.hs[d], "label_piece", int(offsets[i]), int(offsets[i] + c.counts[i]))
                  for d, h in enumerate(c.homes) for i in range(S)}
    run.gather([run.call(c.home_of_shard(i), s, c.ss[i], "take_labels", [lab_pieces[(d, i)] for d in range(W)])
                for i, s in enumerate(c.shards)])
    del lab_pieces
    c.secs["partition_local"] = time.perf_counter() - t0
    lv = c.levels
    c.info.update(levels=lv["levels"], attempts=lv["attempts"], radix_rounds=lv["rounds"], local_rows=c.lr,
                  n_workers=W, n_shards=S, groups=int(gsz.shape[0]), shuffle_bytes_between_workers=int(moved),
                  per_level=lv["log"], home_kernel=[None] * W)


def verify_and_measure(c: ClusterRun) -> None:
    """Class statistics, verification and class summaries on the homes; combined into the output's."""
    run, est, enc, crit = c.run, c.est, c.enc, c.crit
    c.automatic = choose_automatic(run, c.homes, c.hs, enc, c.tables, c.plan.rho)  # rho of automatic hierarchies
    t0 = time.perf_counter()
    run.stage = "class statistics and verification"
    fmt = c.plan.output_format
    vkw = dict(c.plan.verify_keywords(crit), sensitive=str(c.schema.sensitive), sa_missing=crit.sa_missing)
    col_stats, tcounts, range_stats, c.info["column_statistics"] = column_statistics(
        run, c.shards, c.ss, [c.home_of_shard(i) for i in range(c.S)], c.homes, c.hs, enc, c.n_total,
        bool(est.progress))
    c.secs["column_statistics"] = time.perf_counter() - t0
    run.stage = "class statistics and verification"
    hres = c.on_homes("stages", enc, fmt, vkw, c.q, col_stats, tcounts, range_stats)
    n_shared = int(shared_hashes(hres).shape[0])
    shared = merge_shared(run, c.homes, c.hs, hres, enc, fmt, vkw, c.q)
    verification, c.metrics = combine_stages(hres, c.plan.k, c.n_total, c.suppressed, enc, tcounts)
    c.loss_before = loss_before_step(hres, c.n_total, c.suppressed, tcounts)
    c.verification = with_shared(verification, shared)
    c.secs["stages"] = time.perf_counter() - t0
    c.info["classes_shared_by_workers"] = n_shared  # output classes finished in parts on several workers
    if not c.verification.ok:
        raise VerificationError("independent verification failed, nothing written: "
                                + "; ".join(c.verification.failures))


def write_output(c: ClusterRun, out_dir, gather: bool):
    """Each shard's worker writes its rows (a temporary directory renamed at the end), or the output
    comes back here (``gather``). Returns ``(output frame or None, file names)``."""
    t0, run, W, enc, schema = time.perf_counter(), c.run, c.W, c.enc, c.schema
    fmt = c.plan.output_format
    run.stage = "writing the output"
    output, files, offsets = None, [], c.offsets
    # without an output directory nor gather: verified, nothing to write nor to bring back
    sources_out = [] if out_dir is None and not gather else list(range(c.S))
    out_pieces = {(d, i): run.call(d, h, c.hs[d], "output_piece", int(offsets[i]), int(offsets[i] + c.counts[i]),
                                   c.home_of_shard(i) != d)
                  for d, h in enumerate(c.homes) for i in sources_out}
    tmp = None
    if out_dir is not None:
        parent = os.path.dirname(os.path.abspath(out_dir))
        tmp = os.path.join(parent, f".{os.path.basename(out_dir)}.tmp-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
        files = [f"part-{i:05d}.parquet" for i in range(c.S)]
    qis = list(schema.quasi_identifiers)
    kinds = {q: schema.kinds[q] for q in qis}
    try:
        wfuts = [run.submit(c.home_of_shard(i), tasks.write_output, s, c.ss[i], [out_pieces[(d, i)] for d in range(W)],
                            qis, kinds, enc.columns, fmt, schema.identifiers,
                            None if tmp is None else os.path.join(tmp, files[i]), tasks.output_metadata(enc, fmt))
                 for i, s in enumerate(c.shards) if i in sources_out]
        written = run.gather(wfuts)
        if out_dir is not None:
            if os.path.exists(out_dir):
                shutil.rmtree(out_dir)
            os.replace(tmp, out_dir)
            tmp = None
        elif gather:
            output = pd.concat(written, ignore_index=True)
            output.attrs["gpuanon"] = tasks.output_metadata(enc, fmt)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    c.secs["output"] = time.perf_counter() - t0
    return output, files
