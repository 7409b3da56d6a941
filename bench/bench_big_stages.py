"""The stage table of one whole ``gpuanon anonymize`` run (issue 28 item 5): CPU seconds (all threads,
``time.process_time``), wall seconds and the peak RSS so far (VmHWM) after each stage, run in-process.

    flock /work/helpers/big.lock python bench/bench_big_stages.py --rows 10500000 --out /tmp/x.parquet

The stages are the pipeline's own (``InProcess._stage``: encode, partition, class_statistics,
generalize, verify, metrics), the Parquet write (``output.io._write_table_file``) and the report's risk
section (``cli.anonymize.risk_report`` and, where the run computes it before the output, the input's
classes ``anonymize.risk_classes.input_classes``). Any other time lands in "other". Prints a
Markdown table; ``--json`` also writes it as JSON. Above 2M rows hold the machine-wide lock.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path


ROWS: list = []


def vm(key: str) -> float:
    """``VmHWM`` / ``VmRSS`` of this process, GiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 2 ** 20
    return float("nan")


@contextmanager
def timed(name: str):
    c, w = time.process_time(), time.perf_counter()
    try:
        yield
    finally:
        ROWS.append((name, time.process_time() - c, time.perf_counter() - w, vm("VmHWM")))


def wrap(obj, attr: str, name: str):
    fn = getattr(obj, attr)

    def inner(*a, **kw):
        with timed(name):
            return fn(*a, **kw)
    setattr(obj, attr, inner)


def install() -> None:
    from gpuanon.anonymize import pipeline, risk_classes
    from gpuanon.cli import anonymize as cli_anonymize
    from gpuanon.output import io

    stage = pipeline.InProcess._stage

    @contextmanager
    def staged(self, name):
        with timed(name), stage(self, name):
            yield
    pipeline.InProcess._stage = staged
    wrap(io, "_write_table_file", "write (Parquet)")
    wrap(cli_anonymize, "risk_report", "risk section")
    if hasattr(cli_anonymize, "input_classes_early"):
        wrap(cli_anonymize, "input_classes_early", "risk: input classes")
    del risk_classes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--format", default="minmax")
    p.add_argument("--out", default="/tmp/big_stages.parquet")
    p.add_argument("--report", default=None, help="the report JSON (default: OUT with .json)")
    p.add_argument("--json", default=None, help="also write the table here")
    a = p.parse_args(argv)
    install()
    from gpuanon.cli import main as cli_main

    report = a.report or str(Path(a.out).with_suffix(".json"))
    c0, w0 = time.process_time(), time.perf_counter()
    rc = cli_main(["anonymize", "--dataset", "hepmass", "--rows", str(a.rows), "--k", str(a.k), "--format",
                   a.format, "--out", a.out, "--report", report, "--quiet"])
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    inner_cpu = sum(r[1] for r in ROWS if r[0] != "risk: input classes")
    inner_wall = sum(r[2] for r in ROWS if r[0] != "risk: input classes")
    rows = ROWS + [("other (read, report, ...)", cpu - inner_cpu, wall - inner_wall, float("nan")),
                   ("whole command", cpu, wall, vm("VmHWM"))]
    print(f"rows {a.rows}, k {a.k}, {a.format}, rc {rc}, load {os.getloadavg()[0]:.2f}")
    print("| stage | CPU s | wall s | VmHWM after (GiB) |\n| --- | ---: | ---: | ---: |")
    for name, c, w, h in rows:
        print(f"| {name} | {c:.2f} | {w:.2f} | {h:.2f} |")
    if a.json:
        Path(a.json).write_text(json.dumps([dict(stage=n, cpu=c, wall=w, hwm_gib=h) for n, c, w, h in rows],
                                           indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
