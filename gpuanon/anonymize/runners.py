"""Which runner fits a plan: this process, or one that a later package registers (a Dask cluster).

``Mondrian(cluster=None)`` runs in this process (:class:`~gpuanon.anonymize.pipeline.InProcess`);
``cluster=...`` resolves through :data:`RUNNERS`, which :mod:`gpuanon.distributed.estimator` fills
when it is imported (``register("cluster", OnCluster)``). This package does not import
``distributed``: :func:`runner_for` imports the registering module by its name (:data:`PROVIDERS`)
the first time a kind is asked for and none is registered. That one ``importlib`` call is the
registry's, listed in docs/architecture.md.

Every runner takes :class:`RunOptions` (the backend and the progress line: how to run, not what to
compute, which is the plan) and keyword options of its own (a cluster's ``local_rows``, ``timeout``,
``out_dir``, ``gather``).
"""

from __future__ import annotations

import importlib
from typing import Callable

from .pipeline import InProcess
from .result import RunOptions

__all__ = ["PROVIDERS", "RUNNERS", "RunOptions", "register", "runner_for"]

#: kind -> factory(where, options, **runner options); filled by the packages that provide a runner
RUNNERS: dict[str, Callable] = {}
#: kind -> the module that registers it when imported (looked up by name: no import edge to it)
PROVIDERS = {"cluster": "gpuanon.distributed.estimator"}


def register(kind: str, factory: Callable) -> None:
    """Make ``factory(where, options, **kw)`` the runner of ``kind`` (a provider calls this on import)."""
    RUNNERS[kind] = factory


def runner_for(cluster, options: RunOptions, **kw):
    """The runner of ``cluster``: None runs in this process; anything else (``'local:N'``,
    ``'cuda:N'``, ``'tcp://host:port'``, a ``distributed.Client``) on a Dask cluster."""
    if cluster is None:
        return InProcess(options)
    if "cluster" not in RUNNERS:
        importlib.import_module(PROVIDERS["cluster"])
    return RUNNERS["cluster"](cluster, options, **kw)
