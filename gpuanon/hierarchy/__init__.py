"""Generalization hierarchies for categorical quasi-identifiers (the contract, section 5).

A :class:`Hierarchy` is a tree over one column's values, from the leaves (the values) to the root
``*`` (the cell suppressed), stored as one matrix of node ids per leaf and level; how, in
:mod:`~gpuanon.hierarchy.tree`.

Modules: :mod:`~gpuanon.hierarchy.tree` (the :class:`Hierarchy` type and its queries; the lowest
common node itself is :func:`kernels.hierarchy.lowest_common_node`), :mod:`~.labels` (node
labels, paths to node ids), :mod:`~.frequency`, :mod:`~.masking`, :mod:`~.arx` (the builders
below) and :mod:`~.plan` (hierarchies in a fit: the plan, binding to encoded codes, the choice of
rho). Every public name is importable from ``gpuanon.hierarchy``.

Builders:

* :func:`frequency_hierarchy` -- the thesis's automatic hierarchy (algorithms 1 and 2): values
  with the same majority target value ``t*(v)`` and the same percentile bucket ``b(v)`` of that
  majority's share form one group; ``H_rho`` = leaves, groups, ``*``. :func:`frequency_table`
  does the one group-by count pass; every ``rho`` derives from its table
  (:meth:`FrequencyTable.hierarchy`), so trying all of :data:`RHO_CANDIDATES` costs one pass.
  On an encoded table, :meth:`FrequencyTable.from_codes` counts the column's codes (one
  ``bincount`` on the table's device) instead of hashing the text again;
  :meth:`FrequencyTable.from_counts` takes counts already made (a cluster's, summed over shards).
* :func:`masking_hierarchy` -- code-like strings masked one character per level
  (``13053`` -> ``1305*`` -> ``130**`` -> ... -> ``*``).
* :meth:`Hierarchy.from_arx_csv` -- a user's hierarchy in ARX's CSV layout
  (``leaf;level1;...;*``, one row per leaf, no header).

Group labels of frequency hierarchies: by default the group's values joined by ``|`` in leaf
order (``"HS-grad|Some-college"``; a group of one value is labelled by that value), the same text
the set generalization of :mod:`gpuanon.anonymize.generalize` writes for that set; with
``labels="target"``: ``"<t*> <lo>-<hi>%"`` (``"<=50K 80-90%"``). Missing values are one leaf,
labelled ``NaN``.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"edu": ["a", "a", "b", "b", "c", "c"],
...                    "y":   [0,   0,   0,   0,   1,   0]})
>>> h = frequency_hierarchy(df["edu"], df["y"], rho=10, name="edu")
>>> h.to_frame()
  level0 level1 level2
0      c      c      *
1      a    a|b      *
2      b    a|b      *
>>> import numpy as np
>>> node, level = h.lowest_common_node(np.array([[False, True, True], [True, False, True]]))
>>> h.labels_of(node).tolist(), level.tolist()
(['a|b', '*'], [1, 2])
"""

from __future__ import annotations

from .arx import ARX_DELIMITER
from .frequency import (
    RHO_CANDIDATES,
    FrequencyTable,
    build_hierarchies,
    build_hierarchy_candidates,
    check_rho,
    count_table,
    frequency_hierarchies,
    frequency_hierarchy,
    frequency_table,
    target_codes,
)
from .labels import GROUP_SEPARATOR, MISSING_LABEL, ROOT
from .masking import masking_hierarchy
from .plan import ColumnHierarchy, auto_choice, bind_hierarchy, choose_rho, hierarchy_plan, initial_hierarchies, leaf_orders
from .tree import Hierarchy

__all__ = [
    "RHO_CANDIDATES",
    "ROOT",
    "MISSING_LABEL",
    "GROUP_SEPARATOR",
    "ARX_DELIMITER",
    "Hierarchy",
    "FrequencyTable",
    "count_table",
    "target_codes",
    "frequency_table",
    "frequency_hierarchy",
    "frequency_hierarchies",
    "masking_hierarchy",
    "build_hierarchies",
    "build_hierarchy_candidates",
    "check_rho",
    "ColumnHierarchy",
    "bind_hierarchy",
    "hierarchy_plan",
    "initial_hierarchies",
    "choose_rho",
    "auto_choice",
    "leaf_orders",
]
