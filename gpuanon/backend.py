"""Backend selection: the only module that imports CuPy / cuDF / cuML, and only lazily.

``auto`` runs on the GPU when one is usable and falls back to the CPU otherwise; ``cpu`` forces
NumPy and pandas; ``gpu`` makes a missing GPU an error. The choice comes from the ``backend``
argument or the ``GPUANON_BACKEND`` environment variable. A log line says which backend ran and,
on fallback, why.

Examples
--------
>>> from gpuanon.backend import get_backend
>>> be = get_backend("cpu")
>>> be.name, be.xp.__name__
('cpu', 'numpy')
"""

from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np

from .errors import BackendError

log = logging.getLogger("gpuanon")

BACKENDS = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class Backend:
    """The array module (``xp``) and frame module a run uses, and why they were chosen."""

    name: str
    xp: ModuleType
    frame: ModuleType
    reason: str = ""
    device: str = "cpu"
    extra: dict = field(default_factory=dict)

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    def asarray(self, a: Any):
        """Copy a host array to this backend's device (no copy on the CPU)."""
        return self.xp.asarray(a)

    def to_host(self, a: Any) -> np.ndarray:
        """Copy an array back to host memory as a NumPy array."""
        return to_host(a)


def to_host(a: Any) -> np.ndarray:
    """Return ``a`` as a NumPy array (``.get()`` for CuPy arrays)."""
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return a.get()
    return np.asarray(a)


def array_module(a: Any) -> ModuleType:
    """NumPy or CuPy, whichever owns ``a``."""
    if type(a).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415

        return cupy
    return np


def _driver_present() -> tuple[bool, str]:
    """Cheap checks that never load CUDA: is there a device node or a driver library at all?"""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False, "CUDA_VISIBLE_DEVICES hides every GPU"
    if glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/dxg"):
        return True, ""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"):
        if glob.glob(os.path.join(d, "libcuda.so*")):
            return True, ""
    return False, "no NVIDIA driver or device found"


@lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """``(usable, reason)``: whether CuPy can allocate and compute on a GPU here.

    Never raises and never hangs on a machine without a driver: the device nodes and driver
    library are looked for before CuPy is imported, and every CuPy failure is caught.
    """
    ok, why = _driver_present()
    if not ok:
        return False, why
    try:
        import cupy  # noqa: PLC0415
    except Exception as exc:  # ImportError, or a broken CUDA install
        return False, f"CuPy is not importable ({type(exc).__name__}: {exc}); install gpuanon[gpu-cu12]"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return False, "CuPy sees no CUDA device"
        x = cupy.arange(4, dtype=cupy.int32)
        if int((x * 2).sum()) != 12:
            return False, "a test computation on the GPU gave a wrong answer"
    except Exception as exc:
        return False, f"CUDA is not usable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return True, ""


def gpu_usable() -> bool:
    """True when a GPU is usable through CuPy."""
    return gpu_status()[0]


def _frame_module(gpu: bool) -> ModuleType:
    import pandas  # noqa: PLC0415

    if gpu:
        try:
            import cudf  # noqa: PLC0415

            return cudf
        except Exception:
            return pandas
    return pandas


def resolve_name(name: str | None = None) -> str:
    """The backend name asked for: the argument, else ``GPUANON_BACKEND``, else ``auto``."""
    raw = name if name is not None else os.environ.get("GPUANON_BACKEND", "auto")
    chosen = str(raw).strip().lower() or "auto"
    if chosen not in BACKENDS:
        src = "backend" if name is not None else "GPUANON_BACKEND"
        raise BackendError(f"{src} '{raw}' is not one of auto, cpu, gpu; pick one of those")
    return chosen


def get_backend(name: str | None = None, *, quiet: bool = False) -> Backend:
    """Choose the backend, log the choice, and return it.

    Parameters
    ----------
    name : {'auto', 'cpu', 'gpu'} or None
        None reads ``GPUANON_BACKEND`` (default ``auto``).
    quiet : bool
        Do not log the choice.
    """
    chosen = resolve_name(name)
    if chosen == "cpu":
        be = Backend("cpu", np, _frame_module(False), reason="cpu requested")
    else:
        ok, why = gpu_status()
        if ok:
            import cupy  # noqa: PLC0415

            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
            dev = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            fr = _frame_module(True)
            be = Backend("gpu", cupy, fr, reason=f"{chosen} requested", device=dev)
        elif chosen == "gpu":
            raise BackendError(f"backend 'gpu' requested but no GPU is usable: {why}; use --backend cpu or auto")
        else:
            be = Backend("cpu", np, _frame_module(False), reason=f"fell back to the CPU: {why}")
    if not quiet:
        log.info("backend %s (%s%s)", be.name, be.reason, f"; device {be.device}" if be.is_gpu else "")
    return be
