"""Column roles and kinds, and every check of user input, with messages naming the column.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"age": [30, 40], "zip": ["1", "2"], "y": [0, 1]})
>>> s = Schema.from_frame(df, quasi_identifiers=["age", "zip"], sensitive="y")
>>> s.kinds
{'age': 'numeric', 'zip': 'categorical'}
"""

from __future__ import annotations

import difflib
import logging
import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import SchemaError
from .exact import is_decimal, is_time
from .values import factorize

log = logging.getLogger("gpuanon")

# Frames already warned about (id -> (weak reference, messages)): a sweep or an evaluation
# validates one frame many times and says each thing once.
_WARNED: dict[int, tuple] = {}


def _warn_once(df: pd.DataFrame, message: str) -> None:
    key = id(df)
    entry = _WARNED.get(key)
    if entry is None or entry[0]() is not df:
        entry = (weakref.ref(df, lambda _r, key=key: _WARNED.pop(key, None)), set())
        _WARNED[key] = entry
    if message not in entry[1]:
        entry[1].add(message)
        log.warning("%s", message)


# A QI looks like an identifier when nearly every row has its own value.
IDENTIFIER_SHARE = 0.95
IDENTIFIER_MIN_ROWS = 20


def _qi_warnings(df: pd.DataFrame, c, kind: str, declared: bool, factorized: dict | None = None,
                 facts=None) -> None:
    """Warn about a QI that is entirely missing or that looks like an identifier. ``factorized``:
    where a text column's codes are kept (``{column: (codes, distinct values)}``, a column with no
    missing value) for the encoding of the same frame (:func:`gpuanon.table.dictionaries.profile_chunk`);
    ``facts``: the :class:`~gpuanon.table.resident.ColumnFacts` of a device-resident column, read in place
    of its values."""
    s = df[c] if facts is None else None
    n_distinct = None
    if facts is not None:
        n, n_missing, n_distinct = facts.n, facts.n_missing, facts.n_distinct
    elif s.dtype == object:  # one hash pass counts the missing and the distinct values (isna's test of missing)
        n = len(s)
        codes, uniq = factorize(s, use_na_sentinel=True)
        n_missing, n_distinct = int(np.count_nonzero(codes < 0)), len(uniq)
        if factorized is not None and not n_missing:
            factorized[c] = (codes, uniq)
    else:
        n, n_missing = len(s), int(s.isna().sum())
    if n and n_missing == n:
        if kind == "numeric":
            how = ("numeric" + ("" if declared else f" (its type says so, but an empty column has no type; "
                                                     f"declare --categorical {c} if it is categorical)"))
            how += ": every row is in one missing-value block and its output is missing"
        else:
            how = "categorical, with one value (missing) that every row shares"
        _warn_once(df, f"quasi-identifier '{c}' is entirely missing ({n} of {n} rows); it was "
                       f"treated as {how}, so it separates no rows; drop it from --qi or fill it")
        return
    n_present = n - n_missing
    if n_present < IDENTIFIER_MIN_ROWS:
        return
    if facts is not None:
        if kind == "numeric" and (not facts.all_integer or (facts.host_dtype.kind == "f" and facts.head_fractional)):
            return
    elif kind == "numeric" and not _whole_numbers(s):
        return
    if n_distinct is None:
        n_distinct = int(s.nunique())  # present values only (no copy of the present rows)
    if n_distinct >= IDENTIFIER_SHARE * n_present:
        _warn_once(df, f"quasi-identifier '{c}' has {n_distinct} distinct values in {n_present} "
                       f"rows ({100.0 * n_distinct / n_present:.0f}%): it looks like an identifier; if it is "
                       f"one, pass it with --identifiers (dropped from the output) instead of --qi")


def _whole_numbers(s: pd.Series) -> bool:
    """Whether a numeric QI's present values are all whole numbers (times count as not: they are
    measurements, often unique and still quasi-identifiers)."""
    if is_time(s):
        return False
    if _plain_integer(s):  # integers are whole numbers: no pass over the rows
        return True
    if pd.api.types.is_float_dtype(s.dtype):
        # measurements (fractional values) are often unique and still quasi-identifiers: look at
        # a head of the column first, so a table of measurements costs no pass over its rows
        head = s.iloc[:4096].to_numpy(dtype=np.float64, na_value=np.nan)
        head = head[~np.isnan(head)]
        if (head != np.floor(head)).any():
            return False
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    v = v[~np.isnan(v)]
    return bool(np.all(np.isfinite(v) & (v == np.floor(v))))


def _as_floats(s: pd.Series) -> np.ndarray:
    """A numeric QI's values as floats, missing as NaN: a NumPy float column as it is (no copy),
    another through ``pd.to_numeric`` as float64 (a value it cannot read as NaN)."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind == "f":
        return s.to_numpy()
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _plain_integer(s: pd.Series) -> bool:
    """Whether ``s`` has an integer dtype (NumPy's or pandas' nullable one; not bool): its values are
    whole and finite by their type."""
    return pd.api.types.is_integer_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def nested_kind(col: pd.Series) -> str | None:
    """'struct' or 'list' when ``col`` holds nested values (as pandas reads Parquet structs and
    lists: dicts, arrays, lists), else None. Only the first present value is looked at.

    >>> nested_kind(pd.Series([None, {"a": 1}])), nested_kind(pd.Series([[1], [2]])), nested_kind(pd.Series([1]))
    ('struct', 'list', None)
    """
    dtype = col.dtype
    if isinstance(dtype, pd.ArrowDtype):
        name = str(dtype.pyarrow_dtype)
        return "struct" if name.startswith("struct") else "list" if "list" in name.split("<")[0] else None
    if dtype != object:
        return None
    first = col.iloc[0] if len(col) else None
    if isinstance(first, str):  # the first value is present and flat: no pass over the column
        return None
    present = col.dropna()
    if not len(present):
        return None
    v = present.iloc[0]
    return "struct" if isinstance(v, dict) else "list" if isinstance(v, (list, tuple, np.ndarray)) else None


def _refuse_nested(df: pd.DataFrame, role: str, names) -> None:
    for c in names:
        kind = nested_kind(df[c])
        if kind:
            raise SchemaError(
                f"{role} '{c}' is a nested column ({kind}); its values cannot be generalized or counted: "
                f"flatten it into plain columns first, or leave it out of this role (it then passes "
                f"through unchanged)")


def suggest(name: str, columns) -> str:
    """The end of an unknown-column message: the closest column name, or the first columns.

    >>> suggest("agee", ["age", "job"])
    "; did you mean 'age'?"
    >>> suggest("age", ["age,job"])
    "; the columns are: age,job (the header holds ',': if the file is separated by ',', read it with --sep ',')"
    """
    seps = (";", "\t", "|") + ((",",) if len(columns) == 1 else ())  # one column whose name holds commas
    sep = next((d for d in seps if any(d in str(c) for c in columns)), None)
    close = difflib.get_close_matches(str(name), [str(c) for c in columns], n=1, cutoff=0.6)
    if close and sep is None:
        return f"; did you mean '{close[0]}'?"
    shown = ", ".join(map(str, list(columns)[:12]))
    hint = (f" (the header holds {sep!r}: if the file is separated by {sep!r}, read it with --sep "
            f"{'tab' if sep == chr(9) else repr(sep)})"
            if sep else "")
    return f"; the columns are: {shown}{', ...' if len(columns) > 12 else ''}{hint}"


def as_list(x) -> list:
    """Column names from a comma-separated string or a sequence (non-string labels kept as they are).

    >>> as_list("a, b,,c")
    ['a', 'b', 'c']
    """
    if x is None:
        return []
    if isinstance(x, str):
        return [c.strip() for c in x.split(",") if c.strip()]
    return list(x)


@dataclass
class Schema:
    """Roles (quasi-identifiers, sensitive, target, identifiers) and QI kinds."""

    quasi_identifiers: list[str]
    sensitive: str | None = None
    target: str | None = None
    identifiers: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    sensitive_ordered: bool = False

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        quasi_identifiers,
        sensitive: str | None = None,
        target: str | None = None,
        identifiers=None,
        numeric=None,
        categorical=None,
        sensitive_ordered: bool | None = None,
        factorized: dict | None = None,
        resident=None,
    ) -> "Schema":
        """Validate roles against a frame and infer each QI's kind from its dtype.

        ``factorized``: a dict that keeps the codes of the text QIs hashed here (to encode the same
        frame without hashing them again, :func:`gpuanon.table.encoding.encode`). ``resident``: the
        device-resident part of the input (:class:`gpuanon.table.resident.Resident`, its plain numeric QIs;
        ``df`` holds the other columns): those are checked from their facts.

        Raises
        ------
        SchemaError
            With a message naming the column, the rule and the fix.
        """
        cols = list(df.columns) if resident is None else list(resident.columns)
        on_device = resident.facts if resident is not None else {}
        qis = as_list(quasi_identifiers)
        ids = as_list(identifiers)
        numeric, categorical = as_list(numeric), as_list(categorical)
        if not qis:
            raise SchemaError("no quasi-identifiers given; pass --qi COL1,COL2,... (quasi_identifiers=[...])")
        for role, names in (("quasi-identifier", qis), ("identifier", ids),
                            ("numeric column", numeric), ("categorical column", categorical),
                            ("sensitive attribute", [] if sensitive is None else [sensitive]),
                            ("target", [] if target is None else [target])):
            for c in names:
                if c not in cols:
                    raise SchemaError(f"{role} '{c}' is not a column{suggest(c, cols)}")
        _refuse_nested(df, "quasi-identifier", [c for c in qis if c not in on_device])
        _refuse_nested(df, "sensitive attribute", [] if sensitive is None else [sensitive])
        _refuse_nested(df, "target", [] if target is None else [target])
        dup = sorted({c for c in qis if qis.count(c) > 1})
        if dup:
            raise SchemaError(f"quasi-identifier '{dup[0]}' is listed twice; list each column once")
        for c in ids:
            if c in qis:
                raise SchemaError(f"column '{c}' is both an identifier and a quasi-identifier; give it one role")
        if sensitive is not None and sensitive in qis:
            raise SchemaError(f"sensitive attribute '{sensitive}' is also a quasi-identifier; give it one role")
        if sensitive is not None and sensitive in ids:
            raise SchemaError(f"sensitive attribute '{sensitive}' is also an identifier; identifiers are dropped")
        if target is not None and target in ids:
            raise SchemaError(f"target '{target}' is also an identifier; identifiers are dropped: leave it out of "
                              f"--identifiers, or name another --target")
        for kind, names in (("numeric", numeric), ("categorical", categorical)):
            stray = [c for c in names if c not in qis]
            if stray:
                raise SchemaError(f"column '{stray[0]}' is declared {kind} (--{kind} {stray[0]}) but is not a "
                                  f"quasi-identifier, and a declared kind has effect only on quasi-identifiers; add "
                                  f"it to --qi, or leave it out of --{kind}")
        both = set(numeric) & set(categorical)
        if both:
            raise SchemaError(f"column '{sorted(both)[0]}' is declared both numeric and categorical; pick one")
        kinds = {}
        for c in qis:
            if c in on_device:  # a plain number or a categorical on the device: checked from its facts
                kinds[c] = on_device[c].kind
                if on_device[c].any_inf:
                    raise SchemaError(f"quasi-identifier '{c}' holds infinite values; replace them (or "
                                      f"mark them missing) or declare the column categorical")
                _qi_warnings(df, c, kinds[c], c in numeric, facts=on_device[c])
                continue
            if c in categorical:
                kinds[c] = "categorical"
            elif c in numeric:
                kinds[c] = "numeric"
                if is_time(df[c]):
                    pass
                elif not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
                    conv = pd.to_numeric(df[c], errors="coerce")
                    bad = df[c][conv.isna() & df[c].notna()]
                    if len(bad):
                        raise SchemaError(
                            f"quasi-identifier '{c}' is declared numeric but holds non-numeric values "
                            f"such as {str(bad.iloc[0])!r}; declare it categorical or clean the column")
            elif pd.api.types.is_bool_dtype(df[c]):
                kinds[c] = "categorical"
            elif pd.api.types.is_numeric_dtype(df[c]) or is_time(df[c]):  # dates and times are ordered
                kinds[c] = "numeric"
            elif is_decimal(df[c]):  # Parquet decimal128, CSV numbers beyond a double's digits
                kinds[c] = "numeric"
                _warn_once(df, f"quasi-identifier '{c}' holds decimal numbers: typed numeric, kept exact "
                               f"(published with every place it has); declare --categorical {c} for sets")
            else:
                kinds[c] = "categorical"
            if kinds[c] == "numeric" and not is_time(df[c]) and not _plain_integer(df[c]):  # integers hold no inf
                if np.isinf(_as_floats(df[c])).any():
                    raise SchemaError(f"quasi-identifier '{c}' holds infinite values; replace them (or "
                                      f"mark them missing) or declare the column categorical")
            _qi_warnings(df, c, kinds[c], c in numeric, factorized)
        if sensitive_ordered is None:
            sensitive_ordered = bool(
                sensitive is not None
                and pd.api.types.is_numeric_dtype(df[sensitive])
                and not pd.api.types.is_bool_dtype(df[sensitive])
            )
        return cls(qis, sensitive, target, ids, kinds, bool(sensitive_ordered))

    @property
    def numeric_qis(self) -> list[str]:
        return [c for c in self.quasi_identifiers if self.kinds[c] == "numeric"]

    @property
    def categorical_qis(self) -> list[str]:
        return [c for c in self.quasi_identifiers if self.kinds[c] == "categorical"]

    def to_dict(self) -> dict:
        return {
            "quasi_identifiers": list(self.quasi_identifiers),
            "sensitive": self.sensitive,
            "target": self.target,
            "identifiers": list(self.identifiers),
            "kinds": dict(self.kinds),
            "sensitive_ordered": self.sensitive_ordered,
        }
