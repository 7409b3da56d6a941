#!/usr/bin/env python
"""Same-run comparison with Qiyuan Gong's Python Mondrian (github qiyuangong/Mondrian, commit 49d49cfb, MIT).

    git clone https://github.com/qiyuangong/Mondrian /tmp/gong && git -C /tmp/gong checkout 49d49cfb
    python bench/bench_gong.py --gong-path /tmp/gong                      # this checkout
    python bench/bench_gong.py --gong-path /tmp/gong --gpuanon-path ../other --gpuanon-path .
    python bench/bench_gong.py --gong-path /tmp/gong --configs adult_k3 --repeats 3

Gong's code is not part of this repository: ``--gong-path`` (or ``$GONG_PATH``) names a checkout.
Configurations: the 30,162 complete Adult rows at k = 3 and k = 10, and those rows tiled to
1,000,000 at k = 10, on the QIs ``gpuanon.datasets.ADULT_QUASI_IDENTIFIERS``. Gong's strict Mondrian
gets the same rows and QIs in its own input form (a list of records: numeric QIs as ints,
categorical QIs as integer codes in first-appearance order -- its Adult reader's "intuitive
order" -- then ``income`` as the sensitive value), built untimed; the timed call is its whole
``mondrian(data, k, relax=False, QI_num=10)``. Ours: ``Mondrian(...).fit`` and ``.fit_transform``
after one untimed warm-up ``fit_transform`` (same table; the 30,162 rows for the 1M config).
Every run is a fresh process; each repeat runs Gong and every gpuanon tree once, the order
alternating (G, T1, T2 / T2, T1, G, ...); per repeat the speed-up = Gong CPU s / ours CPU s,
reported as the median of the repeats with min and max. NCP: Gong's own figure (percent: mean over
records and QIs of the class's value-range width / the QI's range in its ordering, categorical
codes in its order), ours from our report (the contract's NCP: categorical = distinct values
covered / domain), and both definitions on both partitions (computed afterwards, untimed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MARK = "GONG_RESULT "
CONFIGS = {"adult_k3": ("adult", 3), "adult_k10": ("adult", 10), "adult1M_k10": ("adult1M", 10)}
ROWS_1M = 1_000_000


# ============================================================== child side (one fresh process)
def load_rows(dataset: str):
    """(frame, qis, kinds): the complete Adult rows, or tiled to 1,000,000 rows."""
    import pandas as pd

    from gpuanon import datasets as ds
    from gpuanon.table.schema import Schema

    df = ds.load_adult()
    df = df[~(df == "?").any(axis=1).to_numpy()].reset_index(drop=True)
    if dataset == "adult1M":
        df = pd.concat([df] * (ROWS_1M // len(df) + 1), ignore_index=True).iloc[:ROWS_1M].reset_index(drop=True)
    qis = list(ds.ADULT_QUASI_IDENTIFIERS)
    return df, qis, Schema.from_frame(df, qis).kinds


def gong_codes(df, qis, kinds):
    """Gong's encoding of every QI: numeric values as ints, categorical as first-appearance codes."""
    import numpy as np
    import pandas as pd

    return {q: (pd.factorize(df[q])[0] if kinds[q] == "categorical" else df[q].to_numpy().astype(np.int64))
            for q in qis}


def child_gong(cfg: dict) -> dict:
    import numpy as np

    sys.path.insert(0, cfg["gong_path"])
    import mondrian as gong  # noqa: PLC0415  (Gong's module)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    df, qis, kinds = load_rows(cfg["dataset"])
    codes = gong_codes(df, qis, kinds)
    cols = [codes[q].tolist() for q in qis] + [df["income"].tolist(), list(range(len(df)))]
    data = [list(r) for r in zip(*cols)]  # QIs, the sensitive value, then the row id (not a QI)
    del cols
    t, c = time.perf_counter(), time.process_time()
    _result, (ncp_percent, _rtime) = gong.mondrian(data, int(cfg["k"]), False, len(qis))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    labels = np.full(len(df), -1, dtype=np.int64)
    for j, part in enumerate(gong.RESULT):
        labels[[r[-1] for r in part.member]] = j
    np.save(cfg["labels_out"], labels)
    sizes = np.bincount(labels)
    return {"cpu": cpu, "wall": wall, "gong_ncp_percent": ncp_percent, "n_classes": int(len(gong.RESULT)),
            "min_class": int(sizes.min()), "rows": len(df), "unassigned": int((labels < 0).sum())}


def child_ours(cfg: dict) -> dict:
    import numpy as np

    from gpuanon import Mondrian
    from gpuanon import datasets as ds

    df, qis, _kinds = load_rows(cfg["dataset"])

    def make():
        return Mondrian(k=int(cfg["k"]), quasi_identifiers=qis, sensitive=ds.ADULT_TARGET, target=ds.ADULT_TARGET,
                        output_format="range", backend=cfg.get("backend", "cpu"), progress=False)

    make().fit_transform(df if cfg["dataset"] == "adult" else df.iloc[:30_162])  # untimed warm-up
    out = {"rows": len(df)}
    for op in ("fit", "fit_transform"):
        m = make()
        t, c = time.perf_counter(), time.process_time()
        m.fit(df) if op == "fit" else m.fit_transform(df)
        out[op] = {"cpu": time.process_time() - c, "wall": time.perf_counter() - t, "n_classes": int(m.n_classes_)}
    out["report_ncp"] = float(m.report_["metrics"]["ncp"])
    out["report_seconds"] = {k: v for k, v in m.report_["seconds"].items() if isinstance(v, (int, float))}
    np.save(cfg["labels_out"], np.asarray(m.labels_))
    return out


def gong_ncp_of(codes: dict, qis, labels) -> float:
    """Gong's NCP percentage of any partition (independent re-implementation of its formula)."""
    import numpy as np
    import pandas as pd

    keep = labels >= 0
    total = 0.0
    for q in qis:
        v = codes[q][keep].astype(float)
        rng = v.max() - v.min()
        g = pd.Series(v).groupby(labels[keep])
        width = (g.transform("max") - g.transform("min")).to_numpy()
        total += (np.where(width == rng, 1.0, width / rng) if rng > 0 else np.zeros_like(width)).sum()
    return 100.0 * total / (len(qis) * int(keep.sum()))


def child_ncp(cfg: dict) -> dict:
    """Both NCP definitions on every saved partition (untimed)."""
    import numpy as np

    from gpuanon.metrics import ncp

    df, qis, kinds = load_rows(cfg["dataset"])
    codes = gong_codes(df, qis, kinds)
    out = {}
    for name, path in cfg["labels"].items():
        labels = np.load(path)
        out[name] = {"ncp_contract_set": float(ncp(df, qis, labels, kinds, categorical="set")),
                     "ncp_gong_definition_percent": gong_ncp_of(codes, qis, labels)}
    return out


def child(cfg: dict) -> int:
    from _ab_runner import isolate

    isolate(cfg["tree"])
    res = {"gong": child_gong, "ours": child_ours, "ncp": child_ncp}[cfg["kind"]](cfg)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    return 0


# ============================================================== parent side
def log(msg: str) -> None:
    print(msg, flush=True)


def run(cfg: dict, tree: str, workdir: str, timeout: float) -> dict:
    from ab import spawn

    p = spawn([sys.executable, os.path.abspath(__file__), "--one", json.dumps({**cfg, "tree": tree})], tree,
              workdir, timeout)
    if "error" in p:
        return p
    for line in reversed(p["stdout"].splitlines()):
        if line.startswith(MARK):
            return {**json.loads(line[len(MARK):]), "peak_rss_mb": p["peak_rss_mb"]}
    last = [ln for ln in p["stderr"].splitlines() if ln.strip()]
    return {"error": f"exit status {p['returncode']}" + (f": {last[-1]}" if last else "")}


def _stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "all": xs}


def run_config(name: str, trees: list[str], a, workdir: str) -> dict:
    dataset, k = CONFIGS[name]
    runners = [("gong", None)] + [("ours", t) for t in trees]
    reps = []
    for i in range(a.repeats):
        rep = {"repeat": i + 1, "load1": round(os.getloadavg()[0], 2)}
        for kind, tree in (runners if i % 2 == 0 else runners[::-1]):
            key = "gong" if kind == "gong" else tree
            cfg = {"kind": kind, "dataset": dataset, "k": k, "gong_path": a.gong_path, "backend": a.backend,
                   "labels_out": os.path.join(workdir, f"{name}_{len(rep)}.npy")}
            rep[key] = run(cfg, tree or trees[0], workdir, a.timeout)
            if "error" in rep[key]:
                raise SystemExit(f"bench_gong: {name} {kind} {tree or ''} failed: {rep[key]['error']}")
            rep[key]["labels_file"] = cfg["labels_out"]
        g = rep["gong"]["cpu"]
        line = f"  {name} repeat {i + 1}: Gong cpu {g:.2f}"
        for t in trees:
            o = rep[t]
            o["speedup_fit"], o["speedup_fit_transform"] = g / o["fit"]["cpu"], g / o["fit_transform"]["cpu"]
            line += (f" | {os.path.basename(t.rstrip('/'))}: fit {o['fit']['cpu']:.3f} ({o['speedup_fit']:.1f}x) "
                     f"fit_transform {o['fit_transform']['cpu']:.3f} ({o['speedup_fit_transform']:.1f}x)")
        log(line + f"  load {rep['load1']}")
        reps.append(rep)
    last = reps[-1]
    labels = {"gong": last["gong"]["labels_file"], **{t: last[t]["labels_file"] for t in trees}}
    ncps = run({"kind": "ncp", "dataset": dataset, "labels": labels}, trees[0], workdir, a.timeout)
    out = {"config": name, "dataset": dataset, "rows": last["gong"]["rows"], "k": k, "repeats": reps,
           "gong": {"cpu": _stats([r["gong"]["cpu"] for r in reps]), "ncp_percent": last["gong"]["gong_ncp_percent"],
                    "n_classes": last["gong"]["n_classes"], "min_class": last["gong"]["min_class"],
                    "both_ncps": ncps.get("gong")}, "ours": {}}
    for t in trees:
        out["ours"][t] = {
            "fit_cpu": _stats([r[t]["fit"]["cpu"] for r in reps]),
            "fit_transform_cpu": _stats([r[t]["fit_transform"]["cpu"] for r in reps]),
            "speedup_fit": _stats([r[t]["speedup_fit"] for r in reps]),
            "speedup_fit_transform": _stats([r[t]["speedup_fit_transform"] for r in reps]),
            "report_ncp": last[t]["report_ncp"], "n_classes": last[t]["fit_transform"]["n_classes"],
            "both_ncps": ncps.get(t)}
    return out


def print_table(results: list[dict]) -> None:
    log(f"\n{'config':12} {'who':28} {'CPU s fit':>10} {'CPU s f_t':>10} {'x Gong fit':>17} {'x Gong f_t':>17} "
        f"{'NCP own':>9} {'NCP contract':>12} {'NCP Gong%':>9} {'classes':>8}")
    for r in results:
        g = r["gong"]
        b = g["both_ncps"] or {}
        log(f"{r['config']:12} {'Gong 49d49cfb (whole run)':28} {g['cpu']['median']:10.2f} {'':>10} {'':>17} {'':>17} "
            f"{g['ncp_percent']:8.2f}% {b.get('ncp_contract_set', float('nan')):12.4f} "
            f"{b.get('ncp_gong_definition_percent', float('nan')):9.2f} {g['n_classes']:8d}")
        for t, o in r["ours"].items():
            b = o["both_ncps"] or {}
            sf, st = o["speedup_fit"], o["speedup_fit_transform"]
            log(f"{'':12} {os.path.basename(t.rstrip('/'))[:28]:28} {o['fit_cpu']['median']:10.3f} "
                f"{o['fit_transform_cpu']['median']:10.3f} "
                f"{sf['median']:6.1f} [{sf['min']:4.1f},{sf['max']:4.1f}] {st['median']:6.1f} [{st['min']:4.1f},{st['max']:4.1f}] "
                f"{o['report_ncp']:9.4f} {b.get('ncp_contract_set', float('nan')):12.4f} "
                f"{b.get('ncp_gong_definition_percent', float('nan')):9.2f} {o['n_classes']:8d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--gong-path", default=os.environ.get("GONG_PATH"),
                    help="checkout of qiyuangong/Mondrian at 49d49cfb (default $GONG_PATH)")
    ap.add_argument("--gpuanon-path", action="append",
                    help="gpuanon tree to measure (repeatable; default this checkout)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"], help="backend of our runs")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per process")
    ap.add_argument("--out", help="JSON file (default bench/results/gong_<time>.json)")
    a = ap.parse_args(argv)
    if a.one:
        return child(json.loads(a.one))
    if not a.gong_path or not os.path.isfile(os.path.join(a.gong_path, "mondrian.py")):
        ap.error("--gong-path must name a checkout of github.com/qiyuangong/Mondrian (it holds mondrian.py); "
                 "see the clone command in this script's docstring")
    trees = [os.path.realpath(t) for t in (a.gpuanon_path or [REPO])]
    names = [c.strip() for c in a.configs.split(",")]
    if any(n not in CONFIGS for n in names):
        ap.error(f"unknown config in {a.configs!r}; the configs are: {', '.join(CONFIGS)}")
    t0 = time.time()
    log(f"bench_gong: Gong at {a.gong_path}; gpuanon trees {trees}; repeats {a.repeats}; load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="gong-") as workdir:
        results = [run_config(n, trees, a, workdir) for n in names]
    print_table(results)
    from _common import cpu_model

    doc = {"benchmark": "gong", "peer": "qiyuangong/Mondrian 49d49cfb (MIT), strict mode", "gong_path": a.gong_path,
           "trees": trees, "repeats": a.repeats, "backend": a.backend,
           "speedup": "per repeat Gong CPU s / ours CPU s (process_time of the timed call); median, min, max",
           "ncp_definitions": {
               "gong_ncp_percent": "Gong's own: 100 * mean over records and QIs of (class range width / QI range), "
                                   "categorical codes in first-appearance order, a full-range width counted 1",
               "report_ncp / ncp_contract_set": "ours (SPEC): numeric class width / range, categorical 0 for one value "
                                                "else distinct values covered / domain size; mean over rows and QIs (a fraction)",
               "both_ncps": "each definition on each partition, recomputed here untimed"},
           "environment": {"python": sys.version.split()[0], "cpu_count": os.cpu_count(), "cpu_model": cpu_model(),
                           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
                           "minutes": round((time.time() - t0) / 60, 2), "load_at_end": os.getloadavg()},
           "results": results}
    out = a.out or os.path.join(HERE, "results", f"gong_{time.strftime('%Y%m%dT%H%M', time.gmtime(t0))}.json")
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
