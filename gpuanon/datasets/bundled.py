"""The tables that come with gpuanon or scikit-learn: UCI Adult (bundled) and scikit-learn's small sets."""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["ADULT_COLUMNS", "ADULT_QUASI_IDENTIFIERS", "ADULT_TARGET", "SKLEARN_DATASETS", "load_adult",
           "load_sklearn"]

ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "gender",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]
ADULT_QUASI_IDENTIFIERS = [
    "age",
    "workclass",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "gender",
    "native-country",
]
ADULT_TARGET = "income"

_ADULT_INT_COLUMNS = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)
_ADULT_FILE = "adult.csv.gz"


def load_adult() -> pd.DataFrame:
    """Load the UCI Adult census table bundled with gpuanon.

    The table is the training file ``adult.data`` of the UCI Adult data set (Becker & Kohavi,
    1996, CC BY 4.0; see ``gpuanon/data/ADULT_LICENSE.txt``): 32,561 rows and the 15 columns of
    :data:`ADULT_COLUMNS`. ``'?'`` is the data set's own "unknown" category and is kept as a
    value: the frame has no missing values.

    Returns
    -------
    pandas.DataFrame
        32,561 rows x 15 columns. The six numeric columns (``age``, ``fnlwgt``,
        ``education-num``, ``capital-gain``, ``capital-loss``, ``hours-per-week``) are
        ``int64``; the others are ``object`` columns of Python ``str``. ``income`` is
        ``'<=50K'`` or ``'>50K'``.

    Examples
    --------
    >>> df = load_adult()
    >>> df.shape
    (32561, 15)
    >>> df["income"].value_counts().to_dict()
    {'<=50K': 24720, '>50K': 7841}
    """
    dtypes: dict[str, Any] = {
        c: (np.int64 if c in _ADULT_INT_COLUMNS else object) for c in ADULT_COLUMNS
    }
    ref = resources.files("gpuanon") / "data" / _ADULT_FILE
    with ref.open("rb") as fh:
        df = pd.read_csv(
            fh,
            compression="gzip",
            dtype=dtypes,
            keep_default_na=False,
            na_filter=False,
        )
    if list(df.columns) != ADULT_COLUMNS:  # pragma: no cover - guards the bundled file
        raise InputError(f"bundled {_ADULT_FILE} has unexpected columns {list(df.columns)}")
    return df



SKLEARN_DATASETS = ("breast_cancer", "wine", "digits")


def load_sklearn(name: str) -> pd.DataFrame:
    """Load one of scikit-learn's small bundled tables as a pandas frame.

    scikit-learn is imported only when this function is called.

    Parameters
    ----------
    name : {'breast_cancer', 'wine', 'digits'}
        Which table.

    Returns
    -------
    pandas.DataFrame
        The feature columns (scikit-learn's names) followed by an integer ``target`` column.

    Raises
    ------
    InputError
        If ``name`` is not one of :data:`SKLEARN_DATASETS`.
    ImportError
        If scikit-learn is not installed.

    Examples
    --------
    >>> df = load_sklearn("wine")  # doctest: +SKIP
    >>> df.shape  # doctest: +SKIP
    (178, 14)
    """
    if name not in SKLEARN_DATASETS:
        raise InputError(
            f"unknown scikit-learn dataset {name!r}; accepted: {', '.join(SKLEARN_DATASETS)}"
        )
    try:
        from sklearn import datasets as skd
    except ImportError as exc:
        raise ImportError(
            f"the {name!r} dataset needs scikit-learn: install scikit-learn "
            f"(pip install scikit-learn); import failed with: {exc}"
        ) from exc
    bunch = getattr(skd, f"load_{name}")(as_frame=True)
    df = bunch.frame.copy()
    df["target"] = df["target"].astype(np.int64)
    return df.reset_index(drop=True)
