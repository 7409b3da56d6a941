"""``gpuanon sweep``: Mondrian over a grid of k, l, t on one encoded table."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import InputError
from .attack_release import add_attack_options, split_for_attacks
from .common import hierarchy_spec, read_input, rho_value
from .config import defaults
from .options import BACKENDS, L_KINDS, MODES, T_DISTANCES, add_hierarchy_options, table_command

log = logging.getLogger("gpuanon")


def add_parser(sub):
    w = table_command(sub, "sweep", "Mondrian over a grid of k, l, t on one encoded table",
                      "Run Mondrian over k (default 3..15), l-diversity (default l = 2, 3) "
                      "and t-closeness (default t = 0.2, 0.3, 0.4) at --base-k, and write one "
                      "row of metrics per run, a plot against k, and a table like the thesis's 5.4.", kinds=False)
    g = w.add_argument_group("grid")
    g.add_argument("--k-values", help="k values: '3-15' or '3,5,10' (default 3-15)")
    g.add_argument("--l-values", help="l values at --base-k ('' for none; default 2,3)")
    g.add_argument("--t-values", help="t values at --base-k ('' for none)")
    g.add_argument("--base-k", type=int, help="k of the l and t runs (default 3)")
    g.add_argument("--l-kind", dest="l_kind", choices=L_KINDS)
    g.add_argument("--t-distance", dest="t_distance", choices=T_DISTANCES,
                   help="default auto: ordered EMD for a numeric sensitive attribute, equal otherwise")
    g.add_argument("--mode", choices=MODES)
    g.add_argument("--max-suppression", dest="max_suppression", type=float)
    g.add_argument("--backend", choices=BACKENDS)
    add_hierarchy_options(g)
    g.add_argument("--out", required=True, help="CSV with one row per run")
    g.add_argument("--plot", help="PNG of loss and classes against k (default: next to --out)")
    g.add_argument("--table", help="markdown table shaped like the thesis's table 5.4 (default: next to --out)")
    a = w.add_argument_group("attacks on each grid point's output (singling out, linkability, inference; "
                             "docs/attack.md)")
    add_attack_options(a, 500, "every grid point's output", "the risk columns in --out and --table, and the "
                       "frontier of loss against risk in --attack-plot", "the sweep")
    a.add_argument("--attack-plot", dest="attack_plot", help="with --attacks: PNG of information loss against each "
                                                             "attack's risk, one point per grid value (default: next "
                                                             "to --out)")
    w.set_defaults(**defaults("sweep"))
    return w


def _int_list(text: str, name: str) -> list[int]:
    text = (text or "").strip()
    if not text:
        return []
    rng = "-" in text and "," not in text
    try:
        vals = [int(v) for v in (text.split("-", 1) if rng else text.split(",")) if v.strip()]
    except ValueError:
        raise InputError(f"--{name} '{text}' is not a list of integers; write e.g. 3-15 or 3,5,10") from None
    if not rng:
        return vals
    if len(vals) != 2:
        raise InputError(f"--{name} '{text}' is not a list of integers; write e.g. 3-15 or 3,5,10")
    if vals[0] > vals[1]:  # an empty range would run no grid point of it
        raise InputError(f"--{name} '{text}' is an empty range (from {vals[0]} down to {vals[1]}); write the smaller "
                         f"first, e.g. {vals[1]}-{vals[0]}")
    return list(range(vals[0], vals[1] + 1))


def _float_list(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in (text or "").split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--{name} '{text}' is not a list of numbers; write e.g. 0.2,0.3") from None


def progress_line(i: int, n: int, row: dict) -> str:
    """One log line per grid point: only the criteria it asked for, and why it failed when it did.

    >>> progress_line(1, 2, {"criterion": "l-diversity", "k": 3, "l": 3, "t": None, "seconds": 0.1,
    ...                      "error": "l = 3 asks for 3 distinct values; 'sick' has 2"})
    "sweep 1/2: l-diversity k=3 l=3 -> failed: l = 3 asks for 3 distinct values; 'sick' has 2 (0.10 s)"
    """
    asked = f"k={row['k']}"
    if row.get("l"):
        asked += f" l={row['l']}"
    if row.get("t") is not None:
        asked += f" t={row['t']:g}"
    if row.get("error"):
        result = "failed: " + " ".join(str(row["error"]).split())
    else:
        loss = row.get("entropy_loss")
        result = f"{row.get('n_classes')} classes, loss {'-' if loss is None else f'{100 * loss:.2f}%'}"
    line = f"sweep {i}/{n}: {row['criterion']} {asked} -> {result} ({row['seconds']:.2f} s)"
    risks = [(name, row.get(f"risk_{kind}")) for kind, name in (("singling_out_multivariate", "singling out"),
                                                                 ("linkability", "linkability"),
                                                                 ("inference", "inference"))]
    risks = [f"{name} {v:.3f}" for name, v in risks if v is not None and v == v]
    if risks:  # --attacks
        line += f"; risks: {', '.join(risks)} ({row.get('attack_seconds', 0):.2f} s)"
    return line


def run(args) -> int:
    from ..anonymize.sweep import plot_sweep, plot_sweep_attacks, run_sweep, thesis_table, to_markdown  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    out = Path(args.out)
    plot = args.plot or str(out.with_suffix(".png"))
    table_path = args.table or str(out.with_name(out.stem + "_table.md"))
    attack_plot = args.attack_plot or str(out.with_name(out.stem + "_frontier.png"))
    if args.attack_plot and not args.attacks:
        raise InputError("--attack-plot belongs to --attacks; add --attacks (or drop --attack-plot)")
    if args.attacks is not None and args.attacks < 1:
        raise InputError(f"--attacks {args.attacks}: give a positive number of attacks of each kind, e.g. --attacks 500")
    outputs = command_outputs(args, [("--out", out, False),
                                     ("--plot" if args.plot else "--plot (default: next to --out)", plot, False),
                                     ("--table" if args.table else "--table (default: next to --out)", table_path,
                                      False)]
                              + ([("--attack-plot" if args.attack_plot else "--attack-plot (default: next to --out)",
                                   attack_plot, False)] if args.attacks else []))
    ks, ls = _int_list(args.k_values, "k-values"), _int_list(args.l_values, "l-values")
    ts = _float_list(args.t_values, "t-values")
    df, roles, source = read_input(args)
    df = split_for_attacks(args, df)  # --control-fraction: rows held out of every grid point's release
    qi = args.qi or roles.get("quasi_identifiers")
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    sens = args.sensitive or roles.get("sensitive") or args.target or roles.get("target")

    def progress(i, n, row):
        log.info("%s", progress_line(i, n, row))

    res = run_sweep(df, qi, sensitive=sens, target=args.target or roles.get("target"),
                    identifiers=args.identifiers, ks=ks, ls=ls, ts=ts, base_k=args.base_k, mode=args.mode,
                    l_kind=args.l_kind, t_distance=args.t_distance, max_suppression=args.max_suppression,
                    backend=args.backend, progress=None if args.quiet else progress,
                    hierarchies=hierarchy_spec(args), rho=rho_value(args.rho), optimize=bool(args.optimize),
                    attacks=_attacks(args))
    md = to_markdown(thesis_table(res, args.base_k))
    plotted = bool((res["criterion"] == "k-anonymity").any())
    attacked = bool(args.attacks) and bool(res["risk_singling_out_univariate"].notna().any())
    labels = list(outputs.items)
    with outputs.writing() as w:  # all of them, or none
        w.file(labels[0], lambda tmp: res.to_csv(tmp, index=False))
        if plotted:
            w.file(labels[1], lambda tmp: plot_sweep(res, tmp))
        w.text(labels[2], md)
        if attacked:
            w.file(labels[3], lambda tmp: plot_sweep_attacks(res, tmp))
    print(md, end="")
    wrote = [out] + ([plot] if plotted else []) + [table_path] + ([attack_plot] if attacked else [])
    log.info("wrote %s", ", ".join(map(str, wrote)))
    return 0


def _attacks(args) -> dict | None:
    """``--attacks N``: what :func:`gpuanon.anonymize.sweep.run_sweep` attacks each grid point with."""
    if not args.attacks:
        return None
    return {"n_attacks": int(args.attacks), "control": args.attack_control,
            "seed": args.seed if args.seed is not None else 0}
