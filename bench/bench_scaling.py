#!/usr/bin/env python
"""Scale-out benchmark: distributed Mondrian on Dask workers against one process.

Run from the repository root (under the shared lock: it keeps both cores busy for minutes)::

    flock /tmp/gpuanon-heavy.lock python bench/bench_scaling.py --out bench/results/bench_scaling_cpu.json
    python bench/bench_scaling.py --quick                      # smoke run (seconds)
    python bench/bench_scaling.py --gpu                        # on a GPU machine with dask-cuda

Every configuration runs in a fresh subprocess (``--one '<json config>'``) with its own
``LocalCluster`` of worker *processes* (one thread each, no memory limit), so every worker's
peak memory is its own. Progress goes to stderr; one JSON document to stdout (and ``--out``).

Data: ``make_hepmass(rows, random_state=0)`` (28 float32 QIs, a binary ``label`` as target),
written once per size as 4 Parquet files of equal rows under ``--data-dir`` (untimed); the
workers read the files themselves and write the output as a Parquet directory (deleted after).
Parameters: k = 10, all 28 columns quasi-identifiers, target ``label``, range format.

Per run: ``rows_per_second`` (rows / ``seconds.run``: everything from reading the files to the
written output, the cluster's start excluded), ``seconds`` (the run's stages),
``peak_rss_bytes_per_worker`` (each worker process's ``ru_maxrss`` after the run: its
interpreter, its shards, its home, the output), ``per_level`` (per distributed level: partitions,
cuts, bytes gathered to and sent from the coordinator), ``shuffle_bytes_between_workers`` (rows
moved to their partition's home), ``column_statistics`` (the numeric QIs whose whole-table
statistics were held in value ranges across the workers, the rounds and the bytes they moved),
``metrics`` (entropy loss, Gionis-Tassa bits, NCP, DM, CM: equal to the one-process run's), and the
one-process run of the same table through ``Mondrian(...).fit_transform`` and ``to_parquet``
(``--single``).

With ``--gpu``: a one-GPU ``LocalCUDACluster`` run of 10.5M x 28 against the single-process GPU
run (the distributed path's overhead), and ``projection``: 105M x 28 (ten HEPMASS) on 8 GPUs
from the measured per-level bytes and moved bytes (see :func:`projection`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_model, emit, report_result, spawn  # noqa: E402

if REPO not in sys.path:
    sys.path.insert(0, REPO)

N_FILES = 4
K = 10


def _data_dir(base: str, rows: int) -> str:
    """Parquet files of ``make_hepmass(rows)`` (made once, reused by every configuration)."""
    import pandas as pd  # noqa: F401

    from gpuanon.datasets import make_hepmass

    d = os.path.join(base, f"hepmass_{rows}")
    if os.path.exists(os.path.join(d, "_DONE")):
        return d
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    df = make_hepmass(rows, random_state=0)
    step = -(-rows // N_FILES)
    for i in range(N_FILES):
        df.iloc[i * step:(i + 1) * step].to_parquet(os.path.join(d, f"part-{i}.parquet"), index=False)
    del df
    open(os.path.join(d, "_DONE"), "w").close()
    return d


def _estimator(backend: str):
    from gpuanon import Mondrian

    return Mondrian(k=K, quasi_identifiers=[f"f{i}" for i in range(28)], target="label", backend=backend,
                    progress=False)


def _maxrss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _key_metrics(m: dict) -> dict:
    """The figures a run and its one-process twin must share (None where a metric is missing)."""
    gt = m.get("gionis_tassa") or {}
    return {"entropy_loss": m.get("entropy_loss"), "gionis_tassa_bits": gt.get("total_bits"), "ncp": m.get("ncp"),
            "dm": m.get("dm"), "cm": m.get("cm")}


def run_one(cfg: dict) -> dict:
    """One configuration, in this (fresh) process."""
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    data = _data_dir(cfg["data_dir"], int(cfg["rows"]))
    out_dir = tempfile.mkdtemp(prefix="scaling_out_", dir=cfg["data_dir"])
    shutil.rmtree(out_dir)
    res = {**cfg}
    try:
        if cfg["mode"] == "single":
            import pandas as pd

            t0 = time.perf_counter()
            df = pd.read_parquet(data)
            m = _estimator(cfg["backend"])
            out = m.fit_transform(df)
            os.makedirs(out_dir)
            out.to_parquet(os.path.join(out_dir, "out.parquet"), index=False)
            secs = time.perf_counter() - t0
            res.update(seconds={"run": secs, **{k: v for k, v in m.report_["seconds"].items()}},
                       rows_per_second=int(cfg["rows"]) / secs, n_classes=int(m.report_["n_classes"]),
                       n_partitions=int(m.n_partitions_), peak_rss_bytes=_maxrss(), backend=m.report_["backend"],
                       metrics=_key_metrics(m.metrics_))
            return res
        from distributed import Client, LocalCluster

        from gpuanon.distributed.mondrian import run_distributed

        t0 = time.perf_counter()
        if cfg["mode"] == "cuda":
            import importlib

            cl = importlib.import_module("dask_cuda").LocalCUDACluster(n_workers=int(cfg["workers"]),
                                                                       dashboard_address=":0")
        else:
            cl = LocalCluster(n_workers=int(cfg["workers"]), threads_per_worker=1, processes=True, memory_limit=0,
                              dashboard_address=":0")
        client = Client(cl)
        t_start = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            r = run_distributed(_estimator(cfg["backend"]), client, paths=data, out_dir=out_dir, gather=False)
            secs = time.perf_counter() - t0
            rss = client.run(_maxrss)
        finally:
            client.close()
            cl.close()
        info = r.cluster.info  # the cluster run's levels, bytes and stage seconds (FitResult.cluster)
        res.update(
            backend=r.backend.name, seconds={"cluster_start": t_start, "run": secs, **info["seconds"]},
            rows_per_second=int(cfg["rows"]) / secs, n_classes=int(r.n_classes), n_partitions=int(r.n_partitions),
            peak_rss_bytes_per_worker=sorted(int(v) for v in rss.values()), coordinator_peak_rss_bytes=_maxrss(),
            levels=info["levels"], attempts=info["attempts"], radix_rounds=info["radix_rounds"],
            local_rows=info["local_rows"], groups=info["groups"], per_level=info["per_level"],
            shuffle_bytes_between_workers=info["shuffle_bytes_between_workers"],
            bytes_to_coordinator=info["bytes_to_coordinator"], bytes_from_coordinator=info["bytes_from_coordinator"],
            output_files=len(os.listdir(out_dir)), metrics=_key_metrics(r.metrics),
            column_statistics=info.get("column_statistics"))
        return res
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def projection(per_level: list, shuffle_bytes: int, rows: int, workers: int, target_rows: int = 105_000_000,
               gpus: int = 8, bandwidths=(12.5e9, 25e9, 50e9), latency_s: float = 0.5e-3,
               rounds_per_level: int = 7) -> dict:
    """Time on the network of a ``target_rows`` x 28 run on ``gpus`` GPUs, on paper.

    Levels: a level's statistics are per partition and per worker, not per row; the measured
    bytes per (partition, worker) of the run's levels, times the ``2**(l-1)`` partitions of level
    ``l`` and the ``gpus`` workers, for the ``log2(gpus) + 1`` levels before partitions fit one
    GPU; each level also costs ``rounds_per_level`` round trips (statistics, four radix rounds,
    child sizes, regroup) of ``latency_s``. The move: every row goes once to its partition's
    GPU, ``(gpus - 1) / gpus`` of them over the network, at the measured bytes per moved row;
    all GPUs send at once (about ``gpus / 2`` links of bisection). Bandwidths in bytes/s
    (100, 200, 400 Gb/s).
    """
    import math

    moved_rows = rows * (workers - 1) / workers if workers > 1 else 0
    per_row = shuffle_bytes / moved_rows if moved_rows else 28 * 4 + 8 + 8 + 4  # keys, row, group, label
    per_pw = max(((lv["bytes_to_coordinator"] + lv["bytes_from_coordinator"]) / (lv["partitions"] * workers)
                  for lv in per_level), default=0.0)
    levels = int(math.ceil(math.log2(gpus))) + 1
    lvl_bytes = [per_pw * 2 ** l * gpus for l in range(levels)]
    move = per_row * target_rows * (gpus - 1) / gpus
    out = {"target_rows": target_rows, "gpus": gpus, "levels_on_cluster": levels,
           "bytes_per_partition_and_worker_measured": per_pw, "bytes_per_level": [int(b) for b in lvl_bytes],
           "move_bytes_per_row_measured": per_row, "move_bytes": int(move), "latency_s": latency_s,
           "rounds_per_level": rounds_per_level, "by_bandwidth": {}}
    for bw in bandwidths:
        t_levels = levels * rounds_per_level * latency_s + sum(lvl_bytes) / bw
        t_move = move / (bw * max(gpus / 2, 1))
        out["by_bandwidth"][f"{bw * 8 / 1e9:.0f}Gbps"] = {"levels_s": t_levels, "move_s": t_move,
                                                           "network_s": t_levels + t_move}
    return out


def environment(backend: str) -> dict:
    vers = {}
    for p in ("numpy", "pandas", "pyarrow", "dask", "distributed", "dask-cuda", "cupy-cuda12x"):
        try:
            vers[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return {"python": platform.python_version(), "versions": vers, "os": f"{platform.system()} {platform.release()}",
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "memory_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "backend": backend}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--single", action="store_true", help="also the one-process run of every size")
    ap.add_argument("--gpu", action="store_true", help="one-GPU LocalCUDACluster and one process at 10.5M rows")
    ap.add_argument("--quick", action="store_true", help="20,000 rows, 1 and 2 workers")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "gpuanon_bench_scaling"))
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        report_result(run_one(json.loads(a.one)))
        return 0
    os.makedirs(a.data_dir, exist_ok=True)
    rows = [20_000] if a.quick else a.rows
    cfgs = []
    if a.gpu:
        for mode in ("single", "cuda"):
            cfgs.append({"mode": mode, "rows": 10_500_000, "workers": 1, "backend": "gpu", "data_dir": a.data_dir})
    else:
        for n in rows:
            if a.single:
                cfgs.append({"mode": "single", "rows": n, "workers": 1, "backend": a.backend, "data_dir": a.data_dir})
            for w in a.workers:
                cfgs.append({"mode": "dask", "rows": n, "workers": w, "backend": a.backend, "data_dir": a.data_dir})
    runs = []
    for cfg in cfgs:
        sys.stderr.write(f"bench_scaling: {cfg['mode']} {cfg['rows']:,} rows, {cfg['workers']} worker(s)\n")
        r = spawn(__file__, cfg, a.timeout, stderr_tail=4000)
        r.pop("data_dir", None)
        runs.append(r)
        sys.stderr.write(f"  -> {json.dumps({k: r.get(k) for k in ('rows_per_second', 'error')})}\n")
    doc = {"benchmark": "gpuanon distributed Mondrian (Dask)", "command": "python bench/bench_scaling.py " +
           " ".join(argv if argv is not None else sys.argv[1:]), "environment": environment(a.backend),
           "parameters": {"k": K, "quasi_identifiers": 28, "target": "label", "format": "range", "files": N_FILES},
           "runs": runs}
    biggest = [r for r in runs if r.get("mode") in ("dask", "cuda") and "error" not in r]
    if biggest:
        b = max(biggest, key=lambda r: (r["rows"], r["workers"]))
        doc["projection_105M_8_gpus"] = projection(b["per_level"], b["shuffle_bytes_between_workers"], b["rows"],
                                                    b["workers"])
        doc["projection_105M_8_gpus"]["from_run"] = {"rows": b["rows"], "workers": b["workers"], "mode": b["mode"]}
    emit(doc, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
