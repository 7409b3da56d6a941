"""Independent verification: recompute k, l and t from an output table and the roles alone.

This module never imports the anonymizer (nor its criteria): it groups the output rows by their
generalized QI tuple and recomputes every class's size, distinct sensitive values, entropy and
distance to the reference distribution with its own code, so it can catch the anonymizer's bugs.

Examples
--------
>>> import pandas as pd
>>> out = pd.DataFrame({"age": ["20-30"] * 3 + ["31-40"] * 3, "y": [0, 1, 1, 0, 0, 1]})
>>> r = verify(out, ["age"], "y", k=3, l=2)
>>> r.k, r.l, r.ok
(3, 2, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

TOLERANCE = 1e-9


@dataclass
class VerificationResult:
    """What the output achieves, and which requested properties it fails."""

    n_rows: int
    n_classes: int
    k: int
    l: int | None
    l_entropy: float | None
    t: float | None
    size_stats: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {"ok": self.ok, "n_rows": self.n_rows, "n_classes": self.n_classes, "k": self.k,
                "l": self.l, "l_entropy": self.l_entropy, "t": self.t, "class_size": self.size_stats,
                "failures": list(self.failures)}


_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer, elementwise (uint64 arithmetic wraps)."""
    z = z + _GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _cell_codes(s: pd.Series) -> np.ndarray:
    """A uint64 per cell, equal exactly when the cells are equal (missing equals missing)."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind == "f":
        v = s.to_numpy(dtype=np.float64) + 0.0  # -0.0 -> +0.0
        v[np.isnan(v)] = np.nan  # one NaN bit pattern
        return v.view(np.uint64)
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "iu":
        return s.to_numpy().astype(np.int64, copy=False).view(np.uint64)
    return pd.factorize(s, use_na_sentinel=False)[0].astype(np.uint64)


def class_ids(out: pd.DataFrame, qi_columns) -> tuple[np.ndarray, int]:
    """Dense id of every row's generalized QI tuple (missing values compare equal).

    Rows are grouped by a 64-bit hash of the whole tuple, then every column is checked to be
    constant inside every group, so the grouping is exact; on a hash collision (never seen in
    practice) the rows are grouped column by column instead.
    """
    n = len(out)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    h = np.full(n, 0x12345678, dtype=np.uint64)
    for j, c in enumerate(qi_columns):
        h = _mix(h ^ _mix(_cell_codes(out[c]) + np.uint64(j)))
    gid, uniq = pd.factorize(h)
    gid = gid.astype(np.int64)
    # codes come in order of first appearance: the first row of each class
    new = np.ones(n, dtype=bool)
    new[1:] = gid[1:] > np.maximum.accumulate(gid)[:-1]
    first = np.nonzero(new)[0]
    for c in qi_columns:
        x = _cell_codes(out[c])
        if (x != x[first][gid]).any():
            return _class_ids_exact(out, qi_columns)
    return gid, len(uniq)


def _class_ids_exact(out: pd.DataFrame, qi_columns) -> tuple[np.ndarray, int]:
    gid = np.zeros(len(out), dtype=np.int64)
    for c in qi_columns:
        codes, uniq = pd.factorize(out[c], use_na_sentinel=False)
        gid = pd.factorize(gid * max(len(uniq), 1) + codes.astype(np.int64))[0].astype(np.int64)
    gid, uniq = pd.factorize(gid)
    return gid.astype(np.int64), len(uniq)


def _distances(gid, n_cls, sa_codes, q, kind, ordered_chunk=1 << 24):
    m = q.shape[0]
    counts = np.bincount(gid, minlength=n_cls).astype(np.float64)
    if kind in ("equal", "kl"):
        pair = gid * m + sa_codes
        u, cnt = np.unique(pair, return_counts=True)
        g, v = u // m, u % m
        p = cnt / counts[g]
        if kind == "equal":
            # 0.5 * (sum over present |p - q| + sum over absent q)
            present_q = np.bincount(g, weights=q[v], minlength=n_cls)
            diff = np.bincount(g, weights=np.abs(p - q[v]), minlength=n_cls)
            return 0.5 * (diff + (1.0 - present_q))
        return np.bincount(g, weights=p * np.log(p / q[v]), minlength=n_cls)
    # ordered: cumulative differences over the sorted values, classes in chunks
    out = np.empty(n_cls)
    per = max(1, ordered_chunk // max(m, 1))
    order = np.argsort(gid, kind="stable")
    sg = gid[order]
    bounds = np.searchsorted(sg, np.arange(0, n_cls + per, per))
    for i, s0 in enumerate(range(0, n_cls, per)):
        s1 = min(n_cls, s0 + per)
        r0, r1 = bounds[i], bounds[i + 1]
        h = np.bincount((sg[r0:r1] - s0) * m + sa_codes[order[r0:r1]], minlength=(s1 - s0) * m)
        h = h.reshape(s1 - s0, m) / counts[s0:s1, None]
        out[s0:s1] = np.abs(np.cumsum(h - q[None, :], axis=1)).sum(axis=1) / max(m - 1, 1)
    return out


def verify(out: pd.DataFrame, qi_columns, sensitive: str | None = None, *, k: int | None = None,
           l: int = 0, l_kind: str = "distinct", c: float = 1.0, t: float | None = None,
           t_distance: str = "equal", reference=None, sensitive_ordered: bool | None = None
           ) -> VerificationResult:
    """Recompute the achieved k / l / t of an anonymized table and check the requested ones.

    Parameters
    ----------
    out : DataFrame
        The anonymized table.
    qi_columns : list of str
        Its generalized QI columns (for ``minmax`` output, both ``_min`` and ``_max`` columns).
    sensitive : str or None
        The sensitive column, needed for l and t.
    k, l, t : requested values (None / 0: not checked).
    reference : Series, optional
        The original sensitive values: their distribution is the "whole table" of t-closeness.
        Without it the output's own distribution is used.
    sensitive_ordered : bool, optional
        Ordered EMD over sorted values; defaults to True for a numeric column.
    """
    missing = [c_ for c_ in list(qi_columns) + ([sensitive] if sensitive else []) if c_ not in out.columns]
    if missing:
        raise KeyError(f"column '{missing[0]}' is not in the table to check")
    n = len(out)
    gid, n_cls = class_ids(out, qi_columns)
    sizes = np.bincount(gid, minlength=n_cls) if n else np.zeros(0, dtype=np.int64)
    failures = []
    ach_k = int(sizes.min()) if n_cls else 0
    stats = {}
    if n_cls:
        stats = {"min": int(sizes.min()), "median": float(np.median(sizes)), "max": int(sizes.max()),
                 "mean": float(sizes.mean())}
    if k is not None and n and ach_k < k:
        failures.append(f"k-anonymity: smallest class has {ach_k} row(s) < k = {k}")
    ach_l = ach_le = ach_t = None
    if sensitive is not None and n:
        sa = out[sensitive]
        ref = sa if reference is None else pd.Series(reference)
        support = pd.unique(ref)
        if sensitive_ordered is None:
            sensitive_ordered = bool(pd.api.types.is_numeric_dtype(ref) and not pd.api.types.is_bool_dtype(ref))
        if sensitive_ordered or t_distance == "ordered":
            support = pd.Index(support).sort_values().to_numpy()
        ref_codes = pd.Index(support).get_indexer(ref)
        sa_codes = pd.Index(support).get_indexer(sa)
        if (sa_codes < 0).any():
            bad = sa[sa_codes < 0].iloc[0]
            failures.append(f"sensitive value {bad!r} is not in the reference table")
            sa_codes = np.where(sa_codes < 0, 0, sa_codes)
        m = len(support)
        q = np.bincount(ref_codes, minlength=m) / len(ref)
        pair_u, pair_cnt = np.unique(gid * m + sa_codes, return_counts=True)
        g = pair_u // m
        distinct = np.bincount(g, minlength=n_cls)
        ach_l = int(distinct.min())
        p = pair_cnt / sizes[g]
        ent = np.bincount(g, weights=-p * np.log(p), minlength=n_cls)
        ach_le = float(np.exp(ent.min()))
        dist = _distances(gid, n_cls, sa_codes, q, t_distance)
        ach_t = float(dist.max())
        if l:
            if l_kind == "distinct" and ach_l < l:
                failures.append(f"l-diversity: a class has {ach_l} distinct '{sensitive}' value(s) < l = {l}")
            elif l_kind == "entropy" and ent.min() < np.log(l) - TOLERANCE:
                failures.append(f"entropy l-diversity: a class has exp(entropy) = {ach_le:.4f} < l = {l}")
            elif l_kind == "recursive":
                order = np.lexsort((-pair_cnt, g))
                sg, sc = g[order], pair_cnt[order]
                first = np.r_[True, sg[1:] != sg[:-1]]
                rank = np.arange(len(sg)) - np.maximum.accumulate(np.where(first, np.arange(len(sg)), 0))
                top = np.bincount(sg, weights=np.where(rank == 0, sc, 0), minlength=n_cls)
                tail = np.bincount(sg, weights=np.where(rank >= l - 1, sc, 0), minlength=n_cls)
                if not (top < c * tail).all():
                    failures.append(f"recursive ({c}, {l})-diversity fails for {(~(top < c * tail)).sum()} class(es)")
        if t is not None and ach_t > t + TOLERANCE:
            failures.append(f"t-closeness ({t_distance}): a class is at distance {ach_t:.6f} > t = {t}")
    elif (l or t is not None) and n:
        failures.append("l-diversity / t-closeness requested but no sensitive column given")
    return VerificationResult(n, int(n_cls), ach_k, ach_l, ach_le, ach_t, stats, failures)
