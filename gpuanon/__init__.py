"""gpuanon: a GPU-accelerated privacy engine for tabular data.

>>> import gpuanon
>>> sorted(n for n in gpuanon.__all__ if n[0].isupper())[:2]
['Criteria', 'Mondrian']
"""

from .criteria import Criteria
from .errors import (BackendError, GpuanonError, InputError, PrivacyError, SchemaError,
                     VerificationError)
from .mondrian import Mondrian
from .verify import verify
from . import datasets

__version__ = "0.1.0"

__all__ = [
    "Criteria",
    "Mondrian",
    "verify",
    "datasets",
    "GpuanonError",
    "InputError",
    "SchemaError",
    "PrivacyError",
    "BackendError",
    "VerificationError",
    "__version__",
]
