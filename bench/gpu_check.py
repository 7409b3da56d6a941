#!/usr/bin/env python
"""One command that checks and measures a GPU machine, losing nothing to a time limit.

Run from a source checkout, no install step (on a lent machine: ``bash bench/device_run.sh``)::

    PYTHONPATH=. python bench/gpu_check.py --out DIR
    PYTHONPATH=. python bench/gpu_check.py --out DIR --backend cpu --small   # the same code paths, tiny, on the CPU

Parts, in order of value (``PLAN``): ``tests/test_gpu.py``'s device-equals-host tests; Mondrian
HEPMASS-shaped 10.5M x 28 (k = 10, minmax) cold and warm; Adult k = 3; DISTPAB 10.5M x 28; the
re-identification risk of 10.5M x 28; SUDA2 on Adult (M = 10); the attacks (linkability, inference:
10,000 each against a 1M-row release, equal to the CPU's report); the command line Parquet -> Parquet
(with cuDF); a one-GPU ``LocalCUDACluster`` (with dask-cuda); the rest of ``tests/test_gpu.py``; the
1M table against a CPU run; the row count where the GPU's warm ``fit_transform`` passes the CPU's.

Nothing is lost to a timeout: each measured part runs in its own interpreter (``--one``) and prints
its cold result before its warm run, so a part cut off keeps what it finished; the pytest parts write
one JSON line per finished test as it ends (``DIR/tests_live.jsonl``), run with a per-test timeout
where pytest-timeout is installed, and are interrupted (SIGINT) at their limit so pytest still writes
its JUnit XML; after every part ``DIR/gpu_check.json``, ``DIR/summary.json`` and ``DIR/gpu_check.md``
are rewritten atomically. Every part gets at most what is left of ``--budget`` (what remains of the
8 minutes that ``device_run.sh`` also spends installing). See ``bench/README.md`` and ``docs/device.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata, util

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from _common import RESULT_MARK, cpu_model  # noqa: E402
from _gpu_parts import budgets, child  # noqa: E402, F401  (budgets: tests/test_device_double.py)
from _gpu_report import figures, markdown, targets  # noqa: E402

if REPO not in sys.path:
    sys.path.insert(0, REPO)

BUDGET_S = 470.0  # seconds for all parts; device_run.sh passes what is left of its 8 minutes
CPU_SCALE = 3  # --backend cpu (the smoke run on a possibly shared CPU): 3 x every cap and the default budget
RESERVE_S = 5.0  # kept back from every part's limit for the final writes
FULL = {"attacks": (1_000_000, 10_000), "hep_1m": 1_000_000, "hep_big": 10_500_000, "distpab": 10_500_000, "cli": 10_500_000,
        "cluster": 1_000_000, "threshold": [25_000, 50_000, 100_000, 200_000, 400_000, 800_000]}
SMALL = {"attacks": (20_000, 500), "hep_1m": 20_000, "hep_big": 40_000, "distpab": 40_000, "cli": 20_000, "cluster": 20_000,
         "threshold": [2_000, 8_000]}
QI_HEP = [f"f{i}" for i in range(28)]
#: tests/test_gpu.py's device-equals-host tests (pytest -k); the cluster's equality test runs with the rest
EQUAL_TESTS = "(equal or reduceat) and not cluster"
#: (part, time cap in seconds), in order of value
PLAN = [("tests_equal", 150), ("mondrian_hepmass_big", 120), ("mondrian_adult", 60), ("distpab", 90), ("risk", 90),
        ("suda", 60), ("attacks", 120), ("cli", 90), ("cluster", 90), ("tests_rest", 120), ("mondrian_hepmass_1m", 120),
        ("threshold", 100)]
PER_TEST_TIMEOUT_S = 90


def log(msg: str) -> None:
    sys.stderr.write(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def spawn_part(cfg: dict, timeout: float) -> dict:
    """``gpu_check.py --one CFG`` in a fresh interpreter: its last marked result line; at the limit the
    child is killed and the last result it printed (a finished cold run, say) is kept under ``error``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--one", json.dumps(cfg)], cwd=REPO,
                             env=env, stdout=out, stderr=err, text=True, process_group=0)
        try:
            p.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        try:  # the part's whole process group (a cluster's workers too)
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    wall = round(time.perf_counter() - t, 3)
    if stderr:
        sys.stderr.write(stderr[-3000:])
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RESULT_MARK)]
    res = json.loads(lines[-1][len(RESULT_MARK):]) if lines else {}
    res["subprocess_wall_seconds"] = wall
    if timed_out:
        res["error"] = f"timed out after {timeout:.0f} s"
    elif not lines:
        last = [ln for ln in stderr.splitlines() if ln.strip()]
        res["error"] = f"no result from the subprocess: exit status {p.returncode}" + (f": {last[-1]}" if last else "")
    elif "partial" in res:
        res["error"] = f"exit status {p.returncode} after a partial result"
    return res


def run_pytest(name: str, select: str, timeout: float, out_dir: str, files=("tests/test_gpu.py",)) -> dict:
    """pytest on ``files`` (``-k select``): JUnit XML in ``out_dir/junit_<name>.xml``, one JSON line per
    finished test in ``out_dir/tests_live.jsonl``; at ``timeout`` pytest is interrupted (SIGINT: it still
    writes its XML) and killed 15 s later."""
    junit, live = os.path.join(out_dir, f"junit_{name}.xml"), os.path.join(out_dir, "tests_live.jsonl")
    cmd = [sys.executable, "-m", "pytest", *files, "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-rs",
           "-p", "_pytest_live", f"--junitxml={junit}"]
    if select:
        cmd += ["-k", select]
    if util.find_spec("pytest_timeout") is not None:
        cmd += [f"--timeout={PER_TEST_TIMEOUT_S}"]
    pp = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, BENCH] + ([pp] if pp else [])), GPU_CHECK_LIVE=live,
               GPU_CHECK_PART=name)
    t = time.perf_counter()
    interrupted = False
    with tempfile.TemporaryFile("w+") as out:
        # its own process group (same session: the device tool still ends it with the command), and SIGINT
        # at its default even when this run was started with it ignored (a background job), so that
        # pytest turns it into KeyboardInterrupt and writes its XML
        p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, process_group=0,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            interrupted = True
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever is left of it (a stuck test's cluster workers too)
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        out.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.strip()]
    results = []
    if os.path.isfile(live):
        with open(live) as fh:
            results = [r for r in (json.loads(ln) for ln in fh if ln.strip()) if r.get("part") == name]
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    summary = next((ln.strip("= ") for ln in reversed(lines) if any(w in ln for w in ("passed", "failed", "skipped",
                                                                                            "error", "no tests"))), "")
    res = {"exit_status": p.returncode, "summary": summary, "counts": counts, "select": select,
           "failures": [r["test"] for r in results if r["outcome"] == "failed"][:30],
           "seconds": round(time.perf_counter() - t, 2), "junit": os.path.basename(junit) if os.path.isfile(junit)
           else None, "tail": "\n".join(lines[-40:]) if p.returncode not in (0, 5) else ""}
    if interrupted:
        res["error"] = f"timed out after {timeout:.0f} s: {len(results)} tests finished (kept)"
    return res


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


def part_configs(args, env: dict) -> dict:
    """What each part runs: a child configuration, or ("pytest", -k expression), or a reason to skip
    (``env``: the env part's result, which says whether cuDF imports)."""
    from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS

    sizes = SMALL if args.small else FULL
    hep = {"part": "mondrian", "dataset": "hepmass", "k": 10, "qis": QI_HEP, "sensitive": "label", "format": "minmax"}
    gpu = args.backend == "gpu"
    cfg = {"tests_equal": ("pytest", EQUAL_TESTS), "tests_rest": ("pytest", f"not ({EQUAL_TESTS})"),
           "mondrian_hepmass_big": {**hep, "rows": sizes["hep_big"], "profile": True},
           "mondrian_adult": {"part": "mondrian", "dataset": "adult", "k": 3, "qis": list(ADULT_QUASI_IDENTIFIERS),
                              "sensitive": "income", "format": "range", "repeat": 4},
           "distpab": {"part": "distpab", "rows": sizes["distpab"]}, "risk": {"part": "risk", "rows": sizes["hep_big"], "profile": True},
           "suda": {"part": "suda"}, "cli": {"part": "cli", "rows": sizes["cli"]},
           "attacks": {"part": "attacks", "rows": sizes["attacks"][0], "n_attacks": sizes["attacks"][1],
                       "compare_cpu": True},
           "cluster": {"part": "cluster", "rows": sizes["cluster"], "cluster": "cuda:1" if gpu else "local:1"},
           "mondrian_hepmass_1m": {**hep, "rows": sizes["hep_1m"], "compare_cpu": True},
           "threshold": {"part": "threshold", "sizes": sizes["threshold"]}}
    if args.skip_tests:
        cfg["tests_equal"] = cfg["tests_rest"] = "skipped: --skip-tests"
    if gpu and not env.get("cudf"):
        why = f"cuDF does not import ({env['cudf_error']})" if env.get("cudf_error") else "cuDF is not installed"
        cfg["cli"] = f"skipped: {why} (the Parquet -> Parquet target is measured with cuDF)"
    if gpu and util.find_spec("dask_cuda") is None:
        cfg["cluster"] = "skipped: dask-cuda is not installed"
    elif util.find_spec("distributed") is None:
        cfg["cluster"] = "skipped: distributed is not installed"
    if args.parts:
        cfg = {k: (v if k in args.parts else "skipped: not selected (--parts)") for k, v in cfg.items()}
    return cfg


def summary(doc: dict, complete: bool) -> dict:
    names = [n for n, _ in PLAN]
    parts = doc["parts"]
    status = {n: ("skipped" if "skipped" in parts[n] else "failed" if "error" in parts[n] else "done")
              for n in names if n in parts}
    return {"complete": complete, "mode": doc["mode"], "backend": doc["backend"], "budget_s": doc["budget_s"],
            "wall_seconds": round(time.perf_counter() - doc["_t0"], 1),
            **{k: [n for n in names if status.get(n) == k] for k in ("done", "failed", "skipped")},
            "pending": [n for n in names if n not in parts],
            "partial": [n for n in names if parts.get(n, {}).get("partial")],
            "reasons": {n: parts[n].get("skipped") or parts[n].get("error") for n in names
                        if status.get(n) in ("failed", "skipped")}}


def write_all(doc: dict, out: str, complete: bool) -> None:
    """gpu_check.json (every finished part), summary.json and gpu_check.md, each replaced atomically."""
    doc["targets"] = targets(doc["parts"], doc["mode"] == "small", doc["backend"])
    doc["errors"] = [n for n, p in doc["parts"].items() if "error" in p]
    doc["wall_seconds"] = round(time.perf_counter() - doc["_t0"], 1)
    doc["summary"] = summary(doc, complete)
    public = {k: v for k, v in doc.items() if not k.startswith("_")}
    write_atomic(os.path.join(out, "gpu_check.json"), json.dumps(public, indent=2, default=str) + "\n")
    write_atomic(os.path.join(out, "summary.json"), json.dumps(doc["summary"], indent=2) + "\n")
    write_atomic(os.path.join(out, "gpu_check.md"), markdown(public))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", help="folder for gpu_check.json, summary.json, gpu_check.md and the pytest results")
    ap.add_argument("--backend", default="gpu", choices=["gpu", "cpu"], help="device backend measured (default gpu)")
    ap.add_argument("--small", action="store_true", help="tiny sizes (seconds): the code paths, not the figures")
    ap.add_argument("--budget", type=float, help=f"seconds for all parts ({BUDGET_S:.0f}; {CPU_SCALE} x that "
                    "with --backend cpu)")
    ap.add_argument("--skip-tests", action="store_true", help="do not run tests/test_gpu.py")
    ap.add_argument("--parts", type=lambda s: [p for p in s.split(",") if p], help="only these parts (comma list)")
    args = ap.parse_args(argv)
    if args.one:
        child(json.loads(args.one))
        return 0
    if not args.out:
        ap.error("--out DIR is required")
    unknown = sorted(set(args.parts or []) - {n for n, _ in PLAN})
    if unknown:
        ap.error(f"--parts: unknown part(s) {', '.join(unknown)}; the parts are {', '.join(n for n, _ in PLAN)}")
    scale = CPU_SCALE if args.backend == "cpu" else 1
    if args.budget is None:
        args.budget = BUDGET_S * scale
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    doc = {"mode": "small" if args.small else "full", "backend": args.backend, "budget_s": args.budget,
           "environment": {"versions": versions(), "os": platform.platform(), "cpu_model": cpu_model(),
                           "cpu_count": os.cpu_count()}, "parts": {}, "_t0": t0}
    live = os.path.join(args.out, "tests_live.jsonl")
    if os.path.exists(live):
        os.remove(live)
    kernel_cache = tempfile.mkdtemp(prefix="gpu_check_cupy_cache_")

    def left() -> float:
        return args.budget - (time.perf_counter() - t0) - RESERVE_S

    env = spawn_part({"part": "env", "backend": args.backend}, timeout=max(10.0, min(60.0, left())))
    doc["environment"]["device_info"] = env
    if args.backend == "gpu" and not env.get("gpu_usable"):
        log(f"no usable GPU: {env.get('gpu_reason') or env.get('error')}; the device parts will fail")
    write_all(doc, args.out, complete=False)
    configs = part_configs(args, env)
    first_measured = next((n for n, _ in PLAN if isinstance(configs[n], dict)), None)
    for name, cap in PLAN:
        cfg, cap = configs[name], cap * scale
        if isinstance(cfg, str):
            res = {"skipped": cfg[len("skipped: "):]}
        elif left() < min(20.0, cap):
            res = {"skipped": f"{time.perf_counter() - t0:.0f} s of the {args.budget:.0f} s budget used"}
        else:
            limit = min(cap, left())
            log(f"{name} (up to {limit:.0f} s)")
            if isinstance(cfg, tuple):
                res = run_pytest(name, cfg[1], limit, args.out)
            else:  # a fresh process; CuPy's kernel cache starts empty for the first measured part (its cold
                # call compiles every kernel it uses) and is kept on disk for the later ones, as on a user's
                # machine (the first H100 run gave each part an empty cache: Adult and the cluster spent
                # their 60 s and 90 s compiling)
                os.environ["CUPY_CACHE_DIR"] = kernel_cache
                res = spawn_part({"backend": args.backend, "timeout": limit, **cfg}, timeout=limit)
                res.setdefault("kernel_cache", "empty at start" if name == first_measured else "kept from earlier parts")
        if name == "cli" and "skipped" not in res:
            res["cudf_present"] = bool(env.get("cudf"))
        doc["parts"][name] = res
        try:
            log(f"{name}: {figures(name, res)}")
        except Exception as exc:  # a figure missing from a result must not stop the run
            log(f"{name}: finished ({type(exc).__name__} in its summary line: {exc})")
        write_all(doc, args.out, complete=False)
    shutil.rmtree(kernel_cache, ignore_errors=True)
    write_all(doc, args.out, complete=True)
    log(f"wrote {args.out}/gpu_check.json, summary.json, gpu_check.md in {doc['wall_seconds']} s; "
        f"errors: {doc['errors'] or 'none'}")
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
