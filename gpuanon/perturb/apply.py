"""DISTPAB's perturbation at an entity: its rows, block by block, with the coordinator's parameters.

:class:`PerturbParams` is what the coordinator sends back (global mean, scale, the homogeneous
matrix, the noise); :func:`perturb_block` applies them to one block of rows (z-score, reflect,
translate, rotate, randomized expansion) and :func:`perturb_entity` runs the blocks of one entity
with its own random stream (:func:`entity_seed`) for the noise and the shuffle.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..backend import is_device_array, to_device, to_host

__all__ = ["PerturbParams", "entity_seed", "perturb_block", "perturb_entity"]

#: On the CPU, rows transformed per pass inside a block (cache-sized: 3 x 32768 x d x 8 bytes).
_CPU_TILE_ROWS = 1 << 15
_PREFETCH_NOISE = True


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
    >>> from gpuanon.perturb.angle_search import homogeneous_matrix
    >>> H = homogeneous_matrix(10, 0, [0.0, 0.0], 2)
    >>> Xp = perturb_block(np.array([[1.0, 2.0], [3.0, 4.0]]), [2.0, 3.0], [1.0, 1.0], H, 0.0, None)
    >>> np.allclose(np.linalg.norm(Xp[0] - Xp[1]), np.linalg.norm([2.0, 2.0]))
    True
    """
    r, d = int(X.shape[0]), int(X.shape[1])
    if work is None or int(work["Z"].shape[0]) < r:
        work = _workspace(xp, r, d)
    p = work.get("params")
    if p is None or any(a is not b for a, b in zip(p["of"], (mean, sigma, H))):
        p = work["params"] = _block_params(mean, sigma, H, xp)
    mu, sig, Hd, const = p["mu"], p["sig"], p["H"], p["const"]
    Xd = X if isinstance(X, type(work["Z"])) else to_device(X, xp)
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
    if p["const_idx"] is not None:
        Y[:, const] = Xd[:, p["const_idx"]]
    return Y


def _block_params(mean, sigma, H, xp) -> dict:
    """The parameters a block needs, on the device of ``xp``: copied once per entity (the blocks of
    an entity share them through its workspace), not once per block."""
    sig_h = np.asarray(to_host(sigma), dtype=np.float64)
    const = sig_h == 0
    return {"of": (mean, sigma, H), "const": const,
            "mu": to_device(mean, xp).astype(xp.float64, copy=False),
            "sig": to_device(np.where(const, 1.0, sig_h), xp),
            "H": to_device(H, xp).astype(xp.float64, copy=False),
            "const_idx": to_device(np.flatnonzero(const), xp) if const.any() else None}


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
    host_input = xp is not np and not is_device_array(X)
    if host_input:
        X = to_device(X, xp)  # one copy up; the perturbed rows come back in one copy at the end
    on_device = is_device_array(X)
    out = xp.empty((m, d), dtype=out_dtype) if on_device else np.empty((m, d), dtype=out_dtype)
    if shuffle:
        dest = np.empty(m, dtype=np.int64)
        dest[perm] = np.arange(m, dtype=np.int64)        # input row j goes to output row dest[j]
        if on_device:
            dest = to_device(dest, xp)
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
                Yb = to_host(Yb)
            if shuffle:
                out[dest[a:b]] = Yb
            else:
                out[a:b] = Yb
    finally:
        limits.__exit__(None, None, None)
        if pool is not None:
            pool.shutdown(wait=True)
    if host_input:
        out = to_host(out)
    return out, perm

