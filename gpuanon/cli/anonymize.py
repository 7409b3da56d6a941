"""``gpuanon anonymize``: Mondrian k-anonymity (+ l-diversity, t-closeness), verified, then written.

One path for both runners (:func:`run`): the estimator's runner (:meth:`Mondrian.runner`: this
process, or with ``--cluster`` the Dask runner, the cluster opened once) fits the plan, made and
validated once (:meth:`gpuanon.anonymize.plan.Plan.of`), and publishes it; every output is then
written together, all or none (:class:`gpuanon.output.io.Outputs`). On a cluster the input is a directory
of Parquet files (or one ``.parquet`` file) that the workers read themselves, one shard per file;
any other input (CSV, ``--dataset``) is read here and its rows are scattered. The output is then
always a directory of Parquet files written by the workers, one per shard, rows in input order,
into a temporary directory renamed with the report and the page. Both runners' reports are built
by :func:`gpuanon.report.assemble.anonymization_report` from their fit record.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from pathlib import Path

from . import attack_release
from ..errors import InputError
from .common import given, hierarchy_spec, plural, read_input, rho_value
from .config import defaults
from .options import (BACKENDS, MODES, add_cluster_timeout, add_criteria, add_hierarchy_options,
                      add_risk_options, table_command)

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
                        "auto) work there too; local:N runs N worker processes (local:N:threads: threads). A "
                        "worker lost mid-run is recovered from (its shards rebuilt on the others); a lost "
                        "scheduler or every worker lost stops the run with exit status 4, nothing written")
    add_cluster_timeout(g)
    add_hierarchy_options(g)
    g.add_argument("--out", help="output table (.csv, .csv.gz, .parquet), written atomically")
    g.add_argument("--report", help="JSON report (every metric under 'metrics')")
    g.add_argument("--html", help="self-contained HTML report with plots")
    g.add_argument("--config", help="TOML file with the same keys as these options (options win)")
    add_risk_options(a, max_risk=True)
    attack_release.add_anonymize_options(a)
    a.set_defaults(**defaults("anonymize"))
    if config:  # a --config file: over the packaged defaults, under the options typed
        a.set_defaults(**config)
    return a


def run(args) -> int:
    """One path for both runners (:mod:`gpuanon.anonymize.runners`): read, plan once, fit, publish,
    and write every output together (all or none)."""
    from ..anonymize.plan import Plan  # noqa: PLC0415
    from ..output.io import remove  # noqa: PLC0415
    from ..report import anonymization_report, command_report, render_html  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    max_risk = k_for_max_risk(args)  # --max-risk R sets k
    cluster = getattr(args, "cluster", None) or None
    t0 = time.perf_counter()
    out_path, report_path, html_path = args.out, args.report, args.html
    if cluster:  # the workers write the table: a new directory of Parquet files
        check_out_dir(out_path)
    outputs = command_outputs(args, [("--out", out_path, not cluster), ("--report", report_path, False),
                                     ("--html", html_path, False)])
    if args.k is None:
        raise InputError("no k given; pass --k (e.g. --k 3) or --max-risk R")
    source, roles, name = read_source(args, cluster)
    if cluster and getattr(args, "attacks", None):
        raise InputError("--attacks reads the whole table in one process; drop --cluster, or run "
                         "gpuanon attack --release on the output afterwards")
    if not cluster:
        source = attack_release.split_for_attacks(args, source)  # --control-fraction: rows held out of the release
    m = estimator(args, roles, cluster=cluster)
    want_risk = bool(report_path or html_path)
    staged = outputs.staging("--out") if cluster and out_path else None  # renamed with the other outputs
    runner = m.runner(**(cluster_options(args, staged, gather=want_risk and not out_path) if cluster else {}))
    n_rows = runner.rows(source)
    if want_risk:  # the risk options' errors before the run, not after it
        from ..risk import check_population  # noqa: PLC0415

        check_population(n_rows, args.population, args.sampling_fraction, args.risk_threshold)
    t_read = time.perf_counter() - t0
    try:
        result = runner.fit(Plan.of(m, n_rows), source)  # the plan: made and validated once
        # the risk section's input classes before the output frame exists (their grouping's words
        # and the output frame were the run's peak memory together)
        early = input_classes_early(result, source) if want_risk and result.table is not None else None
        pub = runner.publish(result, source)
    except BaseException:
        if staged is not None:
            remove(staged)
        raise
    out = pub.output
    nested_types = (getattr(source, "attrs", None) or {}).get("arrow_types")
    if nested_types and hasattr(out, "attrs"):  # a Parquet output keeps the input's struct / list types
        out.attrs["arrow_types"] = nested_types
    with outputs.writing() as w:  # every output to a temporary file; all renamed at the end, or none
        t1 = time.perf_counter()
        if staged is not None:
            w.adopt("--out", staged)
        elif out_path:
            w.table("--out", out, metadata=pub.metadata)
        t_write = result.timings.get("write", 0.0) if cluster else time.perf_counter() - t1
        # re-identification risk of the input and of the output (inside the run's total)
        risk = None
        if want_risk:
            risk = (risk_report(args, source, out, result, w.tmps.get(out_path), early) if result.table is not None
                    else cluster_risk(args, source, result))
        report = anonymization_report(result, n_rows_in=pub.n_rows_in, n_rows_out=pub.n_rows_out)
        report = command_report(report, source=name, output=out_path, verification=pub.verification.to_dict(),
                                read=t_read, write=t_write, total=time.perf_counter() - t0)
        if risk is not None:
            report["risk"] = risk
        if max_risk is not None:
            report["max_risk"] = max_risk
        attack_release.attacks_after_write(args, result.schema, source, out, report)  # --attacks: the risks of the output
        if report_path:
            w.json("--report", report)
        if html_path:
            w.text("--html", render_html(report))
    secs = report["seconds"]
    if not args.quiet and secs["write"] >= 0.5 and not cluster:
        log.info("write done in %.2f s", secs["write"])
    log.info("%s; %.2f s%s%s", summary_line(report), secs["total"], on_workers(result), wrote(out_path, report_path,
                                                                                          html_path, result))
    return 0


def read_source(args, cluster):
    """``(source, roles, name)``: the table as the runner takes it. One process: the frame read here.
    A cluster: a directory of Parquet files (or one ``.parquet`` file) is read by the workers (its
    path); any other input (CSV, ``--dataset``) is read here and its rows are scattered."""
    if cluster and args.input and not args.dataset and is_parquet_source(args.input):
        if getattr(args, "target_expr", None):
            raise InputError("--target-expr needs the table in this process; with --cluster write the derived "
                             "target into the Parquet files, or drop --cluster")
        return str(args.input), {}, str(args.input)
    if cluster:
        return read_input(args)
    # a CSV output gets the pass-through columns back as the text they were read as; a Parquet output
    # gets them typed by the reader's rules (numbers as numbers)
    as_text = not str(args.out or "").lower().endswith((".parquet", ".pq"))
    return read_input(args, device_ok=True, pass_through=as_text)


def cluster_options(args, out_dir, gather: bool) -> dict:
    """The Dask runner's options from the command line: the workers write ``out_dir``; ``gather``
    brings the output here (the risk section without --out)."""
    timeout = getattr(args, "cluster_timeout", None)
    timeout = 60.0 if timeout is None else timeout
    if not timeout > 0:
        raise InputError(f"--cluster-timeout must be a number of seconds > 0, got {timeout:g}; e.g. --cluster-timeout 60")
    return dict(out_dir=out_dir, gather=gather, local_rows=getattr(args, "local_rows", None), timeout=timeout)


def on_workers(result) -> str:
    """`` on N worker(s)`` after a cluster run's summary line."""
    return "" if result.cluster is None else f" on {result.cluster.info['n_workers']} worker(s)"


def wrote(out_path, report_path, html_path, result) -> str:
    """What the run wrote, for its summary line."""
    written = [p for p in (out_path, report_path, html_path) if p]
    if out_path and result.cluster is not None:
        return f"; wrote {str(out_path).rstrip('/')}/ ({len(result.cluster.out_files)} Parquet file(s))" + (
            f", {', '.join(map(str, written[1:]))}" if written[1:] else "")
    if out_path:
        return f"; wrote {', '.join(map(str, written))}"
    return "; no --out given, " + (f"no table written (wrote {', '.join(map(str, written))})" if written
                                   else "nothing written")


def k_for_max_risk(args) -> dict | None:
    """``--max-risk R``: k = max(2, ceil(1 / R)), the smallest k whose every class has a prosecutor risk
    1 / size <= R; a k-anonymous output (k >= 2) has no sample uniques, so the population models (Dankar's
    rule) estimate no population uniques: the prosecutor bound alone decides k. Sets ``args.k``."""
    r = getattr(args, "max_risk", None)
    if r is None:
        return None
    if args.k is not None:
        raise InputError("give --k or --max-risk, not both (--max-risk R chooses k = ceil(1 / R))")
    if not 0 < r <= 1:
        raise InputError(f"--max-risk {r} is outside (0, 1]; give e.g. --max-risk 0.1 (k = 10)")
    k = max(2, math.ceil(1.0 / r - 1e-9))  # the tolerance keeps R = 1/3 (as a float) at k = 3 ...
    args.k = k + 1 if 1.0 / k > r else k  # ... and never lets 1 / k exceed R (R = 0.3333333333 gives 4)
    log.info("--max-risk %g: k = %d (prosecutor risk 1 / k = %.4g)", r, args.k, 1.0 / args.k)
    return {"requested": r, "k": args.k, "prosecutor_highest_bound": 1.0 / args.k,
            "population_uniqueness": "0 for any k >= 2: no sample uniques are left"}


def input_classes_early(result, frame) -> tuple:
    """``(the input's classes, seconds)`` of the risk section (:func:`risk_report`), grouped from the
    fit's encoded keys before the output frame is made."""
    from ..anonymize.risk_classes import input_classes  # noqa: PLC0415

    t = time.perf_counter()
    return input_classes(result.table, frame), time.perf_counter() - t


def risk_report(args, df, out, result, written=None, early=None) -> dict:
    """The report's ``risk`` section, with the run's QIs and backend, and its seconds: the classes
    are the fit's own (:mod:`gpuanon.anonymize.risk_classes`; ``early``: the input's already grouped,
    :func:`input_classes_early`, its seconds counted in the section's); with ``--risk-check readback`` also the
    independent computation from the input frame and the output read back from ``written`` (the
    output file as written, not yet renamed; None: the output frame), and whether both agree."""
    from ..anonymize.risk_classes import fit_classes  # noqa: PLC0415
    from ..risk.report import section_of_classes  # noqa: PLC0415

    t = time.perf_counter()
    backend = "gpu" if result.backend.is_gpu else "cpu"
    kw = dict(population=args.population, sampling_fraction=args.sampling_fraction, threshold=args.risk_threshold,
              suda_max_size=args.suda_max_size, backend=backend)
    qi = list(result.schema.quasi_identifiers)
    before, after, cols = fit_classes(result, df, result.plan.output_format, None if early is None else early[0])
    section = section_of_classes(before, after, qi, cols, suda_tables=(df, out) if args.suda else None, **kw)
    section["seconds"] = round(time.perf_counter() - t + (0.0 if early is None else early[1]), 6)
    if getattr(args, "risk_check", None) == "readback":
        section["check"] = readback_check(args, section, df, out if written is None else read_back(written, args.out,
                                                                                                    cols), qi, kw)
        section["check"]["source"] = "output frame (no --out)" if written is None else str(args.out)
    return section


def readback_check(args, section: dict, before, after, qi, kw) -> dict:
    """``--risk-check readback``: the section computed again from the two tables (the input frame and
    the output as read back), as ``gpuanon risk`` groups a table, and where it differs from ``section``."""
    from ..risk.report import differences, risk_section  # noqa: PLC0415

    t = time.perf_counter()
    check = risk_section(before, after, qi, suda=args.suda, **kw)
    diff = differences({k: section[k] for k in ("before", "after")}, {k: check[k] for k in ("before", "after")})
    if diff:
        log.warning("the risk section from the fit and from the output read back differ at %s", ", ".join(diff[:5]))
    return {"method": "readback", "agree": not diff, "differences": diff[:50],
            "seconds": round(time.perf_counter() - t, 6)}


def read_back(tmp, out_path, columns):
    """The QI columns of the output file ``out_path``, written to ``tmp`` (not yet renamed), read as
    ``gpuanon risk`` reads a table (:func:`gpuanon.datasets.load_table`)."""
    from ..datasets import load_table  # noqa: PLC0415

    name = Path(out_path).name.lower()
    if name.endswith((".parquet", ".pq")):
        import pandas as pd  # noqa: PLC0415

        return pd.read_parquet(tmp, columns=list(columns))
    suffix = next(s for s in (".csv.gz", ".csv", ".tsv") if name.endswith(s))
    with tempfile.TemporaryDirectory() as d:  # the reader picks its kind by the name's extension
        link = Path(d) / f"output{suffix}"
        os.symlink(os.path.abspath(tmp), link)
        return load_table(link)[list(columns)]


def cluster_risk(args, source, res) -> dict:
    """The ``risk`` section of a cluster run, as one process computes it (:func:`risk_report`): the
    input (the frame read here, or the QI columns of the Parquet shards read back) before, and the
    output (the QI columns of the written Parquet directory read back, or the gathered frame) after.
    Both sides are brought to this process: the risk of a table too large for it needs ``gpuanon risk``
    on a machine that holds it."""
    import pandas as pd  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    from ..backend import gpu_usable  # noqa: PLC0415
    from ..table.cells import resolve_qi_columns  # noqa: PLC0415
    from ..risk.report import risk_section  # noqa: PLC0415

    qi = list(res.schema.quasi_identifiers)
    t = time.perf_counter()
    if isinstance(source, pd.DataFrame):
        before = source[qi].reset_index(drop=True)
    else:
        before = pd.read_parquet(source, columns=qi)
    if args.out is not None:
        files = res.cluster.out_files
        cols = resolve_qi_columns(qi, pq.read_schema(files[0]).names)
        after = pd.concat([pd.read_parquet(f, columns=cols) for f in files], ignore_index=True)
    else:
        after = res.cluster.output
    gpu = res.backend.is_gpu and gpu_usable()  # on the GPU when the workers' is and this process has one
    section = risk_section(before, after, qi, population=args.population, sampling_fraction=args.sampling_fraction,
                           threshold=args.risk_threshold, suda=args.suda, suda_max_size=args.suda_max_size,
                           backend="gpu" if gpu else "cpu")
    section["seconds"] = round(time.perf_counter() - t, 6)
    return section


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
