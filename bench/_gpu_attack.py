"""bench/gpu_check.py's attack part (issue 32 item 7): linkability, inference and singling out, 10,000 attacks
each against a 1M-row release (bench/bench_attack.py's ``large``: Adult rows drawn with replacement, jittered,
released raw, an equal control), on the backend measured; cold (first call: uploads, kernel compiles) and warm
seconds, the copies and syncs per attack, and (``compare_cpu``) whether the report equals the CPU's, bit for
bit. Singling out (its predicates generated on the host, its counts on the device) runs once, last: each
kind's result is printed as soon as it is done, so a part cut off keeps the kinds it finished.

``"double": true`` runs the GPU code path on the CuPy double (tests/cupy_double.py) and adds its device
operation and sync counts: the part's code path checked on a machine without a GPU::

    PYTHONPATH=. python bench/gpu_check.py --one '{"part": "attacks", "backend": "gpu", "double": true,
        "rows": 20000, "n_attacks": 500, "compare_cpu": true}'
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

KINDS = ("linkability", "inference", "singling-out")
#: (name, what is measured, limit in seconds) on the GPU
ATTACK_TARGETS = [(f"attacks_1M_{k}_warm", f"attacks: {k}, 10,000 attacks against a 1M-row release (and as many on "
                   f"the control), warm", 2.0) for k in KINDS]


def _device():
    """The CuPy double installed as the device module (tests/cupy_double.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from cupy_double import DeviceDouble

    from gpuanon import backend as B

    dev = DeviceDouble()
    return dev, B.use_device_module(dev)


def run_attacks(cfg: dict) -> dict:
    import bench_attack
    from _common import report_result

    from gpuanon import backend as B
    from gpuanon.attack import evaluate

    o, c = bench_attack.large(int(cfg["rows"]))
    n = int(cfg["n_attacks"])
    kw = dict(n_attacks=n, secrets=["income"], aux=bench_attack.AUX, seed=0)
    dev, ctx = _device() if cfg.get("double") else (None, contextlib.nullcontext())
    res = {"rows": len(o), "n_attacks": n, "backend": cfg["backend"], "double": bool(dev), "kinds": {}}
    with ctx:
        for kind in KINDS:
            runs, rep = {}, None
            for name in ("cold", "warm") if kind != "singling-out" else ("warm",):
                with B.count_transfers(simulate=cfg["backend"] == "cpu") as tl:
                    t = time.perf_counter()
                    rep = evaluate(o, o, c, attacks=[kind], backend=cfg["backend"], **kw)
                    B.synchronize()
                    runs[name] = round(time.perf_counter() - t, 3)
                tr = tl.to_dict()["stages"].get(f"attack_{kind.replace('-', '_')}", {})
                runs[f"{name}_transfers"] = {d: tr.get(d) for d in ("to_host", "to_device", "syncs") if d in tr}
            res["kinds"][kind] = runs
            if cfg.get("compare_cpu"):
                t = time.perf_counter()
                want = evaluate(o, o, c, attacks=[kind], backend="cpu", **kw)
                runs["cpu_s"] = round(time.perf_counter() - t, 3)
                rep.pop("cpu_seconds"), want.pop("cpu_seconds")
                runs["equal_to_cpu"] = rep == want
            key = kind.replace("-", "_")
            runs["risk"] = ({m: v["risk"]["value"] for m, v in rep[key].items()} if kind == "singling-out"
                            else rep[key]["income"]["risk"]["value"] if kind == "inference" else rep[key]["risk"]["value"])
            report_result({**res, "partial": f"up to {kind}"})
    if dev is not None:
        s = dev.stats.summary()
        res["double_counts"] = {st: v for st, v in s["stages"].items() if st.startswith("attack_")}
        res["double_counts"]["syncs_escaped"] = s["syncs_escaped"]
    return res


def attack_measured(get) -> dict:
    return {f"attacks_1M_{k}_warm": get("attacks", "kinds", k, "warm") for k in KINDS}


def attack_figures(p: dict) -> str:
    parts = []
    for k, r in p["kinds"].items():
        s = (f"{k}{' cold ' + str(r['cold']) + ' s,' if 'cold' in r else ''} warm {r['warm']} s, "
             f"syncs {r.get('warm_transfers', {}).get('syncs')}")
        if "equal_to_cpu" in r:
            s += f", CPU {r['cpu_s']} s, equal to CPU {r['equal_to_cpu']}"
        parts.append(s)
    return f"{p['rows']} rows x {p['n_attacks']} attacks{' (CuPy double)' if p.get('double') else ''}: " + "; ".join(parts)
