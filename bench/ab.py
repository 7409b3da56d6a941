#!/usr/bin/env python
"""The speed gate: two revisions of this repository timed side by side in one run.

    python bench/ab.py BASE [HEAD]          # HEAD: default the working tree, uncommitted changes included
    python bench/ab.py dcc1aee --quick      # under 2 minutes on 2 cores
    python bench/ab.py b909604 dcc1aee --cases adult_k3_fit,cli_version --pairs 7
    python bench/ab.py main --backend gpu   # on a machine with CuPy and a GPU

Each revision is exported once (``git archive``) to ``bench/.ab/<sha>`` (gitignored, reused).
Every timed case runs in a fresh subprocess (``bench/_ab_runner.py``, ``PYTHONPATH=<that tree>``),
the two sides alternated A,B,B,A,A,B,...; per pair the ratio HEAD/BASE of CPU seconds (``--metric``)
is taken, with the 1-minute load. A case is ``slower`` when the median ratio exceeds
``1 + threshold + spread`` (spread: half the interquartile range of the pair ratios); the exit
status is 1 when any case is slower, 2 when none is but a case failed, else 0. See bench/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RUNNER = os.path.join(HERE, "_ab_runner.py")
sys.path.insert(0, HERE)
from _common import cpu_model  # noqa: E402

MARK = "AB_RESULT "
MIN_PAIRS = 3
ADULT_QIS = "age,workclass,education,education-num,marital-status,occupation,relationship,race,gender,native-country"
WARMUP_POLICY = ("in-process cases (Mondrian, risk, SUDA2): imports and data preparation untimed, one untimed "
                 "warm-up call in the same process (Adult: the same table; HEPMASS: 20,000 other rows; risk: "
                 "the first 20,000 rows; SUDA2: the first 2,000 rows), then `inner` timed calls, their median; "
                 "whole commands: cold processes, timed whole (startup, imports, work, exit). Bytecode of both "
                 "trees is compiled beforehand, and each tree runs `gpuanon --version` once untimed first.")


def _mondrian(data, k, op, inner=1, rows=None):
    return {"kind": "mondrian", "data": data, "k": k, "op": op, "inner": inner, **({"rows": rows} if rows else {})}


# name -> (spec, in --quick, most pairs: the big cases are capped to keep the full set at ~10-15 min)
CASES = {
    "adult_k3_fit": (_mondrian("adult", 3, "fit", 3), True, None),
    "adult_k3_fit_transform": (_mondrian("adult", 3, "fit_transform", 3), True, None),
    "adult_k10_fit": (_mondrian("adult", 10, "fit", 3), False, None),
    "adult_k10_fit_transform": (_mondrian("adult", 10, "fit_transform", 3), True, None),
    "hepmass_200k_fit_transform": (_mondrian("hepmass", 10, "fit_transform", 1, 200_000), False, None),
    "hepmass_2M_fit_transform": (_mondrian("hepmass", 10, "fit_transform", 1, 2_000_000), False, 3),
    "risk_1M": ({"kind": "risk", "rows": 1_000_000, "fraction": 0.01}, False, 3),
    "suda_adult_m10": ({"kind": "suda", "m": 10}, False, 3),
    "cli_version": ({"kind": "command", "argv": ["--version"]}, True, None),
    "cli_anonymize_60": ({"kind": "command", "argv": ["anonymize", "{adult60}", "--qi", ADULT_QIS, "--sensitive",
                                                      "income", "--k", "3", "--out", "out.csv", "-q"]}, True, None),
}


def log(msg: str) -> None:
    print(msg, flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", REPO, *args], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def materialise(rev: str | None, cache: str) -> dict:
    """``{rev, sha, tree, dirty}``: ``rev`` exported to ``cache/<sha>`` (once), or the working tree."""
    if rev is None:
        dirty = [ln for ln in git("status", "--porcelain").splitlines() if ln.strip()]
        return {"rev": "working tree", "sha": git("rev-parse", "HEAD"), "tree": REPO, "dirty": bool(dirty),
                "uncommitted": dirty[:50]}
    try:
        sha = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"ab.py: error: {rev!r} is not a revision of this repository; give a commit, branch or tag")
    tree = os.path.join(cache, sha)
    if not os.path.isdir(tree):
        os.makedirs(cache, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=cache)
        arc = subprocess.Popen(["git", "-C", REPO, "archive", sha], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tmp], stdin=arc.stdout, check=True)
        if arc.wait() != 0:
            raise SystemExit(f"ab.py: error: git archive {sha} failed")
        os.rename(tmp, tree)
    return {"rev": rev, "sha": sha, "tree": tree, "dirty": False}


def spawn(cmd: list[str], tree: str, workdir: str, timeout: float) -> dict:
    """Run ``cmd`` with ``PYTHONPATH=tree`` in ``workdir``: its returncode, stdout, stderr and, from
    ``wait4``, the process's own CPU seconds (user + system), wall seconds and peak RSS."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = tree
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=err)
        box: dict = {}

        def reap():
            box["wait"] = os.wait4(p.pid, 0)
            box["wall"] = time.perf_counter() - t0

        th = threading.Thread(target=reap, daemon=True)
        th.start()
        th.join(timeout)
        if th.is_alive():
            p.kill()
            th.join()
            p.returncode = -9
            return {"error": f"timed out after {timeout:.0f} s"}
        _, status, ru = box["wait"]
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"returncode": p.returncode, "stdout": out.read(), "stderr": err.read(),
                "process_cpu": ru.ru_utime + ru.ru_stime, "process_wall": box["wall"], "peak_rss_mb": ru.ru_maxrss / 1024}


def run_one(tree: str, case: dict, backend: str, workdir: str, timeout: float) -> dict:
    """One fresh process of ``case`` on ``tree``: its own measurements plus the process's CPU, wall, peak RSS."""
    cfg = {**case, "tree": tree, "backend": backend}
    if case["kind"] == "command":
        argv = [a.format(adult60=os.path.join(workdir, "adult60.csv")) for a in case["argv"]]
        if argv[0] == "anonymize" and backend != "cpu":
            argv += ["--backend", backend]
        cfg["argv"] = argv
    p = spawn([sys.executable, RUNNER, json.dumps(cfg)], tree, workdir, timeout)
    if "error" in p:
        return p
    proc = {k: p[k] for k in ("process_cpu", "process_wall", "peak_rss_mb")}
    stdout, stderr = p["stdout"], p["stderr"]
    if p["returncode"] != 0:
        last = [ln for ln in stderr.splitlines() if ln.strip()]
        return {"error": f"exit status {p['returncode']}" + (f": {last[-1].strip()}" if last else ""), **proc}
    if case["kind"] == "command":
        return {"cpu": proc["process_cpu"], "wall": proc["process_wall"], "stages": {}, **proc}
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            return {**json.loads(line[len(MARK):]), **proc}
    return {"error": "no result line from the runner", **proc}


def _ratio_stats(ratios: list[float]) -> dict:
    q1, med, q3 = (float(x) for x in np.percentile(ratios, [25, 50, 75]))
    return {"median": med, "q1": q1, "q3": q3, "spread": (q3 - q1) / 2, "min": min(ratios), "max": max(ratios)}


def verdict(ratios: list[float], threshold: float) -> tuple[str, dict]:
    """``slower`` when median > 1 + threshold + spread; ``faster`` when median < 1 / (1 + threshold) - spread;
    no verdict (``few pairs``) from fewer than ``MIN_PAIRS`` pairs, which have no spread to speak of."""
    st = _ratio_stats(ratios)
    if len(ratios) < MIN_PAIRS:
        return "few pairs", st
    if st["median"] > 1 + threshold + st["spread"]:
        return "slower", st
    if st["median"] < 1 / (1 + threshold) - st["spread"]:
        return "faster", st
    return "same", st


def _fmt(x, nd=3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def run_case(name: str, spec: dict, sides: list[dict], a) -> dict:
    """All pairs of one case, alternated A,B,B,A,...; stops early when a side answers n/a or fails."""
    cap = CASES[name][2]
    n = min(a.pairs, cap) if cap and not a.cases else a.pairs
    pairs, status = [], None
    for i in range(n):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        got = {}
        for s in order:
            got[s] = run_one(sides[s]["tree"], spec, a.backend, a.workdir, a.timeout)
        base, head = got[0], got[1]
        load = os.getloadavg()[0]
        rec = {"pair": i + 1, "order": "AB" if order == (0, 1) else "BA", "load1": round(load, 2),
               "base": base, "head": head}
        bad = {k: r for k, r in (("base", base), ("head", head)) if "error" in r or "na" in r}
        if bad:
            why = "; ".join(f"{k}: {r.get('error') or r['na']}" for k, r in bad.items())
            status = "n/a" if all("na" in r for r in bad.values()) else "error"
            log(f"  {name} pair {i + 1}: {status}: {why}  load {load:.2f}")
            pairs.append(rec)
            break
        rec["ratio"] = head[a.metric] / base[a.metric] if base[a.metric] > 0 else float("inf")
        rec["wall_ratio"] = head["wall"] / base["wall"] if base["wall"] > 0 else float("inf")
        pairs.append(rec)
        log(f"  {name} pair {i + 1} {rec['order']}: base cpu {base['cpu']:.3f} wall {base['wall']:.3f} | head cpu "
            f"{head['cpu']:.3f} wall {head['wall']:.3f} | {a.metric} ratio {rec['ratio']:.3f}  load {load:.2f}")
    return summarise(name, spec, pairs, status, a)


def summarise(name: str, spec: dict, pairs: list[dict], status: str | None, a) -> dict:
    good = [p for p in pairs if "ratio" in p]
    out = {"name": name, "spec": spec, "pairs": pairs}
    if status or not good:
        out["verdict"] = status or "error"
        return out
    out["verdict"], out["ratio"] = verdict([p["ratio"] for p in good], a.threshold)
    out["wall_ratio"] = _ratio_stats([p["wall_ratio"] for p in good])
    for side in ("base", "head"):
        runs = [p[side] for p in good]
        stages = sorted({s for r in runs for s in r.get("stages", {})})
        out[side] = {"cpu": statistics.median(r["cpu"] for r in runs), "wall": statistics.median(r["wall"] for r in runs),
                     "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                     "stages": {s: statistics.median(r["stages"][s] for r in runs if s in r["stages"]) for s in stages},
                     "check": runs[-1].get("check")}
    return out


def print_tables(results: list[dict], metric: str) -> None:
    log(f"\n{'case':28} {'base cpu':>9} {'head cpu':>9} {'base wall':>9} {'head wall':>9} "
        f"{metric + ' ratio':>10} {'[q1, q3]':>15} {'wall ratio':>10} {'RSS MB b/h':>13}  verdict")
    for r in results:
        if "ratio" not in r:
            log(f"{r['name']:28} {'':>96}  {r['verdict']}")
            continue
        b, h, q = r["base"], r["head"], r["ratio"]
        log(f"{r['name']:28} {b['cpu']:9.3f} {h['cpu']:9.3f} {b['wall']:9.3f} {h['wall']:9.3f} {q['median']:10.3f} "
            f"{'[' + _fmt(q['q1']) + ', ' + _fmt(q['q3']) + ']':>15} {r['wall_ratio']['median']:10.3f} "
            f"{b['peak_rss_mb']:6.0f}/{h['peak_rss_mb']:<6.0f}  {r['verdict']}")
    log(f"\n{'case':28} {'stage (wall s)':18} {'base':>9} {'head':>9} {'ratio':>7}")
    for r in results:
        if "ratio" not in r:
            continue
        for s in sorted(set(r["base"]["stages"]) | set(r["head"]["stages"])):
            b, h = r["base"]["stages"].get(s), r["head"]["stages"].get(s)
            ratio = h / b if b and h is not None else None
            log(f"{r['name']:28} {s:18} {_fmt(b, 4):>9} {_fmt(h, 4):>9} {_fmt(ratio, 2):>7}")


def prepare(sides: list[dict], workdir: str) -> None:
    """Untimed: bytecode of both trees, one ``gpuanon --version`` each, the 60-row Adult CSV."""
    for s in sides:
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(s["tree"], "gpuanon"),
                        os.path.join(s["tree"], "kernels")], stdout=subprocess.DEVNULL, check=False)
    with gzip.open(os.path.join(sides[1]["tree"], "gpuanon", "data", "adult.csv.gz"), "rt") as fh:
        lines = [next(fh) for _ in range(61)]
    with open(os.path.join(workdir, "adult60.csv"), "w") as fh:
        fh.writelines(lines)
    for s in sides:
        r = run_one(s["tree"], CASES["cli_version"][0], "cpu", workdir, 120)
        if "error" in r:
            raise SystemExit(f"ab.py: error: `gpuanon --version` fails on {s['rev']} ({s['tree']}): {r['error']}")


def write_doc(out: str, results: list[dict], sides: list[dict], a, t_start: float, complete: bool) -> int:
    """Write the JSON (after every case, so a cut-short run keeps its cases); return the exit status."""
    slower = [r["name"] for r in results if r["verdict"] == "slower"]
    failed = [r["name"] for r in results if r["verdict"] == "error"]
    code = 1 if slower else 2 if failed else 0
    doc = {"benchmark": "ab", "complete": complete, "base": sides[0], "head": sides[1], "backend": a.backend,
           "metric": a.metric, "pairs": a.pairs, "threshold": a.threshold,
           "rule": f"per pair ratio = HEAD/BASE {a.metric} seconds; slower when median ratio > 1 + {a.threshold} + "
                   "spread, spread = (q3 - q1) / 2 of the pair ratios; faster when median < 1 / (1 + threshold) - spread; "
                   f"no verdict from fewer than {MIN_PAIRS} pairs",
           "warmup_policy": WARMUP_POLICY, "order": "pairs alternate A,B then B,A (A = BASE)",
           "environment": {"python": sys.version.split()[0], "numpy": np.__version__, "cpu_count": os.cpu_count(),
                           "cpu_model": cpu_model(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
                           "minutes": round((time.time() - t_start) / 60, 2), "load_at_end": os.getloadavg()},
           "cases": results, "slower": slower, "failed": failed, "exit_status": code}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(out + ".tmp", out)
    return code


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", nargs="?", help="git revision of the baseline (commit, branch, tag)")
    ap.add_argument("head", nargs="?", help="git revision to compare (default: the working tree, uncommitted changes included)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--quick", action="store_true", help="the small cases only, 3 pairs: under 2 minutes on 2 cores")
    ap.add_argument("--cases", help="comma-separated case names (see --list); no pair cap then")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--pairs", type=int, help="pairs per case (default 5, --quick 3; the 2M/risk/SUDA cases at most 3)")
    ap.add_argument("--metric", choices=["cpu", "wall"], help="what the ratio compares (default: cpu on the CPU, wall on the GPU)")
    ap.add_argument("--threshold", type=float, default=0.10, help="allowed slowdown beyond the spread (default 0.10)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed per process (default 600)")
    ap.add_argument("--cache", default=os.path.join(HERE, ".ab"), help="where revisions are exported (default bench/.ab)")
    ap.add_argument("--out", help="JSON file (default bench/results/ab_<base>_<head>_<backend>_<time>.json)")
    a = ap.parse_args(argv)
    a.metric = a.metric or ("wall" if a.backend == "gpu" else "cpu")
    a.pairs = a.pairs or (3 if a.quick else 5)
    if a.base is None and not a.list:
        ap.error("give BASE, the git revision to compare against (e.g. main)")
    if a.pairs < 1:
        ap.error("--pairs must be at least 1")
    names = [c.strip() for c in a.cases.split(",")] if a.cases else [n for n, c in CASES.items() if c[1] or not a.quick]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r}; the cases are: {', '.join(CASES)}")
    a.names = names
    return a


def main(argv=None) -> int:
    a = parse(argv)
    if a.list:
        for n, (spec, quick, cap) in CASES.items():
            print(f"{n:28} {'quick ' if quick else '      '}{'pairs<=' + str(cap) if cap else '':9} {json.dumps(spec)}")
        return 0
    sides = [materialise(a.base, a.cache), materialise(a.head, a.cache)]
    t_start = time.time()
    log(f"ab: BASE {a.base} = {sides[0]['sha'][:12]}  HEAD {sides[1]['rev']} = {sides[1]['sha'][:12]}"
        + (" + UNCOMMITTED CHANGES" if sides[1]["dirty"] else "") + f"  backend {a.backend}  metric {a.metric}"
        f"  pairs {a.pairs}  load {os.getloadavg()}  cpus {os.cpu_count()}")
    out = a.out or os.path.join(HERE, "results", f"ab_{sides[0]['sha'][:7]}_"
                                f"{sides[1]['sha'][:7] + ('-wt' if a.head is None else '')}"
                                f"_{a.backend}_{time.strftime('%Y%m%dT%H%M', time.gmtime(t_start))}.json")
    results = []
    with tempfile.TemporaryDirectory(prefix="ab-") as workdir:
        a.workdir = workdir
        prepare(sides, workdir)
        for name in a.names:
            log(f"case {name}")
            results.append(run_case(name, CASES[name][0], sides, a))
            code = write_doc(out, results, sides, a, t_start, complete=name == a.names[-1])
    print_tables(results, a.metric)
    slower = [r["name"] for r in results if r["verdict"] == "slower"]
    failed = [r["name"] for r in results if r["verdict"] == "error"]
    log(f"\nverdict: {'SLOWER: ' + ', '.join(slower) if slower else 'no case slower beyond the rule'}"
        + (f"; FAILED: {', '.join(failed)}" if failed else "") + f"; exit status {code}")
    log(f"wrote {out}  ({(time.time() - t_start) / 60:.2f} min)")
    return code


if __name__ == "__main__":
    sys.exit(main())
