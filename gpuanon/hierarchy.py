"""Generalization hierarchies for categorical quasi-identifiers (the contract, section 5).

A :class:`Hierarchy` is a tree over one column's values: the leaves are the values, every level
above groups the level below, and the last level is the root ``*`` (the cell is suppressed).
It is stored as one integer matrix ``levels`` of shape ``(n_leaves, height + 1)``: row ``i`` is
the path of leaf ``i`` from the leaf (column 0) to the root (last column), as node ids that are
global within the hierarchy (leaves are ``0 .. n_leaves - 1``, then the nodes of level 1, and so
on; the root is the last id). Every query is a whole-array operation on that matrix and works with
NumPy or CuPy arrays (``xp``).

Builders:

* :func:`frequency_hierarchy` -- the thesis's automatic hierarchy (algorithms 1 and 2): values
  with the same majority target value ``t*(v)`` and the same percentile bucket ``b(v)`` of that
  majority's share form one group; ``H_rho`` = leaves, groups, ``*``. :func:`frequency_table`
  does the one group-by count pass; every ``rho`` derives from its table
  (:meth:`FrequencyTable.hierarchy`), so trying all of :data:`RHO_CANDIDATES` costs one pass.
  On an encoded table, :meth:`FrequencyTable.from_codes` counts the column's codes (one
  ``bincount`` on the table's device) instead of hashing the text again.
* :func:`masking_hierarchy` -- code-like strings masked one character per level
  (``13053`` -> ``1305*`` -> ``130**`` -> ... -> ``*``).
* :meth:`Hierarchy.from_arx_csv` -- a user's hierarchy in ARX's CSV layout
  (``leaf;level1;...;*``, one row per leaf, no header).

Group labels of frequency hierarchies: by default the group's values joined by ``|`` in leaf
order (``"HS-grad|Some-college"``; a group of one value is labelled by that value), the same text
the set generalization of :mod:`gpuanon.generalize` writes for that set; with
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

import csv
import io
import os
from dataclasses import dataclass, field
from fractions import Fraction
from numbers import Integral, Real
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from .backend import array_module, to_host
from .encoding import _codes_sorted, _isna, _sort_key
from .errors import InputError

__all__ = [
    "RHO_CANDIDATES",
    "ROOT",
    "MISSING_LABEL",
    "GROUP_SEPARATOR",
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
]

RHO_CANDIDATES = (1, 2, 4, 5, 10, 20, 25, 50, 100)
"""The default percentile ranges tried per column (the contract, section 5.6)."""

ROOT = "*"
"""Label of the root of built hierarchies (the suppressed cell)."""

MISSING_LABEL = "NaN"
"""Label of the leaf that stands for a missing value."""

GROUP_SEPARATOR = "|"
"""Separator of the values in a frequency group's label (as in :mod:`gpuanon.generalize`)."""

ARX_DELIMITER = ";"


def _text(v: Any) -> str:
    """The label text of a value (missing -> ``NaN``)."""
    if _isna(v):
        return MISSING_LABEL
    if isinstance(v, (np.generic,)):
        v = v.item()
    return str(v)


def _where(name: str | None, source: str | None) -> str:
    parts = []
    if name is not None:
        parts.append(f"column {name!r}")
    if source is not None:
        parts.append(f"file {source}")
    return "hierarchy" + (" (" + ", ".join(parts) + ")" if parts else "")


# ============================================================================ the tree
class Hierarchy:
    """A generalization hierarchy (a tree) over the values of one categorical column.

    Build one with :meth:`from_labels`, :meth:`from_arx_csv`, :func:`frequency_hierarchy` or
    :func:`masking_hierarchy` rather than with the constructor.

    Attributes
    ----------
    name : str or None
        The column it is for.
    leaves : list
        The column's values (leaf ``i`` is ``leaves[i]``), in the builder's stable order.
    levels : numpy.ndarray
        ``(n_leaves, height + 1)`` int64 node ids; ``levels[:, 0] == arange(n_leaves)`` and the
        last column is the root.
    labels : list of str
        Text of every node id (leaves' own text, group labels, the root's label).
    height : int
        Number of levels above the leaves (the root is at level ``height``).
    node_level : numpy.ndarray
        Level of every node id.
    n_under : numpy.ndarray
        Number of leaves under every node id (1 for a leaf, ``n_leaves`` for the root).
    parent : numpy.ndarray
        Parent node id of every node id (-1 for the root).
    rho : int or float or None
        The percentile range a frequency hierarchy was built with.
    source : str or None
        The file it was read from.

    Examples
    --------
    >>> h = Hierarchy.from_labels(["x", "y", "z"], [["G", "*"], ["G", "*"], ["z", "*"]])
    >>> h.levels.tolist()
    [[0, 3, 5], [1, 3, 5], [2, 4, 5]]
    >>> h.labels
    ['x', 'y', 'z', 'G', 'z', '*']
    >>> h.height, h.n_under.tolist()
    (2, [1, 1, 1, 2, 1, 3])
    """

    def __init__(self, leaves: Sequence, levels: np.ndarray, labels: Sequence[str],
                 name: str | None = None, rho: Any = None, source: str | None = None):
        levels = np.ascontiguousarray(np.asarray(levels, dtype=np.int64))
        if levels.ndim != 2 or levels.shape[1] < 2 or levels.shape[0] < 1:
            raise ValueError("levels must be (n_leaves >= 1, height + 1 >= 2)")
        n = levels.shape[0]
        if len(leaves) != n:
            raise ValueError(f"{len(leaves)} leaves but {n} rows of levels")
        if not np.array_equal(levels[:, 0], np.arange(n)):
            raise ValueError("levels[:, 0] must be the leaf ids 0 .. n_leaves - 1")
        self.name = name
        self.leaves = list(leaves)
        self.levels = levels
        self.labels = [str(s) for s in labels]
        self.height = levels.shape[1] - 1
        self.rho = rho
        self.source = source
        n_nodes = len(self.labels)
        if levels.max() != n_nodes - 1 or np.unique(levels[:, -1]).shape[0] != 1:
            raise ValueError("the last column of levels must be one root, the last node id")
        node_level = np.full(n_nodes, -1, dtype=np.int64)
        parent = np.full(n_nodes, -2, dtype=np.int64)
        if levels[0, -1] != n_nodes - 1:
            raise ValueError("the root must be the last node id")
        for lev in range(self.height + 1):
            col = levels[:, lev]
            if (node_level[col] >= 0).any():
                raise ValueError(f"a node id appears at two levels (level {lev})")
            node_level[col] = lev
            par = levels[:, lev + 1] if lev < self.height else np.full(n, -1, dtype=np.int64)
            parent[col] = par
            if (parent[col] != par).any():
                raise ValueError(f"a node at level {lev} has two parents: not a tree")
        if (node_level < 0).any():
            raise ValueError("node ids must be dense: some id in 0 .. n_nodes - 1 is unused")
        self.node_level = node_level
        self.parent = parent
        self.n_under = np.bincount(levels.ravel(), minlength=n_nodes).astype(np.int64)
        self._order: np.ndarray | None = None
        self._order_is_identity = False
        self._device: dict = {}

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_labels(cls, leaves: Sequence, paths: Sequence[Sequence[str]] | np.ndarray,
                    name: str | None = None, rho: Any = None, source: str | None = None,
                    _lines: Sequence[int] | None = None) -> "Hierarchy":
        """A hierarchy from each leaf's path of labels (level 1 to the root).

        Nodes are identified by ``(level, label)``; node ids are given level by level, in order
        of first appearance down the leaves. A label with two different parents is an error.

        Parameters
        ----------
        leaves : sequence
            The values (leaf ``i`` is ``leaves[i]``); their texts must be distinct.
        paths : sequence of sequences of str
            ``paths[i]`` = labels of leaf ``i``'s ancestors, level 1 first, the root last; all of
            one length (the height), the same root for all.
        name : str, optional
            Column name (used in messages).

        Examples
        --------
        >>> h = Hierarchy.from_labels(["1", "2"], [["low", "*"], ["low", "*"]], name="c")
        >>> h.to_frame()
          level0 level1 level2
        0      1    low      *
        1      2    low      *
        """
        n = len(leaves)
        where = _where(name, source)
        if n == 0:
            raise InputError(f"{where}: no leaves")
        rows = [list(p) for p in paths]
        if len(rows) != n:
            raise InputError(f"{where}: {n} leaves but {len(rows)} paths")
        depth = {len(r) for r in rows}
        if len(depth) != 1 or 0 in depth:
            raise InputError(f"{where}: every leaf needs a path of the same length >= 1 "
                             f"(level 1 .. root); got lengths {sorted(depth)}")
        height = depth.pop()
        lab = np.array([[str(x) for x in r] for r in rows], dtype=object).reshape(n, height)
        line = (lambda i: f"line {_lines[i]}") if _lines is not None else (lambda i: f"leaf {i}")
        leaf_text = [_text(v) for v in leaves]
        seen: dict[str, int] = {}
        for i, t in enumerate(leaf_text):
            if t in seen:
                raise InputError(f"{where}: leaf {t!r} is listed twice ({line(seen[t])} and "
                                 f"{line(i)}); keep one row per value")
            seen[t] = i
        roots = lab[:, -1]
        if (roots != roots[0]).any():
            bad = int(np.flatnonzero(roots != roots[0])[0])
            raise InputError(f"{where}: the last column must be the same root for every row; "
                             f"{line(0)} ends with {roots[0]!r} but {line(bad)} ends with "
                             f"{roots[bad]!r}; end every row with the same root (e.g. '*')")
        levels = np.empty((n, height + 1), dtype=np.int64)
        levels[:, 0] = np.arange(n)
        labels = list(leaf_text)
        offset = n
        for lev in range(1, height + 1):
            codes, uniq = pd.factorize(lab[:, lev - 1], sort=False)
            levels[:, lev] = codes + offset
            labels.extend(str(u) for u in uniq)
            offset += len(uniq)
        # a tree: every node of level L (1 <= L < height) has one parent
        for lev in range(1, height):
            child, par = levels[:, lev], levels[:, lev + 1]
            first_par = np.full(offset, -1, dtype=np.int64)
            first_row = np.full(offset, -1, dtype=np.int64)
            rev = np.arange(n)[::-1]
            first_par[child[rev]] = par[rev]
            first_row[child[rev]] = rev
            bad = np.flatnonzero(first_par[child] != par)
            if bad.size:
                i = int(bad[0])
                j = int(first_row[child[i]])
                raise InputError(
                    f"{where}: {labels[child[i]]!r} at level {lev} has two parents: "
                    f"{labels[par[j]]!r} ({line(j)}) and {labels[par[i]]!r} ({line(i)}); a "
                    f"hierarchy must be a tree: give each group one parent or rename one of them")
        return cls(list(leaves), levels, labels, name=name, rho=rho, source=source)

    # ---------------------------------------------------------------- basic properties
    @property
    def n_leaves(self) -> int:
        """Number of leaves (distinct values)."""
        return self.levels.shape[0]

    @property
    def n_nodes(self) -> int:
        """Number of nodes, leaves and root included."""
        return len(self.labels)

    @property
    def root(self) -> int:
        """Node id of the root."""
        return self.n_nodes - 1

    @property
    def leaf_labels(self) -> list[str]:
        """Text of every leaf."""
        return self.labels[: self.n_leaves]

    def __repr__(self) -> str:
        return (f"Hierarchy(name={self.name!r}, n_leaves={self.n_leaves}, height={self.height}, "
                f"n_nodes={self.n_nodes}" + (f", rho={self.rho}" if self.rho is not None else "")
                + ")")

    def equals(self, other: "Hierarchy") -> bool:
        """Same leaves' text, same levels, same labels.

        Examples
        --------
        >>> a = masking_hierarchy(["123", "124"])
        >>> a.equals(masking_hierarchy(["124", "123"]))
        True
        """
        return (isinstance(other, Hierarchy) and self.labels == other.labels
                and np.array_equal(self.levels, other.levels))

    def _on(self, xp, what: str):
        """``levels`` / ``n_under`` / ``order`` on ``xp``'s device (cached)."""
        host = {"levels": self.levels, "n_under": self.n_under}.get(what)
        if host is None:
            host = self.leaf_order()
        if xp is np:
            return host
        key = (xp.__name__, what)
        if key not in self._device:
            self._device[key] = xp.asarray(host)
        return self._device[key]

    # ---------------------------------------------------------------- orders
    def leaf_order(self) -> np.ndarray:
        """An order of the leaves in which every node's leaves are contiguous.

        Depth first: leaves sort by their ancestors from the top level down (nodes in order of
        their first leaf), then by their own index, so within a group the stored order (for
        frequency hierarchies the contract's category order) is kept. Encode the column's
        categories in this order and Mondrian's ordinal cuts follow the hierarchy.

        Returns
        -------
        numpy.ndarray
            int64 leaf indices, a permutation of ``0 .. n_leaves - 1``.

        Examples
        --------
        >>> h = Hierarchy.from_labels(list("abc"), [["G", "*"], ["H", "*"], ["G", "*"]])
        >>> h.leaf_order().tolist()
        [0, 2, 1]
        """
        if self._order is None:
            keys = [np.arange(self.n_leaves)] + [self.levels[:, lev] for lev in range(1, self.height)]
            self._order = np.lexsort(keys).astype(np.int64)
            self._order_is_identity = bool((self._order == np.arange(self.n_leaves)).all())
        return self._order

    def in_leaf_order(self) -> "Hierarchy":
        """The same hierarchy with its leaves stored in :meth:`leaf_order`.

        Leaf indices then equal positions, so with a column's codes in this order the lowest and
        highest code of a class give its lowest common node
        (:meth:`lowest_common_node_of_pair`).

        Examples
        --------
        >>> h = Hierarchy.from_labels(list("abc"), [["G", "*"], ["H", "*"], ["G", "*"]])
        >>> h.in_leaf_order().leaf_labels
        ['a', 'c', 'b']
        """
        o = self.leaf_order()
        paths = np.array(self.labels, dtype=object)[self.levels[o][:, 1:]]
        return Hierarchy.from_labels([self.leaves[i] for i in o], paths.tolist(), name=self.name,
                                     rho=self.rho, source=self.source)

    # ---------------------------------------------------------------- queries
    def lowest_common_node_of_pair(self, a, b, xp=None):
        """Lowest node covering leaf ``a[i]`` and leaf ``b[i]``, and its level, for every ``i``.

        Parameters
        ----------
        a, b : array of int
            Leaf indices (NumPy or CuPy), same shape ``(m,)``.
        xp : module, optional
            ``numpy`` or ``cupy``; inferred from ``a`` when omitted.

        Returns
        -------
        node, level : arrays of int64, shape ``(m,)``

        Examples
        --------
        >>> import numpy as np
        >>> h = Hierarchy.from_labels(list("abc"), [["G", "*"], ["G", "*"], ["c", "*"]])
        >>> node, level = h.lowest_common_node_of_pair(np.array([0, 0, 2]), np.array([0, 1, 1]))
        >>> h.labels_of(node).tolist(), level.tolist()
        (['a', 'G', '*'], [0, 1, 2])
        """
        xp = array_module(a) if xp is None else xp
        lv = self._on(xp, "levels")
        pa, pb = lv[xp.asarray(a, dtype=xp.int64)], lv[xp.asarray(b, dtype=xp.int64)]
        level = xp.argmax(pa == pb, axis=-1).astype(xp.int64)  # the root column always matches
        node = xp.take_along_axis(pa, level[..., None], axis=-1)[..., 0]
        return node, level

    def lowest_common_node(self, leaf_sets, xp=None):
        """Lowest node covering all the leaves of each row of a membership matrix.

        Because every node's leaves are contiguous in :meth:`leaf_order`, the lowest node covering
        a set covers exactly its first and last leaf in that order; the answer is the first level
        at which those two leaves' paths meet (whole-array: a permutation of the columns, two
        ``argmax`` and one comparison of two paths per row).

        Parameters
        ----------
        leaf_sets : array of bool, shape ``(m, n_leaves)``
            Row ``r``: the leaves present in class ``r`` (NumPy or CuPy).
        xp : module, optional
            ``numpy`` or ``cupy``; inferred from ``leaf_sets`` when omitted.

        Returns
        -------
        node : array of int64, shape ``(m,)``
            Node id (a single leaf gives that leaf, at level 0); -1 for a row with no leaf.
        level : array of int64, shape ``(m,)``
            The node's level; -1 for a row with no leaf.

        Examples
        --------
        >>> import numpy as np
        >>> h = Hierarchy.from_labels(list("abc"), [["G", "*"], ["G", "*"], ["c", "*"]])
        >>> sets = np.array([[0, 1, 0], [1, 1, 0], [1, 0, 1], [0, 0, 0]], dtype=bool)
        >>> node, level = h.lowest_common_node(sets)
        >>> node.tolist(), level.tolist()
        ([1, 3, 5, -1], [0, 1, 2, -1])
        """
        xp = array_module(leaf_sets) if xp is None else xp
        s = xp.asarray(leaf_sets).astype(bool, copy=False)
        if s.ndim != 2 or s.shape[1] != self.n_leaves:
            raise ValueError(f"leaf_sets must be (m, {self.n_leaves}), got {tuple(s.shape)}")
        m = s.shape[0]
        if m == 0:
            e = xp.zeros(0, dtype=xp.int64)
            return e, e.copy()
        order = self._on(xp, "order")
        if not self._order_is_identity:
            s = s[:, order]
        n = self.n_leaves
        first = xp.argmax(s, axis=1)
        last = (n - 1) - xp.argmax(s[:, ::-1], axis=1)
        present = s[xp.arange(m), first]
        node, level = self.lowest_common_node_of_pair(order[first], order[last], xp=xp)
        node = xp.where(present, node, -1)
        level = xp.where(present, level, -1)
        return node, level

    def n_leaves_under_lcn(self, leaf_sets, xp=None):
        """Number of leaves under each row's lowest common node (0 for an empty row).

        Divided by :attr:`n_leaves` it is the contract's categorical span with a hierarchy.

        Examples
        --------
        >>> import numpy as np
        >>> h = Hierarchy.from_labels(list("abc"), [["G", "*"], ["G", "*"], ["c", "*"]])
        >>> h.n_leaves_under_lcn(np.array([[1, 0, 0], [1, 1, 0], [0, 1, 1]], bool)).tolist()
        [1, 2, 3]
        """
        xp = array_module(leaf_sets) if xp is None else xp
        node, _ = self.lowest_common_node(leaf_sets, xp=xp)
        under = self._on(xp, "n_under")
        return xp.where(node >= 0, under[xp.maximum(node, 0)], 0)

    def span(self, leaf_sets, xp=None):
        """Normalized span of each row: leaves under its lowest common node / all leaves.

        Examples
        --------
        >>> import numpy as np
        >>> h = Hierarchy.from_labels(list("abcd"), [["G", "*"], ["G", "*"], ["c", "*"], ["d", "*"]])
        >>> h.span(np.array([[1, 1, 0, 0]], bool)).tolist()
        [0.5]
        """
        xp = array_module(leaf_sets) if xp is None else xp
        return self.n_leaves_under_lcn(leaf_sets, xp=xp) / float(self.n_leaves)

    def leaves_under(self, node) -> Any:
        """Number of leaves under node id(s) ``node``.

        Examples
        --------
        >>> h = masking_hierarchy(["123", "124", "135"])
        >>> h.leaves_under(h.root), h.leaves_under(0)
        (3, 1)
        """
        if np.isscalar(node):
            return int(self.n_under[int(node)])
        xp = array_module(node)
        return self._on(xp, "n_under")[node]

    def labels_of(self, nodes) -> np.ndarray:
        """Text of node ids (a host object array; -1 gives ``None``).

        Examples
        --------
        >>> masking_hierarchy(["123", "124"]).labels_of([0, 2, 3]).tolist()
        ['123', '12*', '1**']
        """
        nodes = to_host(nodes).astype(np.int64)
        lab = np.array(self.labels + [None], dtype=object)
        return lab[np.where(nodes >= 0, nodes, len(self.labels))]

    def at_level(self, level: int) -> np.ndarray:
        """Node id of every leaf's ancestor at ``level`` (``levels[:, level]``)."""
        return self.levels[:, level]

    # ---------------------------------------------------------------- data <-> leaves
    def _missing_values(self, values) -> tuple[np.ndarray, list, list[str]]:
        codes, uniques = pd.factorize(pd.Series(values) if not isinstance(values, pd.Series)
                                      else values, sort=False, use_na_sentinel=False)
        index = {t: i for i, t in enumerate(self.leaf_labels)}
        texts = [_text(u) for u in uniques]
        remap = np.array([index.get(t, -1) for t in texts], dtype=np.int64)
        missing = [t for t, r in zip(texts, remap) if r < 0]
        return remap[codes] if len(codes) else np.zeros(0, np.int64), texts, missing

    def validate_against(self, values) -> None:
        """Raise :class:`~gpuanon.errors.InputError` unless every value of the data is a leaf.

        Values match leaves by text (a missing value matches the leaf ``NaN``).

        Examples
        --------
        >>> h = Hierarchy.from_labels(["a", "b"], [["*"], ["*"]], name="c")
        >>> h.validate_against(["a", "b", "a"])
        >>> h.validate_against(["a", "z"])
        Traceback (most recent call last):
        ...
        gpuanon.errors.InputError: hierarchy (column 'c') lacks 1 value of the data: 'z'; add them to the hierarchy (one row per value: value;...;*)
        """
        _, _, missing = self._missing_values(values)
        if missing:
            shown = ", ".join(repr(t) for t in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            target = self.source if self.source is not None else "the hierarchy"
            raise InputError(
                f"{_where(self.name, self.source)} lacks {len(missing)} value"
                f"{'s' if len(missing) > 1 else ''} of the data: {shown}{more}; add them to "
                f"{target} (one row per value: value;...;{self.labels[-1]})")

    def leaf_codes(self, values, xp=np):
        """Leaf index of every value (matched by text); unknown values raise ``InputError``.

        Examples
        --------
        >>> h = Hierarchy.from_labels(["a", "b"], [["*"], ["*"]])
        >>> h.leaf_codes(["b", "a", "b"]).tolist()
        [1, 0, 1]
        """
        codes, _, missing = self._missing_values(values)
        if missing:
            self.validate_against(values)
        return xp.asarray(codes)

    # ---------------------------------------------------------------- I/O
    def to_frame(self) -> pd.DataFrame:
        """One row per leaf, columns ``level0 .. level<height>`` (labels), for display.

        Examples
        --------
        >>> masking_hierarchy(["13053", "13068"]).to_frame()
          level0 level1 level2 level3 level4 level5
        0  13053  1305*  130**  13***  1****      *
        1  13068  1306*  130**  13***  1****      *
        """
        lab = np.array(self.labels, dtype=object)[self.levels]
        return pd.DataFrame(lab, columns=[f"level{i}" for i in range(self.height + 1)])

    def to_arx_csv(self, path: str | os.PathLike) -> None:
        """Write the hierarchy in ARX's CSV layout: ``leaf;level1;...;root``, no header.

        Examples
        --------
        >>> import tempfile, os
        >>> h = masking_hierarchy(["13053", "13068"], name="zip")
        >>> p = os.path.join(tempfile.mkdtemp(), "zip.csv")
        >>> h.to_arx_csv(p)
        >>> print(open(p).read(), end="")
        13053;1305*;130**;13***;1****;*
        13068;1306*;130**;13***;1****;*
        >>> Hierarchy.from_arx_csv(p, column="zip").equals(h)
        True
        """
        buf = io.StringIO()
        w = csv.writer(buf, delimiter=ARX_DELIMITER, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        lab = np.array(self.labels, dtype=object)[self.levels]
        w.writerows(lab.tolist())
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())

    @classmethod
    def from_arx_csv(cls, path: str | os.PathLike, column: str | None = None) -> "Hierarchy":
        """Read a hierarchy in ARX's CSV layout (``leaf;level1;...;root``, no header).

        Empty lines are ignored; fields may be quoted (``"a;b"``); trailing empty fields are
        dropped. Rows shorter than the longest are padded by repeating their last value before
        the root (``b;*`` in a file of height 2 becomes ``b;b;*``). Errors
        (:class:`~gpuanon.errors.InputError`, naming the file, the line and the fix): a row with
        fewer than two fields, an empty field, a leaf listed twice, rows that do not end with the
        same root, a label with two different parents.

        Parameters
        ----------
        path : str or path-like
            The file (UTF-8, a byte-order mark is accepted).
        column : str, optional
            The column the hierarchy is for (kept as :attr:`name`, used in messages).

        Examples
        --------
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "h.csv")
        >>> _ = open(p, "w").write("a;G;*\\nb;G;*\\n\\nc;*\\n")
        >>> Hierarchy.from_arx_csv(p, column="c").to_frame()
          level0 level1 level2
        0      a      G      *
        1      b      G      *
        2      c      c      *
        """
        src = os.fspath(path)
        try:
            with open(src, "r", encoding="utf-8-sig", newline="") as fh:
                text = fh.read()
        except OSError as e:
            raise InputError(f"cannot read hierarchy file {src}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"hierarchy file {src} is not UTF-8 text ({e.reason}); save it as "
                             f"UTF-8") from None
        rows: list[list[str]] = []
        lines: list[int] = []
        try:
            reader = csv.reader(io.StringIO(text), delimiter=ARX_DELIMITER, quotechar='"',
                                strict=True)
            for row in reader:
                lineno = reader.line_num
                while row and row[-1].strip() == "":
                    row.pop()
                if not row:
                    continue
                if len(row) < 2:
                    raise InputError(
                        f"hierarchy file {src}, line {lineno}: {len(row)} field ({row[0]!r}); "
                        f"every row needs the leaf and its generalizations up to the root, "
                        f"separated by '{ARX_DELIMITER}' (e.g. {row[0]};*)")
                blank = [k for k, f in enumerate(row) if f.strip() == ""]
                if blank:
                    k = blank[0]
                    raise InputError(
                        f"hierarchy file {src}, line {lineno}: field {k + 1} is empty; give "
                        f"every level a label (or remove the extra '{ARX_DELIMITER}')")
                rows.append(row)
                lines.append(lineno)
        except csv.Error as e:
            raise InputError(f"hierarchy file {src}, line {reader.line_num}: {e}; fix the "
                             f"quoting of that line") from None
        if not rows:
            raise InputError(f"hierarchy file {src} has no rows; write one row per value: "
                             f"value;level1;...;*")
        roots = pd.Series([r[-1] for r in rows])
        root = roots.value_counts().index[0]
        bad = np.flatnonzero((roots != root).to_numpy())
        if bad.size:
            shown = ", ".join(f"line {lines[i]} ends with {rows[i][-1]!r}" for i in bad[:5])
            raise InputError(
                f"hierarchy file {src}: the last column must be the same root for every row "
                f"(most rows end with {root!r}); {shown}; end every row with {root!r}")
        leaves_seen: dict[str, int] = {}
        for r, ln in zip(rows, lines):
            if r[0] in leaves_seen:
                raise InputError(f"hierarchy file {src}: leaf {r[0]!r} is listed twice (lines "
                                 f"{leaves_seen[r[0]]} and {ln}); keep one row per value")
            leaves_seen[r[0]] = ln
        depth = max(len(r) for r in rows)
        paths = [r[1:-1] + [r[-2]] * (depth - len(r)) + [r[-1]] for r in rows]
        return cls.from_labels([r[0] for r in rows], paths, name=column, source=src,
                               _lines=lines)


# ============================================================================ frequency hierarchies
def check_rho(rho) -> Fraction:
    """``rho`` as an exact fraction; ``ValueError`` unless ``100 / rho`` is a positive integer.

    Examples
    --------
    >>> check_rho(10), check_rho(0.5)
    (Fraction(10, 1), Fraction(1, 2))
    >>> check_rho(3)
    Traceback (most recent call last):
    ...
    ValueError: rho = 3: 100 / rho must be an integer; use one of 1, 2, 4, 5, 10, 20, 25, 50, 100
    """
    fix = "use one of " + ", ".join(map(str, RHO_CANDIDATES))
    if isinstance(rho, (bool, np.bool_)) or not isinstance(rho, Real):
        raise ValueError(f"rho = {rho!r}: must be a number such that 100 / rho is an integer; {fix}")
    try:
        r = Fraction(int(rho)) if isinstance(rho, Integral) else Fraction(str(float(rho)))
    except (ValueError, OverflowError):
        raise ValueError(f"rho = {rho!r}: must be a finite number; {fix}") from None
    if r <= 0 or r > 100 or (100 / r).denominator != 1:
        raise ValueError(f"rho = {rho!r}: 100 / rho must be an integer; {fix}")
    return r


def count_table(codes, target_codes, n_values: int, n_targets: int, xp=None) -> np.ndarray:
    """The frequency table ``F[v, t]`` from value codes and target codes: one ``bincount``.

    Works on NumPy or CuPy arrays; the (small) table comes back to the host.

    Examples
    --------
    >>> import numpy as np
    >>> count_table(np.array([0, 0, 1, 2]), np.array([1, 1, 0, 1]), 3, 2).tolist()
    [[0, 2], [1, 0], [0, 1]]
    """
    xp = array_module(codes) if xp is None else xp
    if n_values == 0 or n_targets == 0:
        return np.zeros((n_values, n_targets), dtype=np.int64)
    key = xp.asarray(codes).astype(xp.int64) * n_targets + xp.asarray(target_codes).astype(xp.int64)
    f = xp.bincount(key, minlength=n_values * n_targets)
    return to_host(f).astype(np.int64).reshape(n_values, n_targets)


@dataclass
class FrequencyTable:
    """Algorithm 1's result for one column: ``F[v, t]`` and what derives from it.

    ``values`` are in the contract's category order (majority target value, share of that
    majority, missing last, value) -- the order of :mod:`gpuanon.encoding`. ``target_values``
    are sorted (target code = position). Every ``rho`` derives from this table without touching
    the data again.

    Examples
    --------
    >>> ft = frequency_table(["a", "a", "a", "b", "c"], [0, 0, 1, 0, 1])
    >>> ft.values, ft.counts.tolist()
    (['a', 'b', 'c'], [[2, 1], [1, 0], [0, 1]])
    >>> ft.tstar.tolist(), ft.share.round(3).tolist()
    ([0, 0, 1], [0.667, 1.0, 1.0])
    >>> ft.buckets(25).tolist()
    [2, 3, 3]
    """

    values: list
    target_values: list
    counts: np.ndarray  # (n_values, n_targets) int64
    name: str | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def totals(self) -> np.ndarray:
        """``sum_t F[v, t]`` per value."""
        return self.counts.sum(axis=1)

    @property
    def tstar(self) -> np.ndarray:
        """``t*(v)``: code of the most frequent target value (ties: the lowest code)."""
        return self.counts.argmax(axis=1).astype(np.int64)

    @property
    def majority(self) -> np.ndarray:
        """``F[v, t*(v)]``."""
        return self.counts[np.arange(self.counts.shape[0]), self.tstar]

    @property
    def share(self) -> np.ndarray:
        """``f(v) = F[v, t*] / sum_t F[v, t]`` in [0, 1] (float64, for display and ordering)."""
        return self.majority / np.maximum(self.totals, 1)

    def buckets(self, rho) -> np.ndarray:
        """``b(v) = min(floor(100 f(v) / rho), 100 / rho - 1)``, in exact integer arithmetic."""
        r = check_rho(rho)
        num = 100 * self.majority.astype(object if self.majority.size and
                                         int(self.majority.max()) > 2 ** 40 else np.int64)
        b = (num * r.denominator) // (np.maximum(self.totals, 1) * r.numerator)
        top = int(100 / r) - 1
        return np.minimum(b.astype(np.int64), top)

    def group_ids(self, rho) -> np.ndarray:
        """Group of every value: dense ids in order of ``(t*(v), b(v))`` (algorithm 2's order)."""
        key = self.tstar * int(100 / check_rho(rho)) + self.buckets(rho)
        return np.unique(key, return_inverse=True)[1].astype(np.int64).ravel()

    def groups(self, rho) -> list[list]:
        """The groups of ``H_rho`` as lists of values, in order of ``(t*, b)``.

        Examples
        --------
        >>> ft = frequency_table(["a", "a", "a", "b", "c"], [0, 0, 1, 0, 1])
        >>> ft.groups(10)
        [['a'], ['b'], ['c']]
        >>> ft.groups(50)
        [['a', 'b'], ['c']]
        """
        gid = self.group_ids(rho)
        out: list[list] = [[] for _ in range(int(gid.max()) + 1 if gid.size else 0)]
        for v, g in zip(self.values, gid):
            out[g].append(v)
        return out

    def hierarchy(self, rho, labels: str = "values") -> Hierarchy:
        """``H_rho``: leaves = values, level 1 = the ``(t*, b)`` groups, level 2 = ``*``.

        Parameters
        ----------
        rho : int or float
            Percentile range; ``100 / rho`` must be an integer.
        labels : {'values', 'target'}
            Group labels: the values joined by ``|`` (default), or ``"<t*> <lo>-<hi>%"``.
        """
        if labels not in ("values", "target"):
            raise ValueError(f"labels = {labels!r}: use 'values' or 'target'")
        key = (check_rho(rho), labels)
        if key in self._cache:
            return self._cache[key]
        gid = self.group_ids(rho)
        n_groups = int(gid.max()) + 1 if gid.size else 0
        if labels == "values":
            members: list[list[str]] = [[] for _ in range(n_groups)]
            for v, g in zip(self.values, gid):
                members[g].append(_text(v))
            names = [GROUP_SEPARATOR.join(m) for m in members]
        else:
            r = key[0]
            names = [""] * n_groups
            for g, bb, tt in zip(gid, self.buckets(rho), self.tstar):
                lo, hi = int(bb) * r, (int(bb) + 1) * r
                names[g] = f"{_text(self.target_values[tt])} {_pct(lo)}-{_pct(hi)}%"
        names = _distinct(names)
        paths = [[names[g], ROOT] for g in gid]
        h = Hierarchy.from_labels(list(self.values), paths, name=self.name,
                                  rho=_rho_value(key[0]))
        self._cache[key] = h
        return h

    @classmethod
    def from_codes(cls, codes, categories: Sequence, coded_target: tuple, name: str | None = None,
                   xp=None) -> "FrequencyTable":
        """The table from a column already coded (e.g. a categorical QI of an encoded table).

        Parameters
        ----------
        codes : array of int
            Code of every row, ``0 .. len(categories) - 1`` (NumPy or CuPy; counted on its
            device with one ``bincount``).
        categories : sequence
            The value of every code. Categories that never occur are dropped.
        coded_target : (codes, values)
            Target code of every row and the target values (sorted: :func:`target_codes`).
        name : str, optional
            Column name.

        Examples
        --------
        >>> import numpy as np
        >>> ft = FrequencyTable.from_codes(np.array([0, 0, 1]), ["x", "y", "unused"],
        ...                                (np.array([1, 1, 0]), ["no", "yes"]))
        >>> ft.values, ft.counts.tolist()
        (['y', 'x'], [[1, 0], [0, 2]])
        """
        tcodes, tvals = coded_target
        if len(codes) != len(tcodes):
            raise InputError(f"column {name!r} has {len(codes)} rows but the target has "
                             f"{len(tcodes)}")
        uniq = list(categories)
        f = count_table(codes, tcodes, len(uniq), len(tvals), xp=xp)
        used = f.sum(axis=1) > 0  # categories that never occur are no leaves
        if not used.all():
            f, uniq = f[used], [u for u, k in zip(uniq, used) if k]
        tstar = f.argmax(axis=1) if f.size else np.zeros(len(uniq), np.int64)
        share = (f[np.arange(len(uniq)), tstar] / np.maximum(f.sum(axis=1), 1) if f.size
                 else tstar * 0.0)
        order = _spec_order(uniq, tstar, share)
        return cls([uniq[i] for i in order], list(tvals),
                   np.ascontiguousarray(f[np.asarray(order, dtype=np.int64)]), name=name)

    def hierarchies(self, rhos: Iterable = RHO_CANDIDATES, labels: str = "values") -> dict:
        """``{rho: H_rho}`` for every candidate, all from this one table."""
        return {rho: self.hierarchy(rho, labels=labels) for rho in rhos}


def _distinct(names: list[str]) -> list[str]:
    """Make group labels distinct (values that contain the separator could collide)."""
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    if all(c == 1 for c in seen.values()):
        return names
    return [f"{n} (group {g + 1})" if seen[n] > 1 else n for g, n in enumerate(names)]


def _pct(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else str(float(x))


def _rho_value(r: Fraction):
    return int(r) if r.denominator == 1 else float(r)


def _spec_order(uniq: list, tstar: np.ndarray, share: np.ndarray) -> list[int]:
    """The contract's category order: (majority target, its share, missing last, value)."""
    return sorted(range(len(uniq)),
                  key=lambda i: (int(tstar[i]), float(share[i]), _isna(uniq[i]), _sort_key(uniq[i])))


def _value_codes(values) -> tuple[np.ndarray, list]:
    """Codes (0 .. m-1) and distinct values (missing is one value) of a column."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy().astype(np.int64)
        cats = list(s.cat.categories)
        if (codes < 0).any():
            codes = np.where(codes < 0, len(cats), codes)
            cats.append(np.nan)
        return codes, cats
    codes, uniq = pd.factorize(s, sort=False, use_na_sentinel=False)
    return codes, list(uniq)


def target_codes(target) -> tuple[np.ndarray, list]:
    """Target codes (positions in the sorted distinct target values, missing last) and values.

    The same coding as :mod:`gpuanon.encoding`; code it once and pass it to
    :func:`frequency_table` as ``coded_target`` for every column.

    Examples
    --------
    >>> codes, values = target_codes(["yes", "no", "yes"])
    >>> codes.tolist(), values
    ([1, 0, 1], ['no', 'yes'])
    """
    s = target if isinstance(target, pd.Series) else pd.Series(target)
    codes, tvals = _codes_sorted(s)
    return codes, list(tvals)


def frequency_table(values, target=None, name: str | None = None,
                    coded_target: tuple | None = None) -> FrequencyTable:
    """Algorithm 1: the frequency table ``F[v, t]`` of a column against the target (one pass).

    Parameters
    ----------
    values : pandas.Series or array-like
        The categorical column (a ``category`` dtype is used without re-hashing the rows).
        A missing value is one value of its own.
    target : pandas.Series or array-like
        The target, same length. Target codes are its sorted distinct values.
    name : str, optional
        Column name.
    coded_target : (codes, values), optional
        The target already coded by :func:`target_codes` (then ``target`` is ignored).

    Returns
    -------
    FrequencyTable

    Examples
    --------
    >>> ft = frequency_table(["x", "y", "y", None], ["no", "yes", "yes", "no"], name="c")
    >>> ft.values, ft.target_values, ft.counts.tolist()
    (['x', nan, 'y'], ['no', 'yes'], [[1, 0], [1, 0], [0, 2]])
    """
    if name is None and isinstance(values, pd.Series):
        name = values.name
    codes, uniq = _value_codes(values)
    if coded_target is None and target is None:
        raise ValueError("give the target (or coded_target)")
    tcodes, tvals = target_codes(target) if coded_target is None else coded_target
    return FrequencyTable.from_codes(codes, uniq, (tcodes, tvals), name=name, xp=np)


def frequency_hierarchy(values, target, rho, name: str | None = None,
                        labels: str = "values") -> Hierarchy:
    """The thesis's automatic hierarchy ``H_rho`` (algorithms 1 and 2; the contract, section 5).

    ``t*(v)`` = most frequent target value of value ``v`` (ties: lowest target code; target codes
    are the sorted target values), ``f(v)`` = its share, bucket
    ``b(v) = min(floor(100 f(v) / rho), 100 / rho - 1)`` (exact integer arithmetic); values with
    equal ``(t*(v), b(v))`` form one group. Leaves are in the contract's category order.

    Parameters
    ----------
    values, target : pandas.Series or array-like
        The categorical column and the target (same length). Missing values are one leaf
        (``NaN``).
    rho : int or float
        Percentile range; ``100 / rho`` must be an integer (:data:`RHO_CANDIDATES`), else
        ``ValueError``.
    name : str, optional
        Column name (defaults to ``values.name``).
    labels : {'values', 'target'}
        Group labels: the group's values joined by ``|`` (default), or ``"<t*> <lo>-<hi>%"``.

    Examples
    --------
    >>> values, target = ["a", "a", "a", "b", "c"], ["no", "no", "yes", "no", "yes"]
    >>> frequency_hierarchy(values, target, rho=50).to_frame()
      level0 level1 level2
    0      a    a|b      *
    1      b    a|b      *
    2      c      c      *
    >>> frequency_hierarchy(values, target, rho=50, labels="target").to_frame()
      level0       level1 level2
    0      a   no 50-100%      *
    1      b   no 50-100%      *
    2      c  yes 50-100%      *
    """
    check_rho(rho)
    return frequency_table(values, target, name=name).hierarchy(rho, labels=labels)


def frequency_hierarchies(values, target, rhos: Iterable = RHO_CANDIDATES, name: str | None = None,
                          labels: str = "values") -> dict:
    """``{rho: H_rho}`` for every candidate ``rho``, from one count pass.

    Examples
    --------
    >>> hs = frequency_hierarchies(["a", "a", "b", "c"], [1, 0, 0, 1])
    >>> sorted(hs) == sorted(RHO_CANDIDATES), hs[100].height
    (True, 2)
    """
    rhos = list(rhos)
    for r in rhos:
        check_rho(r)
    return frequency_table(values, target, name=name).hierarchies(rhos, labels=labels)


def build_hierarchy_candidates(df: pd.DataFrame, columns: Sequence[str], target: str,
                               rhos: Iterable = RHO_CANDIDATES, labels: str = "values") -> dict:
    """``{column: {rho: H_rho}}``: one count pass per column, every ``rho`` derived from it.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"c": ["a", "b", "b"], "d": ["x", "x", "y"], "y": [0, 1, 1]})
    >>> hs = build_hierarchy_candidates(df, ["c", "d"], "y", rhos=(10, 50))
    >>> sorted(hs), sorted(hs["c"])
    (['c', 'd'], [10, 50])
    """
    rhos = list(rhos)
    for r in rhos:
        check_rho(r)
    missing = [c for c in list(columns) + [target] if c not in df.columns]
    if missing:
        raise InputError(f"no column {missing[0]!r} in the table; columns: {list(df.columns)}")
    tgt = target_codes(df[target])
    return {c: frequency_table(df[c], name=c, coded_target=tgt).hierarchies(rhos, labels=labels)
            for c in columns}


def build_hierarchies(df: pd.DataFrame, columns: Sequence[str], target: str, rho=10,
                      labels: str = "values") -> dict:
    """``{column: H_rho}`` for the given categorical columns (the target is coded once).

    Examples
    --------
    >>> from gpuanon.datasets import load_adult
    >>> hs = build_hierarchies(load_adult(), ["education", "race"], "income", rho=10)
    >>> hs["education"]
    Hierarchy(name='education', n_leaves=16, height=2, n_nodes=23, rho=10)
    """
    return {c: by_rho[rho] for c, by_rho in
            build_hierarchy_candidates(df, columns, target, (rho,), labels=labels).items()}


# ============================================================================ masking hierarchies
def masking_hierarchy(values, name: str | None = None, max_level: int | None = None) -> Hierarchy:
    """A masking hierarchy for code-like strings: one more character masked per level.

    ``13053`` -> ``1305*`` -> ``130**`` -> ``13***`` -> ``1****`` -> ``*`` (the root). Leaves are
    the distinct values, sorted. With ``max_level = m`` (``0 <= m < length``) the levels are the
    values with ``0 .. m`` characters masked, then the root. A missing value is a leaf ``NaN``
    whose ancestors are ``NaN`` up to the root. Integers are taken as their decimal text.

    Parameters
    ----------
    values : array-like
        The column's values; all non-missing ones must have the same length (else
        :class:`~gpuanon.errors.InputError` naming the column).
    name : str, optional
        Column name (defaults to ``values.name``).
    max_level : int, optional
        Most characters masked below the root.

    Examples
    --------
    >>> masking_hierarchy(["13053", "13068", "14850"], max_level=2).to_frame()
      level0 level1 level2 level3
    0  13053  1305*  130**      *
    1  13068  1306*  130**      *
    2  14850  1485*  148**      *
    """
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if name is None:
        name = s.name
    uniq = pd.unique(s)
    texts = sorted({_text(v) for v in uniq if not _isna(v)})
    has_missing = any(_isna(v) for v in uniq)
    if not texts and not has_missing:
        raise InputError(f"column {name!r}: no values to build a masking hierarchy from")
    lengths = {len(t) for t in texts}
    if len(lengths) > 1:
        by_len: dict[int, str] = {}
        for t in texts:
            by_len.setdefault(len(t), t)
        ex = ", ".join(f"{v!r} ({k} characters)" for k, v in sorted(by_len.items())[:4])
        raise InputError(f"column {name!r}: a masking hierarchy needs values of one length; "
                         f"found {ex}; pad the values (e.g. with leading zeros) or give the "
                         f"hierarchy as an ARX CSV file")
    width = lengths.pop() if lengths else 1
    top = width - 1 if max_level is None else int(max_level)
    if not 0 <= top <= width:
        raise ValueError(f"max_level = {max_level}: must be in 0 .. {width}")
    top = min(top, width - 1)
    paths = [[t[: width - j] + "*" * j for j in range(1, top + 1)] + [ROOT] for t in texts]
    leaves = list(texts)
    if has_missing:
        leaves.append(MISSING_LABEL)
        paths.append([MISSING_LABEL] * top + [ROOT])
    return Hierarchy.from_labels(leaves, paths, name=name)
