#!/usr/bin/env python
"""Hashes of the ``anonymize`` command's outputs, to show that a refactoring changes no byte.

Run from the repository root (it keeps a core busy for a few minutes)::

    python bench/output_hashes.py > before.json      # ... change the code ...
    python bench/output_hashes.py > after.json && diff before.json after.json
    python bench/output_hashes.py --quick            # Adult only, no cluster

Every configuration is one ``python -m gpuanon anonymize`` subprocess: Adult (``--dataset adult``)
with k; l (distinct, entropy); t; relaxed; the range, minmax and mean formats; CSV and Parquet;
``--optimize``; ``--hierarchies auto``; the same in one process and on ``local:2`` and ``local:3``
clusters (``--workers``; ``--cluster``: the output is a directory of Parquet files, hashed file by
file); and a HEPMASS-shaped table (``make_hepmass(rows)``, 28 QIs, target ``label``;
``--hepmass-rows``, 200,000 by default) in one process and on the clusters, read from 2 Parquet shards.

Per run: the SHA-256 of each output file, and of the JSON report (its keys in their order) with what
varies from run to run removed (every ``seconds`` section, the ``input`` / ``output`` paths, the cluster's ``dashboard``
address); per report section (``report_sections``), so a difference is named; the metrics' numbers;
and of a Parquet output's cells (``cells``: column names and values, a file or a
directory's parts in order), which compare one process's file with a cluster's parts. ``checks``:
one process against every cluster size, and the HEPMASS part files of every cluster size against
each other (see :func:`checks`). One JSON document on stdout (and ``--out``).
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
# report sections whose floats a cluster sums in another order (``checks``: equal within RELATIVE)
TOLERANT = ("metrics", "hierarchies", "optimization")
RELATIVE = 1e-9

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


def content_sha(path: str) -> str:
    """SHA-256 of a Parquet output's cells (a file or a directory of parts, concatenated in name order):
    each column's name and values as Python objects, so that one file and 2 or 3 parts compare."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    files = [os.path.join(path, f) for f in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
    h = hashlib.sha256()
    tables = [pq.read_table(f) for f in files]
    for name in tables[0].column_names:
        h.update(json.dumps(name).encode())
        h.update(json.dumps([v for t in tables for v in t.column(name).to_pylist()], default=str).encode())
    return h.hexdigest()


def short(x) -> str:
    return hashlib.sha256(json.dumps(x).encode()).hexdigest()[:16]


def flat(x, path="") -> dict:
    """The numbers of a nested report section by path (``metrics/ncp_per_column/age``)."""
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in flat(val, f"{path}/{key}").items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in flat(val, f"{path}/{i}").items()}
    return {path: x} if isinstance(x, (int, float)) and not isinstance(x, bool) else {}


def blank(x):
    """A report section with its numbers left out (``None``): what must be equal exactly where its numbers
    may differ in the last bits (``checks``)."""
    if isinstance(x, dict):
        return {k: blank(v) for k, v in x.items()}
    if isinstance(x, list):
        return [blank(v) for v in x]
    return None if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def max_relative_difference(a: dict, b: dict) -> float:
    """Largest |a - b| / max(|a|, |b|) over the numbers of two ``flat`` dicts (inf when their keys differ)."""
    if set(a) != set(b):
        return float("inf")
    return max([abs(a[k] - b[k]) / max(abs(a[k]), abs(b[k])) for k in a if a[k] != b[k]], default=0.0)


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
        res.update(digest(json.load(fh)))
    if out.endswith(".parquet") or os.path.isdir(out):
        res["cells"] = content_sha(out)
    return res


def digest(report: dict) -> dict:
    """A report's hashes (what varies left out): whole, per section, and the ``TOLERANT`` sections'
    numbers and their other content apart."""
    rep = scrub(report)
    res = {}
    res["report"] = hashlib.sha256(json.dumps(rep).encode()).hexdigest()
    res["report_keys"] = len(rep)
    res["report_sections"] = {k: short(v) for k, v in rep.items()}  # which section differs
    res["metrics"] = flat(rep.get("metrics"))
    # the sections whose floats a cluster sums in another order: numbers and the rest apart
    res["numbers"] = {s: flat(rep.get(s)) for s in TOLERANT if s != "metrics"}
    res["skeleton"] = {s: short(blank(rep.get(s))) for s in TOLERANT}
    return res


def checks(doc: dict, workers: list[int]) -> dict:
    """One process == every cluster size, where the project promises it (SPEC 12: the partitions, so the
    output's cells, the verification, the risk): the cells, and the report sections but ``cluster``,
    ``transfers`` (counted in one process only) and ``partition`` (levels / attempts count other loops),
    byte for byte; the ``TOLERANT`` sections equal but for their numbers, and those within a relative
    difference of ``RELATIVE`` (the largest is given per section): entropies of fractional masses (a
    class's rows spread over its cell's values) that each home sums for its classes, so in another
    order: ``metrics`` (the entropy coefficients after, largest where ``U'`` is near 0: ``t`` on
    ``local:3``, education's 2.0e-5 by 8e-16, 4e-11), ``hierarchies`` (the automatic hierarchies'
    ``U'`` and loss, up to 2.5e-12) and ``optimization`` (its ``entropy_loss_before`` / ``_after``,
    1e-14; its counts are integers, so any difference in them exceeds ``RELATIVE``). And ``hepmass part files``: the same shards give the same part
    files' bytes on every cluster size."""
    same = ("n_rows_in", "n_rows_out", "n_suppressed", "n_classes", "n_partitions", "achieved", "class_size",
            "verification", "encoding", "risk")
    out = {}

    def numbers(r, section):
        return r["metrics"] if section == "metrics" else r["numbers"][section]

    def compare(tag, ref, runs):
        if "error" in ref or any("error" in r for r in runs):
            out[tag] = "error"
            return
        bad = [k for r in runs for k in ("cells",) if r.get(k) != ref.get(k)]
        bad += [s for r in runs for s in same if r["report_sections"].get(s) != ref["report_sections"].get(s)]
        res = {}
        for s in TOLERANT:
            if any(r["report_sections"].get(s) != ref["report_sections"].get(s) for r in runs):
                bad += [s for r in runs if r["skeleton"][s] != ref["skeleton"][s]]  # a key or a text differs
                rel = max(max_relative_difference(numbers(ref, s), numbers(r, s)) for r in runs)
                res[s] = rel
                bad += [s] if rel > RELATIVE else []
        out[tag] = {"equal": not bad, "differ": sorted(set(bad)),
                    "within_relative_difference": {s: f"{rel:.1e} <= {RELATIVE:g}" for s, rel in res.items()
                                                   if rel <= RELATIVE and s not in bad}}

    for name in ADULT:
        runs = [doc[f"adult_cluster_local{w}"].get(name) for w in workers]
        if all(runs):
            compare(f"adult {name}", doc["adult"][f"{name}.parquet"], runs)
    hm = doc.get("hepmass", {})
    if "single" in hm:
        compare("hepmass", hm["single"], [hm[f"cluster_local{w}"] for w in workers])
        # the same 2 input shards on every cluster size: the part files byte for byte
        parts = [hm[f"cluster_local{w}"].get("out") for w in workers]
        out["hepmass part files"] = {"equal": all(p is not None and p == parts[0] for p in parts)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Adult in one process only")
    ap.add_argument("--hepmass-rows", type=int, default=200_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 3], help="cluster sizes (local:N), default 2 3")
    ap.add_argument("--only", help="comma-separated Adult configurations (default: all)")
    ap.add_argument("--no-hepmass", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="output_hashes_")
    configs = {k: v for k, v in ADULT.items() if not a.only or k in a.only.split(",")}
    doc: dict = {"adult": {}, "hepmass": {}, **{f"adult_cluster_local{w}": {} for w in a.workers}}
    try:
        for name, args in configs.items():
            for ext in ("csv", "parquet"):
                o = os.path.join(tmp, f"{name}.{ext}")
                doc["adult"][f"{name}.{ext}"] = run_cli(["--dataset", "adult", *args], o, o + ".json")
                print(name, ext, file=sys.stderr, flush=True)
            for w in [] if a.quick else a.workers:
                o = os.path.join(tmp, f"{name}_cluster{w}")
                doc[f"adult_cluster_local{w}"][name] = run_cli(["--dataset", "adult", *args, "--cluster",
                                                                f"local:{w}"], o, o + ".json")
                print(name, f"local:{w}", file=sys.stderr, flush=True)
        if not (a.quick or a.no_hepmass):
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
            print("hepmass single", file=sys.stderr, flush=True)
            for w in a.workers:
                o = os.path.join(tmp, f"hm_cluster{w}")
                doc["hepmass"][f"cluster_local{w}"] = run_cli([d, *hq, "--cluster", f"local:{w}"], o, o + ".json")
                print("hepmass", f"local:{w}", file=sys.stderr, flush=True)
            doc["hepmass"]["rows"] = a.hepmass_rows
        if not a.quick:
            doc["checks"] = checks(doc, a.workers)
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
