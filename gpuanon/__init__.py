"""gpuanon: a GPU-accelerated privacy engine for tabular data.

>>> import gpuanon
>>> gpuanon.Mondrian(k=5).k
5
"""

from .anonymize import Criteria, Mondrian
from .errors import (BackendError, GpuanonError, InputError, PrivacyError, SchemaError,
                     VerificationError)
from . import verify
from .verify import verify as check
from . import datasets
from . import evaluate  # a callable module: gpuanon.evaluate(df, ...) runs evaluate.evaluate

__version__ = "0.1.0"

__all__ = [
    "Criteria",
    "Mondrian",
    "verify",
    "check",
    "datasets",
    "evaluate",
    "GpuanonError",
    "InputError",
    "SchemaError",
    "PrivacyError",
    "BackendError",
    "VerificationError",
    "__version__",
]
