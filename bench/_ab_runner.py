"""Child side of ``bench/ab.py``: one timed case in this fresh interpreter.

Run as ``python bench/_ab_runner.py '<json case>'`` with ``PYTHONPATH=<the tree under test>``
(also the case's ``tree``); it imports that tree's ``gpuanon`` only (:func:`isolate`) and prints
one marked JSON line::

    AB_RESULT {"cpu": s, "wall": s, "stages": {...}, "check": {...}}    # or {"na": "why"}

In-process cases (Mondrian, risk, SUDA2) run one untimed warm-up first, in the same process, then
``inner`` timed calls; the medians of the timed calls' CPU seconds (``time.process_time``, all
threads) and wall seconds are reported, with the median of each stage's seconds the estimator
records. A case whose module the tree lacks (``gpuanon.risk`` at older commits) answers ``na``.
Kind ``command`` runs ``gpuanon <argv>`` whole (as ``python -m gpuanon``) and prints nothing of
its own: the parent measures the process. Written for both the current API and the older one (fit timings in ``result_.timings`` now,
``_timings`` before the FitResult refactor).
"""

from __future__ import annotations

import json
import os
import runpy
import statistics
import sys
import time

MARK = "AB_RESULT "


def isolate(tree: str) -> None:
    """Import ``gpuanon`` and ``kernels`` from ``tree`` only.

    An editable install (``pip install -e``) puts a finder on ``sys.meta_path`` that maps any
    ``gpuanon.*`` module the tree lacks to the installed checkout: an older tree would then silently
    run today's ``gpuanon.risk``. Such finders and their path hooks are removed, then the import is
    checked to come from ``tree``.
    """
    def editable(obj) -> bool:
        return "__editable__" in (getattr(obj, "__module__", "") or "")

    sys.meta_path[:] = [f for f in sys.meta_path if not editable(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not editable(h)]
    sys.path_importer_cache.clear()
    import gpuanon

    where = os.path.realpath(os.path.dirname(os.path.dirname(gpuanon.__file__)))
    if where != os.path.realpath(tree):
        raise SystemExit(f"gpuanon imported from {where}, not from the tree under test {tree}")


def _sync() -> None:
    cp = sys.modules.get("cupy")  # only when the tree under test imported it
    if cp is not None:
        cp.cuda.Device().synchronize()


def _timed(fn):
    _sync()
    t, c = time.perf_counter(), time.process_time()
    fn()
    _sync()
    return time.perf_counter() - t, time.process_time() - c


def _adult_complete():
    from gpuanon import datasets as ds

    df = ds.load_adult()
    return df[~(df == "?").any(axis=1).to_numpy()].reset_index(drop=True)


def _fit_stages(m) -> dict:
    res = getattr(m, "result_", None)
    timings = getattr(res, "timings", None) if res is not None else None
    if timings is None:
        timings = getattr(m, "_timings", None) or {}
    return {k: float(v) for k, v in timings.items() if isinstance(v, (int, float))}


def _medians(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k in r})
    return {k: statistics.median([r[k] for r in runs if k in r]) for k in keys}


def _repeat(inner: int, one) -> dict:
    """``one()`` returns (wall, cpu, stages, check) of one timed call; medians over ``inner`` calls."""
    walls, cpus, stages, check = [], [], [], {}
    for _ in range(max(1, inner)):
        w, c, s, check = one()
        walls.append(w)
        cpus.append(c)
        stages.append(s)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "stages": _medians(stages),
            "inner": max(1, inner), "check": check}


def case_mondrian(cfg: dict) -> dict:
    from gpuanon import Mondrian
    from gpuanon import datasets as ds

    if cfg["data"] == "adult":
        df = _adult_complete()
        qis, sens, fmt, warm = list(ds.ADULT_QUASI_IDENTIFIERS), ds.ADULT_TARGET, "range", df
    else:
        df = ds.make_hepmass(int(cfg["rows"]), random_state=0)
        qis, sens, fmt = list(ds.HEPMASS_FEATURES), "label", "minmax"
        warm = ds.make_hepmass(20_000, random_state=1)

    def make():
        return Mondrian(k=int(cfg["k"]), quasi_identifiers=qis, sensitive=sens, target=sens, output_format=fmt,
                        backend=cfg["backend"], progress=False)

    fit_only = cfg["op"] == "fit"

    def call(m, d):
        return m.fit(d) if fit_only else m.fit_transform(d)

    call(make(), warm)  # the untimed warm-up
    _sync()

    def one():
        m = make()
        w, c = _timed(lambda: call(m, df))
        stages = _fit_stages(m) if fit_only else {k: float(v) for k, v in m.report_["seconds"].items()
                                                  if isinstance(v, (int, float))}
        return w, c, stages, {"rows": len(df), "n_classes": int(m.n_classes_)}

    return _repeat(int(cfg.get("inner", 1)), one)


def case_risk(cfg: dict) -> dict:
    try:
        from gpuanon.risk import assess
    except ImportError as e:
        return {"na": f"no gpuanon.risk in this tree ({e})"}
    import numpy as np
    import pandas as pd

    from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass

    rows = int(cfg["rows"])
    qi = list(HEPMASS_FEATURES)
    raw = make_hepmass(rows, random_state=0)
    # shaped as a k-anonymous output: each row takes the values of one of rows / 12 classes (bench_risk.py)
    cls = np.random.default_rng(1).integers(0, max(1, rows // 12), size=rows)
    df = pd.DataFrame({c: raw[c].to_numpy()[cls] for c in qi})
    del raw
    frac = float(cfg.get("fraction", 0.01))
    assess(df.iloc[:20_000], qi, sampling_fraction=frac, backend=cfg["backend"])  # warm-up
    _sync()

    def one():
        box = {}
        w, c = _timed(lambda: box.setdefault("r", assess(df, qi, sampling_fraction=frac, backend=cfg["backend"])))
        s = box["r"].to_dict()["sample"]
        return w, c, {}, {"rows": rows, "n_classes": int(s["n_classes"])}

    return _repeat(int(cfg.get("inner", 1)), one)


SUDA_QIS = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race",
            "gender", "native-country", "income"]


def case_suda(cfg: dict) -> dict:
    try:
        from gpuanon.risk.suda import suda2
    except ImportError as e:
        return {"na": f"no gpuanon.risk.suda in this tree ({e})"}
    import numpy as np
    import pandas as pd

    from gpuanon import backend as B
    from gpuanon.datasets import load_adult

    be = B.get_backend(cfg["backend"], quiet=True)
    adult = load_adult()
    qis = SUDA_QIS[:int(cfg["m"])]
    codes = np.stack([pd.factorize(adult[q])[0] for q in qis], axis=1)
    dev = B.to_device(codes, be.xp)
    suda2(dev[:2_000], xp=be.xp, names=qis)  # warm-up on the first 2,000 rows
    _sync()

    def one():
        box = {}
        w, c = _timed(lambda: box.setdefault("r", suda2(dev, xp=be.xp, names=qis)))
        d = box["r"].to_dict()
        return w, c, {}, {"rows": int(codes.shape[0]), "n_unique": int(d["n_unique"]),
                          "msu_total": int(d["msu_total"])}

    return _repeat(int(cfg.get("inner", 1)), one)


CASES = {"mondrian": case_mondrian, "risk": case_risk, "suda": case_suda}


def main() -> int:
    cfg = json.loads(sys.argv[1])
    isolate(cfg["tree"])
    if cfg["kind"] == "command":  # a whole ``gpuanon ...`` command, as ``python -m gpuanon`` runs it
        sys.argv = ["gpuanon", *cfg["argv"]]
        runpy.run_module("gpuanon", run_name="__main__", alter_sys=True)
        return 0  # not reached: gpuanon's __main__ exits
    res = CASES[cfg["kind"]](cfg)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
