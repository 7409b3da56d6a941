"""Attacks on a release (SPEC 14, docs/attack.md): singling out, linkability and inference, with
anonymeter 1.1.0's statistics, on published cells read as sets.

Reads tables only (the release, the original rows it was made from, control rows from the same
population that were not); never the anonymizer. ``evaluate`` runs the attacks asked and returns a
strict-JSON-ready dict:

>>> import pandas as pd
>>> o = pd.DataFrame({"age": [20, 30, 40, 50], "sex": ["f", "m", "f", "m"]})
>>> r = evaluate(o, o, quasi_identifiers=["age", "sex"], attacks=["singling-out"], n_attacks=4)
>>> r["singling_out"]["univariate"]["n_success"]
4
"""

from __future__ import annotations

import time

from ..backend import get_backend, stage
from ..errors import InputError, shown
from .cells import Encoded, encode
from .device import Cells
from .neighbours import inference, linkability
from .singling import singling_out

ATTACKS = ("singling-out", "linkability", "inference")

__all__ = ["ATTACKS", "Encoded", "encode", "evaluate", "inference", "linkability", "singling_out"]


def _aux_split(aux, qi: list) -> tuple[list, list]:
    if aux is None:
        if len(qi) < 2:
            raise InputError("linkability needs two column sets: give at least two --qi columns or --aux A1,A2|B1,B2")
        half = (len(qi) + 1) // 2
        return qi[:half], qi[half:]
    a, b = [list(x) for x in aux]
    if not a or not b:
        raise InputError("--aux needs two non-empty column sets, e.g. --aux age,sex|zip,job")
    both = set(a) & set(b)
    if both:
        raise InputError(f"--aux column sets must be disjoint; '{shown(sorted(both)[0])}' is in both")
    return a, b


def evaluate(release, original, control=None, *, quasi_identifiers=None, secrets=(), columns=None,
             attacks=ATTACKS, n_attacks: int = 2000, aux=None, n_neighbours: int = 1, n_cols: int = 3,
             confidence_level: float = 0.95, seed: int = 0, hierarchies: dict | None = None,
             backend: str | None = None) -> dict:
    """Run the ``attacks`` on ``release`` (pandas frames).

    ``columns``: what singling out builds predicates on (default: every column of the original that the
    release publishes). ``quasi_identifiers``: what the attacker knows of a target, the inference's aux
    columns and the linkability's default split (default: ``columns`` less the secrets). ``aux``: the
    linkability's two disjoint column sets. ``secrets``: the inference's targets, one attack each.
    ``backend``: ``cpu`` (default), ``gpu`` or ``auto``; on the GPU the linkability and inference searches
    run on the device (:mod:`.device`; the same report), and singling out's success counts (:mod:`.device_match`;
    its predicates are generated on the host).
    """
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown:
        raise InputError(f"unknown attack '{shown(unknown[0])}'; choose from {', '.join(ATTACKS)}")
    if n_attacks < 1:
        raise InputError(f"--n-attacks must be at least 1, got {n_attacks}")
    if n_neighbours < 1:
        raise InputError(f"--neighbours must be at least 1, got {n_neighbours}")
    if columns is None:
        columns = [c for c in original.columns if c in release.columns
                   or (f"{c}_min" in release.columns and f"{c}_max" in release.columns)]
    secrets = list(secrets)
    qi = list(quasi_identifiers) if quasi_identifiers else [c for c in columns if c not in secrets]
    if "inference" in attacks and not secrets:
        raise InputError("inference needs a secret column: --secret COLUMN")
    a_cols, b_cols = _aux_split(aux, qi) if "linkability" in attacks else ([], [])
    wanted = list(dict.fromkeys(list(columns) + qi + secrets + a_cols + b_cols))
    t0 = time.process_time()
    e = encode(release, original, control, wanted, hierarchies)
    dev = None
    if backend not in (None, "cpu"):
        be = get_backend(backend, quiet=True, n_rows=len(release))
        dev = Cells(e, be.xp) if be.is_gpu else None
    so_cols = [e.column(c) for c in columns]
    out: dict = {"rows": {"release": len(release), "original": len(original),
                          "control": None if control is None else len(control)},
                 "n_attacks": n_attacks, "confidence_level": confidence_level, "seed": seed,
                 "columns": list(columns), "quasi_identifiers": qi, "secrets": secrets}
    if "singling-out" in attacks:
        sub = Encoded(so_cols, e.release, e.original, e.control)
        with stage("attack_singling_out"):
            out["singling_out"] = {mode: singling_out(sub, n_attacks, mode, n_cols, seed, confidence_level, dev)
                                   for mode in ("univariate", "multivariate")}
    if "linkability" in attacks:
        with stage("attack_linkability"):
            out["linkability"] = linkability(e, (a_cols, b_cols), n_attacks, n_neighbours, seed, confidence_level,
                                             dev)
    if "inference" in attacks:
        with stage("attack_inference"):
            out["inference"] = {s: inference(e, [c for c in qi if c != s], s, n_attacks, seed, confidence_level,
                                             dev) for s in secrets}
    out["cpu_seconds"] = time.process_time() - t0
    return out
