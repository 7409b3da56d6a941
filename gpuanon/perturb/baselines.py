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

The paper's RP and GP runs pick the best of ten random draws ("ten iterations"); these functions
draw once. They are deliberately plain NumPy (CPU): they are comparison baselines.

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

from .attacks import _to_numpy

__all__ = ["haar_orthogonal", "random_rotation", "geometric_perturbation"]


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
    X = _to_numpy(X)
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
