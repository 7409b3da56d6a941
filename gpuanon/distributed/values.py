"""What each stage of a cluster run produces: one frozen value per stage (:mod:`.stages`).

``load_and_encode`` -> :class:`Encoded`; ``criteria_and_blocks`` -> :class:`Blocks`;
``partition_levels`` -> :class:`Partitioned` (each level turns one :class:`Levels` into the next);
``finish_on_homes`` -> :class:`Homes`; ``verify_and_measure`` -> :class:`Measured`;
``write_output`` -> :class:`Written`. A stage reads the values it is given and the open
:class:`~.context.Cluster`; a stage redone after a lost worker (:mod:`.recovery`) starts again from
the same values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..anonymize.plan import Plan
from ..table.dictionaries import Dictionaries


@dataclass(frozen=True, eq=False)
class Encoded:
    """The roles and the whole table's encoding: ``plan`` (its roles set from a sample of the
    shards), ``encoding`` (the global dictionaries, the user's hierarchies and automatic ones with
    a fixed rho bound), ``frequency_tables`` (per automatic column its value x target counts, for
    choosing rho) and the ``seconds`` of loading and encoding."""

    plan: Plan
    encoding: Dictionaries
    frequency_tables: dict
    seconds: float

    @property
    def schema(self):
        return self.plan.schema


@dataclass(frozen=True, eq=False)
class Blocks:
    """The whole table's blocks (rows of one missing-value pattern) and what they decide: the
    ``criteria``, each block's size and sensitive histogram, the table's sensitive distribution, the
    rows ``suppressed`` (and why), the blocks ``kept``, the rows with a missing sensitive value and
    ``local_rows`` (a partition of at most this many rows is finished on one worker)."""

    criteria: Any
    block_sizes: np.ndarray
    block_histograms: np.ndarray | None
    sensitive_distribution: np.ndarray | None  # the criteria's q (t-closeness), None without a sensitive column
    histograms_needed: bool  # the criteria read the partitions' sensitive histograms
    suppressed: int
    suppression_reason: str
    kept: np.ndarray  # bool per block
    sensitive_missing: int
    local_rows: int


@dataclass(frozen=True, eq=False)
class Groups:
    """The partitions that left the levels, numbered in the order they left: each batch's sizes
    and whether they are final (no cut allowed: not cut again on their worker)."""

    sizes: tuple = ()
    final: tuple = ()

    @property
    def count(self) -> int:
        return int(sum(s.shape[0] for s in self.sizes))

    def added(self, sizes: np.ndarray, final: bool) -> tuple[Groups, np.ndarray]:
        """These groups with ``sizes`` numbered after them: ``(groups, their numbers)``."""
        ids = self.count + np.arange(sizes.shape[0])
        return Groups(self.sizes + (sizes,), self.final + (np.full(sizes.shape[0], final, dtype=bool),)), ids

    def all_sizes(self) -> np.ndarray:
        return np.concatenate(self.sizes).astype(np.int64) if self.sizes else np.zeros(0, dtype=np.int64)

    def all_final(self) -> np.ndarray:
        return np.concatenate(self.final) if self.final else np.zeros(0, dtype=bool)


@dataclass(frozen=True, eq=False)
class Levels:
    """The levels so far: the partitions still open (their sizes and sensitive histograms), the
    ``groups`` that left, how many levels, cut attempts (each attempt's number names its median
    search on the shards) and radix rounds were run, and one row per level (``per_level``)."""

    open_sizes: np.ndarray
    open_histograms: np.ndarray | None
    groups: Groups = field(default_factory=Groups)
    levels: int = 0
    attempts: int = 0
    radix_rounds: int = 0
    per_level: tuple = ()


@dataclass(frozen=True, eq=False)
class Cuts:
    """One level's cuts, per open partition: whether it is ``cut``, along which ``column`` at which
    ``threshold`` (keys below it only: ``below_only``), the left child's size and sensitive
    histogram; with the level's ``attempts`` and ``radix_rounds`` so far."""

    cut: np.ndarray
    column: np.ndarray
    threshold: np.ndarray
    below_only: np.ndarray
    left_sizes: np.ndarray
    left_histograms: np.ndarray | None
    attempts: int
    radix_rounds: int


@dataclass(frozen=True, eq=False)
class Partitioned:
    """The levels' result: the ``groups`` to finish on the workers, how many levels, attempts and
    radix rounds were run, and one row per level (the report's ``per_level``)."""

    groups: Groups
    levels: int
    attempts: int
    radix_rounds: int
    per_level: tuple


@dataclass(frozen=True, eq=False)
class Homes:
    """The homes (one per slot: whole groups, finished with the kernel, labels set): their
    ``futures`` and ``serials``, the ``n_partitions`` made, the optimization step's counts, how many
    ``groups`` were moved, the bytes moved between workers and the seconds."""

    futures: tuple
    serials: tuple
    n_partitions: int
    optimization: dict | None
    groups: int
    bytes_between_workers: int
    seconds: float


@dataclass(frozen=True, eq=False)
class Measured:
    """Verification and metrics: the ``encoding`` with the automatic hierarchies chosen after the
    partition bound, the ``automatic`` choices (the report's), the ``verification``, the
    ``metrics``, the entropy loss before the optimization step, how the column statistics were
    held, the output classes shared by several homes, and the seconds (column statistics; all)."""

    encoding: Dictionaries
    automatic: dict
    verification: Any
    metrics: dict
    loss_before: float | None
    column_statistics: dict
    classes_shared: int
    column_statistics_seconds: float
    seconds: float


@dataclass(frozen=True, eq=False)
class Written:
    """The output: the frame when gathered here, the file names written, the seconds."""

    output: Any
    files: list
    seconds: float
