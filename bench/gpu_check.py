#!/usr/bin/env python
"""One command that checks and measures a GPU machine (under 9 minutes on one H100).

Run from a source checkout, no install step::

    PYTHONPATH=. python bench/gpu_check.py --out DIR
    PYTHONPATH=. python bench/gpu_check.py --out DIR --backend cpu --small   # the same code paths, tiny, on the CPU

It runs ``tests/test_gpu.py``; Mondrian on Adult (k = 3) and HEPMASS-shaped 1M and 10.5M x 28
(k = 10, minmax), each cold (the first call of a fresh process with an empty CuPy kernel cache:
CUDA context and NVRTC compilation included) and warm, with the report's per-stage seconds and
its ``transfers`` (copies, and syncs where the report counts them); the 1M output against a CPU
run of the same table; DISTPAB 10.5M x 28 with 4 entities; the command line Parquet -> Parquet
at 10.5M (with cuDF); a one-GPU ``LocalCUDACluster`` against one process (with dask-cuda); and the
row count where the GPU's warm ``fit_transform`` passes the CPU's (the ``auto`` threshold). An
absent optional part (cuDF, dask-cuda) is skipped with a line saying so; when the time budget
runs low the remaining parts are skipped the same way. Every measured part runs in its own
subprocess (``--one``), so a crash or a timeout costs that part only.

It also measures re-identification risk on HEPMASS-shaped 10.5M x 28 and SUDA2 on Adult with 10 QIs
(``bench/_gpu_risk.py``). Writes ``DIR/gpu_check.json`` and ``DIR/gpu_check.md`` (versions, the parts,
the targets of issues 20 and 23 marked met / not met). See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata, util

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_model, report_result, spawn  # noqa: E402
from _gpu_risk import RISK_TARGETS, risk_figures, risk_measured, run_risk, run_suda  # noqa: E402
if REPO not in sys.path:
    sys.path.insert(0, REPO)

BUDGET_S = 510.0  # 8.5 minutes: the parts after it are skipped with a line
FULL = {"hep_1m": 1_000_000, "hep_big": 10_500_000, "distpab": 10_500_000, "cli": 10_500_000,
        "cluster": 1_000_000, "threshold": [25_000, 50_000, 100_000, 200_000, 400_000, 800_000]}
SMALL = {"hep_1m": 20_000, "hep_big": 40_000, "distpab": 40_000, "cli": 20_000, "cluster": 20_000,
         "threshold": [2_000, 8_000]}
#: (name, what is measured, limit in seconds); measured on the full sizes only
TARGETS = [("hepmass_10.5M_fit_transform_warm", "Mondrian 10.5M x 28 k=10 minmax, warm fit_transform", 1.0),
           ("hepmass_10.5M_partition_warm", "its partition stage, warm", 0.3),
           ("adult_k3_fit_transform_warm", "Mondrian Adult k=3, warm fit_transform", 0.05),
           ("distpab_10.5M_warm", "DISTPAB 10.5M x 28, 4 entities, copies included, warm", 1.0),
           ("cli_parquet_10.5M_warm", "gpuanon anonymize Parquet -> Parquet 10.5M (cuDF), report total, warm", 3.0),
           *RISK_TARGETS]
QI_HEP = [f"f{i}" for i in range(28)]


def log(msg: str) -> None:
    sys.stderr.write(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


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


# ============================================================================ children: one part each
def _mondrian(cfg, backend):
    from gpuanon import Mondrian

    return Mondrian(k=cfg["k"], quasi_identifiers=cfg["qis"], sensitive=cfg["sensitive"],
                    output_format=cfg["format"], backend=backend, progress=False, **cfg.get("extra", {}))


def _data(cfg):
    from gpuanon import datasets as ds

    if cfg["dataset"] == "adult":
        return ds.load_adult()
    return ds.make_hepmass(int(cfg["rows"]), random_state=0)


def _timed_fit(cfg, df, backend) -> tuple[dict, object, object]:
    m = _mondrian(cfg, backend)
    _sync()
    t = time.perf_counter()
    out = m.fit_transform(df)
    _sync()
    wall = time.perf_counter() - t
    rep = m.report_
    return ({"fit_transform": round(wall, 6), "stages": rep["seconds"], "transfers": _transfers(rep),
             "backend": rep["backend"], "n_classes": int(rep["n_classes"]), "achieved_k": rep["achieved"]["k"]},
            m, out)


def run_mondrian(cfg: dict) -> dict:
    import numpy as np

    df = _data(cfg)
    res = {"rows": int(len(df)), "columns": int(df.shape[1])}
    res["cold"], _, _ = _timed_fit(cfg, df, cfg["backend"])
    res["warm"], m, out = _timed_fit(cfg, df, cfg["backend"])
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
    on the rows); the partition at most 2 per level and 2 per cut attempt."""
    with open(DOUBLE_COUNTS) as fh:
        double = json.load(fh)["runs"][0]["per_stage"]
    got = {s: v.get("syncs", 0) for s, v in m.report_["transfers"]["stages"].items()}
    info = m.partition_info_
    out = {}
    for st in sorted((set(got) | set(double)) - {"labels_"}):  # labels_: read after the fit, when asked
        if st == "partition":
            bound = SYNCS_PER_LEVEL * info["levels"] + SYNCS_PER_ATTEMPT * info["attempts"]
            out[st] = {"device": got.get(st, 0), "bound": bound, "ok": got.get(st, 0) <= bound}
        else:
            want = double.get(st, {}).get("syncs_counted", 0)
            out[st] = {"device": got.get(st, 0), "double": want, "ok": got.get(st, 0) == want}
    out["all_ok"] = all(v["ok"] for v in out.values())
    return out


def run_distpab(cfg: dict) -> dict:
    import bench_distpab

    one = {"rows": cfg["rows"], "mode": "inprocess", "backend": cfg["backend"]}
    cold = bench_distpab.run_hepmass(one)
    warm = bench_distpab.run_hepmass(one)
    pick = ("seconds", "transfers", "phi", "axis", "rows_per_entity", "output_dtype")
    return {"rows": cfg["rows"], "n_entities": cold["n_entities"], "cold": {k: cold.get(k) for k in pick},
            "warm": {k: warm.get(k) for k in pick}}


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
    return out


PARTS = {"mondrian": run_mondrian, "distpab": run_distpab, "cli": run_cli, "cluster": run_cluster,
         "threshold": run_threshold, "env": run_env, "risk": run_risk,
         "suda": run_suda}


def child(cfg: dict) -> None:
    try:
        t = time.perf_counter()
        res = PARTS[cfg["part"]](cfg)
        res["part_seconds"] = round(time.perf_counter() - t, 3)
    except Exception as exc:  # reported, not raised: the parent records it and goes on
        import traceback

        res = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2500:]}
    report_result(res)


# ============================================================================ parent
def _version(*dists):
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return None


def versions() -> dict:
    return {"python": platform.python_version(), "numpy": _version("numpy"), "pandas": _version("pandas"),
            "pyarrow": _version("pyarrow"), "scipy": _version("scipy"), "scikit-learn": _version("scikit-learn"),
            "cupy": _version("cupy-cuda12x", "cupy-cuda13x", "cupy"), "cudf": _version("cudf-cu12", "cudf-cu13", "cudf"),
            "dask": _version("dask"), "distributed": _version("distributed"),
            "dask-cuda": _version("dask-cuda", "dask_cuda"), "torch": _version("torch")}


def run_pytest(timeout: float) -> dict:
    cmd = [sys.executable, "-m", "pytest", "tests/test_gpu.py", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-rs"]
    env = dict(os.environ, PYTHONPATH=REPO + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH")
                                              else ""))
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return {"error": f"timed out after {timeout:.0f} s", "tail": str(exc.stdout or "")[-2000:]}
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    summary = next((ln.strip("= ") for ln in reversed(lines) if any(w in ln for w in ("passed", "failed", "skipped",
                                                                                            "error", "no tests"))), "")
    fails = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    return {"exit_status": p.returncode, "summary": summary, "failures": fails[:30],
            "seconds": round(time.perf_counter() - t, 2), "tail": "\n".join(lines[-40:]) if p.returncode else ""}


def targets(parts: dict, small: bool, backend: str) -> list[dict]:
    def get(*path):
        cur = parts
        for k in path:
            cur = cur.get(k) if isinstance(cur, dict) else None
        return cur

    measured = {"hepmass_10.5M_fit_transform_warm": get("mondrian_hepmass_big", "warm", "fit_transform"),
                "hepmass_10.5M_partition_warm": get("mondrian_hepmass_big", "warm", "stages", "partition"),
                "adult_k3_fit_transform_warm": get("mondrian_adult", "warm", "fit_transform"),
                "distpab_10.5M_warm": get("distpab", "warm", "seconds", "total"),
                "cli_parquet_10.5M_warm": get("cli", "warm", "seconds", "total"), **risk_measured(get)}
    if get("cli", "cudf_present") is False:
        measured["cli_parquet_10.5M_warm"] = None
    out = []
    for name, what, limit in TARGETS:
        v = measured[name]
        note = ("" if v is None else "CPU run: the targets are for the GPU" if backend != "gpu"
                else "small run: not the target's size" if small and not name.startswith("adult") else "")
        out.append({"name": name, "measure": what, "target_s": limit, "measured_s": v,
                    "met": None if v is None or note else bool(v < limit), "note": note})
    return out


def markdown(doc: dict) -> str:
    env, parts = doc["environment"], doc["parts"]
    lines = [f"# gpu_check ({doc['mode']}, backend {doc['backend']})", "",
             "| item | value |", "| --- | --- |"]
    for k in ("device", "driver_version", "cuda_runtime_version", "nvrtc_version", "compute_capability"):
        lines.append(f"| {k} | {env.get('device_info', {}).get(k)} |")
    for k, v in env["versions"].items():
        lines.append(f"| {k} | {v} |")
    lines += [f"| cpu | {env['cpu_model']} ({env['cpu_count']} cores) |", f"| wall seconds | {doc['wall_seconds']} |",
              "", "## Parts", "", "| part | status | figures |", "| --- | --- | --- |"]
    for name, p in parts.items():
        status = "skipped" if "skipped" in p else "error" if "error" in p else "ok"
        lines.append(f"| {name} | {status} | {_figures(name, p)} |")
    lines += ["", "## Targets", "", "| target | limit (s) | measured (s) | met |", "| --- | --- | --- | --- |"]
    for t in doc["targets"]:
        met = {True: "met", False: "not met", None: "not measured"}[t["met"]]
        lines.append(f"| {t['measure']} | {t['target_s']} | {t['measured_s']} | {met}{' (' + t['note'] + ')' if t['note'] else ''} |")
    return "\n".join(lines) + "\n"


def _figures(name: str, p: dict) -> str:
    if "skipped" in p:
        return p["skipped"]
    if "error" in p:
        return p["error"].replace("|", "/")[:300]
    if name == "pytest":
        return f"{p.get('summary')} (exit {p.get('exit_status')}, {p.get('seconds')} s)"
    if name.startswith("mondrian"):
        c, w = p["cold"], p["warm"]
        ws = w["stages"]
        sy = {k: v for k, v in w["transfers"].items() if "sync" in k}
        s = (f"{p['rows']} rows: cold {c['fit_transform']} s (kernel compile {p.get('kernel_compile_s', 0.0)} s), "
             f"warm {w['fit_transform']} s (encode {ws.get('encode')}, "
             f"partition {ws.get('partition')}, generalize {ws.get('generalize')}, verify {ws.get('verify')}); "
             f"warm copies {w['transfers'].get('calls')} / {w['transfers'].get('bytes')} B" + (f"; {sy}" if sy else ""))
        if "equal_to_cpu" in p:
            s += f"; CPU {p['cpu']['fit_transform']} s, equal to CPU {p['equal_to_cpu']}"
        if "budgets" in p:
            bad = [k for k, v in p["budgets"].items() if isinstance(v, dict) and not v["ok"]]
            s += "; syncs per stage as on the double" if not bad else f"; syncs over the double's budget in {bad}"
        return s
    if name == "distpab":
        return (f"{p['rows']} rows x 4 entities: cold {p['cold']['seconds'].get('total'):.4g} s, "
                f"warm {p['warm']['seconds'].get('total'):.4g} s")
    if name == "cli":
        return (f"{p['rows']} rows (cuDF {'present' if p.get('cudf_present') else 'absent'}): cold total "
                f"{p['cold']['seconds'].get('total')} s / process {p['cold']['process_wall_s']} s; warm total "
                f"{p['warm']['seconds'].get('total')} s / process {p['warm']['process_wall_s']} s")
    if name == "cluster":
        return (f"{p['rows']} rows on {p['cluster']}: {p['cluster_fit_transform_s']} s against one process "
                f"{p['one_process_fit_transform_s']} s; equal {p['equal_to_one_process']}")
    if name in ("risk", "suda"):
        return risk_figures(name, p)
    if name == "threshold":
        runs = ", ".join(f"{r['rows']}: cpu {r['cpu_s']:.3g} / device {r['device_s']:.3g}" for r in p["runs"])
        return f"threshold {p['threshold_rows']} rows ({runs})"
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", help="folder for gpu_check.json and gpu_check.md")
    ap.add_argument("--backend", default="gpu", choices=["gpu", "cpu"], help="device backend measured (default gpu)")
    ap.add_argument("--small", action="store_true", help="tiny sizes (seconds): the code paths, not the figures")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds before the rest is skipped ({BUDGET_S:.0f})")
    ap.add_argument("--skip-tests", action="store_true", help="do not run tests/test_gpu.py")
    args = ap.parse_args(argv)
    if args.one:
        child(json.loads(args.one))
        return 0
    if not args.out:
        ap.error("--out DIR is required")
    os.makedirs(args.out, exist_ok=True)
    sizes = SMALL if args.small else FULL
    t0 = time.perf_counter()
    doc = {"mode": "small" if args.small else "full", "backend": args.backend, "budget_s": args.budget,
           "environment": {"versions": versions(), "os": platform.platform(), "cpu_model": cpu_model(),
                           "cpu_count": os.cpu_count()}, "parts": {}}
    have_cudf = util.find_spec("cudf") is not None
    have_dask_cuda = util.find_spec("dask_cuda") is not None
    have_dist = util.find_spec("distributed") is not None
    kernel_cache = tempfile.mkdtemp(prefix="gpu_check_cupy_cache_")

    def left() -> float:
        return args.budget - (time.perf_counter() - t0)

    def part(name: str, cfg: dict | None, cap: float, skip: str = "") -> None:
        if not skip and left() < min(20.0, cap):
            skip = f"skipped: {time.perf_counter() - t0:.0f} s of the {args.budget:.0f} s budget used"
        if skip:
            log(f"{name}: {skip}")
            doc["parts"][name] = {"skipped": skip}
            return
        limit = max(5.0, min(cap, left()))
        log(f"{name} (up to {limit:.0f} s)")
        if cfg is None:
            res = run_pytest(limit)
        else:
            # a fresh process with an empty CuPy kernel cache: the cold call compiles every kernel it uses
            cache = tempfile.mkdtemp(dir=kernel_cache)
            os.environ["CUPY_CACHE_DIR"] = cache
            res = spawn(__file__, {"backend": args.backend, "timeout": limit, **cfg}, timeout=limit + 30,
                        stderr_tail=3000)
        doc["parts"][name] = res
        log(f"{name}: {_figures(name, res)}")

    part("env", {"part": "env"}, 60)
    doc["environment"]["device_info"] = {k: v for k, v in doc["parts"].pop("env").items()}
    info = doc["environment"]["device_info"]
    if args.backend == "gpu" and not info.get("gpu_usable"):
        log(f"no usable GPU: {info.get('gpu_reason') or info.get('error')}; the device parts will fail")
    part("pytest", None, 150, skip="skipped: --skip-tests" if args.skip_tests else "")
    hep = {"part": "mondrian", "dataset": "hepmass", "k": 10, "qis": QI_HEP, "sensitive": "label", "format": "minmax"}
    from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS

    part("mondrian_adult", {"part": "mondrian", "dataset": "adult", "k": 3, "qis": list(ADULT_QUASI_IDENTIFIERS),
                            "sensitive": "income", "format": "range"}, 60)
    part("mondrian_hepmass_1m", {**hep, "rows": sizes["hep_1m"], "compare_cpu": True}, 120)
    part("mondrian_hepmass_big", {**hep, "rows": sizes["hep_big"]}, 120)
    part("distpab", {"part": "distpab", "rows": sizes["distpab"]}, 90)
    no_cudf = args.backend == "gpu" and not have_cudf
    part("cli", {"part": "cli", "rows": sizes["cli"]}, 90,
         skip="skipped: cuDF is not installed (the Parquet -> Parquet target is measured with cuDF)" if no_cudf else "")
    if "cli" in doc["parts"] and "skipped" not in doc["parts"]["cli"]:
        doc["parts"]["cli"]["cudf_present"] = have_cudf
    part("threshold", {"part": "threshold", "sizes": sizes["threshold"]}, 100)
    part("risk", {"part": "risk", "rows": sizes["hep_big"]}, 90)
    part("suda", {"part": "suda"}, 60)
    if args.backend == "gpu":
        skip = "" if have_dask_cuda else "skipped: dask-cuda is not installed"
        cl = "cuda:1"
    else:
        skip = "" if have_dist else "skipped: distributed is not installed"
        cl = "local:1"
    part("cluster", {"part": "cluster", "rows": sizes["cluster"], "cluster": cl}, 90, skip=skip)
    shutil.rmtree(kernel_cache, ignore_errors=True)

    doc["targets"] = targets(doc["parts"], args.small, args.backend)
    doc["errors"] = [n for n, p in doc["parts"].items() if "error" in p]
    doc["wall_seconds"] = round(time.perf_counter() - t0, 1)
    with open(os.path.join(args.out, "gpu_check.json"), "w") as fh:
        json.dump(doc, fh, indent=2, default=str)
    with open(os.path.join(args.out, "gpu_check.md"), "w") as fh:
        fh.write(markdown(doc))
    log(f"wrote {args.out}/gpu_check.json and gpu_check.md in {doc['wall_seconds']} s; errors: {doc['errors'] or 'none'}")
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
