"""Protections of the training part: ``raw``, Mondrian (``k=3,l=2``, ...), ``suppress``, ``distpab``.

A protection is written as text (``'k=3,t=0.2'``, ``'distpab,noise=0.3'``) or as a dict of the
same keys; :func:`parse_protections` reads a ``;``-separated list and refuses repeats.

Each protection is an object of its kind (:class:`Raw`, :class:`MondrianSpec`, :class:`Suppress`,
:class:`Distpab`) with ``validate(train, setup)``, run for every protection before any is applied,
and ``apply(train, test, setup)``, which returns the :class:`Protected` features and labels the
models are trained and tested on; :class:`Setup` holds what they share (roles, feature space, labels).

>>> [p.name for p in parse_protections("raw;k=3,l=2;distpab")]
['raw', 'k=3,l=2', 'distpab']
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..anonymize.mondrian import Mondrian
from ..backend import to_host
from ..errors import InputError, SchemaError
from ..metrics import compute_metrics, summary_from_output
from ..perturb.distpab import DISTPAB
from .features import FeatureSpace

log = logging.getLogger("gpuanon")

DEFAULT_PROTECTIONS = "raw;k=3;k=10;k=50;k=3,l=2;k=3,t=0.2;k=3,optimize;distpab"

_MONDRIAN_KEYS = {"k": int, "l": int, "t": float, "c": float, "l_kind": str, "t_distance": str, "mode": str,
                  "optimize": bool, "hierarchies": str, "rho": float, "max_suppression": float}
_DISTPAB_KEYS = {"noise": float, "selection": str, "seed": int}


@dataclass
class Setup:
    """What every protection of one evaluation shares: the roles, the split's labels and the feature space.

    ``data`` is the whole table (a missing value anywhere in it is named in DISTPAB's error),
    ``y_train`` / ``y_test`` the label codes of the two parts, ``x_test_raw`` the raw held-out rows
    in the feature space.
    """

    data: pd.DataFrame
    qi: list
    sensitive: str
    target: str
    identifiers: list
    numeric: Any
    categorical: Any
    backend: str | None
    max_suppression: float
    random_state: int
    space: FeatureSpace
    classes: pd.Index
    y_train: np.ndarray
    y_test: np.ndarray
    x_test_raw: np.ndarray

    @property
    def numeric_features(self) -> list:
        return [c for c in self.space.columns if self.space.kinds[c] == "numeric"]


@dataclass
class Protected:
    """A protection's result: the features and labels to train on, those to test on, its
    information-loss metrics (:data:`~gpuanon.evaluate.experiment.LOSS_METRICS`' names) and what the
    evaluation report says of it besides (``info``)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    metrics: dict
    info: dict = field(default_factory=dict)
    #: the published table (for the attacks on it: ``evaluate --attacks``); None when there is none
    release: pd.DataFrame | None = None


@dataclass
class Protection:
    """One way of protecting the training part: ``kind`` is raw, mondrian, suppress or distpab.

    :func:`parse_protection` returns the subclass of the kind; this base class protects nothing.
    """

    name: str
    kind: str
    params: dict = field(default_factory=dict)

    #: whether the protection reads the quasi-identifiers (an evaluation without them refuses it)
    needs_quasi_identifiers = False

    def validate(self, train: pd.DataFrame, setup: Setup) -> None:
        """Refuse, with a one-line error, what :meth:`apply` would fail on (before any protection runs)."""

    def apply(self, train: pd.DataFrame, test: pd.DataFrame, setup: Setup) -> Protected:
        raise NotImplementedError(f"protection kind '{self.kind}' has no apply")


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


class Raw(Protection):
    """The training part as it is: the baseline every accuracy drop is measured from."""

    def apply(self, train, test, setup):
        sp = setup.space
        met = raw_metrics(train, setup.qi, {c: sp.kinds[c] for c in setup.qi}, setup.target) if setup.qi else {}
        return Protected(sp.transform_raw(train), setup.y_train, setup.x_test_raw, setup.y_test, met, release=train)


class MondrianSpec(Protection):
    """Mondrian with the protection's parameters (``k=3,l=2``, ...), published as minmax ranges; the
    models read the generalized cells, the held-out rows stay raw."""

    needs_quasi_identifiers = True

    def estimator(self, train: pd.DataFrame, setup: Setup):
        kw = dict(self.params)
        k = self._k(train, kw)
        hier = kw.pop("hierarchies", None)
        return Mondrian(k=k, quasi_identifiers=setup.qi, sensitive=setup.sensitive, target=setup.target,
                        identifiers=setup.identifiers, numeric=[c for c in setup.numeric or [] if c in setup.qi],
                        categorical=[c for c in setup.categorical or [] if c in setup.qi],  # kinds of QIs only
                        output_format="minmax", backend=setup.backend, progress=False,
                        max_suppression=kw.pop("max_suppression", setup.max_suppression), hierarchies=hier, **kw)

    def _k(self, train, kw) -> int:
        return kw.pop("k")

    def validate(self, train, setup):
        m = self.estimator(train, setup)
        try:
            m.hierarchy_plan(train, m.validate(train))
        except SchemaError as exc:
            raise SchemaError(f"protection '{self.name}': {exc}") from None
        n_sa = int(train[setup.sensitive].nunique(dropna=False))
        if self.params.get("l", 0) > n_sa:
            raise InputError(f"protection '{self.name}': the training part has {n_sa} distinct '{setup.sensitive}' "
                             f"value(s), fewer than l = {self.params['l']}; lower l")

    def apply(self, train, test, setup):
        m = self.estimator(train, setup)
        out = m.fit_transform(train)  # verified independently before it is used
        hmap = {name: b.hierarchy for name, b in m.table_.hierarchies.items()}
        X_tr = setup.space.transform_generalized(out, hmap)
        y_tr = pd.Index(setup.classes).get_indexer(out[setup.target])
        info = {"achieved": m.report_["achieved"], "n_partitions": int(m.n_partitions_)}
        return Protected(X_tr, y_tr, setup.x_test_raw, setup.y_test, mondrian_metrics(m), info, release=out)


class Suppress(MondrianSpec):
    """Every training row in one class (k = the training rows): the floor of what a model can learn."""

    def _k(self, train, kw) -> int:
        return int(len(train))


class Distpab(Protection):
    """DISTPAB on the numeric features; the held-out rows go through the same fitted perturbation
    (categorical features are left out of its feature space)."""

    def validate(self, train, setup):
        num_cols, data = setup.numeric_features, setup.data
        if not num_cols:
            raise SchemaError(f"protection '{self.name}': DISTPAB perturbs numeric features and the table has "
                              "none; leave distpab out of --protections")
        gaps = [f"{c} ({int(data[c].isna().sum())} missing)" for c in num_cols if data[c].isna().any()]
        if gaps:
            raise SchemaError(f"protection '{self.name}' needs complete numeric features: {', '.join(gaps)}; fill "
                              "or drop those values, or leave distpab out of --protections")
        noise = self.params.get("noise", 0.3)
        if not (np.isfinite(noise) and noise >= 0):
            raise InputError(f"protection '{self.name}': noise must be a finite number >= 0, e.g. noise=0.3")
        if self.params.get("selection", "maximin") not in ("maximin", "max"):
            raise InputError(f"protection '{self.name}': selection must be maximin or max")

    def apply(self, train, test, setup):
        num_cols = setup.numeric_features
        if not num_cols:
            raise SchemaError("DISTPAB perturbs numeric features and the table has none")
        dropped = [c for c in setup.space.columns if c not in num_cols]
        if dropped:
            log.info("DISTPAB: %d numeric features perturbed; categorical column(s) %s left out of its feature "
                     "space", len(num_cols), ", ".join(dropped))
        dp = DISTPAB(noise=self.params.get("noise", 0.3), selection=self.params.get("selection", "maximin"),
                     random_state=self.params.get("seed", int(setup.random_state)), backend=setup.backend)
        Xn_tr = train[num_cols].to_numpy(dtype=np.float64)
        Xn_te = test[num_cols].to_numpy(dtype=np.float64)
        if np.isnan(Xn_tr).any() or np.isnan(Xn_te).any():
            raise SchemaError("DISTPAB needs complete numeric features; fill or drop missing values in "
                              f"{', '.join(c for c in num_cols if setup.data[c].isna().any())}")
        dp.fit(Xn_tr)
        X_tr, perm = dp.perturb(Xn_tr, entity=0)
        X_te, perm_te = dp.perturb(Xn_te, entity=1)
        info = {"distpab": {k: v for k, v in dp.report().items()
                            if k in ("phi", "angle_degrees", "axis_feature", "noise", "features")}}
        X_tr = to_host(X_tr)
        return Protected(X_tr, setup.y_train[to_host(perm)], to_host(X_te), setup.y_test[to_host(perm_te)],
                         {}, info, release=pd.DataFrame(X_tr, columns=num_cols))


KINDS = {"raw": Raw, "mondrian": MondrianSpec, "suppress": Suppress, "distpab": Distpab}


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
        what = "a whole number" if typ is int else "a number" if typ is float else f"a {typ.__name__}"
        example = {"k": "k=10", "l": "l=2", "t": "t=0.2", "c": "c=3", "rho": "rho=10", "noise": "noise=0.3",
                   "seed": "seed=0", "max_suppression": "max_suppression=0.01"}.get(key, f"{key}=3")
        raise InputError(f"protection option '{key}={text}' is not {what}; write e.g. {example}") from None
    if typ is float and key == "rho" and float(v).is_integer():
        v = int(v)
    return v


def parse_protection(spec: str | dict | Protection) -> Protection:
    """One protection from text (``'raw'``, ``'k=3,l=2'``, ``'k=3,optimize'``, ``'distpab,noise=0.3'``,
    ``'suppress'``) or a dict of the same keys.

    >>> parse_protection("k=3, t=0.2")
    MondrianSpec(name='k=3,t=0.2', kind='mondrian', params={'k': 3, 't': 0.2})
    >>> parse_protection("k=3,opt").params
    {'k': 3, 'optimize': True}
    """
    if isinstance(spec, Protection):
        if type(spec) is not Protection:
            return spec
        if spec.kind not in KINDS:
            raise InputError(f"protection '{spec.name}': unknown kind '{spec.kind}'; accepted: {', '.join(KINDS)}")
        return KINDS[spec.kind](spec.name, spec.kind, dict(spec.params))
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
        return Raw("raw", "raw", {})
    if head in ("suppress", "suppress-all"):
        if len(parts) > 1:
            raise InputError(f"protection '{text}': 'suppress' takes no options")
        return Suppress("suppress", "suppress", {})
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
        return Distpab(name, "distpab", params)
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
    return MondrianSpec(name, "mondrian", params)


def parse_protections(spec: str | Iterable) -> list[Protection]:
    """A list of protections from ``'raw;k=3;k=3,l=2'`` or an iterable of texts / dicts."""
    items = [s for s in str(spec).split(";") if s.strip()] if isinstance(spec, str) else list(spec)
    if not items:
        raise InputError("no protections given (an empty list); write e.g. --protections 'raw;k=3;k=10'")
    out = [parse_protection(s) for s in items]
    names = [p.name for p in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"protection(s) {', '.join(dup)} given twice")
    return out

