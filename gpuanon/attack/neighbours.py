"""Linkability and inference: nearest release rows (distances: :mod:`.distance`).

Among equally near rows anonymeter's rule takes the first (lowest position). One neighbour (the
default) and the inference's nearest row are searched by :mod:`.search` (distinct cells, pruning by
a lower bound); ``k`` neighbours as blocked whole-array distance computations over every release row.
"""

from __future__ import annotations

import numpy as np

from . import device
from .distance import distances, kinds
from .search import first_nearest, link_one, rank
from .stats import results

BLOCK = 1 << 22


def _blocks(n_targets: int, n_rel: int):
    size = max(1, BLOCK // max(n_rel, 1))
    for s in range(0, n_targets, size):
        yield slice(s, min(n_targets, s + size))


def _smallest(eq: np.ndarray, key: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Per row, the ``need`` positions of ``eq`` with the smallest ``key`` (distinct ints, one per column)."""
    kk = np.where(eq, key[None, :], np.int32(eq.shape[1]))
    kmax = int(need.max())
    if kmax == 1:
        thr = kk.min(axis=1, keepdims=True)
    else:
        part = np.partition(kk, np.arange(min(kmax, kk.shape[1])), axis=1)
        thr = np.take_along_axis(part, need - 1, axis=1)
    return eq & (kk <= thr)


def _chosen(d: np.ndarray, k: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` nearest per row: ties at the k-th distance to the first positions (anonymeter's rule),
    to the first in a random order of the release rows (``rank``: each row's place in it; a uniformly
    random choice among them), and every row as near as the k-th (ties kept)."""
    dk = np.partition(d, k - 1, axis=1)[:, k - 1][:, None]
    lt, eq = d < dk, d == dk
    need = (k - lt.sum(axis=1, keepdims=True)).astype(np.int64)
    pos = np.arange(d.shape[1], dtype=np.int32)
    return lt | _smallest(eq, pos, need), lt | _smallest(eq, rank, need), lt | eq


def _nearest(d: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_chosen` for one neighbour: the nearest row's position by anonymeter's rule (the first) and by
    the random order (the equally near row of smallest ``rank``), and the mask of the equally near rows."""
    eq = d == d.min(axis=1, keepdims=True)
    return np.argmax(eq, axis=1), np.argmin(np.where(eq, rank[None, :], np.int32(d.shape[1])), axis=1), eq


_rank = rank


def _link(e, a_cols, b_cols, table, trows, k: int, rng, dev=None) -> tuple[int, int, int]:
    """Successes of the linkability attack on ``trows``: anonymeter's rule, ties broken at random, ties kept
    (one neighbour: :func:`.search.link_one`, over the distinct cells of each set; ``dev``: on the device,
    :mod:`.device`, a device array of the three)."""
    if dev is not None and k == 1:
        return device.link_one(dev, a_cols, b_cols, table, trows, rng)
    if dev is not None:
        return device.link_k(dev, a_cols, b_cols, table, trows, k, rng, _blocks(len(trows), e.release.n))
    if k == 1:
        return link_one(e, a_cols, b_cols, table, trows, rng)
    first = rand = ties = 0
    ka, kb = kinds(e, a_cols), kinds(e, b_cols)
    for blk in _blocks(len(trows), e.release.n):  # a random order of the release rows per block and side
        ca, ra, ta = _chosen(distances(e, a_cols, table, trows[blk], ka), k, _rank(rng.permutation(e.release.n)))
        cb, rb, tb = _chosen(distances(e, b_cols, table, trows[blk], kb), k, _rank(rng.permutation(e.release.n)))
        first += int((ca & cb).any(axis=1).sum())
        rand += int((ra & rb).any(axis=1).sum())
        ties += int((ta & tb).any(axis=1).sum())
    return first, rand, ties


def _random_sets(rng, n: int, n_rel: int, k: int) -> np.ndarray:
    """``(n, k)`` random release rows, distinct within a row (redrawn where two are equal)."""
    idx = rng.integers(0, n_rel, (n, k))
    for _ in range(1000):  # a few redraws of the rows with a repeat
        s = np.sort(idx, axis=1)
        bad = (s[:, 1:] == s[:, :-1]).any(axis=1) if k > 1 else np.zeros(n, dtype=bool)
        if not bad.any():
            break
        idx[bad] = rng.integers(0, n_rel, (int(bad.sum()), k))
    return idx


def linkability(e, aux: tuple, n_attacks: int, n_neighbours: int = 1, seed: int = 0,
                confidence_level: float = 0.95, dev=None) -> dict:
    """anonymeter's ``LinkabilityEvaluator`` on cells, with the tie-aware rule beside its own (``dev``: the
    cells on the device, :class:`.device.Cells`, for the GPU backend: the same report)."""
    rng = np.random.default_rng(seed)
    a_cols, b_cols = [e.column(c) for c in aux[0]], [e.column(c) for c in aux[1]]
    k = min(n_neighbours, e.release.n)
    n = min(n_attacks, e.original.n)
    ia, ib = _random_sets(rng, n_attacks, e.release.n, k), _random_sets(rng, n_attacks, e.release.n, k)
    n_base = int((ia[:, :, None] == ib[:, None, :]).any(axis=(1, 2)).sum())
    att = _link(e, a_cols, b_cols, e.original, rng.choice(e.original.n, n, replace=False), k, rng, dev)
    con = (None, None, None)
    if e.control is not None:
        con = _link(e, a_cols, b_cols, e.control, rng.choice(e.control.n, min(n_attacks, e.control.n), replace=False),
                    k, rng, dev)
    if dev is not None:  # the device's counts: one copy
        got = [tuple(int(x) for x in v) for v in device.fetch(att, *(() if e.control is None else (con,)))]
        att, con = got[0], got[1] if len(got) > 1 else con
    res = results(n_attacks, att[0], n_base, con[0], confidence_level)
    keep = ("n_success", "n_control", "attack_rate", "control_rate", "risk", "warnings")
    tie = results(n_attacks, att[1], n_base, con[1], confidence_level)
    kept = results(n_attacks, att[2], n_base, con[2], confidence_level)
    res.update(aux=[list(aux[0]), list(aux[1])], n_neighbours=k,
               tie_aware={key: tie[key] for key in keep}, ties_kept={key: kept[key] for key in keep},
               note="tie_aware: ties at the k-th distance broken by a uniformly random choice (a random order of "
                    "the release rows per block of attacks: its rate is the chance that a random choice among "
                    "equally near rows links); "
                    "ties_kept: success when any such choice links (an upper bound)")
    return res


def _numeric_credit(lo, hi, s) -> np.ndarray:
    """anonymeter's regression rule ``|g - s| / (g + 1e-12) <= 0.05`` for a point guess; for an interval
    guess, the share of the interval where it holds (a guess drawn uniformly from the cell)."""
    tol = 0.05
    with np.errstate(invalid="ignore", divide="ignore"):
        point = np.abs(lo - s) / (lo + 1e-12) <= tol
        width = hi - lo
        neg = np.clip(np.minimum(hi, -1e-12) - lo, 0, None)  # anonymeter's rule holds for any negative guess
        win_lo, win_hi = (s - 1e-12 * tol) / (1 + tol), (s + 1e-12 * tol) / (1 - tol)
        pos = np.clip(np.minimum(hi, win_hi) - np.maximum(np.maximum(lo, -1e-12), win_lo), 0, None)
        frac = np.where(np.isfinite(width) & (width > 0), (neg + pos) / width, 0.0)
    credit = np.where(width == 0, point, frac).astype(np.float64)
    gn, sn = np.isnan(lo), np.isnan(s)
    return np.where(gn | sn, (gn & sn).astype(np.float64), credit)


def _credit(e, secret, table, trows, guess_rows) -> np.ndarray:
    """Per attack, the chance that the guess (the secret's cell of ``guess_rows``) is right."""
    c = e.column(secret)
    if c.kind == "numeric":
        return _numeric_credit(e.release.lo[secret][guess_rows], e.release.hi[secret][guess_rows],
                               table.lo[secret][trows])
    cell, truth = e.release.cell[secret][guess_rows], table.cell[secret][trows]
    return c.overlap(cell, truth) / c.set_size(cell)


def _infer(e, aux_cols, secret, table, trows) -> float:
    total = 0.0
    g = first_nearest(e, aux_cols, table, trows)  # the first of the nearest
    for blk in _blocks(len(trows), e.release.n):  # the same sums as per block of targets
        total += float(_credit(e, secret, table, trows[blk], g[blk]).sum())
    return total


def _infer_device(e, dev, aux_cols, secret, trows_o, trows_c) -> tuple[float, float | None]:
    """:func:`_infer` of the original's and the control's targets on the device: the credits come back in one
    copy and are summed here in the CPU's blocks (the same floats)."""
    vec = [device.credits(dev, aux_cols, secret, e.original, trows_o)]
    if trows_c is not None:
        vec.append(device.credits(dev, aux_cols, secret, e.control, trows_c))
    sums = []
    for v in device.fetch(*vec):  # original, control
        total = 0.0
        for blk in _blocks(len(v), e.release.n):  # the CPU's sums per block of targets
            total += float(v[blk].sum())
        sums.append(total)
    return sums[0], (sums[1] if len(sums) > 1 else None)


def inference(e, aux, secret: str, n_attacks: int, seed: int = 0, confidence_level: float = 0.95,
              dev=None) -> dict:
    """anonymeter's ``InferenceEvaluator`` on cells: the secret of the nearest release row on ``aux`` (``dev``:
    the cells on the device, :class:`.device.Cells`: the same report)."""
    rng = np.random.default_rng(seed)
    aux_cols = [e.column(c) for c in aux]
    n_ori = min(n_attacks, e.original.n)
    n_base = min(e.release.n, n_ori)
    base_t = rng.choice(e.original.n, n_base, replace=False)
    base = float(_credit(e, secret, e.original, base_t, rng.choice(e.release.n, n_base, replace=False)).sum())
    t_ori = rng.choice(e.original.n, n_ori, replace=False)
    n_con, c_hits, t_con = -1, None, None
    if e.control is not None:
        n_con = min(n_attacks, e.control.n)
        t_con = rng.choice(e.control.n, n_con, replace=False)
    if dev is not None:
        hits, c_hits = _infer_device(e, dev, aux_cols, secret, t_ori, t_con)
    else:
        hits = _infer(e, aux_cols, secret, e.original, t_ori)
        if t_con is not None:
            c_hits = _infer(e, aux_cols, secret, e.control, t_con)
    res = results((n_ori, n_base, n_con), hits, base, c_hits, confidence_level)
    res.update(secret=secret, aux=list(aux), kind=e.column(secret).kind,
               note="a set-valued guess counts 1/|set|; a numeric guess is right within 5% (anonymeter's rule), "
                    "an interval guess by the share of the interval where that holds")
    return res
