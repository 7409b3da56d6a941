"""``gpuanon attack``: attacks on a perturbed table, or the privacy-utility frontier (``--frontier``)."""

from __future__ import annotations

import logging

from ..errors import InputError
from .config import defaults
from .options import BACKENDS, DATASETS, add_quiet, add_text_options

log = logging.getLogger("gpuanon")


def add_parser(sub):
    at = sub.add_parser("attack", help="attack a release (singling out, linkability, inference: --release) or a "
                                       "perturbed table (naive, ICA, known input-output: --perturbed)",
                        description="Score how well the perturbation resists reconstruction: min over "
                                    "attributes of std(z - zhat) on z-scored columns (higher resists better). "
                                    "Needs the original table and a perturbed table written with --write-row-id. "
                                    "With --frontier: DISTPAB, geometric perturbation (GP) and random rotation (RP) "
                                    "along a noise sweep on a named data set, accuracy (k-NN, SVM, LR; CV on the "
                                    "perturbed data) and the three attacks, one CSV row per (method, noise).")
    add_quiet(at)
    at.add_argument("--original", help="original table (or --dataset)")
    at.add_argument("--dataset", choices=DATASETS)
    at.add_argument("--rows", type=int)
    at.add_argument("--seed", type=int)
    at.add_argument("--perturbed", help="perturbed table with a row_id column (not with --frontier)")
    at.add_argument("--sep", help="column separator of CSV / TSV tables (default ',' for .csv, tab for .tsv), e.g. ';'")
    at.add_argument("--encoding", help="text encoding of CSV / TSV tables (default utf-8), e.g. latin-1")
    add_text_options(at)
    fr = at.add_argument_group("privacy-utility frontier (--frontier)")
    fr.add_argument("--frontier", action="store_true",
                    help="sweep the noise for DISTPAB, GP and RP on --dataset (adult: its 6 numeric columns; "
                         "hepmass: 100,000 rows unless --rows)")
    fr.add_argument("--noise",
                    help="comma-separated noise values, DISTPAB's expansion and GP's Gaussian noise "
                         "(default 0.05,0.1,0.2,0.3,0.5,0.8)")
    fr.add_argument("--out", help="frontier CSV: one row per (method, noise)")
    fr.add_argument("--png", help="frontier plot: attack minimum against mean accuracy")
    fr.add_argument("--folds", type=int, help="cross-validation folds (default 10)")
    fr.add_argument("--draws", type=int, help="RP / GP draws, the best kept (default 10)")
    fr.add_argument("--svm-rows", dest="svm_rows", type=int,
                    help="the SVM's stratified sample of rows (default 10000; 0: every row)")
    fr.add_argument("--backend", choices=BACKENDS,
                    help="DISTPAB's backend; with --release, where linkability and inference search (default cpu)")
    at.add_argument("--features", help="feature columns (default: those of the perturbed table but row_id "
                                       "and non-numeric ones)")
    at.add_argument("--label", help="label column to leave out (default: the dataset's target)")
    at.add_argument("--known-fraction", type=float, help="rows the known input-output attacker has")
    at.add_argument("--report", help="JSON report")
    from .attack_release import add_options  # noqa: PLC0415

    add_options(at)
    at.set_defaults(**defaults("attack"))
    return at


def _frontier(args) -> int:
    from ..perturb.frontier import compare, parse_noise, plot_frontier, run_frontier  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    if not args.dataset:
        raise InputError("--frontier needs a named data set: --dataset breast_cancer|wine|adult|hepmass|digits")
    extra = [o for o, v in (("--original", args.original), ("--perturbed", args.perturbed),
                            ("--features", args.features), ("--label", args.label)) if v]
    if extra:
        raise InputError(f"{', '.join(extra)} cannot be used with --frontier; it perturbs --dataset itself")
    if not args.out:
        raise InputError("--frontier needs --out FILE.csv for the table")
    if args.png and not str(args.png).lower().endswith(".png"):
        raise InputError(f"--png '{args.png}' must end with .png")
    outputs = command_outputs(args, [("--out", args.out, True), ("--png", args.png, False),
                                     ("--report", args.report, False)])
    noise = parse_noise(args.noise)
    if args.folds < 2:
        raise InputError(f"--folds must be at least 2, got {args.folds}")
    if args.draws < 1:
        raise InputError(f"--draws must be at least 1, got {args.draws}")
    if args.svm_rows < 0:
        raise InputError(f"--svm-rows must be >= 0 (0: every row), got {args.svm_rows}")
    res = run_frontier(args.dataset, noise=noise, rows=args.rows, random_state=args.seed, folds=args.folds,
                       draws=args.draws, svm_max_rows=args.svm_rows or None, known_fraction=args.known_fraction,
                       backend=args.backend, progress=log.info)
    table = res.table
    with outputs.writing() as w:  # the table, plot and report, or none of them
        w.table("--out", table)
        if args.png:
            cfg = res.config
            title = (f"{cfg['description']}; {cfg['folds']}-fold CV"
                     + (f", SVM on {cfg['svm_rows']} rows" if cfg["svm_rows"] < cfg["rows"] else "")
                     + f"; seed {cfg['random_state']}")
            w.file("--png", lambda tmp: plot_frontier(table, tmp, title=title, raw_accuracy=res.raw.get("mean")))
        if args.report:
            w.json("--report", res.to_dict())
    cols = ["method", "noise", "accuracy_knn", "accuracy_svm", "accuracy_lr", "naive", "ica", "io", "attack_min"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for other, c in compare(table).items():
        print(f"distpab vs {other}: " + ", ".join(f"{nz:g} {v}" for nz, v in c["per_noise"].items()))
    log.info("frontier of %s in %.1f s; wrote %s", args.dataset, res.seconds,
             ", ".join(str(p) for p in (args.out, args.png, args.report) if p))
    return 0


def run(args) -> int:
    import numpy as np  # noqa: PLC0415

    from ..datasets import get_dataset, load_table  # noqa: PLC0415
    from ..perturb.attacks import evaluate_attacks  # noqa: PLC0415
    from .common import command_outputs, reader_options  # noqa: PLC0415
    from ..table.schema import suggest  # noqa: PLC0415

    if not 0 < args.known_fraction <= 1:  # both modes: the known input-output attack's share of the rows
        raise InputError(f"--known-fraction must be in (0, 1], got {args.known_fraction:g}; e.g. --known-fraction 0.1")
    if getattr(args, "release", None):
        from .attack_release import run as run_release  # noqa: PLC0415

        return run_release(args)
    if args.frontier:
        return _frontier(args)
    stray = [o for o, v in (("--out", args.out), ("--png", args.png)) if v]
    if stray:
        raise InputError(f"{', '.join(stray)} belong to --frontier; add --frontier, or use --report for an attack")
    if not args.perturbed:
        raise InputError("give the table to attack: --release FILE (singling out, linkability, inference), "
                         "--perturbed FILE (written by gpuanon perturb --write-row-id), or --frontier --dataset NAME")
    if bool(args.original) == bool(args.dataset):
        raise InputError("give the original table: --original FILE or --dataset NAME (one of them)")
    outputs = command_outputs(args, [("--report", args.report, False)])
    read = reader_options(args, checked=False)
    roles = {}
    if args.original:
        orig = load_table(args.original, **read)
    else:
        orig, roles = get_dataset(args.dataset, rows=args.rows, seed=args.seed)
    label = args.label or roles.get("target")
    pert = load_table(args.perturbed, **read)
    if "row_id" not in pert.columns:
        raise InputError(f"'{args.perturbed}' has no row_id column; perturb with --write-row-id "
                         f"(evaluation only) to pair its rows with the original")
    rid = pert["row_id"].to_numpy()
    if len(rid) and (rid.min() < 0 or rid.max() >= len(orig)):
        raise InputError(f"row_id values of '{args.perturbed}' do not fit the original table ({len(orig)} rows); "
                         f"is it the same input?")
    if args.features:
        feats = [c.strip() for c in args.features.split(",") if c.strip()]
    else:  # numeric columns of both tables, but the label and the unperturbed passengers
        feats = [c for c in pert.columns if c not in ("row_id", label) and c in orig.columns
                 and np.issubdtype(pert[c].dtype, np.number) and not np.issubdtype(pert[c].dtype, np.bool_)]
        same = [c for c in feats if np.array_equal(pert[c].to_numpy(), orig[c].to_numpy()[rid])]
        if same:
            log.info("left out unperturbed columns: %s", ", ".join(map(str, same)))
        feats = [c for c in feats if c not in same]
    if not feats:
        raise InputError("no perturbed numeric feature in common; pass --features COL1,COL2,...")
    for c in feats:
        for name, frame in (("original", orig), ("perturbed", pert)):
            if c not in frame.columns:
                raise InputError(f"feature '{c}' is not in the {name} table{suggest(c, list(frame.columns))}")
    X = orig[feats].to_numpy(dtype=np.float64)[rid]
    Xp = pert[feats].to_numpy(dtype=np.float64)
    res = evaluate_attacks(X, Xp, random_state=args.seed, known_fraction=args.known_fraction)
    res["features"] = feats
    if args.report:
        with outputs.writing() as w:
            w.json("--report", res)
    for key, val in res.items():
        if isinstance(val, dict) and "min" in val:
            print(f"{key:>24}: min {val['min']:.4f}  mean {val.get('mean', float('nan')):.4f}")
    if "min" in res:
        print(f"{'overall minimum':>24}: {res['min']:.4f}")
    return 0
