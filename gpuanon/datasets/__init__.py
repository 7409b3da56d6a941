"""Datasets for examples, tests and benchmarks.

* :func:`load_adult` -- the UCI Adult census table (32,561 rows), bundled with the package.
* :func:`make_hepmass` -- seeded synthetic data shaped like HEPMASS (28 float32 features and a
  balanced binary label), at any size; 10.5 million rows fit in about 1.2 GB.
* :func:`load_sklearn` -- the small scikit-learn tables (``breast_cancer``, ``wine``, ``digits``).
* :func:`load_table` -- a user's CSV / TSV / Parquet file (CSV read as text, typed by the rules of
  :mod:`~gpuanon.datasets.text_types`).
* :func:`get_dataset` -- one of the named datasets together with its default column roles.

The package: :mod:`~gpuanon.datasets.bundled` (Adult, scikit-learn's sets),
:mod:`~gpuanon.datasets.hepmass` (the generator), :mod:`~gpuanon.datasets.tables` (reading a
user's file); :func:`get_dataset` is here.

Examples
--------
>>> from gpuanon.datasets import get_dataset
>>> df, roles = get_dataset("adult")
>>> df.shape, roles["target"]
((32561, 15), 'income')
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, shown
from .bundled import (ADULT_COLUMNS, ADULT_QUASI_IDENTIFIERS, ADULT_TARGET, SKLEARN_DATASETS, load_adult,
                      load_sklearn)
from .hepmass import HEPMASS_FEATURES, HEPMASS_MASSES, make_hepmass
from .tables import TABLE_EXTENSIONS, ColumnTypes, load_table, nullable_integers

__all__ = [
    "ADULT_COLUMNS",
    "ColumnTypes",
    "ADULT_QUASI_IDENTIFIERS",
    "ADULT_TARGET",
    "DATASETS",
    "HEPMASS_FEATURES",
    "HEPMASS_MASSES",
    "SKLEARN_DATASETS",
    "TABLE_EXTENSIONS",
    "get_dataset",
    "load_adult",
    "load_sklearn",
    "load_table",
    "nullable_integers",
    "make_hepmass",
]

DATASETS = ("adult", "hepmass") + SKLEARN_DATASETS
_HEPMASS_DEFAULT_ROWS = 1_000_000


def _check_rows(rows: Any) -> int:
    if isinstance(rows, (bool, np.bool_)) or not isinstance(rows, numbers.Integral) or rows < 1:
        raise InputError(f"rows must be a positive integer, got {shown(rows)}")
    return int(rows)


def get_dataset(name: str, rows: int | None = None,
                seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Return a named dataset and its default column roles.

    Parameters
    ----------
    name : {'adult', 'hepmass', 'breast_cancer', 'wine', 'digits'}
        Which dataset (case-insensitive).
    rows : int, optional
        For ``'hepmass'``, the number of rows to generate (default 1,000,000). For the other
        (fixed-size) datasets, ``None`` keeps every row and an integer keeps a seeded random
        sample of that many rows, in their original order; asking for more rows than the
        dataset has is an error.
    seed : int, default 0
        The ``random_state`` of :func:`make_hepmass`, or the seed of the row sample.

    Returns
    -------
    frame : pandas.DataFrame
    roles : dict
        ``{"quasi_identifiers": [...], "target": str, "sensitive": str}``: for ``'adult'``
        the :data:`ADULT_QUASI_IDENTIFIERS` and ``'income'``; for ``'hepmass'`` the 28
        features and ``'label'``; for the scikit-learn tables every feature column and
        ``'target'``. The lists are fresh copies.

    Raises
    ------
    InputError
        If ``name`` is unknown (the message lists the accepted names) or ``rows`` is invalid.

    Examples
    --------
    >>> df, roles = get_dataset("hepmass", rows=1000, seed=3)
    >>> df.shape, roles["sensitive"], len(roles["quasi_identifiers"])
    ((1000, 29), 'label', 28)
    """
    key = str(name).strip().lower().replace("-", "_")
    if key not in DATASETS:
        raise InputError(f"unknown dataset {name!r}; accepted names: {', '.join(DATASETS)}")
    if rows is not None:
        rows = _check_rows(rows)

    if key == "hepmass":
        try:
            df = make_hepmass(_HEPMASS_DEFAULT_ROWS if rows is None else rows,
                              random_state=seed)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        return df, {"quasi_identifiers": list(HEPMASS_FEATURES), "target": "label",
                    "sensitive": "label"}

    if key == "adult":
        df = load_adult()
        roles = {"quasi_identifiers": list(ADULT_QUASI_IDENTIFIERS), "target": ADULT_TARGET,
                 "sensitive": ADULT_TARGET}
    else:
        df = load_sklearn(key)
        roles = {"quasi_identifiers": [c for c in df.columns if c != "target"],
                 "target": "target", "sensitive": "target"}

    if rows is not None and rows != len(df):
        if rows > len(df):
            raise InputError(
                f"dataset {key!r} has {len(df)} rows; cannot take rows={rows}"
            )
        df = df.sample(n=rows, random_state=seed).sort_index().reset_index(drop=True)
    return df, roles
