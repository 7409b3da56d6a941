"""``gpuanon check``: recompute k / l / t of any table from the table alone (exit 1 when not met)."""

from __future__ import annotations

from ..errors import InputError
from .common import plural, read_input, reader_options, refuse_other_original
from .config import defaults
from .options import add_criteria, add_input, add_quiet


def add_parser(sub):
    c = sub.add_parser("check", help="verify k / l / t of any table (exit 1 when not met)",
                       description="Recompute the achieved k, l and t of a table from the table "
                                   "alone and compare them with the requested values.")
    add_quiet(c)
    add_input(c)
    c.add_argument("--qi", help="generalized QI columns (for minmax output the base names work)")
    c.add_argument("--sensitive", help="sensitive attribute")
    add_criteria(c, False)
    c.add_argument("--original", help="original table: its sensitive distribution is t-closeness's reference; "
                                      "with the same rows, every integer and date QI value is checked to lie "
                                      "inside its published cell (read exactly)")
    c.add_argument("--target", help="with --original: score the information loss against this target column "
                                    "(entropy-coefficient loss of SPEC section 7, NCP, Gionis-Tassa, DM, CM)")
    c.add_argument("--report", help="JSON report of the check")
    c.set_defaults(**defaults("check"))
    return c


def run(args) -> int:
    import pandas as pd  # noqa: PLC0415

    from ..anonymize.criteria import check_criteria_values, resolve_t_distance  # noqa: PLC0415
    from ..datasets import load_table  # noqa: PLC0415
    from ..table.cells import resolve_qi_columns  # noqa: PLC0415
    from ..table.schema import suggest  # noqa: PLC0415
    from ..release.verify import verify  # noqa: PLC0415

    from .common import command_outputs  # noqa: PLC0415

    outputs = command_outputs(args, [("--report", args.report, False)])
    check_criteria_values(args.l, args.l_kind, args.c, args.t, args.t_distance)  # as anonymize takes them
    if args.target and not args.original:
        raise InputError(f"--target {args.target} scores the information loss against --original; add --original "
                         f"ORIGINAL.csv, or leave --target out")
    df, roles, source = read_input(args, checked=False)  # a published table: generalized cells are text
    qi = args.qi or ",".join(roles.get("quasi_identifiers", []))
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    try:
        cols = resolve_qi_columns([x.strip() for x in qi.split(",") if x.strip()], df.columns)
    except KeyError as exc:
        c = exc.args[0]
        raise InputError(f"quasi-identifier '{c}' is not a column{suggest(c, list(df.columns))}") from None
    sens = args.sensitive or roles.get("sensitive")
    if sens is not None and sens not in df.columns:
        raise InputError(f"sensitive attribute '{sens}' is not a column{suggest(sens, list(df.columns))}")
    reference = None
    qi_names = [x.strip() for x in qi.split(",") if x.strip()]
    if args.original:
        orig = load_table(args.original, **reader_options(args, checked=False))
        if sens is not None and sens not in orig.columns:
            raise InputError(f"original table '{args.original}' has no column '{sens}'")
        refuse_other_original(df, orig, qi_names, args.original, source)
        reference = None if sens is None else orig[sens]
    if (args.l or args.t is not None) and sens is None:
        raise InputError("checking l or t needs --sensitive COL")
    t_distance = args.t_distance
    if t_distance == "auto":  # as the anonymizer resolves it: ordered for a numeric sensitive attribute
        ref = None if sens is None else (df[sens] if reference is None else reference)
        t_distance = resolve_t_distance("auto", ref is not None and pd.api.types.is_numeric_dtype(ref)
                                        and not pd.api.types.is_bool_dtype(ref))
    res = verify(df, cols, sens, k=args.k, l=args.l, l_kind=args.l_kind, c=args.c, t=args.t,
                 t_distance=t_distance, reference=reference)
    if args.original and len(orig) == len(df):  # the same rows: every integer / date QI read back exactly
        from ..release.verify import cells_inside  # noqa: PLC0415

        outside = cells_inside(df, orig, [c for c in qi_names if c in orig.columns])
        for c, m in outside.items():
            if m:
                res.failures.append(f"column '{c}': {plural(m, 'original value')} outside the published cell")
    rep = res.to_dict()
    if args.original and len(orig) == len(df):
        rep["cells_outside"] = outside
    rep["input"] = source
    rep["t_distance"] = t_distance
    target = args.target or roles.get("target")
    if args.original and target:  # the information loss of a user's table against its original
        from ..metrics import output_metrics  # noqa: PLC0415

        rep["metrics"] = output_metrics(df, orig, [x.strip() for x in qi.split(",") if x.strip()], target, k=args.k)
    if args.report:
        with outputs.writing() as w:
            w.json("--report", rep)
    ach = f"achieved k={res.k}" + ("" if res.l is None else f" l={res.l}") + (
        "" if res.t is None else f" t={res.t:.4f} ({t_distance} distance)")
    if res.sensitive_missing:
        ach += (f"; {plural(res.sensitive_missing, 'row')} with a missing sensitive value"
                f"{', counted toward no l' if args.l else ''}")
    print(f"{source}: {plural(res.n_rows, 'row')}, {plural(res.n_classes, 'class', 'classes')}; {ach}")
    if rep.get("metrics") and rep["metrics"].get("entropy_loss") is not None:
        mt = rep["metrics"]
        print(f"information loss against '{args.original}' (target {target}): entropy-coefficient loss "
              f"{100 * mt['entropy_loss']:.2f}%, NCP {mt['ncp']:.4f}, CM {mt['cm']:.4f}")
    for f in res.failures:
        print(f"FAIL {f}")
    print("OK" if res.ok else "NOT MET")
    return 0 if res.ok else 1
