"""Tasks pinned to the workers of a cluster and gathered, a lost worker noticed: the :class:`Runner`.

Shared by the anonymizer's cluster run (:mod:`gpuanon.distributed`) and DISTPAB's entities
(:mod:`gpuanon.perturb.distributed`). A task on an object a worker holds (a shard, a home) checks
its serial number (:func:`checked`): a worker that died and came back would rebuild it from its
source, empty, and the run must stop rather than go on with it. A worker that leaves is raised as
:class:`WorkerLost`; its slots go to the workers that remain (:func:`workers_left`,
:func:`move_slots`).
"""

from __future__ import annotations

import time
import numpy as np

from ..table.dictionaries import Profile
from ..errors import BackendError, ClusterLost, GpuanonError
from .connect import worker_addresses


def checked(obj, serial):
    """``obj`` if it is the shard or home this run made (a worker that died and came back would
    rebuild a shard from its source, empty: the serial number tells it apart, and the run stops)."""
    if obj.serial != serial:
        raise BackendError(f"{type(obj).__name__.lower()} {obj.index} was rebuilt after its worker was lost")
    return obj


def call_method(obj, serial, name, *args):
    """Worker task: ``obj.name(*args)`` on a shard or home held by the worker."""
    return getattr(checked(obj, serial), name)(*args)


def call_function(obj, serial, fn, *args):
    """Worker task: ``fn(obj, *args)`` (a module-level function of this package) on a shard or
    home held by the worker."""
    return fn(checked(obj, serial), *args)


def nbytes(x) -> int:
    if x is None:
        return 0
    if isinstance(x, Profile):  # a shard's profile: its arrays and values, as they travel
        return nbytes(vars(x))
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, dict):
        return sum(nbytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    return 8


class WorkerLost(Exception):
    """Raised by :meth:`Runner.gather` when workers of the run left the cluster (or their data is
    gone): the stages rebuild the lost shards elsewhere and redo the stage (:mod:`gpuanon.distributed.recovery`)."""

    def __init__(self, lost, why: str = ""):
        super().__init__(f"worker(s) {', '.join(lost)} lost{': ' + why if why else ''}")
        self.lost, self.why = sorted(lost), why


class Runner:
    """Tasks pinned to workers, gathered; a worker that leaves is reported as :class:`WorkerLost`.

    ``workers`` are the run's *slots*: shard ``i`` lives on slot ``i % W`` and home ``d`` on slot
    ``d``; when a worker is lost its slots are given to workers that remain (:func:`move_slots`), so
    the number of slots, and with it every decision of the run, does not change."""

    #: seconds between checks that every worker of the run is still there
    POLL_SECONDS = 2.0

    def __init__(self, client, workers, timeout: float = 60.0, on_stage=None):
        self.client, self.workers = client, list(workers)
        self.timeout = float(timeout)
        self.on_stage = on_stage  # a callable given every stage's name as the run enters it (fault tests)
        self._stage = "start"
        self.bytes_in = 0  # results gathered here
        self.bytes_out = 0  # parameters sent from here

    @property
    def stage(self) -> str:
        return self._stage

    @stage.setter
    def stage(self, name: str) -> None:
        self._stage = name
        if self.on_stage is not None:
            self.on_stage(name)

    def submit(self, w: int, fn, *args):
        self.bytes_out += sum(nbytes(a) for a in args if not hasattr(a, "key"))
        return self.client.submit(fn, *args, workers=[self.workers[w]], allow_other_workers=False, pure=False)

    def call(self, w: int, obj, serial: str, name: str, *args):
        """``obj.name(*args)`` on worker ``w``; ``serial`` proves it is the object this run made."""
        return self.submit(w, call_method, obj, serial, name, *args)

    def apply(self, w: int, obj, serial: str, fn, *args):
        """``fn(obj, *args)`` on worker ``w`` (see :func:`call_function`)."""
        return self.submit(w, call_function, obj, serial, fn, *args)

    def _fail(self, why: str):
        raise BackendError(f"the Dask cluster failed during {self.stage} ({why}); nothing was written. Check the "
                           f"workers' logs (and their memory), then run again")

    def _scheduler_lost(self):
        return ClusterLost(f"the Dask scheduler was lost during {self.stage} (no answer for {self.timeout:g} s); "
                           f"nothing was written. Restart the scheduler and its workers (or raise "
                           f"--cluster-timeout), then run again")

    def _wait_scheduler(self) -> None:
        """Back when the client is connected again; :class:`ClusterLost` after ``timeout`` seconds."""
        t0 = time.monotonic()
        while self.client.status != "running":
            if self.client.status in ("closed", "closing", "failed") or time.monotonic() - t0 > self.timeout:
                raise self._scheduler_lost()
            time.sleep(0.2)

    def alive(self) -> list[str]:
        """The workers the scheduler knows now (:class:`ClusterLost` when the scheduler has not
        answered for ``timeout`` seconds)."""
        t0 = time.monotonic()
        while True:
            self._wait_scheduler()
            try:
                return worker_addresses(self.client)
            except Exception:  # the connection broke, or the scheduler is slow to answer
                if time.monotonic() - t0 > self.timeout:
                    raise self._scheduler_lost() from None
                time.sleep(0.5)

    def lost(self) -> list[str]:
        return sorted(set(self.workers) - set(self.alive()))

    def gather(self, futs):
        from distributed import wait  # noqa: PLC0415

        paused: dict = {}
        while True:  # tasks pinned to a worker that left would wait forever: look for it
            try:
                wait(futs, timeout=self.POLL_SECONDS)
                break
            except TimeoutError:
                lost = self.lost()  # waits for the scheduler (ClusterLost after timeout seconds)
                if lost:
                    raise WorkerLost(lost, "it left the cluster") from None
                self._check_paused(paused)
            except Exception as exc:  # the connection to the scheduler broke
                lost = self.lost()
                if lost:
                    raise WorkerLost(lost, type(exc).__name__) from None
                raise
        try:
            got = self.client.gather(futs)
        except GpuanonError:
            raise
        except Exception as exc:  # a worker died, lost its data, or a task failed
            self.classify(exc)
        self.bytes_in += nbytes(got)
        return got


    def _check_paused(self, since: dict) -> None:
        """:class:`ClusterLost` when a worker of the run has been paused (its memory over the pause
        fraction of its limit: it starts no task) for ``timeout`` seconds; ``since``: when each was
        first seen paused. A worker over its limit whose nanny does not end it would wait forever."""
        try:
            info = self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]
        except Exception:  # the scheduler's loss is the next poll's to tell
            return
        now = time.monotonic()
        for w in sorted(set(self.workers)):  # a loop over the run's workers
            if (info.get(w) or {}).get("status") != "paused":
                since.pop(w, None)
            elif now - since.setdefault(w, now) > self.timeout:
                raise ClusterLost(f"worker {w} has been paused for {now - since[w]:.0f} s during {self.stage}: its "
                                  f"memory is over its limit's pause fraction and it starts no task; nothing was "
                                  f"written. Use more workers, smaller shards or entities, or a higher memory limit "
                                  f"(dask worker --memory-limit)")

    def classify(self, exc):
        """Raise what ``exc`` (from Dask) means: :class:`ClusterLost`, :class:`WorkerLost`, or the
        task's own failure in one line (:class:`BackendError`)."""
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'}"
        if "scheduler-connection-lost" in str(exc):
            raise self._scheduler_lost() from None
        lost = self.lost()
        if lost:
            raise WorkerLost(lost, why) from None
        if _is_loss(exc):  # the data is gone but every worker answers: one of them restarted
            raise WorkerLost([], why) from None
        self._fail(why)


def _is_loss(exc) -> bool:
    """Whether ``exc`` says a task's inputs or worker went away (not that the task itself failed)."""
    names = {t.__name__ for t in type(exc).__mro__}
    return bool(names & {"FuturesCancelledError", "CancelledError", "KilledWorker", "CommClosedError",
                         "StreamClosedError"})


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
