#!/usr/bin/env python
"""Hashes of the ``anonymize`` command's outputs, to show that a refactoring changes no byte.

Run from the repository root (it keeps a core busy for a few minutes)::

    python bench/output_hashes.py > before.json      # ... change the code ...
    python bench/output_hashes.py > after.json && diff before.json after.json
    python bench/output_hashes.py --quick            # Adult only, no cluster

Every configuration is one ``python -m gpuanon anonymize`` subprocess: Adult (``--dataset adult``)
with k; l (distinct, entropy); t; relaxed; the range, minmax and mean formats; CSV and Parquet;
``--optimize``; ``--hierarchies auto``; the same in one process and on a ``local:2`` cluster
(``--cluster``: the output is a directory of Parquet files, hashed file by file); and a
HEPMASS-shaped table (``make_hepmass(rows)``, 28 QIs, target ``label``; ``--hepmass-rows``, 200,000
by default) in one process and on the cluster, read from 2 Parquet shards.

Per run: the SHA-256 of each output file, and of the JSON report (its keys in their order) with what
varies from run to run removed (every ``seconds`` section, the ``input`` / ``output`` paths, the cluster's ``dashboard``
address). One JSON document on stdout (and ``--out``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARYING = ("seconds", "input", "output", "dashboard")

ADULT_SMALL_QI = "age,education,marital-status,race,gender,native-country"
ADULT = {
    "k": ["--k", "10"],
    "k_minmax_relaxed": ["--k", "10", "--mode", "relaxed", "--format", "minmax"],
    "k_mean": ["--k", "25", "--format", "mean"],
    "l_distinct": ["--k", "5", "--l", "3", "--qi", ADULT_SMALL_QI, "--sensitive", "occupation"],
    "l_entropy": ["--k", "5", "--l", "2", "--l-kind", "entropy", "--qi", ADULT_SMALL_QI, "--sensitive",
                  "occupation"],
    "t": ["--k", "5", "--t", "0.2", "--qi", ADULT_SMALL_QI, "--sensitive", "occupation"],
    "optimize": ["--k", "10", "--optimize"],
    "hierarchies_auto": ["--k", "10", "--hierarchies", "auto"],
    "hierarchies_auto_optimize_relaxed": ["--k", "5", "--hierarchies", "auto", "--optimize", "--mode", "relaxed"],
}


def scrub(x):
    if isinstance(x, dict):
        return {k: scrub(v) for k, v in x.items() if k not in VARYING}
    if isinstance(x, list):
        return [scrub(v) for v in x]
    return x


def sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def run_cli(args: list[str], out: str, report: str) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "gpuanon", "anonymize", *args, "--out", out, "--report", report, "--quiet"]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if p.returncode:
        return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}"}
    res = {}
    if os.path.isdir(out):
        res["out"] = {f: sha(os.path.join(out, f)) for f in sorted(os.listdir(out))}
    else:
        res["out"] = sha(out)
    with open(report) as fh:
        rep = scrub(json.load(fh))
    res["report"] = hashlib.sha256(json.dumps(rep).encode()).hexdigest()
    res["report_keys"] = len(rep)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Adult in one process only")
    ap.add_argument("--hepmass-rows", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="output_hashes_")
    doc: dict = {"adult": {}, "adult_cluster": {}, "hepmass": {}}
    try:
        for name, args in ADULT.items():
            for ext in ("csv", "parquet"):
                o = os.path.join(tmp, f"{name}.{ext}")
                doc["adult"][f"{name}.{ext}"] = run_cli(["--dataset", "adult", *args], o, o + ".json")
                print(name, ext, file=sys.stderr, flush=True)
            if not a.quick:
                o = os.path.join(tmp, f"{name}_cluster")
                doc["adult_cluster"][name] = run_cli(["--dataset", "adult", *args, "--cluster",
                                                      f"local:{a.workers}"], o, o + ".json")
                print(name, "cluster", file=sys.stderr, flush=True)
        if not a.quick:
            from gpuanon.datasets import make_hepmass  # noqa: PLC0415

            df = make_hepmass(a.hepmass_rows, random_state=0)
            d = os.path.join(tmp, "hepmass_in")
            os.makedirs(d)
            half = len(df) // 2
            df.iloc[:half].to_parquet(os.path.join(d, "part-0.parquet"), index=False)
            df.iloc[half:].to_parquet(os.path.join(d, "part-1.parquet"), index=False)
            one = os.path.join(tmp, "hepmass_one.parquet")
            df.to_parquet(one, index=False)
            del df
            hq = ["--qi", ",".join(f"f{i}" for i in range(28)), "--target", "label", "--k", "10"]
            o = os.path.join(tmp, "hm.parquet")
            doc["hepmass"]["single"] = run_cli([one, *hq], o, o + ".json")
            o = os.path.join(tmp, "hm_cluster")
            doc["hepmass"]["cluster"] = run_cli([d, *hq, "--cluster", f"local:{a.workers}"], o, o + ".json")
            doc["hepmass"]["rows"] = a.hepmass_rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(doc, indent=1, sort_keys=True)
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
