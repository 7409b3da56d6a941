"""DISTPAB's statistics: what an entity computes (chunk) and how the coordinator combines them.

Every entity sends only :func:`local_stats` of its own rows (row count, mean, co-moment); the
coordinator merges them with a pairwise tree (:func:`merge_stats`, :func:`merge_all`; Chan et
al., Pebay) and derives the global mean, standard deviation and correlation matrix of the
z-scored data (:func:`finalize`). The same functions run in one process, on Dask workers and
between federated clients.

>>> import numpy as np
>>> X = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0], [0.0, 1.0]])
>>> merge_all([local_stats(X[:1]), local_stats(X[1:3]), local_stats(X[3:])]).n
4
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..backend import to_device, to_host
from ..errors import InputError

__all__ = ["Stats", "finalize", "local_stats", "merge_all", "merge_stats"]

_STATS_BLOCK_ROWS = 1 << 18


@dataclass
class Stats:
    """What an entity sends: row count ``n``, mean ``(d,)`` and co-moment ``(d, d)``, float64.

    ``comoment = sum_rows (x - mean)(x - mean)^T``; ``Cov = comoment / (n - 1)``.
    """

    n: int
    mean: np.ndarray
    comoment: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.mean.shape[0])

    @property
    def nbytes(self) -> int:
        """Payload bytes: ``8 * (1 + d + d * d)``."""
        d = self.n_features
        return 8 * (1 + d + d * d)



def _block_stats(Xb, xp) -> Stats:
    """Stats of one block (already float64 on the device), shifted by its first row.

    The shift makes a constant column's deviations exactly zero (so its co-moment is exactly 0
    and its mean exactly the constant) and improves accuracy for data far from the origin.
    """
    k = int(Xb.shape[0])
    x0 = Xb[0].copy()
    Xb -= x0
    mu_s = Xb.mean(axis=0)
    Xb -= mu_s
    C = Xb.T @ Xb
    return Stats(k, to_host(x0 + mu_s).astype(np.float64), to_host(C).astype(np.float64))


def local_stats(X, xp=np, block_rows: int = _STATS_BLOCK_ROWS) -> Stats:
    """Phase 1 at an entity: row count, mean and co-moment of ``X`` (m x d), in float64.

    ``X`` is read in blocks of ``block_rows`` rows; each block is copied to float64 on the
    device of ``xp``, reduced, and the block statistics are merged with a pairwise tree, so a
    float32 matrix never gets a full float64 copy.

    Parameters
    ----------
    X : array (m, d)
        Numeric rows (NumPy, or CuPy when ``xp`` is CuPy).
    xp : module
        ``numpy`` or ``cupy``.
    block_rows : int
        Rows per block (scratch memory ~ ``3 * block_rows * d * 8`` bytes).

    Returns
    -------
    Stats
        On the host (NumPy), whatever ``xp`` is.

    Examples
    --------
    >>> s = local_stats(np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]]))
    >>> s.n, s.mean.tolist(), s.comoment.tolist()
    (3, [3.0, 6.0], [[8.0, 16.0], [16.0, 32.0]])
    """
    if getattr(X, "ndim", None) != 2:
        X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"local_stats expects a 2-D (rows x features) array, got {X.ndim}-D")
    m, d = int(X.shape[0]), int(X.shape[1])
    if m == 0:
        return Stats(0, np.zeros(d), np.zeros((d, d)))
    block_rows = max(1, int(block_rows))
    parts = []
    if xp is not np:
        X = to_device(X, xp)  # one copy of the entity's rows, in their own dtype; blocks widen on the device
    for a in range(0, m, block_rows):
        # always a copy, row-major whatever the input's layout (a frame's block is column-major under
        # pandas 3), so the sums run in one order and the statistics do not depend on where X came from
        Xb = xp.array(X[a:a + block_rows], dtype=xp.float64, order="C")
        parts.append(_block_stats(Xb, xp))
        del Xb
    return merge_all(parts)


def merge_stats(a: Stats, b: Stats) -> Stats:
    """Combine the statistics of two disjoint row sets (Chan et al.; Pebay; paper eq. 13-19).

    ``m = ma + mb``, ``d = mean_b - mean_a``, ``mean = mean_a + d mb / m``,
    ``C = Ca + Cb + d d^T ma mb / m``.

    Examples
    --------
    >>> X = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0], [0.0, 1.0]])
    >>> s = merge_stats(local_stats(X[:1]), local_stats(X[1:]))
    >>> np.allclose(s.comoment, local_stats(X).comoment), s.n
    (True, 4)
    """
    if a.n == 0:
        return b
    if b.n == 0:
        return a
    m, mean, C = merge_moments(a.n, a.mean, a.comoment, b.n, b.mean, b.comoment)
    return Stats(int(m), mean, C)


def merge_moments(na, mean_a, m2a, nb, mean_b, m2b):
    """Chan et al.'s / Pebay's pairwise update: ``(n, mean, M2)`` of two disjoint sets -> of their union.

    ``n = na + nb``, ``d = mean_b - mean_a``, ``mean = mean_a + d nb / n``,
    ``M2 = M2a + M2b + d d^T na nb / n``. With scalar counts ``M2`` is the co-moment matrix
    (:func:`merge_stats`); with one count per feature (missing values left out) it is the vector of
    per-feature second moments (``d * d``; a feature with no values keeps ``mean_a``, the federated
    scaler's case).

    >>> merge_moments(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.zeros(2),
    ...               np.array([1.0, 2.0]), np.array([3.0, 5.0]), np.array([0.0, 2.0]))
    (array([2., 2.]), array([2., 5.]), array([2., 2.]))
    """
    n = na + nb
    d = np.asarray(mean_b, dtype=np.float64) - np.asarray(mean_a, dtype=np.float64)
    if np.ndim(n) == 0:  # one count (both sets non-empty): Python's exact integer product
        frac, w = nb / n, na * nb / n
    else:
        frac = np.divide(nb, n, out=np.zeros_like(n), where=n > 0)
        w = np.divide(na * nb, n, out=np.zeros_like(n), where=n > 0)
    cross = np.outer(d, d) if np.ndim(m2a) == 2 else d * d
    return n, mean_a + d * frac, m2a + m2b + cross * w


def merge_all(stats_list: Sequence[Stats]) -> Stats:
    """Merge any number of :class:`Stats` with a pairwise (balanced) tree of :func:`merge_stats`."""
    items = list(stats_list)
    if not items:
        raise InputError("merge_all needs at least one Stats")
    while len(items) > 1:
        nxt = [merge_stats(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            nxt.append(items[-1])
        items = nxt
    return items[0]


def finalize(stats: Stats, names: Sequence[str] | None = None):
    """Global ``(mean, sigma, S, constant_mask)`` from merged statistics.

    ``Cov = C / (m - 1)``, ``sigma = sqrt(diag Cov)``, ``S = Cov / (sigma sigma^T)``. A column
    with ``sigma = 0`` (or below rounding noise of its mean) is constant: its row and column of
    ``S`` are set to those of the identity, it is left out of the search and passed through
    unperturbed; a warning names it.

    Raises
    ------
    InputError
        Fewer than 2 rows, or non-finite statistics (missing or infinite values), naming the
        columns.
    """
    d = stats.n_features
    labels = list(names) if names is not None else [str(i) for i in range(d)]
    if stats.n < 2:
        raise InputError(f"DISTPAB needs at least 2 rows in total to estimate a covariance, got {stats.n} sample(s)")
    mean = np.asarray(stats.mean, dtype=np.float64)
    C = np.asarray(stats.comoment, dtype=np.float64)
    bad = ~(np.isfinite(mean) & np.isfinite(C).all(axis=0))
    if bad.any():
        cols = ", ".join(repr(labels[i]) for i in np.flatnonzero(bad))
        raise InputError(f"feature column(s) {cols} hold missing or infinite values; impute or drop "
                         "those rows (or leave the column out of the features) before perturbing")
    cov = C / (stats.n - 1)
    var = np.clip(np.diag(cov).copy(), 0.0, None)
    sigma = np.sqrt(var)
    const = (sigma == 0) | (sigma <= 64 * np.finfo(np.float64).eps * np.abs(mean))
    sigma = np.where(const, 0.0, sigma)
    safe = np.where(const, 1.0, sigma)
    S = cov / np.outer(safe, safe)
    S[const, :] = 0.0
    S[:, const] = 0.0
    S[np.diag_indices(d)] = 1.0
    S = (S + S.T) / 2
    if const.any():
        cols = ", ".join(repr(labels[i]) for i in np.flatnonzero(const))
        warnings.warn(f"constant feature column(s) {cols}: left out of the DISTPAB search and passed "
                      "through unperturbed", stacklevel=2)
    return mean, sigma, S, const

