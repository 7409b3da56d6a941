"""Special uniques: SUDA2 minimal sample uniques and DIS-SUDA scores (SPEC 13, sdcMicro's ``suda2``).

A record's *minimal sample uniques* (MSUs) are the sets of quasi-identifiers on which it is unique in
the sample while no proper subset is. With M quasi-identifiers, its SUDA score is the sum over its MSUs
of (M - |m|)! (sdcMicro's ``original_scores = TRUE``, its default since 5.0.2: ``g_ab[i] =
prod_{j=i+1}^{M-1} (M - j)`` in ``src/Suda2.h``). DIS-SUDA spreads the file-level disclosure
probability Dis = U f / (U f + P (1 - f)) over the records by score: Q = 1 + (8 - M) / 20 and
DIS_i = 1 / (1 + (U / Dis - U) / (s_i^Q sum_{s_j > 0} s_j^-Q)) for s_i > 0, else 0, where U counts the
records unique on all M quasi-identifiers and P the records in classes of size 2.

Missing values (a negative code) follow sdcMicro: they are a value of their own for the class sizes
(U, P and other records' uniqueness), but a record's MSU never contains a column where it is missing.

The search is level by level over QI subsets, whole-array on NumPy or CuPy: rows with equal values on
all M columns are merged first (a record in a class of size >= 2 is unique on no subset); a subset S
is grouped from its tree parent S - {max S} by one value sort of packed (parent group, column, code,
row) keys, all subsets of a level at once; rows unique on the parent leave (they are unique on every
superset). A class is searched below only when it holds a row unique on all M columns and is *free*:
smaller than that row's class on every S - {c} (where it is not, no superset of S is an MSU of its
rows; MSUs are free and free sets are closed under subsets), which also skips a column that does not
split the class. A record unique on S is an MSU when it is still grouped on every S - {c}: a look-up
in a table of the previous level's kept class sizes, indexed by (row, rank of the subset), the ranks
of every S - {c} read from a small table of all subsets of the level. A row enters S = P + {a, b}
only where its class on the sibling P + {b} was kept (whole classes enter or none).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpuanon import backend
from gpuanon.errors import InputError, shown

#: Refuse when one level of the search could hold more (subset x row) pairs than this: the largest
#: C(M, k) x rows over the MSU sizes k searched (about 100 bytes of memory each at the peak; Adult's
#: 32,561 rows: up to 13 QIs in full, 14 with MSU size 4).
MAX_LEVEL = 60_000_000
#: Look the ranks of T - {c} up in a table of every k-subset where there are at most this many.
MAX_RANK_TABLE = 200_000
#: sdcMicro's DIS-SUDA bands (``print.suda2``): == 0, (0, 0.1], ..., (0.6, 0.7], > 0.7.
BANDS = ("0", "(0, 0.1]", "(0.1, 0.2]", "(0.2, 0.3]", "(0.3, 0.4]", "(0.4, 0.5]", "(0.5, 0.6]",
         "(0.6, 0.7]", "> 0.7")
# right-closed bands with R's breaks: cut(x, c(-1, seq(0, 0.7, 0.1) + .Machine$double.eps, Inf))
_EDGES = np.minimum(np.arange(8) * 0.1, 0.7) + np.finfo(float).eps  # seq() stops at 0.7


@dataclass
class SudaResult:
    """SUDA2 / DIS-SUDA of a table; per-record arrays are NumPy, one entry per input row."""

    score: np.ndarray          # SUDA score: sum over the record's MSUs of (M - |m|)!
    dis_score: np.ndarray      # DIS-SUDA score
    msu_count: np.ndarray      # number of MSUs of the record
    msu_min_size: np.ndarray   # size of its smallest MSU (0: none)
    contributions: dict        # QI name -> share of the total score from the MSUs containing it
    n_records: int
    n_qis: int
    n_unique: int              # U: records unique on all M QIs
    n_pairs: int               # P: records in classes of size 2 on all M QIs
    dis: float | None          # Dis (None when U = P = 0)
    max_size: int              # largest MSU size searched
    sampling_fraction: float
    msu_by_size: list = field(default_factory=list)  # MSU count of size 1 .. max_size

    def histogram(self) -> dict:
        """Records per DIS-SUDA band (sdcMicro's ``print.suda2``: == 0, (0, 0.1], ..., > 0.7)."""
        counts = np.bincount(np.searchsorted(_EDGES, self.dis_score, side="left"), minlength=9)
        return {band: int(c) for band, c in zip(BANDS, counts)}

    def to_dict(self, per_record: bool = False) -> dict:
        """Strict-JSON summary (per-record arrays only with ``per_record=True``)."""
        out = {
            "n_records": self.n_records, "n_qis": self.n_qis, "max_size": self.max_size,
            "sampling_fraction": self.sampling_fraction, "n_unique": self.n_unique,
            "n_pairs": self.n_pairs, "dis": self.dis,
            "records_with_msu": int(np.count_nonzero(self.msu_count)),
            "msu_total": int(self.msu_count.sum()), "msu_by_size": list(self.msu_by_size),
            "score_total": float(self.score.sum()),
            "score_max": float(self.score.max()) if self.n_records else 0.0,
            "dis_max": float(self.dis_score.max()) if self.n_records else 0.0,
            "dis_mean": float(self.dis_score.mean()) if self.n_records else 0.0,
            "histogram": self.histogram(), "contributions": dict(self.contributions),
        }
        if per_record:
            out["per_record"] = {
                "score": self.score.tolist(), "dis_score": self.dis_score.tolist(),
                "msu_count": self.msu_count.tolist(), "msu_min_size": self.msu_min_size.tolist()}
        return out


def _check(codes, max_size, sampling_fraction, names) -> tuple[int, int, int]:
    if getattr(codes, "ndim", None) != 2 or codes.dtype.kind not in "iu":
        raise InputError("SUDA2 needs a 2-D integer array of category codes (rows x QIs); "
                         "use suda2_frame for a table")
    n, m = (int(s) for s in codes.shape)
    if m < 1:
        raise InputError("SUDA2 needs at least one quasi-identifier (--qi)")
    if names is not None and len(names) != m:
        raise InputError(f"SUDA2: {len(names)} names for {m} quasi-identifier columns")
    if not isinstance(sampling_fraction, (int, float)) or not 0 < sampling_fraction <= 1:
        raise InputError(f"SUDA2 sampling fraction {shown(sampling_fraction)} is outside (0, 1]; "
                         "give --sampling-fraction F with 0 < F <= 1")
    if max_size is None:
        size = m
    elif isinstance(max_size, (int, np.integer)) and not isinstance(max_size, bool) and max_size >= 1:
        size = min(int(max_size), m)
    else:
        raise InputError(f"--suda-max-size must be a whole number >= 1, got {shown(max_size)}")
    if m > 62:
        raise InputError(f"SUDA2 handles at most 62 quasi-identifiers, got {m}; use fewer --qi")
    work = max(math.comb(m, k) for k in range(1, size + 1)) * max(n, 1)
    if work > MAX_LEVEL:
        fit = _fitting_size(m, n)
        hint = f"give --suda-max-size {fit} or fewer --qi" if fit else "use fewer rows or --qi"
        raise InputError(
            f"SUDA2 on {m} quasi-identifiers and {n:,} rows up to MSU size {size} would group "
            f"{work:,} (subset x row) pairs in one level, more than {MAX_LEVEL:,}: {hint}")
    return n, m, size


def _fitting_size(m: int, n: int) -> int:
    size = 0
    while size < m and math.comb(m, size + 1) * max(n, 1) <= MAX_LEVEL:
        size += 1
    return size


def _runs(xp, keys):
    """Sort ``keys``: (order, run id of each sorted key, start of each run)."""
    order = xp.argsort(keys)
    ks = keys[order]
    new = xp.ones(ks.shape[0], dtype=bool)
    new[1:] = ks[1:] != ks[:-1]
    rid = xp.cumsum(new) - 1
    starts = xp.flatnonzero(new)
    return order, rid, starts


def _sorted_pairs(xp, keys, rows, row_bits):
    """(key, row) pairs sorted by key: one value sort of key << row_bits | row where that fits in 63
    bits (NumPy's SIMD sort, CuPy's radix sort: several times faster than an argsort), else an
    argsort."""
    if (backend.to_scalar(keys.max()) + 1) << row_bits < 2**62:
        packed = xp.sort((keys << row_bits) | rows)
        return packed >> row_bits, packed & ((1 << row_bits) - 1)
    order = xp.argsort(keys)
    return keys[order], rows[order]


def _larger_on_all(xp, table, mask, row, m, comb, stride, size):
    """Whether row's class is larger than ``size`` on every mask - {c}, c in mask below its highest
    bit (the tree parent mask - {max} is the caller's), ``table`` holding at row x stride + rank the
    size of the row's class on each kept subset one smaller (0: unique there or not kept). Ranks
    number the k-subsets: sum over the set bits b of C(b, j_b), j_b = 1, 2, ... the bit's place;
    without c, the bits above c move down one place: rank = sum_{b < c} C(b, j_b) +
    sum_{b > c} C(b, j_b - 1)."""
    seen = xp.zeros(mask.shape[0], dtype=xp.int64)
    bits, low, high = [], [], []
    for c in range(m):
        bit = (mask >> c) & 1
        seen += bit
        bits.append(bit == 1)
        low.append(bit * comb[c][seen])
        high.append(bit * comb[c][xp.maximum(seen - 1, 0)])
    above = [None] * m
    acc = xp.zeros(mask.shape[0], dtype=xp.int64)
    for c in reversed(range(m)):
        above[c] = acc
        acc = acc + high[c]
    top = xp.zeros(mask.shape[0], dtype=xp.int64)
    for c in range(m):
        top = xp.where(bits[c], c, top)
    ok = xp.ones(mask.shape[0], dtype=bool)
    below = xp.zeros(mask.shape[0], dtype=xp.int64)
    for c in range(m):
        check = bits[c] & (top != c)
        ok &= ~check | (table[row * stride + xp.where(check, below + above[c], 0)] > size)
        below = below + low[c]
    return ok


def _drop_ranks(m, k):
    """(C(m, k), k - 1) table: for the k-subset of rank t, the ranks of t - {c} for its columns c
    below the highest, ascending (ranks as in :func:`_larger_on_all`)."""
    sets = np.array(list(itertools.combinations(range(m), k)), dtype=np.int64).reshape(-1, k)
    comb = np.array([[math.comb(c, j) for j in range(k + 1)] for c in range(m)], dtype=np.int64)
    rank = comb[sets, np.arange(1, k + 1)].sum(axis=1)
    out = np.empty((sets.shape[0], k - 1), dtype=np.int64)
    for j in range(k - 1):
        rest = np.delete(sets, j, axis=1)
        out[rank, j] = comb[rest, np.arange(1, k)].sum(axis=1)
    return out


def _larger_on_rest(xp, ctx, table, rank, mask, row, k, size):
    """:func:`_larger_on_all` for the k-subsets of ranks ``rank`` (masks ``mask``): through a table
    of the ranks one smaller where every k-subset fits one, else bit by bit."""
    m, stride = ctx["m"], math.comb(ctx["m"], k - 1)
    if math.comb(m, k) > MAX_RANK_TABLE:
        return _larger_on_all(xp, table, mask, row, m, ctx["comb"], stride, size)
    if k not in ctx["drop"]:
        ctx["drop"][k] = backend.to_device(_drop_ranks(m, k), xp)
    drop, base = ctx["drop"][k], row * stride
    ok = xp.ones(row.shape[0], dtype=bool)
    for j in range(k - 1):
        ok &= table[base + drop[rank, j]] > size
    return ok


def _size_type(total):
    """Narrowest unsigned type that holds class sizes up to ``total``."""
    return next(t for t in (np.uint16, np.uint32, np.uint64) if total <= np.iinfo(t).max)


def _patterns(xp, codes):
    """Merge equal rows: (pattern of each row, weight per pattern, pattern codes >= 0 with 0 = missing)."""
    n, m = codes.shape
    shifted = xp.where(codes < 0, 0, codes.astype(xp.int64) + 1)
    gid = xp.zeros(n, dtype=xp.int64)
    for c in range(m):  # one dense ranking per column, never per row
        card = backend.to_scalar(shifted[:, c].max()) + 1
        order, rid, _ = _runs(xp, gid * card + shifted[:, c])
        gid = xp.empty_like(gid)
        gid[order] = rid
    g = backend.to_scalar(gid.max()) + 1 if n else 0
    weight = xp.bincount(gid, minlength=g)
    rep = xp.zeros(g, dtype=xp.int64)
    rep[gid] = xp.arange(n, dtype=xp.int64)
    return gid, weight, shifted[rep]


def suda2(codes, *, max_size=None, sampling_fraction=0.01, xp=None, names=None) -> SudaResult:
    """SUDA2 scores and DIS-SUDA of ``codes`` (rows x M QIs, integer codes, negative = missing).

    ``max_size`` caps the MSU size searched (default M; weights stay (M - |m|)!). ``xp`` is NumPy or
    CuPy (default: the module of ``codes``). ``names`` label the QIs in ``contributions``.
    """
    xp = backend.get_namespace(codes) if xp is None else xp
    if not backend.is_device_array(codes):
        codes = np.asarray(codes)
    n, m, size = _check(codes, max_size, sampling_fraction, names)
    names = [str(q) for q in (names if names is not None else range(m))]
    codes = backend.to_device(codes, xp)
    if n == 0:
        empty = xp.zeros(0, dtype=xp.int64)
        return _finish(xp, empty, empty, empty.astype(xp.float64), empty, empty, [0.0] * m,
                       [0] * size, names, n, m, size, sampling_fraction)
    gid, weight, pat = _patterns(xp, codes)
    score, count, min_size, contrib, by_size = _search(xp, pat, weight, m, size)
    return _finish(xp, gid, weight, score, count, min_size, contrib, by_size, names, n, m, size,
                   sampling_fraction)


def _search(xp, pat, weight, m, size):
    """MSUs of every pattern, level by level: (score, MSU count, smallest MSU size, per-column score
    sums, MSUs per size). Entries are (row, group) pairs of a level, sorted by group; a group is one
    class of one QI subset, with its subset's bit mask, rank and top column and its size (in rows)
    kept per group."""
    g = int(weight.shape[0])
    fact = [float(math.factorial(m - k)) for k in range(m + 1)]
    st = {"score": xp.zeros(g, dtype=xp.float64), "count": xp.zeros(g, dtype=xp.int64),
          "min_size": xp.zeros(g, dtype=xp.int64), "contrib": [0.0] * m, "by_size": []}
    missing_bits = xp.zeros(g, dtype=xp.int64)
    for c in range(m):
        missing_bits |= (pat[:, c] == 0).astype(xp.int64) << c
    cols = [xp.ascontiguousarray(pat[:, c]) for c in range(m)]
    is_one = weight == 1
    kmax = backend.to_scalar(pat.max()) + 1
    total = backend.to_scalar(weight.sum())
    ctx = {"xp": xp, "m": m, "g": g, "weight": weight, "is_one": is_one, "kmax": kmax, "drop": {}, "size_type": _size_type(total),
           "row_bits": max(g - 1, 1).bit_length(),
           "comb": [backend.to_device(np.array([math.comb(c, j) for j in range(m + 1)],
                                               dtype=np.int64), xp) for c in range(m)],
           "comb_k": [backend.to_device(np.array([math.comb(c, k) for c in range(m)],
                                                 dtype=np.int64), xp) for k in range(m + 1)]}
    # level 0: the empty set, one group of every pattern (a one-row table is unique on it)
    p_row = xp.arange(g if total >= 2 else 0, dtype=xp.int64)
    p_gid = xp.zeros(p_row.shape[0], dtype=xp.int64)
    p_top = xp.full(p_row.shape[0], -1, dtype=xp.int64)
    grp = {"mask": xp.zeros(1, dtype=xp.int64), "rank": xp.zeros(1, dtype=xp.int64),
           "top": xp.full(1, -1, dtype=xp.int64), "size": xp.full(1, total, dtype=xp.int64)}
    table = None
    for k in range(1, size + 1):
        if p_row.shape[0] == 0:
            break
        if int(grp["mask"].shape[0]) * m * kmax >= 2**62:
            raise InputError("SUDA2: too many categories for 64-bit keys; use fewer --qi "
                             "or a smaller --suda-max-size")
        idx = _extensions(xp, p_top, p_row, p_gid, grp, table, ctx, k)
        rows = xp.concatenate([p_row[i] for i in idx])
        keys = xp.concatenate([(p_gid[i] * m + c) * kmax + cols[c][p_row[i]]
                               for c, i in enumerate(idx)])
        if keys.shape[0] == 0:
            break
        ks, rows = _sorted_pairs(xp, keys, rows, ctx["row_bits"])
        start = xp.ones(ks.shape[0] + 1, dtype=bool)
        start[1:-1] = ks[1:] != ks[:-1]
        single = start[:-1] & start[1:]
        start = start[:-1]
        # MSU: unique here (grouped on the tree parent), grouped on every other T - {c}, no missing
        cand = xp.flatnonzero(single & is_one[rows])
        pair = ks[cand] // kmax
        t_row, t_pg, t_col = rows[cand], pair // m, pair % m
        t_mask = grp["mask"][t_pg] | (1 << t_col)
        ok = (missing_bits[t_row] & t_mask) == 0
        if k > 1:  # T - {top} and T - {second highest} passed in _extensions
            keep = xp.flatnonzero(ok)
            t_mask, t_row = t_mask[keep], t_row[keep]
            t_rank = grp["rank"][t_pg[keep]] + ctx["comb_k"][k][t_col[keep]]
            ok = _larger_on_rest(xp, ctx, table, t_rank, t_mask, t_row, k, 1)
        _tally(xp, st, t_mask[ok], t_row[ok], k, fact[k], m, g)
        if k == size:
            break
        p_row, p_gid, grp, table = _next_level(ctx, grp, table, ks, rows, start, k)
        p_top = grp["top"][p_gid]
    by_size = st["by_size"] + [0] * (size - len(st["by_size"]))
    return st["score"], st["count"], st["min_size"], st["contrib"], by_size


def _extensions(xp, p_top, p_row, p_gid, grp, table, ctx, k):
    """Per column c, the entries (row, S) of level k - 1 to extend to T = S + {c}: c above S's top
    column and the row's class on the sibling S - {top} + {c} kept (0 in ``table``: unique there, or
    a class not searched below). A class of T is whole or absent: its rows share their classes on
    every subset of T. Where the sibling's class is not kept, T is neither an MSU of the row (an MSU
    is grouped and free on every subset one smaller) nor kept itself (kept sets are closed under
    subsets), and the row makes no other row of T grouped (they would share that class)."""
    xp, m = ctx["xp"], ctx["m"]
    if k == 1:
        return [xp.flatnonzero(p_top < c) for c in range(m)]
    comb_k = ctx["comb_k"][k - 1]
    base = p_row * math.comb(m, k - 1) + grp["rank"][p_gid] - comb_k[p_top]
    out = []
    for c in range(m):
        i = xp.flatnonzero(p_top < c)
        out.append(i[table[base[i] + math.comb(c, k - 1)] > 0])
    return out


def _tally(xp, st, t_mask, t_row, k, weight, m, g):
    """Add the MSUs of size k (their masks and rows) to the scores and counts."""
    st["by_size"].append(int(t_row.shape[0]))
    if st["by_size"][-1]:
        hits = xp.bincount(t_row, minlength=g)
        st["score"] += weight * hits
        st["count"] += hits
        st["min_size"] = xp.where((st["min_size"] == 0) & (hits > 0), k, st["min_size"])
        shifts = xp.arange(m, dtype=xp.int64)[None, :]
        per_col = backend.to_host(((t_mask[:, None] >> shifts) & 1).sum(axis=0))
        st["contrib"] = [a + weight * float(b) for a, b in zip(st["contrib"], per_col)]


def _next_level(ctx, grp, table, ks, rows, start, k):
    """The groups of level k worth a search below them, with their rows: the classes of two or more
    rows that hold a row unique on all M columns and are *free*: smaller than the row's class on
    every T - {c}. Where the class on T equals that on T - {c}, no superset of T is an MSU of its
    rows (one unique on it is unique without c), and so neither is any superset of a subset whose
    class was dropped: MSUs are free sets, and free sets are closed under subsets. Also the table
    of the kept classes' sizes by (subset rank, unique row) for the next level's look-ups."""
    xp, m, kmax, is_one = ctx["xp"], ctx["m"], ctx["kmax"], ctx["is_one"]
    rid = xp.cumsum(start) - 1
    starts = xp.flatnonzero(start)
    n_runs = int(starts.shape[0])
    wsum = xp.cumsum(ctx["weight"][rows])
    ends = xp.concatenate([starts[1:], xp.full(1, rows.shape[0], dtype=xp.int64)]) - 1
    run_size = wsum[ends] - wsum[starts] + ctx["weight"][rows[starts]]
    rep = xp.full(n_runs, -1, dtype=xp.int64)  # a row unique on all M columns, where any
    ones = xp.flatnonzero(is_one[rows])
    rep[rid[ones]] = rows[ones]
    pair = ks[starts] // kmax
    run_pg, run_col = pair // m, pair % m
    keep_run = (rep >= 0) & (run_size >= 2) & (run_size < grp["size"][run_pg])
    if k > 1:
        sel = xp.flatnonzero(keep_run)
        mask = grp["mask"][run_pg[sel]] | (1 << run_col[sel])
        rank = grp["rank"][run_pg[sel]] + ctx["comb_k"][k][run_col[sel]]
        keep_run[sel] = _larger_on_rest(xp, ctx, table, rank, mask, rep[sel], k, run_size[sel])
    kr = xp.flatnonzero(keep_run)
    kept = xp.flatnonzero(keep_run[rid])
    pg, col = run_pg[kr], run_col[kr]
    nxt = {"mask": grp["mask"][pg] | (1 << col), "top": col,
           "rank": grp["rank"][pg] + ctx["comb_k"][k][col], "size": run_size[kr]}
    p_row = rows[kept]
    p_gid = (xp.cumsum(keep_run) - 1)[rid[kept]]
    # one row's entries side by side (its look-ups are close), sizes in the narrowest type
    table = xp.zeros(math.comb(m, k) * ctx["g"], dtype=ctx["size_type"])
    table[p_row * math.comb(m, k) + nxt["rank"][p_gid]] = nxt["size"][p_gid]
    return p_row, p_gid, nxt, table


def _finish(xp, gid, weight, score, count, min_size, contrib, by_size, names, n, m, size, f):
    n_unique = backend.to_scalar((weight == 1).sum()) if n else 0
    n_pairs = 2 * backend.to_scalar((weight == 2).sum()) if n else 0
    denom = n_unique * f + n_pairs * (1 - f)
    dis = n_unique * f / denom if denom > 0 else None
    rec_score = score[gid]
    q = 1 + (8 - m) / 20
    pos = rec_score > 0
    adj = backend.to_scalar((xp.where(pos, rec_score, 1.0) ** -q * pos).sum()) if n else 0.0
    if dis is None or adj == 0:
        dis_score = xp.zeros(n, dtype=xp.float64)
    else:
        ratio = (n_unique / dis - n_unique) / (xp.where(pos, rec_score, 1.0) ** q * adj)
        dis_score = xp.where(pos, 1.0 / (1.0 + ratio), 0.0)
    total = backend.to_scalar(score.sum()) if n else 0.0
    shares = {q_: (c / total if total else 0.0) for q_, c in zip(names, contrib)}
    return SudaResult(
        score=backend.to_host(rec_score), dis_score=backend.to_host(dis_score),
        msu_count=backend.to_host(count[gid]), msu_min_size=backend.to_host(min_size[gid]),
        contributions=shares, n_records=n, n_qis=m, n_unique=int(n_unique), n_pairs=int(n_pairs),
        dis=None if dis is None else float(dis), max_size=size, sampling_fraction=float(f),
        msu_by_size=[int(v) for v in by_size])


def suda2_frame(frame, quasi_identifiers, **kw) -> SudaResult:
    """:func:`suda2` on columns of a pandas (or cuDF) frame; a missing cell is sdcMicro's missing."""
    frame = backend.frame_to_host(frame)
    qis = list(quasi_identifiers)
    absent = [q for q in qis if q not in frame.columns]
    if absent:
        raise InputError(f"SUDA2: no column {absent[0]!r} in the table; check --qi")
    cols = [pd.factorize(frame[q], use_na_sentinel=True)[0] for q in qis]
    codes = np.stack(cols, axis=1) if cols else np.zeros((len(frame), 0), dtype=np.int64)
    return suda2(codes, names=qis, **kw)
