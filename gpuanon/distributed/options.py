"""A cluster run's user hierarchies and optimization step: what one process does, made from the shards.

* **Hierarchies** (a user's :class:`~gpuanon.hierarchy.Hierarchy` or ARX CSV file per categorical
  QI): the plan is the single-process :func:`~gpuanon.hierarchy.hierarchy_plan`, validated
  against the column's distinct values over every shard (:func:`hierarchy_plan_of`); the codes
  follow the hierarchy's leaf order (:func:`~gpuanon.hierarchy.leaf_orders`, passed to
  :func:`.encode.combine_profiles`), and the hierarchy is bound to those codes once here
  (:func:`bind_plan`). The bound hierarchies travel in the :class:`.encode.GlobalEncoding`, so the
  coordinator's spans, the homes' kernel, the published cells, the verification and the metrics
  all read the same ``HierarchySpec`` / ``Table.hierarchies`` as one process.
  ``hierarchies='auto'`` is refused: its rho is chosen by information loss over the whole
  table's final classes (:func:`refuse_automatic`).
* **Optimization step**: partition-local, run by every home on its whole partitions
  (``Home.finish``); :func:`combine_optimization` sums the homes' counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError

AUTO_REFUSED = ("hierarchies='auto' (automatic frequency hierarchies) chooses rho by information loss over "
                "the whole table, which a cluster run does not do; give each column's hierarchy as a file "
                "(--hierarchy COL=FILE.csv; 'gpuanon hierarchy build' writes one) or drop --cluster")


def refuse_automatic(hierarchies) -> None:
    """One clear error when the ``hierarchies`` parameter asks for automatic hierarchies."""
    if hierarchies is None:
        return
    if isinstance(hierarchies, str):
        if hierarchies == "auto":
            raise InputError(AUTO_REFUSED)
        return  # hierarchy_plan says what is wrong with it
    if isinstance(hierarchies, dict) and ("*" in hierarchies or any(
            isinstance(h, str) and h == "auto" for h in hierarchies.values())):
        raise InputError(AUTO_REFUSED)


def profile_values(profiles: list, name: str) -> pd.Series:
    """The distinct values of categorical QI ``name`` over every shard (from their profiles)."""
    parts = []
    for p in profiles:
        col = p["columns"][name]
        idx = col["pairs"].index.get_level_values(0) if "pairs" in col else col["values"].index
        parts.append(pd.Series(list(idx), dtype=object))
    return pd.Series(pd.unique(pd.concat(parts, ignore_index=True)) if parts else [], dtype=object)


def hierarchy_plan_of(est, schema, profiles: list) -> dict:
    """``{column: Hierarchy}``: the estimator's user hierarchies, validated against every shard's values
    with the single-process checks and messages."""
    from ..hierarchy import hierarchy_plan  # noqa: PLC0415

    refuse_automatic(est.hierarchies)
    cols = None
    if est.hierarchies is not None:  # the values of the columns that may be named (read lazily)
        cols = _ProfileColumns(profiles, set(schema.categorical_qis))
    return hierarchy_plan(est.hierarchies, est.rho, cols, schema)


class _ProfileColumns:
    """``cols[name]``: a categorical QI's distinct values over every shard, made when asked for."""

    def __init__(self, profiles, names):
        self.profiles, self.names = profiles, names

    def __getitem__(self, name):
        if name not in self.names:
            raise KeyError(name)
        return profile_values(self.profiles, name)


def bind_plan(enc, plan: dict) -> None:
    """Bind every planned hierarchy to the encoding's codes (``enc.hierarchies``, host arrays)."""
    from ..hierarchy import bind_hierarchy  # noqa: PLC0415

    by_name = {c.name: c for c in enc.columns}
    enc.hierarchies = {name: bind_hierarchy(h, by_name[name], np) for name, h in plan.items()}


def hierarchy_report(enc, metrics: dict) -> dict:
    """The report's ``hierarchies`` section, as one process's ``choose_rho`` gives it for user
    hierarchies: source, height, and ``U(T | X)`` before / ``U'(T | X)`` after (the entropy
    coefficients of the metrics: the same joint tables; ``None`` where the metrics have none)."""
    out = {}
    before = metrics.get("entropy_coefficient_before") or {}
    after = metrics.get("entropy_coefficient_after") or {}
    for c in enc.columns:  # a loop over columns
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
