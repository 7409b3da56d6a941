"""``gpuanon hierarchy build``: a generalization hierarchy in ARX's CSV layout, for people to read and edit."""

from __future__ import annotations

import logging

from ..errors import InputError
from .common import read_input, rho_value
from .config import defaults
from .options import Parser, add_input, add_quiet

log = logging.getLogger("gpuanon")

#: the most distinct values ``hierarchy build`` writes a frequency hierarchy of
MAX_LEAVES = 200


def add_parser(sub):
    h = sub.add_parser("hierarchy", help="build generalization hierarchies for people to read and edit")
    hsub = h.add_subparsers(dest="hierarchy_command", metavar="ACTION", parser_class=Parser)
    hb = hsub.add_parser("build", help="write a hierarchy in ARX's CSV layout",
                         description="Build the frequency-based hierarchy of a categorical column "
                                     "(thesis algorithms 1 and 2) or a masking hierarchy for code-like "
                                     "strings, and write it as ARX CSV: leaf;level 1;...;*")
    add_quiet(hb)
    add_input(hb)
    hb.add_argument("--column", required=True, help="the categorical column")
    hb.add_argument("--target", help="target column (default: the dataset's target)")
    hb.add_argument("--rho", type=float, help="percentile range; 100/rho an integer (default 10)")
    hb.add_argument("--kind", choices=["frequency", "masking"])
    hb.add_argument("--out", required=True, help="CSV file (ARX layout, ';'-separated)")
    hb.set_defaults(**defaults("hierarchy", "build"))
    return h


def run(args) -> int:
    from ..hierarchy import frequency_hierarchy, masking_hierarchy  # noqa: PLC0415
    from ..table.schema import suggest  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    if args.hierarchy_command != "build":
        raise InputError("say what to do: gpuanon hierarchy build --column COL --out FILE.csv")
    outputs = command_outputs(args, [("--out", args.out, False)])
    df, roles, source = read_input(args)
    if args.column not in df.columns:
        raise InputError(f"column '{args.column}' is not in {source}{suggest(args.column, list(df.columns))}")
    if args.kind == "masking":
        h = masking_hierarchy(df[args.column], name=args.column)
    else:
        target = args.target or roles.get("target")
        if target is None:
            raise InputError("a frequency hierarchy needs a target column; pass --target COL")
        if target not in df.columns:
            raise InputError(f"target '{target}' is not in {source}{suggest(target, list(df.columns))}")
        if target == args.column:
            raise InputError(f"--target {target} is the --column itself; a frequency hierarchy groups a column's "
                             f"values by how another column (the target) is distributed: name another --target")
        n_values = int(df[args.column].nunique())
        if n_values > MAX_LEAVES:  # a file for people to read: one line per value, the groups' labels list them
            raise InputError(f"--column {args.column} has {n_values:,} distinct values, more than the {MAX_LEAVES} a "
                             f"frequency hierarchy lists readably; a numeric column needs none (Mondrian cuts it into "
                             f"intervals), code-like text takes --kind masking, or group the values first")
        try:
            h = frequency_hierarchy(df[args.column], df[target], rho_value(args.rho), name=args.column)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    with outputs.writing() as w:
        w.file("--out", h.to_arx_csv)
    frame = h.to_frame()
    if not args.quiet:
        print(frame.to_string(index=False))
    log.info("wrote %s: %d leaves, %d levels above them", args.out, h.n_leaves, h.height)
    return 0
