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

from ..backend import to_host
from ..errors import InputError, SchemaError
from ..metrics import compute_metrics, summary_from_output
from .features import FeatureSpace
from .models import (MODEL_NAMES, MODEL_TITLES, SCALED_MODELS, SCORE_COLUMNS, classification_scores, make_model,
                     parse_models, predict_scores, prepare_features)
from .protections import DEFAULT_PROTECTIONS, Protection, parse_protections

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




def mondrian_metrics(m) -> dict:
    """A fitted :class:`~gpuanon.anonymize.mondrian.Mondrian`'s information-loss metrics, as the results table names them."""
    met = m.metrics_
    return {"entropy_loss": met.get("entropy_loss"), "entropy_loss_labels": met.get("entropy_loss_labels"),
            "ncp": met.get("ncp"),
            "gionis_tassa": (met.get("gionis_tassa") or {}).get("normalized"), "dm": met.get("dm"),
            "cm": met.get("cm"), "c_avg": met.get("c_avg"), "hierarchy_precision": met.get("precision"),
            "n_classes": met.get("n_classes"), "n_suppressed": met.get("n_suppressed")}



def raw_metrics(train: pd.DataFrame, qi, kinds, target) -> dict:
    """The raw table scored as its own 'anonymization': classes are its distinct QI tuples."""
    met = compute_metrics(summary_from_output(train, train, qi, kinds, target=target))

    def zero(v):  # exact zeros, not float noise, for the table scored against itself
        return 0.0 if v is not None and abs(v) < 1e-12 else v

    return {"entropy_loss": zero(met["entropy_loss"]), "entropy_loss_labels": zero(met["entropy_loss_labels"]),
            "ncp": zero(met["ncp"]),
            "gionis_tassa": zero(met["gionis_tassa"]["normalized"]),
            "dm": met["dm"], "cm": met["cm"], "c_avg": None, "hierarchy_precision": None,
            "n_classes": met["n_classes"], "n_suppressed": 0}



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


def run_evaluation(df: pd.DataFrame, protections=DEFAULT_PROTECTIONS, models: Sequence[str] | str = MODEL_NAMES, *,
                   quasi_identifiers: Sequence[str] | None = None, target: str | None = None,
                   sensitive: str | None = None, identifiers: Sequence[str] | None = None,
                   numeric: Sequence[str] | None = None, categorical: Sequence[str] | None = None,
                   test_size: float = 0.3, random_state: int = 0, backend: str | None = None,
                   max_suppression: float = 0.01, positive=None,
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

    Returns
    -------
    :class:`Evaluation`
    """
    from sklearn.model_selection import train_test_split  # noqa: PLC0415

    from ..backend import get_backend  # noqa: PLC0415
    from ..anonymize.mondrian import Mondrian  # noqa: PLC0415

    t_start = time.perf_counter()
    prots = parse_protections(protections)
    model_keys = parse_models(models)
    if target is None:
        raise InputError("no target column given; pass target= (--target COLUMN)")
    if target not in df.columns:
        raise SchemaError(f"target column '{target}' is not in the table; columns: {', '.join(map(str, df.columns))}")
    qi = list(quasi_identifiers or [])
    if not qi and any(p.kind in ("mondrian", "suppress") for p in prots):
        raise InputError("no quasi-identifiers given; pass quasi_identifiers= (--qi COL1,COL2,...)")
    if target in qi:
        raise SchemaError(f"the target '{target}' cannot also be a quasi-identifier")
    if not 0.0 < float(test_size) < 1.0:
        raise InputError(f"test_size must be between 0 and 1 (exclusive), got {test_size}")
    identifiers = [c for c in (identifiers or []) if c in df.columns]
    sensitive = sensitive or target
    be = get_backend(backend)
    if df[target].isna().any():
        raise SchemaError(f"target column '{target}' has {int(df[target].isna().sum())} missing values; drop or fill "
                          "them first")
    data = df.reset_index(drop=True)
    y_all, classes = pd.factorize(data[target], sort=True)
    n_classes = len(classes)
    if n_classes < 2:
        raise SchemaError(f"target column '{target}' has a single value; a classifier needs two or more")
    counts = np.bincount(y_all, minlength=n_classes)
    if counts.min() < 2:
        raise SchemaError(f"target value {classes[int(np.argmin(counts))]!r} occurs once; a stratified split needs "
                          "at least two rows of every class")
    idx_train, idx_test = train_test_split(np.arange(len(data)), test_size=float(test_size),
                                           stratify=y_all, random_state=int(random_state))
    idx_train.sort()
    idx_test.sort()
    train = data.iloc[idx_train].reset_index(drop=True)
    test = data.iloc[idx_test].reset_index(drop=True)
    y_test_all = y_all[idx_test]
    if positive is None:
        pos = int(np.argmin(np.bincount(y_all[idx_train], minlength=n_classes))) if n_classes == 2 else None
    else:
        hit = [i for i, c in enumerate(classes) if str(c) == str(positive)]
        if not hit:
            raise InputError(f"positive class {positive!r} is not a value of '{target}': "
                             f"{', '.join(map(str, classes))}")
        pos = hit[0]
    kinds = {c: "numeric" for c in (numeric or [])} | {c: "categorical" for c in (categorical or [])}
    space = FeatureSpace.from_frame(train, qi, kinds, exclude=[target, *identifiers])
    num_cols = [c for c in space.columns if space.kinds[c] == "numeric"]
    x_test_raw = space.transform_raw(test)
    log.info("evaluation: %d rows -> %d training / %d test (stratified, seed %d); %d features; backend %s",
             len(data), len(train), len(test), random_state, space.n_features, be.name)

    def mondrian_for(p: Protection) -> Mondrian:
        kw = dict(p.params)
        k = int(len(train)) if p.kind == "suppress" else kw.pop("k")
        hier = kw.pop("hierarchies", None)
        return Mondrian(k=k, quasi_identifiers=qi, sensitive=sensitive, target=target, identifiers=identifiers,
                        numeric=numeric, categorical=categorical, output_format="minmax", backend=backend,
                        progress=False, max_suppression=kw.pop("max_suppression", max_suppression),
                        hierarchies=hier, **kw)

    # Every protection is validated before any runs: one found bad at the end would waste the others' time.
    for p in prots:
        if p.kind == "distpab":
            if not num_cols:
                raise SchemaError(f"protection '{p.name}': DISTPAB perturbs numeric features and the table has "
                                  "none; leave distpab out of --protections")
            gaps = [f"{c} ({int(data[c].isna().sum())} missing)" for c in num_cols if data[c].isna().any()]
            if gaps:
                raise SchemaError(f"protection '{p.name}' needs complete numeric features: {', '.join(gaps)}; fill "
                                  "or drop those values, or leave distpab out of --protections")
            noise = p.params.get("noise", 0.3)
            if not (np.isfinite(noise) and noise >= 0):
                raise InputError(f"protection '{p.name}': noise must be a finite number >= 0, e.g. noise=0.3")
            if p.params.get("selection", "maximin") not in ("maximin", "max"):
                raise InputError(f"protection '{p.name}': selection must be maximin or max")
        elif p.kind in ("mondrian", "suppress"):
            m = mondrian_for(p)
            try:
                m.hierarchy_plan(train, m.validate(train))
            except SchemaError as exc:
                raise SchemaError(f"protection '{p.name}': {exc}") from None
            n_sa = int(train[sensitive].nunique(dropna=False))
            if p.params.get("l", 0) > n_sa:
                raise InputError(f"protection '{p.name}': the training part has {n_sa} distinct '{sensitive}' "
                                 f"value(s), fewer than l = {p.params['l']}; lower l")

    rows, prot_info, libraries = [], [], {}
    for p in prots:
        t0 = time.perf_counter()
        info: dict[str, Any] = {"protection": p.name, "kind": p.kind, "params": dict(p.params)}
        y_test = y_test_all
        if p.kind == "raw":
            X_tr, y_tr, X_te = space.transform_raw(train), y_all[idx_train], x_test_raw
            met = raw_metrics(train, qi, {c: space.kinds[c] for c in qi}, target) if qi else {}
        elif p.kind == "distpab":
            from ..perturb.distpab import DISTPAB  # noqa: PLC0415

            if not num_cols:
                raise SchemaError("DISTPAB perturbs numeric features and the table has none")
            dropped = [c for c in space.columns if c not in num_cols]
            if dropped:
                log.info("DISTPAB: %d numeric features perturbed; categorical column(s) %s left out of its feature "
                         "space", len(num_cols), ", ".join(dropped))
            dp = DISTPAB(noise=p.params.get("noise", 0.3), selection=p.params.get("selection", "maximin"),
                         random_state=p.params.get("seed", int(random_state)), backend=backend)
            Xn_tr = train[num_cols].to_numpy(dtype=np.float64)
            Xn_te = test[num_cols].to_numpy(dtype=np.float64)
            if np.isnan(Xn_tr).any() or np.isnan(Xn_te).any():
                raise SchemaError("DISTPAB needs complete numeric features; fill or drop missing values in "
                                  f"{', '.join(c for c in num_cols if data[c].isna().any())}")
            dp.fit(Xn_tr)
            X_tr, perm = dp.perturb(Xn_tr, entity=0)
            X_te, perm_te = dp.perturb(Xn_te, entity=1)
            X_tr, X_te = to_host(X_tr), to_host(X_te)
            y_tr, y_test = y_all[idx_train][to_host(perm)], y_test_all[to_host(perm_te)]
            met = {}
            info["distpab"] = {k: v for k, v in dp.report().items() if k in ("phi", "angle_degrees", "axis_feature",
                                                                              "noise", "features")}
        else:
            m = mondrian_for(p)
            out = m.fit_transform(train)  # verified independently before it is used
            hmap = {name: b.hierarchy for name, b in m.table_.hierarchies.items()}
            X_tr = space.transform_generalized(out, hmap)
            y_tr = pd.Index(classes).get_indexer(out[target])
            X_te = x_test_raw
            met = mondrian_metrics(m)
            info["achieved"] = m.report_["achieved"]
            info["n_partitions"] = int(m.n_partitions_)
        info.update({k_: v for k_, v in met.items()})
        info["n_train"] = int(len(y_tr))
        info["n_features"] = int(X_tr.shape[1])
        info["protect_seconds"] = round(time.perf_counter() - t0, 4)
        if len(np.unique(y_tr)) < 2:
            raise InputError(f"protection '{p.name}' left a single target class in the training part; no "
                             "classifier can be trained on it (lower k / l / t, or raise the suppression budget)")
        prepared = prepare_features(X_tr, X_te)
        log.info("protection %s: %d training rows, %d features (%.2f s)", p.name, len(y_tr), X_tr.shape[1],
                 info["protect_seconds"])
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
                   "predict_seconds": round(t3 - t2, 4), **met}
            rows.append(row)
            log.info("  %-19s accuracy %.4f  F1 %.4f  AUC %.4f  (train %.2f s, %s)", MODEL_TITLES[key],
                     sc["accuracy"], sc["f1"], sc["roc_auc"], t2 - t1, lib)
            if progress:
                progress(row)
        prot_info.append(info)
    res = pd.DataFrame(rows)
    for c in RESULT_COLUMNS:
        if c not in res.columns:
            res[c] = np.nan
    raw_acc = res[res["kind"] == "raw"].groupby("model")["accuracy"].first()
    res["accuracy_drop"] = res["model"].map(raw_acc).astype(float) - res["accuracy"]
    res = res[RESULT_COLUMNS]
    corr = rank_correlations(res) if not raw_acc.empty else {}
    config = {"n_rows": int(len(data)), "n_train": int(len(train)), "n_test": int(len(test)),
              "test_size": float(test_size), "random_state": int(random_state), "target": target,
              "classes": [str(c) for c in classes], "positive": None if pos is None else str(classes[pos]),
              "quasi_identifiers": qi, "sensitive": sensitive, "backend": be.name, "device": be.device,
              "features": space.columns, "n_features_raw": space.n_features, "models": model_keys,
              "protections": [p.name for p in prots]}
    return Evaluation(res, prot_info, corr, config, libraries, time.perf_counter() - t_start)



def evaluate(df: pd.DataFrame, protections=DEFAULT_PROTECTIONS, models: Sequence[str] | str = MODEL_NAMES,
             **kwargs) -> pd.DataFrame:
    """:func:`run_evaluation`'s results table (one row per protection and model)."""
    return run_evaluation(df, protections, models, **kwargs).results

