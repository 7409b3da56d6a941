"""Values as strict JSON accepts them (NaN and infinity as None, NumPy values as Python's): used by the
report writer (:mod:`gpuanon.output.io`), the pages and the CSV writer's nested cells (:mod:`gpuanon.output.csv_out`)."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd

__all__ = ["json_safe"]


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
    if isinstance(o, (pd.Timestamp, datetime.date)):  # dates and times as ISO text
        return o.isoformat()
    if isinstance(o, np.datetime64):
        return None if np.isnat(o) else str(o)
    return o
