"""bench/device_run.sh and bench/gpu_check.py without a GPU: what a lent machine's call carries, the
cuDF parts' round trip, the run's fallback to core mode, results kept when a run is cut off, and the
CuPy floor of the GPU extras that the device double follows."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHON=sys.executable, **extra)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_plan_carries_the_core_set_within_a_call():
    """--plan: every locked core wheel, a `carry: N MiB` of at most 64 (working tree included), and none of
    the packages the machine's image already holds."""
    p = subprocess.run(["bash", "bench/device_run.sh", "--plan"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    wheels = _load("device_wheels")
    lock = wheels.read_lock()
    for r in lock:
        assert r["requirement"] in p.stdout
    carry = float(re.search(r"^carry: ([0-9.]+) MiB", p.stdout, re.M).group(1))
    core = sum(r["bytes"] for r in lock if r["set"] == "core") / 2**20
    assert core < carry <= 64
    names = {r["requirement"].split("==")[0] for r in lock}
    assert {"dask", "distributed", "dask-cuda", "cudf-cu13", "libcudf-cu13"} <= names
    assert not names & {"numpy", "pandas", "pyarrow", "cupy-cuda13x", "scipy", "scikit-learn", "torch"}
    cudf = sum(r["bytes"] for r in lock if r["set"] == "cudf")
    assert cudf / 6 + wheels.tree_bytes() < 64 * 2**20  # six parts, each with the working tree, fit a call


def test_locked_versions_are_the_projects_pins():
    """The carried Dask is the test extra's; dask-cuda and cuDF are inside the gpu-cu13 extra."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {Requirement(d).name: str(Requirement(d).specifier)[2:] for d in project["optional-dependencies"]["test"]}
    cu13 = {Requirement(d).name: Requirement(d).specifier for d in project["optional-dependencies"]["gpu-cu13"]}
    lock = {r["requirement"].split("==")[0]: r["requirement"].split("==")[1] for r in _load("device_wheels").read_lock()}
    assert lock["dask"] == pins["dask"] and lock["distributed"] == pins["distributed"]
    assert cu13["dask-cuda"].contains(lock["dask-cuda"]) and cu13["cudf-cu13"].contains(lock["cudf-cu13"])


def test_cudf_parts_round_trip_and_a_missing_part_is_refused(tmp_path, monkeypatch):
    """--split makes N parts and their SHA-256; stage copies carried parts; assemble gives back the very
    wheels only when every part is there and intact (else exit 3: the run falls back to core mode)."""
    w = _load("device_wheels")
    src, stage = tmp_path / "cudf", tmp_path / "stage"
    (src / "wheels").mkdir(parents=True)
    rows, payload = [], {}
    for i, size in enumerate((3000, 50, 7001)):
        name = f"pkg{i}-1.0-py3-none-any.whl"
        data = os.urandom(size)
        (src / "wheels" / name).write_bytes(data)
        payload[name] = data
        rows.append(f"cudf pkg{i}==1.0 {name} {size} {w.hashlib.sha256(data).hexdigest()}\n")
    lock = tmp_path / "lock.txt"
    lock.write_text("".join(rows))
    monkeypatch.setattr(w, "LOCK", str(lock))
    monkeypatch.setattr(w, "CUDF_DIR", str(src))
    monkeypatch.setattr(w, "STAGE", str(stage))
    assert w.split(4) == 0
    parts = sorted(p.name for p in src.glob("cudf.part*"))
    assert parts == [f"cudf.part{i}" for i in range(1, 5)]
    assert w.assemble() == 3  # nothing staged
    for p in parts[1:]:
        (src / p).rename(tmp_path / p)  # this call carried part 1 only
    assert w.stage() == 0 and w.assemble() == 3
    for p in parts[1:]:
        (tmp_path / p).rename(src / p)
    assert w.stage() == 0 and w.assemble() == 0
    for name, data in payload.items():
        assert (stage / "wheels" / name).read_bytes() == data
    with open(stage / "cudf.part2", "r+b") as fh:  # a damaged part
        fh.write(b"\0")
    assert w.assemble() == 3


def test_device_run_falls_back_to_core_and_runs_the_parts_on_the_cpu(tmp_path):
    """The device call's command, here on the CPU: cudf mode with no staged part falls back to core mode,
    the carried wheels (when fetched) go into the target folder, and gpu_check runs the chosen parts
    (tests/test_gpu.py's device-equals-host tests skip without a GPU) and writes its files."""
    out = tmp_path / "out"
    env = _env(OUT=str(out), DEVICE_SITE=str(tmp_path / "site"), GPUANON_CUDF_STAGE=str(tmp_path / "nostage"),
               DEVICE_BUDGET_S="240")
    p = subprocess.run(["bash", "bench/device_run.sh", "cudf", "--", "--backend", "cpu", "--small", "--parts",
                        "tests_equal,mondrian_adult"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    log = (out / "device_run.log").read_text()
    assert "falling back to core mode" in log and "add.at probe" in log
    if list((ROOT / ".whl").glob("*.whl")):
        assert "installed" in log and (tmp_path / "site" / "dask_cuda").is_dir()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["done"] == ["tests_equal", "mondrian_adult"] and summary["failed"] == []
    assert "cluster" in summary["skipped"] and summary["reasons"]["cluster"] == "not selected (--parts)"
    doc = json.loads((out / "gpu_check.json").read_text())
    tests = doc["parts"]["tests_equal"]
    # every test_gpu.py item the part selects, skipped here (no GPU)
    collected = subprocess.run([sys.executable, "-m", "pytest", "tests/test_gpu.py", "--collect-only", "-q",
                                "-o", "addopts=", "-p", "no:cacheprovider", "-k", tests["select"]],
                               cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120).stdout
    n_sel = sum(1 for ln in collected.splitlines() if ln.startswith("tests/test_gpu.py::"))
    assert n_sel >= 28
    assert tests["exit_status"] == 0 and tests["counts"] == {"skipped": n_sel}
    cases = ET.parse(out / tests["junit"]).getroot().iter("testcase")
    assert sum(1 for c in cases if c.find("skipped") is not None) == n_sel
    live = [json.loads(ln) for ln in (out / "tests_live.jsonl").read_text().splitlines()]
    assert len(live) == n_sel and all(r["outcome"] == "skipped" and "no usable GPU" in r["reason"] for r in live)
    assert doc["parts"]["mondrian_adult"]["warm"]["achieved_k"] >= 3
    assert len(list(out.iterdir())) <= 8  # what a device call brings back from $OUT


@pytest.mark.slow
def test_a_killed_run_keeps_its_finished_parts(tmp_path):
    """gpu_check.json and summary.json are rewritten atomically after every part: a run killed in its
    second part still leaves the first, whole, and says the run is not complete."""
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "bench/gpu_check.py", "--out", str(out), "--backend", "cpu", "--small",
                          "--parts", "mondrian_adult,suda"], cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            s = out / "summary.json"
            if s.exists() and "mondrian_adult" in json.loads(s.read_text())["done"]:
                break
            time.sleep(0.2)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["complete"] and summary["done"] == ["mondrian_adult"] and "suda" in summary["pending"]
    doc = json.loads((out / "gpu_check.json").read_text())
    assert doc["parts"]["mondrian_adult"]["warm"]["fit_transform"] > 0 and "suda" not in doc["parts"]


@pytest.mark.slow
def test_pytest_part_cut_off_keeps_every_finished_test(tmp_path):
    """A pytest part over its limit is interrupted (SIGINT, even when this process ignores it): the tests
    that finished are in the live file and in pytest's JUnit XML, and the part says it timed out."""
    gc = _load("gpu_check")
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_quick():\n    assert True\n\n"
                                           "def test_stuck():\n    time.sleep(600)\n")
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background job: the child must not inherit it
    try:
        res = gc.run_pytest("tests_equal", "", 45, str(tmp_path), files=(str(tmp_path / "test_slow.py"),))
    finally:
        signal.signal(signal.SIGINT, old)
    assert res["error"].startswith("timed out after 45 s") and res["counts"] == {"passed": 1}
    assert res["seconds"] < 120
    cases = {c.get("name"): c for c in ET.parse(tmp_path / res["junit"]).getroot().iter("testcase")}
    assert "test_quick" in cases and cases["test_quick"].find("failure") is None


def test_gpu_extras_require_cupy_14_1_1_and_the_double_follows():
    """Both GPU extras refuse CuPy 14.0.x and 14.1.0 (no int64 ``add.at`` before 14.1; cuDF refuses
    14.1.0); the double's floor is the extras' floor, so it allows the int64 scatter-add only because of it."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floors = set()
    for name in ("gpu-cu12", "gpu-cu13"):
        cupy = next(Requirement(d) for d in extras[name] if d.startswith("cupy"))
        for v, ok in (("14.0.1", False), ("14.1.0", False), ("14.1.1", True), ("14.2.0", True), ("15.0.0", False)):
            assert cupy.specifier.contains(v) is ok, f"{name}: {cupy} and CuPy {v}"
        floors |= {Version(s.version) for s in cupy.specifier if s.operator == ">="}
    assert floors == {Version("14.1.1")}
    pytest.importorskip("cupy", reason="the device double reads CuPy's API from the cupy-cuda12x wheel")
    sys.path.insert(0, str(ROOT / "tests"))
    import cupy_double as D

    assert Version(".".join(map(str, D.CUPY_FLOOR))) == floors.pop()
    assert "int64" in D.AT_DTYPES["add"] and D.AT_DTYPES == D.at_dtypes(D.CUPY_FLOOR)
    assert "int64" not in D.at_dtypes((14, 0, 1))["add"]
    import numpy as np

    dev = D.DeviceDouble()
    a = dev.zeros(3, dtype=dev.int64)
    dev.add.at(a, dev.asarray(np.array([0, 2, 2])), dev.asarray(np.array([1, 2**40, 3], dtype=np.int64)))
    with pytest.raises(D.DeviceDoubleError, match="int8"):
        dev.add.at(dev.zeros(3, dtype=dev.int8), dev.asarray(np.array([0])), 1)
