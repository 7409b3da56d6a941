"""A cluster run that loses a worker goes on: its shards are rebuilt elsewhere and the stage redone.

A shard is ``(source, row range)``; its state is a pure function of its rows and of the changes
the coordinator recorded in :attr:`ClusterRun.journal` (the encoding with the whole table's
dictionaries, the blocks' first partitions, each level's cuts). When a worker leaves (SIGKILL,
its nanny killing it over its memory limit, its machine gone), :meth:`.tasks.Runner.gather`
raises :class:`~.tasks.WorkerLost`; :func:`unit` then

1. gives the lost worker's *slots* to the workers that remain (the fewest slots first), so the
   number of slots -- and every decision of the run -- stays what it was;
2. reads each lost shard again from its source (its Parquet file, or the frame this process holds)
   on its new worker and replays the recorded changes there (:func:`.tasks.rebuild_shard`): no
   level's statistics, medians nor cuts are computed again;
3. restores the coordinator's state of the stage's start and redoes the stage. A recorded change
   is applied once per shard (:func:`.tasks.step`), so a stage may be redone on the shards that
   survived. The homes (whole partitions, made from the shards) are made again by the home stage.

It stops with :class:`~gpuanon.errors.ClusterLost` (one line, exit status 4, nothing written) when
no worker is left after ``timeout`` seconds, when the scheduler is lost, when a shard's source is
gone, and when one shard was on two workers that were lost (a shard too large for a worker's
memory kills every worker it is given). Each recovery is logged and listed in the report's
``cluster`` section (``recovery``).
"""

from __future__ import annotations

import copy
import logging
import os
import time

import pandas as pd

from ..errors import ClusterLost
from . import tasks
from .tasks import WorkerLost

log = logging.getLogger("gpuanon")

__all__ = ["unit", "mutate_shards", "place_shard", "recover", "move_slots", "workers_left"]


def place_shard(c, i: int, journal=None):
    """Shard ``i`` made on its slot's worker from its source (read there, or a frame sent from here);
    with ``journal`` its recorded changes replayed."""
    run, src = c.run, c.sources[i]
    slot = c.home_of_shard(i)
    if isinstance(src, pd.DataFrame):
        try:
            src = c.handle.client.scatter(src, workers=[run.workers[slot]], broadcast=False, hash=False)
        except Exception as exc:  # the worker or the scheduler went away meanwhile
            run.classify(exc)
    elif journal is not None and not os.path.exists(src):
        raise ClusterLost(f"shard {i}'s source '{src}' is gone (its worker was lost during {run.stage}); nothing "
                          f"was written. Restore the file and run again")
    if journal is None:
        return run.submit(slot, tasks.new_shard, i, int(c.offsets[i]), src, c.est.backend, None)
    return run.submit(slot, tasks.rebuild_shard, i, int(c.offsets[i]), src, c.est.backend, None, list(journal))


def mutate_shards(c, fn, *args) -> None:
    """Record a change of every shard (``fn``: a shard method's name or a function of
    :mod:`.tasks`) and apply it on every shard, once; a worker lost meanwhile is recovered from
    (its shards rebuilt with this change) and the change applied where it is missing."""
    c.journal.append((fn, args))
    k = len(c.journal)
    while True:
        try:
            c.run.gather([c.run.submit(c.home_of_shard(i), tasks.step, s, c.ss[i], k, fn, *args)
                          for i, s in enumerate(c.shards)])
            return
        except WorkerLost as exc:
            recover(c, exc, f"{c.run.stage} (a recorded change)")


def unit(c, name: str, fn, *args):
    """``fn(c, *args)``; when a worker is lost: :func:`recover`, the coordinator's state of the
    start restored, ``fn`` again."""
    while True:
        snap = _snapshot(c)
        try:
            return fn(c, *args)
        except WorkerLost as exc:
            _restore(c, snap)
            recover(c, exc, name)


def _snapshot(c) -> dict:
    return {"journal": len(c.journal), "levels": copy.deepcopy(c.levels), "n_groups": c.n_groups,
            "group_sizes": len(c.group_sizes), "group_final": len(c.group_final),
            "hierarchies": None if c.enc is None else dict(c.enc.hierarchies or {})}


def _restore(c, snap: dict) -> None:
    del c.journal[snap["journal"]:]
    c.levels = copy.deepcopy(snap["levels"])
    c.n_groups = snap["n_groups"]
    del c.group_sizes[snap["group_sizes"]:]
    del c.group_final[snap["group_final"]:]
    if c.enc is not None and snap["hierarchies"] is not None:
        c.enc.hierarchies = snap["hierarchies"]
    c.homes, c.hs = [], []  # the homes are made again by the home stage


def recover(c, exc: WorkerLost, redo: str) -> None:
    """Move the lost workers' slots and rebuild their shards (again when another worker is lost
    meanwhile)."""
    while True:
        try:
            _recover_once(c, exc, redo)
            return
        except WorkerLost as again:
            exc = again


def _recover_once(c, exc: WorkerLost, redo: str) -> None:
    run, t0 = c.run, time.perf_counter()
    stage = run.stage
    alive = workers_left(run, exc.lost, stage)
    # no worker left the cluster but data is gone (a worker restarted at its address): the shards not held
    status = [getattr(s, "status", "finished") if not exc.lost else "finished" for s in c.shards]
    lost_slots = sorted({d for d, w in enumerate(run.workers) if w not in alive}
                        | {c.home_of_shard(i) for i, st in enumerate(status) if st != "finished"})
    moved = move_slots(run, alive, lost_slots)
    rebuilt = [i for i in range(len(c.shards)) if c.home_of_shard(i) in moved]
    for i in rebuilt:  # a loop over lost shards
        c.losses[i] = c.losses.get(i, 0) + 1
    twice = sorted((i for i in rebuilt if c.losses[i] >= 2), key=lambda i: (-int(c.counts[i]), i))
    if twice:  # the largest first: the one most likely to have run its workers out of memory
        i, also = twice[0], ", ".join(map(str, twice[1:]))
        raise ClusterLost(f"shard {i} ({_source_name(c, i)}, {int(c.counts[i])} rows"
                          f"{'; with it on the same workers: shard ' + also if also else ''}) was on "
                          f"{c.losses[i]} workers that were lost, the last during {stage}; nothing was written. If "
                          f"they ran out of memory: use more workers, smaller shards (more Parquet files) or a "
                          f"higher memory limit (dask worker --memory-limit)")
    if len(c.ss) != len(c.shards):  # lost while the shards were being made
        c.ss = [None] * len(c.shards)
    for i in rebuilt:
        c.shards[i] = place_shard(c, i, c.journal)
    if rebuilt:
        serials = run.gather([run.submit(c.home_of_shard(i), tasks.serial_of, c.shards[i]) for i in rebuilt])
        for i, s in zip(rebuilt, serials):
            c.ss[i] = s
    secs = time.perf_counter() - t0
    gone = sorted({old for old, _ in moved.values()} | set(exc.lost))
    entry = {"workers_lost": gone, "stage": stage, "slots_moved": {int(d): new for d, (_, new) in moved.items()},
             "shards_rebuilt": rebuilt, "changes_replayed": len(c.journal), "redone": redo,
             "seconds": round(secs, 6)}
    c.info.setdefault("recovery", []).append(entry)
    log.warning("dask: worker %s lost during %s; shard(s) %s read again from their source on %s and %d recorded "
                "change(s) replayed (%.2f s); redoing %s", ", ".join(gone) or "(restarted)", stage,
                ", ".join(map(str, rebuilt)) or "none", ", ".join(sorted({n for _, n in moved.values()})) or "-",
                len(c.journal), secs, redo)


def move_slots(run, alive, slots) -> dict:
    """Give each of ``slots`` to the worker of ``alive`` with the fewest slots: ``{slot: (old, new)}``."""
    moved = {}
    for d in slots:  # a loop over lost slots
        load = {w: sum(1 for x in run.workers if x == w) for w in alive}
        new = min(alive, key=lambda w: (load[w], w))
        moved[d] = (run.workers[d], new)
        run.workers[d] = new
    return moved


def workers_left(run, lost, stage: str) -> list[str]:
    """The workers that remain (waiting up to ``run.timeout`` seconds for one to join)."""
    t0 = time.monotonic()
    while True:
        alive = [w for w in run.alive() if w not in set(lost)]
        if alive:
            return alive
        if time.monotonic() - t0 > run.timeout:
            raise ClusterLost(f"every worker of the Dask cluster was lost during {stage}; nothing was written. "
                              f"Start workers ('dask worker SCHEDULER-ADDRESS') and run again")
        time.sleep(0.5)


def _source_name(c, i: int) -> str:
    src = c.sources[i]
    return f"rows {int(c.offsets[i])}..{int(c.offsets[i]) + int(c.counts[i]) - 1}" if isinstance(
        src, pd.DataFrame) else os.path.basename(str(src))
