"""DISTPAB: distributed geometric perturbation of numeric data (SPEC section 8; seed 002).

The algorithm in three pure steps, so the same functions run in one process, on Dask workers
and between federated clients (chunk / combine / finalize):

1. **chunk** -- every entity computes :func:`local_stats` (row count, mean, co-moment) of its own
   rows; only these :class:`Stats` leave the entity.
2. **combine / finalize** -- the coordinator merges them (:func:`merge_stats`, :func:`merge_all`,
   Chan / Pebay), derives the global mean, standard deviation and the correlation matrix ``S``
   of the z-scored data (:func:`finalize`), and searches every (angle, reflection axis) pair at
   once from ``S`` alone (:func:`search`). It draws the translation ``t ~ U(0, 1)^n`` once and
   sends back one homogeneous matrix (:func:`homogeneous_matrix`) with the mean and scale.
3. **apply** -- every entity perturbs its rows block by block (:func:`perturb_block`,
   :func:`perturb_entity`) with its own random stream for the noise and the shuffle.

Conventions (the contract in SPEC section 8 wins over the paper):

* Rows are row vectors. For a z-scored row ``z`` the geometric step is
  ``y = (z F + t) R^T`` -- reflect, translate, rotate -- which is ``[z, 1] @ H`` for the
  homogeneous matrix ``H`` of :func:`homogeneous_matrix`.
* ``R_theta = G_(0,1) G_(0,2) ... G_(0,n-1) G_(1,2) ... G_(n-2,n-1)``: the Givens rotations of
  all pairs ``i < j`` in lexicographic order, multiplied left to right (the paper's algorithm 4,
  ``I3 = I3 x I2``); ``G_ij`` is the identity except ``G[i,i] = G[j,j] = cos``,
  ``G[j,i] = sin``, ``G[i,j] = -sin``.
* The variance of ``z - perturbed z`` on attribute ``j`` for ``A = R F_ax`` is
  ``V_j = 1 - 2 (A S)_jj + (A S A^T)_jj`` (sample variances, ``m - 1``); the translation does not
  change it. ``phi(theta, ax) = min_j V_j``.
* Axes are 0-based; angles are degrees.
* Randomized expansion ``y <- (|y| + |N(0, noise^2)|) * sign(y)`` with ``sign(0) = +1``.
* Constant columns (``sigma = 0``) are left out of the search and copied through unchanged.
* Random streams: ``SeedSequence(random_state, spawn_key=(0,))`` draws the translation (central);
  ``SeedSequence(random_state, spawn_key=(1, entity))`` spawns two children, the first for the
  entity's shuffle (NumPy, on the host) and the second for its noise (NumPy or CuPy).
* Split invariance: with ``noise=0`` and ``shuffle=False`` any split of the rows into entities
  gives the centralized output up to floating-point rounding (about 1e-14 relative: the
  co-moments are summed in another order); the angle and axis are the same, since values of
  phi within ``TIE_TOL`` are ties. The same entities give bit-identical output in one process
  and on Dask workers, noise and shuffle included.

The steps live in :mod:`gpuanon.perturb.stats` (chunk, combine), :mod:`gpuanon.perturb.angle_search`
(the central search) and :mod:`gpuanon.perturb.apply` (the perturbation at an entity); this
module holds the estimator, the frame checks and :func:`perturb_frame`, and re-exports the rest.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
>>> model = DISTPAB(noise=0.0, shuffle=False, random_state=0).fit(X)
>>> Xp, perm = model.perturb(X)
>>> Xp.shape, bool(model.phi_ > 0), int(model.axis_) in range(4)
((500, 4), True, True)
"""


from __future__ import annotations

import numbers
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..backend import device_matrix, frame_to_host, get_backend, is_device_array, is_device_frame, to_host
from ..errors import InputError, SchemaError, shown
from ..estimator import Estimator, check_is_fitted
from ..table.schema import as_list, suggest
from .angle_search import (DEFAULT_ANGLES, TIE_TOL, SearchResult, homogeneous_matrix, rotation_matrices, search,
                           variance_table)
from .apply import PerturbParams, entity_seed, perturb_block, perturb_entity
from .stats import Stats, finalize, local_stats, merge_all, merge_stats

__all__ = [
    "DEFAULT_ANGLES",
    "TIE_TOL",
    "Stats",
    "SearchResult",
    "PerturbParams",
    "DISTPAB",
    "local_stats",
    "merge_stats",
    "merge_all",
    "finalize",
    "rotation_matrices",
    "variance_table",
    "search",
    "homogeneous_matrix",
    "perturb_block",
    "perturb_entity",
    "perturb_frame",
    "validate_frame",
    "frame_matrix",
    "is_frame",
    "entity_seed",
]


# --------------------------------------------------------------------------- validation helpers

def _numeric_problem(df, cols) -> list:
    return [c for c in cols if not pd.api.types.is_numeric_dtype(df[c].dtype)
            or pd.api.types.is_complex_dtype(df[c].dtype)]


def _require_numeric(df, names) -> None:
    """SchemaError listing every non-numeric feature column, with the fix."""
    bad = _numeric_problem(df, names)
    if bad:
        listed = ", ".join(f"'{c}' ({df[c].dtype})" for c in bad)
        raise SchemaError(f"DISTPAB perturbs numeric features only; non-numeric feature column(s): "
                          f"{listed}. Exclude them, or pass --features (features=[...]) with numeric "
                          "columns only; pass a label column as label=")


def validate_frame(df, features, label=None, passengers=None) -> tuple[list, list]:
    """Check the columns DISTPAB reads from a frame; return ``(features, carried)``.

    ``carried`` is ``[label] + passengers``: columns that travel with their rows through the
    shuffle.

    Raises
    ------
    SchemaError
        Unknown columns, a column in two roles, non-numeric features (all listed) or features
        with missing values.
    """
    feats = as_list(features)
    carried = ([] if label is None else [label]) + as_list(passengers)
    cols = list(df.columns)
    if not feats:
        raise SchemaError("no feature columns given; pass features=[...] (--features COL1,COL2,...)")
    for role, names in (("feature", feats), ("label/passenger", carried)):
        for c in names:
            if c not in cols:
                raise SchemaError(f"{role} column '{c}' is not a column{suggest(c, cols)}")
    if len(feats) < 2:  # one column has no plane to rotate in: only noise and a shift would be left
        raise SchemaError(f"DISTPAB rotates the features together and needs at least 2 of them, got 1 ('{feats[0]}'); "
                          f"pass two or more numeric columns (--features {feats[0]},OTHER)")
    dup = sorted({str(c) for c in feats if feats.count(c) > 1})
    if dup:
        raise SchemaError(f"feature column(s) {', '.join(map(repr, dup))} listed more than once")
    both = [c for c in carried if c in feats]
    if both:
        raise SchemaError(f"column(s) {', '.join(map(repr, both))} cannot be both a feature and a "
                          "label/passenger; a label is carried unperturbed")
    _require_numeric(df, feats)
    na = {c: int(df[c].isna().sum()) for c in feats}   # column by column: no copy of the block
    na = {c: k for c, k in na.items() if k}
    if na:
        listed = ", ".join(f"'{c}' ({k} missing)" for c, k in na.items())
        raise SchemaError(f"feature column(s) with missing values: {listed}; impute or drop those rows "
                          "before perturbing")
    return feats, carried


def frame_matrix(df, feats):
    """Feature block of a frame as one array (float32 when every feature is float32): NumPy for a
    pandas frame, CuPy for a cuDF frame (built on the device, no host trip)."""
    dts = {np.dtype(df[c].dtype) for c in feats}
    dtype = np.float32 if dts == {np.dtype(np.float32)} else np.float64
    if is_device_frame(df):
        return device_matrix(df, feats, dtype)
    return df[feats].to_numpy(dtype=dtype, copy=False)


def _on_backend(X, xp):
    """A cuDF frame's feature block (CuPy) stays on the device; on the CPU backend it comes to the
    host in one counted copy."""
    return to_host(X) if xp is np and is_device_array(X) else X


def _finite(arr):
    """``arr`` (host), or an InputError naming the feature columns with missing or infinite values."""
    ok = np.isfinite(arr).all(axis=0) if arr.dtype.kind == "f" else True
    if not np.all(ok):
        bad = np.flatnonzero(~ok)
        listed = ", ".join(f"'{j}' ({int(np.isnan(arr[:, j]).sum())} missing, {int(np.isinf(arr[:, j]).sum())} "
                           "infinite)" for j in bad)
        raise InputError(f"feature column(s) with missing or infinite values: {listed}; impute or drop those "
                         "rows before perturbing")
    return arr


def is_frame(X) -> bool:
    """True for a pandas or cuDF frame (anything with ``columns`` and ``iloc``)."""
    return hasattr(X, "columns") and hasattr(X, "iloc")


# --------------------------------------------------------------------------- estimator

class DISTPAB(Estimator):
    """DISTPAB / PABIDOT perturbation of numeric features, centralized or across entities.

    Parameters
    ----------
    noise : float, default 0.3
        Standard deviation of the randomized-expansion noise (z-space); 0 turns it off.
    angles : sequence of degrees, default :data:`DEFAULT_ANGLES` (172 angles)
    selection : {'maximin', 'max'}
        How (angle, axis) is chosen (:func:`search`).
    shuffle : bool, default True
        Shuffle each entity's published rows (:meth:`perturb`, :func:`perturb_frame`, the
        ``perturb`` command; labels travel with them). ``transform`` never shuffles: its rows stay
        aligned with the input's (and with ``y`` in a ``Pipeline``).
    random_state : int, None or numpy Generator
        Seeds the central translation and, per entity, the noise and the shuffle.
    backend : {'auto', 'cpu', 'gpu'} or None
        Array backend (:func:`gpuanon.backend.get_backend`).
    block_rows : int, default 2**20
        Rows perturbed per block (bounds scratch memory).

    Attributes
    ----------
    phi_, angle_degrees_, axis_ (0-based feature index), variances_ (d,; constant columns 0),
    mean_, scale_ (constant columns 0), translation_ (d,; constant columns 0),
    rotation_ (d, d; z-space, identity on constant columns), homogeneous_ (d+1, d+1),
    constant_columns_ (names or indices), bytes_per_entity_, bytes_sent_per_entity_,
    bytes_received_per_entity_, n_entities_, n_features_in_, feature_names_in_ (frames only),
    params_ (:class:`PerturbParams`), search_ (:class:`SearchResult`), backend_.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> parts = [rng.normal(size=(m, 3)) for m in (50, 80, 20)]
    >>> model = DISTPAB(noise=0.3, random_state=7).fit_entities(parts)
    >>> Xp, perm = model.perturb(parts[1], entity=1)
    >>> Xp.shape, model.n_entities_, model.bytes_per_entity_
    ((80, 3), 3, 288)
    """

    def __init__(self, *, noise: float = 0.3, angles=None, selection: str = "maximin", shuffle: bool = True,
                 random_state=None, backend=None, block_rows: int = 1 << 20):
        self.noise = noise
        self.angles = angles
        self.selection = selection
        self.shuffle = shuffle
        self.random_state = random_state
        self.backend = backend
        self.block_rows = block_rows

    # -- helpers
    def array_module(self):
        """``numpy`` or ``cupy``: the array module of the backend (resolved again when ``backend`` changes)."""
        if getattr(self, "backend_", None) is None or getattr(self, "_backend_asked", None) != self.backend:
            self.backend_ = get_backend(self.backend)
            self._backend_asked = self.backend
        return self.backend_.xp

    def seed_entropy(self) -> int:
        """The entropy every random stream derives from (``random_state``, or fresh entropy once per fit)."""
        if getattr(self, "_entropy_", None) is None:
            rs = self.random_state
            if rs is None:
                self._entropy_ = np.random.SeedSequence().entropy
            elif isinstance(rs, (bool, np.bool_)):
                raise ValueError(f"random_state must be an int, None or a numpy Generator, got {rs!r}")
            elif isinstance(rs, numbers.Integral):
                if int(rs) < 0:
                    raise ValueError(f"random_state must be non-negative, got {rs}")
                self._entropy_ = int(rs)
            elif isinstance(rs, (np.random.Generator, np.random.RandomState)):
                self._entropy_ = int(rs.integers(0, 2 ** 63) if isinstance(rs, np.random.Generator)
                                     else rs.randint(0, 2 ** 31))
            else:
                raise ValueError(f"random_state must be an int, None or a numpy Generator, got {rs!r}")
        return self._entropy_

    def _matrix(self, X, fitting: bool):
        """(array, names or None) from an array or a frame of numeric features."""
        if is_frame(X):
            names = list(X.columns) if (fitting or getattr(self, "feature_names_in_", None) is None) \
                else list(self.feature_names_in_)
            if not fitting and getattr(self, "feature_names_in_", None) is not None:
                missing = [c for c in names if c not in X.columns]
                if missing:
                    raise SchemaError(f"feature column(s) {', '.join(map(repr, missing))} seen in fit "
                                      "are missing here")
            _require_numeric(X, names)
            return _on_backend(frame_matrix(X, names), self.array_module()), names
        if is_device_array(X):
            if X.ndim != 2:
                raise InputError(f"DISTPAB expects a 2-D (rows x features) array, got {X.ndim}-D")
            return X, None
        # scikit-learn's checks and messages: sparse, complex, 1-D, empty; objects become numbers
        from sklearn.utils.validation import check_array  # noqa: PLC0415

        return _finite(check_array(X, dtype="numeric", ensure_all_finite=False, estimator=self)), None

    # -- fitting
    def fit(self, X, y=None):
        """Centralized fit: one entity holding every row."""
        return self.fit_entities([X])

    def fit_entities(self, entities: Sequence[Any]):
        """Distributed fit: only :func:`local_stats` of each entity's rows reach :meth:`fit_stats`."""
        xp = self.array_module()
        stats, names = [], None
        for X in entities:
            arr, nm = self._matrix(X, fitting=True)
            if names is None:
                names = nm
            elif nm is not None and nm != names:
                raise SchemaError("entities have different feature columns: "
                                  f"{names} vs {nm}")
            stats.append(local_stats(arr, xp))
        return self.fit_stats(stats, feature_names=names)

    def fit_stats(self, stats_list: Sequence[Stats], feature_names=None):
        """The coordinator's work: merge, finalize, search, draw the translation, build ``H``."""
        xp = self.array_module()
        stats_list = list(stats_list) if not isinstance(stats_list, Stats) else [stats_list]
        if not stats_list:
            raise InputError("fit needs at least one entity")
        if not (isinstance(self.noise, numbers.Real) and np.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"noise must be a finite number >= 0, got {shown(self.noise)}")
        if not (isinstance(self.block_rows, numbers.Integral) and self.block_rows >= 1):
            raise ValueError(f"block_rows must be a positive integer, got {shown(self.block_rows)}")
        ds = {s.n_features for s in stats_list}
        if len(ds) != 1:
            raise InputError(f"entities sent statistics of different widths: {sorted(ds)}")
        d = ds.pop()
        if feature_names is not None and len(feature_names) != d:
            raise InputError(f"{len(feature_names)} feature names for {d} columns")
        merged = merge_all(stats_list)
        self._entropy_ = None  # a refit reads random_state again (None: fresh entropy)
        self.seed_entropy()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mean, sigma, S, const = finalize(merged, names=feature_names)
        for w in caught:
            warnings.warn(w.message, w.category, stacklevel=2)
        active = np.flatnonzero(~const)
        if active.size == 0:
            raise InputError("every feature column is constant; there is nothing to perturb")
        res = search(S[np.ix_(active, active)], self.angles, self.selection, xp)

        central = np.random.default_rng(np.random.SeedSequence(self.seed_entropy(), spawn_key=(0,)))
        t = central.uniform(0.0, 1.0, size=d)
        t[const] = 0.0
        na = active.size
        Ra = rotation_matrices([res.angle], na)[0]  # on the host, once
        Ha = homogeneous_matrix(res.angle, res.axis, t[active], na, R=Ra)
        H = np.eye(d + 1)
        idx = np.append(active, d)
        H[np.ix_(idx, idx)] = Ha
        R = np.eye(d)
        R[np.ix_(active, active)] = Ra

        self.search_ = res
        self.phi_ = float(res.phi)
        self.angle_degrees_ = float(res.angle)
        self.axis_ = int(active[res.axis])
        v = np.zeros(d)
        v[active] = res.variances
        self.variances_ = v
        self.mean_ = mean
        self.scale_ = sigma
        self.translation_ = t
        self.rotation_ = R
        self.homogeneous_ = H
        self.constant_mask_ = const
        self.constant_columns_ = ([feature_names[i] for i in np.flatnonzero(const)] if feature_names is not None
                                  else [int(i) for i in np.flatnonzero(const)])
        self.n_features_in_ = d
        if feature_names is not None:
            self.feature_names_in_ = np.asarray(feature_names, dtype=object)
        else:
            self.__dict__.pop("feature_names_in_", None)
        self.n_entities_ = len(stats_list)
        self.n_rows_ = int(merged.n)
        self.params_ = PerturbParams(mean=mean, scale=sigma, H=H, noise=float(self.noise))
        self.bytes_sent_per_entity_ = 8 * (1 + d + d * d)
        self.bytes_received_per_entity_ = self.params_.nbytes
        self.bytes_per_entity_ = self.bytes_sent_per_entity_ + self.bytes_received_per_entity_
        return self

    # -- applying
    def entity_seed(self, entity: int) -> np.random.SeedSequence:
        """The random stream of ``entity`` (noise and shuffle)."""
        return entity_seed(self.seed_entropy(), entity)

    def perturb(self, X, entity: int = 0):
        """Perturb one entity's rows with the fitted parameters: ``(Xp, perm)``.

        Output row ``i`` is input row ``perm[i]`` perturbed (the shuffle); ``Xp`` is float32 for
        float32 input, else float64. Carry labels and other columns with ``perm``.
        """
        return self._perturb(X, entity, self.shuffle)

    def _perturb(self, X, entity: int, shuffle: bool):
        check_is_fitted(self, "params_")
        arr, _ = self._matrix(X, fitting=False)
        if int(arr.shape[1]) != self.n_features_in_:
            raise InputError(f"X has {int(arr.shape[1])} features, but DISTPAB is expecting "
                             f"{self.n_features_in_} features as input")
        return perturb_entity(arr, self.params_, self.entity_seed(entity), shuffle=shuffle,
                              block_rows=self.block_rows, xp=self.array_module())

    def fit_perturb(self, X):
        """``fit(X)`` then ``perturb(X, entity=0)``: ``(Xp, perm)``."""
        return self.fit(X).perturb(X, entity=0)

    def transform(self, X, entity: int = 0):
        """The perturbed rows (an array) in the input's order, as a scikit-learn transformer returns
        them: the rows :meth:`perturb` publishes with ``shuffle=False`` (the same noise), whatever
        ``shuffle`` says. Changes no fitted state.

        >>> from sklearn.pipeline import make_pipeline
        >>> from sklearn.neighbors import KNeighborsClassifier
        >>> from sklearn.datasets import load_wine
        >>> X, y = load_wine(return_X_y=True)
        >>> pipe = make_pipeline(DISTPAB(random_state=0, backend="cpu"), KNeighborsClassifier())
        >>> bool(pipe.fit(X, y).score(X, y) > 0.5)
        True
        """
        return self._perturb(X, entity, shuffle=False)[0]

    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X)`` then ``transform(X, entity=0)``: the perturbed rows in the input's order."""
        return self.fit(X).transform(X, entity=0)

    def report(self) -> dict:
        """The fitted parameters as plain JSON-ready values."""
        names = (list(map(str, self.feature_names_in_)) if getattr(self, "feature_names_in_", None) is not None
                 else [str(i) for i in range(self.n_features_in_)])
        return {"phi": self.phi_, "angle_degrees": self.angle_degrees_, "axis": self.axis_,
                "axis_feature": names[self.axis_], "features": names,
                "variances": [float(v) for v in self.variances_],
                "constant_columns": [str(c) for c in self.constant_columns_],
                "bytes_per_entity": self.bytes_per_entity_, "n_entities": self.n_entities_,
                "selection": self.selection, "noise": float(self.noise),
                "backend": self.backend_.name}


def perturb_frame(df, features, label=None, passengers=None, noise: float = 0.3, angles=None,
                  selection: str = "maximin", shuffle: bool = True, random_state=None, backend=None,
                  block_rows: int = 1 << 20, model: DISTPAB | None = None, entity: int = 0):
    """Perturb a frame's numeric ``features``; ``label`` and ``passengers`` travel with their rows.

    Fits a :class:`DISTPAB` on the frame (centralized) unless a fitted ``model`` is given, then
    perturbs its rows as ``entity``. The output has the feature, label and passenger columns in
    the frame's column order and a fresh ``RangeIndex`` (the original index would undo the
    shuffle); other columns are dropped.

    Returns
    -------
    (DataFrame, DISTPAB)

    Raises
    ------
    SchemaError
        Non-numeric features (all listed; exclude them or pass --features), unknown columns,
        missing values in features.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [2.0, 1, 4, 3], "y": [0, 1, 0, 1]})
    >>> out, model = perturb_frame(df, ["a", "b"], label="y", random_state=0)
    >>> list(out.columns), sorted(out["y"].tolist())
    (['a', 'b', 'y'], [0, 0, 1, 1])
    """
    feats, carried = validate_frame(df, features, label, passengers)
    X = frame_matrix(df, feats)
    if model is None:
        model = DISTPAB(noise=noise, angles=angles, selection=selection, shuffle=shuffle,
                        random_state=random_state, backend=backend, block_rows=block_rows)
        X = _on_backend(X, model.array_module())
        model.fit_stats([local_stats(X, model.array_module())], feature_names=feats)
    X = _on_backend(X, model.array_module())
    Xp, perm = model.perturb(X, entity=entity)
    src = df
    if is_device_frame(df):  # a cuDF frame: the perturbed rows and carried columns come back counted
        Xp = to_host(Xp)
        src = frame_to_host(df[carried]) if carried else df
    out = pd.DataFrame(Xp, columns=feats, copy=False)
    for c in carried:
        out[c] = src[c].to_numpy()[perm]
    order = [c for c in df.columns if c in set(feats) | set(carried)]
    return out[order] if order != list(out.columns) else out, model
