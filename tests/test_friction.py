"""Friction a new user hit (issue 21, rows 14 and 15, and start-up time): each through the command line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from expected import ROOT, run_cli


def _one_error_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("gpuanon: error:")]
    assert len(err) == 1, r.stderr
    return err[0]


@pytest.fixture()
def table(tmp_path):
    """60 rows: a numeric and a categorical QI, a binary sensitive column."""
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.choice(list("abcdef"), n),
                       "sick": rng.choice(["yes", "no"], n)})
    p = tmp_path / "in.csv"
    df.to_csv(p, index=False)
    return p


# ---------------------------------------------------------------------------- start-up
HEAVY = ("pandas", "numpy", "sklearn", "scipy", "pyarrow", "cupy", "torch", "matplotlib")


def test_cli_entry_and_package_import_no_heavy_library():
    """`gpuanon --version` / `--help` import only argparse-level modules; `import gpuanon` stays cheap
    while `from gpuanon import Mondrian` still works. (Module sets, not seconds: a loaded machine makes
    timings flaky; the seconds are in the change's description.)"""
    code = ("import sys, gpuanon.cli as c\n"
            "try:\n    c.main(['--version'])\nexcept SystemExit:\n    pass\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
            "from gpuanon import Mondrian, check, evaluate, datasets\n"
            "import gpuanon\n"
            "print(gpuanon.Mondrian(k=5).k, callable(gpuanon.evaluate), gpuanon.check is check)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-2] == "[]", lines
    assert lines[-1] == "5 True True"
