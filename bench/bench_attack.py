"""Time gpuanon's attacks on a release (gpuanon.attack) and print JSON.

* ``adult``: the bundled Adult split in halves (seed 0), the release a raw copy of the first half, the
  second half the control; ``--n-attacks`` (default 2000) attacks of each kind: singling out (univariate
  and multivariate), linkability (aux age,workclass,education,marital-status | occupation,race,gender,
  native-country), inference of income. Target: under 3 s of CPU for each kind.
* ``large``: ``--large-rows`` (default 1,000,000) rows drawn from Adult with replacement, fnlwgt and
  hours-per-week jittered so rows differ, released as a raw copy, an equal control; ``--large-attacks``
  (default 10,000). Target: under 20 s of CPU.

CPU seconds are ``time.process_time`` of this process (NumPy here runs on one thread of it).

    python bench/bench_attack.py                      # both
    python bench/bench_attack.py --only adult --n-attacks 500
    python bench/bench_attack.py --only large --kinds linkability,inference
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from _common import emit  # noqa: E402

AUX = (["age", "workclass", "education", "marital-status"], ["occupation", "race", "gender", "native-country"])


def halves(df, seed=0):
    p = np.random.default_rng(seed).permutation(len(df))
    h = len(df) // 2
    return df.iloc[p[:h]].reset_index(drop=True), df.iloc[p[h:]].reset_index(drop=True)


KINDS = ("singling-out", "linkability", "inference")


def timed(release, original, control, n_attacks, seed=0, kinds=KINDS) -> dict:
    from gpuanon.attack import evaluate

    out = {}
    for kind in kinds:
        t0, w0 = time.process_time(), time.perf_counter()
        r = evaluate(release, original, control, attacks=[kind], n_attacks=n_attacks, secrets=["income"], aux=AUX,
                     seed=seed)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        key = kind.replace("-", "_")
        res = r[key]
        risks = ({m: v["risk"]["value"] for m, v in res.items()} if kind == "singling-out"
                 else {"income": res["income"]["risk"]["value"]} if kind == "inference"
                 else {"anonymeter_rule": res["risk"]["value"], "tie_aware": res["tie_aware"]["risk"]["value"],
                       "ties_kept": res["ties_kept"]["risk"]["value"]})
        out[kind] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "risk": risks}
    return out


def large(n_rows: int, seed: int = 0):
    from gpuanon.datasets import get_dataset

    df, _ = get_dataset("adult")
    rng = np.random.default_rng(seed)
    big = df.iloc[rng.integers(0, len(df), 2 * n_rows)].reset_index(drop=True)
    big["fnlwgt"] = big["fnlwgt"] + rng.integers(-500, 501, len(big))
    big["hours-per-week"] = np.clip(big["hours-per-week"] + rng.integers(-2, 3, len(big)), 1, 99)
    return big.iloc[:n_rows].reset_index(drop=True), big.iloc[n_rows:].reset_index(drop=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["adult", "large"])
    ap.add_argument("--n-attacks", type=int, default=2000)
    ap.add_argument("--large-rows", type=int, default=1_000_000)
    ap.add_argument("--large-attacks", type=int, default=10_000)
    ap.add_argument("--kinds", default=",".join(KINDS), help="the attacks timed (comma-separated)")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    from gpuanon.datasets import get_dataset

    doc = {"load_average": os.getloadavg(), "cpus": os.cpu_count()}
    if args.only in (None, "adult"):
        df, _ = get_dataset("adult")
        o, c = halves(df)
        doc["adult"] = {"rows": len(o), "n_attacks": args.n_attacks, "times": timed(o, o, c, args.n_attacks,
                                                                                  kinds=args.kinds.split(","))}
    if args.only in (None, "large"):
        o, c = large(args.large_rows)
        doc["large"] = {"rows": len(o), "n_attacks": args.large_attacks, "times": timed(o, o, c, args.large_attacks,
                                                                                      kinds=args.kinds.split(","))}
    doc["load_average_after"] = os.getloadavg()
    emit(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
