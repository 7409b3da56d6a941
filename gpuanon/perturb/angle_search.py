"""DISTPAB's central search: every (rotation angle, reflection axis) pair at once, from ``S`` alone.

``R_theta`` is the product of the Givens rotations of all pairs ``i < j`` in lexicographic order
(:func:`rotation_matrices`, built for every angle in one batch); the variance of ``z - perturbed z``
on each attribute for every pair is one batched computation (:func:`variance_table`), and
:func:`search` chooses the pair (maximin, or max). :func:`homogeneous_matrix` turns the choice and
the translation into the one ``(n+1, n+1)`` matrix sent back to every entity.

>>> import numpy as np
>>> r = search(np.array([[1.0, 0.3], [0.3, 1.0]]), angles=[10, 80])
>>> r.table.shape
(2, 2)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backend import is_device_array, to_device, to_host

__all__ = ["DEFAULT_ANGLES", "TIE_TOL", "SearchResult", "homogeneous_matrix", "rotation_matrices", "search",
           "variance_table"]

#: Angles searched by default: 1..179 degrees without the 7 "special" ones (172 angles).
DEFAULT_ANGLES: tuple[int, ...] = tuple(
    a for a in range(1, 180) if a not in (30, 45, 60, 90, 120, 135, 150))

#: Values of phi closer than this count as ties (smallest angle, then smallest axis, wins).
TIE_TOL = 1e-12


def rotation_matrices(angles_deg, n: int, xp=np):
    """Concatenated sub-plane rotation ``R_theta`` for every angle: shape ``(len(angles), n, n)``.

    ``R_theta = G_(0,1) G_(0,2) ... G_(n-2,n-1)`` -- all pairs ``i < j`` in lexicographic order,
    multiplied left to right (the paper's algorithm 4), every ``G_ij`` with the same angle.
    Built for all angles at once: starting from the identity, each right multiplication by
    ``G_ij`` changes only columns ``i`` and ``j`` of ``R``,
    ``R[:, i], R[:, j] = c R[:, i] + s R[:, j], c R[:, j] - s R[:, i]``; the batch is kept as
    ``W[i, r, a] = R[a, r, i]`` so that each update touches two contiguous ``(n, angles)`` slabs.
    The matrices are built on the host (NumPy: the same bits on every backend, and no stream of
    small device launches) and copied to the device of ``xp`` once.

    Examples
    --------
    >>> R = rotation_matrices([90], 2)[0]
    >>> np.round(R, 12).tolist()
    [[0.0, -1.0], [1.0, 0.0]]
    """
    ang = np.deg2rad(np.asarray(to_host(angles_deg) if is_device_array(angles_deg) else angles_deg,
                                dtype=np.float64).reshape(-1))
    k = int(ang.shape[0])
    c = np.cos(ang)
    s = np.sin(ang)
    W = np.broadcast_to(np.eye(n, dtype=np.float64)[:, :, None], (n, n, k)).copy()
    for i in range(n - 1):  # a loop over the n (n - 1) / 2 plane pairs of a small host matrix
        for j in range(i + 1, n):
            wi = W[i].copy()
            wj = W[j]
            W[i] = c * wi + s * wj
            W[j] = c * wj - s * wi
    R = np.ascontiguousarray(W.transpose(2, 1, 0))
    return R if xp is np else to_device(R, xp)


def variance_table(S, angles=DEFAULT_ANGLES, xp=np, R=None):
    """``V[theta, ax, j] = 1 - 2 (A S)_jj + (A S A^T)_jj`` for ``A = R_theta F_ax``, every pair.

    One batched computation over an ``(angles, axes, n, n)`` stack (chunked over angles to
    bound the scratch memory): ``A`` is ``R`` with column ``ax`` negated, ``A S`` is one matrix
    product, ``diag(A S A^T)_j = sum_k (A S)_jk A_jk``.

    Returns
    -------
    array (len(angles), n, n) on the device of ``xp``.
    """
    S = to_device(S, xp).astype(xp.float64, copy=False)
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
    table = to_host(table_d)
    if selection == "maximin":
        per_angle = table.min(axis=1)
        best = per_angle.max()
        ia = int(np.flatnonzero(per_angle >= best - TIE_TOL)[0])
        iax = int(np.flatnonzero(table[ia] <= per_angle[ia] + TIE_TOL)[0])
    else:
        best = table.max()
        ia, iax = (int(v) for v in np.argwhere(table >= best - TIE_TOL)[0])
    variances = to_host(V[ia, iax]).copy()
    return SearchResult(phi=float(table[ia, iax]), angle=float(ang[ia]), axis=iax,
                        variances=variances, table=table, angles=ang, angle_index=ia)


def homogeneous_matrix(angle_deg, axis: int, translation, n: int, xp=np, R=None):
    """Reflect, translate and rotate as ONE ``(n+1, n+1)`` matrix for row vectors.

    ``[z, 1] @ H = [(z F + t) R^T, 1]`` with ``F`` the reflection of ``axis`` (0-based), ``t``
    the translation and ``R = R_theta`` (:func:`rotation_matrices`). ``H`` is the product of the
    homogeneous reflection, translation and rotation matrices in the order they act:
    ``H = F_h T_h R_h`` with ``F_h = diag(F, 1)``, ``T_h = [[I, 0], [t, 1]]``,
    ``R_h = diag(R^T, 1)``; hence ``H = [[F R^T, 0], [t R^T, 1]]``. ``R``: ``R_theta`` when the
    caller has it already (else built by :func:`rotation_matrices`).

    Examples
    --------
    >>> H = homogeneous_matrix(90, 0, [0.5, 0.0], 2)
    >>> np.round(np.array([1.0, 2.0, 1.0]) @ H, 12).tolist()   # z=(1,2): zF+t=(-0.5,2); R^T
    [-2.0, -0.5, 1.0]
    """
    t = to_device(translation, xp).astype(xp.float64, copy=False).reshape(-1)
    if int(t.shape[0]) != n:
        raise ValueError(f"translation has {int(t.shape[0])} values, expected {n}")
    if not 0 <= int(axis) < n:
        raise ValueError(f"axis {axis} is out of range for {n} columns (0-based)")
    R = rotation_matrices([angle_deg], n, xp)[0] if R is None else to_device(R, xp)
    Fh = xp.eye(n + 1, dtype=xp.float64)
    Fh[int(axis), int(axis)] = -1.0
    Th = xp.eye(n + 1, dtype=xp.float64)
    Th[n, :n] = t
    Rh = xp.eye(n + 1, dtype=xp.float64)
    Rh[:n, :n] = R.T
    return Fh @ Th @ Rh

