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
neighbours, ``mlp`` the PyTorch MLP of :mod:`gpuanon.models.nn`. On the GPU backend cuML's random
forest, SVC, logistic regression, MBSGD, naive Bayes and k-NN are used when cuML is installed,
XGBoost with ``device="cuda"``, and the MLP on CUDA; anything else runs on scikit-learn and the
log says so. Features are imputed (training means) and standardized (training statistics) for
the models that need it (SVM, logistic regression, SGD, k-NN, MLP); trees and Gaussian naive
Bayes see the imputed features on their own scale.

The package: :mod:`~gpuanon.evaluate.protections` (what protects the training part),
:mod:`~gpuanon.evaluate.features` (the shared feature space), :mod:`~gpuanon.evaluate.models` (the
model factory, predictions, scores), :mod:`~gpuanon.evaluate.experiment` (the protocol) and
:mod:`~gpuanon.evaluate.tables` (results for people). ``gpuanon.evaluate`` is callable:
``gpuanon.evaluate(df, ...)`` is :func:`evaluate`.

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

import sys
import types

import pandas as pd

from .experiment import (LOSS_METRICS, RESULT_COLUMNS, Evaluation, evaluate, rank_correlations, run_evaluation,
                         stratified_split)
from .features import FeatureSpace, cell_texts
from .models import (MODEL_NAMES, MODEL_TITLES, SCALED_MODELS, SCORE_COLUMNS, classification_scores, make_model,
                     parse_models, predict_scores, prepare_features)
from .protections import (DEFAULT_PROTECTIONS, Distpab, MondrianSpec, Protected, Protection, Raw, Setup, Suppress,
                          mondrian_metrics, parse_protection, parse_protections, raw_metrics)
from .tables import markdown_scores, score_table

__all__ = [
    "DEFAULT_PROTECTIONS",
    "LOSS_METRICS",
    "MODEL_NAMES",
    "MODEL_TITLES",
    "RESULT_COLUMNS",
    "SCALED_MODELS",
    "SCORE_COLUMNS",
    "Distpab",
    "Evaluation",
    "FeatureSpace",
    "MondrianSpec",
    "Protected",
    "Protection",
    "Raw",
    "Setup",
    "Suppress",
    "cell_texts",
    "classification_scores",
    "evaluate",
    "make_model",
    "markdown_scores",
    "mondrian_metrics",
    "stratified_split",
    "parse_models",
    "parse_protection",
    "parse_protections",
    "predict_scores",
    "prepare_features",
    "rank_correlations",
    "raw_metrics",
    "run_evaluation",
    "score_table",
]


class _CallableModule(types.ModuleType):
    """``gpuanon.evaluate`` is this package and, called, :func:`evaluate` itself."""

    def __call__(self, *args, **kwargs) -> pd.DataFrame:
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
