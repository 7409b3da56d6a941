"""``gpuanon attack --release R --original O [--control C]``: singling out, linkability and inference on a
published table (gpuanon.attack, SPEC 14); the reconstruction attacks on a perturbed table are the
``--perturbed`` mode (``cli/attack.py``)."""

from __future__ import annotations

import logging

from ..errors import InputError
from .common import split_list

log = logging.getLogger("gpuanon")


def add_options(at) -> None:
    g = at.add_argument_group("attacks on a release (--release; anonymeter's singling out, linkability, inference)")
    g.add_argument("--release", help="the published table (any gpuanon output: range / minmax / set cells, "
                                     "hierarchy labels, '*'; or raw / perturbed values)")
    g.add_argument("--control", help="rows of the same population that were not used for the release")
    g.add_argument("--qi", help="comma-separated columns the attacker knows of a target (the inference's aux "
                                "columns; default every attacked column but the secrets)")
    g.add_argument("--columns", help="comma-separated columns singling out builds predicates on (default every "
                                     "column of the original that the release publishes)")
    g.add_argument("--secret", action="append", help="the inference's secret column (repeatable or comma-separated)")
    g.add_argument("--attacks", help="comma-separated: singling-out,linkability,inference (default all three)")
    g.add_argument("--n-attacks", dest="n_attacks", type=int, help="attacks of each kind (default 2000)")
    g.add_argument("--aux", help="the linkability's two disjoint column sets, e.g. age,sex|zip,job "
                                 "(default the --qi columns cut in two)")
    g.add_argument("--neighbours", type=int, help="the linkability's nearest neighbours (default 1)")
    g.add_argument("--n-cols", dest="n_cols", type=int, help="columns of a multivariate singling-out predicate "
                                                               "(default 3)")
    g.add_argument("--confidence", type=float, help="confidence level of the intervals (default 0.95)")
    g.add_argument("--html", help="HTML page of the risks")
    g.add_argument("--hierarchy", action="append", metavar="COLUMN=FILE.csv",
                   help="the hierarchy (ARX CSV) whose labels a categorical column publishes (repeatable)")


def _hierarchies(args) -> dict:
    from ..hierarchy import Hierarchy  # noqa: PLC0415

    out = {}
    for pair in args.hierarchy or []:
        if "=" not in pair:
            raise InputError(f"--hierarchy '{pair}' is not COLUMN=FILE.csv; write e.g. --hierarchy zip=zip.csv")
        col, path = (x.strip() for x in pair.split("=", 1))
        out[col] = Hierarchy.from_arx_csv(path, column=col)
    return out


def _aux(text):
    if not text:
        return None
    if text.count("|") != 1:
        raise InputError(f"--aux '{text}' needs two column sets split by one '|', e.g. --aux age,sex|zip,job")
    return tuple(split_list(part) for part in text.split("|"))


def summary_lines(doc: dict) -> list:
    lines = []
    for mode, r in (doc.get("singling_out") or {}).items():
        lines.append((f"singling out ({mode})", r))
    if doc.get("linkability"):
        lines.append(("linkability", doc["linkability"]))
        lines.append(("linkability (random ties)", doc["linkability"]["tie_aware"]))
        lines.append(("linkability (ties kept)", doc["linkability"]["ties_kept"]))
    for s, r in (doc.get("inference") or {}).items():
        lines.append((f"inference of {s}", r))
    out = []
    for name, r in lines:
        risk = r["risk"]
        v = "n/a" if risk["value"] is None else f"{risk['value']:.4f} [{risk['ci'][0]:.4f}, {risk['ci'][1]:.4f}]"
        out.append(f"{name:>28}: risk {v}" + ("  (" + "; ".join(r["warnings"]) + ")" if r.get("warnings") else ""))
    return out


def run(args) -> int:
    from ..attack import ATTACKS, evaluate  # noqa: PLC0415
    from ..datasets import load_table  # noqa: PLC0415
    from .common import command_outputs, reader_options  # noqa: PLC0415

    if not args.original:
        raise InputError("--release needs the rows it was made from: --original FILE")
    stray = [o for o, v in (("--perturbed", args.perturbed), ("--frontier", args.frontier), ("--dataset", args.dataset))
             if v]
    if stray:
        raise InputError(f"{', '.join(stray)} cannot be used with --release; the reconstruction attacks are the "
                         f"--perturbed mode")
    outputs = command_outputs(args, [("--report", args.report, False), ("--html", args.html, False)])
    attacks = split_list(args.attacks) if args.attacks else list(ATTACKS)
    secrets = [s for item in (args.secret or []) for s in split_list(item)]
    if "inference" in attacks and not secrets:
        if args.attacks:
            raise InputError("inference needs a secret column: --secret COLUMN")
        attacks = [a for a in attacks if a != "inference"]
        log.info("no --secret: inference left out")
    if args.confidence is not None and not 0 < args.confidence < 1:
        raise InputError(f"--confidence must be in (0, 1), got {args.confidence:g}; e.g. --confidence 0.95")
    read = reader_options(args, checked=False)
    release, original = load_table(args.release, **read), load_table(args.original, **read)
    control = load_table(args.control, **read) if args.control else None
    doc = evaluate(release, original, control, quasi_identifiers=split_list(args.qi) if args.qi else None,
                   secrets=secrets, columns=split_list(args.columns) if args.columns else None, attacks=attacks,
                   n_attacks=args.n_attacks or 2000, aux=_aux(args.aux), n_neighbours=args.neighbours or 1,
                   n_cols=args.n_cols or 3, confidence_level=args.confidence or 0.95,
                   seed=args.seed if args.seed is not None else 0, hierarchies=_hierarchies(args),
                   backend=getattr(args, "backend", None))
    doc["files"] = {"release": args.release, "original": args.original, "control": args.control}
    with outputs.writing() as w:
        if args.report:
            w.json("--report", doc)
        if args.html:
            from ..report.attack_page import render_attack_html  # noqa: PLC0415

            w.text("--html", render_attack_html(doc, header=f"release {args.release}; original {args.original}"
                                                + (f"; control {args.control}" if args.control else "")))
    for line in summary_lines(doc):
        print(line)
    return 0


def add_attack_options(g, default: int, what: str, where: str, held: str) -> None:
    """``--attacks [N] [--control-fraction F]`` in the group ``g``: N attacks of each kind on ``what``
    (``default`` when N is left out), the risks ``where``; F of the input rows held out of ``held``."""
    g.add_argument("--attacks", nargs="?", const=default, type=int, metavar="N",
                   help=f"attack {what} (N attacks of each kind, default {default}): {where}")
    g.add_argument("--control-fraction", dest="control_fraction", type=float, metavar="F",
                   help=f"with --attacks: hold a seeded random share F of the input rows out of {held} as the "
                        f"attacks' control (without it the risk is the attack rate)")


def add_anonymize_options(a) -> None:
    """``anonymize --attacks [N] [--control-fraction F]``."""
    g = a.add_argument_group("attacks on the output (singling out, linkability, inference; docs/attack.md)")
    add_attack_options(g, 2000, "the output", "its risks under 'attacks' in --report", "the release")


def split_for_attacks(args, df):
    """``--control-fraction F``: the rows anonymized; the held-out rest kept on ``args`` for the attacks."""
    args.attack_control = None
    f = getattr(args, "control_fraction", None)
    if f is None:
        return df
    if not getattr(args, "attacks", None):
        raise InputError("--control-fraction belongs to --attacks; add --attacks (or drop --control-fraction)")
    from ..attack.summary import split_control  # noqa: PLC0415

    df, args.attack_control = split_control(df, f, getattr(args, "seed", None) or 0)
    return df


def attacks_after_write(args, schema, df, out, report: dict) -> None:
    """``anonymize --attacks``: the attacks on the written output (``schema``: the fit's roles), as
    ``report['attacks']``."""
    if not getattr(args, "attacks", None):
        return
    from ..attack.summary import attack_release  # noqa: PLC0415

    host = lambda f: f.to_pandas() if f is not None and hasattr(f, "to_pandas") else f  # noqa: E731
    control = host(getattr(args, "attack_control", None))
    risks = attack_release(host(out), host(df), control, quasi_identifiers=list(schema.quasi_identifiers),
                           secret=schema.sensitive, n_attacks=args.attacks, seed=getattr(args, "seed", None) or 0)
    report["attacks"] = {"n_attacks": args.attacks, "control_rows": None if control is None else len(control),
                         "control_fraction": getattr(args, "control_fraction", None), "risks": risks}
    log.info("attacks: %s", ", ".join(f"{k} {v['risk']:.3f}" for k, v in risks.items() if v["risk"] is not None))
