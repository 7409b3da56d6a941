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
import importlib.util
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from kernels import host as _kernel_host

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
        """Copy a host array to this backend's device (no copy on the CPU); counted."""
        return to_device(a, self.xp)

    def to_host(self, a: Any) -> np.ndarray:
        """Copy an array back to host memory as a NumPy array; counted."""
        return to_host(a)

    def __reduce__(self):  # by name (modules do not pickle): looked up again where loaded, e.g. on a Dask worker
        return namespace_by_name, (self.name, self.frame.__name__, self.reason, self.device, dict(self.extra))


def namespace_by_name(name: str, frame: str | None = None, *rest):
    """``xp`` by name, as pickles keep it: NumPy for ``'cpu'`` / ``'numpy'``, else CuPy (the device double
    when one is installed); with ``frame``, the whole :class:`Backend` (its ``__reduce__``)."""
    xp = np if name in ("cpu", "numpy") else _DEVICE[0] or importlib.import_module("cupy")
    return xp if frame is None else Backend(name, xp, importlib.import_module(frame), *rest)


# ---------------------------------------------------------------------------------------------
# host <-> device copies: the only place they happen, counted per stage
# ---------------------------------------------------------------------------------------------

def is_device_array(a: Any) -> bool:
    """True for a CuPy array (device memory), or an array of the device module a test installed."""
    return type(a).__module__.split(".")[0] == "cupy" or (_DEVICE[0] is not None and
                                                          isinstance(a, _DEVICE[0].ndarray))


#: test only: a CPU stand-in for CuPy (tests/cupy_double.py) installed by :func:`use_device_module`
_DEVICE: list = [None]


@contextmanager
def use_device_module(mod):
    """Test only: the GPU backend runs on ``mod`` (a CPU stand-in for CuPy; frames stay pandas)."""
    prev, _DEVICE[0] = _DEVICE[0], mod
    try:
        yield mod
    finally:
        _DEVICE[0] = prev


class TransferLog:
    """Calls and bytes of host <-> device copies, per stage and direction: real copies on the GPU backend;
    on the CPU (``simulate=True``) the arrays that would cross on a GPU (every array handed to
    :func:`to_host` or :func:`to_device`), so a CPU test holds the pipeline to the GPU's copy budget."""

    def __init__(self, simulate: bool = False):
        self.simulate = simulate
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.syncs: dict[str, int] = {}  # per stage: device-to-host reads the host waits for
        self.started = time.perf_counter()

    def add(self, stage: str, direction: str, nbytes: int) -> None:
        c = self.counts.setdefault((stage, direction), [0, 0])
        c[0] += 1
        c[1] += int(nbytes)
        if direction == "to_host":
            self.syncs[stage] = self.syncs.get(stage, 0) + 1

    def bytes(self, stages=None, direction: str | None = None) -> int:
        """Bytes moved in ``stages`` (all when None) and ``direction`` (both when None)."""
        return sum(b for (s, d), (_, b) in self.counts.items()
                   if (stages is None or s in stages) and (direction is None or d == direction))

    def calls(self, stages=None, direction: str | None = None) -> int:
        return sum(n for (s, d), (n, _) in self.counts.items()
                   if (stages is None or s in stages) and (direction is None or d == direction))

    def to_dict(self) -> dict:
        """The report's ``transfers``: per stage, calls and bytes in each direction, syncs, and totals."""
        stages: dict[str, dict] = {}
        for (s, d), (n, b) in sorted(self.counts.items()):
            stages.setdefault(s, {})[d] = {"calls": n, "bytes": b}
        for s, n in self.syncs.items():
            stages[s]["syncs"] = n
        return {"counted": "arrays that would cross (CPU run)" if self.simulate else "device copies",
                "stages": stages, "calls": self.calls(), "bytes": self.bytes(),
                "to_host_bytes": self.bytes(direction="to_host"),
                "to_device_bytes": self.bytes(direction="to_device"), "syncs": sum(self.syncs.values())}


_LOCK = threading.Lock()
_LOGS: list[TransferLog] = []
_STAGE = ["other"]


@contextmanager
def count_transfers(simulate: bool = False, log_: TransferLog | None = None):
    """Count every copy made through this module while the block runs (nested logs all count).

    >>> import numpy as np
    >>> with count_transfers(simulate=True) as t, stage("demo"):
    ...     _ = to_host(np.zeros(4))
    >>> t.to_dict()["stages"]["demo"]["to_host"]
    {'calls': 1, 'bytes': 32}
    """
    tl = log_ if log_ is not None else TransferLog(simulate)
    with _LOCK:
        _LOGS.append(tl)
    try:
        yield tl
    finally:
        with _LOCK:
            if tl in _LOGS:
                _LOGS.remove(tl)


@contextmanager
def stage(name: str):
    """Charge the copies made inside the block to stage ``name``."""
    prev = _STAGE[0]
    _STAGE[0] = name
    try:
        yield
    finally:
        _STAGE[0] = prev


def current_stage() -> str:
    return _STAGE[0]


def _count(direction: str, a: Any, device: bool) -> None:
    if not _LOGS:
        return
    nbytes = int(getattr(a, "nbytes", 0) or 0)
    with _LOCK:
        for tl in _LOGS:
            if device or tl.simulate:
                tl.add(_STAGE[0], direction, nbytes)


def to_host(a: Any) -> np.ndarray:
    """Return ``a`` as a NumPy array (a counted device-to-host copy for CuPy arrays)."""
    if is_device_array(a):
        _count("to_host", a, True)
        return a.get()
    out = np.asarray(a)
    _count("to_host", out, False)
    return out


def to_device(a: Any, xp=None):
    """``a`` as an array of ``xp`` (NumPy: no copy; CuPy: a counted host-to-device copy)."""
    xp = np if xp is None else xp
    if xp is np:
        out = to_host(a) if is_device_array(a) else np.asarray(a)
        if not is_device_array(a):
            _count("to_device", out, False)
        return out
    if is_device_array(a):
        return a
    host = np.asarray(a)
    _count("to_device", host, True)
    return xp.asarray(host)


def synchronize() -> None:
    """Wait for the GPU's queued work (a no-op unless CuPy is in use): stage timings are honest."""
    if _DEVICE[0] is not None:
        return _DEVICE[0].cuda.Device().synchronize()
    cp = sys.modules.get("cupy")
    if cp is not None and gpu_status()[0]:
        cp.cuda.Device().synchronize()


def would_read(nbytes: int) -> None:
    """Count in simulated (CPU run) logs only a read of ``nbytes`` the device formulation makes, not the CPU's."""
    _count("to_host", np.empty(int(nbytes), dtype=np.uint8), False)


def to_scalar(a: Any):
    """One element as a Python number (an 8-byte device-to-host copy on the GPU; counted when simulated)."""
    if hasattr(a, "nbytes"):
        _count("to_host", a, is_device_array(a))
    return a.item() if hasattr(a, "item") else a


def _namespace(a: Any) -> ModuleType:
    if not is_device_array(a):
        return np
    if _DEVICE[0] is not None and isinstance(a, _DEVICE[0].ndarray):
        return _DEVICE[0]
    import cupy  # noqa: PLC0415

    return cupy


def get_namespace(*arrays: Any) -> ModuleType:
    """The array module of ``arrays`` (array-api-compat's name): CuPy (or the installed device double)
    for device arrays, else NumPy; ``None`` is skipped. Host and device arrays mixed: ``TypeError``."""
    found = {_namespace(a) for a in arrays if a is not None}
    if len(found) > 1:
        raise TypeError("host and device arrays mixed; copy them to one side first (to_device / to_host)")
    return found.pop() if found else np


def special(xp) -> ModuleType:
    """``scipy.special`` for NumPy arrays, ``cupyx.scipy.special`` for CuPy ones (``entr``, ``xlogy``)."""
    if xp is np:
        import scipy.special  # noqa: PLC0415

        return scipy.special
    if xp is _DEVICE[0]:
        return xp.cupyx.scipy.special
    import cupyx.scipy.special  # noqa: PLC0415

    return cupyx.scipy.special


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


def gpu_status() -> tuple[bool, str]:
    """``(usable, reason)``: whether CuPy can allocate and compute on a GPU here (probed once)."""
    return (True, "device double") if _DEVICE[0] is not None else _gpu_probe()


gpu_status.cache_clear = lambda: _gpu_probe.cache_clear()  # type: ignore[attr-defined]


@lru_cache(maxsize=1)
def _gpu_probe() -> tuple[bool, str]:
    """``(usable, reason)`` of :func:`gpu_status`; never raises, never hangs without a driver (device nodes
    and driver library are looked for before CuPy is imported; every CuPy failure is caught)."""
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


# ---------------------------------------------------------------------------------------------
# cuDF frames: read, built and written on the device; every trip to the host counted
# ---------------------------------------------------------------------------------------------

def is_device_frame(obj: Any) -> bool:
    """True for a cuDF DataFrame or Series (without importing cuDF), or the tests' cuDF double's."""
    return type(obj).__module__.split(".")[0] in ("cudf", "cudf_double")


def cudf_module() -> ModuleType | None:
    """cuDF when it is installed and a GPU is usable, else None (a test's device double: its ``cudf``)."""
    if _DEVICE[0] is not None or not gpu_usable():
        return getattr(_DEVICE[0], "cudf", None)
    try:
        import cudf  # noqa: PLC0415
    except Exception:
        return None
    return cudf


def frame_to_host(df: Any):
    """A pandas copy of a cuDF frame, series or index (counted: its bytes); a pandas one is returned as is."""
    if not is_device_frame(df):
        return df
    _count("to_host", _Sized(int(np.sum(df.memory_usage(deep=True)))), True)
    return df.to_pandas()


def frame_to_device(df: Any):
    """A cuDF copy of a pandas frame (counted); a cuDF frame is returned as is."""
    if is_device_frame(df):
        return df
    cudf = cudf_module()
    if cudf is None:
        raise BackendError("a cuDF frame was asked for but cuDF is not usable here; install the gpu-cu12 or "
                           "gpu-cu13 extra on a machine with a GPU, or pass a pandas DataFrame")
    _count("to_device", _Sized(int(df.memory_usage(deep=True).sum())), True)
    return cudf.from_pandas(df)


def frame_to_arrow(df: Any):
    """A pyarrow Table of a cuDF frame (counted: the frame's bytes come to the host)."""
    _count("to_host", _Sized(int(df.memory_usage(deep=True).sum())), True)
    return df.to_arrow(preserve_index=False)


class _Sized:
    """A byte count for the transfer log (frames are not arrays)."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def device_column(values, categories=None):
    """A cuDF Series from a CuPy array, no host trip; with ``categories`` (a host list or Index,
    one entry per class-level value) ``values`` are int32 codes (-1: missing, published as null)
    of a categorical. Only the categories cross to the device (counted)."""
    cudf = cudf_module()
    if cudf is None:
        raise BackendError("building a cuDF column needs cuDF and a usable GPU")
    if categories is None:
        return cudf.Series(values)

    cats = pd.Index(categories, dtype=object)
    _count("to_device", _Sized(int(cats.memory_usage(deep=True))), True)
    codes = cudf.Series(values)
    codes = codes.where(codes >= 0)  # -1 -> null: from_codes casts to unsigned codes, nulls kept
    index = cudf.CategoricalIndex.from_codes(codes, categories=cats, ordered=False)
    return cudf.Series(index)


def device_matrix(df, columns, dtype):
    """The ``columns`` of a cuDF frame as one CuPy ``(rows, len(columns))`` array of ``dtype``,
    built on the device (``DataFrame.to_cupy``: no host trip, nothing counted; nulls as NaN)."""
    return df[list(columns)].to_cupy(dtype=dtype, na_value=np.nan if np.dtype(dtype).kind == "f" else None)


def device_frame(columns: dict):
    """A cuDF DataFrame from cuDF Series (column order kept)."""
    cudf = cudf_module()
    if cudf is None:
        raise BackendError("building a cuDF frame needs cuDF and a usable GPU")
    return cudf.DataFrame({name: col.reset_index(drop=True) for name, col in columns.items()})


def read_parquet_device(path) -> Any:
    """``cudf.read_parquet``: the file is read straight into device memory."""
    cudf = cudf_module()
    if cudf is None:
        raise BackendError("reading Parquet on the device needs cuDF and a usable GPU")
    return cudf.read_parquet(path)


def _frame_module(gpu: bool) -> ModuleType:
    return (cudf_module() if gpu else None) or pd


def resolve_name(name: str | None = None) -> str:
    """The backend name asked for: the argument, else ``GPUANON_BACKEND``, else ``auto``."""
    raw = name if name is not None else os.environ.get("GPUANON_BACKEND", "auto")
    chosen = str(raw).strip().lower() or "auto"
    if chosen not in BACKENDS:
        src = "backend" if name is not None else "GPUANON_BACKEND"
        raise BackendError(f"{src} '{raw}' is not one of auto, cpu, gpu; pick one of those")
    return chosen


#: ``auto`` runs tables with fewer rows than this on the CPU, where launching device kernels and
#: compiling them costs more than the work (Adult, 30k rows: 0.37 s on 2 CPU cores against 0.93 s
#: on an H100 before the device engine); override with ``GPUANON_GPU_MIN_ROWS``.
GPU_MIN_ROWS = 200_000


def gpu_min_rows() -> int:
    """The ``auto`` backend's GPU threshold in rows (``GPUANON_GPU_MIN_ROWS`` overrides it)."""
    raw = os.environ.get("GPUANON_GPU_MIN_ROWS", "")
    try:
        return max(0, int(raw)) if raw.strip() else GPU_MIN_ROWS
    except ValueError:
        raise BackendError(f"GPUANON_GPU_MIN_ROWS '{raw}' is not a whole number of rows; e.g. 200000") from None


def get_backend(name: str | None = None, *, quiet: bool = False, n_rows: int | None = None) -> Backend:
    """Choose the backend, log the choice, and return it.

    Parameters
    ----------
    name : {'auto', 'cpu', 'gpu'} or None
        None reads ``GPUANON_BACKEND`` (default ``auto``).
    quiet : bool
        Do not log the choice.
    n_rows : int, optional
        The table's size: under ``auto``, a table smaller than :func:`gpu_min_rows` runs on the CPU.
    """
    chosen = resolve_name(name)
    if chosen == "auto" and n_rows is not None and n_rows < gpu_min_rows() and gpu_status()[0]:
        be = Backend("cpu", np, _frame_module(False),
                     reason=f"auto: {n_rows} rows is below the GPU threshold of {gpu_min_rows()} rows "
                            f"(GPUANON_GPU_MIN_ROWS)")
    elif chosen == "cpu":
        be = Backend("cpu", np, _frame_module(False), reason="cpu requested")
    elif _DEVICE[0] is not None:
        be = Backend("gpu", _DEVICE[0], _frame_module(False), reason=f"{chosen} requested", device="device double")
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
            plain = not _driver_present()[0]  # no GPU at all: a plain choice; one that cannot be used: a fallback
            be = Backend("cpu", np, _frame_module(False),
                         reason=f"auto, no GPU here: {why}" if plain else f"fell back to the CPU: {why}")
    if not quiet:
        line = f"backend {be.name} ({be.reason}{f'; device {be.device}' if be.is_gpu else ''})"
        # said once per process at INFO (a grid of runs would repeat it), again only at DEBUG
        log.log(logging.DEBUG if line in _SAID else logging.INFO, "%s", line)
        _SAID.add(line)
    return be


_SAID: set = set()


def load_cuml() -> tuple[ModuleType | None, str]:
    """``(cuml, '')`` when cuML imports and works here, else ``(None, why)``."""
    try:
        if importlib.util.find_spec("cuml") is None:
            return None, "cuML is not installed"
    except (ImportError, ValueError):
        return None, "cuML is not installed"
    try:
        import cuml  # noqa: PLC0415
    except Exception as exc:  # an installed but unusable cuML (no driver, wrong CUDA)
        return None, f"cuML is installed but cannot be used ({type(exc).__name__}: {exc})"
    return cuml, ""


_kernel_host.HOOKS.update(scalar=to_scalar, host=to_host, sync=synchronize, would_read=would_read)  # kernels' host reads are counted too
