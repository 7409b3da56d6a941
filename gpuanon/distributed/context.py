"""What a cluster run holds open while its stages run: the cluster, its slots and the shards.

A :class:`Cluster` is the run's *state* on the cluster, not its results: the open handle, the task
runner (its slots: shard ``i`` lives on slot ``i % slots``), how the workers compute (backend,
progress), the shards' sources and row counts, the shards themselves (futures and their serial
numbers), the changes of every shard recorded so far (``journal``) and the recoveries made. Only
:func:`.stages.load_shards` and :mod:`.recovery` change it (a lost worker's shards are made again
elsewhere); what a stage computes is the frozen value it returns (:mod:`.values`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..anonymize.result import RunOptions
from . import tasks
from ..cluster.runner import Runner


@dataclass(eq=False)
class Cluster:
    """One run's open cluster: ``handle`` (:func:`.cluster.open_cluster`), ``runner`` (the tasks
    pinned to the slots), ``options`` (backend, progress), the shards' ``sources`` and ``counts``;
    the ``shards`` (futures), their ``serials``, the ``journal`` of recorded changes, the shards'
    ``losses`` and the ``recoveries`` made (the report's ``recovery``)."""

    handle: Any
    runner: Runner
    options: RunOptions
    sources: list
    counts: list
    shards: list = field(default_factory=list)
    serials: list = field(default_factory=list)
    journal: list = field(default_factory=list)  # every shard's recorded changes, (fn, args), in order
    losses: dict = field(default_factory=dict)  # shard -> how many workers holding it were lost
    recoveries: list = field(default_factory=list)

    def __post_init__(self):
        self.slots = len(self.runner.workers)  # as the run started: a worker lost mid-run keeps its slots

    @property
    def n_shards(self) -> int:
        return len(self.sources)

    @property
    def n_rows(self) -> int:
        return int(sum(self.counts))

    @property
    def offsets(self) -> np.ndarray:
        """Each shard's first global row."""
        return np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)

    def slot_of_shard(self, i: int) -> int:
        return i % self.slots

    def shard_slots(self) -> list[int]:
        return [self.slot_of_shard(i) for i in range(self.n_shards)]

    def on_shards(self, name: str, *args) -> list:
        """``shard.name(*args)`` on every shard's worker, gathered in shard order."""
        run = self.runner
        return run.gather([run.call(self.slot_of_shard(i), s, self.serials[i], name, *args)
                           for i, s in enumerate(self.shards)])

    def on_homes(self, homes, name: str, *args) -> list:
        """``home.name(*args)`` on every home of ``homes`` (:class:`.values.Homes`), gathered in slot order."""
        run = self.runner
        return run.gather([run.call(d, h, homes.serials[d], name, *args) for d, h in enumerate(homes.futures)])

