"""Option groups shared by the subcommands, and the parser that reports errors in one line."""

from __future__ import annotations

import argparse

DATASETS = ["adult", "hepmass", "breast_cancer", "wine", "digits"]
BACKENDS = ["auto", "cpu", "gpu"]
L_KINDS = ["distinct", "entropy", "recursive"]
T_DISTANCES = ["auto", "equal", "ordered", "kl"]
MODES = ["strict", "relaxed"]


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like every other input error
        self.exit(2, f"gpuanon: error: {message}; see '{self.prog} --help'\n")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no log lines or progress")


def add_input(p: argparse.ArgumentParser, read_here: bool = True) -> None:
    """The input table; ``read_here=False`` for a command whose table is read elsewhere (federate's silos),
    without the options of this process's reader (--seed, --encoding): the separator and the text
    options travel to the readers."""
    g = p.add_argument_group("input (a file, or a bundled / generated dataset)")
    g.add_argument("input", nargs="?", help="CSV, TSV or Parquet file")
    g.add_argument("--dataset", choices=DATASETS,
                   help="bundled Adult data, the HEPMASS-shaped generator, or a scikit-learn set")
    g.add_argument("--rows", type=int, help="--dataset only: rows to generate (hepmass) or sample (others)")
    if read_here:
        g.add_argument("--seed", type=int, help="seed for --dataset hepmass / sampling (default 0)")
        g.add_argument("--encoding", help="text encoding of a CSV / TSV input (default utf-8), e.g. latin-1")
        g.add_argument("--sep", help="column separator of a CSV / TSV input (default ',' for .csv, tab for .tsv), "
                                     "e.g. ';'")
        add_text_options(g)
    else:
        g.add_argument("--sep", help="column separator of a CSV / TSV input (default ',' for .csv, tab for .tsv), "
                                     "e.g. ';'")
        add_text_options(g)


def add_text_options(g) -> None:
    """How a CSV / TSV input's text cells are read: more missing-value markers, date columns."""
    g.add_argument("--na-values", dest="na_values", metavar="LIST",
                   help="CSV cells that mean missing besides empty ones, e.g. \"NA,n/a\" (every column; by "
                        "default only empty cells are missing and NA, None, null are values)")
    g.add_argument("--dates", metavar="COLS",
                   help="CSV columns read as dates / date-times (ISO 8601 cells: 2020-01-31, "
                        "2020-01-31T08:15:00); such columns are detected without it")


def add_roles(p: argparse.ArgumentParser, target_expr: bool = True, kinds: bool = True) -> None:
    g = p.add_argument_group("column roles (comma-separated lists)")
    g.add_argument("--qi", help="quasi-identifier columns (default for --dataset: its standard QIs)")
    g.add_argument("--sensitive", help="sensitive attribute (used by l and t)")
    g.add_argument("--target", help="target column (orders categories; used by later metrics)")
    if target_expr:
        g.add_argument("--target-expr", dest="target_expr", metavar="EXPR",
                       help="derive the target from other columns, e.g. \"delay > 15\" (pandas DataFrame.eval); "
                            "the new column is named by --target (default 'target')")
    g.add_argument("--identifiers", help="identifier columns, dropped from the output")
    if kinds:
        g.add_argument("--numeric", help="QIs to treat as numeric (overrides dtype inference)")
        g.add_argument("--categorical", help="QIs to treat as categorical")


def table_command(sub, name: str, help: str, description: str, *, read_here: bool = True, target_expr: bool = True,
                  kinds: bool = True) -> argparse.ArgumentParser:
    """A subcommand that reads one table: quiet flag, input and column roles (see :func:`add_input`,
    :func:`add_roles` for the switches: a command offers only the options it uses)."""
    p = sub.add_parser(name, help=help, description=description)
    add_quiet(p)
    add_input(p, read_here)
    add_roles(p, target_expr, kinds)
    return p


def add_criteria(p: argparse.ArgumentParser, required_k: bool) -> None:
    g = p.add_argument_group("privacy criteria")
    g.add_argument("--k", type=int,
                   help="k-anonymity: minimum class size (>= 2)" + ("" if required_k else "; checked when given"))
    g.add_argument("--l", type=int, help="l-diversity: distinct sensitive values per class (0: off)")
    g.add_argument("--l-kind", dest="l_kind", choices=L_KINDS, help="default distinct")
    g.add_argument("--c", type=float, help="c of recursive (c, l)-diversity (default 1)")
    g.add_argument("--t", type=float, help="t-closeness threshold (off by default)")
    g.add_argument("--t-distance", dest="t_distance", choices=T_DISTANCES,
                   help="EMD with equal or ordered ground distance, or KL (default auto: ordered for a "
                        "numeric sensitive attribute, equal otherwise)")


def add_cluster_timeout(g) -> None:
    """``--cluster-timeout``, shared by the commands that take ``--cluster`` (anonymize, perturb)."""
    g.add_argument("--cluster-timeout", dest="cluster_timeout", type=float, default=60.0, metavar="SECONDS",
                   help="with --cluster: seconds to wait for the scheduler (to connect, or when it stops "
                        "answering) and for a worker when every worker was lost (default 60)")


def add_hierarchy_options(g) -> None:
    g.add_argument("--hierarchies", choices=["auto"],
                   help="automatic frequency-based hierarchies for every categorical QI (needs a target)")
    g.add_argument("--hierarchy", action="append", metavar="COLUMN=FILE.csv",
                   help="a hierarchy in ARX's CSV layout for one column (repeatable)")
    g.add_argument("--rho", type=float, help="percentile range of the automatic hierarchies "
                                             "(default: chosen per column by information loss)")
    g.add_argument("--optimize", action="store_true",
                   help="the optimization step: QI tuples occurring >= k times keep their values")


def add_risk_options(p: argparse.ArgumentParser, max_risk: bool = False) -> None:
    """The re-identification risk section of ``anonymize``'s report (docs/risk.md)."""
    g = p.add_argument_group("re-identification risk in the report (before and after)")
    g.add_argument("--population", type=int, metavar="N",
                   help="population size: adds population uniqueness (Zayatz, Pitman, SNB, Dankar)")
    g.add_argument("--sampling-fraction", dest="sampling_fraction", type=float, metavar="F",
                   help="sampling fraction n / N in (0, 1], instead of --population")
    g.add_argument("--risk-threshold", dest="risk_threshold", type=float,
                   help="records at risk: risk above this (default 0.2)")
    g.add_argument("--suda", action="store_true", help="SUDA2 / DIS-SUDA in the risk section (expensive)")
    g.add_argument("--suda-max-size", dest="suda_max_size", type=int, metavar="S", help="largest MSU size for --suda")
    if max_risk:
        g.add_argument("--risk-check", dest="risk_check", choices=["none", "readback"],
                       help="readback: also compute the section from the input and the output file read back (as "
                            "'gpuanon risk' does) and say whether both agree (default none: the fit's own classes)")
        g.add_argument("--max-risk", dest="max_risk", type=float, metavar="R",
                       help="instead of --k: the smallest k whose output has prosecutor risk <= R (k = ceil(1 / R)); "
                            "population uniqueness is then 0 (no sample uniques are left)")
