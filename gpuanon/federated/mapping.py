"""Seed 004's test-time mapping (sections 3.4 to 3.6), off by default.

Each silo shares its "syntactic mapping": the list of its equivalence classes (every class's
generalized QI values: a numeric interval, a set of categories). A new (raw) record is mapped to
the most specific class among the legitimate ones (every value of the class covers the record's
value), the one with the smallest NCP, and the global model scores the record in that class's
generalized form. Records no class covers are scored raw (counted in ``unmapped``).

IBM holds US patent 11,188,791 on this protocol (sharing the equivalence-class mappings and mapping
new records to them); it is offered here for research comparison, off unless ``--test-mapping``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import protocol as P
from ..evaluate import cell_texts, classification_scores
from ..metrics import cell_text, split_set_text
from ..models.nn import load_torch
from .models import predict_scores


def _members(cell, hierarchy) -> list | str:
    t = cell_text(cell)
    if t == "*":
        return "*"
    if hierarchy is not None:
        labels = [str(x) for x in hierarchy.labels]
        if t in labels and t not in [cell_text(v) for v in hierarchy.leaves]:
            node = labels.index(t)
            under = np.nonzero((hierarchy.levels == node).any(axis=1))[0]
            return sorted(cell_text(hierarchy.leaves[i]) for i in under)
    return sorted(cell_text(p) for p in split_set_text(t))  # a missing value's marker: 'NaN', as cell_text


def silo_mapping(out: pd.DataFrame, cfg: dict, hmap: dict) -> list:
    """The silo's equivalence classes: one entry per distinct generalized QI tuple (each has >= k rows)."""
    qi = list(cfg["qi"])
    cols = []
    for q in qi:
        cols += [f"{q}_min", f"{q}_max"] if f"{q}_min" in out.columns else [q]
    ecs = out[cols].drop_duplicates()
    res = []
    for _, r in ecs.iterrows():  # a loop over classes, not rows (once per silo)
        ec = {}
        for q in qi:
            if f"{q}_min" in out.columns:
                lo, hi = r[f"{q}_min"], r[f"{q}_max"]
                ec[q] = [None if pd.isna(lo) else float(lo), None if pd.isna(hi) else float(hi)]
            else:
                ec[q] = _members(r[q], hmap.get(q))
        res.append(ec)
    return res


def map_records(test: pd.DataFrame, space, ecs: list) -> tuple[pd.DataFrame, np.ndarray]:
    """Each test record in the form of its most specific legitimate class (smallest NCP); ``mapped`` says
    which records had one (the others keep their raw values)."""
    qi = [q for q in space.quasi_identifiers]
    num = [q for q in qi if space.kinds[q] == "numeric"]
    cat = [q for q in qi if space.kinds[q] != "numeric"]
    m = len(ecs)
    lo = {q: np.array([np.nan if e[q][0] is None else e[q][0] for e in ecs]) for q in num}
    hi = {q: np.array([np.nan if e[q][1] is None else e[q][1] for e in ecs]) for q in num}
    cover, size = {}, {}
    for q in cat:
        cats = space.categories[q]
        idx = {c: i for i, c in enumerate(cats)}
        M = np.zeros((m, len(cats)), dtype=bool)
        for j, e in enumerate(ecs):
            if e[q] == "*":
                M[j] = True
            else:
                M[j, [idx[v] for v in e[q] if v in idx]] = True
        cover[q], size[q] = M, M.sum(axis=1)
    # NCP of each class: numeric width / global range, categorical (|set| - 1) / (|domain| - 1)
    ncp = np.zeros(m)
    for q in num:
        rng = np.nanmax(hi[q]) - np.nanmin(lo[q])
        ncp += np.nan_to_num((hi[q] - lo[q]) / rng if rng > 0 else 0.0, nan=1.0)
    for q in cat:
        d = len(space.categories[q])
        ncp += (size[q] - 1) / max(d - 1, 1)
    ncp /= max(len(qi), 1)
    n = len(test)
    choice = np.full(n, -1, dtype=np.int64)
    vals = {q: pd.to_numeric(test[q], errors="coerce").to_numpy(dtype=float) for q in num}

    codes = {q: pd.Index(space.categories[q]).get_indexer(cell_texts(test[q])) for q in cat}
    block = max(1, 2_000_000 // max(m, 1))
    for s in range(0, n, block):  # blocks of test rows x every class
        e = slice(s, min(n, s + block))
        ok = np.ones((e.stop - e.start, m), dtype=bool)
        for q in num:
            v = vals[q][e][:, None]
            ok &= (lo[q][None, :] <= v) & (v <= hi[q][None, :])
        for q in cat:
            c = codes[q][e]
            ok &= np.where(c[:, None] >= 0, cover[q][:, np.maximum(c, 0)].T, False)
        score = np.where(ok, ncp[None, :], np.inf)
        best = np.argmin(score, axis=1)
        has = np.isfinite(score[np.arange(len(best)), best])
        choice[e] = np.where(has, best, -1)
    mapped = choice >= 0
    out = test.copy()
    for q in num:
        out[f"{q}_min"] = np.where(mapped, lo[q][np.maximum(choice, 0)], vals[q])
        out[f"{q}_max"] = np.where(mapped, hi[q][np.maximum(choice, 0)], vals[q])
        out = out.drop(columns=q)
    for q in cat:
        cats = np.asarray(space.categories[q], dtype=object)
        texts = np.array(["|".join(cats[cover[q][j]]) for j in range(m)], dtype=object)
        out[q] = np.where(mapped, texts[np.maximum(choice, 0)], cell_texts(test[q]))
    return out, mapped


def mapped_scores(net, spec, space, test, maps: list, mean, std, y_test, classes, pos, cfg) -> dict:
    """Scores of the global model on the test rows mapped to the union of the silos' classes."""
    torch = load_torch()
    ecs = [e for m in maps for e in m]
    gen, mapped = map_records(test, space, ecs)
    X = np.zeros((len(test), space.n_features))
    if mapped.any():
        X[mapped] = space.transform_generalized(gen[mapped].reset_index(drop=True))
    if (~mapped).any():  # no class covers these records: scored in their raw form
        X[~mapped] = space.transform_raw(test[~mapped].reset_index(drop=True))
    X = P.apply_scaler(X, mean, std)
    S = predict_scores(net, torch.from_numpy(X))
    sc = classification_scores(y_test, np.argmax(S, axis=1), S, len(classes), pos)
    return {**{k: float(v) for k, v in sc.items()}, "n_classes_shared": len(ecs),
            "unmapped": int((~mapped).sum()), "patent_note": "IBM holds US patent 11,188,791 on this protocol"}
