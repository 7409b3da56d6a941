"""The host CPU, read without NumPy (so the command can choose NumPy's sort before NumPy is imported).

NumPy 2.x sorts 32- and 64-bit keys with x86-simd-sort, on its AVX-512 path where the CPU has
AVX-512. On AMD Zen 4 (family 25 with AVX-512; Zen 5 is family 26) that path's compress-store to
memory is microcoded: a uint32 key costs about 40 ns at 10.5M rows against about 5 on the AVX2 path
(the metrics stage at 10.5M x 28: 38.6 CPU s against 16.4, the same metrics). NumPy reads
``NPY_DISABLE_CPU_FEATURES`` once, when it is imported.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

#: NumPy's AVX-512 dispatch targets: NumPy 2.0 - 2.3's names, then 2.4's (X86_V4 and above; its sorts dispatch
#: X86_V4 or X86_V3). AVX2 stays. NumPy ignores a name it does not dispatch (an ImportWarning, hidden by default);
#: one in its baseline (a build for AVX-512 machines only) makes it refuse to import, see :func:`refused`.
AVX512_FEATURES = "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR X86_V4"


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


def prefer_avx2_sort(environ=None, cpuinfo: str | None = None, numpy_loaded: bool | None = None) -> bool:
    """Before NumPy is imported, on AMD Zen 4, set ``NPY_DISABLE_CPU_FEATURES`` so that NumPy takes
    its AVX2 paths (its sorts about 7 times faster there). Nothing when NumPy is already imported or
    the user set ``NPY_DISABLE_CPU_FEATURES`` / ``NPY_ENABLE_CPU_FEATURES`` (even empty: the way to
    keep the AVX-512 paths). Returns whether it set it.

    >>> env = {}
    >>> prefer_avx2_sort(env, "vendor_id : AuthenticAMD\\ncpu family : 25\\nflags : avx512f", False), env
    (True, {'NPY_DISABLE_CPU_FEATURES': 'AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR X86_V4'})
    >>> prefer_avx2_sort({"NPY_DISABLE_CPU_FEATURES": ""}, "vendor_id : AuthenticAMD\\ncpu family : 25\\nflags : avx512f", False)
    False
    """
    environ = os.environ if environ is None else environ
    loaded = "numpy" in sys.modules if numpy_loaded is None else numpy_loaded
    if loaded or "NPY_DISABLE_CPU_FEATURES" in environ or "NPY_ENABLE_CPU_FEATURES" in environ:
        return False
    if not amd_zen4(cpuinfo):
        return False
    environ["NPY_DISABLE_CPU_FEATURES"] = AVX512_FEATURES
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
    ours = os.environ.get("NPY_DISABLE_CPU_FEATURES") == AVX512_FEATURES
    detail = " ".join(text.split())
    fix = ("this NumPy is built for AVX-512 machines only: run with NPY_DISABLE_CPU_FEATURES= (empty) to keep its "
           "paths" if ours else "list only features NumPy dispatches, or leave NPY_DISABLE_CPU_FEATURES empty")
    return f"NumPy refused NPY_DISABLE_CPU_FEATURES ({detail}); {fix}"
