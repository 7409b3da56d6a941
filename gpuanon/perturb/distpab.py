"""DISTPAB: distributed geometric perturbation of numeric data (SPEC section 8; seed 002).

The algorithm in three pure steps, so the same functions run in one process, on Dask workers
and between federated clients (chunk / combine / finalize):

1. **chunk** -- every entity computes :func:`local_stats` (row count, mean, co-moment) of its own
   rows; only these :class:`Stats` leave the entity.
2. **combine / finalize** -- the coordinator merges them (:func:`merge_stats`, :func:`merge_all`,
   Chan / Pebay), derives the global mean, standard deviation and the correlation matrix ``S``
   of the z-scored data (:func:`finalize`), and searches every (angle, reflection axis) pair at
   once from ``S`` alone (:func:`search`). It draws the translation ``t ~ U(0, 1)^n`` once and
   sends back one homogeneous matrix (:func:`homogeneous_matrix`) with the mean and scale.
3. **apply** -- every entity perturbs its rows block by block (:func:`perturb_block`,
   :func:`perturb_entity`) with its own random stream for the noise and the shuffle.

Conventions (the contract in SPEC section 8 wins over the paper):

* Rows are row vectors. For a z-scored row ``z`` the geometric step is
  ``y = (z F + t) R^T`` -- reflect, translate, rotate -- which is ``[z, 1] @ H`` for the
  homogeneous matrix ``H`` of :func:`homogeneous_matrix`.
* ``R_theta = G_(0,1) G_(0,2) ... G_(0,n-1) G_(1,2) ... G_(n-2,n-1)``: the Givens rotations of
  all pairs ``i < j`` in lexicographic order, multiplied left to right (the paper's algorithm 4,
  ``I3 = I3 x I2``); ``G_ij`` is the identity except ``G[i,i] = G[j,j] = cos``,
  ``G[j,i] = sin``, ``G[i,j] = -sin``.
* The variance of ``z - perturbed z`` on attribute ``j`` for ``A = R F_ax`` is
  ``V_j = 1 - 2 (A S)_jj + (A S A^T)_jj`` (sample variances, ``m - 1``); the translation does not
  change it. ``phi(theta, ax) = min_j V_j``.
* Axes are 0-based; angles are degrees.
* Randomized expansion ``y <- (|y| + |N(0, noise^2)|) * sign(y)`` with ``sign(0) = +1``.
* Constant columns (``sigma = 0``) are left out of the search and copied through unchanged.
* Random streams: ``SeedSequence(random_state, spawn_key=(0,))`` draws the translation (central);
  ``SeedSequence(random_state, spawn_key=(1, entity))`` spawns two children, the first for the
  entity's shuffle (NumPy, on the host) and the second for its noise (NumPy or CuPy).
* Split invariance: with ``noise=0`` and ``shuffle=False`` any split of the rows into entities
  gives the centralized output up to floating-point rounding (about 1e-14 relative: the
  co-moments are summed in another order); the angle and axis are the same, since values of
  phi within ``TIE_TOL`` are ties. The same entities give bit-identical output in one process
  and on Dask workers, noise and shuffle included.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
>>> model = DISTPAB(noise=0.0, shuffle=False, random_state=0).fit(X)
>>> Xp, perm = model.perturb(X)
>>> Xp.shape, bool(model.phi_ > 0), int(model.axis_) in range(4)
((500, 4), True, True)
"""

from __future__ import annotations

import contextlib
import numbers
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator

from ..errors import InputError, SchemaError

__all__ = [
    "DEFAULT_ANGLES",
    "Stats",
    "SearchResult",
    "PerturbParams",
    "DISTPAB",
    "local_stats",
    "merge_stats",
    "merge_all",
    "finalize",
    "rotation_matrices",
    "variance_table",
    "search",
    "homogeneous_matrix",
    "perturb_block",
    "perturb_entity",
    "perturb_frame",
    "validate_frame",
    "frame_matrix",
    "entity_seed",
]

#: Angles searched by default: 1..179 degrees without the 7 "special" ones (172 angles).
DEFAULT_ANGLES: tuple[int, ...] = tuple(
    a for a in range(1, 180) if a not in (30, 45, 60, 90, 120, 135, 150))

#: Values of phi closer than this count as ties (smallest angle, then smallest axis, wins).
TIE_TOL = 1e-12

_STATS_BLOCK_ROWS = 1 << 18
#: On the CPU, rows transformed per pass inside a block (cache-sized: 3 x 32768 x d x 8 bytes).
_CPU_TILE_ROWS = 1 << 15
_PREFETCH_NOISE = True


# --------------------------------------------------------------------------- statistics (chunk)

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


def _host(a: Any) -> np.ndarray:
    from ..backend import to_host  # noqa: PLC0415

    return to_host(a)


def _dev(a: Any, xp):
    """``a`` on ``xp``'s device (a counted copy when it is on the host and ``xp`` is CuPy)."""
    from ..backend import to_device  # noqa: PLC0415

    return to_device(a, xp)


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
    return Stats(k, _host(x0 + mu_s).astype(np.float64), _host(C).astype(np.float64))


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
        X = _dev(X, xp)  # one copy of the entity's rows, in their own dtype; blocks widen on the device
    for a in range(0, m, block_rows):
        Xb = xp.array(X[a:a + block_rows], dtype=xp.float64)  # always a copy
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
    m = a.n + b.n
    d = np.asarray(b.mean, dtype=np.float64) - np.asarray(a.mean, dtype=np.float64)
    mean = a.mean + d * (b.n / m)
    C = a.comoment + b.comoment + np.outer(d, d) * (a.n * b.n / m)
    return Stats(int(m), mean, C)


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
        raise InputError(f"DISTPAB needs at least 2 rows in total to estimate a covariance, got {stats.n}")
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


# --------------------------------------------------------------------------- search (combine)

def rotation_matrices(angles_deg, n: int, xp=np):
    """Concatenated sub-plane rotation ``R_theta`` for every angle: shape ``(len(angles), n, n)``.

    ``R_theta = G_(0,1) G_(0,2) ... G_(n-2,n-1)`` -- all pairs ``i < j`` in lexicographic order,
    multiplied left to right (the paper's algorithm 4), every ``G_ij`` with the same angle.
    Built for all angles at once: starting from the identity, each right multiplication by
    ``G_ij`` changes only columns ``i`` and ``j`` of ``R``,
    ``R[:, i], R[:, j] = c R[:, i] + s R[:, j], c R[:, j] - s R[:, i]``; the batch is kept as
    ``W[i, r, a] = R[a, r, i]`` so that each update touches two contiguous ``(n, angles)`` slabs.

    Examples
    --------
    >>> R = rotation_matrices([90], 2)[0]
    >>> np.round(R, 12).tolist()
    [[0.0, -1.0], [1.0, 0.0]]
    """
    ang = xp.deg2rad(_dev(angles_deg, xp).astype(xp.float64, copy=False).reshape(-1))
    k = int(ang.shape[0])
    c = xp.cos(ang)
    s = xp.sin(ang)
    W = xp.broadcast_to(xp.eye(n, dtype=xp.float64)[:, :, None], (n, n, k)).copy()
    for i in range(n - 1):
        for j in range(i + 1, n):
            wi = W[i].copy()
            wj = W[j]
            W[i] = c * wi + s * wj
            W[j] = c * wj - s * wi
    R = xp.ascontiguousarray(W.transpose(2, 1, 0))
    return R


def variance_table(S, angles=DEFAULT_ANGLES, xp=np, R=None):
    """``V[theta, ax, j] = 1 - 2 (A S)_jj + (A S A^T)_jj`` for ``A = R_theta F_ax``, every pair.

    One batched computation over an ``(angles, axes, n, n)`` stack (chunked over angles to
    bound the scratch memory): ``A`` is ``R`` with column ``ax`` negated, ``A S`` is one matrix
    product, ``diag(A S A^T)_j = sum_k (A S)_jk A_jk``.

    Returns
    -------
    array (len(angles), n, n) on the device of ``xp``.
    """
    S = _dev(S, xp).astype(xp.float64, copy=False)
    n = int(S.shape[0])
    if R is None:
        R = rotation_matrices(angles, n, xp)
    k = int(R.shape[0])
    f = 1.0 - 2.0 * xp.eye(n, dtype=xp.float64)          # f[ax] = diagonal of F_ax
    V = xp.empty((k, n, n), dtype=xp.float64)
    step = max(1, (1 << 21) // max(1, n ** 3))            # ~16 MiB of float64 per (chunk, n, n, n)
    for a in range(0, k, step):
        Rc = R[a:a + step]
        c = int(Rc.shape[0])
        A = Rc[:, None, :, :] * f[None, :, None, :]        # (c, ax, n, n): column ax negated
        AS = (A.reshape(c * n * n, n) @ S).reshape(c, n, n, n)
        d1 = xp.diagonal(AS, axis1=2, axis2=3)             # (A S)_jj
        d2 = xp.einsum("abjk,abjk->abj", AS, A)          # (A S A^T)_jj = sum_k (A S)_jk A_jk
        V[a:a + c] = 1.0 - 2.0 * d1 + d2
    return V


@dataclass
class SearchResult:
    """Outcome of :func:`search` (host values).

    phi : float -- Phi, the chosen pair's ``min_j V_j``.
    angle : float -- chosen angle (degrees).
    axis : int -- chosen reflection axis (0-based index into the searched columns).
    variances : (n,) -- ``V_j`` at the chosen pair.
    table : (len(angles), n) -- ``phi(theta, ax)``.
    angles : (len(angles),) -- the angles searched (degrees).
    angle_index : int -- row of ``table`` chosen.
    """

    phi: float
    angle: float
    axis: int
    variances: np.ndarray
    table: np.ndarray
    angles: np.ndarray
    angle_index: int


def search(S, angles=DEFAULT_ANGLES, selection: str = "maximin", xp=np) -> SearchResult:
    """Choose the rotation angle and reflection axis from the correlation matrix ``S``.

    ``phi(theta, ax) = min_j V_j`` for every pair (:func:`variance_table`). ``"maximin"``
    (default; the paper's algorithm 1): ``phi(theta) = min_ax phi(theta, ax)``,
    ``Phi = max_theta phi(theta)``, the angle is the argmax and the axis the argmin at that
    angle. ``"max"``: the largest ``phi(theta, ax)`` over all pairs. Ties (within
    ``TIE_TOL = 1e-12``): smallest angle index, then smallest axis.

    Examples
    --------
    >>> S = np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> r = search(S)
    >>> r.table.shape, r.variances.shape, 0 <= r.axis < 2
    ((172, 2), (2,), True)
    """
    if selection not in ("maximin", "max"):
        raise ValueError(f"selection must be 'maximin' or 'max', got {selection!r}")
    ang = np.asarray(angles if angles is not None else DEFAULT_ANGLES, dtype=np.float64).reshape(-1)
    if ang.size == 0:
        raise ValueError("search needs at least one angle")
    V = variance_table(S, ang, xp)
    table_d = V.min(axis=-1)
    table = _host(table_d)
    if selection == "maximin":
        per_angle = table.min(axis=1)
        best = per_angle.max()
        ia = int(np.flatnonzero(per_angle >= best - TIE_TOL)[0])
        iax = int(np.flatnonzero(table[ia] <= per_angle[ia] + TIE_TOL)[0])
    else:
        best = table.max()
        ia, iax = (int(v) for v in np.argwhere(table >= best - TIE_TOL)[0])
    variances = _host(V[ia, iax]).copy()
    return SearchResult(phi=float(table[ia, iax]), angle=float(ang[ia]), axis=iax,
                        variances=variances, table=table, angles=ang, angle_index=ia)


def homogeneous_matrix(angle_deg, axis: int, translation, n: int, xp=np):
    """Reflect, translate and rotate as ONE ``(n+1, n+1)`` matrix for row vectors.

    ``[z, 1] @ H = [(z F + t) R^T, 1]`` with ``F`` the reflection of ``axis`` (0-based), ``t``
    the translation and ``R = R_theta`` (:func:`rotation_matrices`). ``H`` is the product of the
    homogeneous reflection, translation and rotation matrices in the order they act:
    ``H = F_h T_h R_h`` with ``F_h = diag(F, 1)``, ``T_h = [[I, 0], [t, 1]]``,
    ``R_h = diag(R^T, 1)``; hence ``H = [[F R^T, 0], [t R^T, 1]]``.

    Examples
    --------
    >>> H = homogeneous_matrix(90, 0, [0.5, 0.0], 2)
    >>> np.round(np.array([1.0, 2.0, 1.0]) @ H, 12).tolist()   # z=(1,2): zF+t=(-0.5,2); R^T
    [-2.0, -0.5, 1.0]
    """
    t = _dev(translation, xp).astype(xp.float64, copy=False).reshape(-1)
    if int(t.shape[0]) != n:
        raise ValueError(f"translation has {int(t.shape[0])} values, expected {n}")
    if not 0 <= int(axis) < n:
        raise ValueError(f"axis {axis} is out of range for {n} columns (0-based)")
    R = rotation_matrices([angle_deg], n, xp)[0]
    Fh = xp.eye(n + 1, dtype=xp.float64)
    Fh[int(axis), int(axis)] = -1.0
    Th = xp.eye(n + 1, dtype=xp.float64)
    Th[n, :n] = t
    Rh = xp.eye(n + 1, dtype=xp.float64)
    Rh[:n, :n] = R.T
    return Fh @ Th @ Rh


# --------------------------------------------------------------------------- perturbation (apply)

@dataclass
class PerturbParams:
    """What the coordinator sends back to every entity.

    mean, scale : (d,) global mean and standard deviation (scale 0 marks a constant column).
    H : (d+1, d+1) homogeneous matrix over all features (identity on constant columns).
    noise : standard deviation of the randomized expansion noise.
    """

    mean: np.ndarray
    scale: np.ndarray
    H: np.ndarray
    noise: float

    @property
    def nbytes(self) -> int:
        """Payload bytes: ``8 * ((d+1)^2 + 2 d + 1)``."""
        d = int(self.mean.shape[0])
        return 8 * ((d + 1) ** 2 + 2 * d + 1)


def _noise_rng(xp, seed: np.random.SeedSequence):
    """A generator with ``standard_normal(size, dtype)`` on the device of ``xp``."""
    if xp is np:
        return np.random.default_rng(seed)
    s = int(seed.generate_state(1, np.uint64)[0] >> np.uint64(1))
    if hasattr(xp.random, "default_rng"):
        try:
            return xp.random.default_rng(s)
        except Exception:  # pragma: no cover - depends on the CuPy build
            pass
    return xp.random.RandomState(s)  # pragma: no cover


def _workspace(xp, rows: int, d: int) -> dict:
    """Scratch buffers reused block after block (fresh allocations would page-fault each time)."""
    return {"Z": xp.empty((rows, d), dtype=xp.float64), "Y": xp.empty((rows, d), dtype=xp.float64),
            "N": xp.empty((rows, d), dtype=xp.float64)}


def _standard_normal(rng, xp, out):
    """Fill ``out`` with N(0, 1) draws from ``rng`` (in place when the generator allows it)."""
    try:
        rng.standard_normal(size=out.shape, dtype=np.float64, out=out)
        return out
    except TypeError:  # pragma: no cover - generators without ``out``
        N = rng.standard_normal(size=out.shape, dtype=np.float64)
        out[...] = N if isinstance(N, type(out)) else xp.asarray(N)
        return out


_BLAS_LOCK = threading.Lock()
_BLAS_STATE = {"users": 0, "limiter": None}


@contextlib.contextmanager
def _one_blas_thread():
    """Limit BLAS to one thread while the noise thread runs (spinning BLAS threads would starve
    it; the tiles' small matrix products gain little from a second thread). Needs threadpoolctl
    (a scikit-learn dependency); without it, nothing changes. Reference-counted, so concurrent
    entities in one process (Dask threads) restore the original setting only when the last one
    leaves."""
    with _BLAS_LOCK:
        if _BLAS_STATE["users"] == 0:
            try:
                from threadpoolctl import threadpool_limits  # noqa: PLC0415

                _BLAS_STATE["limiter"] = threadpool_limits(limits=1, user_api="blas")
            except Exception:  # not installed, or no BLAS found
                _BLAS_STATE["limiter"] = None
        _BLAS_STATE["users"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_STATE["users"] -= 1
            if _BLAS_STATE["users"] == 0 and _BLAS_STATE["limiter"] is not None:
                _BLAS_STATE["limiter"].restore_original_limits()
                _BLAS_STATE["limiter"] = None


def perturb_block(X, mean, sigma, H, noise: float, rng, xp=np, work: dict | None = None, draws=None):
    """Perturb one block of rows with the global parameters; returns a float64 block.

    ``Z = (X - mean) / sigma`` (constant columns, ``sigma = 0``, untouched), ``Y = [Z, 1] @ H``
    without the homogeneous column, randomized expansion
    ``Y = (|Y| + |N(0, noise^2)|) * sign(Y)`` with ``sign(0) = +1`` (``noise = 0``: no change and
    no draw), ``X_p = Y sigma + mean``, constant columns copied back from ``X``.

    Parameters
    ----------
    X : array (r, d)
        Rows to perturb (any real dtype; host NumPy rows are copied to the device of ``xp``).
    mean, sigma : (d,)
    H : (d+1, d+1)
    noise : float
    rng : generator with ``standard_normal(size=..., dtype=...)`` (NumPy or CuPy); unused when
        ``noise`` is 0.
    work : dict, optional
        Scratch buffers from a previous call's block size or larger (``perturb_entity`` passes
        them); the block returned is then a view of ``work["Y"]``, valid until the next call.
    draws : array (r, d), optional
        Standard normal draws to use instead of drawing from ``rng`` (overwritten).

    Examples
    --------
    >>> H = homogeneous_matrix(10, 0, [0.0, 0.0], 2)
    >>> Xp = perturb_block(np.array([[1.0, 2.0], [3.0, 4.0]]), [2.0, 3.0], [1.0, 1.0], H, 0.0, None)
    >>> np.allclose(np.linalg.norm(Xp[0] - Xp[1]), np.linalg.norm([2.0, 2.0]))
    True
    """
    r, d = int(X.shape[0]), int(X.shape[1])
    if work is None or int(work["Z"].shape[0]) < r:
        work = _workspace(xp, r, d)
    sig_h = np.asarray(_host(sigma), dtype=np.float64)
    const = sig_h == 0
    mu = _dev(mean, xp).astype(xp.float64, copy=False)
    sig = _dev(np.where(const, 1.0, sig_h), xp)
    Hd = _dev(H, xp).astype(xp.float64, copy=False)
    Xd = X if isinstance(X, type(work["Z"])) else _dev(X, xp)
    Z, Y = work["Z"][:r], work["Y"][:r]
    Z[...] = Xd
    Z -= mu
    Z /= sig
    xp.matmul(Z, Hd[:d, :d], out=Y)
    Y += Hd[d, :d]
    if noise:
        N = draws if draws is not None else _standard_normal(rng, xp, work["N"][:r])
        xp.abs(N, out=N)
        N *= float(noise)
        Y += 0.0                      # -0.0 -> +0.0, so that sign(0) = +1 below
        xp.copysign(N, Y, out=N)      # |N| * sign(Y)
        Y += N                        # (|Y| + |N|) * sign(Y)
    Y *= sig
    Y += mu
    if const.any():
        Y[:, const] = Xd[:, _dev(np.flatnonzero(const), xp)]
    return Y


def entity_seed(entropy, entity: int) -> np.random.SeedSequence:
    """The entity's random stream: ``SeedSequence(entropy, spawn_key=(1, entity))``."""
    return np.random.SeedSequence(entropy, spawn_key=(1, int(entity)))


def perturb_entity(X, params: PerturbParams, seed: np.random.SeedSequence, shuffle: bool = True,
                   block_rows: int = 1 << 20, xp=np):
    """Phase 2 at an entity: perturb all its rows block by block, shuffled.

    ``seed`` spawns two children: the shuffle permutation (NumPy, host) and the noise stream
    (on the device of ``xp``). Rows are read in their stored order, ``block_rows`` at a time
    (the noise is drawn in that order, so the result does not depend on ``block_rows``), and
    each perturbed row is written to its shuffled place: output row ``i`` is input row
    ``perm[i]`` perturbed. On the CPU the blocks are further capped at ``_CPU_TILE_ROWS``
    (cache-sized) rows, and the next tile's noise is drawn in a helper thread while this tile
    is transformed; scratch memory is four ``(rows, d)`` float64 buffers.

    Returns
    -------
    (Xp, perm)
        ``Xp`` float32 when ``X`` is float32, else float64; on the device where ``X`` lives.
        ``perm`` is a NumPy int64 array (``arange`` without shuffling).
    """
    m, d = int(X.shape[0]), int(X.shape[1])
    # the seed's first two children, derived without mutating ``seed`` (so it can be reused)
    shuffle_seed, noise_seed = (np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, i),
                                                       pool_size=seed.pool_size) for i in (0, 1))
    perm = (np.random.default_rng(shuffle_seed).permutation(m) if shuffle
            else np.arange(m, dtype=np.int64))
    rng = _noise_rng(xp, noise_seed) if params.noise else None
    out_dtype = np.float32 if np.dtype(X.dtype) == np.float32 else np.float64
    host_input = xp is not np and not type(X).__module__.startswith("cupy")
    if host_input:
        X = _dev(X, xp)  # one copy up; the perturbed rows come back in one copy at the end
    on_device = type(X).__module__.startswith("cupy")
    out = xp.empty((m, d), dtype=out_dtype) if on_device else np.empty((m, d), dtype=out_dtype)
    if shuffle:
        dest = np.empty(m, dtype=np.int64)
        dest[perm] = np.arange(m, dtype=np.int64)        # input row j goes to output row dest[j]
        if on_device:
            dest = _dev(dest, xp)
    block_rows = max(1, min(int(block_rows), m))
    step = block_rows if xp is not np else min(block_rows, _CPU_TILE_ROWS)
    starts = list(range(0, m, step))
    # On the CPU the noise of the next tile is drawn in a helper thread (NumPy releases the GIL
    # while filling) while this tile is transformed: one stream, drawn in row order, so the
    # result is the same as drawing it inline.
    prefetch = bool(params.noise) and xp is np and len(starts) > 1 and _PREFETCH_NOISE
    work = _workspace(xp, step, d) if m else None
    pool = ThreadPoolExecutor(1, thread_name_prefix="distpab-noise") if prefetch else None
    bufs = [work["N"], np.empty_like(work["N"])] if prefetch else None
    pending = pool.submit(_standard_normal, rng, xp, bufs[0][:min(m, step)]) if prefetch else None
    limits = _one_blas_thread() if prefetch else contextlib.nullcontext()
    limits.__enter__()
    try:
        for k, a in enumerate(starts):
            b = min(m, a + step)
            draws = None
            if prefetch:
                draws = pending.result()
                if k + 1 < len(starts):
                    pending = pool.submit(_standard_normal, rng, xp, bufs[(k + 1) % 2][:min(m, b + step) - b])
            Yb = perturb_block(X[a:b], params.mean, params.scale, params.H, params.noise, rng, xp,
                               work=work, draws=draws)
            if not on_device and xp is not np:
                Yb = _host(Yb)
            if shuffle:
                out[dest[a:b]] = Yb
            else:
                out[a:b] = Yb
    finally:
        limits.__exit__(None, None, None)
        if pool is not None:
            pool.shutdown(wait=True)
    if host_input:
        out = _host(out)
    return out, perm


# --------------------------------------------------------------------------- validation helpers

def _numeric_problem(df, cols) -> list:
    import pandas as pd  # noqa: PLC0415

    return [c for c in cols if not pd.api.types.is_numeric_dtype(df[c].dtype)
            or pd.api.types.is_complex_dtype(df[c].dtype)]


def _require_numeric(df, names) -> None:
    """SchemaError listing every non-numeric feature column, with the fix."""
    bad = _numeric_problem(df, names)
    if bad:
        listed = ", ".join(f"'{c}' ({df[c].dtype})" for c in bad)
        raise SchemaError(f"DISTPAB perturbs numeric features only; non-numeric feature column(s): "
                          f"{listed}. Exclude them, or pass --features (features=[...]) with numeric "
                          "columns only; pass a label column as label=")


def validate_frame(df, features, label=None, passengers=None) -> tuple[list, list]:
    """Check the columns DISTPAB reads from a frame; return ``(features, carried)``.

    ``carried`` is ``[label] + passengers``: columns that travel with their rows through the
    shuffle.

    Raises
    ------
    SchemaError
        Unknown columns, a column in two roles, non-numeric features (all listed) or features
        with missing values.
    """
    from ..schema import _as_list, _suggest  # noqa: PLC0415

    feats = _as_list(features)
    carried = ([] if label is None else [label]) + _as_list(passengers)
    cols = list(df.columns)
    if not feats:
        raise SchemaError("no feature columns given; pass features=[...] (--features COL1,COL2,...)")
    for role, names in (("feature", feats), ("label/passenger", carried)):
        for c in names:
            if c not in cols:
                raise SchemaError(f"{role} column '{c}' is not a column{_suggest(c, cols)}")
    dup = sorted({str(c) for c in feats if feats.count(c) > 1})
    if dup:
        raise SchemaError(f"feature column(s) {', '.join(map(repr, dup))} listed more than once")
    both = [c for c in carried if c in feats]
    if both:
        raise SchemaError(f"column(s) {', '.join(map(repr, both))} cannot be both a feature and a "
                          "label/passenger; a label is carried unperturbed")
    _require_numeric(df, feats)
    na = {c: int(df[c].isna().sum()) for c in feats}   # column by column: no copy of the block
    na = {c: k for c, k in na.items() if k}
    if na:
        listed = ", ".join(f"'{c}' ({k} missing)" for c, k in na.items())
        raise SchemaError(f"feature column(s) with missing values: {listed}; impute or drop those rows "
                          "before perturbing")
    return feats, carried


def _frame_matrix(df, feats):
    """Feature block of a frame as one NumPy array (float32 when every feature is float32)."""
    dts = {np.dtype(df[c].dtype) for c in feats}
    dtype = np.float32 if dts == {np.dtype(np.float32)} else np.float64
    return df[feats].to_numpy(dtype=dtype, copy=False)


frame_matrix = _frame_matrix


def _is_frame(X) -> bool:
    return hasattr(X, "columns") and hasattr(X, "iloc")


# --------------------------------------------------------------------------- estimator

class DISTPAB(BaseEstimator):
    """DISTPAB / PABIDOT perturbation of numeric features, centralized or across entities.

    Parameters
    ----------
    noise : float, default 0.3
        Standard deviation of the randomized-expansion noise (z-space); 0 turns it off.
    angles : sequence of degrees, default :data:`DEFAULT_ANGLES` (172 angles)
    selection : {'maximin', 'max'}
        How (angle, axis) is chosen (:func:`search`).
    shuffle : bool, default True
        Shuffle each entity's rows (labels travel with them).
    random_state : int, None or numpy Generator
        Seeds the central translation and, per entity, the noise and the shuffle.
    backend : {'auto', 'cpu', 'gpu'} or None
        Array backend (:func:`gpuanon.backend.get_backend`).
    block_rows : int, default 2**20
        Rows perturbed per block (bounds scratch memory).

    Attributes
    ----------
    phi_, angle_degrees_, axis_ (0-based feature index), variances_ (d,; constant columns 0),
    mean_, scale_ (constant columns 0), translation_ (d,; constant columns 0),
    rotation_ (d, d; z-space, identity on constant columns), homogeneous_ (d+1, d+1),
    constant_columns_ (names or indices), bytes_per_entity_, bytes_sent_per_entity_,
    bytes_received_per_entity_, n_entities_, n_features_in_, feature_names_in_ (frames only),
    params_ (:class:`PerturbParams`), search_ (:class:`SearchResult`), backend_.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> parts = [rng.normal(size=(m, 3)) for m in (50, 80, 20)]
    >>> model = DISTPAB(noise=0.3, random_state=7).fit_entities(parts)
    >>> Xp, perm = model.perturb(parts[1], entity=1)
    >>> Xp.shape, model.n_entities_, model.bytes_per_entity_
    ((80, 3), 3, 288)
    """

    def __init__(self, noise: float = 0.3, angles=None, selection: str = "maximin", shuffle: bool = True,
                 random_state=None, backend=None, block_rows: int = 1 << 20):
        self.noise = noise
        self.angles = angles
        self.selection = selection
        self.shuffle = shuffle
        self.random_state = random_state
        self.backend = backend
        self.block_rows = block_rows

    # -- helpers
    def _xp(self):
        from ..backend import get_backend  # noqa: PLC0415

        if getattr(self, "backend_", None) is None or getattr(self, "_backend_asked", None) != self.backend:
            self.backend_ = get_backend(self.backend)
            self._backend_asked = self.backend
        return self.backend_.xp

    def _entropy(self):
        if getattr(self, "_entropy_", None) is None:
            rs = self.random_state
            if rs is None:
                self._entropy_ = np.random.SeedSequence().entropy
            elif isinstance(rs, (bool, np.bool_)):
                raise ValueError(f"random_state must be an int, None or a numpy Generator, got {rs!r}")
            elif isinstance(rs, numbers.Integral):
                if int(rs) < 0:
                    raise ValueError(f"random_state must be non-negative, got {rs}")
                self._entropy_ = int(rs)
            elif isinstance(rs, (np.random.Generator, np.random.RandomState)):
                self._entropy_ = int(rs.integers(0, 2 ** 63) if isinstance(rs, np.random.Generator)
                                     else rs.randint(0, 2 ** 31))
            else:
                raise ValueError(f"random_state must be an int, None or a numpy Generator, got {rs!r}")
        return self._entropy_

    def _matrix(self, X, fitting: bool):
        """(array, names or None) from an array or a frame of numeric features."""
        if _is_frame(X):
            names = list(X.columns) if (fitting or getattr(self, "feature_names_in_", None) is None) \
                else list(self.feature_names_in_)
            if not fitting and getattr(self, "feature_names_in_", None) is not None:
                missing = [c for c in names if c not in X.columns]
                if missing:
                    raise SchemaError(f"feature column(s) {', '.join(map(repr, missing))} seen in fit "
                                      "are missing here")
            _require_numeric(X, names)
            return _frame_matrix(X, names), names
        arr = X if type(X).__module__.startswith("cupy") else np.asarray(X)
        if arr.ndim != 2:
            raise InputError(f"DISTPAB expects a 2-D (rows x features) array, got {arr.ndim}-D")
        if not np.issubdtype(np.dtype(arr.dtype), np.number) or np.issubdtype(np.dtype(arr.dtype),
                                                                              np.complexfloating):
            raise SchemaError(f"DISTPAB perturbs real numeric features only; the array's dtype is {arr.dtype}")
        return arr, None

    # -- fitting
    def fit(self, X, y=None):
        """Centralized fit: one entity holding every row."""
        return self.fit_entities([X])

    def fit_entities(self, entities: Sequence[Any]):
        """Distributed fit: only :func:`local_stats` of each entity's rows reach :meth:`fit_stats`."""
        xp = self._xp()
        stats, names = [], None
        for X in entities:
            arr, nm = self._matrix(X, fitting=True)
            if names is None:
                names = nm
            elif nm is not None and nm != names:
                raise SchemaError("entities have different feature columns: "
                                  f"{names} vs {nm}")
            stats.append(local_stats(arr, xp))
        return self.fit_stats(stats, feature_names=names)

    def fit_stats(self, stats_list: Sequence[Stats], feature_names=None):
        """The coordinator's work: merge, finalize, search, draw the translation, build ``H``."""
        xp = self._xp()
        stats_list = list(stats_list) if not isinstance(stats_list, Stats) else [stats_list]
        if not stats_list:
            raise InputError("fit needs at least one entity")
        if not (isinstance(self.noise, numbers.Real) and np.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"noise must be a finite number >= 0, got {self.noise!r}")
        if not (isinstance(self.block_rows, numbers.Integral) and self.block_rows >= 1):
            raise ValueError(f"block_rows must be a positive integer, got {self.block_rows!r}")
        ds = {s.n_features for s in stats_list}
        if len(ds) != 1:
            raise InputError(f"entities sent statistics of different widths: {sorted(ds)}")
        d = ds.pop()
        if feature_names is not None and len(feature_names) != d:
            raise InputError(f"{len(feature_names)} feature names for {d} columns")
        merged = merge_all(stats_list)
        self._entropy_ = None  # a refit reads random_state again (None: fresh entropy)
        self._entropy()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mean, sigma, S, const = finalize(merged, names=feature_names)
        for w in caught:
            warnings.warn(w.message, w.category, stacklevel=2)
        active = np.flatnonzero(~const)
        if active.size == 0:
            raise InputError("every feature column is constant; there is nothing to perturb")
        res = search(S[np.ix_(active, active)], self.angles, self.selection, xp)

        central = np.random.default_rng(np.random.SeedSequence(self._entropy(), spawn_key=(0,)))
        t = central.uniform(0.0, 1.0, size=d)
        t[const] = 0.0
        na = active.size
        Ha = homogeneous_matrix(res.angle, res.axis, t[active], na)
        H = np.eye(d + 1)
        idx = np.append(active, d)
        H[np.ix_(idx, idx)] = Ha
        Ra = rotation_matrices([res.angle], na)[0]
        R = np.eye(d)
        R[np.ix_(active, active)] = Ra

        self.search_ = res
        self.phi_ = float(res.phi)
        self.angle_degrees_ = float(res.angle)
        self.axis_ = int(active[res.axis])
        v = np.zeros(d)
        v[active] = res.variances
        self.variances_ = v
        self.mean_ = mean
        self.scale_ = sigma
        self.translation_ = t
        self.rotation_ = R
        self.homogeneous_ = H
        self.constant_mask_ = const
        self.constant_columns_ = ([feature_names[i] for i in np.flatnonzero(const)] if feature_names is not None
                                  else [int(i) for i in np.flatnonzero(const)])
        self.n_features_in_ = d
        if feature_names is not None:
            self.feature_names_in_ = np.asarray(feature_names, dtype=object)
        else:
            self.__dict__.pop("feature_names_in_", None)
        self.n_entities_ = len(stats_list)
        self.n_rows_ = int(merged.n)
        self.params_ = PerturbParams(mean=mean, scale=sigma, H=H, noise=float(self.noise))
        self.bytes_sent_per_entity_ = 8 * (1 + d + d * d)
        self.bytes_received_per_entity_ = self.params_.nbytes
        self.bytes_per_entity_ = self.bytes_sent_per_entity_ + self.bytes_received_per_entity_
        return self

    # -- applying
    def entity_seed(self, entity: int) -> np.random.SeedSequence:
        """The random stream of ``entity`` (noise and shuffle)."""
        return entity_seed(self._entropy(), entity)

    def perturb(self, X, entity: int = 0):
        """Perturb one entity's rows with the fitted parameters: ``(Xp, perm)``.

        Output row ``i`` is input row ``perm[i]`` perturbed (the shuffle); ``Xp`` is float32 for
        float32 input, else float64. Carry labels and other columns with ``perm``.
        """
        if getattr(self, "params_", None) is None:
            raise InputError("DISTPAB is not fitted; call fit or fit_entities first")
        arr, _ = self._matrix(X, fitting=False)
        if int(arr.shape[1]) != self.n_features_in_:
            raise InputError(f"X has {int(arr.shape[1])} feature columns; the model was fitted on "
                             f"{self.n_features_in_}")
        return perturb_entity(arr, self.params_, self.entity_seed(entity), shuffle=self.shuffle,
                              block_rows=self.block_rows, xp=self._xp())

    def fit_perturb(self, X):
        """``fit(X)`` then ``perturb(X, entity=0)``: ``(Xp, perm)``."""
        return self.fit(X).perturb(X, entity=0)

    def transform(self, X, entity: int = 0):
        """The perturbed rows (an array), as a scikit-learn transformer returns them.

        The shuffle's permutation is kept in ``permutation_`` (output row ``i`` is input row
        ``permutation_[i]``). In a ``Pipeline`` with a model after it, pass ``shuffle=False``:
        shuffled rows no longer line up with ``y``.

        >>> from sklearn.pipeline import make_pipeline
        >>> from sklearn.neighbors import KNeighborsClassifier
        >>> from sklearn.datasets import load_wine
        >>> X, y = load_wine(return_X_y=True)
        >>> pipe = make_pipeline(DISTPAB(shuffle=False, random_state=0, backend="cpu"), KNeighborsClassifier())
        >>> bool(pipe.fit(X, y).score(X, y) > 0.5)
        True
        """
        Xp, perm = self.perturb(X, entity=entity)
        self.permutation_ = perm
        return Xp

    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X)`` then ``transform(X, entity=0)``: the perturbed rows (``permutation_`` kept)."""
        return self.fit(X).transform(X, entity=0)

    def report(self) -> dict:
        """The fitted parameters as plain JSON-ready values."""
        names = (list(map(str, self.feature_names_in_)) if getattr(self, "feature_names_in_", None) is not None
                 else [str(i) for i in range(self.n_features_in_)])
        return {"phi": self.phi_, "angle_degrees": self.angle_degrees_, "axis": self.axis_,
                "axis_feature": names[self.axis_], "features": names,
                "variances": [float(v) for v in self.variances_],
                "constant_columns": [str(c) for c in self.constant_columns_],
                "bytes_per_entity": self.bytes_per_entity_, "n_entities": self.n_entities_,
                "selection": self.selection, "noise": float(self.noise),
                "backend": self.backend_.name}


def perturb_frame(df, features, label=None, passengers=None, noise: float = 0.3, angles=None,
                  selection: str = "maximin", shuffle: bool = True, random_state=None, backend=None,
                  block_rows: int = 1 << 20, model: DISTPAB | None = None, entity: int = 0):
    """Perturb a frame's numeric ``features``; ``label`` and ``passengers`` travel with their rows.

    Fits a :class:`DISTPAB` on the frame (centralized) unless a fitted ``model`` is given, then
    perturbs its rows as ``entity``. The output has the feature, label and passenger columns in
    the frame's column order and a fresh ``RangeIndex`` (the original index would undo the
    shuffle); other columns are dropped.

    Returns
    -------
    (DataFrame, DISTPAB)

    Raises
    ------
    SchemaError
        Non-numeric features (all listed; exclude them or pass --features), unknown columns,
        missing values in features.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [2.0, 1, 4, 3], "y": [0, 1, 0, 1]})
    >>> out, model = perturb_frame(df, ["a", "b"], label="y", random_state=0)
    >>> list(out.columns), sorted(out["y"].tolist())
    (['a', 'b', 'y'], [0, 0, 1, 1])
    """
    import pandas as pd  # noqa: PLC0415

    feats, carried = validate_frame(df, features, label, passengers)
    X = _frame_matrix(df, feats)
    if model is None:
        model = DISTPAB(noise=noise, angles=angles, selection=selection, shuffle=shuffle,
                        random_state=random_state, backend=backend, block_rows=block_rows)
        model.fit_stats([local_stats(X, model._xp())], feature_names=feats)
    Xp, perm = model.perturb(X, entity=entity)
    out = pd.DataFrame(Xp, columns=feats, copy=False)
    for c in carried:
        out[c] = df[c].to_numpy()[perm]
    order = [c for c in df.columns if c in set(feats) | set(carried)]
    return out[order] if order != list(out.columns) else out, model
