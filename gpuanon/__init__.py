"""gpuanon: a GPU-accelerated privacy engine for tabular data.

>>> import gpuanon
>>> gpuanon.Mondrian(k=5).k
5

The public names are loaded on first use (module-level ``__getattr__``), so that ``import gpuanon``
and ``gpuanon --version`` do not pay for pandas, scikit-learn or SciPy.
"""

from importlib import import_module

from .errors import (BackendError, GpuanonError, InputError, PrivacyError, SchemaError,
                     VerificationError)

__version__ = "0.1.0"

#: public name -> (module, attribute or None for the module itself)
_LAZY = {
    "Criteria": (".anonymize", "Criteria"),
    "Mondrian": (".anonymize", "Mondrian"),
    "DISTPAB": (".perturb", "DISTPAB"),
    "verify": (".release.verify", None),
    "check": (".release.verify", "verify"),
    "datasets": (".datasets", None),
    "risk": (".risk", None),
    "evaluate": (".evaluate", None),  # a callable module: gpuanon.evaluate(df, ...) runs evaluate.evaluate
}

__all__ = [
    "Criteria",
    "Mondrian",
    "DISTPAB",
    "verify",
    "check",
    "datasets",
    "risk",
    "evaluate",
    "GpuanonError",
    "InputError",
    "SchemaError",
    "PrivacyError",
    "BackendError",
    "VerificationError",
    "__version__",
]


def __getattr__(name):
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'gpuanon' has no attribute {name!r}") from None
    value = import_module(module, __name__)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
