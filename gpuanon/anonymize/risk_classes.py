"""The classes of the report's risk section from what a one-process fit already holds (docs/risk.md).

* **before**: the input's rows grouped by their encoded QI keys (:class:`~gpuanon.table.encoding.Table`),
  which are equal exactly when the values as read are (a numeric key is the value's order-preserving
  bits or its rank among the distinct values, missing one key; a categorical key the value's code,
  missing a code of its own). A numeric QI read from text (numbers coerced from an ``object``
  column, where ``"5"`` and ``"5.0"`` are one key but two values) is grouped by its values instead.
* **after**: the fit's partitions (:class:`~gpuanon.release.classes.ClassStats`), merged where they publish
  the same cells on every QI (relaxed cuts, the optimization step, two halves of a hierarchy node):
  the cells the verifier groups by, whose text is a tested bijection of them. A class whose every QI
  is published as ``*`` (only possible when every QI is categorical) is left out as suppressed, as
  :func:`gpuanon.risk.assess` leaves such rows out of a table read back.

No frame is grouped row by row on the output side: its classes are the partitions' (one entry each).
The independent computation, from the input frame and the output as written, is
:func:`gpuanon.risk.report.risk_section` (``anonymize --risk-check readback``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..backend import frame_to_host, is_device_frame, to_device
from ..table.cells import output_qi_columns
from ..risk.classes import SUPPRESSED, Classes, column_cells, group_words, merged_classes, pack_cells
from .generalize import class_texts


def _keys_stand_for_values(col, raw: pd.Series) -> bool:
    """Whether a QI's encoded keys are equal exactly when its values as read are."""
    if col.kind == "categorical":
        return True  # codes of the values themselves (pandas.factorize, missing one code)
    dt = raw.dtype
    if isinstance(dt, np.dtype):
        return dt.kind in "fiubmM"
    return pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_datetime64_any_dtype(dt)


def _key_cells(table, j: int, xp):
    """``(cells, width, '*' mask or None)`` of encoded QI ``j``: its keys (uint32), as narrow as exact."""
    col, keys = table.columns[j], table.keys[j]
    if col.kind == "categorical":
        n = max(col.n_categories, 1)
        star = [i for i, v in enumerate(col.categories) if isinstance(v, str) and v == SUPPRESSED]
        return keys, max(1, int(n - 1).bit_length()), (keys == star[0]) if star else None
    if isinstance(col.info, str) or col.exact is not None:  # float32 bits, or ranks into an exact dictionary
        return keys, 32, None
    n = int(col.info.shape[0])  # ranks 0 .. n - 1, and the missing key: n
    return xp.where(keys == xp.uint32(0xFFFFFFFF), xp.uint32(n), keys), max(1, int(n).bit_length()), None


def input_classes(table, frame) -> Classes:
    """The classes of the input rows on the QIs, from the encoded table ``table`` of ``frame``."""
    xp = table.xp
    stars = []

    def cells():
        for j, col in enumerate(table.columns):  # a loop over columns, one column's cells at a time
            raw = frame[col.name]
            if _keys_stand_for_values(col, raw):
                c, w, star = _key_cells(table, j, xp)
            else:
                host = frame_to_host(frame[[col.name]])[col.name] if is_device_frame(frame) else raw
                c, w, star = column_cells(host, xp)
            stars.append(star)
            yield c, w

    n = int(table.n_rows)
    words = pack_cells(cells(), n, xp)
    supp = None
    if stars and all(s is not None for s in stars):
        supp = stars[0]
        for s in stars[1:]:
            supp = supp & s
    return group_words(words, supp, n, xp)


def output_classes(stats, fmt: str) -> Classes:
    """The classes of the published output (its rows: the fit's kept rows) from the class statistics
    ``stats`` (:class:`~gpuanon.release.classes.ClassStats`) and the output format."""
    table, xp = stats.table, stats.xp
    star = None
    if table.columns and all(c.kind == "categorical" for c in table.columns):  # else no row is all '*'
        for j in range(len(table.columns)):  # a loop over columns; texts are per class
            s = np.asarray(class_texts(stats, j, fmt) == SUPPRESSED, dtype=bool)
            star = s if star is None else star & s
        star = to_device(star, xp)
    return merged_classes(stats.published_cells(fmt), stats.sizes, star, int(stats.n_kept), xp)


def fit_classes(result, frame, fmt: str, before: Classes | None = None) -> tuple[Classes, Classes, list]:
    """``(before, after, the output's QI columns)`` of a one-process fit record ``result`` (its class
    statistics computed: ``Mondrian.fit_transform`` did) of the input ``frame``, published as ``fmt``;
    ``before``: the input's classes already grouped (:func:`input_classes`, before the output was made)."""
    schema = result.schema
    before = input_classes(result.table, frame) if before is None else before
    return (before, output_classes(result.class_stats, fmt),
            output_qi_columns(schema.quasi_identifiers, fmt, schema.kinds))
