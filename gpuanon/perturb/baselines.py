"""Baseline perturbations DISTPAB is compared with (seed 002, sections 5.4 and 5.7).

* :func:`random_rotation` (RP; Chen and Liu 2005): ``Y = Z Q^T`` with ``Q`` a Haar-random
  orthogonal matrix.
* :func:`geometric_perturbation` (GP; Chen and Liu 2007): ``Y = Z Q^T + t + E`` with ``Q`` Haar,
  ``t ~ U(0, 1)^n`` and ``E ~ N(0, noise^2)`` elementwise (noise 0.3 by default, as in the
  paper).

Both work in z-space: ``Z = (X - mu) / sigma`` with the columns' mean and standard deviation
(``ddof=1``), and return ``Y * sigma + mu`` -- a NumPy array paired row by row with ``X`` (no
shuffle). Constant columns (``sigma = 0``) are passed through unchanged, as DISTPAB does; the
rotation acts on the other columns. With ``return_params=True`` the functions also return a dict
holding ``rotation``, ``translation`` (GP), ``mean``, ``scale`` and ``columns`` (the indices of
the perturbed columns).

The paper's RP and GP runs pick the best of ten random draws ("ten iterations"): the functions
above draw once; :func:`random_rotation_best` and :func:`geometric_perturbation_best` make
``draws`` (default 10) draws and keep the one whose naive-inference score (``min_j std(z_j -
zp_j)``, :func:`gpuanon.perturb.attacks.naive_inference`) is highest (SPEC section 8 step 8;
ties: the first draw). Draw ``d`` is exactly ``random_rotation(X, random_state=rng_d)`` (or
``geometric_perturbation``) with ``rng_d = numpy.random.default_rng(draw_seeds(random_state,
draws)[d])``. They are deliberately plain NumPy (CPU): they are comparison baselines.

Examples
--------
>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(100, 4))
>>> Q = haar_orthogonal(4, random_state=1)
>>> bool(np.allclose(Q @ Q.T, np.eye(4)))
True
>>> Xp = random_rotation(X, random_state=1)
>>> Xp.shape
(100, 4)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import shown
from .attacks import host_matrix

__all__ = [
    "DRAWS",
    "draw_seeds",
    "geometric_perturbation",
    "geometric_perturbation_best",
    "haar_orthogonal",
    "random_rotation",
    "random_rotation_best",
]

#: Random draws the paper's baselines keep the best of ("ten iterations").
DRAWS = 10


def haar_orthogonal(n: int, random_state: Any = None) -> np.ndarray:
    """A Haar-distributed random ``n x n`` orthogonal matrix.

    QR decomposition of a standard Gaussian matrix with the sign fix of Mezzadri (2007):
    ``Q <- Q diag(sign(diag(R)))``, which makes the distribution exactly Haar (uniform on O(n)).
    ``random_state`` is anything ``numpy.random.default_rng`` accepts.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    rng = np.random.default_rng(random_state)
    G = rng.standard_normal((n, n))
    Q, R = np.linalg.qr(G)
    d = np.diag(R)
    return Q * np.where(d < 0, -1.0, 1.0)


def _zspace(X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X = host_matrix(X)
    if X.shape[0] < 2:
        raise ValueError("at least two rows are needed")
    if not np.isfinite(X).all():
        raise ValueError("X must be finite")
    mu = X.mean(axis=0)
    sd = X.std(axis=0, ddof=1)
    cols = np.flatnonzero(sd > 0)
    Z = (X[:, cols] - mu[cols]) / sd[cols]
    return X, Z, mu, sd, cols


def random_rotation(X: Any, random_state: Any = None, return_params: bool = False):
    """Random rotation perturbation: Haar-random orthogonal ``Q`` applied in z-space.

    ``Xp = (Z Q^T) * sigma + mu``; pairwise Euclidean distances of the z-scored rows are
    preserved exactly. Returns ``Xp`` (and the parameters when ``return_params``).
    """
    rng = np.random.default_rng(random_state)
    X, Z, mu, sd, cols = _zspace(X)
    Q = haar_orthogonal(cols.size, rng) if cols.size else np.zeros((0, 0))
    Xp = X.copy()
    Xp[:, cols] = (Z @ Q.T) * sd[cols] + mu[cols]
    if return_params:
        return Xp, {"rotation": Q, "mean": mu, "scale": sd, "columns": cols}
    return Xp


def geometric_perturbation(
    X: Any, noise: float = 0.3, random_state: Any = None, return_params: bool = False
):
    """Geometric perturbation: Haar rotation, translation ``t ~ U(0,1)^n``, Gaussian noise.

    In z-space ``Y = Z Q^T + t + E`` with ``E_ij ~ N(0, noise^2)``; ``Xp = Y * sigma + mu``.
    Returns ``Xp`` (and the parameters when ``return_params``).
    """
    if noise < 0:
        raise ValueError("noise must be >= 0")
    rng = np.random.default_rng(random_state)
    X, Z, mu, sd, cols = _zspace(X)
    n = cols.size
    Q = haar_orthogonal(n, rng) if n else np.zeros((0, 0))
    t = rng.uniform(0.0, 1.0, size=n)
    E = rng.normal(0.0, noise, size=Z.shape) if noise > 0 else np.zeros_like(Z)
    Xp = X.copy()
    Xp[:, cols] = (Z @ Q.T + t + E) * sd[cols] + mu[cols]
    if return_params:
        return Xp, {"rotation": Q, "translation": t, "mean": mu, "scale": sd, "columns": cols}
    return Xp


# --------------------------------------------------------------------------- best of several draws


def draw_seeds(random_state: Any, draws: int = DRAWS) -> list:
    """The ``draws`` independent seed sequences the best-of-draws baselines use, one per draw.

    ``numpy.random.SeedSequence(random_state).spawn(draws)`` for an integer (or ``None``) seed;
    a :class:`numpy.random.Generator` is first asked for a 63-bit integer.

    >>> [s.spawn_key for s in draw_seeds(7, 3)]
    [(0,), (1,), (2,)]
    """
    if isinstance(draws, (bool, np.bool_)) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {shown(draws)}")
    if isinstance(random_state, np.random.Generator):
        random_state = int(random_state.integers(0, 2**63))
    return np.random.SeedSequence(random_state).spawn(int(draws))


def random_rotation_best(X: Any, draws: int = DRAWS, random_state: Any = None):
    """RP as the paper ran it: ``draws`` Haar rotations, keep the highest naive-inference score.

    The scores of all draws are computed at once from the z-scored data's covariance ``S``
    (``ddof=1``): ``z - z Q^T = z (I - Q)^T``, so the error's variance on attribute ``j`` is
    ``((I - Q) S (I - Q)^T)_jj`` -- one batched product over the draws, no perturbed copy per
    draw. Only the kept draw is applied to the rows.

    Returns
    -------
    Xp : ndarray
        ``random_rotation(X, random_state=rng_best)``, paired row by row with ``X``.
    info : dict
        ``best_draw`` (0-based), ``naive_scores`` (the naive-inference minimum of every draw),
        ``draws``.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> Xp, info = random_rotation_best(X, random_state=1)
    >>> info["naive_scores"][info["best_draw"]] == max(info["naive_scores"])
    True
    """
    seeds = draw_seeds(random_state, draws)
    X, Z, mu, sd, cols = _zspace(X)
    n = cols.size
    if n == 0:
        return X.copy(), {"best_draw": 0, "naive_scores": [0.0] * len(seeds), "draws": len(seeds)}
    Q = np.stack([haar_orthogonal(n, np.random.default_rng(s)) for s in seeds])  # (draws, n, n)
    S = np.atleast_2d(np.cov(Z, rowvar=False, ddof=1))
    A = np.eye(n) - Q  # error = z A^T for each draw
    var = np.einsum("dij,jk,dik->di", A, S, A)  # diag(A S A^T) for each draw
    scores = np.sqrt(np.clip(var, 0.0, None)).min(axis=1)
    best = int(np.argmax(scores))
    Xp = X.copy()
    Xp[:, cols] = (Z @ Q[best].T) * sd[cols] + mu[cols]
    return Xp, {"best_draw": best, "naive_scores": [float(v) for v in scores], "draws": len(seeds)}


def geometric_perturbation_best(X: Any, noise: float = 0.3, draws: int = DRAWS, random_state: Any = None):
    """GP as the paper ran it: ``draws`` draws of (rotation, translation, noise), keep the best.

    Draw ``d`` is ``geometric_perturbation(X, noise, random_state=rng_d)``, scored in z-space by
    its naive-inference minimum. The noise realization counts, so each draw's perturbed matrix is
    formed (whole-array, at most two draws in memory at a time) and only the best is kept. With
    the same ``random_state``, different ``noise`` values share the rotations, translations and
    standard-normal draws (the noise matrix is ``noise`` times the same standard normals).

    Returns ``(Xp, info)`` as :func:`random_rotation_best`.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> Xp, info = geometric_perturbation_best(X, noise=0.3, draws=4, random_state=1)
    >>> len(info["naive_scores"]), info["naive_scores"][info["best_draw"]] == max(info["naive_scores"])
    (4, True)
    """
    if noise < 0:
        raise ValueError("noise must be >= 0")
    seeds = draw_seeds(random_state, draws)
    X, Z, mu, sd, cols = _zspace(X)
    n = cols.size
    scores: list = []
    best, best_Y = 0, None
    for s in seeds:  # one draw at a time; each draw is whole-array over the rows
        rng = np.random.default_rng(s)
        Q = haar_orthogonal(n, rng) if n else np.zeros((0, 0))
        t = rng.uniform(0.0, 1.0, size=n)
        Y = Z @ Q.T + t
        if noise > 0:
            Y += rng.normal(0.0, noise, size=Z.shape)
        score = float((Z - Y).std(axis=0, ddof=1).min()) if n else 0.0
        if best_Y is None or score > scores[best]:
            best, best_Y = len(scores), Y
        scores.append(score)
    Xp = X.copy()
    Xp[:, cols] = best_Y * sd[cols] + mu[cols]
    return Xp, {"best_draw": best, "naive_scores": [float(v) for v in scores], "draws": len(seeds)}
