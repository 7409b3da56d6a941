"""The set-up files: README commands, .ci/run, environment.yml (parsed and linted)."""

import re
import subprocess
import sys
from pathlib import Path

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


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci
    cmd = subprocess.run(
        ["awk", r"/<!-- test-command -->/{f=1; next} f && /^```/{if (n++) exit; next} f {print}", "README.md"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert cmd == _block_after("<!-- test-command -->")
    assert "pytest" in cmd and '".[test]"' in cmd


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
