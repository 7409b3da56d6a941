"""Silo splits of a training part: stratified IID (default) and Dirichlet(alpha) label skew.

Both are seeded and return one sorted array of row positions per silo; every row lands in
exactly one silo.

>>> import numpy as np
>>> y = np.repeat([0, 1], [60, 40])
>>> parts = split_silos(y, 3, seed=0)
>>> [len(p) for p in parts], sorted(np.concatenate(parts).tolist()) == list(range(100))
([34, 33, 33], True)
>>> [int((y[p] == 1).sum()) for p in parts]
[14, 13, 13]
>>> skew = split_silos(y, 3, split="dirichlet", alpha=0.5, seed=0)
>>> sum(len(p) for p in skew)
100
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

SPLITS = ("iid", "dirichlet")


def split_silos(y, n_silos: int, split: str = "iid", alpha: float = 0.5, seed: int = 0,
                min_rows: int = 2) -> list[np.ndarray]:
    """Row positions of each silo.

    ``iid``: each class's rows, shuffled, dealt round-robin over the silos (sizes differ by at most
    one per class). ``dirichlet``: for each class a draw ``p ~ Dirichlet(alpha * 1)`` gives the
    silos' shares of that class (small ``alpha``: strong label skew); draws are repeated (seeded)
    until every silo has at least ``min_rows`` rows.
    """
    y = np.asarray(y)
    n_silos = int(n_silos)
    if n_silos < 1:
        raise InputError(f"silos must be at least 1, got {n_silos}")
    if n_silos * max(min_rows, 1) > len(y):
        raise InputError(f"--silos {n_silos} is more than the {len(y)} training rows can fill with at least {min_rows} "
                         f"rows each; give --silos {max(len(y) // max(min_rows, 1), 1)} or fewer")
    split = str(split).lower()
    if split not in SPLITS:
        raise InputError(f"split '{split}' is not one of {', '.join(SPLITS)}")
    if split == "dirichlet" and not (np.isfinite(alpha) and alpha > 0):
        raise InputError(f"--alpha must be a positive number (the Dirichlet concentration), got {alpha}; e.g. "
                         f"--alpha 0.5")
    rng = np.random.default_rng(int(seed))
    _, codes = np.unique(y, return_inverse=True)
    by_class = [rng.permutation(np.flatnonzero(codes == c)) for c in range(int(codes.max()) + 1)]
    if split == "iid":
        parts: list[list[np.ndarray]] = [[] for _ in range(n_silos)]
        offset = 0
        for rows in by_class:  # a loop over classes
            owner = (np.arange(len(rows)) + offset) % n_silos
            for s in range(n_silos):
                parts[s].append(rows[owner == s])
            offset = (offset + len(rows)) % n_silos
        return [np.sort(np.concatenate(p)) for p in parts]
    for _ in range(1000):  # redraw until every silo has rows (seeded, so reproducible)
        parts = [[] for _ in range(n_silos)]
        for rows in by_class:
            p = rng.dirichlet(np.full(n_silos, float(alpha)))
            cuts = (np.cumsum(p)[:-1] * len(rows)).astype(np.int64)
            for s, chunk in enumerate(np.split(rows, cuts)):
                parts[s].append(chunk)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(o) for o in out) >= min_rows:
            return out
    raise InputError(f"Dirichlet({alpha}) left a silo with fewer than {min_rows} rows in 1000 draws; raise alpha "
                     "or use fewer silos")
