"""gpuanon's attacks beside anonymeter 1.1.0 on the same Adult halves (seed 0): a raw copy of the first
half and a DISTPAB-perturbed copy as releases, the second half the control, at 500 and 2,000 attacks.

anonymeter runs in its own environment (``--anonymeter-python``, default /work/anonymeter-venv/bin/python;
``python3 -m venv /work/anonymeter-venv && /work/anonymeter-venv/bin/pip install anonymeter==1.1.0``) from
``bench/_anonymeter_runner.py``. Writes ``bench/results/attack_vs_anonymeter.json``: both risks with their
intervals, whether our risk lies inside anonymeter's interval, and both CPU times.

    python bench/compare_anonymeter.py [--n-attacks 500,2000] [--releases raw,distpab]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

AUX = [["age", "workclass", "education", "marital-status"], ["occupation", "race", "gender", "native-country"]]
PASSENGERS = "workclass,education,marital-status,occupation,relationship,race,gender,native-country"


def releases(tmp: str, which: list) -> dict:
    import numpy as np

    from gpuanon.datasets import get_dataset

    df, _ = get_dataset("adult")
    p = np.random.default_rng(0).permutation(len(df))
    h = len(df) // 2
    o, c = df.iloc[p[:h]].reset_index(drop=True), df.iloc[p[h:]].reset_index(drop=True)
    paths = {"original": os.path.join(tmp, "original.csv"), "control": os.path.join(tmp, "control.csv")}
    o.to_csv(paths["original"], index=False)
    c.to_csv(paths["control"], index=False)
    out = {}
    if "raw" in which:
        out["raw"] = paths["original"]
    if "distpab" in which:
        dp = os.path.join(tmp, "distpab.csv")
        subprocess.run([sys.executable, "-m", "gpuanon", "perturb", paths["original"], "--label", "income",
                        "--passengers", PASSENGERS, "--centralized", "--no-shuffle", "--seed", "0", "--out", dp, "-q"],
                       check=True, env={**os.environ, "PYTHONPATH": os.path.join(HERE, "..")})
        out["distpab"] = dp
    return paths, out


def ours(paths, release, n) -> dict:
    import pandas as pd

    from gpuanon.attack import evaluate

    r_, o, c = pd.read_csv(release), pd.read_csv(paths["original"]), pd.read_csv(paths["control"])
    out = {}
    t = time.process_time()
    so = evaluate(r_, o, c, attacks=["singling-out"], n_attacks=n, seed=0)["singling_out"]
    t_so = time.process_time() - t
    for m in ("univariate", "multivariate"):
        out[f"singling_out_{m}"] = {"value": so[m]["risk"]["value"], "ci": so[m]["risk"]["ci"],
                                    "queries": so[m]["queries"], "cpu_s": t_so / 2}
    t = time.process_time()
    lk = evaluate(r_, o, c, attacks=["linkability"], n_attacks=n, aux=AUX, n_neighbours=10, seed=0)["linkability"]
    out["linkability"] = {"value": lk["risk"]["value"], "ci": lk["risk"]["ci"],
                          "tie_aware": lk["tie_aware"]["risk"]["value"], "ties_kept": lk["ties_kept"]["risk"]["value"],
                          "cpu_s": time.process_time() - t}
    t = time.process_time()
    inf = evaluate(r_, o, c, attacks=["inference"], n_attacks=n, secrets=["income"], seed=0)["inference"]["income"]
    out["inference"] = {"value": inf["risk"]["value"], "ci": inf["risk"]["ci"], "cpu_s": time.process_time() - t}
    return out


def theirs(python, paths, release, n, tmp) -> dict:
    spec = os.path.join(tmp, "spec.json")
    with open(spec, "w") as f:
        json.dump({"original": paths["original"], "control": paths["control"], "release": release, "n_attacks": n,
                   "seed": 0, "aux": AUX, "neighbours": 10, "secret": "income"}, f)
    t = time.perf_counter()
    res = subprocess.run([python, os.path.join(HERE, "_anonymeter_runner.py"), spec], check=True,
                         capture_output=True, text=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.perf_counter() - t
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--anonymeter-python", default="/work/anonymeter-venv/bin/python")
    ap.add_argument("--n-attacks", default="500,2000")
    ap.add_argument("--releases", default="raw,distpab")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "attack_vs_anonymeter.json"))
    args = ap.parse_args(argv)
    doc = {"anonymeter": "1.1.0", "data": "bundled Adult split in halves (seed 0); release made from the first",
           "linkability": {"aux": AUX, "neighbours": 10}, "inference": {"secret": "income"},
           "load_average": os.getloadavg(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        paths, rels = releases(tmp, args.releases.split(","))
        for name, path in rels.items():
            for n in (int(x) for x in args.n_attacks.split(",")):
                a, b = ours(paths, path, n), theirs(args.anonymeter_python, paths, path, n, tmp)
                rows = {k: {"gpuanon": a[k], "anonymeter": b[k],
                            "inside": b[k]["ci"][0] - 1e-12 <= a[k]["value"] <= b[k]["ci"][1] + 1e-12} for k in a}
                doc["runs"].append({"release": name, "n_attacks": n, "attacks": rows})
                print(f"{name} n={n}: " + ", ".join(
                    f"{k} ours {v['gpuanon']['value']:.3f} theirs {v['anonymeter']['value']:.3f} "
                    f"[{v['anonymeter']['ci'][0]:.3f}, {v['anonymeter']['ci'][1]:.3f}] {'in' if v['inside'] else 'OUT'}"
                    for k, v in rows.items()), flush=True)
    doc["load_average_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
