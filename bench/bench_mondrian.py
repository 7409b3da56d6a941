#!/usr/bin/env python
"""Benchmark of gpuanon's Mondrian against its targets and against the peer ``anonypy``.

Run from the repository root::

    python bench/bench_mondrian.py                      # the full set (about 10 minutes on 2 CPU cores)
    python bench/bench_mondrian.py --quick --skip-peer  # smoke run (seconds)
    python bench/bench_mondrian.py --backend gpu --out bench/results/gpu.json

Every configuration runs in a fresh subprocess (``--one '<json config>'``), so each run's peak
memory (``ru_maxrss``) is its own. Progress goes to stderr; one JSON document goes to stdout at the
end (and to ``--out FILE``). See ``bench/README.md`` for the fields.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_model as _cpu_model, report_result, spawn  # noqa: E402
# Benchmark the gpuanon of this checkout, not whatever copy may be installed elsewhere.
if REPO not in sys.path:
    sys.path.insert(0, REPO)

GIB = 1024 ** 3

# Rows of Adult with no '?' in any column (the usual "complete cases" of the UCI table).
ADULT_COMPLETE_FILTER = "complete rows only: rows with '?' in any column dropped"
ADULT_ALL_FILTER = "none: all rows, '?' kept as an ordinary category value"

TARGETS = {
    "adult_k3_partition_s": 0.1,
    "hepmass_1M_s": 10.0,
    "hepmass_10_5M_s": 120.0,
    "hepmass_10_5M_peak_rss_bytes": 8 * GIB,
}


def log(msg: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _ru_maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) * (1 if sys.platform == "darwin" else 1024)  # KB on Linux, bytes on macOS


# ============================================================================ child: one run
def _load(cfg: dict):
    """(frame, qis, sensitive, target, rows_filter, kinds) of a dataset config."""
    from gpuanon import datasets as ds
    from gpuanon.table.schema import Schema

    name = cfg["dataset"]
    if name in ("adult", "adult_all"):
        df = ds.load_adult()
        if name == "adult":
            complete = ~(df == "?").any(axis=1)
            df = df[complete.to_numpy()].reset_index(drop=True)
            flt = ADULT_COMPLETE_FILTER
        else:
            flt = ADULT_ALL_FILTER
        qis = list(ds.ADULT_QUASI_IDENTIFIERS)
        sens = target = ds.ADULT_TARGET
    elif name == "hepmass":
        df = ds.make_hepmass(int(cfg["rows"]), random_state=0)
        qis = list(ds.HEPMASS_FEATURES)
        sens = target = "label"
        flt = "none (synthetic, make_hepmass(n, random_state=0))"
    else:
        raise ValueError(f"unknown dataset {name!r}")
    kinds = Schema.from_frame(df, qis).kinds
    return df, qis, sens, target, flt, kinds


def _ncps(df, qis, labels, kinds) -> dict:
    from gpuanon.metrics import ncp

    t = time.perf_counter()
    out = {"ncp_set": ncp(df, qis, labels, kinds, categorical="set")}
    if any(v == "categorical" for v in kinds.values()):
        out["ncp_arx"] = ncp(df, qis, labels, kinds, categorical="arx")
    else:  # the two conventions differ only on categorical QIs
        out["ncp_arx"] = out["ncp_set"]
    out["ncp_seconds"] = round(time.perf_counter() - t, 3)
    return out


def _gpu_sync():
    cp = sys.modules.get("cupy")  # never import CuPy here: only use it when gpuanon already did
    if cp is not None:
        cp.cuda.Device().synchronize()


def run_ours(cfg: dict) -> dict:
    import numpy as np

    from gpuanon import Mondrian
    from gpuanon import datasets as ds

    t0 = time.perf_counter()
    df, qis, sens, target, flt, kinds = _load(cfg)
    read_s = time.perf_counter() - t0
    rss_after_read = _ru_maxrss_bytes()

    def make():
        return Mondrian(k=int(cfg["k"]), quasi_identifiers=qis, sensitive=sens, target=target,
                        output_format=cfg.get("output_format", "range"), backend=cfg["backend"],
                        progress=False)

    warm = None
    if cfg.get("warmup", True):
        # One untimed run first, so one-off costs (CUDA context, kernel compilation, page-ins of
        # code) are not billed to the timed run. Adult: the same table; HEPMASS: 20,000 rows.
        wdf = df if cfg["dataset"] != "hepmass" else ds.make_hepmass(min(20_000, len(df)), random_state=1)
        tw = time.perf_counter()
        wm = make()
        wm.fit_transform(wdf)
        _gpu_sync()
        warm = {"rows": int(len(wdf)), "wall_seconds": round(time.perf_counter() - tw, 6),
                "seconds": dict(wm.report_["seconds"])}
        del wm, wdf
    pool = None
    cp = sys.modules.get("cupy")
    if cp is not None:
        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()  # so total_bytes() below is the timed run's high-water mark

    m = make()
    t1 = time.perf_counter()
    out = m.fit_transform(df)
    _gpu_sync()
    fit_s = time.perf_counter() - t1
    peak_rss = _ru_maxrss_bytes()  # before the NCP computation, which is not part of the run
    rep = m.report_
    res = {
        "kind": "ours",
        "dataset": cfg["dataset"],
        "rows": int(len(df)),
        "rows_filter": flt,
        "columns": int(df.shape[1]),
        "n_qi": len(qis),
        "qi_kinds": {"numeric": sum(v == "numeric" for v in kinds.values()),
                     "categorical": sum(v == "categorical" for v in kinds.values())},
        "k": int(cfg["k"]),
        "output_format": cfg.get("output_format", "range"),
        "backend": rep["backend"],
        "device": rep["device"],
        "backend_reason": rep.get("backend_reason", ""),
        "seconds": {
            "read": round(read_s, 6),
            **{s: rep["seconds"].get(s) for s in ("encode", "partition", "optimize", "class_statistics",
                                                  "generalize", "verify", "metrics")},
            "fit_transform": round(fit_s, 6),
            "total": round(read_s + fit_s, 6),
        },
        "warmup": warm,
        "first_call_seconds": None if warm is None else warm["wall_seconds"],
        "transfers": rep.get("transfers"),
        "n_classes": int(rep["n_classes"]),
        "n_rows_out": int(rep["n_rows_out"]),
        "n_suppressed": int(rep["n_suppressed"]),
        "achieved_k": rep["achieved"]["k"],
        "class_size": rep.get("class_size"),
        "partition_info": rep.get("partition"),
        "peak_rss_bytes": peak_rss,
        "peak_rss_gib": round(peak_rss / GIB, 3),
        "rss_after_read_bytes": rss_after_read,
    }
    if pool is not None:
        res["gpu"] = {
            "cupy_version": cp.__version__,
            "pool_high_water_bytes": int(pool.total_bytes()),
            "pool_used_bytes_at_end": int(pool.used_bytes()),
            "note": "CuPy default pool: bytes held (it only grows between free_all_blocks calls), "
                    "an upper bound of the peak in use; cuDF/RMM allocations are not counted",
        }
    labels = np.asarray(m.labels_)
    del out, m
    if cfg.get("ncp", True):
        res.update(_ncps(df, qis, labels, kinds))
    return res


def run_peer(cfg: dict) -> dict:
    import numpy as np

    import anonypy

    t0 = time.perf_counter()
    df, qis, sens, _target, flt, kinds = _load(cfg)
    read_s = time.perf_counter() - t0
    # anonypy tells categorical from numeric by the 'category' dtype; numeric stays numeric.
    pdf = df.copy()
    for c in qis:
        if kinds[c] == "categorical":
            pdf[c] = pdf[c].astype("category")
    t1 = time.perf_counter()
    parts = anonypy.Mondrian(pdf, qis, sens).partition(int(cfg["k"]))
    part_s = time.perf_counter() - t1
    peak_rss = _ru_maxrss_bytes()
    n = len(df)
    labels = np.full(n, -1, dtype=np.int64)
    covered = 0
    for i, p in enumerate(parts):
        pos = pdf.index.get_indexer(p)
        labels[pos] = i
        covered += len(pos)
    sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0, dtype=int)
    res = {
        "kind": "peer",
        "peer": "anonypy",
        "peer_version": metadata.version("anonypy"),
        "call": f"anonypy.Mondrian(df, qis, '{sens}').partition({int(cfg['k'])})",
        "dataset": cfg["dataset"],
        "rows": int(n),
        "rows_filter": flt,
        "n_qi": len(qis),
        "k": int(cfg["k"]),
        "seconds": {"read": round(read_s, 6), "partition": round(part_s, 6)},
        "n_classes": len(parts),
        "rows_covered_once": bool(covered == n and (labels >= 0).all()),
        "min_class_size": int(sizes.min()) if len(sizes) else 0,
        "peak_rss_bytes": peak_rss,
        "peak_rss_gib": round(peak_rss / GIB, 3),
    }
    res.update(_ncps(df, qis, labels, kinds))  # scored on the original (object-dtype) frame
    return res


def run_one(cfg: dict) -> dict:
    return run_peer(cfg) if cfg["kind"] == "peer" else run_ours(cfg)


# ============================================================================ parent
def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("numpy", "pandas", "pyarrow", "gpuanon", "anonypy", "cupy-cuda12x", "cupy-cuda13x", "cupy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    import numpy
    import pandas

    out["numpy"], out["pandas"] = numpy.__version__, pandas.__version__  # what is imported
    try:
        import gpuanon

        out["gpuanon"] = gpuanon.__version__
        out["gpuanon_path"] = os.path.relpath(os.path.dirname(gpuanon.__file__), REPO)
    except Exception as exc:  # pragma: no cover
        out["gpuanon"] = f"not importable: {exc}"
    return out


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def environment(args, results: list) -> dict:
    ours = [r for r in results if r.get("kind") == "ours" and "error" not in r]
    backends = sorted({r["backend"] for r in ours})
    devices = sorted({r["device"] for r in ours})
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = None
    env = {
        "backend_requested": args.backend,
        "backend": backends[0] if len(backends) == 1 else (backends or None),
        "device": devices[0] if len(devices) == 1 else (devices or None),
        "backend_reason": ours[0].get("backend_reason") if ours else None,
        "versions": _versions(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_count_usable": usable,
        "memory_total_bytes": _mem_total(),
        "thread_env": {v: os.environ[v] for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "GPUANON_BACKEND", "CUDA_VISIBLE_DEVICES") if v in os.environ},
    }
    gpus = [r["gpu"] for r in ours if "gpu" in r]
    if gpus:
        env["cupy"] = gpus[0].get("cupy_version")
    return env


def plan(args) -> list[dict]:
    b, w = args.backend, not args.no_warmup
    runs: list[dict] = []
    adult_ks = [3] if args.quick else [3, 10, 50]
    for k in adult_ks:
        runs.append({"kind": "ours", "dataset": "adult", "k": k, "backend": b, "warmup": w})
    if not args.quick:
        for k in (3, 10):
            runs.append({"kind": "ours", "dataset": "adult_all", "k": k, "backend": b, "warmup": w})
    if not args.skip_peer and not args.quick:
        for k in (3, 10, 50):
            runs.append({"kind": "peer", "dataset": "adult", "k": k})
    rows = [20_000] if args.quick and args.hepmass_rows is None else (args.hepmass_rows or [1_000_000, 10_500_000])
    for n in rows:
        runs.append({"kind": "ours", "dataset": "hepmass", "rows": n, "k": 10, "output_format": "minmax",
                     "backend": b, "warmup": w})
    return runs


def _find(results, **kv):
    for r in results:
        if "error" not in r and all(r.get(a) == v for a, v in kv.items()):
            return r
    return None


def _target(name, measure, measured, limit, unit, *, skipped_why=None, also=None):
    t = {"name": name, "measure": measure, "target": f"< {limit} {unit}" if unit else f"< {limit}",
         "target_value": limit, "measured": measured}
    if measured is None:
        t["pass"] = None
        t["note"] = skipped_why or "not measured"
    else:
        t["pass"] = bool(measured < limit)
    if also:
        t["also"] = also
    return t


def comparisons(results) -> tuple[list, list]:
    comps, ncp_targets = [], []
    for k in (3, 10, 50):
        ours, peer = _find(results, kind="ours", dataset="adult", k=k), _find(results, kind="peer", k=k)
        if ours is None or peer is None:
            if ours is not None:
                ncp_targets.append({"name": f"adult_k{k}_ncp_set_vs_anonypy", "measure": "our NCP (set) <= "
                                    "anonypy's NCP (set)", "target": "<=", "measured": ours["ncp_set"],
                                    "peer": None, "pass": None, "note": "peer not run"})
            continue
        ps, po = peer["seconds"]["partition"], ours["seconds"]
        comps.append({
            "dataset": "adult", "rows": ours["rows"], "rows_filter": ours["rows_filter"], "k": k,
            "peer_seconds": ps,
            "our_partition_seconds": po["partition"],
            "our_total_seconds": po["total"],
            "speedup_vs_partition": round(ps / po["partition"], 2) if po["partition"] else None,
            "speedup_vs_total": round(ps / po["total"], 2) if po["total"] else None,
            "our_n_classes": ours["n_classes"], "peer_n_classes": peer["n_classes"],
            "our_ncp_set": ours["ncp_set"], "peer_ncp_set": peer["ncp_set"],
            "our_ncp_arx": ours["ncp_arx"], "peer_ncp_arx": peer["ncp_arx"],
            "ncp_ratio_set": round(ours["ncp_set"] / peer["ncp_set"], 4) if peer["ncp_set"] else None,
            "ncp_ratio_arx": round(ours["ncp_arx"] / peer["ncp_arx"], 4) if peer["ncp_arx"] else None,
            "our_peak_rss_gib": ours["peak_rss_gib"], "peer_peak_rss_gib": peer["peak_rss_gib"],
        })
        ncp_targets.append({"name": f"adult_k{k}_ncp_set_vs_anonypy",
                            "measure": "our NCP (categorical='set') <= anonypy's NCP (set), same rows and QIs",
                            "target": f"<= {peer['ncp_set']:.6f}", "target_value": peer["ncp_set"],
                            "measured": ours["ncp_set"], "pass": bool(ours["ncp_set"] <= peer["ncp_set"])})
    return comps, ncp_targets


def targets(results, ncp_targets) -> list:
    out = []
    a3 = _find(results, kind="ours", dataset="adult", k=3)
    out.append(_target("adult_k3_partition", "partition stage seconds, Adult complete rows, k=3",
                       a3["seconds"]["partition"] if a3 else None, TARGETS["adult_k3_partition_s"], "s",
                       also=a3 and {"warmup_run_partition_seconds": (a3.get("warmup") or {}).get("seconds", {}).get("partition")}))
    for n, key, label in ((1_000_000, "hepmass_1M_s", "1M x 28"), (10_500_000, "hepmass_10_5M_s", "10.5M x 28")):
        h = _find(results, kind="ours", dataset="hepmass", rows=n)
        out.append(_target(f"hepmass_{label.split()[0]}_seconds",
                           f"{label} HEPMASS k=10 minmax: partition stage seconds (the issue's target)",
                           h["seconds"]["partition"] if h else None, TARGETS[key], "s",
                           skipped_why=f"{n:,}-row HEPMASS not run (or failed)",
                           also=h and {"fit_transform_seconds": h["seconds"]["fit_transform"],
                                       "total_seconds_incl_read": h["seconds"]["total"]}))
    h = _find(results, kind="ours", dataset="hepmass", rows=10_500_000)
    out.append(_target("hepmass_10.5M_peak_rss", "peak RSS of the whole 10.5M-row run's process "
                       "(data generation + anonymization), bytes",
                       h["peak_rss_bytes"] if h else None, TARGETS["hepmass_10_5M_peak_rss_bytes"], "bytes",
                       skipped_why="10,500,000-row HEPMASS not run (or failed)",
                       also=h and {"peak_rss_gib": h["peak_rss_gib"]}))
    return out + ncp_targets


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="tiny smoke run: Adult k=3, HEPMASS 20,000 rows, no peer")
    ap.add_argument("--skip-peer", action="store_true", help="do not run anonypy")
    ap.add_argument("--hepmass-rows", type=lambda s: [int(x.replace("_", "")) for x in s.split(",") if x.strip()],
                    default=None, help="comma-separated HEPMASS sizes (default 1000000,10500000)")
    ap.add_argument("--backend", choices=("cpu", "gpu", "auto"), default="cpu")
    ap.add_argument("--no-warmup", action="store_true", help="time the first (cold) run of each config")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per subprocess")
    ap.add_argument("--out", help="also write the JSON document to this file")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one config, print its result
    args = ap.parse_args(argv)

    if args.one is not None:
        res = run_one(json.loads(args.one))
        report_result(res)
        sys.stdout.flush()
        return 0

    t0 = time.perf_counter()
    runs = plan(args)
    results = []
    for i, cfg in enumerate(runs, 1):
        desc = ", ".join(f"{a}={v}" for a, v in cfg.items() if a not in ("warmup",))
        log(f"run {i}/{len(runs)}: {desc}")
        r = spawn(__file__, cfg, args.timeout)
        if "error" in r:
            log(f"  FAILED: {r['error']}")
        elif r["kind"] == "ours":
            s = r["seconds"]
            log(f"  {r['rows']:,} rows: partition {s['partition']:.3f} s, total {s['total']:.3f} s, "
                f"{r['n_classes']:,} classes, peak RSS {r['peak_rss_gib']:.2f} GiB, NCP(set) {r.get('ncp_set', float('nan')):.4f}")
        else:
            log(f"  anonypy: partition {r['seconds']['partition']:.2f} s, {r['n_classes']:,} classes, "
                f"NCP(set) {r['ncp_set']:.4f}")
        results.append(r)

    comps, ncp_t = comparisons(results)
    tg = targets(results, ncp_t)
    doc = {
        "benchmark": "gpuanon Mondrian",
        "command": "python bench/bench_mondrian.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "options": {"quick": args.quick, "skip_peer": args.skip_peer, "backend": args.backend,
                    "warmup": not args.no_warmup, "hepmass_rows": args.hepmass_rows},
        "environment": environment(args, results),
        "notes": [
            "each configuration ran in its own fresh Python subprocess; peak_rss_bytes is that process's "
            "ru_maxrss read right after fit_transform (data loading and warmup included, NCP scoring excluded)",
            "seconds.read: loading the data (Adult: bundled CSV + row filter; HEPMASS: generating it); "
            "encode/partition/generalize/verify: m.report_['seconds']; fit_transform: wall time of the call; "
            "total = read + fit_transform",
            "with warmup (default) one untimed run precedes the timed one in the same process "
            "(Adult: same table; HEPMASS: 20,000 rows); its timings are under 'warmup', its wall time (the "
            "first call: CUDA context, kernel compilation or the disk cache of compiled kernels) is first_call_seconds",
            "transfers: the report's host<->device copies per stage (on the CPU: the arrays that would cross)",
            "NCP: gpuanon.metrics.ncp on the original rows with each run's partition labels; kinds from "
            "gpuanon.table.schema.Schema.from_frame; 'set' is gpuanon's contract, 'arx' is (values-1)/(domain-1)",
            "anonypy timing covers only anonypy.Mondrian(df, qis, sensitive).partition(k), with categorical "
            "QIs converted to pandas 'category' beforehand (untimed); each peer config ran once",
        ],
        "runs": [r for r in results if r.get("kind") == "ours"],
        "peer_runs": [r for r in results if r.get("kind") == "peer"],
        "comparison": comps,
        "targets": tg,
        "all_measured_targets_pass": all(t["pass"] for t in tg if t["pass"] is not None),
        "targets_not_measured": [t["name"] for t in tg if t["pass"] is None],
        "errors": [r for r in results if "error" in r],
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    text = json.dumps(doc, indent=2)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
        log(f"wrote {args.out}")
    sys.stdout.write(text + "\n")
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
