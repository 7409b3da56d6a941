"""Hierarchies in a fit: the plan from the ``hierarchies`` parameter, binding, and the choice of rho.

A fit (:class:`gpuanon.anonymize.mondrian.Mondrian`) goes through three steps, all here:

1. :func:`hierarchy_plan` -- ``{column: Hierarchy or 'auto'}`` from the estimator's
   ``hierarchies`` and ``rho`` parameters, validated against the data (errors name the
   column and the fix).
2. :func:`initial_hierarchies` -- before partitioning: the frequency table of every automatic
   column (one count pass on the encoded codes) and the hierarchies known already (the user's,
   and the automatic ones when ``rho`` is fixed), bound to the table's category codes
   (:class:`ColumnHierarchy`).
3. :func:`choose_rho` -- after partitioning: for every automatic column, the candidate rho whose
   hierarchy loses least on the final classes (the contract, section 5.6), and the report's
   per-column information.

A bound hierarchy is attached to the fit's own copy of the table with
``Table.bind_hierarchies``; the kernel sees it through ``gpuanon.table.encoding.kernel_specs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import to_device, to_host
from ..errors import SchemaError
from .frequency import RHO_CANDIDATES, FrequencyTable, check_rho
from .tree import Hierarchy

__all__ = ["ColumnHierarchy", "bind_hierarchy", "hierarchy_plan", "leaf_orders", "initial_hierarchies", "choose_rho", "auto_choice"]


@dataclass(frozen=True, eq=False)
class ColumnHierarchy:
    """A hierarchy bound to one encoded column's category codes.

    ``code_levels[code, L]`` is the node above category ``code`` at level ``L`` (on the table's
    device); codes follow the hierarchy's leaf order when the column was encoded in it (user
    hierarchies), so the node covering a class covers its smallest and largest code.
    """

    hierarchy: Hierarchy
    code_levels: Any


def bind_hierarchy(h: Hierarchy, column, xp=np) -> ColumnHierarchy:
    """Bind ``h`` to an encoded categorical column (every category must be one of its leaves).

    Raises :class:`~gpuanon.errors.InputError` naming the values the hierarchy lacks.
    """
    h.validate_against(column.categories)
    leaf = to_host(h.leaf_codes(column.categories))
    return ColumnHierarchy(h, to_device(h.levels[leaf], xp))


def hierarchy_plan(hierarchies, rho, df, schema) -> dict:
    """``{column: Hierarchy or 'auto'}`` from the ``hierarchies`` and ``rho`` parameters, validated.

    ``hierarchies`` is None, ``'auto'`` (every categorical QI) or a dict mapping a column to a
    :class:`Hierarchy`, an ARX CSV path or ``'auto'`` (the key ``'*'`` with ``'auto'`` stands for
    every categorical QI not named). Errors are :class:`~gpuanon.errors.SchemaError` naming the
    parameter or column and the fix.
    """
    spec = hierarchies
    if rho is not None:
        try:
            check_rho(rho)
        except ValueError as exc:
            raise SchemaError(str(exc)) from None
    if spec is None:
        if rho is not None:
            raise SchemaError(f"rho = {rho} applies to automatic hierarchies; add --hierarchies auto "
                              f"(hierarchies='auto') or drop rho")
        return {}
    if isinstance(spec, str):
        if spec != "auto":
            raise SchemaError(f"hierarchies '{spec}' is not understood; use 'auto' or give "
                              f"COLUMN=FILE.csv pairs")
        spec = {c: "auto" for c in schema.categorical_qis}
    spec = dict(spec)
    if "*" in spec:  # every other categorical QI: automatic
        star = spec.pop("*")
        if not (isinstance(star, str) and star == "auto"):
            raise SchemaError(f"hierarchies key '*' stands for every other categorical QI and takes only "
                              f"'auto', got {star!r}; name the column instead")
        spec = {**{c: "auto" for c in schema.categorical_qis if c not in spec}, **spec}
    plan = {}
    for col, h in dict(spec).items():
        if col not in schema.quasi_identifiers:
            raise SchemaError(f"hierarchy given for '{col}', which is not a quasi-identifier; "
                              f"add it to --qi or drop the hierarchy")
        if schema.kinds[col] != "categorical":
            raise SchemaError(f"hierarchy given for '{col}', which is numeric; declare it "
                              f"--categorical {col} or drop the hierarchy")
        if isinstance(h, str) and h == "auto":
            if schema.target is None:
                raise SchemaError("automatic hierarchies need a target column; pass --target COL")
            plan[col] = "auto"
            continue
        if not isinstance(h, Hierarchy):
            h = Hierarchy.from_arx_csv(h, column=col)
        h.validate_against(df[col].unique())
        leaf_text = set(h.labels[: h.n_leaves])
        for node in range(h.n_leaves, h.n_nodes):
            if h.labels[node] in leaf_text and h.n_under[node] > 1:
                raise SchemaError(f"hierarchy for '{col}': node '{h.labels[node]}' (level "
                                  f"{int(h.node_level[node])}) covers several leaves but has the same text as "
                                  f"a leaf, so the output would be ambiguous; rename the node")
        plan[col] = h
    return plan


def leaf_orders(plan: dict) -> dict:
    """``{column: values in leaf order}`` of the plan's given hierarchies: the order to encode in."""
    return {c: [h.leaves[i] for i in h.leaf_order()] for c, h in plan.items() if h != "auto"}


def initial_hierarchies(table, plan: dict, rho, xp) -> tuple[dict, dict]:
    """The hierarchies known before partitioning, bound, and the frequency tables of auto columns.

    Returns ``(bound, freq_tables)``: ``bound`` maps a column to its :class:`ColumnHierarchy`
    (the user's hierarchies; the automatic ones only when ``rho`` is fixed), ``freq_tables`` an
    automatic column to its :class:`~gpuanon.hierarchy.FrequencyTable` (one count of the codes
    on the table's device).
    """
    bound, tables = {}, {}
    for j, col in enumerate(table.columns):
        h = plan.get(col.name)
        if h is None:
            continue
        if isinstance(h, str):  # 'auto'
            ft = FrequencyTable.from_codes(table.keys[j], col.categories, (table.target, table.target_values),
                                           name=col.name, xp=xp)
            tables[col.name] = ft
            if rho is not None:
                bound[col.name] = bind_hierarchy(ft.hierarchy(rho), col, xp)
        else:
            bound[col.name] = bind_hierarchy(h, col, xp)
    return bound, tables


def choose_rho(table, scorer, freq_tables: dict, plan: dict, rho, bound: dict, xp) -> tuple[dict, dict]:
    """Per automatic column, the candidate rho whose hierarchy loses least (the contract, 5.6).

    Every candidate is applied to the final classes (a class's cell: the lowest node covering
    its codes) and scored by ``scorer.u_after(j, hierarchy)``, ``U'(target | column)`` of the
    contract's section 7 (``scorer``: a ``gpuanon.metrics.HierarchyScorer`` of the table and
    the final labels); columns are independent, so the total entropy-coefficient loss is
    smallest when each column's ``U'`` is largest. Ties go to the smaller rho (finer groups).
    With rho chosen (``rho`` None), "no hierarchy" (cells: the class's set of values,
    ``scorer.u_plain(j)``) is a candidate too, under the key ``'none'``: it wins when its ``U'``
    is strictly larger, and the column is then generalized by sets (left unbound), so the
    automatic choice never loses more than no hierarchy.

    Returns ``(info, bound)``: the report's ``{column: {...}}`` (every candidate's ``U'`` and
    loss, and ``choice``: the winning key) and the bound hierarchies with the chosen ones.
    """
    out, bound = {}, dict(bound)
    for j, col in enumerate(table.columns):
        if col.name not in plan:
            continue
        u_before = scorer.u_before(j)

        def loss(u, ub=u_before):
            return None if not ub or u is None else 1.0 - u / ub

        if col.name in freq_tables:
            ft = freq_tables[col.name]
            rhos = [rho] if rho is not None else list(RHO_CANDIDATES)
            scores = {r: scorer.u_after(j, ft.hierarchy(r)) for r in rhos}
            plain = None if rho is not None else scorer.u_plain(j)
            info = auto_choice(scores, plain, u_before, rho is not None)
            if info["rho"] is None:  # no hierarchy: generalized by sets
                out[col.name] = info
                continue
            bound[col.name] = bind_hierarchy(ft.hierarchy(info["rho"]), col, xp)
        else:
            info = {"source": bound[col.name].hierarchy.source or "user", "rho": None}
        h = bound[col.name].hierarchy
        u = scorer.u_after(j, h)
        info.update(u_before=u_before, u_after=u, height=int(h.height), loss=loss(u))
        out[col.name] = info
    return out, bound


def auto_choice(scores: dict, plain, u_before, rho_fixed: bool) -> dict:
    """The report's entry of one automatic column from its candidates' ``U'``: ``scores`` per rho
    (the largest wins, ties to the smaller rho) and ``plain``, no hierarchy's (None: not a
    candidate; wins only when strictly larger). ``rho`` is None when no hierarchy wins."""
    def loss(u):
        return None if not u_before or u is None else 1.0 - u / u_before

    def key(u):
        return u if u is not None else 0.0

    best = max(scores, key=lambda r: (key(scores[r]), -r))
    cands = {str(r): v for r, v in scores.items()}
    none = plain is not None and key(plain) > key(scores[best])
    if plain is not None:
        cands["none"] = plain
    u = plain if none else scores[best]
    return {"source": "auto", "rho": None if none else best, "rho_fixed": rho_fixed,
            "choice": "none" if none else str(best), "candidates": cands,
            "candidate_loss": {r: loss(v) for r, v in cands.items()},
            "u_before": u_before, "u_after": u, "height": None, "loss": loss(u)}
