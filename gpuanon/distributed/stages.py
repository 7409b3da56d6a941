"""The stages of a cluster run (:func:`gpuanon.distributed.mondrian.run_on`), one function each.

Each stage reads the open :class:`~.context.Cluster` and the values of the stages before it and
returns a frozen value of what it made (:mod:`.values`): ``load_shards`` -> ``load_and_encode``
(:class:`~.values.Encoded`) -> ``criteria_and_blocks`` (:class:`~.values.Blocks`) ->
``partition_levels`` (:class:`~.values.Partitioned`; each level: ``level_spans``, ``find_cuts``,
``regroup``) -> ``finish_on_homes`` (:class:`~.values.Homes`) -> ``verify_and_measure``
(:class:`~.values.Measured`) -> ``write_output`` (:class:`~.values.Written`). The order, the tasks
and their arguments are those of the single function they were cut from.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
import uuid

import numpy as np
import pandas as pd

from kernels.mondrian import below_only, cut_allowed, partition_spans

from ..anonymize.plan import Plan
from ..table.dictionaries import combine, finalize
from ..errors import SchemaError, VerificationError
from . import tasks
from .checks import column_statistics, combine_stages, loss_before_step, suppression
from .context import Cluster
from .levels import radix_select, representative_rows
from .merge import merge_shared, shared_hashes, with_shared
from .options import bind_plan, choose_automatic, combine_optimization, frequency_tables, hierarchy_plan_of
from .recovery import mutate_shards, place_shard, unit
from .values import Blocks, Cuts, Encoded, Groups, Homes, Levels, Measured, Partitioned, Written
from .worker import kernel_col_info, local_table

log = logging.getLogger("gpuanon")


def load_shards(cluster: Cluster) -> float:
    """Every shard made on its worker from its source (:func:`.recovery.place_shard`); the seconds."""
    t0, run = time.perf_counter(), cluster.runner
    run.stage = "loading the shards"
    cluster.shards = [place_shard(cluster, i) for i in range(cluster.n_shards)]
    cluster.serials = run.gather([run.submit(cluster.slot_of_shard(i), tasks.serial_of, s)
                                  for i, s in enumerate(cluster.shards)])
    return time.perf_counter() - t0


def load_and_encode(cluster: Cluster, plan: Plan) -> Encoded:
    """The roles from a sample (the plan's one check of them), the global encoding and its hierarchies."""
    run, t0 = cluster.runner, time.perf_counter()
    first = int(np.nonzero(np.asarray(cluster.counts) > 0)[0][0])  # the first shard with rows
    sample = run.gather([run.submit(cluster.slot_of_shard(first), tasks.head, cluster.shards[first], 1000)])[0]
    plan = plan.with_roles(sample)
    schema = plan.schema
    run.stage = "encoding"
    profile = combine(run.gather([run.submit(cluster.slot_of_shard(i), tasks.profile, s, schema)
                                  for i, s in enumerate(cluster.shards)]))
    hplan = hierarchy_plan_of(plan, profile)
    enc = finalize(profile, schema, Plan.leaf_orders(hplan))
    exact = [col.name for col in enc.columns if col.exact is not None]
    if exact and plan.output_format != "range":  # the workers' output pieces hold float columns
        raise SchemaError(f"quasi-identifier '{exact[0]}' holds dates or integers beyond 2**53, which a cluster run "
                          f"publishes as ranges only; use --format range, run it in one process (without --cluster) "
                          f"or declare it categorical (--categorical {exact[0]})")
    bind_plan(enc, hplan)
    del profile
    mutate_shards(cluster, tasks.encode, enc, schema)
    tables = frequency_tables(run, cluster.shards, cluster.serials, cluster.shard_slots(), enc, hplan)
    bind_plan(enc, hplan, tables, plan.rho)
    return Encoded(plan, enc, tables, time.perf_counter() - t0)


def criteria_and_blocks(cluster: Cluster, encoded: Encoded, local_rows: int | None) -> Blocks:
    """The criteria, the whole-table checks, the blocks suppressed, the partitions kept whole here."""
    enc, pl, n_rows = encoded.encoding, encoded.plan, cluster.n_rows
    n_sa = len(enc.sa_values)
    cluster.runner.stage = "block statistics"
    bst = cluster.on_shards("block_stats", enc.n_blocks, n_sa)
    sizes = np.sum([b[0] for b in bst], axis=0)
    hists = np.sum([b[1] for b in bst], axis=0) if n_sa else None
    q = None
    if n_sa:
        tot = hists.sum(axis=0).astype(np.float64)
        q = tot / max(tot.sum(), 1.0)
    crit = pl.criteria(enc.sa_ordered, enc.sa_values, q)
    sa_missing = 0 if crit.sa_missing is None else int(hists.sum(axis=0)[crit.sa_missing])
    needed = crit.needs_histogram and n_sa > 0
    if crit.needs_histogram:
        pl.check_whole_table(crit, n_rows, hists.sum(axis=0)[None, :], np)
    suppressed, reason, kept = suppression(pl, crit, enc, sizes, hists if needed else None, n_rows)
    n_kept = n_rows - suppressed
    local = int(local_rows) if local_rows is not None else max(1, -(-n_kept // cluster.slots))
    return Blocks(crit, sizes, hists, q, needed, suppressed, reason, kept, sa_missing, local)


def partition_levels(cluster: Cluster, encoded: Encoded, blocks: Blocks) -> Partitioned:
    """Partitions larger than ``local_rows`` advance one level at a time, as in the kernel (each level
    one :func:`.recovery.unit`: redone from the same :class:`~.values.Levels` after a lost worker)."""
    enc, bsizes = encoded.encoding, blocks.block_sizes
    present = np.nonzero(blocks.kept & (bsizes > 0))[0]
    psz = bsizes[present].astype(np.int64)
    stay = psz > blocks.local_rows
    block_part = np.full(enc.n_blocks, -1, dtype=np.int64)
    block_group = np.full(enc.n_blocks, -1, dtype=np.int64)
    block_part[present[stay]] = np.arange(int(stay.sum()))
    groups, block_group[present[~stay]] = Groups().added(psz[~stay], False)
    hist = blocks.block_histograms[present[stay]].astype(np.int64) if blocks.histograms_needed else None
    mutate_shards(cluster, "start", block_part, block_group)
    levels = Levels(psz[stay], hist, groups)
    col_info = None
    if levels.open_sizes.shape[0] > 0:  # the kernel's column specs, from the code path of one process
        empty = np.zeros((len(encoded.schema.quasi_identifiers), 0), dtype=np.uint32)
        col_info = kernel_col_info(local_table(enc, empty, None, None, np), np)
    while levels.open_sizes.shape[0] > 0:
        levels = unit(cluster, f"level {levels.levels + 1}", one_level, encoded, blocks, col_info, levels)
    return Partitioned(levels.groups, levels.levels, levels.attempts, levels.radix_rounds, levels.per_level)


def one_level(cluster: Cluster, encoded: Encoded, blocks: Blocks, col_info, levels: Levels) -> Levels:
    """One level: spans, cuts, the shards regrouped; the next level's open partitions."""
    run, number = cluster.runner, levels.levels + 1
    b_in, b_out = run.bytes_in, run.bytes_out
    mn, mx, span = level_spans(cluster, encoded, blocks, col_info, number, levels.open_sizes)
    cuts = find_cuts(cluster, encoded, blocks, levels, number, mn, mx, span)
    levels, row = regroup(cluster, encoded, blocks, levels, number, cuts)
    row.update(bytes_to_coordinator=run.bytes_in - b_in, bytes_from_coordinator=run.bytes_out - b_out)
    if cluster.options.progress:
        log.info("dask level %d: %d partition(s), %d cut, %d final, %d moved to one worker", number,
                 row["partitions"], row["cut"], row["final"], row["to_workers"])
    return dataclasses.replace(levels, per_level=levels.per_level + (row,))


def level_spans(cluster: Cluster, encoded: Encoded, blocks: Blocks, col_info, number: int, sizes):
    """Per partition, each column's smallest and largest key and categorical codes, and the spans."""
    enc, schema = encoded.encoding, encoded.schema
    n_cat = [col.n_categories for col in enc.columns]
    cat_cols = [j for j, col in enumerate(enc.columns) if col.kind == "categorical"]
    cluster.runner.stage = f"level {number} (statistics)"
    st = cluster.on_shards("level_stats", int(sizes.shape[0]), cat_cols, [n_cat[j] for j in cat_cols])
    mn = np.minimum.reduce([x[0] for x in st])
    mx = np.maximum.reduce([x[1] for x in st])
    pres = {j: np.logical_or.reduce([x[2][j] for x in st]) for j in cat_cols}
    del st
    kinds = {q: schema.kinds[q] for q in schema.quasi_identifiers}
    K_rep, m_rep = representative_rows(mn, mx, pres, kinds)
    span = np.asarray(partition_spans(K_rep, m_rep, col_info=col_info, n_categories=n_cat,
                                      global_range=np.asarray([col.global_range for col in enc.columns]), xp=np),
                      dtype=np.float64)
    span[sizes < 2 * blocks.criteria.k] = 0.0
    return mn, mx, span


def find_cuts(cluster: Cluster, encoded: Encoded, blocks: Blocks, levels: Levels, number: int, mn, mx,
              span) -> Cuts:
    """Each partition's cut: the widest column with an allowed cut at its exact lower median (``span``
    is used up: each column tried is marked -1)."""
    sizes, hist = levels.open_sizes, levels.open_histograms
    P, relaxed, crit, run = int(sizes.shape[0]), encoded.plan.relaxed, blocks.criteria, cluster.runner
    n_sa, needed = len(encoded.encoding.sa_values), blocks.histograms_needed
    cut, cut_col = np.zeros(P, dtype=bool), np.zeros(P, dtype=np.int64)
    cut_thr, cut_use, cut_nl = np.zeros(P, dtype=np.uint64), np.zeros(P, dtype=bool), np.zeros(P, dtype=np.int64)
    cut_hl = np.zeros((P, n_sa), dtype=np.int64) if needed else None
    attempts, rounds = levels.attempts, levels.radix_rounds
    pend = np.nonzero(span.max(axis=1) > 0)[0]
    while pend.shape[0] > 0:  # a loop over "next widest column" attempts
        sp = span[pend]
        col = np.argmax(sp, axis=1)
        live = sp[np.arange(pend.shape[0]), col] > 0
        pend, col = pend[live], col[live]
        if pend.shape[0] == 0:
            break
        attempts += 1  # this attempt's number names its median search on the shards
        lo = mn[col, pend].astype(np.uint64)
        hi = mx[col, pend].astype(np.uint64)
        if relaxed:
            lo = lo << np.uint64(32)
            hi = (hi << np.uint64(32)) | np.uint64(0xFFFFFFFF)
        run.stage = f"level {number} (medians)"

        def count_round(prefix, shift, bits, _t=attempts, _p=pend, _c=col):
            return np.sum(cluster.on_shards("radix_counts", _t, _p, _c, relaxed, prefix, shift, bits), axis=0)

        thr, nr = radix_select(count_round, lo, hi, (sizes[pend] - 1) // 2)
        rounds += nr
        use_lt = np.zeros(pend.shape[0], dtype=bool) if relaxed else below_only(thr, mx[col, pend].astype(np.uint64))
        run.stage = f"level {number} (child sizes)"
        got = cluster.on_shards("split_counts", attempts, pend, col, relaxed, thr, use_lt, n_sa if needed else 0)
        nleft = np.sum([g[0] for g in got], axis=0)
        nright = sizes[pend] - nleft
        hl = hr = None
        if needed:
            hl = np.sum([g[1] for g in got], axis=0)
            hr = hist[pend] - hl
        ok = cut_allowed(nleft, nright, hl, hr, crit.satisfied, np)
        sel = pend[ok]
        cut[sel], cut_col[sel], cut_thr[sel], cut_use[sel], cut_nl[sel] = True, col[ok], thr[ok], use_lt[ok], nleft[ok]
        if needed:
            cut_hl[sel] = hl[ok]
        span[pend, col] = -1.0
        pend = pend[~ok]
    return Cuts(cut, cut_col, cut_thr, cut_use, cut_nl, cut_hl, attempts, rounds)


def regroup(cluster: Cluster, encoded: Encoded, blocks: Blocks, levels: Levels, number: int, cuts: Cuts):
    """Apply the level's cuts on every shard; partitions without a cut and small children leave.
    Returns the next :class:`~.values.Levels` (without this level's row) and the level's row."""
    sizes, hist, needed = levels.open_sizes, levels.open_histograms, blocks.histograms_needed
    P, n_sa = int(sizes.shape[0]), len(encoded.encoding.sa_values)
    cidx = np.nonzero(cuts.cut)[0]
    fin = np.nonzero(~cuts.cut)[0]
    C = int(cidx.shape[0])
    cut_idx = np.full(P, -1, dtype=np.int64)
    cut_idx[cidx] = np.arange(C)
    final_group = np.full(P, -1, dtype=np.int64)
    groups, final_group[fin] = levels.groups.added(sizes[fin], True)
    cnl = cuts.left_sizes
    csz = np.stack([cnl[cidx], sizes[cidx] - cnl[cidx]], axis=1).reshape(-1)
    chist = None
    if needed:
        chl = cuts.left_histograms
        chist = np.stack([chl[cidx], hist[cidx] - chl[cidx]], axis=1).reshape(-1, n_sa)
    keep = csz > blocks.local_rows
    child_part = np.full(2 * C, -1, dtype=np.int64)
    child_part[keep] = np.arange(int(keep.sum()))
    child_group = np.full(2 * C, -1, dtype=np.int64)
    groups, child_group[~keep] = groups.added(csz[~keep], False)
    cluster.runner.stage = f"level {number} (regroup)"
    mutate_shards(cluster, "apply_level", cut_idx, cuts.column[cidx], encoded.plan.relaxed, cuts.threshold[cidx],
                  cuts.below_only[cidx], final_group, child_part, child_group)
    row = {"level": number, "partitions": P, "cut": C, "final": int(fin.shape[0]), "to_workers": int((~keep).sum())}
    return Levels(csz[keep], chist[keep] if needed else None, groups, number, cuts.attempts, cuts.radix_rounds,
                  levels.per_level), row


def finish_on_homes(cluster: Cluster, encoded: Encoded, blocks: Blocks, partitioned: Partitioned) -> Homes:
    """Move every group whole to its home; the homes finish them with the kernel; global labels."""
    t0, run, W, S = time.perf_counter(), cluster.runner, cluster.slots, cluster.n_shards
    plan, shards, serials = encoded.plan, cluster.shards, cluster.serials
    gsz, gfin = partitioned.groups.all_sizes(), partitioned.groups.all_final()
    before = np.cumsum(gsz) - gsz
    tot = max(int(gsz.sum()), 1)
    home_of_group = np.minimum(W - 1, ((before + gsz / 2.0) * W // tot).astype(np.int64))
    run.stage = "moving partitions to their workers"
    pieces = {(i, d): run.call(cluster.slot_of_shard(i), s, serials[i], "piece_for", home_of_group, d)
              for i, s in enumerate(shards) for d in range(W)}
    futures = tuple(run.submit(d, tasks.make_home, d, cluster.options.backend, *[pieces[(i, d)] for i in range(S)])
                    for d in range(W))
    homes = Homes(futures, tuple(run.gather([run.submit(d, tasks.serial_of, h) for d, h in enumerate(futures)])),
                  0, None, int(gsz.shape[0]), 0, 0.0)
    workers = run.workers
    pairs = [(i, d) for i in range(S) for d in range(W)]
    sizes_moved = run.gather([cluster.handle.client.submit(lambda p: (p["nbytes"], p["source"]), pieces[(i, d)],
                                                           workers=[workers[cluster.slot_of_shard(i)]], pure=False)
                              for i, d in pairs])
    moved = sum(nb for (nb, src), (i, d) in zip(sizes_moved, pairs) if cluster.slot_of_shard(i) != d)
    del pieces
    run.stage = "finishing partitions on their workers"
    fin = cluster.on_homes(homes, "finish", gfin, encoded.encoding, blocks.criteria, plan.relaxed, plan.k,
                           plan.optimize)
    firsts = [f for f, _ in fin]
    optimization = combine_optimization([o for _, o in fin]) if plan.optimize else None
    allf = np.concatenate(firsts)
    n_parts = int(allf.shape[0])
    gid = np.empty(n_parts, dtype=np.int64)
    gid[np.argsort(allf)] = np.arange(n_parts, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum([f.shape[0] for f in firsts])])
    run.gather([run.call(d, h, homes.serials[d], "set_labels", gid[bounds[d]:bounds[d + 1]])
                for d, h in enumerate(futures)])
    run.stage = "returning labels"
    offsets, counts = cluster.offsets, cluster.counts
    lab_pieces = {(d, i): run.call(d, h, homes.serials[d], "label_piece", int(offsets[i]), int(offsets[i] + counts[i]))
                  for d, h in enumerate(futures) for i in range(S)}
    run.gather([run.call(cluster.slot_of_shard(i), s, serials[i], "take_labels", [lab_pieces[(d, i)] for d in range(W)])
                for i, s in enumerate(shards)])
    del lab_pieces
    return dataclasses.replace(homes, n_partitions=n_parts, optimization=optimization,
                               bytes_between_workers=int(moved), seconds=time.perf_counter() - t0)


def verify_and_measure(cluster: Cluster, encoded: Encoded, blocks: Blocks, homes: Homes) -> Measured:
    """Class statistics, verification and class summaries on the homes; combined into the output's.
    The automatic hierarchies chosen here are bound into a copy of the encoding (:attr:`Measured.encoding`)."""
    run, plan, crit = cluster.runner, encoded.plan, blocks.criteria
    enc = dataclasses.replace(encoded.encoding, hierarchies=dict(encoded.encoding.hierarchies or {}))
    hfut, hser = homes.futures, homes.serials
    automatic = choose_automatic(run, hfut, hser, enc, encoded.frequency_tables, plan.rho)  # rho of automatic ones
    t0 = time.perf_counter()
    run.stage = "class statistics and verification"
    fmt, n_rows = plan.output_format, cluster.n_rows
    vkw = dict(plan.verify_keywords(crit), sensitive=str(encoded.schema.sensitive), sa_missing=crit.sa_missing)
    col_stats, tcounts, range_stats, stats_info = column_statistics(
        run, cluster.shards, cluster.serials, cluster.shard_slots(), hfut, hser, enc, n_rows,
        bool(cluster.options.progress))
    stats_seconds = time.perf_counter() - t0
    run.stage = "class statistics and verification"
    q = blocks.sensitive_distribution
    hres = cluster.on_homes(homes, "stages", enc, fmt, vkw, q, col_stats, tcounts, range_stats)
    n_shared = int(shared_hashes(hres).shape[0])  # output classes finished in parts on several workers
    shared = merge_shared(run, hfut, hser, hres, enc, fmt, vkw, q)
    verification, metrics = combine_stages(hres, plan.k, n_rows, blocks.suppressed, enc, tcounts)
    loss_before = loss_before_step(hres, n_rows, blocks.suppressed, tcounts)
    verification = with_shared(verification, shared)
    if not verification.ok:
        raise VerificationError("independent verification failed, nothing written: "
                                + "; ".join(verification.failures))
    return Measured(enc, automatic, verification, metrics, loss_before, stats_info, n_shared, stats_seconds,
                    time.perf_counter() - t0)


def write_output(cluster: Cluster, encoded: Encoded, measured: Measured, homes: Homes, out_dir,
                 gather: bool) -> Written:
    """Each shard's worker writes its rows (a temporary directory renamed at the end), or the output
    comes back here (``gather``)."""
    t0, run, W, S = time.perf_counter(), cluster.runner, cluster.slots, cluster.n_shards
    enc, schema, fmt = measured.encoding, encoded.schema, encoded.plan.output_format
    run.stage = "writing the output"
    output, files, offsets, counts = None, [], cluster.offsets, cluster.counts
    # without an output directory nor gather: verified, nothing to write nor to bring back
    sources_out = [] if out_dir is None and not gather else list(range(S))
    out_pieces = {(d, i): run.call(d, h, homes.serials[d], "output_piece", int(offsets[i]),
                                   int(offsets[i] + counts[i]), cluster.slot_of_shard(i) != d)
                  for d, h in enumerate(homes.futures) for i in sources_out}
    tmp = None
    if out_dir is not None:
        parent = os.path.dirname(os.path.abspath(out_dir))
        tmp = os.path.join(parent, f".{os.path.basename(out_dir)}.tmp-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
        files = [f"part-{i:05d}.parquet" for i in range(S)]
    qis = list(schema.quasi_identifiers)
    kinds = {q: schema.kinds[q] for q in qis}
    try:
        wfuts = [run.submit(cluster.slot_of_shard(i), tasks.write_output, s, cluster.serials[i],
                            [out_pieces[(d, i)] for d in range(W)], qis, kinds, enc.columns, fmt, schema.identifiers,
                            None if tmp is None else os.path.join(tmp, files[i]), tasks.output_metadata(enc, fmt))
                 for i, s in enumerate(cluster.shards) if i in sources_out]
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
    return Written(output, files, time.perf_counter() - t0)
