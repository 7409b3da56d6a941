"""Fast CSV writing of pandas frames through Arrow's CSV writer (``pyarrow.csv.write_csv``).

Compared with ``DataFrame.to_csv`` the values read back the same (``pandas.read_csv``: same
dtypes, exact floats, missing cells empty); the bytes differ in style only: nothing is quoted unless
a text cell must be (it holds a quote, a comma or a line break: then the header and every text,
boolean and float cell are quoted, Arrow's writer quoting by column type), booleans are ``True`` /
``False`` as pandas spells them, floats in their shortest round-trip form (``1e-05`` as ``0.00001``).
Text read from a CSV (pass-through columns) is thus written with the same characters. Columns are
rendered, and slices of rows written, on a thread pool (Arrow's kernels leave the GIL), in row
order. A whole number in a float column keeps its ``.0``
(``1000.0``), as pandas writes it, so the column is still read back as floats.
Categorical columns are written from their dictionary form (no text copy of the column).
Nested columns (Parquet structs and lists) are written as JSON text. A frame holding a column
type this writer does not render like pandas (dates, times, decimals, binary) is written by pandas.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from .jsonsafe import json_safe
from ..table.schema import nested_kind

_BATCH_ROWS = 1 << 18  # rows per batch of the writer: large batches cost fewer passes (1M x 28: 2.8 s -> 1.8 s)
_SLICE_ROWS = 1 << 16  # rows rendered by one thread at a time (1M x 29 floats: about 30 MB of text)
GZIP_LEVEL = 6  # gzip's own default: on CSV text about 5x faster than Arrow's level 9, 2 % larger
_PLAIN = ("int", "uint", "float", "double", "bool", "string", "large_string", "null")
_STRUCTURAL_LUT = np.zeros(256, dtype=bool)  # the bytes that make a CSV cell need quotes: " , CR LF
_STRUCTURAL_LUT[[ord('"'), ord(","), ord("\r"), ord("\n")]] = True


def _json_cell(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return json.dumps(json_safe(v), allow_nan=False, default=str, ensure_ascii=False)


def mixed_as_text(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding mixed types become text (missing stays missing)."""
    out = df
    for c in df.columns:
        if df[c].dtype == object:
            types = {type(v) for v in df[c].dropna().head(100_000)}
            if len(types) > 1:
                if out is df:
                    out = df.copy()
                out[c] = df[c].map(lambda v: v if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    return out


def _whole_floats(arr):
    """A float array as text with ``.0`` kept on whole numbers (as pandas writes them); a column with no
    whole number is cast alone (no pass over its text)."""
    text = pc.cast(arr, pa.string())
    whole = pc.and_(pc.is_finite(arr), pc.equal(pc.floor(arr), arr))
    if not pc.any(whole).as_py():
        return text
    plain = pc.and_kleene(whole, pc.invert(pc.match_substring(text, "e")))  # 1e+16 keeps its form
    return pc.if_else(plain, pc.binary_join_element_wise(text, ".0", ""), text)


def _structural_bytes(arr) -> bool:
    """Whether one text chunk's characters hold a quote, comma, CR or LF: one look-up over its data
    buffer (the bytes of every cell, back to back)."""
    if len(arr) == 0:
        return False
    _, offsets, data = arr.buffers()[:3]
    if data is None:
        return False
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    ends = np.frombuffer(offsets, dtype=width)[arr.offset:arr.offset + len(arr) + 1]
    raw = np.frombuffer(data, dtype=np.uint8)[ends[0]:ends[-1]]
    return bool(_STRUCTURAL_LUT[raw].any())


def _needs_quotes(col) -> bool:
    """Whether a text column (plain or dictionary-encoded) holds a cell with a quote, comma or line break."""
    if pa.types.is_dictionary(col.type):
        chunks = [ch.dictionary for ch in col.chunks]
    else:
        chunks = col.chunks
    if not chunks or not (pa.types.is_string(chunks[0].type) or pa.types.is_large_string(chunks[0].type)):
        return False
    return any(_structural_bytes(ch) for ch in chunks)


def arrow_table(df: pd.DataFrame):
    """``(table, quote)``: ``df`` as an Arrow table the CSV writer renders like pandas, or None where it
    cannot; ``quote``: whether a text cell needs quotes (then the writer quotes every text cell)."""
    if not all(isinstance(c, str) for c in df.columns):
        return None
    nested = [c for c in df.columns if nested_kind(df[c])]
    if nested:
        df = df.assign(**{c: df[c].map(_json_cell) for c in nested})
    try:
        tbl = pa.Table.from_pandas(mixed_as_text(df), preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if not all(_plain(col.type) for col in tbl.columns):
        return None
    with _pool(len(tbl)) as pool:  # the columns converted side by side (Arrow's kernels leave the GIL)
        done = list(pool.map(_render, tbl.columns))
    return pa.table([c for c, _ in done], names=tbl.column_names), any(q for _, q in done)


def _plain(t) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return str(t).startswith(_PLAIN)


def _render(col):
    """``(column, needs quotes)``: one column as the CSV writer should render it."""
    t = col.type
    if pa.types.is_dictionary(t) and pa.types.is_floating(t.value_type):
        col, t = col.cast(t.value_type), t.value_type
    if pa.types.is_boolean(t):  # pandas' True / False, not Arrow's true / false
        return pc.if_else(col, "True", "False"), False
    if pa.types.is_floating(t):  # whole numbers keep their ".0", as pandas writes them
        return _whole_floats(col), False
    return col, _needs_quotes(col)


def _pool(rows: int):
    """A thread pool for a large table (one thread for a small one: no start-up cost)."""
    return ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)) if rows >= _BATCH_ROWS // 2 else 1)


def _early_years_as_text(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with naive date-time columns holding a year before 1000 as ISO text (pandas writes the
    year 0001 as ``1``): ``0001-01-01 00:00:01`` as pandas writes the others, missing stays missing."""
    out = df
    for c in df.columns:  # a loop over columns
        s = df[c]
        if not (pd.api.types.is_datetime64_dtype(s.dtype) and s.notna().any() and s.min().year < 1000):
            continue
        v = s.to_numpy()
        unit = np.datetime_data(v.dtype)[0]
        whole = (v[~np.isnat(v)].view(np.int64) % (10**9 // {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit])
                 == 0).all() if unit != "s" else True
        text = np.char.replace(np.datetime_as_string(v, unit="s" if whole else unit).astype(str), "T", " ")
        out = df.copy() if out is df else out
        out[c] = pd.Series(np.where(np.isnat(v), None, text), dtype=object, index=df.index)
    return out


def write_csv(df: pd.DataFrame, tmp, gz: bool) -> None:
    """Write ``df`` to the file ``tmp`` as CSV (gzip-compressed when ``gz``)."""
    got = arrow_table(df)
    if got is None:
        _early_years_as_text(df).to_csv(tmp, index=False, compression="gzip" if gz else None)
        return
    tbl, quote = got
    opts = pcsv.WriteOptions(batch_size=_BATCH_ROWS, include_header=False,
                             quoting_style="needed" if quote else "none")
    with pa.OSFile(str(tmp), "wb") as raw:
        _write(tbl, raw, opts, quote, gz)


def _write(tbl, out, opts, quote: bool, gz: bool = False) -> None:
    """The header (every name quoted when every text cell is, else only where needed), then the rows:
    slices of :data:`_SLICE_ROWS` rendered side by side into memory, written in order (a few at a time).

    With ``gz`` every slice is compressed on its own thread (gzip level :data:`GZIP_LEVEL`) as one member
    of a multi-member gzip file, which gzip, pandas and pyarrow read as one stream."""
    head = io.StringIO()
    csv.writer(head, lineterminator="\n", quoting=csv.QUOTE_ALL if quote else csv.QUOTE_MINIMAL).writerow(
        tbl.column_names)
    head_bytes = head.getvalue().encode("utf-8")
    out.write(gzip.compress(head_bytes, GZIP_LEVEL, mtime=0) if gz else head_bytes)

    def render(part):
        sink = pa.BufferOutputStream()
        pcsv.write_csv(part, sink, opts)
        return gzip.compress(sink.getvalue(), GZIP_LEVEL, mtime=0) if gz else sink.getvalue()

    with _pool(len(tbl)) as pool:
        pending: deque = deque()
        for start in range(0, len(tbl), _SLICE_ROWS):
            pending.append(pool.submit(render, tbl.slice(start, _SLICE_ROWS)))
            if len(pending) > pool._max_workers + 2:  # a few slices in memory at a time
                out.write(pending.popleft().result())
        while pending:
            out.write(pending.popleft().result())
