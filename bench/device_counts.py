#!/usr/bin/env python
"""Device operations and synchronizations of one Mondrian fit_transform, per stage and per level.

Runs the GPU code path on the strict CPU stand-in for CuPy (``tests/cupy_double.py``), which counts
every device operation and every sync (explicit host reads through ``gpuanon.backend``, and the
syncs CuPy makes inside data-dependent calls such as ``nonzero`` / ``unique`` / ``bincount``), on
HEPMASS-shaped tables of the given sizes (28 QIs, k = 10, minmax, sensitive ``label``). Prints one
JSON document (and writes it to ``--out``)::

    python bench/device_counts.py --rows 200000 2000000 --out bench/results/device_double_counts.json

``--device-resident`` feeds the fit a frame already on the device (the cuDF double of
``tests/cudf_double.py``, as after ``cudf.read_parquet``) and also prints the report's copies per
stage and direction (``transfers_per_stage``) and how often the row data crossed each way
(``row_crossings``: bytes moved in that direction / the input's QI bytes).

``--attacks N`` counts instead the attacks on the GPU backend (``gpuanon.attack.evaluate(...,
backend="gpu")``): singling out, linkability and inference of income, N attacks each, against bench/bench_attack.py's
``large`` release of ``--rows`` rows (a raw copy, an equal control), per attack kind (stage)::

    python bench/device_counts.py --attacks 2000 --rows 20000 200000

Re-run it after a change to the device code to see its counts move.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from cudf_double import CudfDouble, device_frame_of  # noqa: E402
from cupy_double import DeviceDouble  # noqa: E402

from gpuanon import Mondrian  # noqa: E402
from gpuanon import backend as B  # noqa: E402
from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass  # noqa: E402

#: kernel faults recorded by the double rather than raised while their fix is pending (none today)
KNOWN_FAULTS = ()


def counts(n_rows: int, k: int = 10, seed: int = 0, resident: bool = False) -> dict:
    """One fit_transform on the double: its counts, the report's transfers and the partition info
    (``resident``: from a device-resident frame, the cuDF double's)."""
    df = make_hepmass(n_rows, random_state=seed)
    dev = DeviceDouble(known_faults=KNOWN_FAULTS)
    qi_bytes = int(df[list(HEPMASS_FEATURES)].memory_usage(index=False).sum())
    if resident:
        dev.cudf = CudfDouble(dev)
        df = device_frame_of(df, dev)
    t = time.perf_counter()
    with B.use_device_module(dev):
        m = Mondrian(k=k, quasi_identifiers=list(HEPMASS_FEATURES), sensitive="label", output_format="minmax",
                     backend="gpu", progress=False)
        m.fit_transform(df)
        _ = m.labels_
    s = dev.stats.summary()
    tr = m.report_["transfers"]
    return {"rows": n_rows, "qis": len(HEPMASS_FEATURES), "k": k, "seconds_on_the_double": round(time.perf_counter() - t, 2),
            "partition": dict(m.partition_info_), "n_classes": int(m.n_classes_),
            "device_ops": s["ops"], "syncs": s["syncs"],
            "syncs_through_backend": s["syncs_counted"], "syncs_inside_cupy_calls": s["syncs_implicit"],
            "syncs_escaped": s["syncs_escaped"], "uploads_escaped": s["uploads_escaped"],
            "per_stage": s["stages"], "per_level": s["partition_levels"],
            "implicit_sync_sites": s["implicit_sites"], "escaped_sites": s["escaped_sites"],
            "kernel_faults": s["kernel_faults"],
            "report_transfers": {"syncs": tr["syncs"], "calls": tr["calls"], "bytes": tr["bytes"],
                                 "syncs_per_stage": {st: v.get("syncs", 0) for st, v in tr["stages"].items()}},
            **(resident_counts(dev, tr, qi_bytes) if resident else {})}


def resident_counts(dev, tr: dict, qi_bytes: int) -> dict:
    """The copies of a device-resident run: per stage and direction, and the row data's crossings."""
    calls: dict = {}
    for (st, what), n in sorted(getattr(dev.stats, "cudf_calls", {}).items()):
        calls.setdefault(st, {})[what] = n
    return {"device_resident": True, "input_qi_bytes": qi_bytes,
            "transfers_per_stage": {st: {d: v[d] for d in ("to_host", "to_device") if d in v}
                                    for st, v in tr["stages"].items()},
            "row_crossings": {"to_host": round(tr["to_host_bytes"] / qi_bytes, 3),
                              "to_device": round(tr["to_device_bytes"] / qi_bytes, 3)},
            "cudf_calls_per_stage": calls}


def attack_counts(n_rows: int, n_attacks: int, kinds=("singling-out", "linkability", "inference")) -> dict:
    """The attacks' device operations and syncs per kind (stage) on the double, equal to the CPU's report."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from bench_attack import AUX, large

    from gpuanon.attack import evaluate

    o, c = large(n_rows)
    kw = dict(attacks=list(kinds), n_attacks=n_attacks, secrets=["income"], aux=AUX)
    want = evaluate(o, o, c, **kw)
    dev = DeviceDouble(known_faults=KNOWN_FAULTS)
    t = time.perf_counter()
    with B.use_device_module(dev), B.count_transfers() as tl:
        got = evaluate(o, o, c, backend="gpu", **kw)
    secs = round(time.perf_counter() - t, 2)
    want.pop("cpu_seconds"), got.pop("cpu_seconds")
    s, tr = dev.stats.summary(), tl.to_dict()["stages"]
    return {"rows": n_rows, "n_attacks": n_attacks, "seconds_on_the_double": secs, "equal_to_cpu": got == want,
            "syncs_escaped": s["syncs_escaped"], "uploads_escaped": s["uploads_escaped"],
            "per_attack": {st: {**v, "copies": tr.get(st, {})} for st, v in s["stages"].items()},
            "implicit_sync_sites": s["implicit_sites"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000])
    ap.add_argument("--out", default=None, help="also write the JSON here")
    ap.add_argument("--device-resident", action="store_true",
                    help="the input frame starts on the device (the cuDF double's), as a cuDF frame would")
    ap.add_argument("--attacks", type=int, help="count the attacks (N of each kind) instead of a fit")
    ap.add_argument("--attack-kinds", default="singling-out,linkability,inference", help="with --attacks: which")
    args = ap.parse_args(argv)
    if args.attacks:
        res = {"what": "device operations and syncs of the attacks (singling out, linkability, inference) on the CuPy double",
               "runs": [attack_counts(n, args.attacks, args.attack_kinds.split(",")) for n in args.rows]}
    else:
        res = {"what": "device operations and syncs of one HEPMASS-shaped fit_transform on the CuPy double"
                       + (", from a device-resident input frame" if args.device_resident else ""),
               "runs": [counts(n, resident=args.device_resident) for n in args.rows]}
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
