"""Distributed Mondrian on Dask: the same partitions, output and report as one process.

The rows are sharded across the workers (one shard per Parquet file, read by the worker itself,
or per piece of a frame scattered from here); every row carries its global row index. Then:

1. **Encode** (:mod:`.encode`): the global dictionaries are chunk / combine / finalize
   reductions; each worker encodes its shard with them. A user hierarchy (:mod:`.options`) is
   validated against the column's values over every shard, its leaf order is the column's code
   order, and it is bound to those codes once and travels in the encoding: the spans below, the
   homes' kernel, the published cells, verification and metrics read it as one process does.
2. **Levels**: all partitions larger than ``local_rows`` advance one level at a time, exactly as
   in :func:`kernels.mondrian.mondrian_partition`. Per level the workers return, per partition,
   each column's smallest and largest key and the categorical codes present; the coordinator
   combines them and takes the spans with the kernel's own :func:`~kernels.mondrian.partition_spans`
   (on one representative row per value, which gives the same spans). Along the widest column
   the exact lower median is found by radix selection: per round every worker counts, per
   partition, its keys in 256 bins of the next 8 bits among those matching the prefix found so
   far (the bits shared by the partition's smallest and largest key are skipped); the summed
   counts fix the next 8 bits of the median. Never sampling. In relaxed mode the selected key is
   ``(value << 32) | global row`` (ties split by row index, as the kernel does). The children's
   sizes and sensitive histograms are one more reduction; the criteria run here on them; a
   partition without an allowed cut tries the next widest column, as in the kernel.
3. **Move**: a partition of at most ``local_rows`` rows (and any final one) becomes a *group*;
   groups are spread over the workers in balanced runs and every shard sends each group's rows
   to its home (Dask moves the pieces between workers). A home holds whole groups in global row
   order and finishes the open ones with the single-node kernel (rows start together per group,
   so the kernel numbers and cuts them as one process would). The optimization step is
   partition-local: with ``optimize`` each home runs it on its whole partitions, and the homes'
   counts are summed.
4. **Labels**: each home numbers its classes by their smallest global row; the coordinator
   merges these first rows (one integer per class) into the global numbering; labels go back to
   the shards that own the rows.
5. **Stages**: class statistics, verification (of the published cells, per home: every class is
   whole on one home) and the class summaries run on the homes, with the whole-table column
   statistics reduced over the shards (:mod:`.metrics`) or held in value ranges across the
   workers (:mod:`.ranges`); the coordinator combines scalars, class
   sizes and the summaries into every metric. Classes of different homes that publish the same
   cells (relaxed cuts, exact classes, two halves of a hierarchy node) are one output class,
   verified whole from their sizes and sensitive histograms (:mod:`.merge`). Each shard writes its anonymized rows, in input order, as
   one Parquet file of the output directory; nothing of the table passes through this process.

Examples
--------
>>> from gpuanon import Mondrian
>>> from gpuanon.datasets import load_adult
>>> df = load_adult().head(3000)
>>> m = Mondrian(k=5, quasi_identifiers=["age", "education"], backend="cpu", progress=False)
>>> res = run_distributed(m, "local:2", frames=[df.iloc[:1000], df.iloc[1000:]])  # doctest: +SKIP
>>> (res.labels == m.fit(df).labels_).all()  # doctest: +SKIP
True
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid

import numpy as np
import pandas as pd

from kernels.mondrian import partition_spans

from ..anonymize.plan import Plan
from ..anonymize.result import ClusterDetails, FitResult
from ..backend import TransferLog
from ..errors import InputError, SchemaError, VerificationError
from .checks import column_statistics, combine_stages, suppression, validate
from .cluster import open_cluster
from .encode import combine_profiles
from .levels import radix_select, representative_rows
from .merge import merge_shared, shared_hashes, with_shared
from .options import (bind_plan, choose_automatic, combine_optimization, frequency_tables, hierarchy_plan_of,
                      hierarchy_report)
from .tasks import (Runner, backend_of, encode, head, make_home, new_shard, output_metadata, profile, serial_of,
                    write_output)
from .worker import kernel_col_info, local_table

log = logging.getLogger("gpuanon")

# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------

def _parquet_files(path) -> list[str]:
    p = os.fspath(path)
    if os.path.isdir(p):
        files = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".parquet") and not f.startswith((".", "_")))
        if not files:
            raise InputError(f"directory '{p}' holds no .parquet files; write the table as one or more Parquet "
                             f"files there (one per shard)")
        return files
    if p.endswith(".parquet") and os.path.isfile(p):
        return [p]
    raise InputError(f"'{p}' is neither a directory of Parquet files nor a .parquet file; a cluster run reads "
                     f"Parquet (convert the table with pandas' to_parquet)")


def _row_counts(files) -> list[int]:
    import pyarrow.parquet as pq  # noqa: PLC0415

    return [int(pq.ParquetFile(f).metadata.num_rows) for f in files]


def run_distributed(est, cluster, *, frames=None, paths=None, out_dir=None, local_rows: int | None = None,
                    gather: bool = True, processes: bool = False, overwrite: bool = False) -> FitResult:
    """Run a :class:`~gpuanon.Mondrian` estimator's parameters on a Dask cluster.

    Parameters
    ----------
    est : Mondrian
        Its parameters (k, l, t, roles, mode, format, suppression budget, backend, the
        optimization step, hierarchies: the user's and automatic ones) are used (see
        :mod:`.options`).
    cluster : str or distributed.Client
        ``local:N``, ``cuda:N``, ``tcp://host:port`` or a client (see :mod:`.cluster`).
    frames : list of DataFrame, optional
        Shards in row order (scattered to the workers round robin).
    paths : directory or list of Parquet files, optional
        Shards read by the workers themselves (files in name order give the row order).
    out_dir : path, optional
        Write the output there as one Parquet file per shard (``part-00000.parquet`` ...), by
        the workers; written to a temporary sibling and renamed only when every shard is done.
    local_rows : int, optional
        A partition of at most this many rows moves to one worker and is finished there
        (default: the kept rows divided by the number of workers, rounded up).
    gather : bool
        Bring the labels and the output frame back here (the estimator's API); False keeps
        them on the workers (the command line with ``out_dir``).
    """
    if (frames is None) == (paths is None):
        raise InputError("give the table either as frames (shards in row order) or as paths (Parquet files)")
    if local_rows is not None and (isinstance(local_rows, bool) or not isinstance(local_rows, (int, np.integer))
                                   or local_rows < 1):
        raise InputError(f"local_rows must be a whole number of rows >= 1, got {local_rows!r}")
    columns = None
    if paths is not None:
        files = _parquet_files(paths) if not isinstance(paths, (list, tuple)) else [os.fspath(p) for p in paths]
        counts = _row_counts(files)
        sources = files
    else:
        frames = list(frames)
        if not frames or not all(isinstance(f, pd.DataFrame) for f in frames):
            raise InputError("frames must be a non-empty list of pandas DataFrames (the shards, in row order)")
        counts = [len(f) for f in frames]
        sources = frames
    n_total = int(sum(counts))
    if n_total == 0:
        raise SchemaError("the input table is empty (0 rows); give a table with rows")
    if out_dir is not None:
        out_dir = os.path.normpath(os.fspath(out_dir))  # "out/" and "out" are one folder
        if os.path.exists(out_dir) and not overwrite:
            raise InputError(f"output '{out_dir}' exists; choose a new directory or pass --overwrite")
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    t_all = time.perf_counter()
    secs: dict[str, float] = {}
    with open_cluster(cluster, backend=est.backend, processes=processes) as handle:
        workers = handle.workers
        W = len(workers)
        run = Runner(handle.client, workers)
        S = len(sources)
        home_of_shard = [i % W for i in range(S)]
        t0 = time.perf_counter()
        run.stage = "loading the shards"
        shards = []
        for i, src in enumerate(sources):
            if isinstance(src, pd.DataFrame):
                src = handle.client.scatter(src, workers=[workers[home_of_shard[i]]], broadcast=False, hash=False)
            shards.append(run.submit(home_of_shard[i], new_shard, i, int(offsets[i]), src, est.backend, columns))
        ss = run.gather([run.submit(home_of_shard[i], serial_of, s) for i, s in enumerate(shards)])
        first = int(np.nonzero(np.asarray(counts) > 0)[0][0])  # the first shard with rows
        sample = run.gather([run.submit(home_of_shard[first], head, shards[first], 1000)])[0]
        schema = validate(est, sample, n_total)
        pl = Plan.of(est, schema)
        qis = list(schema.quasi_identifiers)
        kinds = {c: schema.kinds[c] for c in qis}
        run.stage = "encoding"
        profs = run.gather([run.submit(home_of_shard[i], profile, s, qis, kinds, schema.sensitive, schema.target)
                            for i, s in enumerate(shards)])
        plan = hierarchy_plan_of(pl, profs)
        enc = combine_profiles(profs, qis, kinds, schema.sensitive, schema.target, schema.sensitive_ordered,
                               Plan.leaf_orders(plan))
        bind_plan(enc, plan)
        del profs
        run.gather([run.submit(home_of_shard[i], encode, s, enc) for i, s in enumerate(shards)])
        tables = frequency_tables(run, shards, ss, home_of_shard, enc, plan)
        bind_plan(enc, plan, tables, est.rho)
        secs["encode"] = time.perf_counter() - t0

        # ------------------------------------------------ criteria, whole-table checks, blocks
        t0 = time.perf_counter()
        n_sa = len(enc.sa_values)
        run.stage = "block statistics"
        bst = run.gather([run.call(home_of_shard[i], s, ss[i], "block_stats", enc.n_blocks, n_sa)
                          for i, s in enumerate(shards)])
        bsizes = np.sum([b[0] for b in bst], axis=0)
        bhist = np.sum([b[1] for b in bst], axis=0) if n_sa else None
        q = None
        if n_sa:
            tot = bhist.sum(axis=0).astype(np.float64)
            q = tot / max(tot.sum(), 1.0)
        crit = pl.criteria(enc.sa_ordered, enc.sa_values, q)
        n_sa_missing = 0 if crit.sa_missing is None else int(bhist.sum(axis=0)[crit.sa_missing])
        hist_needed = crit.needs_histogram and n_sa > 0
        if crit.needs_histogram:
            pl.check_whole_table(crit, n_total, bhist.sum(axis=0)[None, :], np)
        suppressed, reason, keep_block = suppression(pl, crit, enc, bsizes, bhist if hist_needed else None, n_total)
        n_kept = n_total - suppressed
        lr = int(local_rows) if local_rows is not None else max(1, -(-n_kept // W))

        # ------------------------------------------------ distributed levels
        group_sizes: list = []
        group_final: list = []
        present = np.nonzero(keep_block & (bsizes > 0))[0]
        psz = bsizes[present].astype(np.int64)
        stay = psz > lr
        block_part = np.full(enc.n_blocks, -1, dtype=np.int64)
        block_group = np.full(enc.n_blocks, -1, dtype=np.int64)
        block_part[present[stay]] = np.arange(int(stay.sum()))
        block_group[present[~stay]] = np.arange(int((~stay).sum()))
        group_sizes.append(psz[~stay])
        group_final.append(np.zeros(int((~stay).sum()), dtype=bool))
        n_groups = int((~stay).sum())
        sizes = psz[stay]
        hist = bhist[present[stay]].astype(np.int64) if hist_needed else None
        run.gather([run.call(home_of_shard[i], s, ss[i], "start", block_part, block_group)
                    for i, s in enumerate(shards)])
        table_h = local_table(enc, np.zeros((len(qis), 0), dtype=np.uint32), None, None, np)
        col_info = kernel_col_info(table_h, np)
        n_cat = [c.n_categories for c in enc.columns]
        g_range = np.asarray([c.global_range for c in enc.columns])
        cat_cols = [j for j, c in enumerate(enc.columns) if c.kind == "categorical"]
        relaxed = pl.relaxed
        levels, attempts, rounds, token = 0, 0, 0, 0
        level_log = []
        while sizes.shape[0] > 0:
            levels += 1
            b_in, b_out = run.bytes_in, run.bytes_out
            P = int(sizes.shape[0])
            run.stage = f"level {levels} (statistics)"
            st = run.gather([run.call(home_of_shard[i], s, ss[i], "level_stats", P, cat_cols,
                                        [n_cat[j] for j in cat_cols]) for i, s in enumerate(shards)])
            mn = np.minimum.reduce([x[0] for x in st])
            mx = np.maximum.reduce([x[1] for x in st])
            pres = {j: np.logical_or.reduce([x[2][j] for x in st]) for j in cat_cols}
            del st
            K_rep, m_rep = representative_rows(mn, mx, pres, kinds)
            span = np.asarray(partition_spans(K_rep, m_rep, col_info=col_info, n_categories=n_cat,
                                              global_range=g_range, xp=np), dtype=np.float64)
            span[sizes < 2 * crit.k] = 0.0
            cut = np.zeros(P, dtype=bool)
            ccol = np.zeros(P, dtype=np.int64)
            cthr = np.zeros(P, dtype=np.uint64)
            cuse = np.zeros(P, dtype=bool)
            cnl = np.zeros(P, dtype=np.int64)
            chl = np.zeros((P, n_sa), dtype=np.int64) if hist_needed else None
            pend = np.nonzero(span.max(axis=1) > 0)[0]
            while pend.shape[0] > 0:  # a loop over "next widest column" attempts
                sp = span[pend]
                col = np.argmax(sp, axis=1)
                live = sp[np.arange(pend.shape[0]), col] > 0
                pend, col = pend[live], col[live]
                if pend.shape[0] == 0:
                    break
                attempts += 1
                token += 1
                lo = mn[col, pend].astype(np.uint64)
                hi = mx[col, pend].astype(np.uint64)
                if relaxed:
                    lo = lo << np.uint64(32)
                    hi = (hi << np.uint64(32)) | np.uint64(0xFFFFFFFF)
                run.stage = f"level {levels} (medians)"

                def count_round(prefix, shift, bits, _t=token, _p=pend, _c=col):
                    got = run.gather([run.call(home_of_shard[i], s, ss[i], "radix_counts", _t, _p, _c, relaxed,
                                                 prefix, shift, bits) for i, s in enumerate(shards)])
                    return np.sum(got, axis=0)

                thr, nr = radix_select(count_round, lo, hi, (sizes[pend] - 1) // 2)
                rounds += nr
                use_lt = np.zeros(pend.shape[0], dtype=bool) if relaxed else thr == mx[col, pend].astype(np.uint64)
                run.stage = f"level {levels} (child sizes)"
                got = run.gather([run.call(home_of_shard[i], s, ss[i], "split_counts", token, pend, col, relaxed,
                                             thr, use_lt, n_sa if hist_needed else 0) for i, s in enumerate(shards)])
                nleft = np.sum([g[0] for g in got], axis=0)
                psizes = sizes[pend]
                nright = psizes - nleft
                hl = hr = None
                if hist_needed:
                    hl = np.sum([g[1] for g in got], axis=0)
                    hr = hist[pend] - hl
                ok = (nleft > 0) & (nright > 0) & crit.satisfied(nleft, hl, np) & crit.satisfied(nright, hr, np)
                sel = pend[ok]
                cut[sel], ccol[sel], cthr[sel], cuse[sel], cnl[sel] = True, col[ok], thr[ok], use_lt[ok], nleft[ok]
                if hist_needed:
                    chl[sel] = hl[ok]
                span[pend, col] = -1.0
                pend = pend[~ok]
            cidx = np.nonzero(cut)[0]
            fin = np.nonzero(~cut)[0]
            C = int(cidx.shape[0])
            cut_idx = np.full(P, -1, dtype=np.int64)
            cut_idx[cidx] = np.arange(C)
            final_group = np.full(P, -1, dtype=np.int64)
            final_group[fin] = n_groups + np.arange(fin.shape[0])
            n_groups += int(fin.shape[0])
            group_sizes.append(sizes[fin])
            group_final.append(np.ones(fin.shape[0], dtype=bool))
            csz = np.stack([cnl[cidx], sizes[cidx] - cnl[cidx]], axis=1).reshape(-1)
            chist = None
            if hist_needed:
                chist = np.stack([chl[cidx], hist[cidx] - chl[cidx]], axis=1).reshape(-1, n_sa)
            keep = csz > lr
            child_part = np.full(2 * C, -1, dtype=np.int64)
            child_part[keep] = np.arange(int(keep.sum()))
            child_group = np.full(2 * C, -1, dtype=np.int64)
            child_group[~keep] = n_groups + np.arange(int((~keep).sum()))
            n_groups += int((~keep).sum())
            group_sizes.append(csz[~keep])
            group_final.append(np.zeros(int((~keep).sum()), dtype=bool))
            run.stage = f"level {levels} (regroup)"
            run.gather([run.call(home_of_shard[i], s, ss[i], "apply_level", cut_idx, ccol[cidx], relaxed,
                                   cthr[cidx], cuse[cidx], final_group, child_part, child_group)
                        for i, s in enumerate(shards)])
            sizes = csz[keep]
            hist = chist[keep] if hist_needed else None
            level_log.append({"level": levels, "partitions": P, "cut": C, "final": int(fin.shape[0]),
                              "to_workers": int((~keep).sum()),
                              "bytes_to_coordinator": run.bytes_in - b_in, "bytes_from_coordinator": run.bytes_out - b_out})
            if est.progress:
                log.info("dask level %d: %d partition(s), %d cut, %d final, %d moved to one worker", levels, P, C,
                         int(fin.shape[0]), int((~keep).sum()))
        secs["partition_levels"] = time.perf_counter() - t0

        # ------------------------------------------------ move whole groups to their homes
        t0 = time.perf_counter()
        gsz = np.concatenate(group_sizes).astype(np.int64) if group_sizes else np.zeros(0, dtype=np.int64)
        gfin = np.concatenate(group_final) if group_final else np.zeros(0, dtype=bool)
        before = np.cumsum(gsz) - gsz
        tot = max(int(gsz.sum()), 1)
        home_of_group = np.minimum(W - 1, ((before + gsz / 2.0) * W // tot).astype(np.int64))
        run.stage = "moving partitions to their workers"
        pieces = {(i, d): run.call(home_of_shard[i], s, ss[i], "piece_for", home_of_group, d)
                  for i, s in enumerate(shards) for d in range(W)}
        homes = [run.submit(d, make_home, d, est.backend, *[pieces[(i, d)] for i in range(S)]) for d in range(W)]
        hs = run.gather([run.submit(d, serial_of, h) for d, h in enumerate(homes)])
        sizes_moved = run.gather([handle.client.submit(lambda p: (p["nbytes"], p["source"]), pieces[(i, d)],
                                                       workers=[workers[home_of_shard[i]]], pure=False)
                                  for i in range(S) for d in range(W)])
        moved = sum(nb for (nb, src), (i, d) in zip(sizes_moved, [(i, d) for i in range(S) for d in range(W)])
                    if home_of_shard[i] != d)
        del pieces
        run.stage = "finishing partitions on their workers"
        crit_w = crit
        fin = run.gather([run.call(d, h, hs[d], "finish", gfin, enc, crit_w, relaxed, pl.k, pl.optimize)
                          for d, h in enumerate(homes)])
        firsts = [f for f, _ in fin]
        optimization = combine_optimization([o for _, o in fin]) if pl.optimize else None
        allf = np.concatenate(firsts)
        n_parts = int(allf.shape[0])
        gid = np.empty(n_parts, dtype=np.int64)
        gid[np.argsort(allf)] = np.arange(n_parts, dtype=np.int64)
        bounds = np.concatenate([[0], np.cumsum([f.shape[0] for f in firsts])])
        run.gather([run.call(d, h, hs[d], "set_labels", gid[bounds[d]:bounds[d + 1]]) for d, h in enumerate(homes)])
        run.stage = "returning labels"
        lab_pieces = {(d, i): run.call(d, h, hs[d], "label_piece", int(offsets[i]), int(offsets[i] + counts[i]))
                      for d, h in enumerate(homes) for i in range(S)}
        run.gather([run.call(home_of_shard[i], s, ss[i], "take_labels", [lab_pieces[(d, i)] for d in range(W)])
                    for i, s in enumerate(shards)])
        del lab_pieces
        secs["partition_local"] = time.perf_counter() - t0
        info = {"levels": levels, "attempts": attempts, "radix_rounds": rounds, "local_rows": lr,
                "n_workers": W, "n_shards": S, "groups": int(gsz.shape[0]),
                "shuffle_bytes_between_workers": int(moved), "per_level": level_log,
                "home_kernel": [None] * W}

        # ------------------------------------------------ stages on the homes
        automatic = choose_automatic(run, homes, hs, enc, tables, est.rho)  # rho of automatic hierarchies
        t0 = time.perf_counter()
        run.stage = "class statistics and verification"
        fmt = est.output_format
        vkw = dict(pl.verify_keywords(crit), sensitive=str(schema.sensitive), sa_missing=crit.sa_missing)
        col_stats, tcounts, range_stats, info["column_statistics"] = column_statistics(
            run, shards, ss, home_of_shard, homes, hs, enc, n_total, bool(est.progress))
        secs["column_statistics"] = time.perf_counter() - t0
        run.stage = "class statistics and verification"
        hres = run.gather([run.call(d, h, hs[d], "stages", enc, fmt, vkw, q, col_stats, tcounts, range_stats)
                           for d, h in enumerate(homes)])
        n_shared = int(shared_hashes(hres).shape[0])
        shared = merge_shared(run, homes, hs, hres, enc, fmt, vkw, q)
        verification, metrics = combine_stages(hres, est, n_total, suppressed, enc, tcounts)
        verification = with_shared(verification, shared)
        secs["stages"] = time.perf_counter() - t0
        info["classes_shared_by_workers"] = n_shared  # output classes finished in parts on several workers
        if not verification.ok:
            raise VerificationError("independent verification failed, nothing written: " + "; ".join(verification.failures))

        # ------------------------------------------------ output, written by the shards' workers
        t0 = time.perf_counter()
        run.stage = "writing the output"
        output = None
        files = []
        # without an output directory nor gather: verified, nothing to write nor to bring back
        sources_out = [] if out_dir is None and not gather else list(range(S))
        out_pieces = {(d, i): run.call(d, h, hs[d], "output_piece", int(offsets[i]), int(offsets[i] + counts[i]),
                                           home_of_shard[i] != d)
                      for d, h in enumerate(homes) for i in sources_out}
        tmp = None
        if out_dir is not None:
            parent = os.path.dirname(os.path.abspath(out_dir))
            tmp = os.path.join(parent, f".{os.path.basename(out_dir)}.tmp-{uuid.uuid4().hex[:8]}")
            os.makedirs(tmp)
            files = [f"part-{i:05d}.parquet" for i in range(S)]
        try:
            wfuts = [run.submit(home_of_shard[i], write_output, s, ss[i], [out_pieces[(d, i)] for d in range(W)], qis, kinds,
                                enc.columns, fmt, schema.identifiers,
                                None if tmp is None else os.path.join(tmp, files[i]), output_metadata(enc, fmt))
                     for i, s in enumerate(shards) if i in sources_out]
            written = run.gather(wfuts)
            if out_dir is not None:
                if os.path.exists(out_dir):
                    shutil.rmtree(out_dir)
                os.replace(tmp, out_dir)
                tmp = None
            elif gather:
                output = pd.concat(written, ignore_index=True)
                output.attrs["gpuanon"] = output_metadata(enc, fmt)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        secs["output"] = time.perf_counter() - t0
        labels = None
        if gather:
            labels = np.concatenate(run.gather([run.call(home_of_shard[i], s, ss[i], "labels_host")
                                                for i, s in enumerate(shards)]))
        info["bytes_to_coordinator"] = run.bytes_in
        info["bytes_from_coordinator"] = run.bytes_out
        info["dashboard"] = handle.dashboard
        worker_backend = run.gather([run.submit(0, backend_of, est.backend)])[0]
        info["workers"] = W
        shards = homes = None  # the futures go before the cluster does
    secs["total"] = time.perf_counter() - t_all
    info["seconds"] = secs
    details = ClusterDetails(info, enc, output_metadata(enc, fmt)["encoding"], output,
                             [os.path.join(out_dir, f) for f in files] if out_dir else [], n_sa_missing)
    return FitResult(labels, n_parts, int(suppressed), reason, {k: info[k] for k in ("levels", "attempts")}, schema,
                     worker_backend, crit, TransferLog(simulate=True), stage_seconds(secs),
                     optimization=None if optimization is None else dict(optimization),
                     hierarchies=hierarchy_report(enc, metrics, automatic), verification=verification,
                     metrics=metrics, cluster=details)


def stage_seconds(secs: dict) -> dict:
    """A cluster run's seconds under the single-process report's stage names (and its own)."""
    out = {"encode": secs.get("encode", 0.0),
           "partition": secs.get("partition_levels", 0.0) + secs.get("partition_local", 0.0),
           "verify": secs.get("stages", 0.0),  # class statistics, verification and metrics, on the homes
           "write": secs.get("output", 0.0), "total": secs.get("total", 0.0)}
    out.update({f"cluster_{k}": v for k, v in secs.items()})
    return {k: round(float(v), 6) for k, v in out.items()}
