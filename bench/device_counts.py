#!/usr/bin/env python
"""Device operations and synchronizations of one Mondrian fit_transform, per stage and per level.

Runs the GPU code path on the strict CPU stand-in for CuPy (``tests/cupy_double.py``), which counts
every device operation and every sync (explicit host reads through ``gpuanon.backend``, and the
syncs CuPy makes inside data-dependent calls such as ``nonzero`` / ``unique`` / ``bincount``), on
HEPMASS-shaped tables of the given sizes (28 QIs, k = 10, minmax, sensitive ``label``). Prints one
JSON document (and writes it to ``--out``)::

    python bench/device_counts.py --rows 200000 2000000 --out bench/results/device_double_counts.json

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

from cupy_double import DeviceDouble  # noqa: E402

from gpuanon import Mondrian  # noqa: E402
from gpuanon import backend as B  # noqa: E402
from gpuanon.datasets import HEPMASS_FEATURES, make_hepmass  # noqa: E402

#: kernel faults recorded by the double rather than raised while their fix is pending (none today)
KNOWN_FAULTS = ()


def counts(n_rows: int, k: int = 10, seed: int = 0) -> dict:
    """One fit_transform on the double: its counts, the report's transfers and the partition info."""
    df = make_hepmass(n_rows, random_state=seed)
    dev = DeviceDouble(known_faults=KNOWN_FAULTS)
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
                                 "syncs_per_stage": {st: v.get("syncs", 0) for st, v in tr["stages"].items()}}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000])
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    res = {"what": "device operations and syncs of one HEPMASS-shaped fit_transform on the CuPy double",
           "runs": [counts(n) for n in args.rows]}
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
