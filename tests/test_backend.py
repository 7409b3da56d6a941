"""Backend selection: cpu, auto (falls back without a GPU), gpu (an error without one), env var."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon import BackendError, Mondrian
from gpuanon import backend as B


@pytest.fixture
def fresh_gpu_status():
    """Clear the cached GPU probe before and after a test that changes the environment."""
    B.gpu_status.cache_clear()
    yield
    B.gpu_status.cache_clear()


def test_cpu_backend():
    be = B.get_backend("cpu")
    assert be.name == "cpu" and be.xp is np and be.frame is pd
    assert not be.is_gpu and be.device == "cpu"
    a = be.asarray([1, 2, 3])
    assert isinstance(a, np.ndarray) and np.array_equal(be.to_host(a), [1, 2, 3])
    assert B.get_namespace(a) is np and B.get_namespace() is np and B.get_namespace(None, a) is np


@pytest.mark.parametrize("name", ["CPU", " cpu ", "Cpu"])
def test_names_are_case_and_space_insensitive(name):
    assert B.get_backend(name, quiet=True).name == "cpu"


def test_gpu_status_never_raises():
    ok, why = B.gpu_status()
    assert isinstance(ok, bool) and isinstance(why, str)
    assert B.gpu_usable() == ok
    if not ok:
        assert why  # a reason is always given


def test_auto_falls_back_to_cpu_without_a_gpu(caplog, monkeypatch):
    if B.gpu_usable():
        pytest.skip("a GPU is usable here: auto picks it (covered by test_gpu.py)")
    import logging

    monkeypatch.setattr(logging.getLogger("gpuanon"), "propagate", True)  # a CLI test before turns it off
    B._SAID.clear()
    with caplog.at_level("INFO", logger="gpuanon"):
        be = B.get_backend("auto")
        B.get_backend("auto")  # the same choice again: said once at INFO, not twice
    assert be.name == "cpu" and be.xp is np
    if not B._driver_present()[0]:  # no GPU at all: a plain choice, not a fallback
        assert be.reason.startswith("auto, no GPU here: ") and "fell back" not in caplog.text
        assert caplog.text.count("backend cpu (auto, no GPU here") == 1
    else:  # a GPU that cannot be used
        assert be.reason.startswith("fell back to the CPU")
        assert caplog.text.count("fell back") == 1


def test_gpu_request_without_a_gpu_is_an_error():
    if B.gpu_usable():
        pytest.skip("a GPU is usable here")
    with pytest.raises(BackendError, match=r"backend 'gpu' requested but no GPU is usable: .+; use --backend cpu"):
        B.get_backend("gpu")


def test_hidden_gpus_give_a_clear_reason(monkeypatch, fresh_gpu_status):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert B.gpu_status() == (False, "CUDA_VISIBLE_DEVICES hides every GPU")
    with pytest.raises(BackendError, match="CUDA_VISIBLE_DEVICES hides every GPU"):
        B.get_backend("gpu")
    be = B.get_backend("auto")
    assert be.name == "cpu" and "CUDA_VISIBLE_DEVICES" in be.reason


def test_env_var_is_respected(monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "cpu")
    assert B.resolve_name() == "cpu"
    assert B.get_backend().name == "cpu"
    assert B.resolve_name("auto") == "auto"  # the argument wins over the variable
    monkeypatch.delenv("GPUANON_BACKEND")
    assert B.resolve_name() == "auto"
    monkeypatch.setenv("GPUANON_BACKEND", "")
    assert B.resolve_name() == "auto"


def test_env_var_bad_value_is_rejected(monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "tpu")
    with pytest.raises(BackendError, match=r"GPUANON_BACKEND 'tpu' is not one of auto, cpu, gpu"):
        B.get_backend()
    df = pd.DataFrame({"a": [1, 2, 3, 4], "s": list("xyxy")})
    with pytest.raises(BackendError, match="GPUANON_BACKEND 'tpu'"):
        Mondrian(k=2, quasi_identifiers=["a"], progress=False).fit(df)


def test_bad_backend_argument_is_rejected():
    with pytest.raises(BackendError, match=r"backend 'cuda' is not one of auto, cpu, gpu"):
        B.get_backend("cuda")


def test_estimator_reports_its_backend(monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "cpu")
    df = pd.DataFrame({"a": [1, 2, 3, 4], "s": list("xyxy")})
    m = Mondrian(k=2, quasi_identifiers=["a"], progress=False)
    m.fit_transform(df)
    assert m.backend_.name == "cpu" and m.report_["backend"] == "cpu"
    assert m.report_["backend_reason"] == "cpu requested"


def test_frames_on_a_machine_without_cudf():
    import pandas as pd

    from gpuanon import backend as B
    from gpuanon.errors import BackendError

    df = pd.DataFrame({"a": [1, 2]})
    assert not B.is_device_frame(df) and B.frame_to_host(df) is df
    if B.cudf_module() is None:
        with pytest.raises(BackendError, match="cuDF is not usable"):
            B.frame_to_device(df)


def test_command_prefers_numpy_avx2_sort_on_zen4():
    # the `gpuanon` command, before NumPy is imported, selects NumPy's AVX2 paths on AMD Zen 4 (its
    # AVX-512 sort is microcoded there: gpuanon.cpu) and nowhere else; a variable the user set stays
    import os
    import subprocess
    import sys

    from gpuanon.cpu import amd_zen4, avx512_features, numpy_version

    code = ("import os, sys\nfrom gpuanon.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n"
            "    pass\nimport numpy\nfrom numpy._core._multiarray_umath import __cpu_features__ as f\n"
            "print(repr(os.environ.get('NPY_DISABLE_CPU_FEATURES')), bool(f.get('AVX512F')), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPY_")}
    for given in (None, ""):
        if given is not None:
            env["NPY_DISABLE_CPU_FEATURES"] = given
        # -W error: a feature name this NumPy does not dispatch would be an ImportWarning, so an error here
        r = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        value, avx512 = r.stderr.strip().splitlines()[-1].rsplit(" ", 1)
        if given is None and amd_zen4():
            assert value == repr(avx512_features(numpy_version())) and avx512 == "False", r.stderr
        else:
            assert value == repr(given), r.stderr


def test_numpy_refusing_the_cpu_features_is_one_line():
    # NumPy refuses to import when NPY_DISABLE_CPU_FEATURES names a feature of its baseline (SSE2 in every
    # x86-64 build): the command says so in one line with the fix, no traceback
    import os
    import platform
    import subprocess
    import sys

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86-64 feature names")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPY_")}
    env["NPY_DISABLE_CPU_FEATURES"] = "SSE2"
    code = "import sys\nfrom gpuanon.cli import main\nsys.exit(main(['risk', '--dataset', 'adult', '--qi', 'age']))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuanon: error: NumPy refused NPY_DISABLE_CPU_FEATURES"), r.stderr
    assert "Traceback" not in r.stderr and "SSE2" in lines[0]


def test_avx512_feature_names_are_the_installed_numpys():
    # every name the command would set is one this NumPy dispatches (else an ImportWarning: an error under -W error)
    import numpy as np

    from gpuanon.cpu import avx512_features, numpy_version

    assert numpy_version() == tuple(int(p) for p in np.__version__.split(".")[:2])
    names = avx512_features(numpy_version())
    if names is None or platform_machine() not in ("x86_64", "AMD64"):
        pytest.skip("not an x86-64 NumPy 2")
    from numpy._core._multiarray_umath import __cpu_dispatch__

    assert set(names.split()) <= set(__cpu_dispatch__), (names, __cpu_dispatch__)


def platform_machine() -> str:
    import platform

    return platform.machine()
