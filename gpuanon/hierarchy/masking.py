"""Masking hierarchies for code-like strings: one more character masked per level."""

from __future__ import annotations

import pandas as pd

from ..table.values import is_na
from ..errors import InputError
from .labels import MISSING_LABEL, ROOT, node_text
from .tree import Hierarchy


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
    texts = sorted({node_text(v) for v in uniq if not is_na(v)})
    has_missing = any(is_na(v) for v in uniq)
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
