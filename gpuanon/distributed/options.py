"""A cluster run's hierarchies (the user's and automatic ones) and optimization step: what one
process does, made from the shards.

* **Hierarchies** (a user's :class:`~gpuanon.hierarchy.Hierarchy` or ARX CSV file per categorical
  QI, or ``'auto'``): the plan is the single-process :func:`~gpuanon.hierarchy.hierarchy_plan`,
  validated against the column's distinct values over every shard (:func:`hierarchy_plan_of`);
  a user hierarchy orders the codes (:func:`~gpuanon.hierarchy.leaf_orders`, passed to
  :func:`gpuanon.table.dictionaries.finalize`) and is bound to them once here (:func:`bind_plan`). The bound
  hierarchies travel in the :class:`~gpuanon.table.dictionaries.Dictionaries`, so the coordinator's spans, the
  homes' kernel, the published cells, the verification and the metrics all read the same
  ``HierarchySpec`` / ``Table.hierarchies`` as one process.
* **Automatic hierarchies** (the contract, 5.6): each column's frequency table is its value x
  target counts summed over the shards (:func:`frequency_tables`); with ``rho`` fixed its
  hierarchy is bound before partitioning; otherwise, after partitioning, every home scores every
  candidate rho on its own classes (:func:`score_hierarchies`: the mass table of ``U'``, which
  adds up over classes), the coordinator sums the tables, adds the suppressed rows and keeps the
  rho one process's ``choose_rho`` keeps (:func:`choose_automatic`).
* **Optimization step**: partition-local, run by every home on its whole partitions
  (``Home.finish``); :func:`combine_optimization` sums the homes' counts. With a target each home
  keeps its partitions before the step and summarizes them beside its classes (``Home.stages``);
  :func:`.checks.loss_before_step` measures their entropy loss as one process does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..backend import to_device, to_host
from ..release.classes import ClassStats
from ..hierarchy import RHO_CANDIDATES, FrequencyTable, auto_choice, bind_hierarchy
from ..metrics.entropy import set_joint, suppressed_joint, uncertainty_from_joint
from ..metrics.summary import category_sets, hierarchy_mass
from .metrics import combine_value_counts
from .worker import local_table


def hierarchy_plan_of(plan, profile) -> dict:
    """``{column: Hierarchy}``: the plan's user hierarchies, validated against the distinct values
    over every shard (the combined :class:`~gpuanon.table.dictionaries.Profile`) with the single-process
    checks and messages."""
    cols = None
    if plan.hierarchies is not None:  # the values of the columns that may be named
        cols = {name: pd.Series(profile.columns[name]["values"], dtype=object)
                for name in plan.schema.categorical_qis}
    return plan.hierarchy_plan(cols)


def bind_plan(enc, plan: dict, tables: dict | None = None, rho=None) -> None:
    """Bind the plan's given hierarchies to the encoding's codes (``enc.hierarchies``, host arrays),
    and with ``rho`` fixed the automatic ones (from their frequency ``tables``)."""
    by_name = {c.name: c for c in enc.columns}
    enc.hierarchies = {name: bind_hierarchy(h, by_name[name], np) for name, h in plan.items() if h != "auto"}
    if rho is not None:
        for name, (ft, _) in (tables or {}).items():  # a loop over columns
            enc.hierarchies[name] = bind_hierarchy(ft.hierarchy(rho), by_name[name], np)


def frequency_tables(run, shards, ss, home_of_shard, enc, plan: dict) -> dict:
    """``{column: (FrequencyTable, rows per (code, target))}`` of the plan's automatic columns, from
    the value x target counts summed over the shards."""
    auto = [j for j, c in enumerate(enc.columns) if plan.get(c.name) == "auto"]
    if not auto:
        return {}
    nt = len(enc.target_values)
    run.stage = "frequency tables of the automatic hierarchies"
    chunks = run.gather([run.call(home_of_shard[i], s, ss[i], "value_counts", nt, auto) for i, s in enumerate(shards)])
    out = {}
    for j, (vals, m) in zip(auto, combine_value_counts(chunks, nt)):  # a loop over columns
        c = enc.columns[j]
        full = np.zeros((c.n_categories, nt), dtype=np.int64)
        full[vals.astype(np.int64)] = m
        out[c.name] = (FrequencyTable.from_counts(full, c.categories, enc.target_values, name=c.name), full)
    return out


def score_hierarchies(home, enc, cands: dict):
    """Worker task: per automatic QI ``j`` (``cands[j] = ([candidate Hierarchy], rows per code, plain)``),
    this home's share of every candidate's mass table for ``U'``
    (:func:`~gpuanon.metrics.summary.hierarchy_mass`), then, when ``plain``, no hierarchy's (cells:
    each class's set of categories; a class's share is additive); and the home's rows per target value."""
    xp = home.xp
    nt = len(enc.target_values)
    if home.n == 0:
        return {j: [np.zeros((full.shape[0], nt)) for _ in range(len(hs) + plain)]
                for j, (hs, full, plain) in cands.items()}, np.zeros(nt)
    cs = ClassStats(local_table(enc, home.keys, None, home.target, xp), home.local, home.n_classes)
    thist = cs.target_hist()
    out = {}
    for j, (hierarchies, full, plain) in cands.items():  # a loop over columns
        lo, hi = cs.code_minmax(j)
        cnt = to_device(full, xp)
        cats = enc.columns[j].categories
        out[j] = [to_host(hierarchy_mass(h, cats, lo, hi, cnt, thist, xp)) for h in hierarchies]  # candidates
        if plain:
            set_id, sets = category_sets(cs, j, len(cats))
            out[j].append(to_host(set_joint(set_id, sets, cnt, thist, xp)))
    return out, to_host(thist.sum(axis=0))


def choose_automatic(run, homes, hs, enc, tables: dict, rho) -> dict:
    """Per automatic column, the rho one process's :func:`~gpuanon.hierarchy.choose_rho` keeps (the
    largest ``U'``, ties to the smaller rho), bound into ``enc.hierarchies``; returns the report's
    ``{column: {...}}`` for those columns."""
    if not tables:
        return {}
    by_name = {c.name: (j, c) for j, c in enumerate(enc.columns)}
    rhos = [rho] if rho is not None else list(RHO_CANDIDATES)
    cands = {by_name[name][0]: ([ft.hierarchy(r) for r in rhos], full.sum(axis=1), rho is None)
             for name, (ft, full) in tables.items()}
    run.stage = "choosing the automatic hierarchies"
    got = run.gather([run.apply(d, h, hs[d], score_hierarchies, enc, cands) for d, h in enumerate(homes)])
    # target counts of the suppressed rows: the table's minus the homes' (the same for every column)
    tsup = next(iter(tables.values()))[1].sum(axis=0) - np.sum([g[1] for g in got], axis=0)
    out = {}
    for name, (ft, full) in tables.items():  # a loop over columns
        j, c = by_name[name]
        u_before = uncertainty_from_joint(full)
        masses = []
        for i in range(len(rhos) + (rho is None)):  # a loop over candidates (then no hierarchy)
            q = np.sum([g[0][j][i] for g in got], axis=0)
            if tsup.sum() > 0:
                q = q + suppressed_joint(full.sum(axis=1).astype(np.float64), tsup)
            masses.append(uncertainty_from_joint(q))
        info = auto_choice(dict(zip(rhos, masses)), masses[len(rhos)] if rho is None else None, u_before,
                           rho is not None)
        if info["rho"] is not None:
            enc.hierarchies[name] = bind_hierarchy(ft.hierarchy(info["rho"]), c, np)
            info["height"] = int(enc.hierarchies[name].hierarchy.height)
        out[name] = info
    return out


def hierarchy_report(enc, metrics: dict, automatic: dict | None = None) -> dict:
    """The report's ``hierarchies`` section, as one process's ``choose_rho`` gives it for user
    hierarchies: source, height, and ``U(T | X)`` before / ``U'(T | X)`` after (the entropy
    coefficients of the metrics: the same joint tables; ``None`` where the metrics have none)."""
    out = {}
    before = metrics.get("entropy_coefficient_before") or {}
    after = metrics.get("entropy_coefficient_after") or {}
    for c in enc.columns:  # a loop over columns
        if c.name in (automatic or {}):  # the choice of rho's own figures (also when no hierarchy won)
            out[c.name] = automatic[c.name]
            continue
        b = enc.hierarchies.get(c.name)
        if b is None:
            continue
        ub, ua = before.get(c.name), after.get(c.name)
        out[c.name] = {"source": b.hierarchy.source or "user", "rho": None, "u_before": ub, "u_after": ua,
                       "height": int(b.hierarchy.height),
                       "loss": None if not ub or ua is None else 1.0 - ua / ub}
    return out


def combine_optimization(parts: list) -> dict | None:
    """The optimization step's counts over the homes (sums; rounds: the most any home ran)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    out = {key: int(sum(p[key] for p in parts)) for key in ("exact_classes", "exact_rows", "returned_groups")}
    out["rounds"] = int(max(p["rounds"] for p in parts))
    return out
