"""``gpuanon anonymize ... --cluster SPEC --out DIR``: the command on a Dask cluster.

The input is a directory of Parquet files (or one ``.parquet`` file) that the workers read
themselves, one shard per file; any other input (CSV, ``--dataset``) is read here and its rows
are scattered. The output is always a directory of Parquet files written by the workers, one per
shard, rows in input order (a temporary directory renamed when every shard is written). The JSON
report (and HTML page) are written here; the table never is.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ..errors import InputError

log = logging.getLogger("gpuanon")

TABLE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".parquet", ".pq", ".json")


def is_parquet_source(path) -> bool:
    p = os.fspath(path)
    return os.path.isdir(p) or p.lower().endswith((".parquet", ".pq"))


def check_out_dir(out) -> None:
    """A cluster run writes a directory; refuse a file name or an existing path before any work."""
    if out is None:
        return
    p = os.fspath(out)
    if p.lower().endswith(TABLE_SUFFIXES):
        stem = p
        for suf in TABLE_SUFFIXES:
            if stem.lower().endswith(suf):
                stem = stem[: -len(suf)]
                break
        raise InputError(f"--cluster writes the output as a directory of Parquet files (one per input shard), and "
                         f"'{p}' names a file; give a directory, e.g. --out {stem}_out/")
    if os.path.exists(p):
        raise InputError(f"output '{p}' exists; a cluster run writes a new directory: choose another name")
    parent = Path(p).resolve().parent
    if not parent.is_dir():
        raise InputError(f"cannot write '{p}': folder '{parent}' does not exist; create it first")


def anonymize_on_cluster(args, make_estimator) -> int:
    """Run ``gpuanon anonymize`` on ``args.cluster``; ``make_estimator(roles)`` builds the Mondrian
    from the command's options (``roles``: a named data set's default roles)."""
    from ..io import atomic_path, check_writable, write_json  # noqa: PLC0415
    from ..report import command_report, render_html  # noqa: PLC0415
    from .estimator import cluster_report, split_frame  # noqa: PLC0415
    from .cluster import open_cluster  # noqa: PLC0415
    from .mondrian import run_distributed  # noqa: PLC0415

    t0 = time.perf_counter()
    out = args.out
    check_out_dir(out)
    if args.report:
        check_writable(args.report, table=False)
    if getattr(args, "html", None):
        check_writable(args.html, table=False)
    if args.k is None:
        raise InputError("no k given; pass --k (e.g. --k 3)")
    frames = paths = None
    if args.input and not args.dataset and is_parquet_source(args.input):
        if getattr(args, "target_expr", None):
            raise InputError("--target-expr needs the table in this process; with --cluster write the derived "
                             "target into the Parquet files, or drop --cluster")
        paths, roles, source = args.input, {}, str(args.input)
    else:
        from ..cli.common import read_input  # noqa: PLC0415

        df, roles, source = read_input(args)
        frames = df
    m = make_estimator(roles)
    t_read = time.perf_counter() - t0
    with open_cluster(args.cluster, backend=m.backend) as handle:
        if frames is not None:
            frames = split_frame(frames, len(handle.workers))
        res = run_distributed(m, handle.client, frames=frames, paths=paths, out_dir=out, gather=False,
                              local_rows=getattr(args, "local_rows", None))
    n_in = res.verification.n_rows + res.n_suppressed
    report = cluster_report(m, res, n_in)
    report = command_report(report, source=source, output=out, verification=res.verification.to_dict(),
                            read=t_read, write=res.info["seconds"].get("output", 0.0),
                            total=time.perf_counter() - t0)
    if args.report:
        write_json(report, args.report)
    if getattr(args, "html", None):
        with atomic_path(args.html) as tmp:
            Path(tmp).write_text(render_html(report))
    from ..cli.anonymize import summary_line  # noqa: PLC0415

    log.info("%s; %.2f s on %d worker(s)%s", summary_line(report), report["seconds"]["total"], res.info["n_workers"],
             f"; wrote {str(out).rstrip('/')}/ ({len(res.out_files)} Parquet file(s))" if out else "; no --out given, nothing written")
    return 0
