"""Summaries of any anonymized table read against its original (``gpuanon check --original``,
peers' outputs, the evaluation's protections), and NCP of any partitioning of a frame.

These read users' files with pandas on the host; the metrics themselves are the same as the
anonymizer's (:func:`~gpuanon.metrics.compute.compute_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..table.cells import category_sets, cell_key, hierarchy_node_members, parse_numeric_cells, resolve_qi_columns
from ..table.exact import float_values, is_time
from ..release.verify import class_ids as group_ids
from .columns import stats_from_value_targets, value_target_chunk
from .compute import compute_metrics
from .entropy import domain_joint, interval_joint, interval_positions, set_joint
from .formulas import interval_entropy_at
from .summary import ClassSummary, ColumnSummary


def summary_from_output(out: pd.DataFrame, original: pd.DataFrame, quasi_identifiers, kinds: dict,
                        target: str | None = None, class_ids=None, hierarchies: dict | None = None,
                        rows=None) -> ClassSummary:
    """Summarize any anonymized table against the original one (rows need not be aligned).

    Numeric QIs may be numbers, ``"lo-hi"`` text, or ``<col>_min`` / ``<col>_max`` pairs;
    categorical QIs a value, values joined by ``|``, ``*`` (every category), or a node label of
    ``hierarchies[column]`` (a :class:`~gpuanon.hierarchy.Hierarchy`).

    A numeric column of plain numbers that are not all original values is read as a ``mean``
    column: each class stands for the interval of its original rows, found through ``rows``
    (the position in ``original`` of every output row) or, when the tables have equal length
    and the same target sequence, row by row. Without either, each mean is read as the original
    value nearest to it (a note says so).
    """
    try:
        qcols = resolve_qi_columns(quasi_identifiers, out.columns)
    except KeyError as exc:
        raise KeyError(f"quasi-identifier '{exc.args[0]}' is not in the anonymized table") from None
    cls = _classes(out, original, qcols, target, class_ids)
    if rows is None and len(out) == len(original) and (
            target is None or np.array_equal(out[target].to_numpy(), original[target].to_numpy())):
        rows = np.arange(len(out))  # the same rows in the same order
    cls.rows = rows
    notes: list = []
    hierarchies = hierarchies or {}
    cols = [_numeric_column(c, original[c], out, cls, notes) if kinds[c] == "numeric"
            else _categorical_column(c, original[c], out, cls, hierarchies.get(c)) for c in quasi_identifiers]
    return ClassSummary(cls.sizes, cls.thist, cols, len(original), len(original) - len(out), cls.tcounts, notes)


@dataclass
class _Classes:
    """The output's classes read against the original: class of every output row, sizes, first row of
    each class, the target's codes, counts and per-class histogram (``None`` without a target)."""

    gid: np.ndarray
    n_cls: int
    sizes: np.ndarray
    first: np.ndarray
    thist: np.ndarray | None = None
    tcounts: np.ndarray | None = None
    tcodes_orig: np.ndarray | None = None
    nt: int = 1
    rows: np.ndarray | None = None


def _classes(out: pd.DataFrame, original: pd.DataFrame, qcols, target, class_ids) -> _Classes:
    if class_ids is None:
        gid, n_cls = group_ids(out, qcols)
    else:
        gid, n_cls = pd.factorize(np.asarray(class_ids))[0], None
        n_cls = int(gid.max()) + 1 if len(gid) else 0
    gid = np.asarray(gid, dtype=np.int64)
    sizes = np.bincount(gid, minlength=n_cls)
    new = np.ones(len(gid), dtype=bool)
    new[1:] = gid[1:] > np.maximum.accumulate(gid)[:-1] if len(gid) else new[1:]
    cls = _Classes(gid, n_cls, sizes, np.nonzero(new)[0])
    if target is not None:
        tvals = pd.unique(original[target])
        cls.tcodes_orig = pd.Index(tvals).get_indexer(original[target])
        tc = pd.Index(tvals).get_indexer(out[target])
        if (tc < 0).any():
            raise ValueError(f"target column '{target}' holds values that the original table does not have")
        nt = cls.nt = len(tvals)
        cls.thist = np.bincount(gid * nt + tc, minlength=n_cls * nt).reshape(n_cls, nt)
        cls.tcounts = np.bincount(cls.tcodes_orig, minlength=nt)
    return cls


def _numeric_column(c, o: pd.Series, out: pd.DataFrame, cls: _Classes, notes: list) -> ColumnSummary:
    """A numeric QI's summary: each class's interval on the original values (means and empty cells read)."""
    first, gid, n_cls, rows = cls.first, cls.gid, cls.n_cls, cls.rows
    ov = float_values(o)  # a date / time as epoch nanoseconds
    key = np.where(np.isnan(ov), np.inf, ov)
    vals, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    st, u_before, h_bits = _code_stats(inv, cls.tcodes_orig, cls.tcounts, True, bool(np.isnan(ov).any()))
    vcounts, dom = st.counts, st.domain
    plain = c in out.columns
    if plain:
        lo, hi = parse_numeric_cells(out[c])
        plain = bool(np.all((lo == hi) | np.isnan(lo)))
    else:
        lo, hi = float_values(out[f"{c}_min"]), float_values(out[f"{c}_max"])
    lo, hi = lo[first], hi[first]
    a, b = interval_positions(vals, np.where(np.isnan(lo), np.inf, lo), np.where(np.isnan(hi), np.inf, hi), np)
    empty = b <= a
    if plain and empty.any() and rows is not None:  # means: each class's interval of original rows
        g = pd.DataFrame({"g": gid, "v": ov[np.asarray(rows)]}).groupby("g")["v"]
        lo, hi = g.min().reindex(range(n_cls)).to_numpy(), g.max().reindex(range(n_cls)).to_numpy()
        a, b = interval_positions(vals, np.where(np.isnan(lo), np.inf, lo),
                                  np.where(np.isnan(hi), np.inf, hi), np)
        empty = b <= a
        notes.append(f"column '{c}': numbers read as class means; each class stands for the interval "
                     f"of its original rows")
    if empty.any():  # cells that hold no original value: the nearest original value
        mid = np.where(np.isnan(lo), np.inf, (lo + hi) / 2)
        i_hi = np.clip(np.searchsorted(vals, mid), 0, len(vals) - 1)
        i_lo = np.clip(i_hi - 1, 0, len(vals) - 1)
        near = np.where(np.abs(vals[i_lo] - mid) <= np.abs(vals[i_hi] - mid), i_lo, i_hi)
        a, b = np.where(empty, near, a), np.where(empty, near + 1, b)
        notes.append(f"column '{c}': {int(empty.sum())} class cell(s) hold no original value and are "
                     f"read as the nearest original value")
    gt_h = interval_entropy_at(vcounts, a, b)
    pv = vals[np.isfinite(vals)]
    rng = float(pv[-1] - pv[0]) if pv.shape[0] > 1 else 0.0
    joint_before = joint_after = None
    if cls.thist is not None:
        joint_before = domain_joint(dom.bin_of(inv), cls.tcodes_orig, dom.n_bins, cls.nt, np).astype(np.float64)
        joint_after = interval_joint(a, b, dom, cls.thist, np)
    return ColumnSummary(c, "numeric", np.zeros(0, dtype=np.int64), u_before, h_bits,
                         lo=lo, hi=hi, dom_range=rng, gt_h=gt_h, domain_counts=dom.bin_counts,
                         joint_before=joint_before, joint_after=joint_after, binned=dom.binned)


def _categorical_column(c, o: pd.Series, out: pd.DataFrame, cls: _Classes, hierarchy) -> ColumnSummary:
    """A categorical QI's summary: each class's set of original categories (values, ``|`` sets, ``*``,
    hierarchy labels)."""
    codes, cats = pd.factorize(o, use_na_sentinel=False)
    ncat = len(cats)
    st, u_before, h_bits = _code_stats(codes.astype(np.int64), cls.tcodes_orig, cls.tcounts)
    ccounts = st.counts
    index = {cell_key(v): i for i, v in enumerate(cats)}  # a missing category: key None
    nodes = hierarchy_node_members(hierarchy, index)
    cell_inv, cells = pd.factorize(out[c].iloc[cls.first], use_na_sentinel=False)
    cell_sets = category_sets(cells, index, nodes, c)
    sets, sid = np.unique(cell_sets, axis=0, return_inverse=True)
    set_id = sid.reshape(-1)[cell_inv]
    joint_before = joint_after = None
    if cls.thist is not None:
        joint_before = domain_joint(codes.astype(np.int64), cls.tcodes_orig, ncat, cls.nt, np).astype(np.float64)
        joint_after = set_joint(set_id, sets, ccounts, cls.thist, np)
    return ColumnSummary(c, "categorical", ccounts, u_before, h_bits, set_id=set_id, sets=sets,
                         domain_counts=ccounts, joint_before=joint_before, joint_after=joint_after)


def output_metrics(out: pd.DataFrame, original: pd.DataFrame, quasi_identifiers, target: str | None = None,
                   kinds: dict | None = None, k: int | None = None, hierarchies: dict | None = None) -> dict:
    """Every section-7 metric of a user's anonymized table against its original (``gpuanon check --original``).

    ``kinds`` defaults to the original columns' dtypes (numbers: numeric; anything else:
    categorical); ``hierarchies`` maps a column to the hierarchy whose node labels it uses.

    >>> import pandas as pd
    >>> orig = pd.DataFrame({"age": [20, 30, 40, 50], "y": [0, 0, 1, 1]})
    >>> out = pd.DataFrame({"age": ["20-30", "20-30", "40-50", "40-50"], "y": [0, 0, 1, 1]})
    >>> round(output_metrics(out, orig, ["age"], target="y")["entropy_loss"], 6)
    0.0
    """
    if kinds is None:
        kinds = {c: "numeric" if (is_time(original[c]) or pd.api.types.is_numeric_dtype(original[c])
                                  and not pd.api.types.is_bool_dtype(original[c])) else "categorical"
                 for c in quasi_identifiers}
    summary = summary_from_output(out, original, list(quasi_identifiers), kinds, target=target,
                                  hierarchies=hierarchies)
    met = compute_metrics(summary, k=k)
    if summary.notes:
        met["notes"] = list(summary.notes)
    return met


def _code_stats(codes, tcodes, target_counts, numeric: bool = False, has_missing: bool = False):
    """Whole-table statistics of a column of dense codes ``0..m-1`` (every code present; ``tcodes``:
    the target's codes): the one-chunk reduction of :mod:`gpuanon.metrics.columns`, as one process's
    anonymizer computes them. Returns ``(ColumnStats, U(T | X), H(X) in bits)``, the two numbers as
    floats (``U``: None without a target or rows, 0 for a target of one value)."""
    nt = len(target_counts) if target_counts is not None else 1
    vt = value_target_chunk(codes, tcodes, nt, np)
    vt = vt._replace(whole=(*vt.whole[:3], has_missing, None))
    st = stats_from_value_targets(vt, nt, target_counts, numeric, np)
    u = None
    if target_counts is not None and codes.shape[0]:
        u = 0.0 if st.u_raw is None else float(st.u_raw)
    return st, u, float(st.h_x)


def ncp_per_column(df: pd.DataFrame, qi, labels, kinds: dict, categorical: str = "set") -> dict:
    """Mean NCP of every QI for any partitioning of ``df`` (labels per row, -1: suppressed).

    ``categorical='set'`` is the contract's definition (0 for one value, else covered / domain);
    ``'arx'`` is ``(covered - 1) / (domain - 1)``.
    """
    labels = np.asarray(labels)
    keep = labels >= 0
    out = {}
    lab = pd.factorize(labels[keep])[0]
    sizes = np.bincount(lab)
    for c in qi:
        if kinds[c] == "numeric":
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
            rng = np.nanmax(v) - np.nanmin(v) if np.isfinite(v).any() else 0.0
            g = pd.DataFrame({"g": lab, "v": v[keep]}).groupby("g")["v"]
            width = (g.max() - g.min()).to_numpy()
            pen = np.where(np.isnan(width), 0.0, width / rng) if rng > 0 else np.zeros(len(sizes))
        else:
            dom = max(int(pd.Series(df[c]).nunique(dropna=False)), 1)
            codes = pd.factorize(df[c].to_numpy()[keep], use_na_sentinel=False)[0].astype(np.int64)
            distinct = np.bincount(np.unique(lab * (codes.max() + 1) + codes) // (codes.max() + 1),
                                   minlength=len(sizes))
            if categorical == "arx":
                pen = (distinct - 1) / (dom - 1) if dom > 1 else np.zeros(len(sizes))
            else:
                pen = np.where(distinct > 1, distinct / dom, 0.0)
        out[c] = float((pen * sizes).sum() / max(sizes.sum(), 1))
    return out


def ncp(df: pd.DataFrame, qi, labels, kinds: dict, weights=None, categorical: str = "set") -> float:
    """Table NCP of a partitioning: mean over rows of the weighted mean over QIs."""
    per = ncp_per_column(df, qi, labels, kinds, categorical)
    w = np.ones(len(qi)) if weights is None else np.asarray([weights.get(c, 0.0) for c in qi], dtype=float)
    w = w / w.sum()
    return float(sum(wi * per[c] for wi, c in zip(w, qi)))
