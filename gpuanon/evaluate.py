"""What do models still learn? Classifiers trained on protected data, tested on raw rows.

The protocol of the contract's section 9 (the thesis's chapter 3 and section 5.2): one stratified,
seeded split of the original table (70 / 30 by default); each protection is applied to the
training part only (raw; Mondrian k-anonymity, l-diversity, t-closeness, with or without the
optimization step or hierarchies; DISTPAB); each model is trained on it and tested on the raw
held-out rows; every score sits beside the protection's information-loss metrics, and each
metric's rank correlation with the accuracy drop says which one predicted the cost.

Feature space (:class:`FeatureSpace`): a numeric QI becomes two features ``(lo, hi)`` (a raw
value is ``lo = hi = value``); a categorical QI a multi-hot vector over the original categories,
each present value weighted ``1 / |set|`` (a hierarchy node covers the leaves under it, ``*`` all
of them; a raw value is one-hot). Other numeric columns pass as they are, other categorical
columns one-hot. DISTPAB perturbs numeric features only: its models see the numeric columns as
they are perturbed, and the held-out rows go through the same fitted perturbation (its rotation,
reflection, translation and noise), as the data owner would before querying the model: a model
cannot be tested in another coordinate system than the one it was trained in.

Models (:func:`make_model`): ``rf`` random forest, ``et`` extra trees, ``gb`` gradient boosting
(XGBoost; scikit-learn's histogram boosting when XGBoost is not installed), ``svm`` RBF SVM,
``lr`` logistic regression, ``sgd`` linear SGD, ``nb`` Gaussian naive Bayes, ``knn`` k nearest
neighbours, ``mlp`` the PyTorch MLP of :mod:`gpuanon.nn`. On the GPU backend cuML's random
forest, SVC, logistic regression, MBSGD, naive Bayes and k-NN are used when cuML is installed,
XGBoost with ``device="cuda"``, and the MLP on CUDA; anything else runs on scikit-learn and the
log says so. Features are imputed (training means) and standardized (training statistics) for
the models that need it (SVM, logistic regression, SGD, k-NN, MLP); trees and Gaussian naive
Bayes see the imputed features on their own scale.

Examples
--------
>>> from gpuanon.datasets import load_adult
>>> df = load_adult().sample(3000, random_state=0)
>>> res = evaluate(df, protections="raw;k=10", models=["lr", "nb"], target="income",
...                quasi_identifiers=["age", "education", "marital-status"], backend="cpu")
>>> res[["protection", "model"]].values.tolist()
[['raw', 'lr'], ['raw', 'nb'], ['k=10', 'lr'], ['k=10', 'nb']]
>>> bool(res["accuracy"].between(0.5, 1).all())
True
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .backend import load_cuml, to_host
from .errors import InputError, SchemaError
from .metrics import (cell_text, compute_metrics, parse_numeric_cells, split_set_text,
                      summary_from_output)

log = logging.getLogger("gpuanon")

MODEL_NAMES = ("rf", "et", "gb", "svm", "lr", "sgd", "nb", "knn", "mlp")
MODEL_TITLES = {"rf": "Random Forest", "et": "Extra Trees", "gb": "Gradient Boosting", "svm": "SVM",
                "lr": "Logistic Regression", "sgd": "SGD", "nb": "GaussianNB", "knn": "KNN", "mlp": "MLP"}
DEFAULT_PROTECTIONS = "raw;k=3;k=10;k=50;k=3,l=2;k=3,t=0.2;k=3,optimize;distpab"
SCORE_COLUMNS = ["accuracy", "precision", "recall", "f1", "f1_macro", "f1_weighted", "balanced_accuracy",
                 "roc_auc"]
LOSS_METRICS = ["entropy_loss", "entropy_loss_labels", "ncp", "gionis_tassa", "dm", "cm", "c_avg"]
RESULT_COLUMNS = (["protection", "kind", "model", "model_title", "library", "n_train", "n_test", "n_features"]
                  + SCORE_COLUMNS + ["accuracy_drop", "train_seconds", "predict_seconds"]
                  + LOSS_METRICS + ["hierarchy_precision", "n_classes", "n_suppressed"])

_MONDRIAN_KEYS = {"k": int, "l": int, "t": float, "c": float, "l_kind": str, "t_distance": str, "mode": str,
                  "optimize": bool, "hierarchies": str, "rho": float, "max_suppression": float}
_DISTPAB_KEYS = {"noise": float, "selection": str, "seed": int}


# ====================================================================== protections
@dataclass
class Protection:
    """One way of protecting the training part: ``kind`` is raw, mondrian, suppress or distpab."""

    name: str
    kind: str
    params: dict = field(default_factory=dict)


def _value(key: str, text: str, typ):
    if typ is bool:
        if text.lower() in ("", "1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise InputError(f"protection option '{key}={text}' is not true / false")
    try:
        v = typ(text)
    except ValueError:
        raise InputError(f"protection option '{key}={text}' is not a {typ.__name__}; write e.g. "
                         f"{'k=10' if typ is int else 't=0.2'}") from None
    if typ is float and key == "rho" and float(v).is_integer():
        v = int(v)
    return v


def parse_protection(spec: str | dict | Protection) -> Protection:
    """One protection from text (``'raw'``, ``'k=3,l=2'``, ``'k=3,optimize'``, ``'distpab,noise=0.3'``,
    ``'suppress'``) or a dict of the same keys.

    >>> parse_protection("k=3, t=0.2")
    Protection(name='k=3,t=0.2', kind='mondrian', params={'k': 3, 't': 0.2})
    >>> parse_protection("k=3,opt").params
    {'k': 3, 'optimize': True}
    """
    if isinstance(spec, Protection):
        return spec
    if isinstance(spec, dict):
        kind = str(spec.get("kind", "mondrian")).lower()
        opts = ",".join(k if v is True else f"{k}={v}" for k, v in spec.items() if k != "kind" and v is not False)
        return parse_protection(opts if kind == "mondrian" else ",".join(filter(None, [kind, opts])))
    text = str(spec).strip()
    if not text:
        raise InputError("empty protection; write e.g. 'raw', 'k=10', 'k=3,l=2', 'k=3,t=0.2' or 'distpab'")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    head = parts[0].lower()
    if head in ("raw", "none", "original"):
        if len(parts) > 1:
            raise InputError(f"protection '{text}': 'raw' takes no options")
        return Protection("raw", "raw", {})
    if head in ("suppress", "suppress-all"):
        if len(parts) > 1:
            raise InputError(f"protection '{text}': 'suppress' takes no options")
        return Protection("suppress", "suppress", {})
    if head in ("distpab", "pabidot"):
        params = {}
        for p in parts[1:]:
            key, _, val = p.partition("=")
            key = key.strip().lower()
            if key not in _DISTPAB_KEYS:
                raise InputError(f"protection '{text}': unknown DISTPAB option '{key}'; accepted: "
                                 f"{', '.join(_DISTPAB_KEYS)}")
            params[key] = _value(key, val.strip(), _DISTPAB_KEYS[key])
        name = "distpab" + "".join(f",{k}={v}" for k, v in params.items())
        return Protection(name, "distpab", params)
    params: dict[str, Any] = {}
    for p in parts:
        key, eq, val = p.partition("=")
        key = key.strip().lower().replace("-", "_")
        key = {"opt": "optimize", "optimized": "optimize", "h": "hierarchies"}.get(key, key)
        if key not in _MONDRIAN_KEYS:
            raise InputError(f"protection '{text}': unknown option '{key}'; accepted: raw, suppress, distpab, "
                             f"or {', '.join(_MONDRIAN_KEYS)} (e.g. 'k=3,l=2')")
        if not eq and _MONDRIAN_KEYS[key] is not bool:
            raise InputError(f"protection '{text}': '{key}' needs a value, e.g. '{key}=3'")
        params[key] = _value(key, val.strip(), _MONDRIAN_KEYS[key])
    if "k" not in params:
        raise InputError(f"protection '{text}' has no k; every Mondrian protection needs one, e.g. 'k=3,{text}'")
    if params.get("optimize") is False:
        del params["optimize"]
    name = ",".join(k if v is True else f"{k}={v}" for k, v in params.items())
    return Protection(name, "mondrian", params)


def parse_protections(spec: str | Iterable) -> list[Protection]:
    """A list of protections from ``'raw;k=3;k=3,l=2'`` or an iterable of texts / dicts."""
    items = [s for s in str(spec).split(";") if s.strip()] if isinstance(spec, str) else list(spec)
    if not items:
        raise InputError("no protections given; write e.g. 'raw;k=3;k=10'")
    out = [parse_protection(s) for s in items]
    names = [p.name for p in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"protection(s) {', '.join(dup)} given twice")
    return out


def parse_models(spec: str | Iterable) -> list[str]:
    """Model keys from ``'rf,gb,mlp'`` (or ``'all'``) or an iterable of keys."""
    items = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if str(s).strip()]
    if items == ["all"]:
        return list(MODEL_NAMES)
    bad = [m for m in items if m not in MODEL_NAMES]
    if bad or not items:
        raise InputError(f"unknown model(s) {', '.join(map(repr, bad)) or '(none given)'}; accepted: "
                         f"{', '.join(MODEL_NAMES)} or 'all'")
    if len(set(items)) != len(items):
        raise InputError(f"model list '{','.join(items)}' names a model twice")
    return items


# ====================================================================== models
def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _cuml_usable() -> bool:
    mod, why = load_cuml()
    if mod is None and "installed but" in why:
        log.info("%s", why)
    return mod is not None


def make_model(name: str, backend: str = "cpu", random_state: int = 0):
    """A fresh classifier and the library it comes from: ``(estimator, 'sklearn' | 'xgboost' | 'cuml' | 'torch')``.

    ``backend`` is ``'cpu'`` or ``'gpu'`` (the resolved backend name).

    >>> est, lib = make_model("rf", "cpu", random_state=1)
    >>> type(est).__name__, lib
    ('RandomForestClassifier', 'sklearn')
    """
    if name not in MODEL_NAMES:
        raise InputError(f"unknown model '{name}'; accepted: {', '.join(MODEL_NAMES)}")
    seed = int(random_state)
    gpu = backend == "gpu"
    if name == "mlp":
        from .nn import TorchMLPClassifier, _torch  # noqa: PLC0415

        device = "cpu"
        if gpu:
            if _torch().cuda.is_available():
                device = "cuda"
            else:
                log.info("MLP runs on the CPU on the GPU backend: this PyTorch build sees no CUDA device")
        return TorchMLPClassifier(hidden=(128, 64, 32), learning_rate=1e-3, batch_size=256, max_epochs=200,
                                  patience=10, random_state=seed, device=device), "torch"
    if name == "gb":
        if _have("xgboost"):
            import xgboost  # noqa: PLC0415

            kw = dict(n_estimators=300, max_depth=6, learning_rate=0.1, tree_method="hist", random_state=seed,
                      n_jobs=-1, verbosity=0)
            if gpu:
                kw["device"] = "cuda"
            return xgboost.XGBClassifier(**kw), "xgboost"
        from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: PLC0415

        log.warning("XGBoost is not installed: gradient boosting runs on scikit-learn's "
                    "HistGradientBoostingClassifier (pip install xgboost-cpu, or xgboost on a GPU machine)")
        return HistGradientBoostingClassifier(max_iter=300, learning_rate=0.1, random_state=seed), "sklearn"
    if gpu and name != "et" and _cuml_usable():
        cuml = load_cuml()[0]

        if name == "rf":
            return cuml.ensemble.RandomForestClassifier(n_estimators=200, random_state=seed, n_streams=1), "cuml"
        if name == "svm":
            return cuml.svm.SVC(kernel="rbf", C=1.0, gamma="scale"), "cuml"
        if name == "lr":
            return cuml.linear_model.LogisticRegression(max_iter=2000), "cuml"
        if name == "sgd":
            return cuml.linear_model.MBSGDClassifier(loss="hinge", alpha=1e-4, batch_size=256, epochs=100,
                                                     learning_rate="adaptive", eta0=0.01), "cuml"
        if name == "nb":
            return cuml.naive_bayes.GaussianNB(), "cuml"
        if name == "knn":
            return cuml.neighbors.KNeighborsClassifier(n_neighbors=5), "cuml"
    if gpu:
        why = "cuML has no extra-trees classifier" if name == "et" else "cuML is not installed or not usable"
        log.info("%s runs on scikit-learn (CPU) on the GPU backend: %s", MODEL_TITLES[name], why)
    from sklearn import ensemble, linear_model, naive_bayes, neighbors, svm  # noqa: PLC0415

    if name == "rf":
        return ensemble.RandomForestClassifier(n_estimators=200, n_jobs=-1, random_state=seed), "sklearn"
    if name == "et":
        return ensemble.ExtraTreesClassifier(n_estimators=200, n_jobs=-1, random_state=seed), "sklearn"
    if name == "svm":
        return svm.SVC(kernel="rbf", C=1.0, gamma="scale", cache_size=1000, random_state=seed), "sklearn"
    if name == "lr":
        return linear_model.LogisticRegression(max_iter=2000), "sklearn"
    if name == "sgd":
        return linear_model.SGDClassifier(loss="hinge", alpha=1e-4, max_iter=1000, tol=1e-3,
                                          random_state=seed), "sklearn"
    if name == "nb":
        return naive_bayes.GaussianNB(), "sklearn"
    return neighbors.KNeighborsClassifier(n_neighbors=5, n_jobs=-1), "sklearn"


def _host(a) -> np.ndarray:
    if hasattr(a, "to_numpy"):
        a = a.to_numpy()
    return to_host(a)


def predict_scores(model, X: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(predicted class codes, (rows x n_classes) class scores)``.

    Scores are probabilities where the model has them, else decision values (binary: ``-d, d``;
    multiclass: a softmax of them), else the one-hot predictions.
    """
    classes = _host(model.classes_).astype(np.int64)
    S = np.zeros((X.shape[0], n_classes), dtype=np.float64)
    if hasattr(model, "predict_proba"):
        P = _host(model.predict_proba(X)).astype(np.float64)
        S[:, classes] = P
        pred = classes[np.argmax(P, axis=1)]
        return pred, S
    if hasattr(model, "decision_function"):
        d = _host(model.decision_function(X)).astype(np.float64)
        if d.ndim == 1 or (d.ndim == 2 and d.shape[1] == 1):
            d = d.reshape(-1)
            S[:] = d.min() - 1.0
            S[:, classes[0]], S[:, classes[1]] = -d, d
            return classes[(d > 0).astype(np.int64)], S
        e = np.exp(d - d.max(axis=1, keepdims=True))
        S[:, classes] = e / e.sum(axis=1, keepdims=True)
        return _host(model.predict(X)).astype(np.int64), S
    pred = _host(model.predict(X)).astype(np.int64)
    S[np.arange(len(pred)), pred] = 1.0
    return pred, S


def classification_scores(y_true: np.ndarray, y_pred: np.ndarray, S: np.ndarray, n_classes: int,
                          positive: int | None) -> dict:
    """Accuracy, precision, recall, F1 (binary: of ``positive``; multiclass: macro), macro and weighted
    F1, balanced accuracy and ROC AUC (binary: of ``positive``'s score; multiclass: one-vs-rest macro).

    >>> y = np.array([0, 0, 1, 1]); p = np.array([0, 1, 1, 1])
    >>> S = np.array([[.9, .1], [.4, .6], [.2, .8], [.3, .7]])
    >>> s = classification_scores(y, p, S, 2, positive=1)
    >>> s["accuracy"], round(s["precision"], 4), s["recall"], s["roc_auc"]
    (0.75, 0.6667, 1.0, 1.0)
    """
    from sklearn import metrics as skm  # noqa: PLC0415

    out = {"accuracy": float(skm.accuracy_score(y_true, y_pred))}
    labels = list(range(n_classes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined precision of a never-predicted class is 0 (zero_division)
        if n_classes == 2 and positive is not None:
            kw = dict(pos_label=positive, average="binary", zero_division=0)
        else:
            kw = dict(labels=labels, average="macro", zero_division=0)
        out["precision"] = float(skm.precision_score(y_true, y_pred, **kw))
        out["recall"] = float(skm.recall_score(y_true, y_pred, **kw))
        out["f1"] = float(skm.f1_score(y_true, y_pred, **kw))
        out["f1_macro"] = float(skm.f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0))
        out["f1_weighted"] = float(skm.f1_score(y_true, y_pred, labels=labels, average="weighted", zero_division=0))
        out["balanced_accuracy"] = float(skm.balanced_accuracy_score(y_true, y_pred))
        try:
            if n_classes == 2:
                pos = 1 if positive is None else positive
                out["roc_auc"] = float(skm.roc_auc_score(y_true == pos, S[:, pos]))
            else:
                P = S / np.maximum(S.sum(axis=1, keepdims=True), 1e-300)
                out["roc_auc"] = float(skm.roc_auc_score(y_true, P, multi_class="ovr", average="macro",
                                                         labels=labels))
        except ValueError:  # one class only in the test part
            out["roc_auc"] = float("nan")
    return out


# ====================================================================== feature space
def _texts(s: pd.Series) -> np.ndarray:
    codes, uniq = pd.factorize(s, use_na_sentinel=False)
    return np.array([cell_text(v) for v in uniq], dtype=object)[codes] if len(s) else np.zeros(0, dtype=object)


class FeatureSpace:
    """One numeric feature space for raw and generalized rows of a table (the contract's section 9).

    Built from the original (raw) training frame: it records each column's kind and, for
    categorical columns, the original categories. :meth:`transform_raw` encodes raw rows;
    :meth:`transform_generalized` encodes an anonymized table (numeric QIs as ``<c>_min`` /
    ``<c>_max`` pairs, ``"lo-hi"`` text or numbers; categorical QIs as values, ``|``-joined sets,
    hierarchy labels or ``*``). Unknown categories of raw test rows encode as all zeros.

    >>> raw = pd.DataFrame({"age": [30, 40, 50], "job": ["a", "b", "c"]})
    >>> fs = FeatureSpace.from_frame(raw, quasi_identifiers=["age", "job"])
    >>> fs.feature_names_
    ['age_lo', 'age_hi', 'job=a', 'job=b', 'job=c']
    >>> gen = pd.DataFrame({"age_min": [30, 30, 50], "age_max": [40, 40, 50], "job": ["a|b", "a|b", "c"]})
    >>> fs.transform_generalized(gen)[0].tolist()
    [30.0, 40.0, 0.5, 0.5, 0.0]
    >>> fs.transform_raw(raw)[0].tolist()
    [30.0, 30.0, 1.0, 0.0, 0.0]
    """

    def __init__(self, columns: Sequence[str], kinds: dict, quasi_identifiers: Sequence[str], categories: dict):
        self.columns = list(columns)
        self.kinds = dict(kinds)
        self.quasi_identifiers = [c for c in quasi_identifiers if c in self.columns]
        self.categories = {c: list(v) for c, v in categories.items()}
        self._index = {c: {v: i for i, v in enumerate(cats)} for c, cats in self.categories.items()}
        names = []
        for c in self.columns:
            if self.kinds[c] == "numeric":
                names += [f"{c}_lo", f"{c}_hi"] if c in self.quasi_identifiers else [c]
            else:
                names += [f"{c}={v}" for v in self.categories[c]]
        self.feature_names_ = names

    @classmethod
    def from_frame(cls, df: pd.DataFrame, quasi_identifiers: Sequence[str], kinds: dict | None = None,
                   exclude: Iterable[str] = ()) -> "FeatureSpace":
        """Every column of ``df`` but ``exclude``; ``kinds`` overrides the dtype inference per column."""
        exclude = set(exclude)
        kinds = dict(kinds or {})
        cols = [c for c in df.columns if c not in exclude]
        if not cols:
            raise InputError("no feature columns left: every column is the target or an identifier")
        kd, cats = {}, {}
        for c in cols:
            kd[c] = kinds.get(c) or ("numeric" if pd.api.types.is_numeric_dtype(df[c].dtype)
                                     and not pd.api.types.is_bool_dtype(df[c].dtype) else "categorical")
            if kd[c] == "categorical":
                cats[c] = sorted(set(_texts(df[c]).tolist()))
        missing = [q for q in quasi_identifiers if q not in cols]
        if missing:
            raise SchemaError(f"quasi-identifier(s) {', '.join(map(repr, missing))} are not feature columns of "
                              "the table")
        return cls(cols, kd, quasi_identifiers, cats)

    @property
    def n_features(self) -> int:
        return len(self.feature_names_)

    def _one_hot(self, c: str, s: pd.Series) -> np.ndarray:
        codes = pd.Index(self.categories[c]).get_indexer(_texts(s))
        M = np.zeros((len(s), len(self.categories[c])), dtype=np.float64)
        ok = codes >= 0
        M[np.nonzero(ok)[0], codes[ok]] = 1.0
        return M

    def _numeric(self, c: str, s: pd.Series) -> np.ndarray:
        v = pd.to_numeric(s, errors="coerce")
        bad = v.isna() & s.notna()
        if bad.any():
            raise SchemaError(f"column '{c}' holds non-numeric value {s[bad].iloc[0]!r} but was numeric in the "
                              "training table")
        return v.to_numpy(dtype=np.float64, na_value=np.nan)

    def transform_raw(self, df: pd.DataFrame) -> np.ndarray:
        """Raw rows: numeric QIs as ``lo = hi = value``, categorical values one-hot."""
        self._require(df, generalized=False)
        blocks = []
        for c in self.columns:
            if self.kinds[c] == "numeric":
                v = self._numeric(c, df[c])
                blocks.append(np.stack([v, v], axis=1) if c in self.quasi_identifiers else v[:, None])
            else:
                blocks.append(self._one_hot(c, df[c]))
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(df), 0))

    def _require(self, df, generalized: bool):
        missing = []
        for c in self.columns:
            if c in df.columns:
                continue
            if generalized and c in self.quasi_identifiers and f"{c}_min" in df.columns and f"{c}_max" in df.columns:
                continue
            missing.append(c)
        if missing:
            raise SchemaError(f"column(s) {', '.join(map(repr, missing))} of the feature space are missing from the "
                              "table" + ("; a numeric QI may also come as <col>_min / <col>_max" if generalized else ""))

    def _set_weights(self, c: str, s: pd.Series, hierarchy=None) -> np.ndarray:
        """Weighted multi-hot rows of generalized cells: one weight vector per distinct cell."""
        index, ncat = self._index[c], len(self.categories[c])
        node_sets: dict[str, list[int]] = {}
        if hierarchy is not None:
            leaf_idx = np.array([index.get(cell_text(v), -1) for v in hierarchy.leaves])
            for node, lab in enumerate(hierarchy.labels):  # a loop over hierarchy nodes
                under = np.nonzero((hierarchy.levels == node).any(axis=1))[0]
                node_sets[str(lab)] = [int(i) for i in leaf_idx[under] if i >= 0]
        cell_codes, cells = pd.factorize(s, use_na_sentinel=False)
        W = np.zeros((len(cells), ncat), dtype=np.float64)
        for i, cell in enumerate(cells):  # a loop over distinct generalized values, not rows
            t = cell_text(cell)
            if t in index:
                members = [index[t]]
            elif t in node_sets:
                members = node_sets[t]
            elif t == "*":
                members = list(range(ncat))
            else:
                parts = split_set_text(t)
                unknown = [p for p in parts if p not in index]
                if unknown:
                    raise SchemaError(f"value {unknown[0]!r} in generalized column '{c}' is not a category of the "
                                      "original table (nor a hierarchy label); pass the hierarchy used")
                members = [index[p] for p in parts]
            if members:
                W[i, members] = 1.0 / len(members)
        return W[cell_codes]

    def transform_generalized(self, out: pd.DataFrame, hierarchies: dict | None = None) -> np.ndarray:
        """An anonymized table's rows: numeric QIs as ``(lo, hi)``, categorical QIs weighted multi-hot."""
        self._require(out, generalized=True)
        hierarchies = hierarchies or {}
        blocks = []
        for c in self.columns:
            if c not in self.quasi_identifiers:
                blocks.append(self._numeric(c, out[c])[:, None] if self.kinds[c] == "numeric"
                              else self._one_hot(c, out[c]))
            elif self.kinds[c] == "numeric":
                if f"{c}_min" in out.columns:
                    lo = self._numeric(c, out[f"{c}_min"])
                    hi = self._numeric(c, out[f"{c}_max"])
                else:
                    try:
                        lo, hi = parse_numeric_cells(out[c])
                    except ValueError as exc:
                        raise SchemaError(str(exc)) from None
                blocks.append(np.stack([lo, hi], axis=1))
            else:
                blocks.append(self._set_weights(c, out[c], hierarchies.get(c)))
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(out), 0))


# ====================================================================== the protocol
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


# Models that get standardized features (distance, margin and gradient based); trees are scale-free and
# Gaussian naive Bayes keeps the raw scale (its variance smoothing is relative to the largest variance).
SCALED_MODELS = frozenset({"svm", "lr", "sgd", "knn", "mlp"})


def _prepare(X_tr: np.ndarray, X_te: np.ndarray) -> dict:
    """Imputed (training means) and imputed + standardized (training statistics) float32 matrices."""
    from sklearn.impute import SimpleImputer  # noqa: PLC0415
    from sklearn.preprocessing import StandardScaler  # noqa: PLC0415

    imp = SimpleImputer(strategy="mean", keep_empty_features=True).fit(X_tr)
    a, b = imp.transform(X_tr), imp.transform(X_te)
    sc = StandardScaler().fit(a)
    return {False: (a.astype(np.float32), b.astype(np.float32)),
            True: (sc.transform(a).astype(np.float32), sc.transform(b).astype(np.float32))}


def _mondrian_metrics(m) -> dict:
    met = m.metrics_
    return {"entropy_loss": met.get("entropy_loss"), "entropy_loss_labels": met.get("entropy_loss_labels"),
            "ncp": met.get("ncp"),
            "gionis_tassa": (met.get("gionis_tassa") or {}).get("normalized"), "dm": met.get("dm"),
            "cm": met.get("cm"), "c_avg": met.get("c_avg"), "hierarchy_precision": met.get("precision"),
            "n_classes": met.get("n_classes"), "n_suppressed": met.get("n_suppressed")}


def _raw_metrics(train: pd.DataFrame, qi, kinds, target) -> dict:
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


class _BackendLineOnce(logging.Filter):
    """Drops repeats of the backend line: every protection asks for the backend, the log says it once."""

    def __init__(self):
        super().__init__()
        self.seen: set = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("backend "):
            return True
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


def _backend_line_once(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        f = _BackendLineOnce()
        log.addFilter(f)
        try:
            return fn(*args, **kwargs)
        finally:
            log.removeFilter(f)
    return wrapper


@_backend_line_once
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

    from .backend import get_backend  # noqa: PLC0415
    from .mondrian import Mondrian  # noqa: PLC0415

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
                m.hierarchy_plan(train, m._validate(train))
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
            met = _raw_metrics(train, qi, {c: space.kinds[c] for c in qi}, target) if qi else {}
        elif p.kind == "distpab":
            from .perturb.distpab import DISTPAB  # noqa: PLC0415

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
            X_tr, X_te = _host(X_tr), _host(X_te)
            y_tr, y_test = y_all[idx_train][_host(perm)], y_test_all[_host(perm_te)]
            met = {}
            info["distpab"] = {k: v for k, v in dp.report().items() if k in ("phi", "angle_degrees", "axis_feature",
                                                                              "noise", "features")}
        else:
            m = mondrian_for(p)
            out = m.fit_transform(train)  # verified independently before it is used
            hmap = {c.name: c.hierarchy for c in m.table_.columns if c.hierarchy is not None}
            X_tr = space.transform_generalized(out, hmap)
            y_tr = pd.Index(classes).get_indexer(out[target])
            X_te = x_test_raw
            met = _mondrian_metrics(m)
            info["achieved"] = m.report_["achieved"]
            info["n_partitions"] = int(m.n_partitions_)
        info.update({k_: v for k_, v in met.items()})
        info["n_train"] = int(len(y_tr))
        info["n_features"] = int(X_tr.shape[1])
        info["protect_seconds"] = round(time.perf_counter() - t0, 4)
        if len(np.unique(y_tr)) < 2:
            raise InputError(f"protection '{p.name}' left a single target class in the training part; no "
                             "classifier can be trained on it (lower k / l / t, or raise the suppression budget)")
        prepared = _prepare(X_tr, X_te)
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


# ====================================================================== tables for people
def score_table(results: pd.DataFrame, scores: Sequence[str] = ("accuracy", "f1_macro")) -> pd.DataFrame:
    """Models down, (protection, score) across: the shape of the thesis's tables 5.6 to 5.10."""
    t = results.pivot_table(index="model", columns="protection", values=list(scores), sort=False)
    t = t.swaplevel(0, 1, axis=1)
    prots = list(dict.fromkeys(results["protection"]))
    t = t.reindex(columns=pd.MultiIndex.from_product([prots, list(scores)]))
    order = [m for m in MODEL_NAMES if m in t.index]
    t = t.loc[order]
    t.index = [MODEL_TITLES[m] for m in order]
    return t


def markdown_scores(results: pd.DataFrame, scores: Sequence[str] = ("accuracy", "f1_macro")) -> str:
    """:func:`score_table` as a markdown table (3 decimals)."""
    t = score_table(results, scores)
    head = "| model | " + " | ".join(f"{p} {s}" for p, s in t.columns) + " |"
    sep = "| --- |" + " --- |" * len(t.columns)
    lines = [head, sep]
    for name, r in t.iterrows():
        lines.append(f"| {name} | " + " | ".join("" if pd.isna(v) else f"{v:.3f}" for v in r.to_numpy()) + " |")
    return "\n".join(lines) + "\n"



class _CallableModule(types.ModuleType):
    """``gpuanon.evaluate`` is this module and, called, :func:`evaluate` itself."""

    def __call__(self, *args, **kwargs) -> pd.DataFrame:
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
