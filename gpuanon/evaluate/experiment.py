"""The evaluation protocol: split, protect the training part, train every model, test on raw rows.

The protocol of the contract's section 9 (the thesis's chapter 3 and section 5.2): one stratified,
seeded split of the original table (70 / 30 by default); each protection
(:mod:`gpuanon.evaluate.protections`) is applied to the training part only; each model
(:mod:`gpuanon.evaluate.models`) is trained on it in the shared feature space
(:mod:`gpuanon.evaluate.features`) and tested on the raw held-out rows; every score sits beside the
protection's information-loss metrics, and each metric's rank correlation with the accuracy drop
says which one predicted the cost. DISTPAB's held-out rows go through the same fitted perturbation
as its training rows: a model cannot be tested in another coordinate system than the one it was
trained in.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..attack.summary import attack_release
from ..backend import get_backend
from ..errors import InputError, SchemaError, shown
from .features import FeatureSpace
from .models import (MODEL_NAMES, MODEL_TITLES, SCALED_MODELS, SCORE_COLUMNS, classification_scores, make_model,
                     parse_models, predict_scores, prepare_features)
from .protections import DEFAULT_PROTECTIONS, Protected, Protection, Setup, parse_protections

log = logging.getLogger("gpuanon")

LOSS_METRICS = ["entropy_loss", "entropy_loss_labels", "ncp", "gionis_tassa", "dm", "cm", "c_avg"]
RESULT_COLUMNS = (["protection", "kind", "model", "model_title", "library", "n_train", "n_test", "n_features"]
                  + SCORE_COLUMNS + ["accuracy_drop", "train_seconds", "predict_seconds"]
                  + LOSS_METRICS + ["hierarchy_precision", "n_classes", "n_suppressed"])


@dataclass
class Evaluation:
    """Everything one evaluation produced: ``results`` (one row per protection and model) and the rest."""

    results: pd.DataFrame
    protections: list[dict]
    correlations: dict
    config: dict
    libraries: dict
    seconds: float

    def to_dict(self) -> dict:
        res = self.results.astype(object).where(self.results.notna(), None)
        return {"config": self.config, "libraries": self.libraries, "protections": self.protections,
                "results": res.to_dict(orient="records"), "rank_correlations": self.correlations,
                "seconds": round(self.seconds, 3)}




@dataclass
class Split:
    """:func:`stratified_split`'s result: both parts (rows in table order, fresh index), the label codes
    of every row, the sorted classes, and the row positions of each part."""

    train: pd.DataFrame
    test: pd.DataFrame
    y: np.ndarray
    classes: pd.Index
    idx_train: np.ndarray
    idx_test: np.ndarray


def stratified_split(df: pd.DataFrame, target: str, test_size: float = 0.3, random_state: int = 0) -> Split:
    """The protocol's one split (SPEC 9), shared by ``evaluate`` and the federated run: stratified on
    ``target``, seeded, each part's rows kept in the table's order.

    Raises
    ------
    SchemaError
        Missing target values, a single class, or a class with one row.
    """
    from sklearn.model_selection import train_test_split  # noqa: PLC0415

    if df[target].isna().any():
        raise SchemaError(f"target column '{target}' has {int(df[target].isna().sum())} missing values; drop or fill "
                          "them first")
    y, classes = pd.factorize(df[target], sort=True)
    if len(classes) < 2:
        raise SchemaError(f"target column '{target}' has a single value; a classifier needs two or more")
    counts = np.bincount(y, minlength=len(classes))
    if counts.min() < 2:
        raise SchemaError(f"target value {shown(classes[int(np.argmin(counts))])} occurs once; a stratified split needs "
                          "at least two rows of every class")
    tr, te = train_test_split(np.arange(len(df)), test_size=float(test_size), stratify=y,
                              random_state=int(random_state))
    tr.sort()
    te.sort()
    return Split(df.iloc[tr].reset_index(drop=True), df.iloc[te].reset_index(drop=True), y, classes, tr, te)


def rank_correlations(results: pd.DataFrame, metrics: Sequence[str] = LOSS_METRICS) -> dict:
    """Spearman correlation of each information-loss metric with the accuracy drop, across protections.

    Per model, and for the drop averaged over the models (key ``'mean'``); protections without the
    metric (DISTPAB, or C_avg of raw) are left out; fewer than three points or a constant side give
    ``None``.
    """
    from scipy.stats import spearmanr  # noqa: PLC0415

    out: dict = {}
    metrics = [m for m in metrics if m in results.columns]
    df = results.dropna(subset=["accuracy_drop"])
    if df.empty:
        return out
    mean = df.groupby("protection", sort=False).agg({"accuracy_drop": "mean", **{m: "first" for m in metrics}})
    for metric in metrics:
        row = {}
        groups = [(mdl, g) for mdl, g in df.groupby("model", sort=False)] + [("mean", mean)]
        for mdl, g in groups:
            x = pd.to_numeric(g[metric], errors="coerce").to_numpy(dtype=float)
            y = g["accuracy_drop"].to_numpy(dtype=float)
            ok = ~np.isnan(x) & ~np.isnan(y)
            if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
                row[mdl] = None
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = spearmanr(x[ok], y[ok]).statistic
            row[mdl] = None if np.isnan(r) else float(r)
        out[metric] = row
    return out


def _check_request(df: pd.DataFrame, prots: list, target, qi: list, test_size) -> None:
    """The one-line errors of a request that no protection can run on."""
    if target is None:
        raise InputError("no target column given; pass target= (--target COLUMN)")
    if target not in df.columns:
        raise SchemaError(f"target column '{target}' is not in the table; columns: {', '.join(map(str, df.columns))}")
    if not qi and any(p.needs_quasi_identifiers for p in prots):
        raise InputError("no quasi-identifiers given; pass quasi_identifiers= (--qi COL1,COL2,...)")
    if target in qi:
        raise SchemaError(f"the target '{target}' cannot also be a quasi-identifier")
    if not 0.0 < float(test_size) < 1.0:
        raise InputError(f"test_size must be between 0 and 1 (exclusive), got {test_size}")


def _positive_class(sp: Split, positive, target: str) -> int | None:
    """The positive class's code: the one named, else the training part's minority class of a binary target."""
    n_classes = len(sp.classes)
    if positive is None:
        return int(np.argmin(np.bincount(sp.y[sp.idx_train], minlength=n_classes))) if n_classes == 2 else None
    hit = [i for i, c in enumerate(sp.classes) if str(c) == str(positive)]
    if not hit:
        raise InputError(f"positive class {positive!r} is not a value of '{target}': "
                         f"{', '.join(map(str, sp.classes))}")
    return hit[0]


def _protect(p: Protection, sp: Split, setup: Setup) -> tuple[Protected, dict]:
    """Apply one protection to the training part; its entry of the report's protections."""
    t0 = time.perf_counter()
    info: dict[str, Any] = {"protection": p.name, "kind": p.kind, "params": dict(p.params)}
    got = p.apply(sp.train, sp.test, setup)
    info.update(got.info)
    info.update({k_: v for k_, v in got.metrics.items()})
    info["n_train"] = int(len(got.y_train))
    info["n_features"] = int(got.X_train.shape[1])
    info["protect_seconds"] = round(time.perf_counter() - t0, 4)
    if len(np.unique(got.y_train)) < 2:
        raise InputError(f"protection '{p.name}' left a single target class in the training part; no "
                         "classifier can be trained on it (lower k / l / t, or raise the suppression budget)")
    log.info("protection %s: %d training rows, %d features (%.2f s)", p.name, len(got.y_train),
             got.X_train.shape[1], info["protect_seconds"])
    return got, info


def _score_models(p: Protection, got: Protected, model_keys: list, be, n_classes: int, pos, random_state: int,
                  libraries: dict, progress) -> list[dict]:
    """Train every model on one protection's training features, test each on its held-out rows."""
    rows = []
    y_tr, y_test = got.y_train, got.y_test
    prepared = prepare_features(got.X_train, got.X_test)
    for key in model_keys:
        est, lib = make_model(key, be.name, random_state=int(random_state))
        libraries[key] = lib
        if key == "svm" and lib == "sklearn" and len(y_tr) > 50_000:
            log.warning("SVM: scikit-learn's SVC scales about quadratically with the %d training rows and may "
                        "take hours; leave 'svm' out of --models, sample with --rows, or use a GPU with cuML",
                        len(y_tr))
        Xtr, Xte = prepared[key in SCALED_MODELS]
        t1 = time.perf_counter()
        est.fit(Xtr, y_tr)
        t2 = time.perf_counter()
        pred, S = predict_scores(est, Xte, n_classes)
        t3 = time.perf_counter()
        sc = classification_scores(y_test, pred, S, n_classes, pos)
        row = {"protection": p.name, "kind": p.kind, "model": key, "model_title": MODEL_TITLES[key],
               "library": lib, "n_train": int(len(y_tr)), "n_test": int(len(y_test)),
               "n_features": int(Xtr.shape[1]), **sc, "train_seconds": round(t2 - t1, 4),
               "predict_seconds": round(t3 - t2, 4), **got.metrics}
        rows.append(row)
        log.info("  %-19s accuracy %.4f  F1 %.4f  AUC %.4f  (train %.2f s, %s)", MODEL_TITLES[key],
                 sc["accuracy"], sc["f1"], sc["roc_auc"], t2 - t1, lib)
        if progress:
            progress(row)
    return rows


def _results_frame(rows: list[dict]) -> tuple[pd.DataFrame, dict]:
    """The results table (every column, the accuracy drop against raw) and the rank correlations."""
    res = pd.DataFrame(rows)
    for c in RESULT_COLUMNS:
        if c not in res.columns:
            res[c] = np.nan
    raw_acc = res[res["kind"] == "raw"].groupby("model")["accuracy"].first()
    res["accuracy_drop"] = res["model"].map(raw_acc).astype(float) - res["accuracy"]
    res = res[RESULT_COLUMNS]
    return res, (rank_correlations(res) if not raw_acc.empty else {})


def _attack(release: pd.DataFrame, sp: Split, qi: list, sensitive: str, n_attacks: int, seed: int) -> dict:
    """The attacks on one protection's release: the training rows its original, the held-out rows its control."""
    t0 = time.perf_counter()
    out = attack_release(release, sp.train, sp.test, quasi_identifiers=qi, secret=sensitive, n_attacks=int(n_attacks),
                         seed=int(seed))
    log.info("  attacks: %s (%.2f s)", ", ".join(f"{k} {v['risk']:.3f}" for k, v in out.items()
                                                 if v["risk"] is not None), time.perf_counter() - t0)
    return out


def run_evaluation(df: pd.DataFrame, protections=DEFAULT_PROTECTIONS, models: Sequence[str] | str = MODEL_NAMES, *,
                   quasi_identifiers: Sequence[str] | None = None, target: str | None = None,
                   sensitive: str | None = None, identifiers: Sequence[str] | None = None,
                   numeric: Sequence[str] | None = None, categorical: Sequence[str] | None = None,
                   test_size: float = 0.3, random_state: int = 0, backend: str | None = None,
                   max_suppression: float = 0.01, positive=None, attacks: int | None = None,
                   progress: Callable[[dict], None] | None = None) -> Evaluation:
    """Split once, protect the training part, train every model, test on raw held-out rows.

    Parameters
    ----------
    df : the original table.
    protections : ``'raw;k=3;k=3,l=2;k=3,t=0.2;k=3,optimize;distpab'`` or a list of such texts / dicts.
    models : keys of :data:`MODEL_NAMES`, a comma-separated text, or ``'all'``.
    quasi_identifiers, target : required; ``sensitive`` defaults to the target (the thesis's setup).
    positive : the positive class of a binary target (default: the training part's minority class).
    random_state : seeds the split, every model and every protection's randomness.
    attacks : attacks of each kind on every protection's release (singling out, linkability, inference
        of the sensitive column; :mod:`gpuanon.attack`), the held-out rows the control: each protection's
        entry gets ``attacks`` (its risks); None: no attacks.

    Returns
    -------
    :class:`Evaluation`
    """
    t_start = time.perf_counter()
    prots = parse_protections(protections)
    model_keys = parse_models(models)
    qi = list(quasi_identifiers or [])
    _check_request(df, prots, target, qi, test_size)
    identifiers = [c for c in (identifiers or []) if c in df.columns]
    sensitive = sensitive or target
    be = get_backend(backend)
    data = df.reset_index(drop=True)
    sp = stratified_split(data, target, test_size, random_state)
    pos = _positive_class(sp, positive, target)
    kinds = {c: "numeric" for c in (numeric or [])} | {c: "categorical" for c in (categorical or [])}
    space = FeatureSpace.from_frame(sp.train, qi, kinds, exclude=[target, *identifiers])
    setup = Setup(data, qi, sensitive, target, identifiers, numeric, categorical, backend, max_suppression,
                  int(random_state), space, sp.classes, sp.y[sp.idx_train], sp.y[sp.idx_test],
                  space.transform_raw(sp.test))
    log.info("evaluation: %d rows -> %d training / %d test (stratified, seed %d); %d features; backend %s",
             len(data), len(sp.train), len(sp.test), random_state, space.n_features, be.name)
    # Every protection is validated before any runs: one found bad at the end would waste the others' time.
    for p in prots:
        p.validate(sp.train, setup)
    rows, prot_info, libraries = [], [], {}
    for p in prots:
        got, info = _protect(p, sp, setup)
        if attacks and got.release is not None:
            info["attacks"] = _attack(got.release, sp, qi, sensitive, attacks, random_state)
        rows += _score_models(p, got, model_keys, be, len(sp.classes), pos, random_state, libraries, progress)
        prot_info.append(info)
    res, corr = _results_frame(rows)
    config = {"n_rows": int(len(data)), "n_train": int(len(sp.train)), "n_test": int(len(sp.test)),
              "test_size": float(test_size), "random_state": int(random_state), "target": target,
              "classes": [str(c) for c in sp.classes], "positive": None if pos is None else str(sp.classes[pos]),
              "quasi_identifiers": qi, "sensitive": sensitive, "backend": be.name, "device": be.device,
              "features": space.columns, "n_features_raw": space.n_features, "models": model_keys,
              "protections": [p.name for p in prots], **({"attacks": int(attacks)} if attacks else {})}
    return Evaluation(res, prot_info, corr, config, libraries, time.perf_counter() - t_start)


def evaluate(df: pd.DataFrame, protections=DEFAULT_PROTECTIONS, models: Sequence[str] | str = MODEL_NAMES,
             **kwargs) -> pd.DataFrame:
    """:func:`run_evaluation`'s results table (one row per protection and model)."""
    return run_evaluation(df, protections, models, **kwargs).results

