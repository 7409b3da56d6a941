#!/usr/bin/env python
"""Benchmark of DISTPAB: the central search against the number of attributes, and the whole
perturbation (local statistics + search + perturbation) of HEPMASS-shaped data with 4 entities.

Run from the repository root::

    python bench/bench_distpab.py                                   # the full set (~3 min, 2 CPU cores)
    python bench/bench_distpab.py --out bench/results/bench_distpab_cpu.json
    python bench/bench_distpab.py --quick                           # smoke run (seconds)
    python bench/bench_distpab.py --backend gpu                     # on a machine with CuPy and a GPU

Every configuration runs in a fresh subprocess (``--one '<json config>'``) so that its peak
memory (``ru_maxrss``) is its own. Progress goes to stderr; one JSON document goes to stdout at
the end (and to ``--out FILE``).

Configurations
--------------
* ``search``: ``S`` = correlation matrix of 20,000 random correlated rows with ``n`` = 8, 16, 28,
  64 attributes; the timed call is ``gpuanon.perturb.search(S)`` (172 angles x n axes, rotation
  matrices included); best of ``--repeat`` (default 3).
* ``hepmass`` / ``mode = inprocess``: ``make_hepmass(rows, random_state=0)`` (untimed,
  ``seconds.generate``) split into 4 contiguous entities of unequal sizes (40/30/20/10 %). Each
  entity extracts its feature matrix and copies it to its device once (``extract_and_copy_up``;
  nothing moves on the CPU) and computes ``local_stats`` (``stats``); the coordinator merges,
  searches and builds the parameters (``search``); each entity perturbs and shuffles its rows,
  its label travelling with them, and the perturbed rows come back to the host
  (``perturb_and_copy_down``). ``total`` is the sum: the copies included. ``transfers``: the
  host <-> device copies per phase (on the CPU, the arrays that would cross).
* ``hepmass`` / ``mode = dask``: the same 4 entity frames through
  ``gpuanon.perturb.perturb_distributed`` on a ``LocalCluster`` (2 in-process workers, one
  thread each, started and stopped inside the call); ``seconds`` are its report's (``place`` =
  scatter, ``total`` includes the cluster start and stop).

``peak_rss_bytes`` is the subprocess's ``ru_maxrss`` after the run (interpreter, data
generation and the run); ``rss_after_generate_bytes`` is the resident size once the data exist.
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
if REPO not in sys.path:
    sys.path.insert(0, REPO)

GIB = 1024 ** 3
SHARES = (0.4, 0.3, 0.2, 0.1)  # rows of the 4 entities

TARGETS = {"search_n28_s": 0.5, "hepmass_10_5M_s": 30.0, "hepmass_10_5M_peak_rss_bytes": 8 * GIB,
           "hepmass_10_5M_gpu_s": 1.0}  # GPU: 10.5M x 28, 4 entities, copies included


def log(msg: str) -> None:
    sys.stderr.write(f"[bench_distpab {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _ru_maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) * (1 if sys.platform == "darwin" else 1024)


def _rss_now() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _sync(xp) -> None:
    if xp.__name__ == "cupy":
        xp.cuda.Device().synchronize()


# ============================================================================ child: one run
def run_search(cfg: dict) -> dict:
    import numpy as np

    from gpuanon.backend import get_backend
    from gpuanon.perturb import search

    be = get_backend(cfg["backend"], quiet=True)
    n = cfg["n"]
    rng = np.random.default_rng(n)
    X = rng.normal(size=(20_000, n)) @ rng.normal(size=(n, n))
    S = np.corrcoef(X, rowvar=False)
    runs = []
    res = None
    for _ in range(cfg["repeat"]):
        _sync(be.xp)
        t = time.perf_counter()
        res = search(S, xp=be.xp)
        _sync(be.xp)
        runs.append(time.perf_counter() - t)
    return {"kind": "search", "n": n, "angles": len(res.angles), "pairs": len(res.angles) * n,
            "backend": be.name, "device": be.device, "seconds": min(runs), "all_runs": runs,
            "phi": res.phi, "angle_degrees": res.angle, "axis": res.axis,
            "peak_rss_bytes": _ru_maxrss_bytes()}


def _entities(df):
    import numpy as np

    m = len(df)
    cuts = np.cumsum([int(round(s * m)) for s in SHARES])[:-1]
    bounds = [0, *cuts.tolist(), m]
    return [df.iloc[bounds[i]:bounds[i + 1]] for i in range(len(SHARES))]


def run_hepmass(cfg: dict) -> dict:
    import numpy as np

    from gpuanon.backend import get_backend
    from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass

    be = get_backend(cfg["backend"], quiet=True)
    t = time.perf_counter()
    df = make_hepmass(cfg["rows"], random_state=0)
    gen = time.perf_counter() - t
    rss_gen = _rss_now()
    frames = _entities(df)
    feats = list(HEPMASS_FEATURES)
    out = {"kind": "hepmass", "mode": cfg["mode"], "rows": cfg["rows"], "columns": len(feats),
           "n_entities": len(frames), "rows_per_entity": [len(f) for f in frames],
           "backend": be.name, "device": be.device}
    if cfg["mode"] == "inprocess":
        from gpuanon.perturb import DISTPAB, local_stats
        from gpuanon.perturb.distpab import frame_matrix

        from gpuanon.backend import count_transfers, stage, to_device, to_host

        model = DISTPAB(noise=0.3, random_state=0, backend=cfg["backend"])
        with count_transfers(simulate=not be.is_gpu) as tlog:
            t0 = time.perf_counter()
            mats = [frame_matrix(f, feats) for f in frames]
            with stage("copy_up"):  # each entity's rows go to its device once, for both phases
                mats = [to_device(X, be.xp) for X in mats]
            _sync(be.xp)
            t1 = time.perf_counter()
            with stage("stats"):
                stats = [local_stats(X, be.xp) for X in mats]
            t2 = time.perf_counter()
            with stage("search"):
                model.fit_stats(stats, feature_names=feats)
            t3 = time.perf_counter()
            results = []
            with stage("perturb"):
                for i, (f, X) in enumerate(zip(frames, mats)):
                    Xp, perm = model.perturb(X, entity=i)
                    results.append((Xp, f["label"].to_numpy()[perm]))
            with stage("copy_down"):
                results = [(to_host(Xp), lab) for Xp, lab in results]
            _sync(be.xp)
            t4 = time.perf_counter()
        out["transfers"] = tlog.to_dict()
        secs = {"extract_and_copy_up": t1 - t0, "stats": t2 - t1, "search": t3 - t2,
                "perturb_and_copy_down": t4 - t3, "total": t4 - t0}
        rep = model.report()
        out.update(phi=rep["phi"], angle_degrees=rep["angle_degrees"], axis=rep["axis"],
                   bytes_per_entity=rep["bytes_per_entity"],
                   output_dtype=str(results[0][0].dtype),
                   label_balance=float(np.mean(np.concatenate([r[1] for r in results]))))
    else:
        from gpuanon.perturb import perturb_distributed

        outs, rep = perturb_distributed(frames, feats, label="label", noise=0.3, random_state=0,
                                        backend=cfg["backend"])
        secs = dict(rep["seconds"])
        out.update(phi=rep["phi"], angle_degrees=rep["angle_degrees"], axis=rep["axis"],
                   bytes_per_entity=rep["bytes_per_entity"], n_workers=rep["n_workers"],
                   output_dtype=str(outs[0][feats[0]].dtype),
                   label_balance=float(np.mean(np.concatenate([o["label"].to_numpy() for o in outs]))))
    out.update(seconds={"generate": gen, **secs}, rss_after_generate_bytes=rss_gen,
               peak_rss_bytes=_ru_maxrss_bytes())
    out["peak_rss_gib"] = out["peak_rss_bytes"] / GIB
    return out


def child(cfg: dict) -> None:
    try:
        res = run_search(cfg) if cfg["kind"] == "search" else run_hepmass(cfg)
    except Exception as exc:  # reported, not raised: the parent collects errors
        import traceback

        res = {**cfg, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
    report_result(res)


# ============================================================================ parent
def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("numpy", "pandas", "dask", "distributed", "cupy"):
        try:
            out[pkg] = metadata.version(pkg if pkg != "cupy" else "cupy")
        except metadata.PackageNotFoundError:
            if pkg != "cupy":
                out[pkg] = None
    import gpuanon

    out["gpuanon"] = gpuanon.__version__
    return out


def _rounded(x):
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--quick", action="store_true", help="n = 8, 28 and 200,000 HEPMASS rows only")
    ap.add_argument("--rows", default="3310000,10500000", help="HEPMASS row counts, comma-separated")
    ap.add_argument("--modes", default="inprocess,dask", help="inprocess and/or dask")
    ap.add_argument("--repeat", type=int, default=3, help="search repetitions (best reported)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per configuration")
    ap.add_argument("--out", help="also write the JSON document here")
    a = ap.parse_args(argv)
    if a.one:
        child(json.loads(a.one))
        return 0

    t_all = time.perf_counter()
    ns = (8, 28) if a.quick else (8, 16, 28, 64)
    rows = [200_000] if a.quick else [int(r) for r in a.rows.split(",") if r]
    modes = [m for m in a.modes.split(",") if m]
    try:
        import distributed  # noqa: F401

        has_dask = True
    except ImportError:
        has_dask = False
    cfgs = [{"kind": "search", "n": n, "repeat": a.repeat, "backend": a.backend} for n in ns]
    skipped = []
    for r in rows:
        for mode in modes:
            if mode == "dask" and not has_dask:
                skipped.append({"rows": r, "mode": mode, "why": "dask/distributed not installed"})
                continue
            cfgs.append({"kind": "hepmass", "rows": r, "mode": mode, "backend": a.backend})

    results = []
    for cfg in cfgs:
        log(f"running {json.dumps(cfg)}")
        res = spawn(__file__, cfg, a.timeout, stderr_tail=4000)
        log(f"  -> {json.dumps(_rounded(res.get('seconds')))} peak_rss={res.get('peak_rss_bytes')}"
            + (f" ERROR {res['error']}" if "error" in res else ""))
        results.append(res)

    errors = [r for r in results if "error" in r]
    ok = [r for r in results if "error" not in r]
    targets = []
    s28 = [r for r in ok if r["kind"] == "search" and r["n"] == 28]
    targets.append({"name": "search_n28", "measure": "seconds, best of repeats", "target_below": TARGETS["search_n28_s"],
                    "measured": s28[0]["seconds"] if s28 else None,
                    "pass": (s28[0]["seconds"] < TARGETS["search_n28_s"]) if s28 else None})
    for mode in modes:
        h = [r for r in ok if r["kind"] == "hepmass" and r["rows"] == 10_500_000 and r["mode"] == mode]
        limit = TARGETS["hepmass_10_5M_gpu_s"] if (h and h[0]["backend"] == "gpu" and mode == "inprocess") \
            else TARGETS["hepmass_10_5M_s"]
        targets.append({"name": f"hepmass_10.5M_{mode}_seconds",
                        "measure": "seconds.total (stats + search + perturb, copies included)",
                        "target_below": limit,
                        "measured": h[0]["seconds"]["total"] if h else None,
                        "pass": (h[0]["seconds"]["total"] < limit) if h else None})
        targets.append({"name": f"hepmass_10.5M_{mode}_peak_rss", "measure": "peak RSS bytes of the run's process",
                        "target_below": TARGETS["hepmass_10_5M_peak_rss_bytes"],
                        "measured": h[0]["peak_rss_bytes"] if h else None,
                        "pass": (h[0]["peak_rss_bytes"] < TARGETS["hepmass_10_5M_peak_rss_bytes"]) if h else None})
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = None
    devices = sorted({r["device"] for r in ok})
    doc = {
        "benchmark": "distpab",
        "environment": {
            "backend_requested": a.backend,
            "backend": sorted({r["backend"] for r in ok}),
            "device": devices[0] if len(devices) == 1 else devices,
            "versions": _versions(),
            "os": f"{platform.system()} {platform.release()}",
            "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(), "cpu_count_usable": usable,
            "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "search": [_rounded(r) for r in ok if r["kind"] == "search"],
        "hepmass": [_rounded(r) for r in ok if r["kind"] == "hepmass"],
        "targets": targets,
        "all_measured_targets_pass": all(t["pass"] for t in targets if t["pass"] is not None),
        "skipped": skipped,
        "errors": errors,
        "wall_seconds": round(time.perf_counter() - t_all, 2),
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
