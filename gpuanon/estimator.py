"""scikit-learn's estimator contract without importing scikit-learn: the base of Mondrian and DISTPAB.

``import sklearn.base`` costs about 1.3 s of CPU (it loads ``scipy.sparse``, ``scipy.stats``, pandas
and joblib), more than a small fit. :class:`Estimator` implements what scikit-learn's base classes
(``TransformerMixin``, ``BaseEstimator``) give an estimator, as scikit-learn 1.7 does it:
``get_params`` / ``set_params`` (nested ``a__b`` too), ``clone`` (``__sklearn_clone__``), pickling
and the tags of a transformer (``__sklearn_tags__``). What needs scikit-learn's own code imports it
when it runs: the tags (only scikit-learn asks for them), the repr and the notebook's HTML view
(scikit-learn's, of a ``BaseEstimator`` with the same name and parameters), and ``NotFittedError``
when it is raised. ``sklearn.base.clone``, ``Pipeline``, ``GridSearchCV`` and
``sklearn.utils.estimator_checks`` take these estimators; ``isinstance(est, BaseEstimator)`` is
False (scikit-learn's checks warn about that, and run as before).

>>> class Scale(Estimator):
...     def __init__(self, *, factor=1.0, columns=None):
...         self.factor, self.columns = factor, columns
>>> s = Scale(factor=2.0)
>>> s, s.get_params()
(Scale(factor=2.0), {'columns': None, 'factor': 2.0})
>>> c = clone(s.set_params(columns=["a"]))
>>> c.get_params() == s.get_params() and c.columns is not s.columns
True
"""

from __future__ import annotations

import copy
import inspect

__all__ = ["Estimator", "check_is_fitted", "clone"]


class Estimator:
    """A scikit-learn transformer's base (``TransformerMixin`` + ``BaseEstimator``), scikit-learn-free."""

    @classmethod
    def _get_param_names(cls) -> list:
        """The constructor's parameter names, sorted (a ``*args`` constructor is refused)."""
        init = getattr(cls.__init__, "deprecated_original", cls.__init__)
        if init is object.__init__:
            return []
        params = [p for p in inspect.signature(init).parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            raise RuntimeError(f"scikit-learn estimators should always specify their parameters in the signature of "
                               f"their __init__ (no varargs); {cls} does not")
        return sorted(p.name for p in params)

    def get_params(self, deep: bool = True) -> dict:
        """The parameters by name; ``deep``: with ``name__sub`` entries of parameters that are estimators."""
        out = {}
        for key in self._get_param_names():
            value = getattr(self, key)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{key}__{k}", v) for k, v in value.get_params().items())
            out[key] = value
        return out

    def set_params(self, **params):
        """Set parameters (``name__sub`` sets a parameter of a parameter that is an estimator); returns self."""
        if not params:
            return self
        valid = self.get_params(deep=True)
        nested: dict = {}
        for key, value in params.items():
            key, delim, sub = key.partition("__")
            if key not in valid:
                raise ValueError(f"Invalid parameter {key!r} for estimator {self}. "
                                 f"Valid parameters are: {self._get_param_names()!r}.")
            if delim:
                nested.setdefault(key, {})[sub] = value
            else:
                setattr(self, key, value)
                valid[key] = value
        for key, sub_params in nested.items():
            valid[key].set_params(**sub_params)
        return self

    def __sklearn_clone__(self):
        return clone(self)

    def __sklearn_tags__(self):
        """scikit-learn's tags of a transformer (only scikit-learn asks, so it is loaded already)."""
        from sklearn.utils import Tags, TargetTags, TransformerTags  # noqa: PLC0415

        return Tags(estimator_type=None, target_tags=TargetTags(required=False), transformer_tags=TransformerTags(),
                    regressor_tags=None, classifier_tags=None)

    def __getstate__(self):
        return dict(self.__dict__)

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """scikit-learn's repr (the parameters that differ from their defaults), by scikit-learn's own code."""
        return _sklearn_twin(self).__repr__(N_CHAR_MAX)

    def _repr_mimebundle_(self, **kwargs):
        """A notebook's view: the text, and scikit-learn's HTML diagram when its display setting asks for one."""
        from sklearn import get_config  # noqa: PLC0415
        from sklearn.utils import estimator_html_repr  # noqa: PLC0415

        out = {"text/plain": repr(self)}
        if get_config()["display"] == "diagram":
            out["text/html"] = estimator_html_repr(self)
        return out


def _sklearn_twin(est):
    """A ``BaseEstimator`` of the same name and parameters, for scikit-learn's repr and HTML view."""
    from sklearn.base import BaseEstimator  # noqa: PLC0415

    cls = type(est)
    twin = _TWINS.get(cls)
    if twin is None:
        init = getattr(cls.__init__, "deprecated_original", cls.__init__)
        twin = _TWINS[cls] = type(cls.__name__, (BaseEstimator,), {"__init__": init, "__module__": cls.__module__})
    return twin(**est.get_params(deep=False))


_TWINS: dict = {}


def _clone_param(value):
    if type(value) is dict:
        return {k: _clone_param(v) for k, v in value.items()}
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(_clone_param(v) for v in value)
    if hasattr(value, "get_params") and not isinstance(value, type):
        return value.__sklearn_clone__() if hasattr(value, "__sklearn_clone__") else clone(value)
    return copy.deepcopy(value)


def clone(est):
    """A new unfitted estimator with the same parameters (copied), as ``sklearn.base.clone`` makes it."""
    params = {name: _clone_param(value) for name, value in est.get_params(deep=False).items()}
    new = type(est)(**params)
    if hasattr(est, "_metadata_request"):
        new._metadata_request = copy.deepcopy(est._metadata_request)
    got = new.get_params(deep=False)
    for name in params:
        if params[name] is not got[name]:
            raise RuntimeError(f"Cannot clone object {est}, as the constructor either does not set or modifies "
                               f"parameter {name}")
    if hasattr(est, "_sklearn_output_config"):
        new._sklearn_output_config = copy.deepcopy(est._sklearn_output_config)
    return new


def check_is_fitted(est, attribute: str) -> None:
    """Raise scikit-learn's ``NotFittedError`` (its message) when ``est`` has no ``attribute`` yet."""
    if not hasattr(est, attribute):
        from sklearn.exceptions import NotFittedError  # noqa: PLC0415

        raise NotFittedError(f"This {type(est).__name__} instance is not fitted yet. Call 'fit' with appropriate "
                             "arguments before using this estimator.")
