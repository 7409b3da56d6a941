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


def chromium_screenshot(html_path, shot, workdir, size="1200,2400"):
    """Render a local HTML file in headless Chromium (no network) to ``shot``; returns the process."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={workdir / 'profile'}", f"--screenshot={shot}", f"--window-size={size}",
           html_path.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, HOME=str(workdir)))

# SPEC section 5: bundled Adult, education, target income, rho = 10
SIX_GROUPS = {
    frozenset({"HS-grad", "Some-college"}),
    frozenset({"Assoc-acdm", "Assoc-voc"}),
    frozenset({"Prof-school", "Doctorate"}),
    frozenset({"Bachelors"}),
    frozenset({"Masters"}),
    frozenset({"Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"}),
}
