"""ARX's CSV layout for hierarchies: ``leaf;level1;...;root``, one row per leaf, no header.

:func:`read_arx_rows` reads and checks a file's rows (the errors name the file, the line and the
fix); :func:`write_arx_rows` writes them. :meth:`gpuanon.hierarchy.Hierarchy.from_arx_csv` and
:meth:`~gpuanon.hierarchy.Hierarchy.to_arx_csv` build the tree from / write it to them.
"""

from __future__ import annotations

import csv
import io
import os

import numpy as np
import pandas as pd

from ..errors import InputError

ARX_DELIMITER = ";"
"""Field separator of ARX's hierarchy files."""


def read_arx_rows(path: str | os.PathLike) -> tuple[list[list[str]], list[int], str]:
    """The non-empty rows of an ARX hierarchy file, their line numbers, and the path as text.

    Empty lines are ignored; fields may be quoted (``"a;b"``); trailing empty fields are
    dropped. Raises :class:`~gpuanon.errors.InputError` (naming the file, the line and the fix)
    for an unreadable file, a row with fewer than two fields, an empty field, no rows, rows
    that do not end with the same root and a leaf listed twice.
    """
    src = os.fspath(path)
    try:
        with open(src, "r", encoding="utf-8-sig", newline="") as fh:
            text = fh.read()
    except OSError as e:
        raise InputError(f"cannot read hierarchy file {src}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"hierarchy file {src} is not UTF-8 text ({e.reason}); save it as "
                         f"UTF-8") from None
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        reader = csv.reader(io.StringIO(text), delimiter=ARX_DELIMITER, quotechar='"',
                            strict=True)
        for row in reader:
            lineno = reader.line_num
            while row and row[-1].strip() == "":
                row.pop()
            if not row:
                continue
            if len(row) < 2:
                other = next((d for d in (",", "\t", "|") if d in row[0]), None)
                example = (ARX_DELIMITER.join(f.strip() for f in row[0].split(other)) if other
                           else f"{row[0]}{ARX_DELIMITER}*")
                why = f"; this line is separated by {other!r}, not '{ARX_DELIMITER}'" if other else ""
                raise InputError(
                    f"hierarchy file {src}, line {lineno}: {len(row)} field ({row[0]!r}){why}; "
                    f"every row needs the leaf and its generalizations up to the root, "
                    f"separated by '{ARX_DELIMITER}' (e.g. {example})")
            blank = [k for k, f in enumerate(row) if f.strip() == ""]
            if blank:
                k = blank[0]
                raise InputError(
                    f"hierarchy file {src}, line {lineno}: field {k + 1} is empty; give "
                    f"every level a label (or remove the extra '{ARX_DELIMITER}')")
            rows.append(row)
            lines.append(lineno)
    except csv.Error as e:
        raise InputError(f"hierarchy file {src}, line {reader.line_num}: {e}; fix the "
                         f"quoting of that line") from None
    if not rows:
        raise InputError(f"hierarchy file {src} has no rows; write one row per value: "
                         f"value;level1;...;*")
    roots = pd.Series([r[-1] for r in rows])
    root = roots.value_counts().index[0]
    bad = np.flatnonzero((roots != root).to_numpy())
    if bad.size:
        shown = ", ".join(f"line {lines[i]} ends with {rows[i][-1]!r}" for i in bad[:5])
        raise InputError(
            f"hierarchy file {src}: the last column must be the same root for every row "
            f"(most rows end with {root!r}); {shown}; end every row with {root!r}")
    leaves_seen: dict[str, int] = {}
    for r, ln in zip(rows, lines):
        if r[0] in leaves_seen:
            raise InputError(f"hierarchy file {src}: leaf {r[0]!r} is listed twice (lines "
                             f"{leaves_seen[r[0]]} and {ln}); keep one row per value")
        leaves_seen[r[0]] = ln
    return rows, lines, src


def ragged_message(rows, lines, src: str, why: str) -> str:
    """``why`` (a hierarchy that is no tree), or, when rows have different numbers of fields, the first row
    whose length differs from most rows' (the file, the line, expected and got): shorter rows are padded
    by repeating their last level, which can give a label two parents."""
    lengths = pd.Series([len(r) for r in rows])
    usual = int(lengths.value_counts().index[0])
    odd = np.flatnonzero((lengths != usual).to_numpy())
    if not odd.size:
        return why
    i = int(odd[0])
    return (f"hierarchy file {src}, line {lines[i]}: {len(rows[i])} fields ({ARX_DELIMITER.join(rows[i])}) where "
            f"{(lengths == usual).sum():,} of the {len(rows):,} rows have {usual} (leaf, {usual - 2} level(s), root); "
            f"padded by repeating their last level, the rows make no tree; give every row the same number of "
            f"fields")


def write_arx_rows(path: str | os.PathLike, rows) -> None:
    """Write rows of labels (leaf first, root last) in ARX's layout (UTF-8, ``;``, no header)."""
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=ARX_DELIMITER, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerows(rows)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(buf.getvalue())
