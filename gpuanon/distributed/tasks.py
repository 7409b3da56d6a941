"""What a cluster run sends to its workers, and the runner that pins those tasks and gathers them.

Every task takes a shard or home the worker holds (a Dask future's value) and calls one of its
methods (:func:`call_method`), checking its serial number: a worker that died and came back would
rebuild a shard from its source, empty, and the run must stop rather than go on with it.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..backend import get_backend
from ..datasets.tables import nullable_integers
from ..dictionaries import Profile, encode_chunk, profile_chunk
from ..errors import BackendError, ClusterLost, GpuanonError
from ..io import write_table
from .cluster import worker_addresses
from .worker import Home, Shard, local_table


def _checked(obj, serial):
    """``obj`` if it is the shard or home this run made (a worker that died and came back would
    rebuild a shard from its source, empty: the serial number tells it apart, and the run stops)."""
    if obj.serial != serial:
        raise BackendError(f"{type(obj).__name__.lower()} {obj.index} was rebuilt after its worker was lost")
    return obj


def call_method(obj, serial, name, *args):
    """Worker task: ``obj.name(*args)`` on a shard or home held by the worker."""
    return getattr(_checked(obj, serial), name)(*args)


def call_function(obj, serial, fn, *args):
    """Worker task: ``fn(obj, *args)`` (a module-level function of this package) on a shard or
    home held by the worker."""
    return fn(_checked(obj, serial), *args)


def backend_of(name):
    return get_backend(name, quiet=True)


def serial_of(obj):
    return obj.serial


def new_shard(index, offset, source, backend, columns):
    if isinstance(source, str):
        frame = pd.read_parquet(source, columns=columns)
        nullable_integers(source, frame)  # integers beside missing values stay integers, as one process reads them
    else:
        frame = source
    return Shard(index, offset, frame.reset_index(drop=True), backend)


def profile(shard, schema):
    """Chunk of the table's dictionaries (:func:`gpuanon.dictionaries.profile_chunk`): the profile
    goes to the coordinator, the shard's own codes stay with it until :func:`encode`."""
    profile_, shard.chunk = profile_chunk(shard.frame, schema, shard.xp, check=True)
    return profile_


def encode(shard, dicts, schema):
    """The shard's keys and codes with the whole table's dictionaries."""
    chunk = getattr(shard, "chunk", None) or profile_chunk(shard.frame, schema, shard.xp, check=True)[1]
    shard.chunk = None
    shard.set_encoded(encode_chunk(chunk, dicts, shard.xp))
    return shard.n


def step(shard, serial, k: int, fn, *args):
    """Worker task: the shard's ``k``-th recorded change (1-based; ``fn`` a method name or a function
    of this package), applied once: a shard that has it already (the stage was redone after a worker
    was lost) is left as it is."""
    obj = _checked(shard, serial)
    if obj.steps >= k:
        return None
    if obj.steps != k - 1:
        raise BackendError(f"shard {obj.index} holds {obj.steps} recorded change(s), change {k} cannot follow")
    _apply(obj, fn, args)
    obj.steps = k
    return None


def _apply(obj, fn, args):
    return getattr(obj, fn)(*args) if isinstance(fn, str) else fn(obj, *args)


def rebuild_shard(index, offset, source, backend, columns, journal):
    """Worker task: a lost shard read again from its source, its state rebuilt from the changes the
    coordinator recorded (the dictionaries, the blocks' first partitions, the cuts level by level)."""
    shard = new_shard(index, offset, source, backend, columns)
    for fn, args in journal:  # a loop over recorded changes (a few per level), each a whole-array step
        _apply(shard, fn, args)
    shard.steps = len(journal)
    return shard


def head(shard, n):
    return shard.frame.head(n)


def make_home(index, backend, *pieces):
    return Home(index, list(pieces), backend)


def write_output(shard, serial, pieces, qis, kinds, columns, fmt, identifiers, path, metadata):
    out = _checked(shard, serial).build_output(pieces, qis, kinds, columns, fmt, identifiers)
    if path is None:
        out.attrs["gpuanon"] = metadata
        return out

    write_table(out, path, metadata=metadata)  # as one process writes its output (the cells' format)
    return len(out)


def output_metadata(enc, fmt: str) -> dict:
    """What a written output file carries beside its rows, as in one process."""
    return {"encoding": local_table(enc, np.zeros((len(enc.columns), 0), dtype=np.uint32), None, None,
                                    np).encoding_metadata(), "format": fmt}


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
    gone): the stages rebuild the lost shards elsewhere and redo the stage (:mod:`.recovery`)."""

    def __init__(self, lost, why: str = ""):
        super().__init__(f"worker(s) {', '.join(lost)} lost{': ' + why if why else ''}")
        self.lost, self.why = sorted(lost), why


class Runner:
    """Tasks pinned to workers, gathered; a worker that leaves is reported as :class:`WorkerLost`.

    ``workers`` are the run's *slots*: shard ``i`` lives on slot ``i % W`` and home ``d`` on slot
    ``d``; when a worker is lost its slots are given to workers that remain (:meth:`reassign`), so
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
