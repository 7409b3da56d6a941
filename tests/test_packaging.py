"""The set-up files: README commands, .ci/run, environment.yml (parsed and linted)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _block_after(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(re.escape(marker) + r"\s*```\n(.*?)\n```", text, re.S)
    assert m, f"README has no command after {marker}"
    return m.group(1).strip()


def test_readme_commands_are_single_lines():
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        cmd = _block_after(marker)
        assert "\n" not in cmd and cmd.startswith("python3 -m venv")


@pytest.mark.slow
def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci
    cmd = subprocess.run(
        ["awk", r"/<!-- test-command -->/{f=1; next} f && /^```/{if (n++) exit; next} f {print}", "README.md"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert cmd == _block_after("<!-- test-command -->")
    assert "pytest" in cmd and '".[test,device-check,docs]"' in cmd


def test_main_command_flags_exist():
    from gpuanon.cli import build_parser

    cmd = _block_after("<!-- main-command -->")
    argv = cmd.split("gpuanon ", 1)[1].split()
    args = build_parser().parse_args(argv)
    assert args.command == "anonymize" and args.dataset == "adult" and args.k == 10


def test_environment_yml_parses_and_lints():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert set(env) == {"name", "channels", "dependencies"}
    assert env["name"] == "gpuanon"
    assert env["channels"][0] == "rapidsai" and "conda-forge" in env["channels"]
    deps = env["dependencies"]
    specs = [d for d in deps if isinstance(d, str)]
    names = [re.split(r"[=<>!~ ]", s, maxsplit=1)[0] for s in specs]
    assert len(names) == len(set(names)), "a package is listed twice"
    for required in ("python", "cudf", "cuml", "dask-cuda", "cupy", "numpy", "pandas", "pyarrow", "pytest", "pip"):
        assert required in names, f"environment.yml lacks {required}"
    for s in specs:
        if s != "pip":
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+=[0-9][0-9A-Za-z.*]*", s), f"unpinned or malformed spec: {s}"
    py = [s for s in specs if s.startswith("python=")][0]
    assert py.split("=")[1].startswith("3.1")
    rapids = {s.split("=")[1] for s in specs if s.split("=")[0] in ("cudf", "cuml", "dask-cuda")}
    assert len(rapids) == 1, "cudf, cuml and dask-cuda must share one RAPIDS release"
    pip_sections = [d for d in deps if isinstance(d, dict)]
    assert pip_sections and "-e ." in pip_sections[0]["pip"]


def test_test_extra_carries_no_cupy():
    """CuPy for the CPU checks lives in ``device-check``: ``.[test,gpu-cu13]`` must not install a CUDA 12
    CuPy beside the CUDA 13 one (both are the ``cupy`` package)."""
    extras = _extras()["optional-dependencies"]
    assert not [d for d in extras["test"] if d.startswith(("cupy", "nvidia-"))]
    assert any(d.startswith("cupy-cuda12x==") for d in extras["device-check"])
    assert any(d.startswith("nvidia-cuda-nvrtc-cu12==") for d in extras["device-check"])


def test_pyproject_extras():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    assert {"gpu-cu12", "gpu-cu13", "test"} <= set(extras)
    assert any(d.startswith("cupy-cuda12x") for d in extras["gpu-cu12"])
    assert all("==" in d for d in extras["test"]), "CI installs pinned versions"
    assert meta["project"]["scripts"]["gpuanon"] == "gpuanon.cli:main"


def test_package_data_installed():
    from gpuanon.datasets import load_adult

    assert len(load_adult()) == 32561
    assert sys.version_info >= (3, 10)


def test_gpu_pins_import_together():
    """cuDF 26.10 (numba-cuda 0.30) fails beside NumPy 2.5: every GPU install keeps NumPy below it."""
    import tomllib

    from packaging.specifiers import SpecifierSet

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name in ("gpu-cu12", "gpu-cu13"):
        pins = [d for d in extras[name] if d.startswith("numpy")]
        assert pins, f"{name} does not pin numpy"
        spec = SpecifierSet(pins[0][len("numpy"):])
        assert "2.3.5" in spec and "2.5.0" not in spec, pins
        assert any(d.startswith("cudf") and "==" in d for d in extras[name])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    numpy = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("numpy=")]
    assert numpy and tuple(int(x) for x in numpy[0].split("=")[1].split(".")[:2]) < (2, 5)


# ---------------------------------------------------------------- the extras install together
def _extras() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements(deps) -> list:
    from packaging.requirements import Requirement

    return [Requirement(d) for d in deps]


def _test_pins() -> dict:
    """``{name: Version}`` of the ``==`` pins of the test and device-check extras (names canonical):
    what the README's test command installs."""
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = {}
    extras = _extras()["optional-dependencies"]
    for r in _requirements(extras["test"] + extras["device-check"]):
        (spec,) = r.specifier  # one "==" each (test_pyproject_extras)
        pins[canonicalize_name(r.name)] = Version(spec.version)
    return pins


def _conflicts(sources: dict, pins: dict) -> list:
    """Each ``(source, requirement)`` whose specifier refuses the version chosen for its package."""
    from packaging.utils import canonicalize_name

    bad = []
    for source, reqs in sources.items():
        for r in reqs:
            v = pins.get(canonicalize_name(r.name))
            if v is not None and not r.specifier.contains(v, prereleases=True):
                bad.append(f"{source} requires {r.name}{r.specifier}, which refuses {r.name} {v}")
    return bad


def _cupy_stand_in(pins: dict) -> dict:
    """The CUDA 13 CuPy is released with the CUDA 12 one: the test extra's CuPy version stands for both."""
    return {**pins, "cupy-cuda13x": pins["cupy-cuda12x"]}


def test_test_pins_lie_inside_every_extra():
    """The versions CI tests (the test extra's pins) are versions the base and GPU requirements accept."""
    project = _extras()
    pins = _cupy_stand_in(_test_pins())
    assert str(pins["pandas"]).startswith("3.0."), "cuDF 26.10 needs pandas >=3.0,<3.1: CI tests that pandas"
    sources = {"dependencies": _requirements(project["dependencies"])}
    for name in ("gpu-cu12", "gpu-cu13"):
        sources[name] = _requirements(project["optional-dependencies"][name])
    assert not _conflicts(sources, pins)
    for name in ("gpu-cu12", "gpu-cu13"):
        cupy = [r for r in sources[name] if r.name.startswith("cupy-cuda")]
        assert cupy and "ctk" in cupy[0].extras, f"{name}: CuPy without [ctk] compiles no kernel without a CUDA toolkit"
        assert not cupy[0].specifier.contains("13.6.0"), f"{name}: CuPy 13 lacks xp.repeat with device repeats"


_WHEEL_ENV = {"python_version": "3.11", "python_full_version": "3.11.0", "sys_platform": "linux",
              "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
# Small wheels whose requirements are read (the RAPIDS packages and the one that pins Dask for them);
# libcudf, libcuml, CuPy and PyTorch are hundreds of MB each and are not downloaded.
_READ = ("cudf-{cu}", "cuml-{cu}", "dask-cuda", "rapids-dask-dependency")


def _download_no_deps(specs, dest: Path) -> None:
    """``pip download --no-deps`` of exact wheels for Linux x86_64 / CPython 3.11, whatever this machine is."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
           "--disable-pip-version-check", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
           "--implementation", "cp", "--abi", "cp311", "--timeout", "30", "--retries", "2", "-d", str(dest), *specs]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"pip download took over 240 s (is PyPI reachable?): {' '.join(specs)}") from None
    assert r.returncode == 0, (f"pip download of {' '.join(specs)} failed (this test needs PyPI):\n"
                               + "\n".join(r.stderr.strip().splitlines()[-5:]))


def _wheel_requirements(whl: Path) -> tuple[str, str, list]:
    """Name, version and the requirements that apply to a plain install on Linux x86_64, from METADATA."""
    import zipfile
    from email.parser import Parser

    from packaging.requirements import Requirement

    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        msg = Parser().parsestr(z.read(meta).decode())
    reqs = [Requirement(d) for d in msg.get_all("Requires-Dist") or []]
    return msg["Name"], msg["Version"], [r for r in reqs if r.marker is None or r.marker.evaluate(_WHEEL_ENV)]


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("extra", ["gpu-cu12", "gpu-cu13"])
def test_gpu_extra_resolves_with_test_extra(extra, tmp_path):
    """``.[test,<extra>]`` against the RAPIDS wheels' own metadata (issue 20 F5: the test extra pinned
    pandas 2.3 and Dask 2025.9 while cuDF needs pandas 3.0 and rapids-dask-dependency Dask 2026.7).

    The RAPIDS wheels are fetched with ``--no-deps`` (about 10 MB a CUDA version, no GPU needed); every
    requirement they and our extras state is checked against the version the test extra pins (or the
    RAPIDS wheel's own version). It cannot catch a conflict through a wheel it does not read:
    CuPy's, PyTorch's and the RAPIDS C++ libraries' requirements (PyPI's PyTorch for Linux needs the
    CUDA 13 toolkit, cuML's CUDA 12 build the CUDA 12 one: see the README's GPU install line).
    """
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    project = _extras()
    cu = extra.split("-")[1]
    ours = _requirements(project["dependencies"]) + _requirements(project["optional-dependencies"][extra])
    wanted = {canonicalize_name(p.format(cu=cu)) for p in _READ}
    specs = [str(r) for r in ours if canonicalize_name(r.name) in wanted]
    sources = {f"gpuanon[{extra}]": ours, "gpuanon[test]": _requirements(project["optional-dependencies"]["test"])}
    chosen = _cupy_stand_in(_test_pins())
    seen: set = set()
    while specs:  # the RAPIDS wheels, then the ones among _READ that they require
        dest = tmp_path / str(len(seen))
        _download_no_deps(specs, dest)
        specs = []
        for whl in sorted(dest.glob("*.whl")):
            name, version, reqs = _wheel_requirements(whl)
            seen.add(canonicalize_name(name))
            chosen.setdefault(canonicalize_name(name), Version(version))
            sources[f"{name} {version}"] = reqs
            specs += [str(r) for r in reqs if canonicalize_name(r.name) in wanted - seen]
    assert wanted <= seen, f"not read: {sorted(wanted - seen)}"
    assert {"cudf-" + cu, "rapids-dask-dependency"} <= seen
    problems = _conflicts(sources, chosen)
    assert not problems, f".[test,{extra}] cannot install together:\n" + "\n".join(problems)


def test_environment_yml_matches_the_pinned_versions():
    """The conda environment runs the pandas, NumPy, PyArrow and Dask CI tests, and a CuPy the GPU extras accept."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(d.split("=", 1) for d in env["dependencies"] if isinstance(d, str) and "=" in d)
    pins = _test_pins()
    for name in ("pandas", "numpy", "pyarrow", "dask", "distributed", "scipy"):
        assert str(pins[name]).startswith(conda[name] + "."), f"environment.yml {name}={conda[name]}, test extra {pins[name]}"
    cupy = [Requirement(d) for d in _extras()["optional-dependencies"]["gpu-cu12"] if d.startswith("cupy")][0]
    assert cupy.specifier.contains(Version(conda["cupy"] + ".0")), f"environment.yml cupy={conda['cupy']}, {cupy}"
