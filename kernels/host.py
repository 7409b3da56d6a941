"""How kernels read a device value on the host: :func:`scalar` and :func:`host`.

``kernels`` imports nothing from ``gpuanon``; ``gpuanon.backend`` installs its counted copies into
:data:`HOOKS` when it is imported, so a kernel's host reads are logged with the rest. Alone (NumPy
arrays) the defaults are ``.item()`` and ``numpy.asarray``.
"""

from __future__ import annotations

import numpy as np


def _item(a):
    return a.item() if hasattr(a, "item") else a


#: ``scalar``: one element as a Python number; ``host``: a NumPy copy (both counted once installed);
#: ``sync``: wait for the device's queued work (None alone: nothing to wait for); ``would_read``: count,
#: in a CPU run's simulated log only, a read of ``nbytes`` that the device formulation makes and the
#: CPU's own formulation does not (alone: nothing to count)
HOOKS = {"scalar": _item, "host": np.asarray, "sync": None, "would_read": None}


def scalar(a):
    """One element of ``a`` as a Python number (a counted sync on a device)."""
    return HOOKS["scalar"](a)


def host(a):
    """``a`` as a NumPy array (a counted device-to-host copy on a device)."""
    return HOOKS["host"](a)


def would_read(nbytes: int, times: int = 1) -> None:
    """Count ``times`` reads of ``nbytes`` each that the device formulation would make, in a CPU
    run's simulated transfer log only (a GPU's log counts the real copies): the CPU takes its own
    formulation and its report still counts what would cross."""
    hook = HOOKS.get("would_read")
    if hook is not None:
        for _ in range(times):  # a loop over reads counted, not over data
            hook(nbytes)
