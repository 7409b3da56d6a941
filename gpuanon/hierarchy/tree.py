"""The hierarchy tree: :class:`Hierarchy`, its construction from labels and its queries.

A :class:`Hierarchy` is a tree over one column's values: the leaves are the values, every level
above groups the level below, and the last level is the root ``*`` (the cell is suppressed).
It is stored as one integer matrix ``levels`` of shape ``(n_leaves, height + 1)``: row ``i`` is
the path of leaf ``i`` from the leaf (column 0) to the root (last column), as node ids that are
global within the hierarchy (leaves are ``0 .. n_leaves - 1``, then the nodes of level 1, and so
on; the root is the last id). Every query is a whole-array operation on that matrix and works with
NumPy or CuPy arrays (``xp``); the lowest common node is :func:`kernels.hierarchy.lowest_common_node`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
import pandas as pd

from kernels.hierarchy import lowest_common_node

from ..backend import get_namespace, to_host
from ..errors import InputError
from .arx import ragged_message, read_arx_rows, write_arx_rows
from .labels import describe, levels_from_paths, node_text

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
        levels, labels = levels_from_paths(leaves, paths, name, source, _lines)
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
        >>> from gpuanon.hierarchy import masking_hierarchy
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
        xp = get_namespace(a) if xp is None else xp
        return lowest_common_node(self._on(xp, "levels"), a, b, xp)

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
        xp = get_namespace(leaf_sets) if xp is None else xp
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
        xp = get_namespace(leaf_sets) if xp is None else xp
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
        xp = get_namespace(leaf_sets) if xp is None else xp
        return self.n_leaves_under_lcn(leaf_sets, xp=xp) / float(self.n_leaves)

    def leaves_under(self, node) -> Any:
        """Number of leaves under node id(s) ``node``.

        Examples
        --------
        >>> from gpuanon.hierarchy import masking_hierarchy
        >>> h = masking_hierarchy(["123", "124", "135"])
        >>> h.leaves_under(h.root), h.leaves_under(0)
        (3, 1)
        """
        if np.isscalar(node):
            return int(self.n_under[int(node)])
        xp = get_namespace(node)
        return self._on(xp, "n_under")[node]

    def labels_of(self, nodes) -> np.ndarray:
        """Text of node ids (a host object array; -1 gives ``None``).

        Examples
        --------
        >>> from gpuanon.hierarchy import masking_hierarchy
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
        texts = [node_text(u) for u in uniques]
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
                f"{describe(self.name, self.source)} lacks {len(missing)} value"
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
        >>> from gpuanon.hierarchy import masking_hierarchy
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
        >>> from gpuanon.hierarchy import masking_hierarchy
        >>> h = masking_hierarchy(["13053", "13068"], name="zip")
        >>> p = os.path.join(tempfile.mkdtemp(), "zip.csv")
        >>> h.to_arx_csv(p)
        >>> print(open(p).read(), end="")
        13053;1305*;130**;13***;1****;*
        13068;1306*;130**;13***;1****;*
        >>> Hierarchy.from_arx_csv(p, column="zip").equals(h)
        True
        """
        write_arx_rows(path, np.array(self.labels, dtype=object)[self.levels].tolist())

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
        rows, lines, src = read_arx_rows(path)
        depth = max(len(r) for r in rows)
        paths = [r[1:-1] + [r[-2]] * (depth - len(r)) + [r[-1]] for r in rows]
        try:
            return cls.from_labels([r[0] for r in rows], paths, name=column, source=src, _lines=lines)
        except InputError as exc:  # a row of another length, padded into a tree that is none: name it
            raise InputError(ragged_message(rows, lines, src, str(exc))) from None
