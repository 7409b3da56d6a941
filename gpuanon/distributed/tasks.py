"""What a cluster run sends to its workers, and the runner that pins those tasks and gathers them.

Every task takes a shard or home the worker holds (a Dask future's value) and calls one of its
methods (:func:`call_method`), checking its serial number: a worker that died and came back would
rebuild a shard from its source, empty, and the run must stop rather than go on with it.
"""

from __future__ import annotations

import numpy as np

from ..errors import BackendError, GpuanonError
from ..dictionaries import Profile, encode_chunk, profile_chunk
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
    from ..backend import get_backend  # noqa: PLC0415

    return get_backend(name, quiet=True)


def serial_of(obj):
    return obj.serial


def new_shard(index, offset, source, backend, columns):
    import pandas as _pd  # noqa: PLC0415

    if isinstance(source, str):
        from ..datasets.tables import nullable_integers  # noqa: PLC0415

        frame = _pd.read_parquet(source, columns=columns)
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


def head(shard, n):
    return shard.frame.head(n)


def make_home(index, backend, *pieces):
    return Home(index, list(pieces), backend)


def write_output(shard, serial, pieces, qis, kinds, columns, fmt, identifiers, path, metadata):
    out = _checked(shard, serial).build_output(pieces, qis, kinds, columns, fmt, identifiers)
    if path is None:
        out.attrs["gpuanon"] = metadata
        return out
    from ..io import write_table  # noqa: PLC0415

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


class Runner:
    """Tasks pinned to workers, gathered with one clear error when a worker fails or leaves."""

    #: seconds between checks that every worker of the run is still there
    POLL_SECONDS = 2.0

    def __init__(self, client, workers):
        self.client, self.workers = client, workers
        self.stage = "start"
        self.bytes_in = 0  # results gathered here
        self.bytes_out = 0  # parameters sent from here

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

    def gather(self, futs):
        from distributed import wait  # noqa: PLC0415

        while True:  # tasks pinned to a worker that left would wait forever: look for it
            try:
                wait(futs, timeout=self.POLL_SECONDS)
                break
            except TimeoutError:
                from .cluster import worker_addresses  # noqa: PLC0415

                lost = sorted(set(self.workers) - set(worker_addresses(self.client)))
                if lost:
                    self._fail(f"worker {', '.join(lost)} left the cluster")
        try:
            got = self.client.gather(futs)
        except GpuanonError:
            raise
        except Exception as exc:  # a worker died, lost its data, or a task failed
            self._fail(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'}")
        self.bytes_in += nbytes(got)
        return got
