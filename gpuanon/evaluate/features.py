"""The shared feature space of raw and generalized rows (the contract's section 9).

A numeric QI becomes two features ``(lo, hi)`` (a raw value is ``lo = hi = value``); a
categorical QI a multi-hot vector over the original categories, each present value weighted
``1 / |set|`` (a hierarchy node covers the leaves under it, ``*`` all of them; a raw value is
one-hot). Other numeric columns pass as they are, other categorical columns one-hot.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError, SchemaError, shown
from ..table.exact import float_values, is_time
from ..metrics import cell_text, parse_numeric_cells, split_set_text


def cell_texts(s: pd.Series) -> np.ndarray:
    """Every cell of ``s`` as its published text (:func:`gpuanon.metrics.cell_text`), computed once per distinct value.

    >>> cell_texts(pd.Series([1, 2, 1])).tolist()
    ['1', '2', '1']
    """
    codes, uniq = pd.factorize(s, use_na_sentinel=False)
    return np.array([cell_text(v) for v in uniq], dtype=object)[codes] if len(s) else np.zeros(0, dtype=object)


class FeatureSpace:
    """One numeric feature space for raw and generalized rows of a table (the contract's section 9).

    Built from the original (raw) training frame: it records each column's kind and, for
    categorical columns, the original categories. :meth:`transform_raw` encodes raw rows;
    :meth:`transform_generalized` encodes an anonymized table (numeric QIs as ``<c>_min`` /
    ``<c>_max`` pairs, ``"lo-hi"`` text or numbers; categorical QIs as values, ``|``-joined sets,
    hierarchy labels or ``*``). Unknown categories of raw test rows encode as all zeros.

    >>> raw = pd.DataFrame({"age": [30, 40, 50], "job": ["a", "b", "c"]})
    >>> fs = FeatureSpace.from_frame(raw, quasi_identifiers=["age", "job"])
    >>> fs.feature_names_
    ['age_lo', 'age_hi', 'job=a', 'job=b', 'job=c']
    >>> gen = pd.DataFrame({"age_min": [30, 30, 50], "age_max": [40, 40, 50], "job": ["a|b", "a|b", "c"]})
    >>> fs.transform_generalized(gen)[0].tolist()
    [30.0, 40.0, 0.5, 0.5, 0.0]
    >>> fs.transform_raw(raw)[0].tolist()
    [30.0, 30.0, 1.0, 0.0, 0.0]
    """

    def __init__(self, columns: Sequence[str], kinds: dict, quasi_identifiers: Sequence[str], categories: dict):
        self.columns = list(columns)
        self.kinds = dict(kinds)
        self.quasi_identifiers = [c for c in quasi_identifiers if c in self.columns]
        self.categories = {c: list(v) for c, v in categories.items()}
        self._index = {c: {v: i for i, v in enumerate(cats)} for c, cats in self.categories.items()}
        names = []
        for c in self.columns:
            if self.kinds[c] == "numeric":
                names += [f"{c}_lo", f"{c}_hi"] if c in self.quasi_identifiers else [c]
            else:
                names += [f"{c}={v}" for v in self.categories[c]]
        self.feature_names_ = names

    @classmethod
    def from_frame(cls, df: pd.DataFrame, quasi_identifiers: Sequence[str], kinds: dict | None = None,
                   exclude: Iterable[str] = ()) -> "FeatureSpace":
        """Every column of ``df`` but ``exclude``; ``kinds`` overrides the dtype inference per column."""
        exclude = set(exclude)
        kinds = dict(kinds or {})
        cols = [c for c in df.columns if c not in exclude]
        if not cols:
            raise InputError("no feature columns left: every column is the target or an identifier")
        kd, cats = {}, {}
        for c in cols:
            kd[c] = kinds.get(c) or ("numeric" if is_time(df[c]) or pd.api.types.is_numeric_dtype(df[c].dtype)
                                     and not pd.api.types.is_bool_dtype(df[c].dtype) else "categorical")
            if kd[c] == "categorical":
                cats[c] = sorted(set(cell_texts(df[c]).tolist()))
        missing = [q for q in quasi_identifiers if q not in cols]
        if missing:
            raise SchemaError(f"quasi-identifier(s) {', '.join(map(repr, missing))} are not feature columns of "
                              "the table")
        return cls(cols, kd, quasi_identifiers, cats)

    @property
    def n_features(self) -> int:
        return len(self.feature_names_)

    def _one_hot(self, c: str, s: pd.Series) -> np.ndarray:
        codes = pd.Index(self.categories[c]).get_indexer(cell_texts(s))
        M = np.zeros((len(s), len(self.categories[c])), dtype=np.float64)
        ok = codes >= 0
        M[np.nonzero(ok)[0], codes[ok]] = 1.0
        return M

    def _numeric(self, c: str, s: pd.Series) -> np.ndarray:
        if is_time(s):  # dates and times in epoch nanoseconds, as their published ranges are read
            return float_values(s)
        v = pd.to_numeric(s, errors="coerce")
        bad = v.isna() & s.notna()
        if bad.any():
            raise SchemaError(f"column '{c}' holds non-numeric value {shown(s[bad].iloc[0])} but was numeric in the "
                              "training table")
        return v.to_numpy(dtype=np.float64, na_value=np.nan)

    def transform_raw(self, df: pd.DataFrame) -> np.ndarray:
        """Raw rows: numeric QIs as ``lo = hi = value``, categorical values one-hot."""
        self._require(df, generalized=False)
        blocks = []
        for c in self.columns:
            if self.kinds[c] == "numeric":
                v = self._numeric(c, df[c])
                blocks.append(np.stack([v, v], axis=1) if c in self.quasi_identifiers else v[:, None])
            else:
                blocks.append(self._one_hot(c, df[c]))
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(df), 0))

    def _require(self, df, generalized: bool):
        missing = []
        for c in self.columns:
            if c in df.columns:
                continue
            if generalized and c in self.quasi_identifiers and f"{c}_min" in df.columns and f"{c}_max" in df.columns:
                continue
            missing.append(c)
        if missing:
            raise SchemaError(f"column(s) {', '.join(map(repr, missing))} of the feature space are missing from the "
                              "table" + ("; a numeric QI may also come as <col>_min / <col>_max" if generalized else ""))

    def _set_weights(self, c: str, s: pd.Series, hierarchy=None) -> np.ndarray:
        """Weighted multi-hot rows of generalized cells: one weight vector per distinct cell."""
        index, ncat = self._index[c], len(self.categories[c])
        node_sets: dict[str, list[int]] = {}
        if hierarchy is not None:
            leaf_idx = np.array([index.get(cell_text(v), -1) for v in hierarchy.leaves])
            for node, lab in enumerate(hierarchy.labels):  # a loop over hierarchy nodes
                under = np.nonzero((hierarchy.levels == node).any(axis=1))[0]
                node_sets[str(lab)] = [int(i) for i in leaf_idx[under] if i >= 0]
        cell_codes, cells = pd.factorize(s, use_na_sentinel=False)
        W = np.zeros((len(cells), ncat), dtype=np.float64)
        for i, cell in enumerate(cells):  # a loop over distinct generalized values, not rows
            t = cell_text(cell)
            if t in index:
                members = [index[t]]
            elif t in node_sets:
                members = node_sets[t]
            elif t == "*":
                members = list(range(ncat))
            else:
                parts = [cell_text(p) for p in split_set_text(t)]  # the marker of a missing value: 'NaN'
                unknown = [p for p in parts if p not in index]
                if unknown:
                    raise SchemaError(f"value {shown(unknown[0])} in generalized column '{c}' is not a category of the "
                                      "original table (nor a hierarchy label); pass the hierarchy used")
                members = [index[p] for p in parts]
            if members:
                W[i, members] = 1.0 / len(members)
        return W[cell_codes]

    def transform_generalized(self, out: pd.DataFrame, hierarchies: dict | None = None) -> np.ndarray:
        """An anonymized table's rows: numeric QIs as ``(lo, hi)``, categorical QIs weighted multi-hot."""
        self._require(out, generalized=True)
        hierarchies = hierarchies or {}
        blocks = []
        for c in self.columns:
            if c not in self.quasi_identifiers:
                blocks.append(self._numeric(c, out[c])[:, None] if self.kinds[c] == "numeric"
                              else self._one_hot(c, out[c]))
            elif self.kinds[c] == "numeric":
                if f"{c}_min" in out.columns:
                    lo = self._numeric(c, out[f"{c}_min"])
                    hi = self._numeric(c, out[f"{c}_max"])
                else:
                    try:
                        lo, hi = parse_numeric_cells(out[c])
                    except ValueError as exc:
                        raise SchemaError(str(exc)) from None
                blocks.append(np.stack([lo, hi], axis=1))
            else:
                blocks.append(self._set_weights(c, out[c], hierarchies.get(c)))
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(out), 0))

