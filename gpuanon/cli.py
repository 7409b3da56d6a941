"""The ``gpuanon`` command.

    gpuanon anonymize --dataset adult --k 10 --out adult_k10.csv --report adult_k10.json
    gpuanon anonymize data.parquet --qi age,zip --sensitive disease --k 5 --l 2 --out anon.parquet
    gpuanon check anon.csv --qi age,zip --sensitive disease --k 5 --l 2

Errors in the input print one line naming the problem and the fix and exit with status 2;
``check`` exits with status 1 when the table does not meet the requested k / l / t.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import tomllib
from pathlib import Path

from . import __version__
from .errors import GpuanonError, InputError

log = logging.getLogger("gpuanon")

# Keys a --config TOML file may set (the long option names, '-' or '_').
CONFIG_KEYS = {
    "input", "dataset", "rows", "seed", "qi", "sensitive", "target", "identifiers", "numeric",
    "categorical", "k", "l", "l_kind", "c", "t", "t_distance", "mode", "format", "max_suppression",
    "backend", "out", "report", "html", "hierarchies", "hierarchy", "rho", "optimize", "encoding",
    "target_expr",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like every other input error
        self.exit(2, f"gpuanon: error: {message}; see '{self.prog} --help'\n")


def _add_hierarchy_options(g) -> None:
    g.add_argument("--hierarchies", choices=["auto"],
                   help="automatic frequency-based hierarchies for every categorical QI (needs a target)")
    g.add_argument("--hierarchy", action="append", metavar="COLUMN=FILE.csv",
                   help="a hierarchy in ARX's CSV layout for one column (repeatable)")
    g.add_argument("--rho", type=float, help="percentile range of the automatic hierarchies "
                                             "(default: chosen per column by information loss)")
    g.add_argument("--optimize", action="store_true", default=None,
                   help="the optimization step: QI tuples occurring >= k times keep their values")


def _hierarchy_spec(args, cfg) -> object:
    spec = {}
    auto = _merged(args, cfg, "hierarchies")
    pairs = list(getattr(args, "hierarchy", None) or []) + list(cfg.get("hierarchy") or [])
    for pair in pairs:
        if "=" not in str(pair):
            raise InputError(f"--hierarchy '{pair}' is not COLUMN=FILE.csv; write e.g. --hierarchy zip=zip.csv")
        col, path = str(pair).split("=", 1)
        spec[col.strip()] = path.strip()
    if auto:
        if auto != "auto":
            raise InputError(f"hierarchies '{auto}' is not understood; use --hierarchies auto")
        return ("auto", spec)
    return spec or None


def _rho_value(v):
    if v is None:
        return None
    return int(v) if float(v).is_integer() else float(v)


def _add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no log lines or progress")


def _add_input(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input (a file, or a bundled / generated dataset)")
    g.add_argument("input", nargs="?", help="CSV, TSV or Parquet file")
    g.add_argument("--dataset", choices=["adult", "hepmass", "breast_cancer", "wine", "digits"],
                   help="bundled Adult data, the HEPMASS-shaped generator, or a scikit-learn set")
    g.add_argument("--rows", type=int, help="rows to generate (hepmass) or sample (others)")
    g.add_argument("--seed", type=int, help="seed for --dataset hepmass / sampling (default 0)")
    g.add_argument("--encoding", help="text encoding of a CSV / TSV input (default utf-8), e.g. latin-1")


def _add_roles(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("column roles (comma-separated lists)")
    g.add_argument("--qi", help="quasi-identifier columns (default for --dataset: its standard QIs)")
    g.add_argument("--sensitive", help="sensitive attribute (used by l and t)")
    g.add_argument("--target", help="target column (orders categories; used by later metrics)")
    g.add_argument("--target-expr", dest="target_expr", metavar="EXPR",
                   help="derive the target from other columns, e.g. \"delay > 15\" (pandas DataFrame.eval); "
                        "the new column is named by --target (default 'target')")
    g.add_argument("--identifiers", help="identifier columns, dropped from the output")
    g.add_argument("--numeric", help="QIs to treat as numeric (overrides dtype inference)")
    g.add_argument("--categorical", help="QIs to treat as categorical")


def _table_command(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand that reads one table: quiet flag, input and column roles."""
    p = sub.add_parser(name, help=help, description=description)
    _add_quiet(p)
    _add_input(p)
    _add_roles(p)
    return p


def _add_criteria(p: argparse.ArgumentParser, required_k: bool) -> None:
    g = p.add_argument_group("privacy criteria")
    g.add_argument("--k", type=int, help="k-anonymity: minimum class size (>= 2)" + ("" if required_k else "; checked when given"))
    g.add_argument("--l", type=int, help="l-diversity: distinct sensitive values per class (0: off)")
    g.add_argument("--l-kind", dest="l_kind", choices=["distinct", "entropy", "recursive"], help="default distinct")
    g.add_argument("--c", type=float, help="c of recursive (c, l)-diversity (default 1)")
    g.add_argument("--t", type=float, help="t-closeness threshold (off by default)")
    g.add_argument("--t-distance", dest="t_distance", choices=["auto", "equal", "ordered", "kl"],
                   help="EMD with equal or ordered ground distance, or KL (default auto: ordered for a "
                        "numeric sensitive attribute, equal otherwise)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpuanon", description="GPU-accelerated anonymization of tabular data.")
    p.add_argument("--version", action="version", version=f"gpuanon {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="no log lines or progress")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    a = _table_command(sub, "anonymize", "Mondrian k-anonymity (+ l-diversity, t-closeness)",
                       "Anonymize a table with Mondrian partitioning; the output is "
                       "verified independently before it is written.")
    _add_criteria(a, True)
    g = a.add_argument_group("algorithm and output")
    g.add_argument("--mode", choices=["strict", "relaxed"], help="Mondrian cut rule (default strict)")
    g.add_argument("--format", choices=["range", "minmax", "mean"],
                   help="numeric QIs as 'lo-hi' text, <col>_min/<col>_max columns, or the class mean (default range)")
    g.add_argument("--max-suppression", dest="max_suppression", type=float,
                   help="fraction of rows that may be suppressed (default 0.01)")
    g.add_argument("--backend", choices=["auto", "cpu", "gpu"], help="default: $GPUANON_BACKEND or auto")
    _add_hierarchy_options(g)
    g.add_argument("--out", help="output table (.csv, .csv.gz, .parquet), written atomically")
    g.add_argument("--report", help="JSON report (every metric under 'metrics')")
    g.add_argument("--html", help="self-contained HTML report with plots")
    g.add_argument("--config", help="TOML file with the same keys as these options (options win)")

    w = _table_command(sub, "sweep", "Mondrian over a grid of k, l, t on one encoded table",
                       "Run Mondrian over k (default 3..15), l-diversity (default l = 2, 3) "
                       "and t-closeness (default t = 0.2, 0.3, 0.4) at --base-k, and write one "
                       "row of metrics per run, a plot against k, and a table like the thesis's 5.4.")
    g = w.add_argument_group("grid")
    g.add_argument("--k-values", default="3-15", help="k values: '3-15' or '3,5,10' (default 3-15)")
    g.add_argument("--l-values", default="2,3", help="l values at --base-k ('' for none; default 2,3)")
    g.add_argument("--t-values", default="0.2,0.3,0.4", help="t values at --base-k ('' for none)")
    g.add_argument("--base-k", type=int, default=3, help="k of the l and t runs (default 3)")
    g.add_argument("--l-kind", dest="l_kind", choices=["distinct", "entropy", "recursive"], default="distinct")
    g.add_argument("--t-distance", dest="t_distance", choices=["auto", "equal", "ordered", "kl"], default="auto",
                   help="default auto: ordered EMD for a numeric sensitive attribute, equal otherwise")
    g.add_argument("--mode", choices=["strict", "relaxed"], default="strict")
    g.add_argument("--max-suppression", dest="max_suppression", type=float, default=0.01)
    g.add_argument("--backend", choices=["auto", "cpu", "gpu"])
    _add_hierarchy_options(g)
    g.add_argument("--out", required=True, help="CSV with one row per run")
    g.add_argument("--plot", help="PNG of loss and classes against k (default: next to --out)")
    g.add_argument("--table", help="markdown table shaped like the thesis's table 5.4 (default: next to --out)")

    h = sub.add_parser("hierarchy", help="build generalization hierarchies for people to read and edit")
    hsub = h.add_subparsers(dest="hierarchy_command", metavar="ACTION", parser_class=_Parser)
    hb = hsub.add_parser("build", help="write a hierarchy in ARX's CSV layout",
                         description="Build the frequency-based hierarchy of a categorical column "
                                     "(thesis algorithms 1 and 2) or a masking hierarchy for code-like "
                                     "strings, and write it as ARX CSV: leaf;level 1;...;*")
    _add_quiet(hb)
    _add_input(hb)
    hb.add_argument("--column", required=True, help="the categorical column")
    hb.add_argument("--target", help="target column (default: the dataset's target)")
    hb.add_argument("--rho", type=float, default=10, help="percentile range; 100/rho an integer (default 10)")
    hb.add_argument("--kind", choices=["frequency", "masking"], default="frequency")
    hb.add_argument("--out", required=True, help="CSV file (ARX layout, ';'-separated)")

    pz = sub.add_parser("perturb", help="DISTPAB geometric perturbation of numeric features",
                        description="Perturb numeric features with DISTPAB: each entity computes local "
                                    "statistics, a central step searches the rotation angle and reflection "
                                    "axis, each entity perturbs its own rows (on Dask workers unless "
                                    "--centralized). The label and passenger columns stay with their rows.")
    _add_quiet(pz)
    _add_input(pz)
    g = pz.add_argument_group("perturbation")
    g.add_argument("--features", help="numeric feature columns (default: every numeric column but the "
                                      "label and passengers)")
    g.add_argument("--exclude", help="columns to leave out of the default features")
    g.add_argument("--label", help="label column, kept with its rows")
    g.add_argument("--passengers", help="other columns kept with their rows")
    g.add_argument("--entities", type=int, default=4, help="number of entities the rows are split into (default 4)")
    g.add_argument("--centralized", action="store_true", help="one entity, in this process (PABIDOT)")
    g.add_argument("--noise", type=float, default=0.3, help="randomized-expansion noise std (default 0.3)")
    g.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="keep each entity's row order")
    g.add_argument("--write-row-id", action="store_true",
                   help="EVALUATION ONLY: add a row_id column (original row number) so `gpuanon attack` can "
                        "pair rows; it undoes the shuffle and must never be published")
    g.add_argument("--backend", choices=["auto", "cpu", "gpu"])
    g.add_argument("--out", required=True, help="perturbed table (.csv, .csv.gz, .parquet)")
    g.add_argument("--report", help="JSON report")

    at = sub.add_parser("attack", help="attack a perturbed table (naive, ICA, known input-output)",
                        description="Score how well the perturbation resists reconstruction: min over "
                                    "attributes of std(z - zhat) on z-scored columns (higher resists better). "
                                    "Needs the original table and a perturbed table written with --write-row-id. "
                                    "With --frontier: DISTPAB, geometric perturbation (GP) and random rotation (RP) "
                                    "along a noise sweep on a named data set, accuracy (k-NN, SVM, LR; CV on the "
                                    "perturbed data) and the three attacks, one CSV row per (method, noise).")
    _add_quiet(at)
    at.add_argument("--original", help="original table (or --dataset)")
    at.add_argument("--dataset", choices=["adult", "hepmass", "breast_cancer", "wine", "digits"])
    at.add_argument("--rows", type=int)
    at.add_argument("--seed", type=int)
    at.add_argument("--perturbed", help="perturbed table with a row_id column (not with --frontier)")
    fr = at.add_argument_group("privacy-utility frontier (--frontier)")
    fr.add_argument("--frontier", action="store_true",
                    help="sweep the noise for DISTPAB, GP and RP on --dataset (adult: its 6 numeric columns; "
                         "hepmass: 100,000 rows unless --rows)")
    fr.add_argument("--noise", default="0.05,0.1,0.2,0.3,0.5,0.8",
                    help="comma-separated noise values, DISTPAB's expansion and GP's Gaussian noise "
                         "(default 0.05,0.1,0.2,0.3,0.5,0.8)")
    fr.add_argument("--out", help="frontier CSV: one row per (method, noise)")
    fr.add_argument("--png", help="frontier plot: attack minimum against mean accuracy")
    fr.add_argument("--folds", type=int, default=10, help="cross-validation folds (default 10)")
    fr.add_argument("--draws", type=int, default=10, help="RP / GP draws, the best kept (default 10)")
    fr.add_argument("--svm-rows", dest="svm_rows", type=int, default=10000,
                    help="the SVM's stratified sample of rows (default 10000; 0: every row)")
    fr.add_argument("--backend", choices=["auto", "cpu", "gpu"], help="DISTPAB's backend")
    at.add_argument("--features", help="feature columns (default: those of the perturbed table but row_id "
                                       "and non-numeric ones)")
    at.add_argument("--label", help="label column to leave out (default: the dataset's target)")
    at.add_argument("--known-fraction", type=float, default=0.1, help="rows the known input-output attacker has")
    at.add_argument("--report", help="JSON report")

    ev = _table_command(sub, "evaluate", "train classifiers on protected data, test them on raw rows",
                        "Split once (stratified), protect the training part with each protection, "
                        "train each model, test on the raw held-out rows; write one row per protection "
                        "and model with every score and the protection's information-loss metrics.")
    g = ev.add_argument_group("evaluation")
    g.add_argument("--protections", default=None,
                   help="';'-separated: raw, k=3, k=3,l=2, k=3,t=0.2, k=3,optimize, k=3,hierarchies=auto, "
                        "distpab[,noise=0.3], suppress (default: raw;k=3;k=10;k=50;k=3,l=2;k=3,t=0.2;"
                        "k=3,optimize;distpab)")
    g.add_argument("--models", default="all",
                   help="comma-separated: rf,et,gb,svm,lr,sgd,nb,knn,mlp or 'all' (default all)")
    g.add_argument("--test-size", dest="test_size", type=float, default=0.3, help="held-out share (default 0.3)")
    g.add_argument("--random-state", dest="random_state", type=int, default=0,
                   help="seed of the split, the models and the perturbation (default 0)")
    g.add_argument("--positive", help="positive class of a binary target (default: the minority class)")
    g.add_argument("--max-suppression", dest="max_suppression", type=float, default=0.01)
    g.add_argument("--backend", choices=["auto", "cpu", "gpu"])
    g.add_argument("--out", required=True, help="results CSV (one row per protection and model)")
    g.add_argument("--report", help="JSON with the results, protections and rank correlations "
                                    "(default: next to --out)")
    g.add_argument("--html", help="self-contained HTML page with the tables and plots")
    g.add_argument("--table", help="markdown table of accuracy / F1 like the thesis's 5.6-5.10 (default: printed)")

    fd = _table_command(sub, "federate", "cross-silo federated learning on Flower over protected silos",
                        "Split the training part into silos; every silo protects its own rows (none, Mondrian "
                        "k / l / t, or DISTPAB) and trains locally; FedAvg (Flower) weighted by silo sizes; the "
                        "global model is scored every round on the raw held-out rows. Only weights, sample counts "
                        "and statistics cross the network.")
    g = fd.add_argument_group("federation")
    g.add_argument("--silos", type=int, default=3, help="number of silos (Flower client nodes; default 3)")
    g.add_argument("--split", choices=["iid", "dirichlet"], default="iid",
                   help="stratified IID silos (default) or Dirichlet(alpha) label skew")
    g.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration (default 0.5)")
    g.add_argument("--protection", default="raw",
                   help="what each silo applies to its rows: raw, k=3, k=3,l=2, k=3,t=0.2, k=3,optimize, "
                        "distpab[,noise=0.3] (default raw)")
    g.add_argument("--compare", metavar="PROTECTIONS",
                   help="';'-separated protections, e.g. \"raw;k=3;k=10;k=3,l=2;distpab\": one federated run each "
                        "plus the centralized baseline, one printed table")
    g.add_argument("--centralized", choices=["raw", "all", "none"], default="raw",
                   help="with --compare: the centralized baseline, the same model trained on the whole raw "
                        "training part (raw, default), on every protection applied centrally (all), or none")
    g.add_argument("--model", choices=["mlp", "mlp-distpab", "lr", "svm", "perceptron"], default="mlp",
                   help="mlp: the thesis's (3 hidden layers, SGD 0.01, batch 32); mlp-distpab: the DISTPAB "
                        "paper's ((10, 200, 200), SGD 1e-4, momentum 0.5, batch 64); lr; svm (linear, hinge); "
                        "perceptron (default mlp)")
    g.add_argument("--rounds", type=int, default=20, help="FedAvg rounds R (default 20)")
    g.add_argument("--local-epochs", dest="local_epochs", type=int, default=3, help="local epochs E (default 3)")
    g.add_argument("--learning-rate", dest="learning_rate", type=float, help="override the model's learning rate")
    g.add_argument("--batch-size", dest="batch_size", type=int, help="override the model's batch size")
    g.add_argument("--test-size", dest="test_size", type=float, default=0.3, help="held-out share (default 0.3)")
    g.add_argument("--random-state", dest="random_state", type=int, default=0,
                   help="seed of the split, the silos, the initial weights and the batch order (default 0)")
    g.add_argument("--positive", help="positive class of a binary target (default: the minority class)")
    g.add_argument("--max-suppression", dest="max_suppression", type=float, default=0.01)
    g.add_argument("--runtime", choices=["simulation", "deployment"], default="simulation",
                   help="Flower's simulation (virtual nodes, Ray) or deployment runtime (a SuperLink and one "
                        "SuperNode per silo as separate processes on loopback) (default simulation)")
    g.add_argument("--gpus-per-client", dest="gpus_per_client", type=float, default=0.0,
                   help="simulation: GPU share of each virtual client, e.g. 0.25 (clients train on CUDA)")
    g.add_argument("--device", choices=["cpu", "cuda", "auto"], default=None,
                   help="where the silos train (default cpu; cuda with --gpus-per-client)")
    g.add_argument("--test-mapping", dest="test_mapping", action="store_true",
                   help="seed 004's test-time mapping: silos share their equivalence classes and each test "
                        "record is mapped to the most specific covering class with the smallest NCP before "
                        "scoring (off by default; IBM holds US patent 11,188,791 on this protocol)")
    g.add_argument("--report", help="JSON report (rounds, final, configuration, silos, bytes, seconds)")
    g.add_argument("--html", help="self-contained HTML page: learning curves, final scores beside the centralized")

    c = sub.add_parser("check", help="verify k / l / t of any table (exit 1 when not met)",
                       description="Recompute the achieved k, l and t of a table from the table "
                                   "alone and compare them with the requested values.")
    _add_quiet(c)
    _add_input(c)
    c.add_argument("--qi", help="generalized QI columns (for minmax output the base names work)")
    c.add_argument("--sensitive", help="sensitive attribute")
    _add_criteria(c, False)
    c.add_argument("--original", help="original table: its sensitive distribution is t-closeness's reference")
    c.add_argument("--target", help="with --original: score the information loss against this target column "
                                    "(entropy-coefficient loss of SPEC section 7, NCP, Gionis-Tassa, DM, CM)")
    c.add_argument("--report", help="JSON report of the check")
    return p


def _load_config(path: str | None) -> dict:
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"cannot read config '{path}': no such file; check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"config '{path}' is not valid TOML ({exc}); fix the file") from None
    cfg = {}
    for key, val in raw.items():
        k = key.replace("-", "_")
        if k not in CONFIG_KEYS:
            raise InputError(f"config '{path}': unknown key '{key}'; known keys: {', '.join(sorted(CONFIG_KEYS))}")
        if isinstance(val, list) and k != "hierarchy":
            val = ",".join(map(str, val))
        cfg[k] = val
    return cfg


def _merged(args: argparse.Namespace, cfg: dict, name: str, default=None):
    v = getattr(args, name, None)
    if v is None:
        v = cfg.get(name)
    return default if v is None else v


def _read_input(args, cfg):
    from .datasets import get_dataset, load_table  # noqa: PLC0415

    inp = _merged(args, cfg, "input")
    ds = _merged(args, cfg, "dataset")
    if inp and ds:
        raise InputError("give either an input file or --dataset, not both")
    if not inp and not ds:
        raise InputError("no input: give a CSV / Parquet file or --dataset adult")
    if ds:
        df, roles = get_dataset(ds, rows=_merged(args, cfg, "rows"), seed=_merged(args, cfg, "seed", 0))
        return _with_target_expr(df, roles, args, cfg) + (f"dataset:{ds}",)
    backend = _merged(args, cfg, "backend")
    if backend != "cpu" and str(inp).lower().endswith((".parquet", ".pq")):
        # Parquet only: CSV goes through load_table, which parses numbers exactly and refuses
        # duplicate column names.
        from .backend import get_backend  # noqa: PLC0415

        be = get_backend(backend, quiet=True)
        if be.is_gpu and be.frame.__name__ == "cudf":  # cuDF's reader, then a host frame
            try:
                df = be.frame.read_parquet(inp).to_pandas()
                if not df.columns.duplicated().any():
                    return _with_target_expr(df, {}, args, cfg) + (str(inp),)
            except Exception as exc:  # fall back to pandas, which gives the usual clear errors
                log.info("cuDF could not read %s (%s); reading with pandas", inp, type(exc).__name__)
    df = load_table(inp, encoding=_merged(args, cfg, "encoding"))
    return _with_target_expr(df, {}, args, cfg) + (str(inp),)


def _with_target_expr(df, roles, args, cfg):
    """``(df, roles)`` with the column ``--target-expr`` derives (named by --target, default 'target')."""
    import re  # noqa: PLC0415

    import pandas as pd  # noqa: PLC0415

    expr = _merged(args, cfg, "target_expr")
    if not expr:
        return df, roles
    name = _merged(args, cfg, "target") or "target"
    if name in df.columns:
        raise InputError(f"--target-expr would write column '{name}', which the table already has; name the "
                         f"derived target with --target NEW_NAME")
    quoted = re.findall(r"`([^`]*)`", expr)
    bare = re.sub(r"`[^`]*`", " ", re.sub(r"(\"[^\"]*\"|'[^']*')", " ", expr))
    if "__" in bare or "@" in bare or re.search(r"(?<![=!<>])=(?!=)", bare):
        raise InputError(f"--target-expr '{expr}' may only compare and combine columns (no '=', '@' or '__'); "
                         f"write e.g. --target-expr \"delay > 15\"")
    try:
        res = df.eval(expr, local_dict={}, global_dict={})
    except Exception as exc:  # pandas raises many kinds: name, syntax, type errors
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"--target-expr '{expr}' cannot be evaluated ({why}); refer to columns by name "
                         f"(`back-quoted` when they hold spaces), e.g. --target-expr \"delay > 15\"") from None
    if not isinstance(res, pd.Series) or len(res) != len(df):
        raise InputError(f"--target-expr '{expr}' gives {type(res).__name__}, not one value per row; compare a "
                         f"column, e.g. --target-expr \"delay > 15\"")
    used = [c for c in df.columns if str(c) in quoted or re.search(rf"(?<![\w.]){re.escape(str(c))}(?!\w)", bare)]
    missing = df[used].isna().any(axis=1) if used else pd.Series(False, index=df.index)
    if missing.any():
        res = res.astype(object).where(~missing, None)
        log.warning("--target-expr: %d row(s) have a missing value in %s; their target '%s' is missing",
                    int(missing.sum()), ", ".join(map(str, used)), name)
    log.info("target '%s' = %s: %s", name, expr,
             ", ".join(f"{v!r} {n}" for v, n in res.value_counts(dropna=False).head(6).items()))
    roles = dict(roles)
    roles["target"] = name
    return df.assign(**{name: res.to_numpy()}), roles


def _resolve_hierarchies(spec, df, qi):
    """'auto' for every categorical QI not given a file ('*' in the dict); files for the others."""
    if not isinstance(spec, tuple):
        return spec
    return "auto" if not spec[1] else {"*": "auto", **spec[1]}


def _setup_logging(quiet: bool) -> None:
    if not log.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("gpuanon: %(message)s"))
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


_INPUT_OPTIONS = ("input", "original", "perturbed")
_OUTPUT_OPTIONS = ("out", "report", "html", "plot", "table", "png")


def _same_file(a, b) -> bool:
    import os  # noqa: PLC0415

    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return Path(a).resolve() == Path(b).resolve()


def _refuse_overwriting_inputs(args, cfg: dict) -> None:
    """No output may name an input file: the user's data is never overwritten."""
    inputs = [(n, _merged(args, cfg, n)) for n in _INPUT_OPTIONS]
    for name in _OUTPUT_OPTIONS:
        out = _merged(args, cfg, name)
        if not isinstance(out, (str, Path)) or not out:
            continue
        for in_name, inp in inputs:
            if isinstance(inp, (str, Path)) and inp and _same_file(out, inp):
                what = "the input file" if in_name == "input" else f"the --{in_name} file"
                stem, dot, ext = Path(str(out)).name.partition(".")
                raise InputError(f"--{name} '{out}' is {what}, which would be overwritten; write the output "
                                 f"to another file, e.g. '{Path(str(out)).with_name(stem + '_out' + dot + ext)}'")


def cmd_anonymize(args) -> int:
    from .io import atomic_path, check_writable, write_json, write_table  # noqa: PLC0415
    from .mondrian import Mondrian  # noqa: PLC0415

    cfg = _load_config(args.config)
    _refuse_overwriting_inputs(args, cfg)
    t0 = time.perf_counter()
    out_path, report_path = _merged(args, cfg, "out"), _merged(args, cfg, "report")
    if out_path:
        check_writable(out_path)
    if report_path:
        check_writable(report_path, table=False)
    if getattr(args, "html", None) or cfg.get("html"):
        check_writable(args.html or cfg.get("html"), table=False)
    k = _merged(args, cfg, "k")
    if k is None:
        raise InputError("no k given; pass --k (e.g. --k 3)")
    df, roles, source = _read_input(args, cfg)
    t_read = time.perf_counter() - t0
    qi = _merged(args, cfg, "qi", roles.get("quasi_identifiers"))
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    t = _merged(args, cfg, "t")
    m = Mondrian(
        k=k, l=_merged(args, cfg, "l", 0), t=None if t is None else float(t),
        l_kind=_merged(args, cfg, "l_kind", "distinct"), c=float(_merged(args, cfg, "c", 1.0)),
        t_distance=_merged(args, cfg, "t_distance", "auto"), quasi_identifiers=qi,
        sensitive=_merged(args, cfg, "sensitive", roles.get("sensitive")),
        target=_merged(args, cfg, "target", roles.get("target")),
        identifiers=_merged(args, cfg, "identifiers"), numeric=_merged(args, cfg, "numeric"),
        categorical=_merged(args, cfg, "categorical"), mode=_merged(args, cfg, "mode", "strict"),
        output_format=_merged(args, cfg, "format", "range"),
        max_suppression=float(_merged(args, cfg, "max_suppression", 0.01)),
        backend=_merged(args, cfg, "backend"), progress=not args.quiet,
        hierarchies=_resolve_hierarchies(_hierarchy_spec(args, cfg), df, qi),
        rho=_rho_value(_merged(args, cfg, "rho")), optimize=bool(_merged(args, cfg, "optimize", False)))
    out = m.fit_transform(df)
    report = m.report_
    t1 = time.perf_counter()
    if out_path:
        write_table(out, out_path, metadata=out.attrs.get("gpuanon"))
    secs = report["seconds"]
    secs["write"] = round(time.perf_counter() - t1, 6)
    secs["read"] = round(t_read, 6)
    secs["total"] = round(time.perf_counter() - t0, 6)
    report["seconds"] = {k_: secs.get(k_, 0.0) for k_ in
                         ("read", "encode", "partition", "optimize", "hierarchies", "class_statistics", "generalize",
                          "verify", "metrics", "write", "total") if k_ in secs or k_ in ("read", "write", "total")}
    if not args.quiet and secs["write"] >= 0.5:
        log.info("write done in %.2f s", secs["write"])
    report["input"] = source
    report["output"] = out_path
    report["verification"] = m.verification_.to_dict()
    if report_path:
        write_json(report, report_path)
    html_path = getattr(args, "html", None) or cfg.get("html")
    if html_path:
        from .report import render_html  # noqa: PLC0415

        with atomic_path(html_path) as tmp:
            Path(tmp).write_text(render_html(report, title=f"gpuanon report: {source}"))
    log.info("%s; %.2f s%s", summary_line(report), secs["total"],
             f"; wrote {out_path}" if out_path else "; no --out given, nothing written")
    return 0


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


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
             f"{_plural(report['n_classes'], 'class', 'classes')}, the smallest of "
             f"{_plural(a['k'], 'row')} (k = {req['k']} asked)"]
    if req.get("l"):
        kind = req.get("l_kind", "distinct")
        parts.append(f"at least {a['l']} distinct sensitive values per class (l = {req['l']}"
                     f"{'' if kind == 'distinct' else ', ' + kind} asked)")
    if req.get("t") is not None:
        parts.append(f"largest distance to the whole table {a['t']:.4f} ({a.get('t_distance') or req.get('t_distance')}"
                     f", t = {req['t']} asked)")
    return "; ".join(parts)


def cmd_check(args) -> int:
    import pandas as pd  # noqa: PLC0415

    from .datasets import load_table  # noqa: PLC0415
    from .io import write_json  # noqa: PLC0415
    from .verify import verify  # noqa: PLC0415

    df, roles, source = _read_input(args, {})
    qi = args.qi or ",".join(roles.get("quasi_identifiers", []))
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    from .generalize import resolve_qi_columns  # noqa: PLC0415
    from .schema import _suggest  # noqa: PLC0415

    try:
        cols = resolve_qi_columns([x.strip() for x in qi.split(",") if x.strip()], df.columns)
    except KeyError as exc:
        c = exc.args[0]
        raise InputError(f"quasi-identifier '{c}' is not a column{_suggest(c, list(df.columns))}") from None
    sens = args.sensitive or roles.get("sensitive")
    if sens is not None and sens not in df.columns:
        from .schema import _suggest  # noqa: PLC0415

        raise InputError(f"sensitive attribute '{sens}' is not a column{_suggest(sens, list(df.columns))}")
    reference = None
    if args.original:
        orig = load_table(args.original)
        if sens is not None and sens not in orig.columns:
            raise InputError(f"original table '{args.original}' has no column '{sens}'")
        reference = None if sens is None else orig[sens]
    if (args.l or args.t is not None) and sens is None:
        raise InputError("checking l or t needs --sensitive COL")
    t_distance = args.t_distance or "auto"
    if t_distance == "auto":  # as the anonymizer resolves it: ordered for a numeric sensitive attribute
        from .criteria import resolve_t_distance  # noqa: PLC0415

        ref = None if sens is None else (df[sens] if reference is None else reference)
        t_distance = resolve_t_distance("auto", ref is not None and pd.api.types.is_numeric_dtype(ref)
                                        and not pd.api.types.is_bool_dtype(ref))
    res = verify(df, cols, sens, k=args.k, l=args.l or 0, l_kind=args.l_kind or "distinct",
                 c=args.c or 1.0, t=args.t, t_distance=t_distance, reference=reference)
    rep = res.to_dict()
    rep["input"] = source
    rep["t_distance"] = t_distance
    target = args.target or roles.get("target")
    if args.original and target:  # the information loss of a user's table against its original
        from .metrics import output_metrics  # noqa: PLC0415

        rep["metrics"] = output_metrics(df, orig, [x.strip() for x in qi.split(",") if x.strip()], target, k=args.k)
    if args.report:
        write_json(rep, args.report)
    ach = f"achieved k={res.k}" + ("" if res.l is None else f" l={res.l}") + (
        "" if res.t is None else f" t={res.t:.4f} ({t_distance} distance)")
    print(f"{source}: {_plural(res.n_rows, 'row')}, {_plural(res.n_classes, 'class', 'classes')}; {ach}")
    if rep.get("metrics") and rep["metrics"].get("entropy_loss") is not None:
        mt = rep["metrics"]
        print(f"information loss against '{args.original}' (target {target}): entropy-coefficient loss "
              f"{100 * mt['entropy_loss']:.2f}%, NCP {mt['ncp']:.4f}, CM {mt['cm']:.4f}")
    for f in res.failures:
        print(f"FAIL {f}")
    print("OK" if res.ok else "NOT MET")
    _ = pd
    return 0 if res.ok else 1


def _int_list(text: str, name: str) -> list[int]:
    text = (text or "").strip()
    if not text:
        return []
    try:
        if "-" in text and "," not in text:
            a, b = text.split("-", 1)
            return list(range(int(a), int(b) + 1))
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--{name} '{text}' is not a list of integers; write e.g. 3-15 or 3,5,10") from None


def _float_list(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in (text or "").split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--{name} '{text}' is not a list of numbers; write e.g. 0.2,0.3") from None


def cmd_sweep(args) -> int:
    from .io import atomic_path, check_writable  # noqa: PLC0415
    from .sweep import plot_sweep, run_sweep, thesis_table, to_markdown  # noqa: PLC0415

    out = Path(args.out)
    check_writable(out, table=False)
    plot = args.plot or str(out.with_suffix(".png"))
    table_path = args.table or str(out.with_name(out.stem + "_table.md"))
    ks, ls = _int_list(args.k_values, "k-values"), _int_list(args.l_values, "l-values")
    ts = _float_list(args.t_values, "t-values")
    df, roles, source = _read_input(args, {})
    qi = args.qi or roles.get("quasi_identifiers")
    if not qi:
        raise InputError("no quasi-identifiers given; pass --qi COL1,COL2,...")
    sens = args.sensitive or roles.get("sensitive") or args.target or roles.get("target")

    def progress(i, n, row):
        log.info("sweep %d/%d: %s k=%s l=%s t=%s -> %s classes, loss %s (%.2f s)", i, n, row["criterion"],
                 row["k"], row["l"], row["t"], row.get("n_classes"),
                 "-" if row.get("entropy_loss") is None else f"{100 * row['entropy_loss']:.2f}%", row["seconds"])

    res = run_sweep(df, qi, sensitive=sens, target=args.target or roles.get("target"),
                    identifiers=args.identifiers, ks=ks, ls=ls, ts=ts, base_k=args.base_k, mode=args.mode,
                    l_kind=args.l_kind, t_distance=args.t_distance, max_suppression=args.max_suppression,
                    backend=args.backend, progress=None if args.quiet else progress,
                    hierarchies=_resolve_hierarchies(_hierarchy_spec(args, {}), df, qi),
                    rho=_rho_value(args.rho), optimize=bool(args.optimize))
    with atomic_path(out) as tmp:
        res.to_csv(tmp, index=False)
    if (res["criterion"] == "k-anonymity").any():
        plot_sweep(res, plot)
    md = to_markdown(thesis_table(res, args.base_k))
    with atomic_path(table_path) as tmp:
        Path(tmp).write_text(md)
    print(md, end="")
    log.info("wrote %s, %s, %s", out, plot, table_path)
    return 0


def cmd_hierarchy(args) -> int:
    from .hierarchy import frequency_hierarchy, masking_hierarchy  # noqa: PLC0415
    from .io import atomic_path, check_writable  # noqa: PLC0415
    from .schema import _suggest  # noqa: PLC0415

    if args.hierarchy_command != "build":
        raise InputError("say what to do: gpuanon hierarchy build --column COL --out FILE.csv")
    check_writable(args.out, table=False)
    df, roles, source = _read_input(args, {})
    if args.column not in df.columns:
        raise InputError(f"column '{args.column}' is not in {source}{_suggest(args.column, list(df.columns))}")
    if args.kind == "masking":
        h = masking_hierarchy(df[args.column], name=args.column)
    else:
        target = args.target or roles.get("target")
        if target is None:
            raise InputError("a frequency hierarchy needs a target column; pass --target COL")
        if target not in df.columns:
            raise InputError(f"target '{target}' is not in {source}{_suggest(target, list(df.columns))}")
        try:
            h = frequency_hierarchy(df[args.column], df[target], _rho_value(args.rho), name=args.column)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    with atomic_path(args.out) as tmp:
        h.to_arx_csv(tmp)
    frame = h.to_frame()
    if not args.quiet:
        print(frame.to_string(index=False))
    log.info("wrote %s: %d leaves, %d levels above them", args.out, h.n_leaves, h.height)
    return 0


def _default_features(df, label, passengers, exclude):
    import pandas as pd  # noqa: PLC0415

    skip = set([label] if label else []) | set(passengers) | set(exclude)
    return [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])
            and not pd.api.types.is_bool_dtype(df[c])]


def cmd_perturb(args) -> int:
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415

    from .io import check_writable, write_json, write_table  # noqa: PLC0415
    from .perturb import perturb_distributed, perturb_frame  # noqa: PLC0415

    check_writable(args.out)
    if args.report:
        check_writable(args.report, table=False)
    if args.entities < 1:
        raise InputError(f"--entities must be >= 1, got {args.entities}")
    if args.noise < 0:
        raise InputError(f"--noise must be >= 0, got {args.noise}")
    t0 = time.perf_counter()
    df, roles, source = _read_input(args, {})
    label = args.label or (roles.get("target") if roles else None)
    passengers = [c.strip() for c in (args.passengers or "").split(",") if c.strip()]
    exclude = [c.strip() for c in (args.exclude or "").split(",") if c.strip()]
    features = ([c.strip() for c in args.features.split(",") if c.strip()] if args.features
                else _default_features(df, label, passengers, exclude))
    if not features:
        raise InputError("no numeric feature columns to perturb; pass --features COL1,COL2,...")
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
    seed = args.seed if args.seed is not None else 0
    if args.centralized or args.entities == 1:
        from .perturb.distpab import DISTPAB, _frame_matrix, local_stats, validate_frame  # noqa: PLC0415

        tc = time.perf_counter()
        feats, _carried = validate_frame(df, features, label, passengers)
        model = DISTPAB(noise=args.noise, shuffle=args.shuffle, random_state=seed, backend=args.backend)
        stats = local_stats(_frame_matrix(df, feats), model._xp())
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
        outs, report = perturb_distributed(frames, features, label=label, passengers=passengers, noise=args.noise,
                                           random_state=seed, shuffle=args.shuffle, backend=args.backend)
        out = pd.concat(outs, ignore_index=True)
        report["mode"] = "distributed"
    t1 = time.perf_counter()
    write_table(out, args.out)
    report.update(input=source, output=args.out, n_rows=int(len(out)), label=label, passengers=passengers,
                  noise=args.noise, shuffle=args.shuffle, seed=seed, row_id_written=bool(args.write_row_id),
                  dropped_columns=dropped)
    secs = dict(report.get("seconds", {}))
    secs["write"] = round(time.perf_counter() - t1, 6)
    secs["wall"] = round(time.perf_counter() - t0, 6)
    report["seconds"] = secs
    if args.report:
        write_json(report, args.report)
    log.info("perturbed %d rows x %d features (%s, %d entities): Phi %.4f at %g degrees, axis %s; wrote %s",
             len(out), len(features), report["mode"], report.get("n_entities", 1), report["phi"],
             report["angle_degrees"], features[int(report["axis"])], args.out)
    return 0


def _cmd_attack_frontier(args) -> int:
    from .io import check_writable, write_json, write_table  # noqa: PLC0415
    from .perturb.frontier import compare, parse_noise, plot_frontier, run_frontier  # noqa: PLC0415

    if not args.dataset:
        raise InputError("--frontier needs a named data set: --dataset breast_cancer|wine|adult|hepmass|digits")
    extra = [o for o, v in (("--original", args.original), ("--perturbed", args.perturbed),
                            ("--features", args.features), ("--label", args.label)) if v]
    if extra:
        raise InputError(f"{', '.join(extra)} cannot be used with --frontier; it perturbs --dataset itself")
    if not args.out:
        raise InputError("--frontier needs --out FILE.csv for the table")
    check_writable(args.out)
    if args.png:
        if not str(args.png).lower().endswith(".png"):
            raise InputError(f"--png '{args.png}' must end with .png")
        check_writable(args.png, table=False)
    if args.report:
        check_writable(args.report, table=False)
    noise = parse_noise(args.noise)
    if args.folds < 2:
        raise InputError(f"--folds must be at least 2, got {args.folds}")
    if args.draws < 1:
        raise InputError(f"--draws must be at least 1, got {args.draws}")
    if args.svm_rows < 0:
        raise InputError(f"--svm-rows must be >= 0 (0: every row), got {args.svm_rows}")
    if not 0 < args.known_fraction <= 1:
        raise InputError(f"--known-fraction must be in (0, 1], got {args.known_fraction}")
    res = run_frontier(args.dataset, noise=noise, rows=args.rows, random_state=args.seed or 0, folds=args.folds,
                       draws=args.draws, svm_max_rows=args.svm_rows or None, known_fraction=args.known_fraction,
                       backend=args.backend, progress=log.info)
    table = res.table
    write_table(table, args.out)
    if args.png:
        cfg = res.config
        title = (f"{cfg['description']}; {cfg['folds']}-fold CV"
                 + (f", SVM on {cfg['svm_rows']} rows" if cfg["svm_rows"] < cfg["rows"] else "")
                 + f"; seed {cfg['random_state']}")
        plot_frontier(table, args.png, title=title, raw_accuracy=res.raw.get("mean"))
    if args.report:
        write_json(res.to_dict(), args.report)
    cols = ["method", "noise", "accuracy_knn", "accuracy_svm", "accuracy_lr", "naive", "ica", "io", "attack_min"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for other, c in compare(table).items():
        print(f"distpab vs {other}: " + ", ".join(f"{nz:g} {v}" for nz, v in c["per_noise"].items()))
    log.info("frontier of %s in %.1f s; wrote %s", args.dataset, res.seconds,
             ", ".join(str(p) for p in (args.out, args.png, args.report) if p))
    return 0


def cmd_attack(args) -> int:
    import numpy as np  # noqa: PLC0415

    from .datasets import get_dataset, load_table  # noqa: PLC0415
    from .io import write_json  # noqa: PLC0415
    from .perturb.attacks import evaluate_attacks  # noqa: PLC0415
    from .schema import _suggest  # noqa: PLC0415

    if args.frontier:
        return _cmd_attack_frontier(args)
    stray = [o for o, v in (("--out", args.out), ("--png", args.png)) if v]
    if stray:
        raise InputError(f"{', '.join(stray)} belong to --frontier; add --frontier, or use --report for an attack")
    if not args.perturbed:
        raise InputError("give the perturbed table: --perturbed FILE (written by gpuanon perturb --write-row-id), "
                         "or --frontier --dataset NAME")
    if bool(args.original) == bool(args.dataset):
        raise InputError("give the original table: --original FILE or --dataset NAME (one of them)")
    roles = {}
    if args.original:
        orig = load_table(args.original)
    else:
        orig, roles = get_dataset(args.dataset, rows=args.rows, seed=args.seed or 0)
    label = args.label or roles.get("target")
    pert = load_table(args.perturbed)
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
                raise InputError(f"feature '{c}' is not in the {name} table{_suggest(c, list(frame.columns))}")
    X = orig[feats].to_numpy(dtype=np.float64)[rid]
    Xp = pert[feats].to_numpy(dtype=np.float64)
    res = evaluate_attacks(X, Xp, random_state=args.seed or 0, known_fraction=args.known_fraction)
    res["features"] = feats
    if args.report:
        write_json(res, args.report)
    for key, val in res.items():
        if isinstance(val, dict) and "min" in val:
            print(f"{key:>24}: min {val['min']:.4f}  mean {val.get('mean', float('nan')):.4f}")
    if "min" in res:
        print(f"{'overall minimum':>24}: {res['min']:.4f}")
    return 0


def _list(text):
    return [c.strip() for c in str(text).split(",") if c.strip()] if text else None


def cmd_evaluate(args) -> int:
    from .evaluate import DEFAULT_PROTECTIONS, markdown_scores, run_evaluation  # noqa: PLC0415
    from .io import atomic_path, check_writable, write_json  # noqa: PLC0415
    from .report import render_evaluation_html  # noqa: PLC0415

    out = Path(args.out)
    check_writable(out, table=False)
    report = args.report or str(out.with_suffix(".json"))
    check_writable(report, table=False)
    for extra in (args.html, args.table):
        if extra:
            check_writable(extra, table=False)
    df, roles, source = _read_input(args, {})
    target = args.target or roles.get("target")
    if not target:
        raise InputError("no target column given; pass --target COLUMN")
    qi = _list(args.qi) or roles.get("quasi_identifiers")
    ev = run_evaluation(df, args.protections or DEFAULT_PROTECTIONS, args.models, quasi_identifiers=qi,
                        target=target, sensitive=args.sensitive or roles.get("sensitive"),
                        identifiers=_list(args.identifiers), numeric=_list(args.numeric),
                        categorical=_list(args.categorical), test_size=args.test_size,
                        random_state=args.random_state, backend=args.backend,
                        max_suppression=args.max_suppression, positive=args.positive)
    ev.config["input"] = source
    with atomic_path(out) as tmp:
        ev.results.to_csv(tmp, index=False)
    doc = ev.to_dict()
    write_json(doc, report)
    if args.html:
        with atomic_path(args.html) as tmp:
            Path(tmp).write_text(render_evaluation_html(doc), encoding="utf-8")
    md = markdown_scores(ev.results)
    if args.table:
        with atomic_path(args.table) as tmp:
            Path(tmp).write_text(md)
    print(md, end="")
    log.info("wrote %s", ", ".join(str(p) for p in (out, report, args.html, args.table) if p))
    return 0


def cmd_federate(args) -> int:
    from .federated.run import make_config  # noqa: PLC0415
    from .io import atomic_path, check_writable, write_json  # noqa: PLC0415

    for extra in (args.report, args.html):
        if extra:
            check_writable(extra, table=False)
    if args.input and args.dataset:
        raise InputError("give either an input file or --dataset, not both")
    device = args.device or ("cuda" if args.gpus_per_client else "cpu")
    cfg = make_config(args.dataset, args.input, target=args.target, qi=_list(args.qi), sensitive=args.sensitive,
                      identifiers=_list(args.identifiers), numeric=_list(args.numeric),
                      categorical=_list(args.categorical), rows=args.rows, silos=args.silos, split=args.split,
                      alpha=args.alpha, protection=args.protection, model=args.model, rounds=args.rounds,
                      local_epochs=args.local_epochs, learning_rate=args.learning_rate, batch_size=args.batch_size,
                      test_size=args.test_size, seed=args.random_state, device=device,
                      max_suppression=args.max_suppression, positive=args.positive, test_mapping=args.test_mapping)
    if args.compare:
        from .federated.compare import compare, format_table  # noqa: PLC0415

        doc = compare(cfg, args.compare, runtime=args.runtime, gpus_per_client=args.gpus_per_client,
                      centralized_baseline=args.centralized)
        text = format_table(doc["table"])
    else:
        from .federated.run import run_federated  # noqa: PLC0415

        doc = run_federated(cfg, runtime=args.runtime, gpus_per_client=args.gpus_per_client)
        f = doc["final"]
        text = (f"federated {cfg['protection']} ({cfg['silos']} silos, {cfg['split']}, {cfg['model']['name']}, "
                f"{cfg['rounds']} rounds x {cfg['local_epochs']} epochs): accuracy {f['accuracy']:.4f}  precision "
                f"{f['precision']:.4f}  recall {f['recall']:.4f}  F1 {f['f1']:.4f}  ({doc['seconds']:.1f} s)\n")
    if args.report:
        write_json(doc, args.report)
    if args.html:
        from .federated.report import render_federated_html  # noqa: PLC0415

        with atomic_path(args.html) as tmp:
            Path(tmp).write_text(render_federated_html(doc), encoding="utf-8")
    print(text, end="")
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(getattr(args, "quiet", False))
    if not args.command:
        parser.print_help()
        return 2
    try:
        _refuse_overwriting_inputs(args, {})
        if args.command == "anonymize":
            return cmd_anonymize(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "hierarchy":
            return cmd_hierarchy(args)
        if args.command == "perturb":
            return cmd_perturb(args)
        if args.command == "attack":
            return cmd_attack(args)
        if args.command == "evaluate":
            return cmd_evaluate(args)
        if args.command == "federate":
            return cmd_federate(args)
        return cmd_check(args)
    except GpuanonError as exc:
        sys.stderr.write(f"gpuanon: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gpuanon: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
