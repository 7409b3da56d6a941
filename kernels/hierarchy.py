"""The lowest common node of a generalization hierarchy, as one whole-array kernel.

A hierarchy over ``n`` leaves is given by its paths: ``levels`` of shape ``(n, height + 1)``,
``levels[x, L]`` the node id above leaf (or code) ``x`` at level ``L`` (column 0 the leaf itself,
the last column the root, shared by every leaf). When the leaves are numbered in an order in
which the leaves of every node are contiguous (a depth-first leaf order), the lowest node
covering a set of leaves is the lowest node covering its smallest and its largest leaf: the
first level at which the two leaves' paths meet. This module computes that for many pairs at
once; it is the one place the rule is written (the Mondrian kernel's spans, the
:class:`gpuanon.hierarchy.Hierarchy` queries, the published cells and the metrics use it).

Written once for NumPy and CuPy (``xp``); nothing here imports ``gpuanon``.

Examples
--------
>>> import numpy as np
>>> lv = np.array([[0, 3, 5], [1, 3, 5], [2, 4, 5]])  # leaves 0, 1 under node 3; 2 under 4
>>> node, level = lowest_common_node(lv, np.array([0, 0, 2]), np.array([0, 1, 1]))
>>> node.tolist(), level.tolist()
([0, 3, 5], [0, 1, 2])
"""

from __future__ import annotations

import numpy as np


def lowest_common_node(levels, lo, hi, xp=np):
    """Lowest node covering leaf ``lo[i]`` and leaf ``hi[i]``, and its level, for every ``i``.

    Parameters
    ----------
    levels : (n_leaves, height + 1) int array
        Node id of every leaf at every level (the last column is the root), on ``xp``'s device.
    lo, hi : int arrays of one shape ``(m,)``
        Leaf indices (codes), e.g. the smallest and largest code of every class or partition.
    xp : module
        ``numpy`` or ``cupy``.

    Returns
    -------
    node : (m,) array of ``levels``' dtype
        The lowest common node (``lo[i] == hi[i]`` gives that leaf, at level 0).
    level : (m,) int64
        Its level: the first column where the two paths meet (the root column always does).
    """
    a = levels[xp.asarray(lo).astype(xp.int64, copy=False)]
    b = levels[xp.asarray(hi).astype(xp.int64, copy=False)]
    level = xp.argmax(a == b, axis=-1).astype(xp.int64, copy=False)
    node = xp.take_along_axis(a, level[..., None], axis=-1)[..., 0]
    return node, level
