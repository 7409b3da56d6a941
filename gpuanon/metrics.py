"""Information-loss metrics.

For now: NCP (normalized certainty penalty) of a partitioning, computed from the original rows
and a class label per row, so any anonymizer's partitions (ours or a peer's) can be scored alike.

Examples
--------
>>> import numpy as np, pandas as pd
>>> df = pd.DataFrame({"age": [20, 30, 40, 50], "c": ["a", "a", "b", "c"]})
>>> round(ncp(df, ["age", "c"], np.array([0, 0, 1, 1]), {"age": "numeric", "c": "categorical"}), 4)
0.3333
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def ncp_per_column(df: pd.DataFrame, qi, labels, kinds: dict, categorical: str = "set") -> dict:
    """Mean NCP of every QI over the kept rows (``labels >= 0``).

    Numeric: ``(hi - lo) / (domain max - domain min)`` of the row's class. Categorical
    (``categorical='set'``, the contract): 0 for one value, else ``values covered / domain size``;
    ``categorical='arx'``: ``(values covered - 1) / (domain size - 1)``. The domain is the column's
    distinct values over ``df``.
    """
    labels = np.asarray(labels)
    keep = labels >= 0
    lab = pd.factorize(labels[keep])[0]
    out = {}
    for c in qi:
        col = df[c].to_numpy()[keep]
        if kinds[c] == "numeric":
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
            rng = np.nanmax(v) - np.nanmin(v) if np.isfinite(v).any() else 0.0
            vk = v[keep]
            g = pd.DataFrame({"g": lab, "v": vk}).groupby("g")["v"]
            width = (g.transform("max") - g.transform("min")).to_numpy()
            pen = np.where(np.isnan(width), 0.0, width / rng) if rng > 0 else np.zeros(len(vk))
        else:
            dom = max(int(pd.Series(df[c]).nunique(dropna=False)), 1)
            codes = pd.factorize(col, use_na_sentinel=False)[0]
            pairs = np.unique(lab.astype(np.int64) * (codes.max() + 1) + codes)
            distinct = np.bincount(pairs // (codes.max() + 1), minlength=lab.max() + 1)[lab]
            if categorical == "arx":
                pen = (distinct - 1) / (dom - 1) if dom > 1 else np.zeros(len(lab))
            else:
                pen = np.where(distinct > 1, distinct / dom, 0.0)
        out[c] = float(np.mean(pen)) if len(pen) else 0.0
    return out


def ncp(df: pd.DataFrame, qi, labels, kinds: dict, weights=None, categorical: str = "set") -> float:
    """Table NCP: the mean over rows of the weighted mean over QIs (weights normalized to 1)."""
    per = ncp_per_column(df, qi, labels, kinds, categorical)
    w = np.ones(len(qi)) if weights is None else np.asarray([weights.get(c, 0.0) for c in qi], dtype=float)
    w = w / w.sum()
    return float(sum(wi * per[c] for wi, c in zip(w, qi)))
