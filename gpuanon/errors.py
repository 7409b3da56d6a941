"""The few exception types users catch.

Every error raised on bad input is a :class:`GpuanonError`; the command line turns it into a
one-line message and exit status :attr:`GpuanonError.exit_code`, never a traceback.
"""


class GpuanonError(Exception):
    """Base class of every error gpuanon raises on purpose."""

    exit_code = 2


class InputError(GpuanonError, ValueError):
    """An input file or dataset cannot be read or is unusable."""


class SchemaError(GpuanonError, ValueError):
    """A column role or kind is wrong (unknown column, non-numeric numeric QI, ...)."""


class PrivacyError(GpuanonError):
    """The requested k / l / t cannot be met (for the whole table or within the budget)."""


class BackendError(GpuanonError, RuntimeError):
    """The requested backend is not usable on this machine."""


class OutputError(GpuanonError):
    """An output cannot be written (no space, read-only, not a regular place for files, two outputs with
    one name): nothing of the command's outputs is left behind."""


class VerificationError(GpuanonError):
    """The independent check of an output failed: nothing is written."""

    exit_code = 3


class ClusterLost(BackendError):
    """A cluster run cannot go on (every worker lost, the scheduler lost, a shard's source gone, one
    shard lost with two workers): nothing is written. Exit status 4."""

    exit_code = 4


def shown(value) -> str:
    """A value (or a list of them) as a message shows it: numbers as written, without the numpy type
    around them, text quoted.

    >>> import numpy as np
    >>> shown(np.int64(73)), shown(np.float64(-8491.33)), shown("a b"), shown([np.int64(73), "Bachelors"])
    ('73', '-8491.33', "'a b'", "73, 'Bachelors'")
    """
    if isinstance(value, (list, tuple)):
        return ", ".join(shown(v) for v in value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, (bool, int, float, str, bytes)) or value is None:
        return repr(value)
    return repr(str(value))  # dates and the like: their text
