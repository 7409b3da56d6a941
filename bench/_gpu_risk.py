"""bench/gpu_check.py's re-identification risk parts (issue 23): the sample-based and population measures
of HEPMASS-shaped rows x 28, and SUDA2 / DIS-SUDA on Adult with 10 QIs, each on the backend measured."""

from __future__ import annotations

import time

#: (name, what is measured, limit in seconds) on the GPU
RISK_TARGETS = [("risk_10.5M_warm", "risk: sample-based + population measures (f = 0.01) 10.5M x 28, warm", 1.0),
                ("adult_suda_m10_warm", "SUDA2 / DIS-SUDA on Adult, M = 10 QIs, warm (best of 3)", 1.0)]
QI_HEP = [f"f{i}" for i in range(28)]


def run_risk(cfg: dict) -> dict:
    """Re-identification risk (sample-based measures, population models at f = 0.01) of HEPMASS-shaped
    rows x 28 on the backend: cold (first call) and warm seconds (bench/bench_risk.py on the CPU)."""
    from gpuanon.backend import synchronize
    from gpuanon.datasets import make_hepmass
    from gpuanon.risk import assess

    df = make_hepmass(int(cfg["rows"]), random_state=0)
    runs = {}
    for name in ("cold", "warm"):
        t = time.perf_counter()
        r = assess(df, QI_HEP, sampling_fraction=0.01, backend=cfg["backend"])
        synchronize()
        runs[name] = round(time.perf_counter() - t, 3)
    res = {"rows": cfg["rows"], "classes": r.sample.n_classes, "dankar": r.population.dankar.model, **runs}
    if cfg.get("profile"):  # where the warm time goes (kept apart from the figures above)
        from _common import report_result
        from _gpu_parts import profiled

        report_result({**res, "partial": "profile pending"})
        res["profile"] = profiled(lambda: assess(df, QI_HEP, sampling_fraction=0.01, backend=cfg["backend"]))
    return res


def run_suda(cfg: dict) -> dict:
    """SUDA2 / DIS-SUDA on Adult's 9 categorical QIs plus age (M = 10) on the backend: bench/bench_suda.py's
    measure (the first run, its kernel compilation included, kept apart from the best of 3)."""
    from bench_suda import time_suda

    return time_suda(10, cfg["backend"], repeat=3)


def risk_measured(get) -> dict:
    """The targets' measured seconds from the parts (``get(part, key)``)."""
    return {"risk_10.5M_warm": get("risk", "warm"), "adult_suda_m10_warm": get("suda", "seconds")}


def risk_figures(name: str, p: dict) -> str:
    if name == "risk":
        return f"{p['rows']} rows, {p['classes']} classes: cold {p['cold']} s, warm {p['warm']} s"
    return (f"Adult M = {p['m']}: first run {p['first_run_seconds']} s, best {p['seconds']} s; "
            f"{p['records_with_msu']} records with an MSU, {p['msu_total']} MSUs")
