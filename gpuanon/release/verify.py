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

from ..backend import get_namespace, to_device, to_host, to_scalar
from ..errors import shown
from ..table.exact import is_decimal, is_time, parse_exact, time_ns, times_ns

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
    sensitive_missing: int = 0  # rows with a missing sensitive value (counted toward no l)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {"ok": self.ok, "n_rows": self.n_rows, "n_classes": self.n_classes, "k": self.k,
                "l": self.l, "l_entropy": self.l_entropy, "t": self.t, "class_size": self.size_stats,
                "sensitive_missing": self.sensitive_missing, "failures": list(self.failures)}


_M1, _M2, _GOLD = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0x9E3779B97F4A7C15


def splitmix64(z, xp=np):
    """splitmix64's finalizer, elementwise on uint64 (arithmetic wraps): the hash of a tuple of cells
    (here and in the cluster run, ``gpuanon.distributed.worker``)."""
    z = z + xp.uint64(_GOLD)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(_M1)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(_M2)
    return z ^ (z >> xp.uint64(31))


def class_ids(out: pd.DataFrame, qi_columns) -> tuple[np.ndarray, int]:
    """Dense id of every row's generalized QI tuple, numbered by first appearance.

    A pandas group-by over the published columns (missing values compare equal, categorical
    columns by their values): the path for users' files (``gpuanon check``).
    """
    n = len(out)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    cols = list(qi_columns)
    gid = _coded_ids(out, cols)
    if gid is None:
        frame = out[cols]
        gid = frame.groupby(cols, dropna=False, sort=False, observed=True).ngroup().to_numpy(dtype=np.int64)
    return gid, int(gid.max()) + 1


def _coded_ids(out: pd.DataFrame, cols: list):
    """:func:`class_ids` of columns that are all categorical or plain numbers, without the group-by's
    machinery: each column's codes (a categorical's own; a number column factorized, missing values
    one code) folded into a dense tuple id column by column (a loop over columns), numbered by first
    appearance as the group-by numbers them. None for other columns."""
    series = [out[c] for c in cols]
    if not all(isinstance(s.dtype, pd.CategoricalDtype) or (isinstance(s.dtype, np.dtype) and s.dtype.kind in "iuf")
               for s in series):
        return None
    gid, bound = None, 1  # the tuple ids so far lie in [0, bound)
    for s in series:
        if isinstance(s.dtype, pd.CategoricalDtype):
            codes, m = s.cat.codes.to_numpy().astype(np.int64) + 1, len(s.cat.categories) + 1  # missing: 0
        else:
            codes, uniq = pd.factorize(s, sort=False, use_na_sentinel=False)
            codes, m = codes.astype(np.int64, copy=False), len(uniq)
        if gid is not None and bound * m >= 2**62:  # renumber densely only when the next column would not fit
            gid, bound = _first_appearance(gid)
        gid, bound = (codes, m) if gid is None else (gid * m + codes, bound * m)
    return _first_appearance(gid)[0]


def _first_appearance(ids):
    """``(dense ids numbered by first appearance, their count)`` of an int64 id column."""
    codes, uniq = pd.factorize(ids, sort=False)
    return codes.astype(np.int64, copy=False), max(len(uniq), 1)


def _cell_ids(cells, xp):
    """Dense id of every row's tuple of encoded cells (uint64 per row per column), exact.

    Rows are grouped by a 64-bit hash of the tuple (one device sort), then every column is checked
    to be constant inside every group; on a hash collision (never seen in practice) the rows are
    grouped by a lexicographic sort of all columns instead.
    """
    n = int(cells[0].shape[0]) if cells else 0
    if n == 0:
        return xp.zeros(0, dtype=xp.int64), 0
    h = xp.full(n, 0x12345678, dtype=xp.uint64)
    for j, c in enumerate(cells):
        h = splitmix64(h ^ splitmix64(c + xp.uint64(j), xp), xp)
    order = xp.argsort(h)
    hs = h[order]
    new = xp.ones(n, dtype=bool)
    new[1:] = hs[1:] != hs[:-1]
    starts = xp.nonzero(new)[0]
    gs = xp.cumsum(new.astype(xp.int64)) - 1
    for c in cells:
        cs = c[order]
        if to_scalar((cs != cs[starts][gs]).any()):
            order = xp.lexsort(xp.stack([c for c in reversed(cells)]))
            diff = xp.zeros(n, dtype=bool)
            diff[0] = True
            for c2 in cells:
                s2 = c2[order]
                diff[1:] |= s2[1:] != s2[:-1]
            gs = xp.cumsum(diff.astype(xp.int64)) - 1
            break
    gid = xp.empty(n, dtype=xp.int64)
    gid[order] = gs
    return gid, int(to_scalar(gs[-1])) + 1


def _counts(idx, length: int, xp, weights=None):
    """``bincount(idx, weights, minlength=length)`` as exact int64 (integer weights), ``length`` bins.

    The verifier's own copy (it shares no code with what forms the classes): on NumPy, ``bincount``;
    on a device, one scatter-add into a zeroed array, which reads nothing back (``cupy.bincount``
    reads the device twice to size its output).
    """
    if xp is np:
        out = np.bincount(idx, weights=weights, minlength=length)
        if out.shape[0] != length:
            raise ValueError(f"idx: values must lie in [0, {length})")
        return out.astype(np.int64) if weights is not None else out
    out = xp.zeros(length, dtype=xp.int64)
    xp.add.at(out, idx, 1 if weights is None else weights.astype(xp.int64))
    return out


def _pairs(pair, n_pairs: int, xp):
    """The distinct (class, sensitive value) pairs ``pair`` (``class * m + code``, below ``n_pairs``)
    in increasing order and their rows: ``unique`` with counts; on the CPU, when there are no more
    possible pairs than a few per row, one count of every pair (no sort of the rows), the same arrays."""
    if xp is np and n_pairs <= 4 * pair.shape[0]:
        cnt = np.bincount(pair, minlength=n_pairs)
        u = np.flatnonzero(cnt)
        return u, cnt[u]
    return xp.unique(pair, return_counts=True)


def _distances(gid, n_cls, sa_codes, q, kind, xp=np, ordered_chunk=1 << 24):
    m = q.shape[0]
    counts = _counts(gid, n_cls, xp).astype(xp.float64)
    if kind in ("equal", "kl"):
        u, cnt = _pairs(gid * m + sa_codes, n_cls * m, xp)
        g, v = u // m, u % m
        p = cnt / counts[g]
        if kind == "equal":
            # 0.5 * (sum over present |p - q| + sum over absent q)
            present_q = xp.bincount(g, weights=q[v], minlength=n_cls)
            diff = xp.bincount(g, weights=xp.abs(p - q[v]), minlength=n_cls)
            return 0.5 * (diff + (1.0 - present_q))
        return xp.bincount(g, weights=p * xp.log(p / q[v]), minlength=n_cls)
    # ordered: cumulative differences over the sorted values, classes in chunks
    out = xp.empty(n_cls)
    per = max(1, ordered_chunk // max(m, 1))
    order = xp.argsort(gid)
    sg = gid[order]
    bounds = [int(b) for b in to_host(xp.searchsorted(sg, xp.arange(0, n_cls + per, per)))]
    for i, s0 in enumerate(range(0, n_cls, per)):  # a loop over chunks of classes, not classes
        s1 = min(n_cls, s0 + per)
        r0, r1 = bounds[i], bounds[i + 1]
        h = _counts((sg[r0:r1] - s0) * m + sa_codes[order[r0:r1]], (s1 - s0) * m, xp)
        h = h.reshape(s1 - s0, m) / counts[s0:s1, None]
        out[s0:s1] = xp.abs(xp.cumsum(h - q[None, :], axis=1)).sum(axis=1) / max(m - 1, 1)
    return out


def _check(gid, n_cls: int, n: int, sa_codes, q, sensitive, *, k, l, l_kind, c, t, t_distance, xp,
           failures: list, sa_missing: int | None = None) -> VerificationResult:
    """Class sizes, distinct sensitive values, entropies and distances from row class ids.

    ``sa_missing``: the code of a missing sensitive value, which counts toward no kind of l (distinct,
    entropy over the other values, recursive); t-closeness keeps it as a value of its own.
    """
    sizes = _counts(gid, n_cls, xp) if n else xp.zeros(0, dtype=xp.int64)
    ach_k = 0
    stats = {}
    if n_cls:
        sh = to_host(sizes)  # one integer per class, for the size statistics
        ach_k = int(sh.min())
        stats = {"min": int(sh.min()), "median": float(np.median(sh)), "max": int(sh.max()),
                 "mean": float(sh.mean())}
    if k is not None and n and ach_k < k:
        failures.append(f"k-anonymity: smallest class has {ach_k} row(s) < k = {k}")
    ach_l = ach_le = ach_t = None
    n_sa_missing = 0
    if sa_codes is not None and n:
        m = int(q.shape[0])
        pair_u, pair_cnt = _pairs(gid * m + sa_codes, n_cls * m, xp)
        g = pair_u // m
        if sa_missing is None:
            known_size = sizes
            distinct = _counts(g, n_cls, xp)
        else:  # pairs of a missing value: no l counts them
            known = (pair_u % m) != sa_missing
            pair_cnt = xp.where(known, pair_cnt, 0)
            known_size = _counts(g, n_cls, xp, weights=pair_cnt)
            distinct = _counts(g, n_cls, xp, weights=known.astype(xp.int64))
            n_sa_missing = n - int(to_scalar(pair_cnt.sum()))
        ach_l = int(to_scalar(distinct.min()))
        p = pair_cnt / xp.maximum(known_size[g], 1)
        ent = xp.bincount(g, weights=-p * xp.log(xp.where(p > 0, p, 1.0)), minlength=n_cls)
        ent_min = float(to_scalar(ent.min()))
        ach_le = float(np.exp(ent_min))
        dist = _distances(gid, n_cls, sa_codes, q, t_distance, xp)
        ach_t = float(to_scalar(dist.max()))
        if l:
            if l_kind == "distinct" and ach_l < l:
                failures.append(f"l-diversity: a class has {ach_l} distinct '{sensitive}' value(s) < l = {l}")
            elif l_kind == "entropy" and ent_min < np.log(l) - TOLERANCE:
                failures.append(f"entropy l-diversity: a class has exp(entropy) = {ach_le:.4f} < l = {l}")
            elif l_kind == "recursive":
                order = xp.lexsort(xp.stack([-pair_cnt, g]))
                sg, sc = g[order], pair_cnt[order]
                ln = sg.shape[0]
                idx = xp.arange(ln)
                rank = idx - xp.searchsorted(sg, sg, side="left")  # position inside the class's run
                top = _counts(sg, n_cls, xp, weights=xp.where(rank == 0, sc, 0))
                tail = _counts(sg, n_cls, xp, weights=xp.where(rank >= l - 1, sc, 0))
                bad = int(to_scalar((~(top < c * tail)).sum()))
                if bad:
                    failures.append(f"recursive ({c}, {l})-diversity fails for {bad} class(es)")
        if t is not None and ach_t > t + TOLERANCE:
            failures.append(f"t-closeness ({t_distance}): a class is at distance {ach_t:.6f} > t = {t}")
    elif (l or t is not None) and n:
        failures.append("l-diversity / t-closeness requested but no sensitive column given")
    return VerificationResult(n, int(n_cls), ach_k, ach_l, ach_le, ach_t, stats, failures, n_sa_missing)


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
    failures: list = []
    sa_codes = q = sa_missing = None
    if sensitive is not None and n:
        sa = out[sensitive]
        ref = sa if reference is None else pd.Series(reference)
        if sensitive_ordered is None:
            sensitive_ordered = bool(pd.api.types.is_numeric_dtype(ref) and not pd.api.types.is_bool_dtype(ref))
        # the known values, then one code for a missing value (every kind of missing alike), last
        ref_values = _value_codes(ref)
        support = ref_values[1] if ref_values is not None else pd.unique(ref[ref.notna()])
        if sensitive_ordered or t_distance == "ordered":
            support = pd.Index(support).sort_values().to_numpy()
        index = pd.Index(support)
        ref_miss, ref_codes = _missing_and_codes(ref, ref_values, index)
        sa_miss, sa_codes = (ref_miss, ref_codes) if sa is ref else _missing_and_codes(sa, _value_codes(sa), index)
        has_missing = bool(ref_miss.any() or sa_miss.any())
        sa_missing = len(support) if has_missing else None
        m = len(support) + int(has_missing)
        ref_codes = np.where(ref_miss, m - 1, ref_codes)
        sa_codes = np.where(sa_miss, m - 1, sa_codes)
        if (sa_codes < 0).any():
            bad = sa[sa_codes < 0].iloc[0]
            failures.append(f"sensitive value {shown(bad)} is not in the reference table")
            sa_codes = np.where(sa_codes < 0, 0, sa_codes)
        q = np.bincount(ref_codes, minlength=m) / len(ref)
        sa_codes = sa_codes.astype(np.int64)
    return _check(gid, n_cls, n, sa_codes, q, sensitive, k=k, l=l, l_kind=l_kind, c=c, t=t,
                  t_distance=t_distance, xp=np, failures=failures, sa_missing=sa_missing)


def _value_codes(col: pd.Series):
    """``(codes, distinct present values)`` of a text (object) column in order of first appearance
    (missing: -1), one hash pass; None for other columns."""
    if col.dtype != object:
        return None
    codes, uniq = pd.factorize(col, sort=False, use_na_sentinel=True)
    return codes, np.asarray(uniq, dtype=object)


def _missing_and_codes(col: pd.Series, coded, index: pd.Index):
    """Which rows of ``col`` are missing, and every row's position in ``index`` (-1: not there):
    from its distinct values (``coded``: :func:`_value_codes`) when it has them."""
    if coded is None:
        return col.isna().to_numpy(), index.get_indexer(col)
    codes, uniq = coded
    pos = np.append(index.get_indexer(pd.Index(uniq, dtype=object)), -1)  # code -1 (missing) takes the last
    return codes < 0, pos[codes]


def verify_encoded(codes, dictionaries, sa_codes=None, reference_distribution=None, *, k: int | None = None,
                   l: int = 0, l_kind: str = "distinct", c: float = 1.0, t: float | None = None,
                   t_distance: str = "equal", sensitive: str = "sensitive", sa_missing: int | None = None,
                   xp=None) -> VerificationResult:
    """Verify a published table held in dictionary-encoded form, on the device that holds it.

    Each published QI column ``j`` is a dictionary of canonical cells (``dictionaries[j]``: one
    uint64 per distinct cell: a numeric interval as its two order-preserving 32-bit keys, a set
    of categories as its bitmask or set id, a hierarchy node as its id, a number as its bits)
    and the rows' indices into it (``codes[j]``, or one array shared by every column); the cell
    text is made from the same dictionary by a separate, tested bijection. Rows are grouped by
    their tuple of cells, here, with no knowledge of how the anonymizer formed its classes.

    ``sa_codes`` are the rows' sensitive codes ``0..m-1`` (ordered codes for the ordered EMD);
    ``reference_distribution`` the whole table's distribution over them (length ``m``);
    ``sa_missing`` the code of a missing value (counted by t-closeness, by no kind of l).
    """
    if xp is None:
        xp = get_namespace(dictionaries[0]) if dictionaries else np
    shared = not isinstance(codes, (list, tuple))
    if shared and dictionaries:
        # every column indexed by the same codes: a row's tuple of cells is its code's tuple, so
        # the tuples are grouped once per code, and rows take their code's group (exactly the
        # grouping of the rows' own tuples; groups no row uses are dropped)
        n = int(codes.shape[0])
        entries = [xp.asarray(d).astype(xp.uint64, copy=False) for d in dictionaries]
        code_gid, n_code_groups = _cell_ids(entries, xp)
        gid = code_gid[codes]
        used = _counts(gid, n_code_groups, xp) > 0
        dense = xp.cumsum(used.astype(xp.int64)) - 1
        gid = dense[gid]
        n_cls = int(to_scalar(used.sum())) if n else 0
    else:
        cells = []
        for j, d in enumerate(dictionaries):
            cells.append(xp.asarray(d).astype(xp.uint64, copy=False)[codes[j]])
        n = int(cells[0].shape[0]) if cells else (0 if sa_codes is None else int(sa_codes.shape[0]))
        gid, n_cls = _cell_ids(cells, xp) if cells else (xp.zeros(n, dtype=xp.int64), int(n > 0))
        del cells
    q = None
    if sa_codes is not None:
        q = to_device(reference_distribution, xp).astype(xp.float64)
        sa_codes = sa_codes.astype(xp.int64)
    return _check(gid, n_cls, n, sa_codes, q, sensitive, k=k, l=l, l_kind=l_kind, c=c, t=t,
                  t_distance=t_distance, xp=xp, failures=[], sa_missing=sa_missing if sa_codes is not None else None)


def _exact_cells(cells: pd.Series, kind: str):
    """``(lo, hi)`` object arrays (Python ints; a time as epoch nanoseconds) of published cells,
    parsed exactly (one parse per distinct cell); None where missing or unreadable (``bad``)."""
    codes, uniq = pd.factorize(cells, use_na_sentinel=True)
    lo_u = np.empty(len(uniq) + 1, dtype=object)
    hi_u = np.empty(len(uniq) + 1, dtype=object)
    bad = np.zeros(len(uniq) + 1, dtype=bool)
    for i, text in enumerate(uniq):  # a loop over distinct cells, not rows
        try:
            a, b = parse_exact(text, kind)
            lo_u[i], hi_u[i] = (time_ns(a), time_ns(b)) if kind == "time" else (a, b)
        except (ValueError, TypeError):
            bad[i] = True
    return lo_u[codes], hi_u[codes], bad[codes]


def _exact_originals(s: pd.Series, kind: str) -> np.ndarray:
    """Original values as Python ints (a time as epoch nanoseconds), None where missing."""
    if kind == "time":
        return times_ns(s)[0]
    vals = s.to_numpy(dtype=object, na_value=None).copy()
    vals[s.isna().to_numpy()] = None
    return vals


def cells_inside(out: pd.DataFrame, original: pd.DataFrame, quasi_identifiers) -> dict:
    """Row by row (the same rows in the same order): for every integer, decimal and date / time QI, how many
    original values lie outside their published cell (``lo-hi``, ``[lo, hi]``, ``lo..hi``, a single
    value, or the ``<col>_min`` / ``<col>_max`` pair), compared exactly (integers as Python ints, decimals
    as ``Decimal``, times in nanoseconds). A missing original must be published missing. A column of single values
    that differ from the originals (or of floats for an integer column) is a ``mean`` column, and a
    column holding a cell that is no integer or interval (a set: a categorical QI) is no interval
    column: neither is checked (``None``).

    >>> orig = pd.DataFrame({"id": [2**63 + 1, 2**63 + 9]}, dtype="uint64")
    >>> cells_inside(pd.DataFrame({"id": ["9223372036854775809-9223372036854775817"] * 2}), orig, ["id"])
    {'id': 0}
    >>> cells_inside(pd.DataFrame({"id": ["9223372036854775808-9223372036854775816"] * 2}), orig, ["id"])
    {'id': 1}
    """
    if len(out) != len(original):
        raise ValueError(f"the tables have {len(out)} and {len(original)} rows: cells are compared row by row")
    res: dict = {}
    for c in quasi_identifiers:  # a loop over columns
        o = original[c]
        time, dec = is_time(o), is_decimal(o)
        integer = pd.api.types.is_integer_dtype(o.dtype) and not pd.api.types.is_bool_dtype(o.dtype)
        if not (time or dec or integer):
            continue
        kind = "time" if time else "decimal" if dec else "int"
        v = _exact_originals(o, kind)
        if c in out.columns:
            cell = out[c]
            if pd.api.types.is_float_dtype(cell.dtype):  # class means of an integer column
                res[c] = None
                continue
            if is_time(cell) or pd.api.types.is_integer_dtype(cell.dtype):
                lo = hi = _exact_originals(cell, kind)
                bad = np.zeros(len(cell), dtype=bool)
            else:
                lo, hi, bad = _exact_cells(cell.astype(object).where(cell.notna(), None), kind)
            single = all(a is None or a == b for a, b in zip(lo, hi))
        elif f"{c}_min" in out.columns:
            lo, hi = _exact_originals(out[f"{c}_min"], kind), _exact_originals(out[f"{c}_max"], kind)
            bad, single = np.zeros(len(out), dtype=bool), False
        else:
            raise KeyError(f"quasi-identifier '{c}' is not in the anonymized table")
        o_miss = np.array([x is None for x in v])
        c_miss = np.array([x is None for x in lo]) & ~bad
        both = ~o_miss & ~c_miss & ~bad
        inside = np.zeros(len(v), dtype=bool)
        if both.any():
            inside[both] = (lo[both] <= v[both]) & (v[both] <= hi[both])
        outside = int((~(inside | (o_miss & c_miss))).sum())
        # not an interval column: a set of categories (declared categorical), or class means
        res[c] = None if bad.any() or (single and outside) else outside
    return res
