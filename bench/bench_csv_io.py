"""Whole ``gpuanon anonymize`` commands, CSV against Parquet: the read and write stages of each.

For each input (the bundled Adult table and HEPMASS-shaped N x 28, each saved as a CSV file, and
``--dataset hepmass --rows N`` itself, whose float columns the writer formats) the
command runs with ``--out o.csv`` and ``--out o.parquet``; the JSON report's ``seconds`` give the read
and write stages. ``--root DIR`` runs another checkout's code (e.g. the main branch) for a paired
before / after on the same machine.

    python bench/bench_csv_io.py --rows 1000000 --root /path/to/checkout --out result.json

Prints one JSON document: per input and output kind, ``read``, ``write`` and ``total`` seconds (the
best of ``--repeat`` runs) and the write ratio CSV / Parquet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _inputs(folder: str, rows: list[int]) -> list[tuple[str, str | None, list[str]]]:
    """``(name, csv path, anonymize options)`` for Adult and HEPMASS-shaped tables, written once, and the
    HEPMASS-shaped generator itself (no input file: its float columns are written as numbers)."""
    from gpuanon.datasets import get_dataset

    made = []
    df, roles = get_dataset("adult")
    p = os.path.join(folder, "adult.csv")
    if not os.path.exists(p):
        df.to_csv(p, index=False)
    made.append(("adult 32,561 x 15", p, ["--qi", ",".join(roles["quasi_identifiers"]), "--target", "income",
                                          "--k", "10"]))
    for n in rows:
        p = os.path.join(folder, f"hepmass_{n}.csv")
        df, roles = get_dataset("hepmass", rows=n, seed=0)
        if not os.path.exists(p):
            df.to_csv(p, index=False)
        made.append((f"hepmass {n:,} x 29", p, ["--qi", ",".join(roles["quasi_identifiers"][:8]),
                                                "--target", "label", "--k", "10"]))
        made.append((f"--dataset hepmass --rows {n:,} (floats, no CSV read)", None,
                     ["--dataset", "hepmass", "--rows", str(n), "--qi", ",".join(roles["quasi_identifiers"][:8]),
                      "--k", "10"]))
    return made


def _run(root: str, inp: str, opts: list[str], out: str, report: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root, GPUANON_BACKEND="cpu")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gpuanon", "anonymize", *([inp] if inp else []), *opts, "--out", out, "--report", report,
                        "-q"], cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1:]}
    with open(report) as f:
        sec = json.load(f)["seconds"]
    return {"read": sec.get("read"), "write": sec.get("write"), "total": sec.get("total"), "wall": wall,
            "bytes": os.path.getsize(out)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000000", help="HEPMASS-shaped row counts, comma-separated")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="checkout whose gpuanon runs")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "gpuanon_bench_csv"),
                    help="folder for the input CSV files (kept between runs)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", help="also write the JSON document here")
    a = ap.parse_args(argv)
    os.makedirs(a.data, exist_ok=True)
    rows = [int(r) for r in a.rows.split(",") if r.strip()]
    doc = {"root": os.path.abspath(a.root), "results": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name, inp, opts in _inputs(a.data, rows):
            entry = {"input": name}
            for kind in ("csv", "parquet"):
                runs = [_run(a.root, inp, opts, os.path.join(tmp, f"o.{kind}"), os.path.join(tmp, "r.json"))
                        for _ in range(a.repeat)]
                ok = [r for r in runs if "error" not in r]
                entry[kind] = min(ok, key=lambda r: r["write"]) if ok else runs[0]
            if "error" not in entry["csv"] and "error" not in entry["parquet"]:
                entry["write_ratio_csv_over_parquet"] = round(entry["csv"]["write"] / entry["parquet"]["write"], 2)
            doc["results"].append(entry)
            print(json.dumps(entry), file=sys.stderr)
    text = json.dumps(doc, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return doc


if __name__ == "__main__":
    main()
