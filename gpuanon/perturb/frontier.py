"""The privacy-utility frontier of DISTPAB against its baselines (SPEC section 8, points 8 and 9).

For every noise value of a sweep (default 0.05, 0.1, 0.2, 0.3, 0.5, 0.8) the data set's numeric
features are perturbed by

* ``distpab``: :class:`~gpuanon.perturb.distpab.DISTPAB` (one entity, default angles, maximin
  selection), the noise being the randomized expansion's ``|N(0, noise^2)|``;
* ``gp``: geometric perturbation with Gaussian ``N(0, noise^2)`` noise, best of ten draws
  (:func:`~gpuanon.perturb.baselines.geometric_perturbation_best`);
* ``rp``: random rotation, best of ten draws
  (:func:`~gpuanon.perturb.baselines.random_rotation_best`). RP has no noise parameter: it is
  drawn ONCE and the same perturbed table is scored and repeated on every noise value's row
  (``noise`` is the sweep value, ``noise_applied`` is 0).

Each perturbed table is scored for

* utility: accuracy of k-NN (k = 5), SVM (RBF, C = 1, gamma "scale") and logistic regression,
  each behind a ``StandardScaler`` in a scikit-learn pipeline, trained AND tested on the
  perturbed data with ``folds``-fold stratified cross-validation (seed 002, section 5.4). The SVM
  runs on a stratified sample of at most ``svm_max_rows`` rows (default 10,000; the same original
  rows for every method and noise) because an RBF SVM's cost grows with the square of the rows;
  k-NN and LR use every row;
* privacy: the three attacks of :mod:`gpuanon.perturb.attacks` (naive inference, ICA, known
  input-output), each scored ``min_j std(z_j - zhat_j)``, and their minimum ``attack_min``
  (higher resists better). FastICA is fitted on at most 20,000 rows (seeded sample) for at most
  300 iterations, then applied to every row and scored on every row: on noisy perturbed data
  FastICA often never converges, and a 2,000-iteration fit on 100,000 rows took 19 minutes for
  one table on the 2-core CPU while the converged fits stop within a few dozen iterations.

The perturbed rows are scored paired with their original rows (DISTPAB's shuffle is undone with
its permutation), so every method and noise value sees the same CV folds and the same labels;
the shuffle does not change what a model can learn from the rows. Everything is seeded by one
``random_state``: the DISTPAB translation and noise, the baselines' draws, the CV folds, the SVM
sample and the attacks. The same seed at every noise value means DISTPAB keeps its rotation and
translation and GP its ten candidate draws along the sweep, so the curves show the effect of the
noise alone. The picture is :mod:`gpuanon.perturb.frontier_plot`'s :func:`plot_frontier`
(importable from here too).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(120, 4)); y = (X[:, 0] + 0.3 * rng.normal(size=120) > 0).astype(int)
>>> res = frontier(X, y, noise=(0.1, 0.5), folds=3, draws=2, random_state=0)
>>> res.table[["method", "noise"]].values.tolist()
[['distpab', 0.1], ['distpab', 0.5], ['gp', 0.1], ['gp', 0.5], ['rp', 0.1], ['rp', 0.5]]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..backend import to_host
from ..datasets import get_dataset
from ..errors import InputError, shown
from ..report.markdown import markdown_table
from .attacks import evaluate_attacks, pair_rows
from .baselines import DRAWS, geometric_perturbation_best, random_rotation_best
from .distpab import DISTPAB
from .frontier_plot import plot_frontier

__all__ = [
    "COLUMNS",
    "DATASETS",
    "DEFAULT_NOISE",
    "DEFAULT_ROWS",
    "METHODS",
    "MODELS",
    "ICA_ITER",
    "ICA_ROWS",
    "SVM_MAX_ROWS",
    "FrontierResult",
    "compare",
    "frontier",
    "load_frontier_data",
    "make_models",
    "markdown_frontier",
    "parse_noise",
    "plot_frontier",
    "run_frontier",
]

METHODS = ("distpab", "gp", "rp")
MODELS = ("knn", "svm", "lr")
DEFAULT_NOISE = (0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
SVM_MAX_ROWS = 10_000
#: FastICA's fit in the frontier: at most this many rows and iterations (see the module docstring).
ICA_ROWS = 20_000
ICA_ITER = 300
#: Data sets the frontier knows by name ("adult" is its six numeric columns).
DATASETS = ("breast_cancer", "wine", "adult", "hepmass", "digits")
#: Rows of the generated data sets when none are asked for.
DEFAULT_ROWS = {"hepmass": 100_000}
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]

#: The CSV's columns, in order.
COLUMNS = [
    "method", "noise", "noise_applied", "accuracy_knn", "accuracy_svm", "accuracy_lr", "accuracy_mean",
    "naive", "ica", "io", "attack_min", "weakest", "ica_converged", "draws", "best_draw", "phi",
    "rows", "svm_rows", "features", "folds", "seed", "seconds",
]
_ATTACK_COLUMNS = {"naive_inference": "naive", "ica_reconstruction": "ica", "known_io_attack": "io"}


# --------------------------------------------------------------------------- inputs


def parse_noise(text: Any) -> tuple[float, ...]:
    """Noise values from ``"0.05,0.1,0.3"`` (or a sequence of numbers), checked.

    Every value must be a finite number >= 0; the list must be non-empty and without repeats.
    The order is kept.

    >>> parse_noise("0.05, 0.1,0.3")
    (0.05, 0.1, 0.3)
    >>> parse_noise("0.1,x")
    Traceback (most recent call last):
    ...
    gpuanon.errors.InputError: --noise value 'x' is not a number; give comma-separated numbers >= 0, e.g. --noise 0.05,0.1,0.3
    """
    hint = "give comma-separated numbers >= 0, e.g. --noise 0.05,0.1,0.3"
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else list(text)
    if not parts or all(isinstance(p, str) and not p for p in parts):
        raise InputError(f"--noise is empty; {hint}")
    values = []
    for p in parts:
        if isinstance(p, str) and not p:
            raise InputError(f"--noise has an empty entry in {text!r}; {hint}")
        try:
            v = float(p)
        except (TypeError, ValueError):
            raise InputError(f"--noise value {p!r} is not a number; {hint}") from None
        if not math.isfinite(v) or v < 0:
            raise InputError(f"--noise value {p!r} must be a finite number >= 0; {hint}")
        values.append(v)
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise InputError(f"--noise repeats {', '.join(f'{v:g}' for v in dup)}; {hint}")
    return tuple(values)


def load_frontier_data(name: str, rows: int | None = None, seed: int = 0):
    """The numeric features, labels and description of a named data set.

    ``breast_cancer`` (569 x 30), ``wine`` (178 x 13, 3 classes), ``digits``, ``adult`` (the six
    numeric columns of the bundled Adult table, label ``income``, all 32,561 rows) and ``hepmass``
    (HEPMASS-shaped, 28 features, :data:`DEFAULT_ROWS` = 100,000 rows unless ``rows``). ``rows``
    on a fixed table keeps a seeded sample (:func:`gpuanon.datasets.get_dataset`).

    Returns ``(X float64 (m, n), y int64 (m,), feature names, note)``; :class:`InputError` for an
    unknown name.

    >>> X, y, feats, note = load_frontier_data("wine")
    >>> X.shape, len(set(y.tolist())), note
    ((178, 13), 3, 'wine: 178 rows x 13 features')
    """
    key = str(name).strip().lower().replace("-", "_")
    if key not in DATASETS:
        raise InputError(f"unknown dataset {name!r} for the frontier; accepted names: {', '.join(DATASETS)}")
    if rows is None:
        rows = DEFAULT_ROWS.get(key)
    df, roles = get_dataset(key, rows=rows, seed=seed)
    target = roles["target"]
    feats = ADULT_NUMERIC if key == "adult" else [c for c in df.columns if c != target]
    X = df[feats].to_numpy(dtype=np.float64)
    y = pd.factorize(df[target], sort=True)[0].astype(np.int64)
    return X, y, list(feats), f"{key}: {X.shape[0]} rows x {X.shape[1]} features"


def make_models(random_state: int = 0) -> dict:
    """k-NN (5), RBF SVM and logistic regression, each behind a StandardScaler."""
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415
    from sklearn.neighbors import KNeighborsClassifier  # noqa: PLC0415
    from sklearn.pipeline import make_pipeline  # noqa: PLC0415
    from sklearn.preprocessing import StandardScaler  # noqa: PLC0415
    from sklearn.svm import SVC  # noqa: PLC0415

    return {
        "knn": make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=5)),
        "svm": make_pipeline(StandardScaler(), SVC(kernel="rbf", random_state=random_state)),
        "lr": make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
    }


def _check_labels(y: np.ndarray, folds: int, what: str) -> None:
    counts = np.bincount(y)
    counts = counts[counts > 0]
    if counts.size < 2:
        raise InputError(f"the {what} holds a single class; the frontier needs at least two")
    if counts.min() < folds:
        raise InputError(f"the smallest class of the {what} has {int(counts.min())} rows, fewer than "
                         f"folds={folds}; use fewer folds or more rows")


# --------------------------------------------------------------------------- scoring


def _cv_accuracy(X: np.ndarray, y: np.ndarray, svm_idx: np.ndarray, folds: int, seed: int,
                 n_jobs: int) -> dict:
    from sklearn.model_selection import StratifiedKFold, cross_val_score  # noqa: PLC0415

    out = {}
    for name, model in make_models(seed).items():
        Xm, ym = (X[svm_idx], y[svm_idx]) if name == "svm" else (X, y)
        cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        out[name] = float(cross_val_score(model, Xm, ym, cv=cv, scoring="accuracy", n_jobs=n_jobs).mean())
    return out


def _perturb(method: str, X: np.ndarray, noise: float, seed: int, draws: int, backend) -> tuple:
    """``(Xp paired row by row with X, info)`` for one method and noise value."""
    if method == "rp":
        return random_rotation_best(X, draws=draws, random_state=seed)
    if method == "gp":
        return geometric_perturbation_best(X, noise=noise, draws=draws, random_state=seed)
    if method == "distpab":
        model = DISTPAB(noise=noise, random_state=seed, backend=backend)
        Xp, perm = model.fit_perturb(X)
        Xp = pair_rows(to_host(Xp).astype(np.float64, copy=False), to_host(perm))
        return Xp, {"phi": float(model.phi_)}
    raise InputError(f"unknown method {method!r}; accepted: {', '.join(METHODS)}")


def _checked(X, y, noise, methods, folds) -> tuple:
    """The frontier's inputs as it reads them (host float64 features, label codes), or a one-line error."""
    X = np.asarray(to_host(X), dtype=np.float64)
    y = pd.factorize(np.asarray(to_host(y)), sort=True)[0].astype(np.int64)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise InputError(f"X must be (rows, features) with one label per row; got {X.shape} and {y.shape}")
    if not np.isfinite(X).all():
        raise InputError("the features hold missing or infinite values; the frontier needs finite numbers")
    noise = parse_noise(noise)
    methods = list(methods)
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods or len(set(methods)) != len(methods):
        raise InputError(f"methods must be distinct names among {', '.join(METHODS)}; got {methods}")
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise InputError(f"folds must be an integer >= 2, got {shown(folds)}")
    _check_labels(y, folds, "data")
    return X, y, noise, methods


def _svm_rows(y: np.ndarray, svm_max_rows, folds: int, random_state: int) -> np.ndarray:
    """The rows the SVM is cross-validated on: a stratified sample of ``svm_max_rows``, or every row."""
    m = y.shape[0]
    if svm_max_rows is None or svm_max_rows >= m:
        return np.arange(m)
    from sklearn.model_selection import train_test_split  # noqa: PLC0415

    svm_idx = np.sort(train_test_split(np.arange(m), train_size=int(svm_max_rows), stratify=y,
                                       random_state=random_state)[0])
    _check_labels(y[svm_idx], folds, f"SVM sample ({svm_idx.size} rows)")
    return svm_idx


def _point(method: str, nz: float, X: np.ndarray, y: np.ndarray, *, svm_idx, folds, draws, random_state, backend,
           n_jobs, known_fraction, ica_max_rows, ica_max_iter) -> dict:
    """One row of the frontier: perturb with ``method`` at noise ``nz``, cross-validate, attack."""
    t0 = time.perf_counter()
    Xp, info = _perturb(method, X, nz, random_state, draws, backend)
    acc = _cv_accuracy(Xp, y, svm_idx, folds, random_state, n_jobs)
    att = evaluate_attacks(X, Xp, random_state=random_state, known_fraction=known_fraction,
                           ica_max_rows=ica_max_rows, ica_max_iter=ica_max_iter)
    return {
        "method": method,
        "noise": nz,
        "noise_applied": 0.0 if method == "rp" else nz,
        **{f"accuracy_{k}": acc[k] for k in MODELS},
        "accuracy_mean": float(np.mean([acc[k] for k in MODELS])),
        **{col: float(att[a]["min"]) for a, col in _ATTACK_COLUMNS.items()},
        "attack_min": float(att["min"]),
        "weakest": _ATTACK_COLUMNS[att["weakest"]],
        "ica_converged": bool(att["ica_reconstruction"]["converged"]),
        "draws": draws if method != "distpab" else 1,
        "best_draw": info.get("best_draw", 0),
        "phi": info.get("phi", float("nan")),
        "rows": int(X.shape[0]),
        "svm_rows": int(svm_idx.size),
        "features": int(X.shape[1]),
        "folds": int(folds),
        "seed": int(random_state),
        "seconds": time.perf_counter() - t0,
    }


# --------------------------------------------------------------------------- the frontier


@dataclass
class FrontierResult:
    """The frontier table (one row per (method, noise), :data:`COLUMNS`), raw accuracy, config."""

    table: pd.DataFrame
    raw: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"config": self.config, "raw": self.raw, "seconds": self.seconds,
                "comparison": compare(self.table), "rows": self.table.to_dict(orient="records")}


def frontier(
    X: Any,
    y: Any,
    noise: Sequence[float] = DEFAULT_NOISE,
    methods: Sequence[str] = METHODS,
    folds: int = 10,
    draws: int = DRAWS,
    random_state: int = 0,
    svm_max_rows: int | None = SVM_MAX_ROWS,
    ica_max_rows: int = ICA_ROWS,
    ica_max_iter: int = ICA_ITER,
    known_fraction: float = 0.1,
    raw: bool = True,
    backend: str | None = None,
    n_jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> FrontierResult:
    """Measure accuracy and attack resistance of DISTPAB, GP and RP along a noise sweep.

    Parameters
    ----------
    X : (m, n) numeric matrix; y : (m,) class labels
    noise : noise values (:func:`parse_noise` checks a user's list)
    methods : any of ``("distpab", "gp", "rp")``
    folds : cross-validation folds (10 in the paper; fewer keeps tests fast)
    draws : the baselines' draws, the best (highest naive-inference score) kept
    random_state : the one seed of the run (see the module docstring)
    svm_max_rows : the SVM's stratified sample size (``None``: every row)
    ica_max_rows, ica_max_iter : rows FastICA is fitted on and its iterations
        (:func:`~gpuanon.perturb.attacks.ica_reconstruction`; the score is over every row)
    known_fraction : what the known input-output attacker knows
    raw : also score the unperturbed data (``FrontierResult.raw``; attacks would all be 0)
    backend : DISTPAB's array backend (``None``: ``$GPUANON_BACKEND`` or auto)
    n_jobs : cross-validation jobs
    progress : called with one line per finished (method, noise)

    Returns
    -------
    FrontierResult
        ``table`` with one row per (method, noise), methods in the given order, noise in the
        given order; see :data:`COLUMNS`.
    """
    t_all = time.perf_counter()
    X, y, noise, methods = _checked(X, y, noise, methods, folds)
    svm_idx = _svm_rows(y, svm_max_rows, folds, random_state)
    say = progress or (lambda _msg: None)

    raw_acc = {}
    if raw:
        t0 = time.perf_counter()
        raw_acc = _cv_accuracy(X, y, svm_idx, folds, random_state, n_jobs)
        raw_acc["mean"] = float(np.mean([raw_acc[k] for k in MODELS]))
        say("raw: " + " ".join(f"{k}={raw_acc[k]:.3f}" for k in MODELS) + f" ({time.perf_counter() - t0:.1f}s)")

    rows = []
    rp_cache = None
    point = dict(svm_idx=svm_idx, folds=folds, draws=draws, random_state=random_state, backend=backend,
                 n_jobs=n_jobs, known_fraction=known_fraction, ica_max_rows=ica_max_rows, ica_max_iter=ica_max_iter)
    for method in methods:
        for nz in noise:
            if method == "rp" and rp_cache is not None:
                rows.append(dict(rp_cache, noise=nz, seconds=0.0))
                continue
            rec = _point(method, nz, X, y, **point)
            rows.append(rec)
            if method == "rp":
                rp_cache = rec
            say(f"{method:7s} noise {nz:<5g} " + " ".join(f"{k}={rec[f'accuracy_{k}']:.3f}" for k in MODELS)
                + f" | naive={rec['naive']:.3f} ica={rec['ica']:.3f} io={rec['io']:.3f}"
                + f" min={rec['attack_min']:.3f} ({rec['seconds']:.1f}s)")
    table = pd.DataFrame(rows, columns=COLUMNS)
    config = {"noise": list(noise), "methods": methods, "folds": int(folds), "draws": int(draws),
              "random_state": int(random_state), "svm_max_rows": svm_max_rows, "svm_rows": int(svm_idx.size),
              "ica_max_rows": int(ica_max_rows), "ica_max_iter": int(ica_max_iter), "known_fraction": known_fraction, "rows": X.shape[0],
              "features": int(X.shape[1]),
              "models": {"knn": "StandardScaler + KNeighborsClassifier(5)",
                         "svm": "StandardScaler + SVC(rbf, C=1, gamma='scale')",
                         "lr": "StandardScaler + LogisticRegression(max_iter=5000)"},
              "rp_rows": "one RP draw (best of `draws`), repeated on every noise value's row"}
    return FrontierResult(table=table, raw=raw_acc, config=config, seconds=time.perf_counter() - t_all)


def run_frontier(dataset: str, noise: Sequence[float] = DEFAULT_NOISE, rows: int | None = None,
                 random_state: int = 0, **kwargs) -> FrontierResult:
    """:func:`frontier` on a named data set (:func:`load_frontier_data`); the config names it."""
    X, y, feats, note = load_frontier_data(dataset, rows=rows, seed=random_state)
    res = frontier(X, y, noise=noise, random_state=random_state, **kwargs)
    res.config.update(dataset=str(dataset), description=note, feature_names=feats)
    return res


# --------------------------------------------------------------------------- reading the frontier


def _dominates(acc_a, att_a, acc_b, att_b) -> np.ndarray:
    """``D[i, j]``: point ``i`` of ``a`` dominates point ``j`` of ``b`` (>= on both axes, > on one)."""
    ge = (acc_a[:, None] >= acc_b[None, :]) & (att_a[:, None] >= att_b[None, :])
    gt = (acc_a[:, None] > acc_b[None, :]) | (att_a[:, None] > att_b[None, :])
    return ge & gt


def compare(table: pd.DataFrame, method: str = "distpab", others: Sequence[str] = ("gp", "rp")) -> dict:
    """Where ``method`` dominates each other method, from the measured numbers.

    Per noise value: ``"dominates"`` when ``method`` has mean accuracy >= and attack minimum >=
    the other's at the same noise (at least one strictly greater), ``"dominated"`` for the
    reverse, ``"trade-off"`` otherwise (``"equal"`` when both are equal). Across the sweep:
    ``pareto_undominated`` -- the noise values whose ``method`` point no point of the other's
    curve dominates (as good on both axes, better on one); ``dominates_points_of_other`` -- the
    other's noise values whose point some ``method`` point dominates.

    >>> t = pd.DataFrame({"method": ["distpab", "gp"], "noise": [0.3, 0.3],
    ...                   "accuracy_mean": [0.9, 0.8], "attack_min": [0.2, 0.1]})
    >>> compare(t, others=("gp",))["gp"]["per_noise"]
    {0.3: 'dominates'}
    """
    own = table[table["method"] == method].set_index("noise")
    out = {}
    for other in others:
        oth = table[table["method"] == other].set_index("noise")
        if own.empty or oth.empty:
            continue
        per = {}
        for nz in own.index:
            if nz not in oth.index:
                continue
            da = own.at[nz, "accuracy_mean"] - oth.at[nz, "accuracy_mean"]
            dp = own.at[nz, "attack_min"] - oth.at[nz, "attack_min"]
            if da == 0 and dp == 0:
                per[float(nz)] = "equal"
            elif da >= 0 and dp >= 0:
                per[float(nz)] = "dominates"
            elif da <= 0 and dp <= 0:
                per[float(nz)] = "dominated"
            else:
                per[float(nz)] = "trade-off"
        acc_o, att_o = oth["accuracy_mean"].to_numpy(), oth["attack_min"].to_numpy()
        acc_s, att_s = own["accuracy_mean"].to_numpy(), own["attack_min"].to_numpy()
        dominated = _dominates(acc_o, att_o, acc_s, att_s).any(axis=0)
        beaten = _dominates(acc_s, att_s, acc_o, att_o).any(axis=0)
        out[other] = {"per_noise": per,
                      "pareto_undominated": [float(v) for v in own.index[~dominated]],
                      "dominates_points_of_other": [float(v) for v in oth.index[beaten]]}
    return out


def markdown_frontier(table: pd.DataFrame, raw: dict | None = None) -> str:
    """The frontier as a markdown table (RP once: its rows are one draw), raw data first.

    >>> t = pd.DataFrame({"method": ["gp"], "noise": [0.3], "accuracy_knn": [0.9], "accuracy_svm": [0.8],
    ...                   "accuracy_lr": [0.7], "accuracy_mean": [0.8], "naive": [1.0], "ica": [0.5],
    ...                   "io": [0.25], "attack_min": [0.25]})
    >>> print(markdown_frontier(t).splitlines()[2])
    | gp | 0.3 | 0.900 | 0.800 | 0.700 | 0.800 | 1.000 | 0.500 | 0.250 | 0.250 |
    """
    cols = ["accuracy_knn", "accuracy_svm", "accuracy_lr", "accuracy_mean", "naive", "ica", "io", "attack_min"]
    rp = table["method"].eq("rp")
    shown = table[~rp | (rp.cumsum() == 1)]  # RP once: its rows are one draw
    cells = shown[cols].map(lambda v: f"{v:.3f}")
    cells.insert(0, "noise", ["none" if m == "rp" else f"{nz:g}" for m, nz in zip(shown["method"], shown["noise"])])
    cells.insert(0, "method", shown["method"].astype(str))
    if raw:
        first = pd.DataFrame([["raw", "-", *(f"{raw[k]:.3f}" for k in (*MODELS, "mean")), "0", "-", "0", "0"]],
                             columns=cells.columns)
        cells = pd.concat([first, cells], ignore_index=True)
    cells.columns = ["method", "noise", "k-NN", "SVM", "LR", "mean accuracy", "naive", "ICA", "known I/O",
                     "attack min"]
    return markdown_table(cells).rstrip("\n")
