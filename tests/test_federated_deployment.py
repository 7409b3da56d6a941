"""Flower's deployment runtime on loopback: a SuperLink and one SuperNode per silo as separate processes,
started and stopped by the test, bounded in time; what crossed is asserted on."""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("flwr")

from gpuanon.federated import protocol as P  # noqa: E402
from gpuanon.federated.deployment import run_deployment  # noqa: E402
from gpuanon.federated.run import make_config  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("flower-superlink") is None and not os.path.exists(
    os.path.join(os.path.dirname(sys.executable), "flower-superlink")), reason="Flower's CLI is not installed")
def test_deployment_runtime_on_loopback(tmp_path):
    cfg = make_config("adult", rows=900, silos=3, rounds=1, local_epochs=1, protection="k=3", model="lr", seed=1)
    doc = run_deployment(cfg, timeout=240, keep_dir=str(tmp_path / "run"))
    rt = doc["runtime"]
    assert rt["name"] == "deployment"
    assert [p["command"] for p in rt["processes"]] == ["flower-superlink"] + ["flower-supernode"] * 3
    assert not any(_alive(p["pid"]) for p in rt["processes"])                 # all stopped
    assert len(doc["rounds"]) == 1 and 0.0 <= doc["final"]["accuracy"] <= 1.0
    assert [s["silo"] for s in doc["silos"]] == [0, 1, 2]
    # each SuperNode read only its own file (its node configuration), and says so through its counts
    assert sum(s["rows_in"] for s in doc["silos"]) == round(900 * 0.7)
    # what crossed, as the ServerApp received it: only the protocol's records; weights, counts, statistics
    kinds = {w["type"] for w in doc["wire"]}
    assert kinds == {"query.prepare", "query.encode", "train"}
    n_rows = {s["rows_in"] for s in doc["silos"]} | {s["rows"] for s in doc["silos"]}
    for w in doc["wire"]:
        allowed = P.OUTBOUND[w["type"]]
        for name, rec in w["records"].items():
            assert name in allowed and rec["kind"] == allowed[name][0]
            if allowed[name][1] is not None:
                assert set(rec["keys"]) <= allowed[name][1]
            for shape in rec.get("shapes", []):
                assert not (set(shape) & n_rows), (w["type"], name, shape)     # no row-long array
            assert all("float" in d for d in rec.get("dtypes", []))
        if w["type"] == "train":
            assert sum(int(np.prod(s)) for s in w["records"]["arrays"]["shapes"]) == doc["n_parameters"]
