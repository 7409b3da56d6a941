"""What several subcommands do the same way: read the input table, derive a target, parse the
hierarchy options, refuse to overwrite an input, set up the log."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from ..errors import InputError

log = logging.getLogger("gpuanon")


def given(value, default):
    """``value`` unless the option was not given (None)."""
    return default if value is None else value


def split_list(text):
    """``"a, b"`` -> ``["a", "b"]``; None for an empty or missing value."""
    return [c.strip() for c in str(text).split(",") if c.strip()] if text else None


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def rho_value(v):
    if v is None:
        return None
    return int(v) if float(v).is_integer() else float(v)


def hierarchy_spec(args):
    """What ``hierarchies=`` of the estimator gets from ``--hierarchies`` and ``--hierarchy COL=FILE``:
    None, a dict of files, ``'auto'``, or the files with ``'*': 'auto'`` for every other categorical QI."""
    spec = {}
    for pair in args.hierarchy or []:
        if "=" not in str(pair):
            raise InputError(f"--hierarchy '{pair}' is not COLUMN=FILE.csv; write e.g. --hierarchy zip=zip.csv")
        col, path = str(pair).split("=", 1)
        if col.strip() in spec:
            raise InputError(f"--hierarchy names column '{col.strip()}' twice ({spec[col.strip()]} and {path.strip()});"
                             f" give one hierarchy file per column")
        spec[col.strip()] = path.strip()
    auto = args.hierarchies
    if auto:
        if auto != "auto":
            raise InputError(f"hierarchies '{auto}' is not understood; use --hierarchies auto")
        return "auto" if not spec else {"*": "auto", **spec}
    return spec or None


def reader_options(args, pass_through: bool = False, checked: bool = True) -> dict:
    """``load_table``'s keywords from the options: encoding, separator, ``--na-values`` and the column types
    (``--numeric``, ``--categorical``, ``--dates``; the QIs and the sensitive attribute ``checked`` for
    numbers mixed with text; with ``pass_through`` every other column kept as the text it was read as)."""
    from ..datasets import ColumnTypes  # noqa: PLC0415

    def names(opt):
        return set(split_list(getattr(args, opt, None)) or [])

    roles = {}
    if checked:
        roles = {c: "quasi-identifier" for c in names("qi")}
        for pair in getattr(args, "hierarchy", None) or []:
            roles[str(pair).split("=", 1)[0].strip()] = "quasi-identifier"
        sens = getattr(args, "sensitive", None)
        if sens:
            roles[str(sens).strip()] = "sensitive attribute"
    used = {str(getattr(args, "target", None) or "").strip()} - {""}
    expr = getattr(args, "target_expr", None)
    if expr:  # every column the expression might read is typed
        used |= {q or w for q, w in re.findall(r"`([^`]*)`|(\w+)", str(expr))}
    na = split_list(getattr(args, "na_values", None))
    types = ColumnTypes(numeric=names("numeric"), categorical=names("categorical"), dates=names("dates"),
                        checked=roles, others_as_read=pass_through, used=used)
    return dict(encoding=getattr(args, "encoding", None), sep=getattr(args, "sep", None), na_values=na,
                types=types)


def log_missing(df, args, roles: dict) -> None:
    """One log line counting the missing cells per role (quasi-identifiers, sensitive, target,
    pass-through), when there are any."""
    if not hasattr(df, "isna"):
        return
    per = df.isna().sum()
    if not per.any():
        return
    qi = set(given(split_list(getattr(args, "qi", None)), roles.get("quasi_identifiers")) or [])
    sens = given(getattr(args, "sensitive", None), roles.get("sensitive"))
    target = given(getattr(args, "target", None), roles.get("target"))
    ids = set(split_list(getattr(args, "identifiers", None)) or [])
    groups = {"quasi-identifiers": [], "sensitive": [], "target": [], "identifiers": [], "pass-through": []}
    for col, n in per.items():
        if not n:
            continue
        role = ("quasi-identifiers" if col in qi else "sensitive" if col == sens else "target" if col == target
                else "identifiers" if col in ids else "pass-through")
        groups[role].append((col, int(n)))
    parts = [f"{role} {sum(n for _, n in cols):,} ({', '.join(f'{c} {n:,}' for c, n in cols[:6])}"
             f"{', ...' if len(cols) > 6 else ''})" for role, cols in groups.items() if cols]
    log.info("missing cells: %s", "; ".join(parts))


def read_input(args, device_ok: bool = False, pass_through: bool = False, checked: bool = True):
    """``(frame, roles, source)`` from the input file or ``--dataset``, with ``--target-expr`` applied.

    ``device_ok``: a Parquet file read by cuDF (GPU backend) stays a cuDF frame on the device
    (``gpuanon anonymize``); otherwise every frame is a pandas frame. ``pass_through`` and ``checked``:
    see :func:`reader_options` (a CSV input's columns typed for a command that writes its pass-through
    columns back, or for one that reads a published table).
    """
    from ..datasets import get_dataset, load_table  # noqa: PLC0415

    inp, ds = args.input, args.dataset
    if inp and ds:
        raise InputError("give either an input file or --dataset, not both")
    if not inp and not ds:
        raise InputError("no input: give a CSV / Parquet file or --dataset adult")
    refuse_rows_with_file(args)
    refuse_target_identifier(args)
    if ds:
        refuse_reader_options_with_dataset(args)
        df, roles = get_dataset(ds, rows=args.rows, seed=args.seed)
        return with_target_expr(df, roles, args) + (f"dataset:{ds}",)
    backend = getattr(args, "backend", None)
    if backend != "cpu" and str(inp).lower().endswith((".parquet", ".pq")):
        # Parquet only: CSV goes through load_table, which parses numbers exactly and refuses
        # duplicate column names.
        from ..backend import get_backend  # noqa: PLC0415

        be = get_backend(backend, quiet=True)
        if be.is_gpu and be.frame.__name__ == "cudf":  # cuDF's reader: the file goes straight to the device
            from ..backend import frame_to_host, read_parquet_device  # noqa: PLC0415

            try:
                df = read_parquet_device(inp)
                if not df.columns.duplicated().any():
                    if not device_ok or getattr(args, "target_expr", None):
                        df = frame_to_host(df)  # one counted copy for commands that work on the host
                    return with_target_expr(df, {}, args) + (str(inp),)
            except Exception as exc:  # fall back to pandas, which gives the usual clear errors
                log.info("cuDF could not read %s (%s); reading with pandas", inp, type(exc).__name__)
    df = load_table(inp, **reader_options(args, pass_through, checked))
    log_missing(df, args, {})
    return with_target_expr(df, {}, args) + (str(inp),)


def refuse_rows_with_file(args) -> None:
    """``--rows`` samples or generates a bundled dataset; with an input file it would be ignored."""
    if getattr(args, "input", None) and getattr(args, "rows", None) is not None:
        raise InputError("--rows applies to --dataset only; with an input file every row is read: leave "
                         "--rows out (or cut the file to the rows you want)")


def refuse_target_identifier(args) -> None:
    """``--target`` naming one of ``--identifiers``: identifiers are dropped, the target would be too."""
    target = str(getattr(args, "target", None) or "").strip()
    if target and target in (split_list(getattr(args, "identifiers", None)) or []):
        raise InputError(f"--target {target} is also one of --identifiers, which are dropped; leave it out of "
                         f"--identifiers, or name another --target")


def refuse_reader_options_with_dataset(args) -> None:
    """``--sep``, ``--na-values`` and ``--dates`` read a CSV / TSV file; with ``--dataset`` they would be ignored."""
    if getattr(args, "dataset", None):
        for opt in ("sep", "na_values", "dates"):
            if getattr(args, opt, None) is not None:
                raise InputError(f"--{opt.replace('_', '-')} applies to a CSV / TSV input file, not to --dataset; "
                                 f"leave it out")


def with_target_expr(df, roles, args):
    """``(df, roles)`` with the column ``--target-expr`` derives (named by --target, default 'target')."""
    import pandas as pd  # noqa: PLC0415

    expr = getattr(args, "target_expr", None)
    if expr is None:
        return df, roles
    if not str(expr).strip():
        raise InputError("--target-expr is empty; give an expression over the columns, e.g. --target-expr "
                         "\"delay > 15\", or leave it out")
    name = args.target or "target"
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


def setup_logging(quiet: bool) -> None:
    if not log.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("gpuanon: %(message)s"))
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


_INPUT_OPTIONS = ("input", "original", "perturbed", "release", "control", "config", "population_table")
_OUTPUT_OPTIONS = ("out", "report", "html", "plot", "table", "png", "per_record")


def input_files(args) -> dict:
    """The files a command reads, by the words an error names them with: ``{'the input file': path, ...}``
    (with ``--hierarchy COL=FILE``'s files)."""
    found = {}
    for name in _INPUT_OPTIONS:
        v = getattr(args, name, None)
        if isinstance(v, (str, Path)) and v:
            found["the input file" if name == "input" else f"the --{name.replace('_', '-')} file"] = v
    for pair in getattr(args, "hierarchy", None) or []:
        if "=" in str(pair):
            col, path = str(pair).split("=", 1)
            found[f"the --hierarchy file of '{col.strip()}'"] = path.strip()
    return found


def command_outputs(args, items):
    """The command's outputs (``items``: ``(label, path, is_table)``, path None when not written), checked
    before any work: distinct, none an input, each writable. Write them with ``.writing()``."""
    from ..output.io import Outputs  # noqa: PLC0415

    outputs = Outputs(input_files(args))
    for label, path, table in items:
        outputs.add(label, path, table=table)
    outputs.check()
    return outputs


def refuse_overwriting_inputs(args) -> None:
    """No output may name an input file, nor another output: the user's data is never overwritten, and
    no output replaces another (each command checks its default paths, e.g. sweep's plot, again)."""
    from ..output.io import Outputs  # noqa: PLC0415

    outputs = Outputs(input_files(args))
    for name in _OUTPUT_OPTIONS:
        out = getattr(args, name, None)
        if isinstance(out, (str, Path)) and out:
            outputs.add(f"--{name.replace('_', '-')}", out)
    outputs.check_names()


def refuse_other_original(out, original, qi_names, original_path, source) -> None:
    """A one-line error when ``--original`` cannot be the table ``out`` was made from (:mod:`gpuanon.release.origin`)."""
    from ..release.origin import origin_problem  # noqa: PLC0415

    why = origin_problem(out, original, qi_names)
    if why is not None:
        raise InputError(f"--original '{original_path}' cannot be the table {source} was made from: {why}; give "
                         f"the table it was anonymized from as --original")
