"""The host CPU, read without NumPy (so the command can choose NumPy's sort before NumPy is imported).

NumPy 2.x sorts 32- and 64-bit keys with x86-simd-sort, on its AVX-512 path where the CPU has
AVX-512. On AMD Zen 4 (family 25 with AVX-512; Zen 5 is family 26) that path's compress-store to
memory is microcoded: a uint32 key costs about 40 ns at 10.5M rows against about 5 on the AVX2 path
(the metrics stage at 10.5M x 28: 38.6 CPU s against 16.4, the same metrics). NumPy reads
``NPY_DISABLE_CPU_FEATURES`` once, when it is imported.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from functools import lru_cache

#: NumPy's AVX-512 dispatch targets by the first NumPy version that names them so: 2.0 - 2.3 dispatch AVX512F ..
#: AVX512_ICL, 2.4 regrouped them as X86_V4, AVX512_ICL, AVX512_SPR (its sorts dispatch X86_V4 or X86_V3; on 2.4.6 here
#: the three names take a 4M uint32 sort from 151 to 57 ms). AVX2 stays. Only names the installed NumPy dispatches: it
#: warns about any other (an ImportWarning, an error under ``python -W error``), and refuses one of its baseline.
AVX512_FEATURES = {
    (2, 0): "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL",
    (2, 4): "X86_V4 AVX512_ICL AVX512_SPR",
}


def numpy_version(version_py: str | None = None) -> tuple[int, int] | None:
    """(major, minor) of the NumPy that ``import numpy`` would load, read from its ``version.py`` without importing
    it (or from the text ``version_py``); None when it is not found.

    >>> numpy_version('version = "2.4.6"\\n__version__ = version\\n')
    (2, 4)
    """
    if version_py is None:
        try:
            spec = importlib.util.find_spec("numpy")
            with open(os.path.join(list(spec.submodule_search_locations)[0], "version.py")) as f:
                version_py = f.read(4096)
        except (ImportError, OSError, TypeError, AttributeError, IndexError, ValueError):
            return None
    m = re.search(r'^version\s*=\s*["\'](\d+)\.(\d+)', version_py, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else None


def avx512_features(version: tuple[int, int] | None) -> str | None:
    """The ``NPY_DISABLE_CPU_FEATURES`` value that leaves NumPy ``version`` its AVX2 paths; None for a NumPy outside
    2.x (its names are not known here).

    >>> avx512_features((2, 3)), avx512_features((2, 5)), avx512_features((3, 0))
    ('AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL', 'X86_V4 AVX512_ICL AVX512_SPR', None)
    """
    if version is None or version[0] != 2:
        return None
    return AVX512_FEATURES[max(v for v in AVX512_FEATURES if v <= version)]


def amd_zen4(cpuinfo: str | None = None) -> bool:
    """Whether the first core of ``/proc/cpuinfo`` (or ``cpuinfo``) is AMD family 25 with AVX-512.

    >>> amd_zen4("vendor_id\\t: AuthenticAMD\\ncpu family\\t: 25\\nflags\\t\\t: fpu avx2 avx512f\\n\\n")
    True
    >>> amd_zen4("vendor_id\\t: GenuineIntel\\ncpu family\\t: 6\\nflags\\t\\t: avx512f\\n\\n")
    False
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read(1 << 16)
        except OSError:
            return False
    fields = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():  # the first core
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return (fields.get("vendor_id") == "AuthenticAMD" and fields.get("cpu family") == "25"
            and "avx512f" in fields.get("flags", "").split())


def prefer_avx2_sort(environ=None, cpuinfo: str | None = None, numpy_loaded: bool | None = None,
                     version: tuple[int, int] | None = None) -> bool:
    """Before NumPy is imported, on AMD Zen 4, set ``NPY_DISABLE_CPU_FEATURES`` so that NumPy takes
    its AVX2 paths (its sorts about 7 times faster there). Nothing when NumPy is already imported or
    the user set ``NPY_DISABLE_CPU_FEATURES`` / ``NPY_ENABLE_CPU_FEATURES`` (even empty: the way to
    keep the AVX-512 paths), or for a NumPy whose feature names are not known (:func:`avx512_features` of
    ``version``, by default the installed NumPy's). Returns whether it set it.

    >>> env = {}
    >>> prefer_avx2_sort(env, "vendor_id : AuthenticAMD\\ncpu family : 25\\nflags : avx512f", False, (2, 4)), env
    (True, {'NPY_DISABLE_CPU_FEATURES': 'X86_V4 AVX512_ICL AVX512_SPR'})
    >>> prefer_avx2_sort({"NPY_DISABLE_CPU_FEATURES": ""}, "vendor_id : AuthenticAMD\\ncpu family : 25\\nflags : avx512f", False)
    False
    """
    environ = os.environ if environ is None else environ
    loaded = "numpy" in sys.modules if numpy_loaded is None else numpy_loaded
    if loaded or "NPY_DISABLE_CPU_FEATURES" in environ or "NPY_ENABLE_CPU_FEATURES" in environ:
        return False
    if not amd_zen4(cpuinfo):
        return False
    features = avx512_features(numpy_version() if version is None else version)
    if features is None:
        return False
    environ["NPY_DISABLE_CPU_FEATURES"] = features
    return True


@lru_cache(maxsize=1)
def host_sort_is_slow() -> bool:
    """Whether the NumPy this process loaded sorts 32- and 64-bit keys with its AVX-512 path on AMD
    Zen 4 (:func:`amd_zen4`): about 40 ns a uint32 key at 10.5M rows against about 5 on the AVX2 path
    (the ``gpuanon`` command selects that path there, :func:`prefer_avx2_sort`; a process that
    imported NumPy first keeps AVX-512). A CPU formulation that trades a sort for passes over the
    rows pays off only here. False when NumPy is not loaded or its dispatch table is unknown."""
    core = sys.modules.get("numpy._core._multiarray_umath")
    features = getattr(core, "__cpu_features__", None) or {}
    return bool(features.get("AVX512_SKX")) and amd_zen4()


def refused(exc: BaseException) -> str | None:
    """The one-line error for NumPy refusing ``NPY_DISABLE_CPU_FEATURES`` at import (it raises a
    ``RuntimeError`` naming the variable when a listed feature is in its build's baseline), else None."""
    text = str(exc)
    if not isinstance(exc, RuntimeError) or "NPY_DISABLE_CPU_FEATURES" not in text:
        return None
    ours = os.environ.get("NPY_DISABLE_CPU_FEATURES") in AVX512_FEATURES.values()
    detail = " ".join(text.split())
    fix = ("this NumPy is built for AVX-512 machines only: run with NPY_DISABLE_CPU_FEATURES= (empty) to keep its "
           "paths" if ours else "list only features NumPy dispatches, or leave NPY_DISABLE_CPU_FEATURES empty")
    return f"NumPy refused NPY_DISABLE_CPU_FEATURES ({detail}); {fix}"
