"""What the Mondrian kernel knows about each QI column: one small typed spec per column.

* :class:`CategoricalSpec` -- a categorical column without a hierarchy: its keys are category
  codes; the span of a partition is its number of distinct codes over the number of categories.
* :class:`NumericSpec` -- a numeric column: ``values`` is ``None`` for float32 keys (decoded from
  their bits) or the sorted distinct values (a rank key is a position in them), on the keys'
  device; the span is the decoded value range over the column's global range.
* :class:`HierarchySpec` -- a categorical column generalized by a hierarchy: codes are in the
  hierarchy's leaf order, ``levels[code]`` the node above the code at every level and
  ``frac[node]`` the share of the leaves under the node; the span of a partition is ``frac`` of
  the lowest common node of its smallest and largest code (:mod:`kernels.hierarchy`).

The specs of an encoded table are built in one place, ``gpuanon.table.encoding.kernel_specs``;
:func:`check_specs` refuses anything else at the kernel's entry.

Examples
--------
>>> check_specs([CategoricalSpec(), NumericSpec(None)])
[CategoricalSpec(), NumericSpec(values=None)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .keys import decode_keys


@dataclass(frozen=True)
class CategoricalSpec:
    """A categorical column: keys are category codes (the count comes as ``n_categories``)."""


@dataclass(frozen=True, eq=False)
class NumericSpec:
    """A numeric column: ``values`` None (float32 keys) or the sorted distinct values (rank keys)."""

    values: Any = None

    def decode(self, keys, xp=np):
        """Values (float64) of non-missing keys."""
        return decode_keys(keys, "f32" if self.values is None else self.values, xp)

    def __repr__(self) -> str:
        shown = None if self.values is None else f"<{int(self.values.shape[0])} values>"
        return f"NumericSpec(values={shown})"


@dataclass(frozen=True, eq=False)
class HierarchySpec:
    """A categorical column generalized by a hierarchy (codes in its leaf order).

    ``levels``: ``(n_categories, height + 1)`` node id of every code at every level;
    ``frac``: ``(n_nodes,)`` float64 share of the leaves under every node. Both on the keys' device.
    """

    levels: Any
    frac: Any

    def __repr__(self) -> str:
        return f"HierarchySpec(<{int(self.levels.shape[0])} leaves, height {int(self.levels.shape[1]) - 1}>)"


ColumnSpec = Union[CategoricalSpec, NumericSpec, HierarchySpec]
SPEC_TYPES = (CategoricalSpec, NumericSpec, HierarchySpec)


def check_specs(col_info) -> list:
    """The kernel's column specs as a list; TypeError naming the column for anything that is not one."""
    specs = list(col_info)
    for j, spec in enumerate(specs):
        if not isinstance(spec, SPEC_TYPES):
            raise TypeError(f"column {j}: a {type(spec).__name__} is not a kernels.specs spec; use CategoricalSpec(), "
                            f"NumericSpec(values or None) or HierarchySpec(levels, frac) "
                            f"(gpuanon.table.encoding.kernel_specs builds them for an encoded table)")
    return specs
