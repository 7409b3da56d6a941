"""Writing tables and reports atomically (a temporary file in the same folder, then a rename).

A failed run never leaves a half-written output: the temporary file is removed on any error.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .backend import frame_to_arrow, frame_to_host, is_device_frame
from .errors import InputError

OUTPUT_EXTENSIONS = (".csv", ".csv.gz", ".parquet", ".pq")


def output_kind(path: str | os.PathLike) -> str:
    """'csv' or 'parquet' from the file name; InputError for anything else."""
    p = str(path).lower()
    if p.endswith(".csv") or p.endswith(".csv.gz"):
        return "csv"
    if p.endswith(".parquet") or p.endswith(".pq"):
        return "parquet"
    raise InputError(f"output '{path}' has an unknown extension; use one of {', '.join(OUTPUT_EXTENSIONS)}")


def check_writable(path: str | os.PathLike, *, table: bool = True) -> None:
    """Fail early (before any work) when an output cannot be written."""
    if Path(path).is_dir():
        raise InputError(f"cannot write '{path}': it is a folder; name a file inside it"
                         + (f", e.g. '{Path(path) / 'out.csv'}'" if table else ""))
    if table:
        output_kind(path)
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise InputError(f"cannot write '{path}': folder '{folder}' does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise InputError(f"cannot write '{path}': folder '{folder}' is not writable")


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; rename it over ``path`` only on success."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write '{path}': it is a folder; name a file inside it")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.resolve().parent))
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
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


def write_table(df, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """Write CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, ``.pq``) atomically.

    ``df`` is a pandas or a cuDF frame. A cuDF frame's Parquet file is written from its Arrow
    form (one counted copy of the output columns, dictionary columns kept as such); its plain
    CSV by cuDF's device writer.
    """
    kind = output_kind(path)
    gz = str(path).lower().endswith(".gz")
    device = is_device_frame(df)
    with atomic_path(path) as tmp:
        if kind == "csv":
            if device and not gz:
                df.to_csv(tmp, index=False)
            else:
                frame_to_host(df).to_csv(tmp, index=False, compression="gzip" if gz else None)
        else:
            import pyarrow as pa  # noqa: PLC0415
            import pyarrow.parquet as pq  # noqa: PLC0415

            tbl = frame_to_arrow(df) if device else pa.Table.from_pandas(_parquet_safe(df), preserve_index=False)
            if metadata:
                meta = dict(tbl.schema.metadata or {})
                meta[b"gpuanon"] = json.dumps(json_safe(metadata), allow_nan=False, default=_json_default).encode()
                tbl = tbl.replace_schema_metadata(meta)
            pq.write_table(tbl, tmp)


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.bool_,)):
        return bool(o)
    return str(o)


def _json_key(k):
    if isinstance(k, (str, int, float, bool)) or k is None:
        return k
    if isinstance(k, (np.integer, np.floating, np.bool_)):
        return k.item()
    return str(k)


def json_safe(o):
    """``o`` with NaN / infinity (and pandas' missing markers) as None, NumPy scalars and arrays as
    Python values: what strict JSON parsers (``JSON.parse``, browsers) accept.

    >>> json_safe({"a": float("nan"), "b": [np.float64(1.5), np.inf], "c": np.array([1, 2])})
    {'a': None, 'b': [1.5, None], 'c': [1, 2]}
    """
    if isinstance(o, dict):
        return {_json_key(k): json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if isinstance(o, np.ndarray):
        return [json_safe(v) for v in o.tolist()]
    if isinstance(o, (bool, np.bool_)):
        return bool(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if np.isfinite(o) else None
    if isinstance(o, np.integer):
        return int(o)
    if o is pd.NA or o is pd.NaT:
        return None
    return o


def write_json(obj: dict, path: str | os.PathLike) -> None:
    """Write a JSON report atomically; NaN and infinity are written as ``null`` (strict JSON)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            json.dump(json_safe(obj), f, indent=2, allow_nan=False, default=_json_default)
            f.write("\n")
