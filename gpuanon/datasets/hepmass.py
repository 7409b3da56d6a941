"""Seeded synthetic data shaped like HEPMASS (28 float32 features, a balanced binary label), any size.

Rows are drawn in fixed blocks of 65,536, each from its own random stream, and transformed a
chunk at a time: the frame depends on ``(n_rows, random_state)`` only, never on the chunk size.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["HEPMASS_FEATURES", "HEPMASS_MASSES", "make_hepmass"]

HEPMASS_FEATURES = [f"f{i}" for i in range(28)]
#: The values the discrete mass-like feature ``f27`` takes (as in HEPMASS, the background
#: rows get a mass drawn from the same values as the signal rows).
HEPMASS_MASSES = (500.0, 750.0, 1000.0, 1250.0, 1500.0)

# Rows are generated in fixed blocks of this size, each from its own random stream derived
# from (random_state, block index): the output does not depend on ``chunk_rows``.
_HEPMASS_BLOCK = 1 << 16

# f0..f7: a fixed mixing of 6 latent gaussians (correlated features) plus independent noise.
_HEPMASS_MIX = np.array(
    [
        [0.9, 0.4, 0.0, 0.0, 0.2, 0.0],
        [0.5, 0.0, 0.8, 0.0, 0.0, 0.3],
        [0.0, 0.7, 0.6, 0.0, 0.0, 0.0],
        [0.3, 0.0, 0.0, 0.9, 0.0, 0.0],
        [0.0, -0.6, 0.0, 0.5, 0.4, 0.0],
        [0.0, 0.0, 0.4, 0.0, 0.8, -0.3],
        [-0.4, 0.0, 0.0, 0.3, 0.0, 0.8],
        [0.0, 0.3, -0.5, 0.0, 0.0, 0.7],
    ],
    dtype=np.float32,
)
_HEPMASS_NOISE = np.float32(0.5)
# Mean shift of the signal rows (label 1) on f0..f7.
_HEPMASS_SHIFT = np.array([0.6, 0.0, 0.4, 0.0, -0.5, 0.0, 0.3, 0.0], dtype=np.float32)
# Relative resolution of the mass-like features f22..f26 for signal rows.
_HEPMASS_WIDTH = np.array([0.05, 0.08, 0.12, 0.18, 0.25], dtype=np.float32)


def _check_count(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"make_hepmass: {what} must be a positive integer, got {value!r}")
    value = int(value)
    if value < 1:
        raise ValueError(f"make_hepmass: {what} must be a positive integer, got {value!r}")
    return value


def _fill_block(rng: np.random.Generator, out: np.ndarray, label: np.ndarray,
                latent: np.ndarray, extra: np.ndarray, idx: np.ndarray) -> None:
    """Draw one block's random numbers, in a fixed order, into the given slices."""
    m = label.shape[0]
    label[: m // 2] = 1
    label[m // 2:] = 0
    rng.shuffle(label)
    idx[:] = rng.integers(0, len(HEPMASS_MASSES), size=m, dtype=np.int8)
    f32 = np.float32
    for k in range(latent.shape[0]):
        rng.standard_normal(dtype=f32, out=latent[k])
    for j in range(0, 8):  # noise of the correlated features
        rng.standard_normal(dtype=f32, out=out[j])
    for j in range(8, 12):  # log-normal momenta
        rng.standard_normal(dtype=f32, out=out[j])
        out[j] *= f32(0.7)
        np.exp(out[j], out=out[j])  # per block: chunking cannot change the result
    for j in range(12, 16):  # exponential momenta
        rng.standard_exponential(dtype=f32, out=out[j])
    for j in range(16, 20):  # azimuthal angles
        rng.random(dtype=f32, out=out[j])
    for j in range(20, 22):  # pseudorapidities
        rng.standard_normal(dtype=f32, out=out[j])
    for j in range(22, 27):  # background mass-like shape
        rng.standard_exponential(dtype=f32, out=out[j])
    for k in range(extra.shape[0]):  # signal mass-like resolution: log-normal, positive
        rng.standard_normal(dtype=f32, out=extra[k])
        extra[k] *= _HEPMASS_WIDTH[k]
        np.exp(extra[k], out=extra[k])


def _transform_chunk(out: np.ndarray, label: np.ndarray, latent: np.ndarray,
                     extra: np.ndarray, idx: np.ndarray) -> None:
    """Turn a chunk's raw draws into features, in place (element-wise, exactly rounded ops)."""
    f32 = np.float32
    sig = label.astype(bool)
    sig_f = label.astype(f32)
    masses = np.asarray(HEPMASS_MASSES, dtype=f32)
    mass = masses[idx]
    out[27] = mass
    # f0..f7: correlated gaussians with a label-dependent mean shift.
    for j in range(8):
        row = out[j]
        row *= _HEPMASS_NOISE
        for k in range(latent.shape[0]):
            a = _HEPMASS_MIX[j, k]
            if a != 0:
                row += a * latent[k]
        if _HEPMASS_SHIFT[j] != 0:
            row += _HEPMASS_SHIFT[j] * sig_f
    # f8..f11: log-normal momenta; the signal has a harder spectrum.
    harder = f32(1) + f32(0.35) * sig_f
    for j in range(8, 12):
        out[j] *= harder
    # f12..f15: exponential momenta; two of them carry a little signal.
    out[12] *= f32(1) + f32(0.25) * sig_f
    out[14] *= f32(1) + f32(0.15) * sig_f
    # f16..f19: angles uniform on [-pi, pi); f20..f21: gaussian eta; no signal.
    for j in range(16, 20):
        out[j] *= f32(2 * math.pi)
        out[j] -= f32(math.pi)
    for j in range(20, 22):
        out[j] *= f32(1.2)
    # f22..f26: invariant-mass-like; signal peaks at the mass (in TeV), background is broad.
    mass_tev = mass * f32(1e-3)
    for k, j in enumerate(range(22, 27)):
        bg = out[j]
        bg *= f32(0.6)
        bg += f32(0.4)
        peak = extra[k]
        peak *= mass_tev
        np.copyto(bg, peak, where=sig)


def make_hepmass(n_rows: int, random_state: int = 0,
                 chunk_rows: int = 1_000_000) -> pd.DataFrame:
    """Make seeded synthetic data shaped like the HEPMASS particle-physics benchmark.

    The frame has the 28 ``float32`` feature columns ``f0`` ... ``f27``
    (:data:`HEPMASS_FEATURES`) and an ``int8`` ``label`` column (1 = signal, 0 = background)
    with ``n_rows // 2`` ones: balanced up to one row. The features imitate physics features:

    * ``f0``-``f7``: correlated gaussians (a fixed mixing of 6 latent gaussians plus noise);
      ``f0``, ``f2``, ``f4``, ``f6`` have a label-dependent mean shift;
    * ``f8``-``f15``: positive, heavy-tailed "momenta" (log-normal and exponential); the
      signal has a harder spectrum on ``f8``-``f12`` and ``f14``;
    * ``f16``-``f21``: angles (uniform on [-pi, pi)) and pseudorapidities, without signal;
    * ``f22``-``f26``: invariant-mass-like features: for signal rows they peak at the mass
      (in TeV) with growing log-normal widths; for background rows they follow a broad,
      shifted exponential;
    * ``f27``: the mass parameter, one of :data:`HEPMASS_MASSES` (500 ... 1500), uniform for
      signal and background alike -- a discrete column with many ties.

    All values are finite.

    Parameters
    ----------
    n_rows : int
        Number of rows, at least 1.
    random_state : int, default 0
        Non-negative seed. The same ``(n_rows, random_state)`` always gives the same frame
        (with the same NumPy version); the first rows do not depend on ``n_rows`` either.
    chunk_rows : int, default 1_000_000
        Rows transformed per step (rounded up to a multiple of 65,536). It bounds the scratch
        memory only and never changes the result: rows are drawn in fixed blocks of 65,536,
        each from a random stream seeded by ``SeedSequence(random_state, spawn_key=(block,))``.

    Returns
    -------
    pandas.DataFrame
        ``n_rows`` rows, columns ``f0`` ... ``f27`` (``float32``, one 2-D block, no copy of
        the generated array) and ``label`` (``int8``). About ``n_rows * 113`` bytes.

    Raises
    ------
    ValueError
        If ``n_rows`` or ``chunk_rows`` is not a positive integer, or ``random_state`` is not
        a non-negative integer.

    Examples
    --------
    >>> df = make_hepmass(1000, random_state=1)
    >>> df.shape
    (1000, 29)
    >>> int(df["label"].sum())
    500
    >>> sorted(df["f27"].unique().tolist())
    [500.0, 750.0, 1000.0, 1250.0, 1500.0]
    """
    n = _check_count(n_rows, "n_rows")
    chunk = _check_count(chunk_rows, "chunk_rows")
    if (isinstance(random_state, (bool, np.bool_))
            or not isinstance(random_state, numbers.Integral) or int(random_state) < 0):
        raise ValueError(
            f"make_hepmass: random_state must be a non-negative integer, got {random_state!r}"
        )
    seed = int(random_state)
    block = _HEPMASS_BLOCK
    chunk = max(block, -(-chunk // block) * block)
    chunk = min(chunk, -(-n // block) * block)

    out = np.empty((len(HEPMASS_FEATURES), n), dtype=np.float32)
    label = np.empty(n, dtype=np.int8)
    latent = np.empty((_HEPMASS_MIX.shape[1], chunk), dtype=np.float32)
    extra = np.empty((len(_HEPMASS_WIDTH), chunk), dtype=np.float32)
    idx = np.empty(chunk, dtype=np.int8)

    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        for b0 in range(c0, c1, block):
            b1 = min(c1, b0 + block)
            ss = np.random.SeedSequence(seed, spawn_key=(b0 // block,))
            rng = np.random.Generator(np.random.PCG64(ss))
            s0, s1 = b0 - c0, b1 - c0
            _fill_block(rng, out[:, b0:b1], label[b0:b1], latent[:, s0:s1],
                        extra[:, s0:s1], idx[s0:s1])
        m = c1 - c0
        _transform_chunk(out[:, c0:c1], label[c0:c1], latent[:, :m], extra[:, :m], idx[:m])
    del latent, extra, idx

    # out is (28, n) C-ordered; its transpose is the (n, 28) block pandas stores as is.
    df = pd.DataFrame(out.T, columns=list(HEPMASS_FEATURES), copy=False)
    df["label"] = label
    return df
