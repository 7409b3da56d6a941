"""Benchmark: re-identification risk (sample-based and population measures) on a HEPMASS-shaped table.

Times ``gpuanon.risk.assess`` on ``make_hepmass(rows)`` with its 28 QIs (every row its own class:
the worst case for the grouping) and on a table shaped as a k-anonymous output (each row takes the
28 values of one of n / 12 classes drawn at random: a histogram of many class sizes), with a
sampling fraction so that the
Zayatz / Pitman / SNB models and Dankar's rule run too; prints one JSON document.

    python bench/bench_risk.py                     # 10.5M rows (the issue's target: < 10 s on the CPU)
    python bench/bench_risk.py --rows 2000000 --backend gpu
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit  # noqa: E402


def _case(df, qi, backend, repeat, fraction):
    from gpuanon.risk import assess

    best, res = None, None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        res = assess(df, qi, sampling_fraction=fraction, backend=backend)
        s, cpu = time.perf_counter() - t, time.process_time() - c
        if best is None or s < best:
            best, best_cpu = s, cpu
    d = res.to_dict()
    pop = d["population"]
    return {"seconds": round(best, 3), "cpu_seconds": round(best_cpu, 3), "n": d["sample"]["n"], "classes": d["sample"]["n_classes"],
            "sample_uniques": d["sample"]["sample_uniques"],
            "prosecutor_records_at_risk": d["sample"]["prosecutor"]["records_at_risk"],
            "dankar_model": pop["dankar"]["model"], "dankar_fraction": pop["dankar"]["fraction"],
            "pitman_converged": pop["pitman"]["converged"], "snb_converged": pop["snb"]["converged"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_500_000)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--fraction", type=float, default=0.01, help="sampling fraction of the population models")
    ap.add_argument("--repeat", type=int, default=1, help="timed repetitions (the best is reported)")
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args(argv)

    import pandas as pd

    import gpuanon
    from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass

    t0 = time.perf_counter()
    df = make_hepmass(a.rows, random_state=0)
    t_gen = time.perf_counter() - t0
    qi = list(HEPMASS_FEATURES)
    raw = _case(df, qi, a.backend, a.repeat, a.fraction)
    t1 = time.perf_counter()
    cls = np.random.default_rng(1).integers(0, max(1, a.rows // 12), size=a.rows)
    classes = pd.DataFrame({c: df[c].to_numpy()[cls] for c in qi})
    t_cut = time.perf_counter() - t1
    del df
    classed = _case(classes, qi, a.backend, a.repeat, a.fraction)
    emit({"benchmark": "risk", "gpuanon": gpuanon.__version__, "rows": a.rows, "qis": len(qi),
          "backend": a.backend, "sampling_fraction": a.fraction, "generate_seconds": round(t_gen, 3),
          "classed_build_seconds": round(t_cut, 3), "raw": raw, "classed": classed,
          "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
          "machine": {"cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                      "python": platform.python_version()}}, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
