"""bench/gpu_check.py's measured parts: each runs in its own interpreter (``gpu_check.py --one CFG``)
and prints its result on a marked line; a part with two phases (cold, warm) prints the first phase's
result as soon as it has it, so a part killed by its time limit still leaves what it finished."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import util

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _common import report_result  # noqa: E402
from _gpu_attack import run_attacks  # noqa: E402
from _gpu_risk import run_risk, run_suda  # noqa: E402

QI_HEP = [f"f{i}" for i in range(28)]


def _sync() -> None:
    cp = sys.modules.get("cupy")  # only when gpuanon already loaded it
    if cp is not None:
        from gpuanon.backend import synchronize

        synchronize()


def _transfers(rep: dict) -> dict:
    """The report's copy counts, whatever keys this version has (syncs where counted)."""
    t = dict(rep.get("transfers") or {})
    keep = {k: t[k] for k in ("counted", "calls", "bytes", "to_host_bytes", "to_device_bytes") if k in t}
    for k, v in t.items():
        if "sync" in k or k in ("device_ops", "operations"):
            keep[k] = v
    keep["stages"] = t.get("stages", {})
    return keep


def _mondrian(cfg, backend):
    from gpuanon import Mondrian

    return Mondrian(k=cfg["k"], quasi_identifiers=cfg["qis"], sensitive=cfg["sensitive"],
                    output_format=cfg["format"], backend=backend, progress=False, **cfg.get("extra", {}))


def _data(cfg):
    from gpuanon import datasets as ds

    if cfg["dataset"] == "adult":
        return ds.load_adult()
    return ds.make_hepmass(int(cfg["rows"]), random_state=0)


class SyncSites:
    """Where each counted copy or sync came from: ``{"stage direction": {"file:line <- file:line": n}}``
    (the first two frames outside ``gpuanon/backend.py``), recorded by wrapping the backend's counter
    (a frame walk, microseconds a call). It names the site when a stage's count differs from the
    device double's."""

    def __init__(self):
        self.sites: dict = {}

    def __enter__(self):
        from gpuanon import backend as B

        self._b, self._orig = B, B._count

        def count(direction, a, device):
            if device:
                f, where = sys._getframe(1), []
                while f is not None and len(where) < 2:
                    if not f.f_code.co_filename.endswith(os.path.join("gpuanon", "backend.py")):
                        where.append(f"{os.path.relpath(f.f_code.co_filename, REPO)}:{f.f_lineno}")
                    f = f.f_back
                per = self.sites.setdefault(f"{B.current_stage()} {direction}", {})
                key = " <- ".join(where)
                per[key] = per.get(key, 0) + 1
            return self._orig(direction, a, device)

        B._count = count
        return self

    def __exit__(self, *exc):
        self._b._count = self._orig
        return False


def profiled(fn, top: int = 25) -> dict:
    """One more run of ``fn()`` under cProfile: the ``top`` functions by own time and by cumulative
    time, as text lines (on a device, time waiting for the GPU shows at the sync that waits)."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.runcall(fn)
    _sync()
    wall = round(time.perf_counter() - t, 3)
    out = {"seconds_under_profile": wall}
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
        out[key] = [ln for ln in buf.getvalue().splitlines() if ln.strip()][-top:]
    return out


def _timed_fit(cfg, df, backend, sites: bool = False) -> tuple[dict, object, object]:
    m = _mondrian(cfg, backend)
    rec = SyncSites() if sites else None
    _sync()
    t = time.perf_counter()
    if rec is not None:
        with rec:
            out = m.fit_transform(df)
    else:
        out = m.fit_transform(df)
    _sync()
    wall = time.perf_counter() - t
    rep = m.report_
    res = {"fit_transform": round(wall, 6), "stages": rep["seconds"], "transfers": _transfers(rep),
           "backend": rep["backend"], "n_classes": int(rep["n_classes"]), "achieved_k": rep["achieved"]["k"]}
    if rec is not None:
        res["sync_sites"] = rec.sites
    return res, m, out


def run_mondrian(cfg: dict) -> dict:
    import numpy as np

    df = _data(cfg)
    res = {"rows": int(len(df)), "columns": int(df.shape[1])}
    res["cold"], _, _ = _timed_fit(cfg, df, cfg["backend"])
    report_result({**res, "partial": "cold only"})  # kept if the warm run is cut off
    res["warm"], m, out = _timed_fit(cfg, df, cfg["backend"], sites=cfg["backend"] == "gpu")
    for _ in range(int(cfg.get("repeat", 0))):  # more warm runs: the best one counts (small tables)
        again, _, _ = _timed_fit(cfg, df, cfg["backend"])
        res.setdefault("warm_runs", []).append(again["fit_transform"])
    if res.get("warm_runs"):
        res["warm_best"] = min([res["warm"]["fit_transform"], *res["warm_runs"]])
    if cfg.get("profile"):  # where the warm time goes on the host (after the figures above are kept)
        report_result({**res, "partial": "profile pending"})
        res["profile"] = profiled(lambda: _mondrian(cfg, cfg["backend"]).fit_transform(df))
    res["compile_and_first_call_extra_s"] = round(res["cold"]["fit_transform"] - res["warm"]["fit_transform"], 6)
    # the first launches of the device kernels (NVRTC compile, load, one run), timed apart by the estimator
    res["kernel_compile_s"] = res["cold"]["stages"].get("kernel_compile", 0.0)
    if cfg["dataset"] == "hepmass" and cfg["backend"] == "gpu":  # a CPU run's counts are simulated copies
        try:
            res["budgets"] = budgets(m)
        except Exception as exc:  # the timings above are kept whatever happens here
            res["budgets"] = {"all_ok": None, "error": f"{type(exc).__name__}: {exc}"}
    if cfg.get("compare_cpu"):
        cpu, mc, oc = _timed_fit(cfg, df, "cpu")
        res["cpu"] = {"fit_transform": cpu["fit_transform"], "stages": cpu["stages"]}
        same_labels = bool(np.array_equal(np.asarray(m.labels_), np.asarray(mc.labels_)))
        same_out = bool(oc.equals(out))
        res["equal_to_cpu"] = {"labels": same_labels, "output": same_out}
    return res


#: the device double's counts (bench/device_counts.py: HEPMASS-shaped x 28, k = 10, minmax, as here)
DOUBLE_COUNTS = os.path.join(REPO, "bench", "results", "device_double_counts.json")
SYNCS_PER_LEVEL, SYNCS_PER_ATTEMPT = 2, 2  # tests/test_device_double.py's per-level bound


def budgets(m) -> dict:
    """The device double's sync budgets re-checked on this run (syncs counted by the same backend
    hooks): every stage but the partition makes as many syncs as on the double (they do not depend
    on the rows, but for the metrics stage's one read per group of columns, :func:`metric_groups`);
    the partition at most 2 per level and 2 per cut attempt."""
    with open(DOUBLE_COUNTS) as fh:
        first = json.load(fh)["runs"][0]
    double, double_rows = first["per_stage"], int(first["rows"])
    got = {s: v.get("syncs", 0) for s, v in m.report_["transfers"]["stages"].items()}
    info = m.partition_info_
    out = {}
    for st in sorted((set(got) | set(double)) - {"labels_"}):  # labels_: read after the fit, when asked
        if st == "partition":
            bound = SYNCS_PER_LEVEL * info["levels"] + SYNCS_PER_ATTEMPT * info["attempts"]
            out[st] = {"device": got.get(st, 0), "bound": bound, "ok": got.get(st, 0) <= bound}
        else:
            want = double.get(st, {}).get("syncs_counted", 0)
            if st == "metrics":  # one read per group of sorted columns: more groups at more rows
                want += metric_groups(m, m.table_.n_rows) - metric_groups(m, double_rows)
            out[st] = {"device": got.get(st, 0), "double": want, "ok": got.get(st, 0) == want}
    out["all_ok"] = all(v["ok"] for v in out.values())
    return out


def metric_groups(m, n_rows: int) -> int:
    """The metrics stage's grouped column reads (gpuanon/metrics/runs.py ``column_groups``) for this
    fit's QI keys at ``n_rows`` rows: the H100's fifth metrics sync at 10.5M x 28 was the second group."""
    from gpuanon.metrics.runs import column_groups

    keys = m.table_.keys  # (columns, rows) on the device: only its shape and dtype are read
    return len(column_groups([n_rows * keys.dtype.itemsize] * int(keys.shape[0])))


def run_distpab(cfg: dict) -> dict:
    import bench_distpab

    one = {"rows": cfg["rows"], "mode": "inprocess", "backend": cfg["backend"]}
    pick = ("seconds", "transfers", "phi", "axis", "rows_per_entity", "output_dtype")
    cold = bench_distpab.run_hepmass(one)
    res = {"rows": cfg["rows"], "n_entities": cold["n_entities"], "cold": {k: cold.get(k) for k in pick}}
    report_result({**res, "partial": "cold only"})
    warm = bench_distpab.run_hepmass(one)
    return {**res, "warm": {k: warm.get(k) for k in pick}}


def run_cli(cfg: dict) -> dict:
    from gpuanon.datasets import make_hepmass

    work = tempfile.mkdtemp(prefix="gpu_check_cli_")
    try:
        src = os.path.join(work, "in.parquet")
        make_hepmass(int(cfg["rows"]), random_state=0).to_parquet(src, index=False)
        runs = {}
        for name in ("cold", "warm"):
            dest, rep = os.path.join(work, f"out_{name}.parquet"), os.path.join(work, f"rep_{name}.json")
            cmd = [sys.executable, "-m", "gpuanon", "anonymize", src, "--backend", cfg["backend"], "--qi",
                   ",".join(QI_HEP), "--sensitive", "label", "--k", "10", "--format", "minmax", "--out", dest,
                   "--report", rep, "-q"]
            t = time.perf_counter()
            p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=cfg["timeout"])
            wall = time.perf_counter() - t
            if p.returncode != 0:
                raise RuntimeError(f"gpuanon anonymize exited {p.returncode}: {p.stderr.strip()[-1500:]}")
            with open(rep) as fh:
                r = json.load(fh)
            runs[name] = {"process_wall_s": round(wall, 3), "seconds": r.get("seconds"),
                          "backend": r.get("backend"), "transfers": _transfers(r), "bytes_out": os.path.getsize(dest)}
            if name == "cold":
                report_result({"rows": cfg["rows"], **runs, "partial": "cold only"})
        return {"rows": cfg["rows"], "command": "gpuanon anonymize in.parquet --backend "
                f"{cfg['backend']} --qi f0..f27 --sensitive label --k 10 --format minmax --out out.parquet",
                **runs}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_cluster(cfg: dict) -> dict:
    import numpy as np

    from gpuanon import Mondrian
    from gpuanon.datasets import make_hepmass

    df = make_hepmass(int(cfg["rows"]), random_state=0)
    kw = dict(k=10, quasi_identifiers=QI_HEP, sensitive="label", output_format="minmax", backend=cfg["backend"],
              progress=False)
    one, m1, o1 = _timed_fit({"k": 10, "qis": QI_HEP, "sensitive": "label", "format": "minmax"}, df,
                             cfg["backend"])
    t = time.perf_counter()
    mc = Mondrian(cluster=cfg["cluster"], **kw)
    oc = mc.fit_transform(df)
    _sync()
    wall = time.perf_counter() - t
    return {"rows": cfg["rows"], "cluster": cfg["cluster"], "one_process_fit_transform_s": one["fit_transform"],
            "cluster_fit_transform_s": round(wall, 3), "cluster_seconds": mc.report_.get("seconds"),
            "equal_to_one_process": {"labels": bool(np.array_equal(np.asarray(m1.labels_), np.asarray(mc.labels_))),
                                     "output": bool(o1.reset_index(drop=True).astype(str).equals(
                                         oc.reset_index(drop=True).astype(str)))}}


def run_threshold(cfg: dict) -> dict:
    from gpuanon.datasets import make_hepmass

    mk = {"k": 10, "qis": QI_HEP, "sensitive": "label", "format": "minmax"}
    _timed_fit(mk, make_hepmass(cfg["sizes"][0], random_state=1), cfg["backend"])  # warm-up: compile
    rows = []
    for n in cfg["sizes"]:
        df = make_hepmass(n, random_state=0)
        best = {}
        for be in ("cpu", cfg["backend"]):
            best[be] = min(_timed_fit(mk, df, be)[0]["fit_transform"] for _ in range(2 if n <= 100_000 else 1))
        rows.append({"rows": n, "cpu_s": best["cpu"], "device_s": best[cfg["backend"]]})
        report_result({"backend": cfg["backend"], "runs": rows, "threshold_rows": None, "partial": f"up to {n} rows"})
    faster = [r["rows"] for i, r in enumerate(rows) if all(x["device_s"] < x["cpu_s"] for x in rows[i:])]
    return {"backend": cfg["backend"], "runs": rows, "threshold_rows": faster[0] if faster else None,
            "note": "smallest measured size from which the device's warm fit_transform beats the CPU's at every "
                    "larger measured size (None: never); gpuanon's default is backend.GPU_MIN_ROWS"}


def run_env(cfg: dict) -> dict:
    from gpuanon.backend import GPU_MIN_ROWS, cudf_module, get_backend, gpu_status

    ok, why = gpu_status()
    out = {"gpu_usable": ok, "gpu_reason": why, "gpu_min_rows_default": GPU_MIN_ROWS}
    if cfg["backend"] == "gpu" and ok:
        import cupy

        rt = cupy.cuda.runtime
        be = get_backend("gpu", quiet=True)
        free, total = rt.memGetInfo()
        out.update(device=be.device, driver_version=rt.driverGetVersion(), cuda_runtime_version=rt.runtimeGetVersion(),
                   nvrtc_version=".".join(map(str, cupy.cuda.nvrtc.getVersion())), cupy=cupy.__version__,
                   gpu_memory_total_bytes=int(total), compute_capability=cupy.cuda.Device().compute_capability)
        cudf = cudf_module()
        out["cudf"] = getattr(cudf, "__version__", None)
        if cudf is None and util.find_spec("cudf") is not None:  # installed but not usable: say why
            try:
                import cudf  # noqa: F401
            except Exception as exc:
                out["cudf_error"] = f"{type(exc).__name__}: {exc}"[:300]
        try:  # CuPy < 14.1 refuses an int64 scatter-add, which every fit uses
            a = cupy.zeros(3, dtype=cupy.int64)
            cupy.add.at(a, cupy.asarray([0, 2, 2]), cupy.asarray([1, 2**40, 3], dtype=cupy.int64))
            out["add_at_int64"] = a.get().tolist() == [1, 0, 2**40 + 3]
        except Exception as exc:  # the probe's failure is the finding
            out["add_at_int64"] = f"{type(exc).__name__}: {exc}"[:300]
        try:
            out["bandwidth_gb_s"] = bandwidth(cupy)
        except Exception as exc:
            out["bandwidth_gb_s"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def bandwidth(cupy, mib: int = 512) -> dict:
    """GB/s of one ``mib`` MiB copy each way, best of 3: into a fresh NumPy array (``a.get()``, as
    ``gpuanon.backend.to_host`` does), into a reused pageable array, and into pinned memory from
    CuPy's pinned pool (``cupyx.empty_pinned``); up from a pageable and from a pinned array."""
    import cupyx
    import numpy as np

    n = mib * 2**20 // 4
    host = np.ones(n, dtype=np.float32)
    dev = cupy.asarray(host)
    reuse, pinned = np.empty_like(host), cupyx.empty_pinned(n, dtype=np.float32)
    pinned[:] = host

    def best(fn):
        times = []
        for _ in range(3):
            cupy.cuda.Device().synchronize()
            t = time.perf_counter()
            fn()
            cupy.cuda.Device().synchronize()
            times.append(time.perf_counter() - t)
        return round(n * 4 / min(times) / 1e9, 2)

    return {"mib": mib, "down_fresh": best(lambda: dev.get()), "down_reused": best(lambda: dev.get(out=reuse)),
            "down_pinned": best(lambda: dev.get(out=pinned)), "up_pageable": best(lambda: cupy.asarray(host)),
            "up_pinned": best(lambda: dev.set(pinned))}


PARTS = {"mondrian": run_mondrian, "distpab": run_distpab, "cli": run_cli, "cluster": run_cluster,
         "threshold": run_threshold, "env": run_env, "risk": run_risk,
         "suda": run_suda, "attacks": run_attacks}


def child(cfg: dict) -> None:
    """One part in this interpreter: its result (or its error) on a marked stdout line."""
    try:
        t = time.perf_counter()
        res = PARTS[cfg["part"]](cfg)
        res["part_seconds"] = round(time.perf_counter() - t, 3)
    except Exception as exc:  # reported, not raised: the parent records it and goes on
        import traceback

        res = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2500:]}
    report_result(res)
