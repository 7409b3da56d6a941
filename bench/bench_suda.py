"""Benchmark: SUDA2 / DIS-SUDA (gpuanon.risk.suda) on the bundled Adult table, M = 6, 8, 10, 12 QIs.

The QIs are Adult's 9 categorical columns plus age (M = 10, the issue's target: under 5 s on the
CPU), their first 6 or 8, and for M = 12 also hours-per-week and capital-loss. Prints one JSON
document: per M the best wall time of ``--repeat`` runs (the table already read and factorized, the
time of the first run kept apart), the CPU time, and the result's counts.

    python bench/bench_suda.py
    python bench/bench_suda.py --sizes 10 --repeat 3 --backend gpu
    python bench/bench_suda.py --sizes 8,10,12 --repeat 5 --sdcmicro suda2_only.so

``--sdcmicro SO`` also times sdcMicro 5.8.1's C++ ``Suda2`` (src/Suda2.h compiled alone against Rcpp,
see tests/data/make_suda_sdcmicro.py) through Rscript on the same columns (codes + 1, as
tests/data/suda2_sdc.R passes them), CPU seconds taken inside R around the ``.Call`` alone; its runs
alternate with ours, and each M reports both medians, the median of the per-pair CPU ratios and
whether both score totals agree.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout first
from _common import emit  # noqa: E402

QIS = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race",
       "gender", "native-country", "income", "hours-per-week", "capital-loss"]
TARGET_S = 5.0


def time_suda(m: int, backend: str = "cpu", repeat: int = 2) -> dict:
    """SUDA2 / DIS-SUDA of Adult on its first ``m`` QIs of ``QIS`` on ``backend``: the best wall time of
    ``repeat`` runs (the table already read, factorized and on the device), the first run's time kept
    apart (on the GPU: its kernel compilation), the CPU time and the result's counts."""
    import numpy as np
    import pandas as pd

    from gpuanon import backend as B
    from gpuanon.datasets.bundled import load_adult
    from gpuanon.risk.suda import suda2

    be = B.get_backend(backend, quiet=True)
    adult = load_adult()
    qis = QIS[:m]
    codes = np.stack([pd.factorize(adult[q])[0] for q in qis], axis=1)
    dev = B.to_device(codes, be.xp)
    times, cpu = [], []
    for _ in range(max(repeat, 1)):
        t, c = time.perf_counter(), time.process_time()
        res = suda2(dev, xp=be.xp, names=qis)
        B.synchronize()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    doc = res.to_dict()
    return {
        "m": m, "qis": qis, "rows": int(codes.shape[0]), "subsets": 2 ** m - 1, "backend": be.name,
        "seconds": round(min(times), 3), "first_run_seconds": round(times[0], 3),
        "cpu_seconds": round(min(cpu), 3),
        **{k: doc[k] for k in ("n_unique", "n_pairs", "dis", "records_with_msu", "msu_total",
                               "msu_by_size", "score_total", "dis_max", "histogram")},
        "contributions_percent": {q: round(100 * v, 3) for q, v in doc["contributions"].items()},
    }


SDC_R = r"""
library(Rcpp)
args <- commandArgs(trailingOnly = TRUE)
dyn.load(args[1])
x <- as.matrix(sapply(read.csv(args[2]), as.numeric))
t0 <- proc.time()
res <- .Call("Suda2", x, -999, ncol(x), 0.01, TRUE)$Res
t1 <- proc.time() - t0
cat(sprintf("%.6f %.6f %.17g\n", t1[["user.self"]] + t1[["sys.self"]], t1[["elapsed"]],
            sum(res[, ncol(x) + 1])))
"""


def compare_sdcmicro(m: int, so_file: str, repeat: int) -> dict:
    """Ours (NumPy, in this process) and sdcMicro's C++ (Rscript, CPU seconds inside R around the
    call) on Adult's first ``m`` QIs of ``QIS``, alternated ``repeat`` times: medians of CPU and wall
    seconds, the median per-pair CPU ratio (ours / sdcMicro) and both score totals."""
    import numpy as np
    import pandas as pd

    from gpuanon.datasets.bundled import load_adult
    from gpuanon.risk.suda import suda2

    adult = load_adult()
    qis = QIS[:m]
    codes = np.stack([pd.factorize(adult[q])[0] for q in qis], axis=1)
    ours, sdc = [], []
    with tempfile.TemporaryDirectory() as tmp:
        script, data = os.path.join(tmp, "t.R"), os.path.join(tmp, "x.csv")
        with open(script, "w") as fh:
            fh.write(SDC_R)
        pd.DataFrame(codes + 1, columns=qis).to_csv(data, index=False)
        for _ in range(max(repeat, 1)):
            t, c = time.perf_counter(), time.process_time()
            res = suda2(codes, names=qis)
            ours.append((time.process_time() - c, time.perf_counter() - t, float(res.score.sum())))
            out = subprocess.run(["Rscript", script, so_file, data], check=True, text=True,
                                 capture_output=True).stdout.split()
            sdc.append(tuple(float(v) for v in out))
    med = statistics.median
    return {
        "m": m, "qis": qis, "runs": len(ours),
        "ours_cpu_seconds": round(med(o[0] for o in ours), 3),
        "ours_seconds": round(med(o[1] for o in ours), 3),
        "sdcmicro_cpu_seconds": round(med(s[0] for s in sdc), 3),
        "sdcmicro_seconds": round(med(s[1] for s in sdc), 3),
        "cpu_ratio_ours_over_sdcmicro": round(med(o[0] / max(s[0], 1e-9) for o, s in zip(ours, sdc)), 3),
        "score_total": ours[0][2], "scores_agree": all(o[2] == s[2] for o, s in zip(ours, sdc)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="6,8,10,12", help="QI counts, comma-separated (at most 12)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per size (the best is reported)")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--sdcmicro", metavar="SO", help="also time sdcMicro's Suda2 compiled into SO")
    a = ap.parse_args(argv)

    import numpy as np

    from gpuanon import backend as B

    be = B.get_backend(a.backend, quiet=True)
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.sdcmicro:
        emit({"benchmark": "suda2_adult_vs_sdcmicro", "sdcmicro": "5.8.1 src/Suda2.h via Rcpp",
              "environment": {"python": platform.python_version(), "numpy": np.__version__,
                              "cpu_count": os.cpu_count(), "load_average": list(os.getloadavg())},
              "runs": [compare_sdcmicro(m, a.sdcmicro, a.repeat) for m in sizes]}, a.out)
        return 0
    runs = [time_suda(m, a.backend, a.repeat) for m in sizes]
    m10 = [r for r in runs if r["m"] == 10]
    emit({
        "benchmark": "suda2_adult",
        "environment": {"backend": be.name, "python": platform.python_version(),
                        "numpy": np.__version__, "cpu_count": os.cpu_count(),
                        "machine": platform.machine(), "load_average": list(os.getloadavg())},
        "runs": runs,
        "targets": {"adult_m10_cpu_under_5s": (m10[0]["seconds"] < TARGET_S) if m10 else None},
    }, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
