"""A pytest plugin for bench/gpu_check.py: one JSON line per finished test, written and flushed when
the test ends (``-p _pytest_live``, the file named by ``GPU_CHECK_LIVE``), so a run killed by its time
limit still leaves every result it had; pytest's own JUnit XML is written only when the session ends."""

from __future__ import annotations

import json
import os


def pytest_runtest_logreport(report) -> None:
    path = os.environ.get("GPU_CHECK_LIVE")
    if not path:
        return
    if not (report.when == "call" or report.failed or (report.when == "setup" and report.skipped)):
        return
    rec = {"part": os.environ.get("GPU_CHECK_PART"), "test": report.nodeid, "when": report.when,
           "outcome": report.outcome, "seconds": round(report.duration, 3)}
    if report.failed:
        rec["message"] = str(report.longrepr)[-1500:]
    elif report.skipped and isinstance(report.longrepr, tuple):
        rec["reason"] = str(report.longrepr[2])[:300]
    with open(path, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
