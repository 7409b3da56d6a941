"""``gpuanon perturb``: DISTPAB geometric perturbation of numeric features."""

from __future__ import annotations

import logging
import time

from ..errors import InputError
from .common import plural, read_input
from .config import defaults
from .options import BACKENDS, add_cluster_timeout, add_input, add_quiet

log = logging.getLogger("gpuanon")


def add_parser(sub):
    pz = sub.add_parser("perturb", help="DISTPAB geometric perturbation of numeric features",
                        description="Perturb numeric features with DISTPAB: each entity computes local "
                                    "statistics, a central step searches the rotation angle and reflection "
                                    "axis, each entity perturbs its own rows (on Dask workers unless "
                                    "--centralized). The label and passenger columns stay with their rows.")
    add_quiet(pz)
    add_input(pz)
    g = pz.add_argument_group("perturbation")
    g.add_argument("--features", help="numeric feature columns (default: every numeric column but the "
                                      "label and passengers)")
    g.add_argument("--exclude", help="columns to leave out of the default features")
    g.add_argument("--label", help="label column, kept with its rows")
    g.add_argument("--passengers", help="other columns kept with their rows")
    g.add_argument("--entities", type=int, help="number of entities the rows are split into (default 4)")
    g.add_argument("--centralized", action="store_true", help="one entity, in this process (PABIDOT)")
    g.add_argument("--noise", type=float, help="randomized-expansion noise std (default 0.3)")
    g.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="keep each entity's row order")
    g.add_argument("--write-row-id", action="store_true",
                   help="EVALUATION ONLY: add a row_id column (original row number) so `gpuanon attack` can "
                        "pair rows; it undoes the shuffle and must never be published")
    g.add_argument("--backend", choices=BACKENDS)
    g.add_argument("--cluster", metavar="SPEC",
                   help="run the entities on this Dask cluster: local:N (N worker processes here), cuda:N or a "
                        "scheduler address tcp://host:8786 (default: a local cluster of worker threads). A worker "
                        "lost mid-run is recovered from (its entities placed again, the phase redone: the same "
                        "output); a lost scheduler, every worker lost or one entity lost with two workers stops "
                        "the run with exit status 4, nothing written")
    add_cluster_timeout(g)
    g.add_argument("--out", required=True, help="perturbed table (.csv, .csv.gz, .parquet)")
    g.add_argument("--report", help="JSON report")
    pz.set_defaults(**defaults("perturb"))
    return pz


def _default_features(df, label, passengers, exclude):
    import pandas as pd  # noqa: PLC0415

    skip = set([label] if label else []) | set(passengers) | set(exclude)
    return [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])
            and not pd.api.types.is_bool_dtype(df[c])]


def _on_cluster(args, frames, features, **kw):
    """DISTPAB's entities on Dask workers: the cluster ``--cluster`` names (opened here, closed after), or a
    local cluster of worker threads started by :func:`~gpuanon.perturb.perturb_distributed`."""
    from ..perturb import perturb_distributed  # noqa: PLC0415

    if not args.cluster:
        return perturb_distributed(frames, features, **kw)
    from ..cluster.connect import open_cluster  # noqa: PLC0415

    with open_cluster(args.cluster, backend=args.backend, connect_timeout=args.cluster_timeout) as handle:
        outs, report = perturb_distributed(frames, features, client=handle.client, timeout=args.cluster_timeout, **kw)
        report["cluster"] = {"cluster": handle.description, "n_workers": report["n_workers"],
                             "recovered": report["recovered"]}
    return outs, report


def run(args) -> int:
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415

    from ..perturb import perturb_frame  # noqa: PLC0415
    from .common import command_outputs  # noqa: PLC0415

    outputs = command_outputs(args, [("--out", args.out, True), ("--report", args.report, False)])
    if args.entities < 1:
        raise InputError(f"--entities must be >= 1, got {args.entities}")
    if args.noise < 0:
        raise InputError(f"--noise must be >= 0, got {args.noise}")
    if args.cluster and (args.centralized or args.entities == 1):
        raise InputError("--cluster runs the entities on Dask workers: give --entities 2 or more (not --centralized), "
                         "or drop --cluster")
    if not args.cluster_timeout > 0:
        raise InputError(f"--cluster-timeout must be a number of seconds > 0, got {args.cluster_timeout:g}; e.g. "
                         f"--cluster-timeout 60")
    t0 = time.perf_counter()
    df, roles, source = read_input(args)
    label = args.label or (roles.get("target") if roles else None)
    passengers = [c.strip() for c in (args.passengers or "").split(",") if c.strip()]
    exclude = [c.strip() for c in (args.exclude or "").split(",") if c.strip()]
    features = ([c.strip() for c in args.features.split(",") if c.strip()] if args.features
                else _default_features(df, label, passengers, exclude))
    if not features:
        raise InputError("no numeric feature columns to perturb; pass --features COL1,COL2,...")
    entities = 1 if args.centralized else args.entities
    if entities > len(df) // 2:  # every entity holds rows of its own, two at least
        raise InputError(f"--entities {entities} is more than the {plural(len(df), 'row')} can fill with at least 2 rows "
                         f"each; give --entities {max(len(df) // 2, 1)} or fewer")
    if args.write_row_id:
        if "row_id" in df.columns:
            raise InputError("the input already has a column 'row_id'; rename it to use --write-row-id")
        log.warning("writing row_id: evaluation only, it pairs perturbed rows with their originals; never publish it")
        df = df.assign(row_id=np.arange(len(df), dtype=np.int64))
        passengers = passengers + ["row_id"]
    kept = set(features) | set(passengers) | ({label} if label else set())
    dropped = [str(c) for c in df.columns if c not in kept]
    if dropped:
        log.warning("left out of the output: %s (neither a feature, the label nor a passenger); keep a column "
                    "with --passengers COL (unchanged, travels with its row) or perturb it with --features",
                    ", ".join(dropped))
    seed = args.seed
    if args.centralized or args.entities == 1:
        from ..perturb.distpab import DISTPAB, frame_matrix, local_stats, validate_frame  # noqa: PLC0415

        tc = time.perf_counter()
        feats, _carried = validate_frame(df, features, label, passengers)
        model = DISTPAB(noise=args.noise, shuffle=args.shuffle, random_state=seed, backend=args.backend)
        stats = local_stats(frame_matrix(df, feats), model.array_module())
        ts = time.perf_counter()
        model.fit_stats([stats], feature_names=feats)
        model.n_entities_ = 1
        tsearch = time.perf_counter()
        out, model = perturb_frame(df, feats, label=label, passengers=passengers, model=model)
        tp = time.perf_counter()
        report = model.report()
        report.update(n_entities=1, mode="centralized",
                      seconds={"stats": round(ts - tc, 6), "search": round(tsearch - ts, 6),
                               "perturb": round(tp - tsearch, 6), "total": round(tp - tc, 6)})
    else:
        frames = [df.iloc[idx] for idx in np.array_split(np.arange(len(df)), args.entities)]
        outs, report = _on_cluster(args, frames, features, label=label, passengers=passengers, noise=args.noise,
                                   random_state=seed, shuffle=args.shuffle, backend=args.backend)
        out = pd.concat(outs, ignore_index=True)
        report["mode"] = "distributed"
    with outputs.writing() as w:  # the table and its report, or neither
        t1 = time.perf_counter()
        w.table("--out", out)
        report.update(input=source, output=args.out, n_rows=int(len(out)), label=label, passengers=passengers,
                      noise=args.noise, shuffle=args.shuffle, seed=seed, row_id_written=bool(args.write_row_id),
                      dropped_columns=dropped)
        secs = dict(report.get("seconds", {}))
        secs["write"] = round(time.perf_counter() - t1, 6)
        secs["wall"] = round(time.perf_counter() - t0, 6)
        report["seconds"] = secs
        if args.report:
            w.json("--report", report)
    log.info("perturbed %d rows x %d features (%s, %s): Phi %.4f at %g degrees, axis %s; wrote %s",
             len(out), len(features), report["mode"], plural(report.get("n_entities", 1), "entity", "entities"),
             report["phi"],
             report["angle_degrees"], features[int(report["axis"])], args.out)
    return 0
