"""The commands on a real Dask cluster that fails: ``gpuanon anonymize`` with a worker whose memory
limit is below its shard (its nanny kills it, the shard kills the next worker too: one line naming
the shard, exit status 4, nothing written, within a time limit), and ``gpuanon perturb --cluster``
(DISTPAB's entities) with a worker SIGKILLed in each phase (the same output bytes and report), the
scheduler lost and an entity lost with two workers (one line, exit status 4, nothing written)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")

import gpuanon.perturb  # noqa: E402
from dask_procs import Cluster, Killer, note  # noqa: E402
from gpuanon.cli import main  # noqa: E402
from gpuanon.distributed import tasks as dt  # noqa: E402
from gpuanon.cluster.runner import Runner  # noqa: E402

pytestmark = pytest.mark.slow  # Dask processes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def big_shard(tmp_path_factory):
    """Five small shards and one of 1.5 M x 28 float32 (168 MB in memory, more while it is read):
    over a 300 MB worker's limit beside the worker's own ~150 MB."""
    from gpuanon.datasets import make_hepmass

    src = tmp_path_factory.mktemp("big") / "data"
    src.mkdir()
    df = make_hepmass(1_520_000, random_state=5)
    for i in range(5):
        df.iloc[i * 4000:(i + 1) * 4000].to_parquet(src / f"part-{i}.parquet", index=False)
    df.iloc[20_000:].to_parquet(src / "part-5.parquet", index=False)
    return src, ",".join(c for c in df.columns if c != "label")


def _anonymize_on(cl, src, qi, out, timeout):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "gpuanon", "anonymize", str(src), "--qi", qi, "--k", "10",
                        "--format", "minmax", "--cluster", cl.addr, "--cluster-timeout", str(timeout),
                        "--out", str(out / "out"), "--report", str(out / "r.json")],
                       capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT)))
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert r.returncode == 4, r.stderr
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert os.listdir(out) == []  # nothing written, no temporary folder left
    return errors[0], time.monotonic() - t0


def test_a_shard_over_the_workers_memory_limit_is_one_line(big_shard, tmp_path):
    """Three workers with a nanny and a 300 MB limit: the nanny kills the worker holding the big shard,
    the shard is rebuilt on the worker it started again, which is killed too."""
    cl = Cluster(3, memory_limit="300MB", client=False)
    try:
        line, secs = _anonymize_on(cl, *big_shard, tmp_path, 20)
    finally:
        cl.close()
    note("anonymize, 5 small shards and one of 1.5M x 28", "3 workers with a 300 MB --memory-limit: the nanny "
         "ends the big shard's worker", "ClusterLost naming shard 5 and the fix, exit 4, nothing written "
         "(command's wall seconds)", secs)
    assert "shard 5 (part-5.parquet, 1500000 rows" in line and "was on 2 workers that were lost" in line
    assert "more workers, smaller shards" in line and "--memory-limit" in line
    assert secs < 120, secs


def test_a_worker_paused_over_its_memory_limit_is_one_line(big_shard, tmp_path):
    """The same workers told not to end a worker over its limit (terminate = False): the one holding
    the big shard pauses and never runs a task again; the run stops after --cluster-timeout."""
    cl = Cluster(3, memory_limit="300MB", client=False, env={"DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE": "False"})
    try:
        line, secs = _anonymize_on(cl, *big_shard, tmp_path, 10)
    finally:
        cl.close()
    note("anonymize, 5 small shards and one of 1.5M x 28", "the same with terminate = false: the worker pauses",
         "ClusterLost 'worker ... has been paused for 10 s', exit 4, nothing written (command's wall seconds, "
         "--cluster-timeout 10)", secs)
    assert "has been paused for" in line and "during loading the shards" in line and "--memory-limit" in line
    assert secs < 90, secs


@pytest.fixture(scope="module")
def cluster():
    cl = Cluster(3)
    yield cl
    cl.close()


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(1)
    p = tmp_path_factory.mktemp("perturb") / "t.csv"
    df = pd.DataFrame(rng.normal(size=(20_000, 5)), columns=list("abcde")).assign(y=rng.integers(0, 3, 20_000))
    df.to_csv(p, index=False)
    return p


def _perturb(table, out, *extra, kill=None, monkeypatch=None):
    """``gpuanon perturb`` in this process (its exit status), the hook given to its run."""
    if kill is not None:
        real, init = gpuanon.perturb.perturb_distributed, Runner.__init__

        def runner(self, *a, **k):
            init(self, *a, **k)
            kill.run = self

        monkeypatch.setattr(gpuanon.perturb, "perturb_distributed", lambda *a, **k: real(*a, on_stage=kill, **k))
        monkeypatch.setattr(Runner, "__init__", runner)
        monkeypatch.setattr(Runner, "POLL_SECONDS", 0.5)
    return main(["perturb", str(table), "--label", "y", "--entities", "4", "--seed", "3", "--out", str(out / "p.csv"),
                 "--report", str(out / "r.json"), *extra])


def _report(out) -> dict:
    rep = json.loads((out / "r.json").read_text())
    for key in ("seconds", "recovered", "cluster", "output"):
        rep.pop(key, None)
    return rep


@pytest.mark.parametrize("stage", ["the entities' statistics", "perturbing the entities"])
def test_perturb_command_survives_a_lost_worker(cluster, table, tmp_path, monkeypatch, capsys, stage):
    """The same output bytes and report as the run without the fault, and as a run without --cluster
    (a local cluster of threads)."""
    base, threads, got = tmp_path / "base", tmp_path / "threads", tmp_path / "got"
    for d in (base, threads, got):
        d.mkdir()
    assert _perturb(table, threads) == 0
    t0 = time.perf_counter()
    assert _perturb(table, base, "--cluster", cluster.addr) == 0
    t1 = time.perf_counter()
    kill = Killer(cluster, stage, slot=0)
    try:
        assert _perturb(table, got, "--cluster", cluster.addr, "--cluster-timeout", "20", kill=kill,
                        monkeypatch=monkeypatch) == 0
        note("perturb 20k x 5, 4 entities", f"worker SIGKILL at '{stage}'", "recovered, same bytes and report",
             (time.perf_counter() - t1) - (t1 - t0))
    finally:
        cluster.top_up()
    assert kill.killed
    assert "lost during " + stage in capsys.readouterr().err
    assert (got / "p.csv").read_bytes() == (base / "p.csv").read_bytes() == (threads / "p.csv").read_bytes()
    assert _report(got) == _report(base) == {**_report(threads), "n_workers": 3}
    rec = json.loads((got / "r.json").read_text())["cluster"]["recovered"]
    assert rec[0]["entities"] == [0, 3] and rec[0]["stage"] == stage


def test_perturb_command_entity_lost_twice_is_one_line(cluster, table, tmp_path, monkeypatch, capsys):
    """The worker holding entities 0 and 3 killed in phase 1, and their next worker in phase 2."""
    first, second = (Killer(cluster, stage, slot=0) for stage in ("the entities' statistics", "perturbing"))

    class Both(Killer):
        def __call__(self, name):
            first.run = second.run = self.run
            first(name)
            second(name)

    both = Both(cluster, "")
    try:
        rc = _perturb(table, tmp_path, "--cluster", cluster.addr, "--cluster-timeout", "20", kill=both,
                      monkeypatch=monkeypatch)
    finally:
        cluster.top_up()
    err = capsys.readouterr().err
    assert rc == 4, err
    line = [x for x in err.splitlines() if "error" in x]
    assert len(line) == 1 and "entity 0 was on 2 workers that were lost, the last during perturbing" in line[0]
    assert "--memory-limit" in line[0] and first.killed and second.killed
    assert os.listdir(tmp_path) == []


def test_perturb_command_lost_scheduler_is_one_line(table, tmp_path, monkeypatch, capsys):
    cl = Cluster(2)
    try:
        kill = Killer(cl, "the entities' statistics", what="scheduler")
        t0 = time.monotonic()
        rc = _perturb(table, tmp_path, "--cluster", cl.addr, "--cluster-timeout", "5", kill=kill,
                      monkeypatch=monkeypatch)
        secs = time.monotonic() - kill.at
    finally:
        cl.close()
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "the Dask scheduler was lost during the entities' statistics" in err and "Traceback" not in err
    assert os.listdir(tmp_path) == [] and secs < 5 + 15 and time.monotonic() - t0 < 120
