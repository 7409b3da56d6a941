"""Known answers and helpers shared by several test modules."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHROMIUM = "/usr/bin/chromium"


def run_cli(*args, cwd, timeout=600):
    """``python -m gpuanon ARGS`` from this checkout on the CPU backend."""
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuanon", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=cwd)


def with_missing(df, seed: int = 5):
    """A copy of an Adult frame with missing values in two numeric QIs (age, hours-per-week) and a
    categorical one (education)."""
    import numpy as np

    df = df.copy()
    rng = np.random.default_rng(seed)
    df["age"] = df["age"].astype("float64")
    df.loc[rng.random(len(df)) < 0.04, "age"] = np.nan
    df.loc[rng.random(len(df)) < 0.03, "hours-per-week"] = np.nan
    df.loc[rng.random(len(df)) < 0.02, "education"] = None
    return df


def one_error_line(r) -> str:
    """The one ``gpuanon: error:`` line of a command that exited 2 without a traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("gpuanon: error:")]
    assert len(err) == 1, r.stderr
    return err[0]


def chromium_screenshot(html_path, shot, workdir, size="1200,2400"):
    """Render a local HTML file in headless Chromium (no network) to ``shot``; returns the process."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={workdir / 'profile'}", f"--screenshot={shot}", f"--window-size={size}",
           html_path.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, HOME=str(workdir)))


def layout_problems(package: str, max_lines: int = 500) -> list:
    """The house rules for a package's modules: none above ``max_lines`` lines, none importing another
    gpuanon module's private (``_name``) names. Returns one line per breach (``[]`` when it keeps them)."""
    import ast  # noqa: PLC0415

    out = []
    for path in sorted((ROOT / package.replace(".", "/")).glob("*.py")):
        text = path.read_text()
        if text.count("\n") > max_lines:
            out.append(f"{path.name}: {text.count(chr(10))} lines")
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith(("gpuanon", "kernels"))):
                out += [f"{path.name}:{n.lineno} imports the private {a.name}" for a in n.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out

# SPEC section 5: bundled Adult, education, target income, rho = 10
SIX_GROUPS = {
    frozenset({"HS-grad", "Some-college"}),
    frozenset({"Assoc-acdm", "Assoc-voc"}),
    frozenset({"Prof-school", "Doctorate"}),
    frozenset({"Bachelors"}),
    frozenset({"Masters"}),
    frozenset({"Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"}),
}


def flat(v, prefix=""):
    """A metric as {path: number or None} (dicts and lists flattened), for comparisons with ``pytest.approx``."""
    if isinstance(v, dict):
        return {k: x for key, y in v.items() for k, x in flat(y, f"{prefix}/{key}").items()}
    if isinstance(v, (list, tuple)):
        return {f"{prefix}[{i}]": x for i, x in enumerate(v)}
    return {prefix: v}
