"""``gpuanon risk``: the re-identification risk of any table, raw or anonymized (docs/risk.md).

    gpuanon risk --dataset adult --sampling-fraction 0.01 --report risk.json --html risk.html
    gpuanon risk anon.csv --qi age,zip --original data.csv --population 1000000 --html risk.html
"""

from __future__ import annotations

from ..errors import InputError
from .common import plural, read_input, reader_options, refuse_other_original
from .config import defaults
from .options import BACKENDS, add_input, add_quiet


def add_parser(sub):
    p = sub.add_parser("risk", help="re-identification risk of a table (ARX's and sdcMicro's measures)",
                       description="Prosecutor, journalist and marketer risk, sample and population uniqueness "
                                   "(Zayatz, Pitman, SNB, Dankar's rule) and individual risk with sampling weights, "
                                   "of a raw or anonymized table; before and after with --original.")
    add_quiet(p)
    add_input(p)
    p.add_argument("--qi", help="QI columns as published (for minmax output the base names work; default for "
                                "--dataset: its standard QIs)")
    g = p.add_argument_group("population: N or f (at most one), and F_j from weights or a population table "
                             "(at most one)")
    g.add_argument("--population", type=int, metavar="N", help="size of the population the table was drawn from")
    g.add_argument("--sampling-fraction", dest="sampling_fraction", type=float, metavar="F",
                   help="sampling fraction n / N in (0, 1]")
    g.add_argument("--weights", metavar="COL", help="sampling-weights column: F_j = sum of the weights of class j")
    g.add_argument("--population-table", dest="population_table", metavar="P",
                   help="the population table (CSV / Parquet) the sample was drawn from, holding the QIs")
    p.add_argument("--risk-threshold", "--threshold", dest="threshold", type=float, metavar="R",
                   help="records at risk: risk above this (default 0.2; --threshold is the same option)")
    p.add_argument("--suda", action="store_true", help="SUDA2 special uniques and DIS-SUDA scores (expensive)")
    p.add_argument("--suda-max-size", dest="suda_max_size", type=int, metavar="S", help="largest MSU size for --suda")
    p.add_argument("--per-record", dest="per_record", metavar="OUT", help="table of every row's class and risks")
    p.add_argument("--original", metavar="ORIG", help="the table before anonymization: before / after side by side")
    p.add_argument("--report", help="JSON report")
    p.add_argument("--html", help="HTML page with the measures and plots")
    p.add_argument("--backend", choices=BACKENDS, help="where the classes are grouped (default cpu)")
    p.set_defaults(**defaults("risk"))
    return p


def _columns(names, df, what: str) -> list:
    from ..table.cells import resolve_qi_columns  # noqa: PLC0415
    from ..table.schema import suggest  # noqa: PLC0415

    try:
        return resolve_qi_columns(names, df.columns)
    except KeyError as exc:
        c = exc.args[0]
        raise InputError(f"quasi-identifier '{c}' is not a column of {what}{suggest(c, list(map(str, df.columns)))}"
                         ) from None


def summary_lines(doc: dict, label: str = "") -> list:
    s = doc["sample"]
    p = s["prosecutor"]
    out = [f"{label}{plural(s['n'], 'row')} counted ({s['n_suppressed']:,} suppressed left out), "
           f"{plural(s['n_classes'], 'class', 'classes')}, {s['sample_uniques']:,} sample uniques "
           f"({100 * s['sample_uniqueness']:.2f}%)",
           f"{label}prosecutor: highest {p['highest']:.4g}, success rate {p['average']:.4g}, records at risk "
           f"{100 * p['records_at_risk']:.2f}% (threshold {p['threshold']:g})"]
    if s["population_source"] != "sample":
        j = s["journalist"]
        out.append(f"{label}journalist ({s['population_source']}): highest {j['highest']:.4g}, success rate "
                   f"{j['average']:.4g}; marketer {s['marketer']['average']:.4g}")
    pop = doc.get("population")
    if pop:
        d = pop["dankar"]
        u = "not available" if d["uniques"] is None else f"{d['uniques']:,.1f} ({100 * d['fraction']:.4f}%)"
        out.append(f"{label}population uniques (N = {pop['population_size']:,}, Dankar -> {d['model']}): {u}")
    ind = doc.get("individual")
    if ind:
        out.append(f"{label}individual risk: {ind['global_risk']:.2f} expected re-identifications "
                   f"({100 * ind['global_risk_share']:.3f}%)")
    return out


def run(args) -> int:
    from ..datasets import load_table  # noqa: PLC0415
    from ..risk import assess  # noqa: PLC0415
    from ..risk.report import same_population  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    outputs = command_outputs(args, [("--report", args.report, False), ("--html", args.html, False),
                                     ("--per-record", args.per_record, True)])
    if args.suda_max_size is not None and not args.suda:
        raise InputError("--suda-max-size applies to --suda; add --suda or leave it out")
    df, roles, source = read_input(args, checked=False)  # published cells (intervals, sets, *) are text
    qi = args.qi or ",".join(roles.get("quasi_identifiers", []))
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    names = [x.strip() for x in qi.split(",") if x.strip()]
    cols = _columns(names, df, "the table")
    ptable = load_table(args.population_table, **reader_options(args, checked=False)) if args.population_table else None
    kw = dict(population=args.population, sampling_fraction=args.sampling_fraction, weights=args.weights,
              population_table=ptable, threshold=args.threshold, suda=args.suda, suda_max_size=args.suda_max_size)
    before = None
    if args.original:
        orig = load_table(args.original, **reader_options(args, checked=False))
        refuse_other_original(df, orig, names, args.original, source)
        ocols = _columns(names, orig, f"--original '{args.original}'")
        okw = dict(kw)  # N as given, or the original's own rows / f (as `gpuanon risk ORIGINAL` and ARX take it)
        if args.weights is not None and args.weights not in orig.columns:
            okw["weights"] = None
        b = assess(orig, ocols, backend=args.backend, **okw)
        kw.update(population=same_population(b), sampling_fraction=None)  # the same N on both sides
        before = b.to_dict()
    res = assess(df, cols, per_record=bool(args.per_record), backend=args.backend, **kw)
    doc = res.to_dict()
    report = {"input": source, "original": args.original, "risk": doc, "risk_original": before}
    lines = ([*summary_lines(before, "before: "), *summary_lines(doc, "after:  ")] if before is not None
             else summary_lines(doc))  # before any output is written
    with outputs.writing() as w:
        if args.report:
            w.json("--report", report)
        if args.per_record:
            w.table("--per-record", res.per_record)
        if args.html:
            from ..report.pages import source_name  # noqa: PLC0415
            from ..report.risk_page import render_risk_html  # noqa: PLC0415

            w.text("--html", render_risk_html(before, doc, header=f"{source_name(source)}" + (
                f" against the original {source_name(args.original)}" if args.original else ""),
                threshold=args.threshold))
    for line in lines:
        print(line)
    return 0
