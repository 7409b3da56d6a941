"""Every CUDA kernel of the package compiles with NVRTC, on a machine without a GPU.

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel (the ``[ctk]`` extra of CuPy); CuPy's bindings
call it without a driver. Each kernel source is compiled for ``sm_80`` and ``sm_90`` with the
options CuPy's ``RawKernel`` passes (``assemble_cupy_compiler_options`` plus ``-ftz=true`` and the
architecture). Every ``(op, dtype)`` that :func:`kernels.segmented.has_device_kernel` claims must
compile; every pair without a device implementation must raise ``NotImplementedError`` from
``segment_reduce`` on a device array module. The table of the outcome is docs/device_kernels.md;
``GPUANON_WRITE_KERNEL_TABLE=1`` rewrites it, otherwise the test checks it is current.

What it cannot catch: anything at run time (launch configuration, numerics, races, speed) -- the
kernel's algorithm is tested by its NumPy emulation in tests/test_segmented.py and on a GPU by
tests/test_gpu.py.
"""

from __future__ import annotations

import os
import pathlib
import re

import numpy as np
import pytest

from kernels import segmented as S

try:
    import cupy._core.core as _cupy_core
    from cupy_backends.cuda.libs import nvrtc

    NVRTC_VERSION = nvrtc.getVersion()
except Exception as e:  # noqa: BLE001 -- any import or loader failure means: no NVRTC here
    pytest.skip(f"NVRTC is not importable ({type(e).__name__}: {e}); install the test extra "
                "(cupy-cuda12x[ctk] brings nvidia-cuda-nvrtc-cu12)", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "device_kernels.md"
ARCHS = (80, 90)
# dtypes enumerated beyond the kernel table: the float sums, bool, and types with no device path
EXTRA_TYPES = ["float64", "float32", "bool", "float16", "int8", "uint8", "int16", "uint16", "complex128"]
# the modules that build CUDA kernels, and the function listing every source they build
REGISTRIES = {"kernels/segmented.py": S.device_kernel_sources}
KERNEL_CALL = re.compile(r"\b(RawKernel|RawModule|ElementwiseKernel|ReductionKernel)\s*\(|\bfuse\s*\(")


def _options(arch: int) -> tuple:
    """The options CuPy's RawKernel compiles with (CuPy's own assembly, then -ftz and the arch)."""
    try:
        base = _cupy_core.assemble_cupy_compiler_options(())
    except RuntimeError:  # no CUDA headers found: the kernels include none
        base = ("--std=c++17", f"-I{_cupy_core._get_header_dir_path()}")
    return base + ("-ftz=true", f"-arch=sm_{arch}")


def compile_source(source: str, arch: int) -> str:
    """Compile with NVRTC; '' when it compiles, else the compiler's log."""
    prog = nvrtc.createProgram(source, "kern.cu", (), ())
    try:
        nvrtc.compileProgram(prog, _options(arch))
        return ""
    except nvrtc.NVRTCError as e:
        return nvrtc.getProgramLog(prog).strip() or str(e)
    finally:
        nvrtc.destroyProgram(prog)


class _RefusingXP:
    """A stand-in array module that is not NumPy: ``segment_reduce`` takes its device path; a kernel
    launch on it fails the test (unclaimed pairs must be refused before any kernel is built)."""

    def __getattr__(self, name):
        return getattr(np, name)

    class RawKernel:
        def __init__(self, *a):
            raise AssertionError("a kernel was built for a pair that has_device_kernel does not claim")


def _kernel_types():
    return list(dict.fromkeys(name.split("/")[2] for name, _ in S.device_kernel_sources()))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name, source", S.device_kernel_sources(), ids=[n for n, _ in S.device_kernel_sources()])
def test_every_kernel_compiles(name, source, arch):
    log = compile_source(source, arch)
    assert log == "", f"{name} does not compile for sm_{arch}:\n{log}"


def test_the_compile_check_fails_on_a_kernel_that_does_not_compile():
    """The check above can fail: CUDA has no atomicAdd on signed 64-bit integers (the old int64 sum)."""
    src = S.device_kernel_source("add", "int64").replace("typedef unsigned long long AT;", "typedef long long AT;")
    assert "atomicAdd" in compile_source(src, 80)


@pytest.mark.parametrize("dtype", EXTRA_TYPES + ["uint32", "int32", "uint64", "int64"])
@pytest.mark.parametrize("op", S.ops())
def test_unclaimed_pairs_are_refused_on_a_device(op, dtype):
    x = np.zeros(8, dtype=dtype)
    starts = np.array([0, 3], dtype=np.int64)
    support = S.device_support(op, dtype)
    if support == "kernel":
        assert S.has_device_kernel(op, "int64" if dtype == "bool" else dtype)
        assert S.device_kernel_source(op, "int64" if dtype == "bool" else dtype)
    elif support == "fixed-order sum":  # elementwise operations only: no kernel is built
        assert not S.has_device_kernel(op, dtype)
        assert S.segment_reduce(op, x, starts, _RefusingXP()).shape == (2,)
    else:
        assert not S.has_device_kernel(op, dtype)
        with pytest.raises(NotImplementedError, match="no device segmented"):
            S.segment_reduce(op, x, starts, _RefusingXP())


def test_every_kernel_source_in_the_package_is_registered():
    """A module that builds a CUDA kernel lists its sources, so the compile test covers them."""
    found = []
    for path in sorted([*ROOT.glob("gpuanon/**/*.py"), *ROOT.glob("kernels/*.py")]):
        rel = str(path.relative_to(ROOT))
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        if KERNEL_CALL.search(code) and rel not in REGISTRIES:
            found.append(rel)
    assert not found, f"modules building CUDA kernels without a registered source list: {found}"
    assert {n for n, _ in S.device_kernel_sources()} == {
        f"seg_reduce/{op}/{t}" for op in S.ops() for t in _kernel_types() if S.has_device_kernel(op, t)}


def kernel_table() -> str:
    """The op x dtype x arch table: compiles / fixed-order sum / refused as designed / FAILS."""
    types_ = list(dict.fromkeys([*_kernel_types(), *EXTRA_TYPES]))
    lines = ["# Device kernels: op x dtype x arch", "",
             "Generated by `GPUANON_WRITE_KERNEL_TABLE=1 python -m pytest tests/test_nvrtc.py` (NVRTC from the",
             "`nvidia-cuda-nvrtc` wheel, CuPy's RawKernel options, no GPU needed); the test checks this file is",
             "current. *compiles*: the CUDA kernel of `kernels/segmented.py` compiles for that architecture;",
             "*fixed-order sum*: `segment_sum`, elementwise operations only (no kernel, same bits as NumPy);",
             "*refused as designed*: `segment_reduce` raises `NotImplementedError` on a device. `bool` `add`",
             "runs as `int64`.", "",
             "| op | dtype | " + " | ".join(f"sm_{a}" for a in ARCHS) + " |",
             "| --- | --- | " + " | ".join("---" for _ in ARCHS) + " |"]
    for op in S.ops():
        for t in types_:
            support = S.device_support(op, t)
            if support == "kernel":
                src = S.device_kernel_source(op, "int64" if t == "bool" else t)
                cells = ["compiles" if compile_source(src, a) == "" else "FAILS" for a in ARCHS]
            else:
                cells = [support or "refused as designed"] * len(ARCHS)
            lines.append(f"| {op} | {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_the_kernel_table_is_current():
    table = kernel_table()
    assert "FAILS" not in table
    if os.environ.get("GPUANON_WRITE_KERNEL_TABLE"):
        TABLE.write_text(table)
    print(table)
    assert TABLE.exists() and TABLE.read_text() == table, \
        "docs/device_kernels.md is stale: rerun with GPUANON_WRITE_KERNEL_TABLE=1"
