"""A user's table: CSV, TSV or Parquet, read by extension, with errors that say what is wrong and the fix."""

from __future__ import annotations

import codecs
import csv
import dataclasses
import gzip
import io
import os

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from ..errors import InputError
from ..table.schema import suggest
from .text_types import ColumnTypes, type_columns

__all__ = ["TABLE_EXTENSIONS", "ColumnTypes", "load_table", "nullable_integers"]

TABLE_EXTENSIONS = (".csv", ".csv.gz", ".tsv", ".parquet", ".pq")


def _table_kind(path: str) -> str | None:
    lower = path.lower()
    if lower.endswith(".csv") or lower.endswith(".csv.gz"):
        return "csv"
    if lower.endswith(".tsv"):
        return "tsv"
    if lower.endswith(".parquet") or lower.endswith(".pq"):
        return "parquet"
    return None


def load_table(path: str | os.PathLike, encoding: str | None = None, sep: str | None = None, *,
               na_values=None, types: ColumnTypes | None = None) -> pd.DataFrame:
    """Read a CSV, TSV or Parquet file into a pandas frame, choosing the reader by extension.

    CSV and TSV files are read as text (pyarrow's reader, every column a string), then typed by the
    rules of :mod:`gpuanon.datasets.text_types`: numeric only when every non-empty cell is a number
    (parsed exactly: whole numbers as int64, others as the double nearest to their text); leading
    zeros (``00501``) keep a column as text; ISO dates become ``datetime64``; a pass-through column
    named in ``types.as_read`` stays the text it was read as. Leading spaces of a cell are dropped
    (``"a, b"`` gives ``'b'``) but in pass-through columns. Only empty cells are missing, unless
    ``na_values`` names more. Parquet files are read as they are.

    Parameters
    ----------
    path : str or os.PathLike
        A file ending in ``.csv``, ``.csv.gz``, ``.tsv``, ``.parquet`` or ``.pq``
        (case-insensitive).
    encoding : str, optional
        Text encoding of a CSV / TSV file (default UTF-8), e.g. ``"latin-1"``.
    sep : str, optional
        Column separator of a CSV / TSV file (default ``","`` for CSV, a tab for TSV), e.g. ``";"``.
    na_values : list of str, optional
        CSV / TSV cells that mean missing besides empty ones, e.g. ``["NA", "n/a"]`` (every column).
    types : ColumnTypes, optional
        Declared kinds (numeric, categorical, dates), the checked columns (QIs, sensitive: mixed numbers
        and text is an error) and the pass-through columns kept as read.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputError
        If the extension is not one of :data:`TABLE_EXTENSIONS`, the file is missing, empty,
        not in the encoding, not a table of its kind, truncated, or has a column name twice;
        the message says what is wrong and how to fix it.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(p, "w").write("a,b\\n1, x\\n2,\\n")
    >>> load_table(p)
       a    b
    0  1    x
    1  2  NaN
    >>> _ = open(p, "w").write("zip,code\\n00501,1.50\\n02139,NA\\n")
    >>> load_table(p, types=ColumnTypes(as_read={"code"})).values.tolist()
    [['00501', '1.50'], ['02139', 'NA']]
    """
    p, kind, sep = _checked_request(path, encoding, sep, na_values, types)
    reason = None
    try:
        if kind == "parquet":
            df = pd.read_parquet(p)
        else:
            df = _read_csv_text(p, sep or ("\t" if kind == "tsv" else ","), encoding, na_values, types)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - each reader failure becomes one line
        reason = _failure_reason(p, kind, exc, encoding)
    if reason is not None:
        raise InputError(f"cannot read input file {p!r}: {' '.join(reason.split())}")
    if kind == "parquet":
        _refuse_duplicate_names(p, [str(c) for c in df.columns])
        _keep_nested_types(p, df)
        nullable_integers(p, df)
    return df


def _checked_request(path, encoding, sep, na_values, types) -> tuple[str, str, str | None]:
    """``(path as text, table kind, separator)`` of a readable request, or the one-line error."""
    p = os.fspath(path)
    if not isinstance(p, str):
        p = os.fsdecode(p)
    kind = _table_kind(p)
    if kind is None:
        raise InputError(
            f"cannot read input file {p!r}: unknown extension; accepted extensions are "
            f"{', '.join(TABLE_EXTENSIONS)}"
        )
    if not os.path.exists(p):
        raise InputError(f"cannot read input file {p!r}: no such file; check the path")
    if os.path.isdir(p):
        raise InputError(f"cannot read input file {p!r}: it is a directory; give a file")
    if encoding is not None:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise InputError(f"--encoding '{encoding}' is not a known text encoding; use e.g. utf-8, "
                             f"latin-1 or cp1252") from None
    if sep is not None:
        if kind == "parquet":
            raise InputError(f"--sep applies to CSV / TSV input; {p!r} is Parquet: leave --sep out")
        sep = {"\\t": "\t", "tab": "\t"}.get(sep, sep)
        if len(sep) != 1 or sep in "\"\r\n":
            raise InputError(f"--sep {sep!r} is not a usable separator (one character, not a quote or line "
                             f"break); give e.g. --sep ';' or --sep tab")
    if kind == "parquet" and (na_values or (types is not None and types.dates)):
        opt = "--na-values" if na_values else "--dates"
        raise InputError(f"{opt} applies to CSV / TSV input; {p!r} is Parquet, whose columns keep their types: "
                         f"leave {opt} out")
    if os.path.getsize(p) == 0:
        raise InputError(f"cannot read input file {p!r}: the file is empty (0 bytes); give a table with a "
                         f"header row")
    return p, kind, sep


def _failure_reason(p: str, kind: str, exc: Exception, encoding) -> str:
    """Why a reader failed, in words that say how to fix it."""
    if isinstance(exc, ImportError):
        return f"reading Parquet needs pyarrow or fastparquet ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return _decode_reason(p, kind, exc, encoding)
    if isinstance(exc, EOFError):
        return "the compressed file is truncated (it ends early); copy or download it again"
    if isinstance(exc, OSError):
        text = exc.strerror or str(exc) or type(exc).__name__
        if "truncated" in text.lower():
            return "the compressed file is truncated (it ends early); copy or download it again"
        if "gzip" in text.lower() or "compressed" in text.lower():
            return f"not a valid gzip file ({text}); give a plain .csv or a real .csv.gz"
        return f"{text}; check that the file is readable"
    if isinstance(exc, pd.errors.EmptyDataError):
        return "the file has no header row (nothing but blank lines); give a table with a header row"
    text = " ".join(f"{type(exc).__name__}: {exc}".split())  # e.g. pyarrow's own error types
    if kind != "parquet" and "UTF8" in text:
        return _decode_reason(p, kind, _first_bad_byte(p, encoding), encoding)
    if kind != "parquet" and "Empty CSV file" in text:
        return "the file has no header row (nothing but blank lines); give a table with a header row"
    if kind != "parquet" and ("CSV parse error" in text or "columns" in text):
        return (f"not a well-formed {kind.upper()} ({' '.join(str(exc).split())}); check the separator "
                f"and quoting of that line")
    if kind == "parquet":
        _refuse_duplicate_names(p, _parquet_names(p))  # pyarrow refuses them with a cryptic message
        return (f"not a Parquet file, or a truncated one ({text}); give the complete file, or a CSV "
                f"with the .csv extension")
    return text


def _read_csv_text(p: str, sep: str, encoding: str | None, na_values, types: ColumnTypes | None) -> pd.DataFrame:
    """Every cell as text (pyarrow), the header's names checked, then the columns typed (:func:`type_columns`)."""
    names = _header(p, sep, encoding)
    _refuse_duplicate_names(p, names)
    names = [n.lstrip(" ") for n in names]
    absent = sorted(set(types.dates) - set(names)) if types is not None else []
    if absent:  # a declared date column the file does not have would be ignored

        raise InputError(f"--dates {absent[0]}: {p!r} has no column '{absent[0]}'{suggest(absent[0], names)}; name "
                         f"a column of the file, or leave it out of --dates")
    na = tuple(v for v in (na_values or ()) if v != "")
    table = pcsv.read_csv(
        p,
        read_options=pcsv.ReadOptions(column_names=names, skip_rows=1, encoding=encoding or "utf8",
                                      block_size=1 << 24, use_threads=_threads()),
        parse_options=pcsv.ParseOptions(delimiter=sep, newlines_in_values=True),
        convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in names}, null_values=[""],
                                            strings_can_be_null=True, quoted_strings_can_be_null=True))
    types = types or ColumnTypes()
    if na:
        types = dataclasses.replace(types, na_values=na)
        table = _na_cells(table, na, types)
    return type_columns(table, types)


def _threads() -> bool:
    """pyarrow's parallel CSV parsing, on a machine with more than two cores (on two busy ones, one
    thread parses faster)."""
    return (os.cpu_count() or 1) > 2


def _na_cells(table, na: tuple, types: ColumnTypes):
    """Pass-through cells equal to one of ``na`` (exactly as written) become missing; typed columns are
    compared after their leading spaces are dropped (:func:`type_columns`)."""
    look = pa.array(list(na), pa.string())
    cols = []
    for n, c in zip(table.column_names, table.columns):
        hit = pc.is_in(c, look) if types.keeps_text(n) else None
        cols.append(pc.if_else(hit, pa.scalar(None, pa.string()), c) if hit is not None and pc.any(hit).as_py()
                    else c)
    return pa.table(cols, names=table.column_names)


def _header(p: str, sep: str, encoding: str | None) -> list:
    """The header row's names as the ``csv`` module reads them ([] for a file of blank lines)."""
    opener = gzip.open if p.lower().endswith(".gz") else open
    with opener(p, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding=encoding or "utf-8-sig", errors="strict", newline="")
        for row in csv.reader(text, delimiter=sep):
            if row:
                return row
    raise pd.errors.EmptyDataError("no header")


def _first_bad_byte(p: str, encoding: str | None) -> UnicodeDecodeError:
    """The decoding error of the first bad byte (for the message), read in Python."""
    opener = gzip.open if p.lower().endswith(".gz") else open
    with opener(p, "rb") as f:
        data = f.read()
    try:
        data.decode(encoding or "utf-8")
    except UnicodeDecodeError as exc:
        return exc
    return UnicodeDecodeError(encoding or "utf-8", data[:1], 0, 1, "invalid")


def _keep_nested_types(p: str, df: pd.DataFrame) -> None:
    """Note the Arrow types of nested columns (structs, lists) in ``df.attrs["arrow_types"]``, so that
    a Parquet output writes them back as they were (pandas holds them as dicts and arrays, from which
    Arrow would infer a struct's fields in another order)."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    schema = pq.read_schema(p)
    kept = {f.name: f.type for f in schema if pa.types.is_nested(f.type) and f.name in df.columns}
    if kept:
        df.attrs["arrow_types"] = kept


def nullable_integers(p: str, df: pd.DataFrame) -> None:
    """Integer columns with missing values (which pandas reads as float64) as pandas' nullable
    ``Int64`` / ``UInt64``, so whole numbers stay exact integers (values as read)."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    schema = pq.read_schema(p)
    names = [f.name for f in schema if pa.types.is_integer(f.type) and f.name in df.columns
             and pd.api.types.is_float_dtype(df[f.name].dtype)]
    if not names:
        return
    mapper = {t: (pd.UInt64Dtype() if pa.types.is_unsigned_integer(t) else pd.Int64Dtype())
              for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
                        pa.uint64())}
    part = pq.read_table(p, columns=names).to_pandas(types_mapper=mapper.get)
    for name in names:  # a loop over columns
        df[name] = part[name].values


def _parquet_names(p: str) -> list:
    """The column names a Parquet file's schema holds ([] when it cannot be read)."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415

        return list(pq.read_schema(p).names)
    except Exception:  # not Parquet at all: the caller says so
        return []


def _refuse_duplicate_names(p: str, names: list) -> None:
    """Duplicate column names are refused (pandas would rename the second ``a`` to ``a.1``)."""
    seen: dict = {}
    for i, n in enumerate(names):
        seen.setdefault(str(n).strip(), []).append(i + 1)
    dup = {n: pos for n, pos in seen.items() if len(pos) > 1}
    if dup:
        what = "; ".join(f"'{n}' (columns {', '.join(map(str, pos))})" for n, pos in dup.items())
        raise InputError(f"cannot read input file {p!r}: column names appear more than once: {what}; "
                         f"rename them so that every column name is unique")


def _decode_reason(p: str, kind: str, exc: UnicodeDecodeError, encoding: str | None) -> str:
    with open(p, "rb") as f:
        head = f.read(8)
    if head.startswith(b"PAR1"):
        return "it is a Parquet file, not a CSV; rename it to .parquet"
    if head.startswith(b"PK\x03\x04"):
        return "it is a ZIP archive (an Excel .xlsx?), not a CSV; export the sheet as CSV"
    if head.startswith(b"\x1f\x8b") and not p.lower().endswith(".gz"):
        return "it is gzip-compressed; rename it to .csv.gz"
    enc = encoding or "utf-8"
    return (f"the text is not valid {enc} (byte {exc.object[exc.start:exc.start + 1]!r} at byte offset "
            f"{exc.start}); pass the file's encoding, e.g. --encoding latin-1 (or cp1252), or re-save it as UTF-8")

