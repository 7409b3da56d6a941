"""Values as read: the one test of a missing cell value, a NumPy scalar as JSON takes it, and the
ordering rules of a dictionary (values by value and type, categories by leaf order or majority target
and share), which read values and counts only -- never how the rows were split or which came first.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pandas as pd

# an object column is hashed by its objects' addresses first when it holds many rows (the few distinct
# objects are then hashed by value); a column of mostly distinct objects is hashed by value at once
BY_ADDRESS_MIN_ROWS = 1 << 14
BY_ADDRESS_MAX_SHARE = 0.25


def is_na(v) -> bool:
    """A missing value: None, NaN, NA, NaT (``pd.isna``; False for values it cannot judge, e.g. lists).
    The one test of a missing cell value (``cells``, ``encoding``, ``hierarchy`` and ``anonymize`` use it)."""
    if v is None or v is pd.NA:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def factorize(values, use_na_sentinel: bool = True):
    """``pd.factorize(values, sort=False, use_na_sentinel=...)`` (codes, distinct values in order of
    first appearance), the same codes and values by a cheaper route for an object array of many rows.

    Rows of an object column that hold the same object (text read from a file or repeated in a frame
    shares its string objects) hash once: the rows are factorized by their objects' addresses (integers,
    no call into Python per row), the first row of each distinct object, in order, by value, and each
    row takes its object's code. The same codes and values: one object is one value, and the distinct
    objects in order of first appearance meet the distinct values in theirs. A column whose objects are
    mostly distinct (over :data:`BY_ADDRESS_MAX_SHARE` of its rows) is hashed by value directly.

    >>> a = np.array(["b", None, "a", "b"], dtype=object)
    >>> codes, uniq = factorize(np.concatenate([a] * 5000))
    >>> codes[:4].tolist(), uniq.tolist()
    ([0, -1, 1, 0], ['b', 'a'])
    """
    arr = values.to_numpy() if isinstance(values, pd.Series) else values
    n = arr.shape[0] if isinstance(arr, np.ndarray) else 0
    if n < BY_ADDRESS_MIN_ROWS or arr.dtype != object or arr.ndim != 1:
        return pd.factorize(values, sort=False, use_na_sentinel=use_na_sentinel)
    arr = np.ascontiguousarray(arr)  # ``arr`` holds the objects alive while their addresses are read
    addr = np.ctypeslib.as_array(ctypes.cast(arr.ctypes.data, ctypes.POINTER(ctypes.c_ssize_t)), shape=(n,)).copy()
    acodes, auniq = pd.factorize(addr, sort=False)
    if auniq.shape[0] > BY_ADDRESS_MAX_SHARE * n:
        return pd.factorize(values, sort=False, use_na_sentinel=use_na_sentinel)
    first = np.empty(auniq.shape[0], dtype=np.int64)
    first[acodes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)  # each object's first row
    vcodes, uniq = pd.factorize(arr.take(first), sort=False, use_na_sentinel=use_na_sentinel)
    return vcodes.take(acodes), uniq


def jsonable(v):
    """A NumPy scalar as the Python number it holds (other values as they are)."""
    return v.item() if isinstance(v, (np.integer, np.floating, np.bool_)) else v


def sort_key(v):
    """Sort key of a category: numbers by value, then text, missing last."""
    if is_na(v):
        return (2, "")
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, str(v))


def value_key(v):
    """A value's place in a dictionary: missing last, numbers by value, then text; values with the
    same text (``1`` the number before ``'1'`` the text) by their type's name, so that the order
    never depends on which value came first."""
    return (is_na(v), sort_key(v), type(v).__name__)


def value_order(uniq: list) -> list:
    """Positions of the distinct values ``uniq`` in dictionary order (:func:`value_key`)."""
    return sorted(range(len(uniq)), key=lambda i: value_key(uniq[i]))


def category_order(uniq: list, joint=None, order_values=None) -> list:
    """Finalize of a categorical column's dictionary: the positions of its distinct values ``uniq``
    in code order. A hierarchy's leaf order ``order_values`` decides when given (matched by text,
    missing as ``NaN``; values not in it last, by value); else with ``joint`` (rows per value x
    target value, target values in dictionary order) the majority target value, then its share,
    then the value (missing last); else the value.

    >>> category_order(["b", "a", "c"]), category_order(["b", "a"], np.array([[1, 3], [2, 0]]))
    ([1, 0, 2], [1, 0])
    """
    m = len(uniq)
    if order_values is not None:
        pos = {("NaN" if is_na(v) else str(v)): i for i, v in enumerate(order_values)}
        return sorted(range(m), key=lambda i: (pos.get("NaN" if is_na(uniq[i]) else str(uniq[i]), len(pos)),
                                               value_key(uniq[i])))
    if joint is not None:
        tstar = joint.argmax(axis=1)
        share = joint[np.arange(m), tstar] / np.maximum(joint.sum(axis=1), 1)
        return sorted(range(m), key=lambda i: (int(tstar[i]), float(share[i]), value_key(uniq[i])))
    return value_order(uniq)
