"""A strict CPU stand-in for CuPy (test only): the GPU code paths run on NumPy, under CuPy's rules.

``DeviceDouble()`` is a module-like object that the GPU backend can use as its array module
(``gpuanon.backend.use_device_module``). Its arrays (:class:`DArray`) wrap NumPy arrays and behave
like CuPy's where it matters for correctness and for the device discipline:

* **No implicit host conversion.** ``__array__`` raises (``numpy.asarray(a)``, pandas, sklearn on a
  device array fail as on CuPy); a NumPy array or a Python list mixed into an operator, a ufunc or
  a module call raises ``TypeError`` (CuPy's "Unsupported type"), except the uploads CuPy allows
  (``asarray`` / ``array``, indexing and assignment with host arrays), which are counted as uploads.
  Iterating a device array raises (one kernel per element on CuPy: never wanted).
* **Only CuPy's API.** Every module attribute, ``cupyx.scipy.special`` function, array method and
  keyword is checked against the installed CuPy wheel (``hasattr(cupy, name)``,
  ``hasattr(cupy.ndarray, name)``, the real function's signature, or for Cython functions the first
  line of its docstring). Nothing is listed by hand.
* **Results are device arrays.** Reductions and integer indexing give 0-d arrays, as on CuPy, never
  host scalars.
* **Every synchronization is counted**, per stage (``gpuanon.backend.current_stage()``) and, in the
  ``partition`` stage, per Mondrian level: ``int()`` / ``float()`` / ``bool()`` / ``__index__``,
  ``.item()``, ``.tolist()``, ``.get()`` (*explicit*), and the syncs CuPy makes inside calls whose
  output shape depends on the data (*implicit*: ``nonzero``, ``unique``, ``bincount`` (2, read from
  CuPy's ``_statistics/histogram.py``), boolean-mask indexing, ``repeat`` by a device array, ...).
  An explicit sync or an upload is *counted* when it is made by ``gpuanon.backend`` (the module that
  logs copies) and *escaped* otherwise; every escaped one is kept with its ``file:line``.
* **Every device operation is counted** (module call, ufunc, method, operator, indexing).
* **Raw kernels are checked.** ``RawKernel(source, name)`` records the kernel; a launch checks the
  arguments against the kernel's contract (types, shapes, contiguity, grid coverage, segments
  starting at 0 and non-empty, atomics that CUDA has) and computes the result with a NumPy
  reference registered per kernel name (:data:`KERNELS`). An unknown kernel name raises.

What it cannot catch:

* cuDF (frames stay pandas: every cuDF code path is untested here);
* CUDA numerics: the order of atomic additions, FMA contraction, fast-math, float32 rounding of
  device reductions -- results are NumPy's, bit for bit, so float differences that a real GPU
  would produce (e.g. float class sums added in atomic order) are invisible;
* the kernels' C code: only its NumPy reference runs (a wrong index in the CUDA source, a race, a
  bad warp shuffle pass unnoticed; compile errors are for the NVRTC test), and atomics are checked
  by a table of the overloads CUDA provides, not by a compiler;
* memory limits, allocation failures, speed, streams and asynchrony (everything runs in order);
* CuPy behaviour that its signatures do not show: value semantics of functions (CuPy's own bugs
  or NumPy differences, e.g. type promotion corner cases, ``unique`` NaN handling), dtype rules of
  CuPy's kernels, functions that accept fewer argument types than NumPy in ways not listed above;
* syncs inside CuPy functions other than those named in :data:`IMPLICIT_SYNCS`.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import threading
from collections import Counter

import numpy as np
import scipy.special as _scipy_special

try:  # the real wheel (cupy-cuda12x), imported without a GPU: only its API is read
    import cupy as _cupy
    import cupyx.scipy.special as _cupy_special
except ImportError:  # the tests that use the double skip; importing this module stays harmless
    _cupy = _cupy_special = None

_BACKEND_MODULE = "gpuanon.backend"
_UPLOADS = {"asarray", "array", "asanyarray"}
#: syncs CuPy makes inside these calls (read from CuPy 14.2's sources); a callable gets the args
IMPLICIT_SYNCS = {
    "nonzero": 1, "flatnonzero": 1, "argwhere": 1, "extract": 1, "compress": 1,
    # one boolean-mask gather of the values, one more of the first indices, one nonzero for the counts
    "unique": lambda a, kw: 1 + bool(kw.get("return_index")) + bool(kw.get("return_counts")),
    "bincount": 2,  # (x < 0).any() and int(cupy.max(x)) in cupy/_statistics/histogram.py
    "histogram": 1, "median": 0, "count_nonzero": 0,
    "repeat": lambda a, kw: 2 if len(a) > 1 and isinstance(a[1], DArray) else 0,
}


#: parameters CuPy turns into host numbers (a device scalar there is read back: one sync)
_HOST_NUMBER_PARAMS = {"shape", "start", "stop", "step", "num", "minlength", "N", "M", "repeats_host", "size"}


class DeviceDoubleError(TypeError):
    """A call that real CuPy would refuse (or that breaks a kernel's contract)."""


# ---------------------------------------------------------------------------------------------
# counting
# ---------------------------------------------------------------------------------------------

class Stats:
    """Counts of device operations, syncs and uploads, per stage (and per Mondrian level)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.ops = Counter()           # (stage, level) -> device operations
        self.syncs = Counter()         # (stage, level, kind) -> syncs; kind: counted/escaped/implicit
        self.uploads = Counter()       # (stage, kind) -> host-to-device copies
        self.escaped = Counter()       # (what, file:line) -> count
        self.implicit_sites = Counter()
        self.kernel_faults = Counter()  # (kernel, fault) -> launches
        self.attempts: dict = {}       # Mondrian level -> cut attempts made up to its end

    def total(self, counter, *, kind=None, stage=None):
        return sum(v for key, v in counter.items()
                   if (kind is None or key[-1] == kind) and (stage is None or key[0] == stage))

    def summary(self) -> dict:
        """Plain dict: totals, per stage, and per level of the ``partition`` stage."""
        stages = sorted({k[0] for k in self.ops} | {k[0] for k in self.syncs})
        per_stage = {s: {"ops": sum(v for k, v in self.ops.items() if k[0] == s),
                         **{f"syncs_{kind}": sum(v for k, v in self.syncs.items() if k[0] == s and k[2] == kind)
                            for kind in ("counted", "escaped", "implicit")}} for s in stages}
        levels = sorted({k[1] for k in self.ops if k[0] == "partition" and k[1] is not None})
        per_level = {int(L): {"ops": self.ops[("partition", L)],
                              "syncs": sum(v for k, v in self.syncs.items() if k[0] == "partition" and k[1] == L),
                              "attempts": self.attempts.get(L, 0) - self.attempts.get(L - 1, 0)}
                     for L in levels}
        return {"ops": sum(self.ops.values()), "syncs": sum(self.syncs.values()),
                "syncs_counted": self.total(self.syncs, kind="counted"),
                "syncs_escaped": self.total(self.syncs, kind="escaped"),
                "syncs_implicit": self.total(self.syncs, kind="implicit"),
                "uploads_counted": self.total(self.uploads, kind="counted"),
                "uploads_escaped": self.total(self.uploads, kind="escaped"),
                "stages": per_stage, "partition_levels": per_level,
                "escaped_sites": {f"{w} {s}": n for (w, s), n in sorted(self.escaped.items())},
                "implicit_sites": {f"{w} {s}": n for (w, s), n in sorted(self.implicit_sites.items())},
                "kernel_faults": {f"{k}: {f}": n for (k, f), n in self.kernel_faults.items()}}


def _stage():
    mod = sys.modules.get(_BACKEND_MODULE)
    return mod.current_stage() if mod is not None else "other"


def _level(stage, frame):
    """The Mondrian level being run (read from ``kernels.mondrian.mondrian_partition``'s frame)."""
    if stage != "partition":
        return None
    f = frame
    for _ in range(12):
        if f is None:
            return None
        if f.f_code.co_name == "mondrian_partition" and f.f_globals.get("__name__") == "kernels.mondrian":
            loc = f.f_locals
            lv = loc.get("levels")
            c = _CTR[0]
            if c is not None and lv is not None:  # attempts made up to this level (cumulative)
                c.dev.stats.attempts[lv] = loc.get("attempts", 0)
            return lv
        f = f.f_back
    return None


_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _site(frame):
    return f"{os.path.relpath(frame.f_code.co_filename, _REPO)}:{frame.f_lineno}"


# ---------------------------------------------------------------------------------------------
# the CuPy API, read from the wheel
# ---------------------------------------------------------------------------------------------

_SIG_CACHE: dict = {}


def _params(obj, ufunc=False):
    """``(names, positional, has_varargs, has_varkw)`` of a real CuPy callable, or None if unknown."""
    key = id(obj)
    if key in _SIG_CACHE:
        return _SIG_CACHE[key]
    res = None
    if ufunc:
        res = ([f"x{i + 1}" for i in range(obj.nin)] + ["out", "casting", "dtype"], obj.nin + 1, False, False)
    else:
        try:
            sig = inspect.signature(obj)
            ps = list(sig.parameters.values())
            if ps and ps[0].name == "self":
                ps = ps[1:]
            names = [p.name for p in ps if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            npos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ps)
            res = (names, npos, any(p.kind == p.VAR_POSITIONAL for p in ps),
                   any(p.kind == p.VAR_KEYWORD for p in ps))
        except (TypeError, ValueError):
            doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
            m = re.match(r"^[\w.]+\((.*)\)", doc[0].replace("\\", "")) if doc else None
            if m:
                names, npos, var, varkw, kwonly = [], 0, False, False, False
                for tok in (t.strip() for t in m.group(1).split(",")):
                    name = tok.split("=")[0].strip().split(" ")[-1]
                    if tok in ("/", ""):
                        continue
                    if tok == "*":
                        kwonly = True
                    elif tok.startswith("**"):
                        varkw = True
                    elif tok.startswith("*"):
                        var, kwonly = True, True
                    elif name != "self":
                        names.append(name)
                        npos += not kwonly
                res = (names, npos, var, varkw)
    _SIG_CACHE[key] = res
    return res


def _check_call(what, real, args, kwargs, ufunc=False, skip_self=False):
    p = _params(real, ufunc)
    if p is None:
        return None
    names, npos, var, varkw = p
    if not varkw:
        bad = [k for k in kwargs if k not in names]
        if bad:
            raise DeviceDoubleError(f"CuPy's {what} has no keyword {', '.join(bad)}")
    if not var and len(args) > npos:
        raise DeviceDoubleError(f"CuPy's {what} takes at most {npos} positional arguments, got {len(args)}")
    return names


_SHAPE_NAMES = {"shape", "axis", "axes", "newshape", "reps", "size", "indices_or_sections", "source",
                "destination"}


def _unwrap(x, what, allow_host=False, name=None):
    """NumPy view of an argument; host arrays and lists are refused as CuPy refuses them."""
    if isinstance(x, DArray):
        return x._a
    if isinstance(x, np.ndarray):
        if allow_host:
            return x
        raise DeviceDoubleError(f"Unsupported type <class 'numpy.ndarray'> in {what}: a NumPy array "
                                "given to a CuPy call (copy it with gpuanon.backend.to_device)")
    if isinstance(x, (list, tuple)):
        if allow_host:
            return x
        if x and all(isinstance(v, DArray) for v in x):
            return type(x)(v._a for v in x)
        if (isinstance(x, tuple) or name in _SHAPE_NAMES) and \
                all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in x):
            return x
        raise DeviceDoubleError(f"Unsupported type {type(x)} in {what} (argument {name}): CuPy takes device "
                                "arrays, not host sequences")
    return x


def _wrap(r):
    if isinstance(r, np.ndarray):
        return DArray(r)
    if isinstance(r, np.generic):
        return DArray(np.asarray(r))
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    if isinstance(r, list):
        return [_wrap(v) for v in r]
    return r


class _Counting:
    """Shared counters, hooked onto one DeviceDouble."""

    def __init__(self, dev):
        self.dev = dev

    def op(self, frame, n=1):
        st = _stage()
        with self.dev.stats.lock:
            self.dev.stats.ops[(st, _level(st, frame))] += n

    def sync(self, what, frame, implicit=0):
        st = _stage()
        lv = _level(st, frame)
        s = self.dev.stats
        with s.lock:
            if implicit:
                s.syncs[(st, lv, "implicit")] += implicit
                s.implicit_sites[(what, _site(frame))] += implicit
            elif frame.f_globals.get("__name__") == _BACKEND_MODULE:
                s.syncs[(st, lv, "counted")] += 1
            else:
                s.syncs[(st, lv, "escaped")] += 1
                s.escaped[(what, _site(frame))] += 1

    def upload(self, what, frame):
        s = self.dev.stats
        with s.lock:
            if frame.f_globals.get("__name__") == _BACKEND_MODULE:
                s.uploads[(_stage(), "counted")] += 1
            else:
                s.uploads[(_stage(), "escaped")] += 1
                s.escaped[(f"upload {what}", _site(frame))] += 1


_CTR: list = [None]  # the DeviceDouble whose counters DArrays report to (the last one installed)


def _ctr() -> _Counting:
    c = _CTR[0]
    if c is None:
        raise DeviceDoubleError("no DeviceDouble is active")
    return c


# ---------------------------------------------------------------------------------------------
# arrays
# ---------------------------------------------------------------------------------------------

def _index_key(key, frame, what):
    """A NumPy index from a CuPy-style index; host index arrays are uploads, masks are syncs."""
    parts = key if isinstance(key, tuple) else (key,)
    out = []
    for k in parts:
        if isinstance(k, DArray):
            if k._a.dtype == np.bool_:
                _ctr().sync(f"boolean mask {what}", frame, implicit=1)
            out.append(k._a)
        elif isinstance(k, (np.ndarray, list)):
            _ctr().upload(f"index {what}", frame)
            out.append(np.asarray(k))
        else:
            out.append(k)
    return tuple(out) if isinstance(key, tuple) else out[0]


def _binop(name):
    npname = name

    def method(self, other):
        frame = sys._getframe(1)
        if isinstance(other, (np.ndarray, list)):
            raise DeviceDoubleError(f"Unsupported type {type(other)}: a host operand of '{name}' with a "
                                    "device array (copy it with gpuanon.backend.to_device)")
        o = other._a if isinstance(other, DArray) else other
        _ctr().op(frame)
        r = getattr(self._a, npname)(o)
        if r is NotImplemented:
            return r
        if name.startswith("__i"):
            return self
        return _wrap(r)

    method.__name__ = name
    return method


def _unop(name):
    def method(self):
        _ctr().op(sys._getframe(1))
        return _wrap(getattr(self._a, name)())
    method.__name__ = name
    return method


class DArray:
    """A device array of the double: a NumPy array that refuses to leave the device implicitly."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, a: np.ndarray):
        self._a = a

    # host metadata (no sync)
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    flags = property(lambda self: self._a.flags)

    @property
    def T(self):
        _ctr().op(sys._getframe(1))
        return DArray(self._a.T)

    def __len__(self):
        return len(self._a)

    def __repr__(self):
        return f"DArray(shape={self._a.shape}, dtype={self._a.dtype})"

    # refused conversions
    def __array__(self, *a, **k):
        raise DeviceDoubleError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
                                "construct a NumPy array explicitly (gpuanon.backend.to_host).")

    def __iter__(self):
        raise DeviceDoubleError("iterating a device array runs one kernel per element; use whole-array "
                                "operations or gpuanon.backend.to_host")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(isinstance(x, np.ndarray) for x in inputs) or \
                any(isinstance(x, np.ndarray) for x in kwargs.get("out", ()) or ()):
            raise DeviceDoubleError(f"Unsupported type <class 'numpy.ndarray'> in numpy.{ufunc.__name__} "
                                    "with a device array")
        if not hasattr(_cupy, ufunc.__name__):
            return NotImplemented
        f = getattr(_ctr().dev, ufunc.__name__)
        return getattr(f, method)(*inputs, **kwargs) if method != "__call__" else f(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__
        if not hasattr(_cupy, name):
            return NotImplemented
        return getattr(_ctr().dev, name)(*args, **kwargs)

    # syncs
    def _sync(self, what, frame):
        _ctr().sync(what, frame)

    def __int__(self):
        self._sync("int()", sys._getframe(1))
        return int(self._a)

    def __float__(self):
        self._sync("float()", sys._getframe(1))
        return float(self._a)

    def __bool__(self):
        self._sync("bool()", sys._getframe(1))
        return bool(self._a)

    def __index__(self):
        if self._a.ndim or self._a.dtype.kind not in "iub":
            raise DeviceDoubleError("only integer scalar arrays can be converted to a scalar index")
        self._sync("__index__", sys._getframe(1))
        return int(self._a)

    def __complex__(self):
        self._sync("complex()", sys._getframe(1))
        return complex(self._a)

    # indexing
    def __getitem__(self, key):
        frame = sys._getframe(1)
        k = _index_key(key, frame, "read")
        _ctr().op(frame)
        return _wrap(self._a[k])

    def __setitem__(self, key, value):
        frame = sys._getframe(1)
        k = _index_key(key, frame, "write")
        if isinstance(value, (np.ndarray, list)):
            _ctr().upload("assigned value", frame)
            value = np.asarray(value)
        elif isinstance(value, DArray):
            value = value._a
        _ctr().op(frame)
        self._a[k] = value

    # methods, checked against cupy.ndarray
    def __getattr__(self, name):
        if name.startswith("__") or not hasattr(_cupy.ndarray, name):
            raise AttributeError(f"cupy.ndarray has no attribute '{name}'")
        real = getattr(_cupy.ndarray, name)
        if name in ("item", "tolist", "get"):
            def sync_method(*args, **kwargs):
                frame = sys._getframe(1)
                _check_call(f"ndarray.{name}", real, args, kwargs)
                self._sync(f".{name}()", frame)
                if name == "get":
                    return self._a.copy()
                return getattr(self._a, name)()
            return sync_method
        if not callable(real) or not hasattr(self._a, name):
            v = getattr(self._a, name, None)
            if isinstance(v, np.ndarray):  # .real, .imag, .base: device arrays
                return DArray(v)
            if v is not None and not callable(v) and isinstance(v, (int, float, bool, tuple, np.dtype)):
                return v
            raise DeviceDoubleError(f"the device double does not emulate cupy.ndarray.{name}")

        def method(*args, **kwargs):
            frame = sys._getframe(1)
            _check_call(f"ndarray.{name}", real, args, kwargs)
            a2 = [_unwrap(a, f"ndarray.{name}") for a in args]
            k2 = {k: _unwrap(v, f"ndarray.{name}", name=k) for k, v in kwargs.items()}
            if name == "nonzero":
                _ctr().sync("ndarray.nonzero", frame, implicit=1)
            if name == "repeat" and args and isinstance(args[0], DArray):
                _ctr().sync("ndarray.repeat", frame, implicit=2)
            _ctr().op(frame)
            r = getattr(self._a, name)(*a2, **k2)
            return self if (name == "fill" or r is None) and name != "sort" else _wrap(r)
        return method


for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift",
           "matmul"):
    for _p in ("__%s__", "__r%s__", "__i%s__"):
        setattr(DArray, _p % _n, _binop(_p % _n))
for _n in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(DArray, f"__{_n}__", _binop(f"__{_n}__"))
for _n in ("__neg__", "__pos__", "__abs__", "__invert__"):
    setattr(DArray, _n, _unop(_n))
DArray.__hash__ = None


# ---------------------------------------------------------------------------------------------
# module functions, ufuncs, namespaces
# ---------------------------------------------------------------------------------------------

class _Func:
    """A CuPy module function, run by NumPy's of the same name."""

    def __init__(self, name, real, impl, ufunc=False):
        self.name, self.real, self.impl, self.ufunc = name, real, impl, ufunc
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        frame = sys._getframe(1)
        return self._run(frame, self.impl, self.name, args, kwargs, self.real, self.ufunc)

    def _run(self, frame, impl, what, args, kwargs, real, ufunc):
        names = _check_call(what, real, args, kwargs, ufunc=ufunc) or []
        upload = what in _UPLOADS
        if upload and args and not isinstance(args[0], DArray):
            _ctr().upload(what, frame)
        a2 = [_unwrap(a, what, allow_host=upload, name=names[i] if i < len(names) else None)
              for i, a in enumerate(args)]
        k2 = {k: _unwrap(v, what, name=k) for k, v in kwargs.items()}
        n_sync = IMPLICIT_SYNCS.get(what, 0)
        n_sync = n_sync(args, kwargs) if callable(n_sync) else n_sync
        # a device scalar where CuPy needs a host number (a shape, a length, a bound): CuPy reads it
        named = list(zip(names, args)) + list(kwargs.items())
        n_sync += sum(1 for nm, v in named if nm in _HOST_NUMBER_PARAMS and
                      (isinstance(v, DArray) or isinstance(v, (tuple, list)) and any(isinstance(x, DArray) for x in v)))
        if n_sync:
            _ctr().sync(what, frame, implicit=n_sync)
        _ctr().op(frame)
        return _wrap(impl(*a2, **k2))

    def __getattr__(self, attr):  # ufunc methods: reduce, accumulate, at, outer, reduceat
        if not self.ufunc or not hasattr(self.real, attr) or attr.startswith("_"):
            raise AttributeError(f"CuPy's {self.name} has no attribute '{attr}'")
        real_m = getattr(self.real, attr)
        impl_m = getattr(self.impl, attr)
        parent = self

        def method(*args, **kwargs):
            frame = sys._getframe(1)
            if attr == "at":
                _check_call(f"{parent.name}.at", real_m, args, kwargs)
                a2 = [_unwrap(a, f"{parent.name}.at") for a in args]
                _check_scatter(parent.name, a2)
                _ctr().op(frame)
                impl_m(*a2, **kwargs)
                return None
            return parent._run(frame, impl_m, f"{parent.name}.{attr}", args, kwargs, real_m, False)
        return method


#: the oldest CuPy the GPU extras accept (pyproject.toml's ``cupy-cuda1Xx[ctk]>=14.1.1``; the test
#: ``tests/test_device_run.py`` holds the two equal): the double allows what that release allows
CUPY_FLOOR = (14, 1, 1)
#: ``cupy.add.at`` into int64 (``atomicAdd`` on ``unsigned long long``) came in CuPy 14.1; 14.0.x raises
ADD_INT64_SINCE = (14, 1, 0)


def at_dtypes(floor: tuple = CUPY_FLOOR) -> dict:
    """Dtypes of the array ``a`` that ``ufunc.at`` scatters into by an integer index in every CuPy from
    ``floor`` on (read from ``_scatter_op_single`` in cupy/_core/_routines_indexing.pyx: atomics CUDA
    has); other ufuncs have no ``at`` there (``NotImplementedError``)."""
    add = {"int32", "float16", "float32", "float64", "uint32", "uint64"}
    return {"add": add | ({"int64"} if tuple(floor) >= ADD_INT64_SINCE else set()),
            "subtract": {"int32", "uint32"},
            "maximum": {"int32", "int64", "float32", "float64", "uint32", "uint64"},
            "minimum": {"int32", "int64", "float32", "float64", "uint32", "uint64"},
            **{f"bitwise_{op}": {"int32", "int64", "uint32", "uint64"} for op in ("and", "or", "xor")}}


AT_DTYPES = at_dtypes()


def _check_scatter(name, args):
    """``cupy.<name>.at(a, indices, b)``: refused as CuPy refuses it (ufunc or dtype of ``a``)."""
    if name not in AT_DTYPES:
        raise DeviceDoubleError(f"cupy.{name}.at is not supported by CuPy (NotImplementedError there)")
    a, idx = args[0], args[1] if len(args) > 1 else None
    if isinstance(idx, np.ndarray) and idx.dtype == bool:
        return  # a boolean mask: CuPy's masked scatter, no atomics, any dtype
    if a.dtype.name not in AT_DTYPES[name]:
        raise DeviceDoubleError(f"cupy.{name}.at only supports {', '.join(sorted(AT_DTYPES[name]))} "
                                f"as data type, not {a.dtype.name} (CuPy raises TypeError)")


class _Namespace:
    """A CuPy sub-namespace (``cupyx.scipy.special``, ``random``) checked against the real one."""

    def __init__(self, real, impl, label):
        self._real, self._impl, self._label = real, impl, label

    def __getattr__(self, name):
        if name.startswith("__") or not hasattr(self._real, name):
            raise AttributeError(f"{self._label} has no attribute '{name}'")
        real = getattr(self._real, name)
        impl = getattr(self._impl, name)
        return _Func(f"{self._label}.{name}", real, impl, ufunc=isinstance(real, type(_cupy.add)))


class _Generator:
    """``cupy.random.default_rng(seed)``: NumPy's generator (CuPy's draws differ from NumPy's)."""

    def __init__(self, seed):
        self._g = np.random.default_rng(seed)
        self._real = _cupy.random.Generator

    def __getattr__(self, name):
        if not hasattr(self._real, name):
            raise AttributeError(f"cupy.random.Generator has no attribute '{name}'")
        real = getattr(self._real, name)
        impl = getattr(self._g, name)

        def method(*args, **kwargs):
            frame = sys._getframe(1)
            _check_call(f"Generator.{name}", real, (None, *args), kwargs)
            out = kwargs.pop("out", None)
            _ctr().op(frame)
            r = impl(*args, **kwargs)
            if out is not None:
                out._a[...] = r
                return out
            return _wrap(r)
        return method


class _Random:
    def __init__(self):
        self._real = _cupy.random

    def default_rng(self, seed=None):
        return _Generator(seed)

    def __getattr__(self, name):
        raise DeviceDoubleError(f"cupy.random.{name} is not emulated by the device double")


class _Device:
    id = 0

    def synchronize(self):
        _ctr().op(sys._getframe(1))


class _Runtime:
    @staticmethod
    def getDeviceCount():
        return 1

    @staticmethod
    def getDeviceProperties(i):
        return {"name": b"device double", "totalGlobalMem": 1 << 34, "major": 9, "minor": 0}

    #: ``(free, total)`` bytes that ``memGetInfo`` reports (a test may lower ``free`` to force blocking)
    MEM_INFO = (1 << 33, 1 << 34)

    def memGetInfo(self):
        return self.MEM_INFO


class _Cuda:
    Device = _Device
    runtime = _Runtime()


class _Cupyx:
    def __init__(self):
        self.scipy = type("scipy", (), {})()
        self.scipy.special = _Namespace(_cupy_special, _scipy_special, "cupyx.scipy.special")


# ---------------------------------------------------------------------------------------------
# raw kernels
# ---------------------------------------------------------------------------------------------

#: the overloads of CUDA's integer/float atomics (C type of the pointer), sm_60 and later
CUDA_ATOMICS = {
    "atomicAdd": {"int", "unsigned int", "unsigned long long", "float", "double"},
    "atomicMin": {"int", "unsigned int", "long long", "unsigned long long"},
    "atomicMax": {"int", "unsigned int", "long long", "unsigned long long"},
    "atomicOr": {"int", "unsigned int", "unsigned long long"},
}
_CTYPES = {"unsigned int": np.uint32, "int": np.int32, "unsigned long long": np.uint64, "long long": np.int64,
           "double": np.float64, "float": np.float32}
_ATOMIC_OP = {"atomicMin": "minimum", "atomicMax": "maximum", "atomicAdd": "add", "atomicOr": "bitwise_or"}


def _seg_reduce_reference(kern, grid, block, args):
    """The segmented reduction of ``kernels/segmented.py``: the atomics its source calls are ones CUDA
    has, then the launch is computed by the kernel's own NumPy emulation
    (:func:`kernels.seg_emulate.emulate_launch`: the kernel's steps vectorized over warps and lanes, every
    argument checked against the kernel's contract). Launches over more than :data:`EMULATE_STEPS_UP_TO`
    values are checked the same way but reduced on the host (the steps cost about 0.1 s per million
    values; ``tests/test_segmented.py`` covers them on every segment shape)."""
    from kernels.seg_emulate import emulate_launch

    src = kern.code
    m = re.search(r"typedef (.+?) T;", src)
    flushes = re.findall(r"flush\w*\(T\* p, T v\) \{ (atomic\w+)\(\((.+?)\*\)p", src)  # flush, flush2
    if not m or not flushes:
        raise DeviceDoubleError("seg_reduce: source does not have the expected typedef / flush")
    for atomic, atype in flushes:
        alias = re.search(r"typedef (.+?) " + re.escape(atype) + ";", src)
        atype = alias.group(1) if alias else atype  # the atomic's type through its typedef
        if atype not in CUDA_ATOMICS.get(atomic, ()):
            _ctr().dev.fault("seg_reduce", f"{atomic}({atype}*) does not exist in CUDA")  # kernels are cached
    if len(args) != 7:
        raise DeviceDoubleError(f"seg_reduce takes 7 arguments, got {len(args)}")
    for a, nm in zip(args[:3], ("x", "starts", "out")):
        if not isinstance(a, DArray):
            raise DeviceDoubleError(f"seg_reduce: {nm} must be a device array, got {type(a)}")
    host = tuple(a._a if isinstance(a, DArray) else a for a in args)
    try:
        x = host[0]
        emulate_launch(src, kern.name, grid, block, host, steps=x.size <= EMULATE_STEPS_UP_TO)
    except (ValueError, KeyError) as exc:
        raise DeviceDoubleError(str(exc)) from None


#: raw-kernel launches over at most this many values run the kernel's emulated steps
EMULATE_STEPS_UP_TO = 1 << 20

#: kernel name -> NumPy reference ``(kernel, grid, block, args)``
KERNELS = {"seg_reduce": _seg_reduce_reference}


class _RawKernel:
    def __init__(self, dev, code, name, **kw):
        if name not in KERNELS:
            raise DeviceDoubleError(f"RawKernel '{name}' has no NumPy reference in the device double")
        known = _params(_cupy.RawKernel.__init__) or _params(_cupy.RawKernel)
        bad = [k for k in kw if known is not None and k not in known[0]]
        if bad:
            raise DeviceDoubleError(f"cupy.RawKernel has no keyword {bad}")
        self.dev, self.code, self.name = dev, code, name

    def __call__(self, grid, block, args, **kw):
        frame = sys._getframe(1)
        if any(isinstance(a, np.ndarray) for a in args):
            raise DeviceDoubleError("a NumPy array passed to a raw kernel")
        _ctr().op(frame)
        KERNELS[self.name](self, tuple(grid), tuple(block), tuple(args))


# ---------------------------------------------------------------------------------------------
# the module
# ---------------------------------------------------------------------------------------------

class DeviceDouble:
    """A module-like CuPy stand-in (see the module docstring for what it checks and what it cannot).

    ``known_faults``: kernel faults (substrings) recorded in ``stats.kernel_faults`` instead of
    raising, for a fault whose fix is pending elsewhere.
    """

    __name__ = "cupy_double"
    ndarray = DArray
    device_name = "device double"

    def __init__(self, known_faults=()):
        if _cupy is None:
            raise ImportError("the device double reads CuPy's API from the cupy-cuda12x wheel; install it")
        self.stats = Stats()
        self.known_faults = tuple(known_faults)
        self.cuda = _Cuda()
        self.random = _Random()
        self.cupyx = _Cupyx()
        self._funcs: dict = {}
        _CTR[0] = _Counting(self)

    def activate(self):
        """Make this double's counters the ones arrays report to."""
        _CTR[0] = _Counting(self)
        return self

    def fault(self, kernel, what):
        if not any(k in what for k in self.known_faults):
            raise DeviceDoubleError(f"{kernel}: {what}")
        with self.stats.lock:
            self.stats.kernel_faults[(kernel, what)] += 1

    def RawKernel(self, code, name, **kw):  # noqa: N802 - CuPy's name
        return _RawKernel(self, code, name, **kw)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        f = self._funcs.get(name)
        if f is not None:
            return f
        if not hasattr(_cupy, name):
            raise AttributeError(f"module 'cupy' has no attribute '{name}'")
        real = getattr(_cupy, name)
        if hasattr(np, name) and getattr(np, name) is real:  # dtypes, constants, iinfo, ...: NumPy's own
            return real
        if not callable(real):
            return real
        if not hasattr(np, name):
            raise DeviceDoubleError(f"the device double does not emulate cupy.{name}")
        f = _Func(name, real, getattr(np, name), ufunc=isinstance(real, type(_cupy.add)))
        self._funcs[name] = f
        return f
