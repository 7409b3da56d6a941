"""``gpuanon anonymize``: Mondrian k-anonymity (+ l-diversity, t-closeness), verified, then written."""

from __future__ import annotations

import logging
import time

from ..errors import InputError
from .common import given, hierarchy_spec, plural, read_input, rho_value
from .config import defaults
from .options import BACKENDS, MODES, add_criteria, add_hierarchy_options, table_command

log = logging.getLogger("gpuanon")


def add_parser(sub, config: dict | None = None):
    a = table_command(sub, "anonymize", "Mondrian k-anonymity (+ l-diversity, t-closeness)",
                      "Anonymize a table with Mondrian partitioning; the output is "
                      "verified independently before it is written.")
    add_criteria(a, True)
    g = a.add_argument_group("algorithm and output")
    g.add_argument("--mode", choices=MODES, help="Mondrian cut rule (default strict)")
    g.add_argument("--format", choices=["range", "minmax", "mean"],
                   help="numeric QIs as 'lo-hi' text, <col>_min/<col>_max columns, or the class mean (default range)")
    g.add_argument("--max-suppression", dest="max_suppression", type=float,
                   help="fraction of rows that may be suppressed (default 0.01)")
    g.add_argument("--backend", choices=BACKENDS, help="default: $GPUANON_BACKEND or auto")
    g.add_argument("--cluster", metavar="SPEC",
                   help="run on Dask workers: local:N, cuda:N or a scheduler address tcp://host:8786; the "
                        "input is then read by the workers (a directory of Parquet files, one shard each) and "
                        "--out is a directory of Parquet files they write; --optimize and hierarchies (files and "
                        "auto) work there too")
    add_hierarchy_options(g)
    g.add_argument("--out", help="output table (.csv, .csv.gz, .parquet), written atomically")
    g.add_argument("--report", help="JSON report (every metric under 'metrics')")
    g.add_argument("--html", help="self-contained HTML report with plots")
    g.add_argument("--config", help="TOML file with the same keys as these options (options win)")
    a.set_defaults(**defaults("anonymize"))
    if config:  # a --config file: over the packaged defaults, under the options typed
        a.set_defaults(**config)
    return a


def run(args) -> int:
    from ..report import command_report, render_html  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    if getattr(args, "cluster", None):  # scale-out on Dask: the workers read and write the table
        from ..distributed.command import anonymize_on_cluster  # noqa: PLC0415

        return anonymize_on_cluster(args, lambda roles: estimator(args, roles, cluster=args.cluster))

    t0 = time.perf_counter()
    out_path, report_path, html_path = args.out, args.report, args.html
    outputs = command_outputs(args, [("--out", out_path, True), ("--report", report_path, False),
                                     ("--html", html_path, False)])
    if args.k is None:
        raise InputError("no k given; pass --k (e.g. --k 3)")
    # a CSV output gets the pass-through columns back as the text they were read as; a Parquet output
    # gets them typed by the reader's rules (numbers as numbers)
    as_text = not str(out_path or "").lower().endswith((".parquet", ".pq"))
    df, roles, source = read_input(args, device_ok=True, pass_through=as_text)
    t_read = time.perf_counter() - t0
    m = estimator(args, roles)
    nested_types = (getattr(df, "attrs", None) or {}).get("arrow_types")
    out = m.fit_transform(df)
    if nested_types and hasattr(out, "attrs"):  # a Parquet output keeps the input's struct / list types
        out.attrs["arrow_types"] = nested_types
    with outputs.writing() as w:  # every output to a temporary file; all renamed at the end, or none
        t1 = time.perf_counter()
        if out_path:
            w.table("--out", out, metadata=m.output_metadata_)
        t_write = time.perf_counter() - t1
        report = command_report(m.report_, source=source, output=out_path, verification=m.verification_.to_dict(),
                                read=t_read, write=t_write, total=time.perf_counter() - t0)
        if report_path:
            w.json("--report", report)
        if html_path:
            w.text("--html", render_html(report))
    secs = report["seconds"]
    if not args.quiet and secs["write"] >= 0.5:
        log.info("write done in %.2f s", secs["write"])
    written = [p for p in (out_path, report_path, html_path) if p]
    log.info("%s; %.2f s%s", summary_line(report), secs["total"],
             f"; wrote {', '.join(map(str, written))}" if out_path else
             "; no --out given, " + (f"no table written (wrote {', '.join(map(str, written))})" if written
                                     else "nothing written"))
    return 0


def estimator(args, roles: dict, cluster=None):
    """The Mondrian estimator the options describe (``roles``: a named data set's default roles)."""
    from ..anonymize.mondrian import Mondrian  # noqa: PLC0415

    qi = given(args.qi, roles.get("quasi_identifiers"))
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    return Mondrian(
        k=args.k, l=args.l, t=None if args.t is None else float(args.t), l_kind=args.l_kind, c=float(args.c),
        t_distance=args.t_distance, quasi_identifiers=qi, sensitive=given(args.sensitive, roles.get("sensitive")),
        target=given(args.target, roles.get("target")), identifiers=args.identifiers, numeric=args.numeric,
        categorical=args.categorical, mode=args.mode, output_format=args.format,
        max_suppression=float(args.max_suppression), backend=args.backend, progress=not args.quiet,
        hierarchies=hierarchy_spec(args), rho=rho_value(args.rho), optimize=bool(args.optimize), cluster=cluster)


def summary_line(report: dict) -> str:
    """What a run did, in words, naming only the criteria that were asked for.

    >>> summary_line({"n_rows_in": 10, "n_rows_out": 10, "n_suppressed": 0, "n_classes": 1,
    ...               "requested": {"k": 3, "l": 0, "t": None}, "achieved": {"k": 10, "l": None, "t": None}})
    '10 rows in, 10 out, none suppressed; 1 class, the smallest of 10 rows (k = 3 asked)'
    """
    req, a = report["requested"], report["achieved"]
    sup = report["n_suppressed"]
    parts = [f"{report['n_rows_in']:,} rows in, {report['n_rows_out']:,} out, "
             f"{'none' if not sup else f'{sup:,}'} suppressed",
             f"{plural(report['n_classes'], 'class', 'classes')}, the smallest of "
             f"{plural(a['k'], 'row')} (k = {req['k']} asked)"]
    if req.get("l"):
        kind = req.get("l_kind", "distinct")
        parts.append(f"at least {a['l']} distinct sensitive values per class (l = {req['l']}"
                     f"{'' if kind == 'distinct' else ', ' + kind} asked)")
    n_miss = report.get("n_sensitive_missing") or 0
    if n_miss:
        parts.append(f"{plural(n_miss, 'row')} with a missing sensitive value"
                     f"{', counted toward no l' if req.get('l') else ''}")
    if req.get("t") is not None:
        parts.append(f"largest distance to the whole table {a['t']:.4f} ({a.get('t_distance') or req.get('t_distance')}"
                     f", t = {req['t']} asked)")
    return "; ".join(parts)
