"""Shared by the benchmark scripts: one configuration per fresh interpreter, and JSON output."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_MARK = "BENCH_RESULT "


def report_result(res: dict) -> None:
    """Child side: print the result on a marked stdout line for :func:`spawn`."""
    sys.stdout.write(RESULT_MARK + json.dumps(res) + "\n")
    sys.stdout.flush()


def spawn(script: str, cfg: dict, timeout: float, stderr_tail: int | None = None) -> dict:
    """Run ``script --one <cfg>`` in a fresh interpreter (so its peak memory is its own).

    The child's stderr passes through to ours (the last ``stderr_tail`` characters when given);
    the result is read from its marked stdout line, or an ``error`` says why there is none.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, os.path.abspath(script), "--one", json.dumps(cfg)]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**cfg, "error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t
    if p.stderr:
        sys.stderr.write(p.stderr if stderr_tail is None else p.stderr[-stderr_tail:])
        sys.stderr.flush()
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            res = json.loads(line[len(RESULT_MARK):])
            res["subprocess_wall_seconds"] = round(wall, 3)
            return res
    why = f"exit status {p.returncode}" + (" (killed: out of memory?)" if p.returncode in (-9, 137) else "")
    last = [ln for ln in (p.stderr or "").splitlines() if ln.strip()]
    return {**cfg, "error": f"no result from the subprocess: {why}" + (f": {last[-1].strip()}" if last else ""),
            "stdout_tail": p.stdout[-2000:]}


def emit(doc: dict, out: str | None = None) -> None:
    """Print the JSON document, and write it to ``out`` when given."""
    text = json.dumps(doc, indent=2)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


def cpu_model() -> str:
    """The CPU's model name (Linux), else what platform says."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""
