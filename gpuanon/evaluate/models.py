"""The nine-model factory per backend, the models' predictions and their scores.

:func:`make_model` gives a fresh classifier for a key of :data:`MODEL_NAMES` on the CPU
(scikit-learn, XGBoost, the PyTorch MLP) or the GPU backend (cuML where it has the model, XGBoost
with ``device="cuda"``, the MLP on CUDA); :func:`predict_scores` turns any of them into class
codes and per-class scores, and :func:`classification_scores` into the protocol's scores.
:func:`prepare_features` imputes and standardizes a training / test pair for the models in
:data:`SCALED_MODELS`.

>>> parse_models("rf,mlp")
['rf', 'mlp']
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from typing import Iterable

import numpy as np

from ..backend import load_cuml, to_host
from ..errors import InputError
from ..models.nn import TorchMLPClassifier, load_torch

log = logging.getLogger("gpuanon")

MODEL_NAMES = ("rf", "et", "gb", "svm", "lr", "sgd", "nb", "knn", "mlp")
MODEL_TITLES = {"rf": "Random Forest", "et": "Extra Trees", "gb": "Gradient Boosting", "svm": "SVM",
                "lr": "Logistic Regression", "sgd": "SGD", "nb": "GaussianNB", "knn": "KNN", "mlp": "MLP"}
SCORE_COLUMNS = ["accuracy", "precision", "recall", "f1", "f1_macro", "f1_weighted", "balanced_accuracy",
                 "roc_auc"]

# Models that get standardized features (distance, margin and gradient based); trees are scale-free and
# Gaussian naive Bayes keeps the raw scale (its variance smoothing is relative to the largest variance).
SCALED_MODELS = frozenset({"svm", "lr", "sgd", "knn", "mlp"})


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
        device = "cpu"
        if gpu:
            if load_torch().cuda.is_available():
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


def prepare_features(X_tr: np.ndarray, X_te: np.ndarray) -> dict:
    """Imputed (training means) and imputed + standardized (training statistics) float32 matrices."""
    from sklearn.impute import SimpleImputer  # noqa: PLC0415
    from sklearn.preprocessing import StandardScaler  # noqa: PLC0415

    imp = SimpleImputer(strategy="mean", keep_empty_features=True).fit(X_tr)
    a, b = imp.transform(X_tr), imp.transform(X_te)
    sc = StandardScaler().fit(a)
    return {False: (a.astype(np.float32), b.astype(np.float32)),
            True: (sc.transform(a).astype(np.float32), sc.transform(b).astype(np.float32))}

