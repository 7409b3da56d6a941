"""Dask clusters for gpuanon: started here, reached by address, or handed in as a client.

One place decides what ``--cluster`` means, for DISTPAB's entities and for distributed Mondrian:

* ``local:N`` (or ``local``): a :class:`distributed.LocalCluster` of ``N`` one-thread worker
  *processes* on this machine, as on a real cluster (``local:N:threads``: threads of this process,
  quicker to start, but nothing is pickled and no worker can die alone); with the GPU backend, ``dask_cuda.LocalCUDACluster`` with one GPU per worker
  (``N`` GPUs, all of them when ``N`` is left out).
* ``cuda`` / ``cuda:N``: ``LocalCUDACluster`` whatever the backend.
* ``tcp://host:port`` (or ``tls://``, ``ucx://``): the scheduler of a cluster started elsewhere
  (``dask scheduler`` and ``dask worker`` / ``dask cuda worker``).
* a :class:`distributed.Client`: used as it is, never closed here.

Dask and distributed are imported only when a cluster is asked for; dask-cuda only for a CUDA
cluster (through :func:`importlib.import_module`, so that no module but the backend names a GPU
library in an import statement).

Examples
--------
>>> from gpuanon.cluster.connect import open_cluster
>>> with open_cluster("local:2", backend="cpu") as cl:  # doctest: +SKIP
...     len(cl.workers)
2
"""

from __future__ import annotations

import importlib
import logging
from contextlib import contextmanager

from ..backend import get_backend
from ..errors import BackendError, InputError

log = logging.getLogger("gpuanon")

__all__ = ["local_processes", "make_client", "open_cluster", "parse_cluster", "ClusterHandle", "worker_addresses"]

_DASK_HINT = "pip install dask==2025.9.1 distributed==2025.9.1"


def _distributed():
    try:
        import distributed  # noqa: PLC0415
    except ImportError as exc:
        raise BackendError(f"a Dask cluster needs dask and distributed ({_DASK_HINT})") from exc
    return distributed


def _cuda_cluster(n_workers: int | None):
    try:
        dask_cuda = importlib.import_module("dask_cuda")
    except ImportError as exc:
        raise BackendError("a CUDA cluster needs dask-cuda (conda install -c rapidsai dask-cuda, or pip install "
                           "dask-cuda); or start one yourself and pass its address (--cluster tcp://host:8786)") from exc
    kw = {"dashboard_address": ":0"}
    if n_workers:
        kw["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(int(n_workers)))
    return dask_cuda.LocalCUDACluster(**kw)


def worker_addresses(client) -> list[str]:
    """Every worker's address, sorted, asked of the scheduler now (``scheduler_info`` lists only a
    few unless asked for all, and answers from its cache -- which may list none -- when the
    scheduler is slow to answer); an error when the scheduler does not answer."""
    return sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def parse_cluster(spec) -> tuple[str, int | None]:
    """``(kind, n_workers)`` of a ``--cluster`` text: kind is 'local', 'cuda' or 'address'.

    >>> parse_cluster("local:3"), parse_cluster("local:2:threads"), parse_cluster("tcp://10.0.0.1:8786")
    (('local', 3), ('local', 2), ('address', None))
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"cluster must be 'local:N', 'cuda:N', a scheduler address such as tcp://host:8786, or a "
                         f"distributed.Client; got {spec!r}")
    s = spec.strip()
    if "://" in s:
        return "address", None
    kind, _, num = s.partition(":")
    kind = kind.lower()
    num, _, how = num.partition(":")
    if how and (kind != "local" or how.lower() not in ("threads", "processes")):
        raise InputError(f"cluster '{spec}' is not understood; use local:N (worker processes), local:N:threads "
                         f"(threads of this process), cuda:N or a scheduler address such as tcp://host:8786")
    if kind not in ("local", "cuda"):
        raise InputError(f"cluster '{spec}' is not understood; use local:N (N workers here), cuda:N (N GPUs here) or "
                         f"a scheduler address such as tcp://host:8786")
    if not num:
        return kind, None
    try:
        n = int(num)
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(f"cluster '{spec}': the number of workers must be a whole number >= 1, e.g. {kind}:2")
    return kind, n


def local_processes(spec) -> bool:
    """Whether ``local:N`` runs its workers as processes (the default) or as threads (``local:N:threads``).

    >>> local_processes("local:2"), local_processes("local:2:threads")
    (True, False)
    """
    return not (isinstance(spec, str) and spec.strip().lower().endswith(":threads"))


def make_client(n_workers: int = 2, cluster: str | None = None, processes: bool = False):
    """Start a cluster on this machine and a client: ``(client, cluster)``.

    ``cluster=None`` or ``"local"``: :class:`distributed.LocalCluster` with one thread per worker,
    in-process workers by default (``processes=False``: no spawning, no serialization of the
    frames, starts in about a second -- the reliable choice in CI). ``cluster="cuda"``:
    ``dask_cuda.LocalCUDACluster`` (one worker per GPU), with a clear error when dask-cuda is
    missing.
    """
    dist = _distributed()
    kind = (cluster or "local").lower()
    if kind == "cuda":
        cl = _cuda_cluster(None)
    elif kind == "local":
        cl = dist.LocalCluster(n_workers=max(1, int(n_workers)), threads_per_worker=1, processes=processes,
                               dashboard_address=":0",  # a free port: never clashes with 8787
                               silence_logs=logging.ERROR)
    else:
        raise InputError(f"cluster must be 'local' or 'cuda', got {cluster!r}")
    return dist.Client(cl), cl


class ClusterHandle:
    """A client and, when this process started it, the cluster behind it (closed on exit)."""

    def __init__(self, client, cluster=None, owned: bool = False, description: str = ""):
        self.client, self.cluster, self.owned, self.description = client, cluster, owned, description

    @property
    def workers(self) -> list[str]:
        """Worker addresses, sorted (the order shards are placed in)."""
        return worker_addresses(self.client)

    @property
    def dashboard(self) -> str | None:
        """The dashboard's link when its page answers, else None: a scheduler lists its HTTP server as
        ``dashboard`` even with ``--no-dashboard`` or without bokeh, where the page is missing."""
        if getattr(self, "_dashboard", False) is not False:
            return self._dashboard
        self._dashboard = None
        try:
            if "dashboard" in (self.client.scheduler_info().get("services") or {}):
                import urllib.request  # noqa: PLC0415

                link = self.client.dashboard_link
                with urllib.request.urlopen(link, timeout=3) as page:  # noqa: S310 (the scheduler's own page)
                    if page.status == 200:
                        self._dashboard = link
        except Exception:  # no dashboard (turned off, bokeh missing, or not reachable from here)
            self._dashboard = None
        return self._dashboard

    def close(self) -> None:
        if self.owned:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()


@contextmanager
def open_cluster(spec, *, backend: str | None = None, processes: bool | None = None, quiet_logs: bool = True,
                 connect_timeout: float = 20.0):
    """Yield a :class:`ClusterHandle` for ``spec`` (see the module's docstring); close what it started.

    ``backend`` decides what ``local:N`` means: with the GPU backend (``gpu``, or ``auto`` where
    a GPU is usable) a ``LocalCUDACluster``; ``processes`` (None: as the text says, processes unless
    ``local:N:threads``) whether its CPU workers are processes. A scheduler address is given ``connect_timeout``
    seconds to answer. The dashboard's address is logged.
    """
    dist = _distributed()
    dlog = logging.getLogger("distributed")
    dlevel = dlog.level
    if isinstance(spec, dist.Client):
        handle = ClusterHandle(spec, None, False, f"client {spec.scheduler.address}")
    else:
        kind, n = parse_cluster(spec)
        if kind == "local":
            if get_backend(backend, quiet=True).is_gpu:
                kind = "cuda"
        if quiet_logs:
            dlog.setLevel(max(logging.WARNING, dlog.getEffectiveLevel()))
        if kind == "address":
            try:
                client = dist.Client(spec, timeout=f"{float(connect_timeout)}s")
            except OSError as exc:
                raise BackendError(f"cannot reach the Dask scheduler at {spec} ({exc}); start it with "
                                   f"'dask scheduler' and check the address, or use --cluster local:N") from None
            handle = ClusterHandle(client, None, True, f"scheduler {spec}")
        elif kind == "cuda":
            cl = _cuda_cluster(n)
            handle = ClusterHandle(dist.Client(cl), cl, True, f"LocalCUDACluster ({len(cl.workers)} GPU workers)")
        else:
            procs = local_processes(spec) if processes is None else bool(processes)
            client, cl = make_client(n or 2, "local", processes=procs)
            handle = ClusterHandle(client, cl, True, f"LocalCluster ({n or 2} CPU worker "
                                                     f"{'processes' if procs else 'threads'})")
    try:
        if not handle.workers:
            raise BackendError(f"the Dask cluster ({handle.description}) has no workers; start some with "
                               f"'dask worker {handle.client.scheduler.address}'")
        dash = handle.dashboard
        # said once, by whoever started the cluster (a client handed on to the run: at DEBUG)
        log.log(logging.INFO if handle.owned else logging.DEBUG, "dask: %s, %d worker(s)%s", handle.description,
                len(handle.workers), f"; dashboard {dash}" if dash else "")
        yield handle
    except BackendError:
        dlog.setLevel(logging.CRITICAL)  # a lost scheduler: the client's own complaints are not the user's line
        raise
    finally:
        handle.close()
        dlog.setLevel(dlevel)
