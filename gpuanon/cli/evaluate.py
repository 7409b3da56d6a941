"""``gpuanon evaluate``: train classifiers on protected data, test them on raw rows."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import InputError
from .common import read_input, split_list
from .config import defaults
from .options import BACKENDS, table_command

log = logging.getLogger("gpuanon")


def add_parser(sub):
    ev = table_command(sub, "evaluate", "train classifiers on protected data, test them on raw rows",
                        "Split once (stratified), protect the training part with each protection, "
                        "train each model, test on the raw held-out rows; write one row per protection "
                        "and model with every score and the protection's information-loss metrics.")
    g = ev.add_argument_group("evaluation")
    g.add_argument("--protections",
                   help="';'-separated: raw, k=3, k=3,l=2, k=3,t=0.2, k=3,optimize, k=3,hierarchies=auto, "
                        "distpab[,noise=0.3], suppress (default: raw;k=3;k=10;k=50;k=3,l=2;k=3,t=0.2;"
                        "k=3,optimize;distpab)")
    g.add_argument("--models",
                   help="comma-separated: rf,et,gb,svm,lr,sgd,nb,knn,mlp or 'all' (default all)")
    g.add_argument("--test-size", dest="test_size", type=float, help="held-out share (default 0.3)")
    g.add_argument("--random-state", dest="random_state", type=int,
                   help="seed of the split, the models and the perturbation (default 0)")
    g.add_argument("--positive", help="positive class of a binary target (default: the minority class)")
    g.add_argument("--max-suppression", dest="max_suppression", type=float)
    g.add_argument("--attacks", nargs="?", const=500, type=int, metavar="N",
                   help="attack every protection's release (singling out, linkability, inference of the sensitive "
                        "column; the held-out rows the control) with N attacks of each kind (default 500): its "
                        "risks in the report, the frontier of accuracy against attack risk on the page")
    g.add_argument("--backend", choices=BACKENDS)
    g.add_argument("--out", required=True, help="results CSV (one row per protection and model)")
    g.add_argument("--report", help="JSON with the results, protections and rank correlations "
                                    "(default: next to --out)")
    g.add_argument("--html", help="self-contained HTML page with the tables and plots")
    g.add_argument("--table", help="markdown table of accuracy / F1 like the thesis's 5.6-5.10 (default: printed)")
    ev.set_defaults(**defaults("evaluate"))
    return ev


def run(args) -> int:
    from ..evaluate import DEFAULT_PROTECTIONS, markdown_scores, run_evaluation  # noqa: PLC0415
    from ..report import render_evaluation_html  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    out = Path(args.out)
    report = args.report or str(out.with_suffix(".json"))
    rlabel = "--report" if args.report else "--report (default: next to --out)"
    outputs = command_outputs(args, [("--out", out, False), (rlabel, report, False), ("--html", args.html, False),
                                     ("--table", args.table, False)])
    df, roles, source = read_input(args)
    target = args.target or roles.get("target")
    if not target:
        raise InputError("no target column given; pass --target COLUMN")
    qi = split_list(args.qi) or roles.get("quasi_identifiers")
    ev = run_evaluation(df, DEFAULT_PROTECTIONS if args.protections is None else args.protections, args.models, quasi_identifiers=qi,
                        target=target, sensitive=args.sensitive or roles.get("sensitive"),
                        identifiers=split_list(args.identifiers), numeric=split_list(args.numeric),
                        categorical=split_list(args.categorical), test_size=args.test_size,
                        random_state=args.random_state, backend=args.backend,
                        max_suppression=args.max_suppression, positive=args.positive, attacks=args.attacks)
    ev.config["input"] = source
    doc = ev.to_dict()
    md = markdown_scores(ev.results)
    with outputs.writing() as w:  # every output, or none
        w.file("--out", lambda tmp: ev.results.to_csv(tmp, index=False))
        w.json(rlabel, doc)
        if args.html:
            w.text("--html", render_evaluation_html(doc))
        if args.table:
            w.text("--table", md)
    print(md, end="")
    log.info("wrote %s", ", ".join(str(p) for p in (out, report, args.html, args.table) if p))
    return 0
