"""DISTPAB on a Dask cluster: each entity's rows stay on one worker; only statistics travel.

Phase 1 runs :func:`gpuanon.perturb.distpab.local_stats` on the workers (one task per entity,
pinned to the worker holding that entity's frame) and only the :class:`Stats` come back. The
coordinator (this process) merges them, searches the angle and axis and draws the translation.
Phase 2 sends the :class:`PerturbParams` and each entity's seed back to its worker, which
perturbs and shuffles its own rows. The cluster helpers are :mod:`gpuanon.cluster.connect`'s
(shared with distributed Mondrian); Dask and distributed are imported only when
:func:`perturb_distributed` runs; ``dask_cuda`` only when ``cluster="cuda"`` is asked for.

Examples
--------
>>> import pandas as pd, numpy as np
>>> rng = np.random.default_rng(0)
>>> frames = [pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"]) for n in (40, 60)]
>>> outs, rep = perturb_distributed(frames, ["a", "b", "c"], random_state=0)  # doctest: +SKIP
>>> [len(o) for o in outs], rep["n_entities"]  # doctest: +SKIP
([40, 60], 2)
"""

from __future__ import annotations

import logging
import pickle
import time
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..backend import get_backend, to_host
from ..cluster.connect import make_client, worker_addresses
from ..cluster.runner import Runner, WorkerLost, move_slots, workers_left
from ..errors import BackendError, ClusterLost, InputError
from ..table.schema import as_list as _as_list
from .distpab import (DISTPAB, PerturbParams, Stats, frame_matrix as _frame_matrix, is_frame as _is_frame,
                      local_stats, perturb_entity, validate_frame)

__all__ = ["perturb_distributed", "make_client"]

log = logging.getLogger("gpuanon")


def _entity_stats(df, features, label, passengers, backend) -> tuple[Stats, str]:
    """Worker task, phase 1: validate the entity's frame and reduce it to its Stats."""
    feats, _ = validate_frame(df, features, label, passengers)
    be = get_backend(backend, quiet=True)  # the array module of a backend name: the backend's
    return local_stats(_frame_matrix(df, feats), be.xp), be.name


def _entity_perturb(df, features, carried, params: PerturbParams, seed, shuffle, block_rows, backend):
    """Worker task, phase 2: perturb and shuffle the entity's rows; carried columns follow them."""
    X = _frame_matrix(df, features)
    Xp, perm = perturb_entity(X, params, seed, shuffle=shuffle, block_rows=block_rows,
                              xp=get_backend(backend, quiet=True).xp)
    del X
    out = pd.DataFrame(to_host(Xp), columns=list(features), copy=False)
    for c in carried:
        out[c] = np.asarray(df[c].to_numpy())[perm]
    keep = set(features) | set(carried)
    order = [c for c in df.columns if c in keep]
    return out if order == list(out.columns) else out[order]


def perturb_distributed(frames: Sequence[Any], features, label=None, noise: float = 0.3, random_state=0,
                        client=None, n_workers=None, shuffle: bool = True, angles=None, *,
                        passengers=None, selection: str = "maximin", backend=None, cluster=None,
                        block_rows: int = 1 << 20, gather: bool = True, timeout: float = 60.0, on_stage=None):
    """Run DISTPAB with one Dask worker per entity (round robin when there are fewer workers).

    Parameters
    ----------
    frames : sequence
        One item per entity: a pandas DataFrame (scattered once to its worker), a zero-argument
        callable that builds the frame on the worker (the rows never pass through this process),
        or a ``distributed.Future`` already holding the frame.
    features : list of str
        Numeric feature columns to perturb.
    label : str, optional
        Column carried unperturbed with its rows through the shuffle (``passengers`` likewise).
    noise, random_state, shuffle, angles, selection, block_rows :
        As in :class:`~gpuanon.perturb.distpab.DISTPAB`; the same ``random_state`` gives the same
        parameters and the same output as ``DISTPAB(...).fit_entities(frames)`` followed by
        ``transform(frame_i, entity=i)``.
    client : distributed.Client, optional
        An existing client (e.g. on a ``dask_cuda.LocalCUDACluster``). Without one a local
        cluster is started (:func:`make_client`, ``n_workers = min(entities, 2)``) and closed.
    backend : {'auto', 'cpu', 'gpu'} or None
        Array backend on the workers and the coordinator.
    cluster : {'local', 'cuda'} or None
        Kind of cluster to start when ``client`` is None.
    gather : bool
        True: return the perturbed frames; False: return their futures (the cluster is then
        left running: pass your own ``client``).
    timeout : float
        Seconds to wait for the scheduler, or for a worker when every worker was lost; then
        :class:`~gpuanon.errors.ClusterLost`. A worker lost in either phase is recovered from: its
        entities are placed again on the workers that remain and the phase redone there (the
        report's ``recovered`` lists it); the output is the same. An entity on two workers that were
        lost (as one too large for a worker's memory kills every worker it is given):
        :class:`~gpuanon.errors.ClusterLost`, naming it. ``on_stage``: called with each
        phase's name as it starts (fault-injection tests).

    Returns
    -------
    (outputs, report)
        ``outputs[i]``: entity ``i``'s perturbed, shuffled frame (features, label, passengers;
        fresh index). ``report``: phi, angle_degrees, axis (0-based), axis_feature, features,
        variances, bytes_per_entity (largest measured over entities: pickled Stats sent plus
        pickled parameters and seed received), bytes_per_entity_each, bytes_per_entity_payload
        (the float64 payload alone), n_entities, rows_per_entity, n_workers, backend, seconds
        {place, stats, search, perturb, total}.
    """
    if not frames:
        raise InputError("perturb_distributed needs at least one entity frame")
    if not gather and client is None:
        raise InputError("gather=False returns futures: pass client= so the cluster outlives the call")
    try:
        from distributed import Future  # noqa: PLC0415
    except ImportError as exc:
        raise BackendError("perturb_distributed needs dask and distributed "
                           "(pip install dask==2025.9.1 distributed==2025.9.1)") from exc

    feats = _as_list(features)
    for f in frames:
        if _is_frame(f):
            validate_frame(f, feats, label, passengers)
        elif not (callable(f) or isinstance(f, Future)):
            raise InputError(f"an entity must be a DataFrame, a callable building one, or a Future; got {type(f)!r}")
    carried = ([] if label is None else [label]) + _as_list(passengers)
    model = DISTPAB(noise=noise, angles=angles, selection=selection, shuffle=shuffle,
                    random_state=random_state, backend=backend, block_rows=block_rows)
    own = client is None
    cl = None
    t_all = time.perf_counter()
    dlog = logging.getLogger("distributed")
    dlevel = dlog.level
    if own:
        dlog.setLevel(max(logging.WARNING, dlog.getEffectiveLevel()))  # our own cluster's start/stop chatter
        client, cl = make_client(n_workers or min(len(frames), 2), cluster=cluster)
    try:
        run = _run_phases(client, frames, model, feats, label, passengers, carried, gather, timeout, on_stage)
    finally:
        if own:
            client.close()
            cl.close()
            dlog.setLevel(dlevel)
    run["seconds"]["total"] = time.perf_counter() - t_all
    return run["outputs"], _report(run, model, feats)


def _place_one(client, f, w):
    """One entity's frame onto worker ``w``: a Future as it is, a callable run there, a frame scattered."""
    from distributed import Future  # noqa: PLC0415

    if isinstance(f, Future):
        return f
    if callable(f) and not _is_frame(f):
        return client.submit(f, workers=[w], allow_other_workers=False, pure=False)
    return client.scatter(f, workers=[w], broadcast=False, hash=False)


def _on_entities(run, frames, placed, task, *args, gather: bool = True):
    """``task(frame, *args_i)`` on every entity's worker (``args``: one tuple per entity), gathered.

    A worker lost meanwhile: its entities are placed again on the workers that remain (a frame
    from this process, a callable run again; a Future given by the caller died with its worker: one
    line, :class:`ClusterLost`) and the phase is redone there (an entity's statistics and its
    perturbed rows are functions of its rows, its parameters and its seed alone)."""
    W = len(run.workers)
    while True:
        futs = [run.submit(i % W, task, p, *a) for i, (p, a) in enumerate(zip(placed, args))]
        if not gather:
            return futs
        try:
            return run.gather(futs)
        except WorkerLost as exc:
            alive = workers_left(run, exc.lost, run.stage)
            status = [getattr(p, "status", "finished") if not exc.lost else "finished" for p in placed]
            slots = sorted({d for d, w in enumerate(run.workers) if w not in alive}
                           | {i % W for i, st in enumerate(status) if st != "finished"})
            move_slots(run, alive, slots)
            again = [i for i in range(len(placed)) if i % W in slots]
            for i in again:  # a loop over the lost worker's entities
                run.losses[i] = run.losses.get(i, 0) + 1
                if run.losses[i] >= 2:
                    raise ClusterLost(f"entity {i} was on {run.losses[i]} workers that were lost, the last during "
                                      f"{run.stage}; nothing was returned. If they ran out of memory: use more "
                                      f"workers, more entities (smaller ones) or a higher memory limit (dask "
                                      f"worker --memory-limit)") from None
                if not (_is_frame(frames[i]) or callable(frames[i])):
                    raise ClusterLost(f"entity {i}'s frame was a Future held by worker {', '.join(exc.lost)}, lost "
                                      f"during {run.stage}; nothing was returned. Pass the entity as a frame or a "
                                      f"callable that reads it, then run again") from None
                try:
                    placed[i] = _place_one(run.client, frames[i], run.workers[i % W])
                except Exception as err:  # the scheduler went too
                    run.classify(err)
            log.warning("dask: worker %s lost during %s; entit%s %s placed again on %s; redoing %s",
                        ", ".join(exc.lost) or "(restarted)", run.stage, "y" if len(again) == 1 else "ies",
                        ", ".join(map(str, again)), ", ".join(sorted({run.workers[i % W] for i in again})), run.stage)
            run.recovered.append({"workers_lost": exc.lost, "stage": run.stage, "entities": again})


def _run_phases(client, frames, model: DISTPAB, feats, label, passengers, carried, gather: bool,
                timeout: float = 60.0, on_stage=None) -> dict:
    """Place the entities, phase 1 (their Stats), the coordinator's search, phase 2 (their rows perturbed)."""
    from distributed import wait  # noqa: PLC0415


    k, backend, shuffle, block_rows = len(frames), model.backend, model.shuffle, model.block_rows
    workers = worker_addresses(client)
    if not workers:
        raise BackendError("the Dask cluster has no workers")
    run = Runner(client, workers[:k], timeout, on_stage)  # slots: entity i on slot i % W
    run.recovered, run.losses = [], {}  # losses: how many lost workers each entity was on
    W = len(run.workers)
    seconds = {}
    t0 = time.perf_counter()
    run.stage = "placing the entities"
    placed = [_place_one(client, f, run.workers[i % W]) for i, f in enumerate(frames)]
    wait(placed)
    seconds["place"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    run.stage = "the entities' statistics"
    got = _on_entities(run, frames, placed, _entity_stats, *[(feats, label, passengers, backend)] * k)
    stats = [g[0] for g in got]
    seconds["stats"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    model.fit_stats(stats, feature_names=feats)
    seeds = [model.entity_seed(i) for i in range(k)]
    seconds["search"] = time.perf_counter() - t0

    sent = [len(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL)) for s in stats]
    received = [len(pickle.dumps((model.params_, sd), protocol=pickle.HIGHEST_PROTOCOL)) for sd in seeds]

    t0 = time.perf_counter()
    run.stage = "perturbing the entities"
    outputs = _on_entities(run, frames, placed, _entity_perturb,
                           *[(feats, carried, model.params_, sd, shuffle, block_rows, backend) for sd in seeds],
                           gather=gather)
    del placed
    seconds["perturb"] = time.perf_counter() - t0
    return {"outputs": outputs, "stats": stats, "sent": sent, "received": received, "n_workers": len(workers),
            "worker_backends": sorted({g[1] for g in got}), "seconds": seconds, "recovered": run.recovered}


def _report(run: dict, model: DISTPAB, feats) -> dict:
    """perturb_distributed's report (its docstring lists the keys)."""
    sent, received, worker_backends = run["sent"], run["received"], run["worker_backends"]
    return {
        "phi": model.phi_,
        "angle_degrees": model.angle_degrees_,
        "axis": model.axis_,
        "axis_feature": str(feats[model.axis_]),
        "features": [str(c) for c in feats],
        "variances": [float(v) for v in model.variances_],
        "constant_columns": [str(c) for c in model.constant_columns_],
        "bytes_per_entity": int(max(a + b for a, b in zip(sent, received))),
        "bytes_per_entity_each": [{"sent": a, "received": b} for a, b in zip(sent, received)],
        "bytes_per_entity_payload": model.bytes_per_entity_,
        "n_entities": len(run["stats"]),
        "rows_per_entity": [int(s.n) for s in run["stats"]],
        "n_workers": run["n_workers"],
        "backend": worker_backends[0] if len(worker_backends) == 1 else worker_backends,
        "coordinator_backend": model.backend_.name,
        "seconds": run["seconds"],
        "recovered": run["recovered"],
    }
