"""What a cluster run sends to its workers, and the runner that pins those tasks and gathers them.

Every task takes a shard or home the worker holds (a Dask future's value) and calls one of its
methods (:func:`call_method`), checking its serial number: a worker that died and came back would
rebuild a shard from its source, empty, and the run must stop rather than go on with it.
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from ..backend import get_backend
from ..datasets.tables import nullable_integers
from ..table.dictionaries import encode_chunk, profile_chunk
from ..errors import BackendError
from ..output.io import write_table
from .worker import Home, Shard, local_table
from ..cluster.runner import checked


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
    """Chunk of the table's dictionaries (:func:`gpuanon.table.dictionaries.profile_chunk`): the profile
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
    obj = checked(shard, serial)
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
    out = checked(shard, serial).build_output(pieces, qis, kinds, columns, fmt, identifiers)
    if path is None:
        out.attrs["gpuanon"] = metadata
        return out

    write_table(out, path, metadata=metadata)  # as one process writes its output (the cells' format)
    return len(out)


def output_metadata(enc, fmt: str) -> dict:
    """What a written output file carries beside its rows, as in one process."""
    return {"encoding": local_table(enc, np.zeros((len(enc.columns), 0), dtype=np.uint32), None, None,
                                    np).encoding_metadata(), "format": fmt}
