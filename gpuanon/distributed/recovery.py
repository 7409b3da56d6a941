"""A cluster run that loses a worker goes on: its shards are rebuilt elsewhere and the stage redone.

A shard is ``(source, row range)``; its state is a pure function of its rows and of the changes
the coordinator recorded in :attr:`.context.Cluster.journal` (the encoding with the whole table's
dictionaries, the blocks' first partitions, each level's cuts). When a worker leaves (SIGKILL,
its nanny killing it over its memory limit, its machine gone), :meth:`gpuanon.cluster.runner.Runner.gather`
raises :class:`~gpuanon.cluster.runner.WorkerLost`; :func:`unit` then

1. gives the lost worker's *slots* to the workers that remain (the fewest slots first), so the
   number of slots -- and every decision of the run -- stays what it was;
2. reads each lost shard again from its source (its Parquet file, or the frame this process holds)
   on its new worker and replays the recorded changes there (:func:`.tasks.rebuild_shard`): no
   level's statistics, medians nor cuts are computed again;
3. forgets the changes the stage recorded and redoes the stage from the values it was given (a
   stage returns what it makes, :mod:`.values`, and changes nothing else). A recorded change is
   applied once per shard (:func:`.tasks.step`), so a stage may be redone on the shards that
   survived. The homes (whole partitions, made from the shards) are made again by the home stage.

It stops with :class:`~gpuanon.errors.ClusterLost` (one line, exit status 4, nothing written) when
no worker is left after ``timeout`` seconds, when the scheduler is lost, when a shard's source is
gone, and when one shard was on two workers that were lost (a shard too large for a worker's
memory kills every worker it is given). Each recovery is logged and listed in the report's
``cluster`` section (``recovery``).
"""

from __future__ import annotations

import logging
import os
import time

import pandas as pd

from ..errors import ClusterLost
from . import tasks
from ..cluster.runner import WorkerLost, move_slots, workers_left

log = logging.getLogger("gpuanon")

__all__ = ["unit", "mutate_shards", "place_shard", "recover"]


def place_shard(cluster, i: int, journal=None):
    """Shard ``i`` of ``cluster`` (:class:`.context.Cluster`) made on its slot's worker from its source
    (read there, or a frame sent from here); with ``journal`` its recorded changes replayed."""
    run, src = cluster.runner, cluster.sources[i]
    slot = cluster.slot_of_shard(i)
    if isinstance(src, pd.DataFrame):
        try:
            src = cluster.handle.client.scatter(src, workers=[run.workers[slot]], broadcast=False, hash=False)
        except Exception as exc:  # the worker or the scheduler went away meanwhile
            run.classify(exc)
    elif journal is not None and not os.path.exists(src):
        raise ClusterLost(f"shard {i}'s source '{src}' is gone (its worker was lost during {run.stage}); nothing "
                          f"was written. Restore the file and run again")
    offset, backend = int(cluster.offsets[i]), cluster.options.backend
    if journal is None:
        return run.submit(slot, tasks.new_shard, i, offset, src, backend, None)
    return run.submit(slot, tasks.rebuild_shard, i, offset, src, backend, None, list(journal))


def mutate_shards(cluster, fn, *args) -> None:
    """Record a change of every shard (``fn``: a shard method's name or a function of
    :mod:`.tasks`) and apply it on every shard, once; a worker lost meanwhile is recovered from
    (its shards rebuilt with this change) and the change applied where it is missing."""
    run = cluster.runner
    cluster.journal.append((fn, args))
    k = len(cluster.journal)
    while True:
        try:
            run.gather([run.submit(cluster.slot_of_shard(i), tasks.step, s, cluster.serials[i], k, fn, *args)
                        for i, s in enumerate(cluster.shards)])
            return
        except WorkerLost as exc:
            recover(cluster, exc, f"{run.stage} (a recorded change)")


def unit(cluster, name: str, fn, *args):
    """``fn(cluster, *args)``, a stage: it reads its arguments (values) and returns what it makes. When
    a worker is lost: the changes the stage recorded forgotten, :func:`recover`, ``fn`` again on the
    same arguments."""
    while True:
        recorded = len(cluster.journal)
        try:
            return fn(cluster, *args)
        except WorkerLost as exc:
            del cluster.journal[recorded:]
            recover(cluster, exc, name)


def recover(cluster, exc: WorkerLost, redo: str) -> None:
    """Move the lost workers' slots and rebuild their shards (again when another worker is lost
    meanwhile)."""
    while True:
        try:
            _recover_once(cluster, exc, redo)
            return
        except WorkerLost as again:
            exc = again


def _recover_once(cluster, exc: WorkerLost, redo: str) -> None:
    run, t0 = cluster.runner, time.perf_counter()
    stage = run.stage
    alive = workers_left(run, exc.lost, stage)
    # no worker left the cluster but data is gone (a worker restarted at its address): the shards not held
    status = [getattr(s, "status", "finished") if not exc.lost else "finished" for s in cluster.shards]
    lost_slots = sorted({d for d, w in enumerate(run.workers) if w not in alive}
                        | {cluster.slot_of_shard(i) for i, st in enumerate(status) if st != "finished"})
    moved = move_slots(run, alive, lost_slots)
    rebuilt = [i for i in range(len(cluster.shards)) if cluster.slot_of_shard(i) in moved]
    for i in rebuilt:  # a loop over lost shards
        cluster.losses[i] = cluster.losses.get(i, 0) + 1
    twice = sorted((i for i in rebuilt if cluster.losses[i] >= 2), key=lambda i: (-int(cluster.counts[i]), i))
    if twice:  # the largest first: the one most likely to have run its workers out of memory
        i, also = twice[0], ", ".join(map(str, twice[1:]))
        raise ClusterLost(f"shard {i} ({_source_name(cluster, i)}, {int(cluster.counts[i])} rows"
                          f"{'; with it on the same workers: shard ' + also if also else ''}) was on "
                          f"{cluster.losses[i]} workers that were lost, the last during {stage}; nothing was "
                          f"written. If they ran out of memory: use more workers, smaller shards (more Parquet "
                          f"files) or a higher memory limit (dask worker --memory-limit)")
    if len(cluster.serials) != len(cluster.shards):  # lost while the shards were being made
        cluster.serials = [None] * len(cluster.shards)
    for i in rebuilt:
        cluster.shards[i] = place_shard(cluster, i, cluster.journal)
    if rebuilt:
        serials = run.gather([run.submit(cluster.slot_of_shard(i), tasks.serial_of, cluster.shards[i])
                              for i in rebuilt])
        for i, s in zip(rebuilt, serials):
            cluster.serials[i] = s
    secs = time.perf_counter() - t0
    gone = sorted({old for old, _ in moved.values()} | set(exc.lost))
    entry = {"workers_lost": gone, "stage": stage, "slots_moved": {int(d): new for d, (_, new) in moved.items()},
             "shards_rebuilt": rebuilt, "changes_replayed": len(cluster.journal), "redone": redo,
             "seconds": round(secs, 6)}
    cluster.recoveries.append(entry)
    log.warning("dask: worker %s lost during %s; shard(s) %s read again from their source on %s and %d recorded "
                "change(s) replayed (%.2f s); redoing %s", ", ".join(gone) or "(restarted)", stage,
                ", ".join(map(str, rebuilt)) or "none", ", ".join(sorted({n for _, n in moved.values()})) or "-",
                len(cluster.journal), secs, redo)


def _source_name(cluster, i: int) -> str:
    src = cluster.sources[i]
    return f"rows {int(cluster.offsets[i])}..{int(cluster.offsets[i]) + int(cluster.counts[i]) - 1}" if isinstance(
        src, pd.DataFrame) else os.path.basename(str(src))
