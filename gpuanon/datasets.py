"""Datasets for examples, tests and benchmarks.

* :func:`load_adult` -- the UCI Adult census table (32,561 rows), bundled with the package.
* :func:`make_hepmass` -- seeded synthetic data shaped like HEPMASS (28 float32 features and a
  balanced binary label), at any size; 10.5 million rows fit in about 1.2 GB.
* :func:`load_sklearn` -- the small scikit-learn tables (``breast_cancer``, ``wine``, ``digits``).
* :func:`load_table` -- a user's CSV / TSV / Parquet file.
* :func:`get_dataset` -- one of the named datasets together with its default column roles.

Examples
--------
>>> from gpuanon.datasets import get_dataset
>>> df, roles = get_dataset("adult")
>>> df.shape, roles["target"]
((32561, 15), 'income')
"""

from __future__ import annotations

import math
import numbers
import os
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError

__all__ = [
    "ADULT_COLUMNS",
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
    "make_hepmass",
]

# --------------------------------------------------------------------------------------------
# Adult
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# HEPMASS-like synthetic data
# --------------------------------------------------------------------------------------------

HEPMASS_FEATURES = [f"f{i}" for i in range(28)]
#: The values the discrete mass-like feature ``f27`` takes (as in HEPMASS, the background
#: rows get a mass drawn from the same values as the signal rows).
HEPMASS_MASSES = (500.0, 750.0, 1000.0, 1250.0, 1500.0)

# Rows are generated in fixed blocks of this size, each from its own random stream derived
# from (random_state, block index): the output does not depend on ``chunk_rows``.
_HEPMASS_BLOCK = 1 << 16

# f0..f7: a fixed mixing of 6 latent gaussians (correlated features) plus independent noise.
_HEPMASS_MIX = np.array(
    [
        [0.9, 0.4, 0.0, 0.0, 0.2, 0.0],
        [0.5, 0.0, 0.8, 0.0, 0.0, 0.3],
        [0.0, 0.7, 0.6, 0.0, 0.0, 0.0],
        [0.3, 0.0, 0.0, 0.9, 0.0, 0.0],
        [0.0, -0.6, 0.0, 0.5, 0.4, 0.0],
        [0.0, 0.0, 0.4, 0.0, 0.8, -0.3],
        [-0.4, 0.0, 0.0, 0.3, 0.0, 0.8],
        [0.0, 0.3, -0.5, 0.0, 0.0, 0.7],
    ],
    dtype=np.float32,
)
_HEPMASS_NOISE = np.float32(0.5)
# Mean shift of the signal rows (label 1) on f0..f7.
_HEPMASS_SHIFT = np.array([0.6, 0.0, 0.4, 0.0, -0.5, 0.0, 0.3, 0.0], dtype=np.float32)
# Relative resolution of the mass-like features f22..f26 for signal rows.
_HEPMASS_WIDTH = np.array([0.05, 0.08, 0.12, 0.18, 0.25], dtype=np.float32)


def _check_count(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"make_hepmass: {what} must be a positive integer, got {value!r}")
    value = int(value)
    if value < 1:
        raise ValueError(f"make_hepmass: {what} must be a positive integer, got {value!r}")
    return value


def _fill_block(rng: np.random.Generator, out: np.ndarray, label: np.ndarray,
                latent: np.ndarray, extra: np.ndarray, idx: np.ndarray) -> None:
    """Draw one block's random numbers, in a fixed order, into the given slices."""
    m = label.shape[0]
    label[: m // 2] = 1
    label[m // 2:] = 0
    rng.shuffle(label)
    idx[:] = rng.integers(0, len(HEPMASS_MASSES), size=m, dtype=np.int8)
    f32 = np.float32
    for k in range(latent.shape[0]):
        rng.standard_normal(dtype=f32, out=latent[k])
    for j in range(0, 8):  # noise of the correlated features
        rng.standard_normal(dtype=f32, out=out[j])
    for j in range(8, 12):  # log-normal momenta
        rng.standard_normal(dtype=f32, out=out[j])
        out[j] *= f32(0.7)
        np.exp(out[j], out=out[j])  # per block: chunking cannot change the result
    for j in range(12, 16):  # exponential momenta
        rng.standard_exponential(dtype=f32, out=out[j])
    for j in range(16, 20):  # azimuthal angles
        rng.random(dtype=f32, out=out[j])
    for j in range(20, 22):  # pseudorapidities
        rng.standard_normal(dtype=f32, out=out[j])
    for j in range(22, 27):  # background mass-like shape
        rng.standard_exponential(dtype=f32, out=out[j])
    for k in range(extra.shape[0]):  # signal mass-like resolution: log-normal, positive
        rng.standard_normal(dtype=f32, out=extra[k])
        extra[k] *= _HEPMASS_WIDTH[k]
        np.exp(extra[k], out=extra[k])


def _transform_chunk(out: np.ndarray, label: np.ndarray, latent: np.ndarray,
                     extra: np.ndarray, idx: np.ndarray) -> None:
    """Turn a chunk's raw draws into features, in place (element-wise, exactly rounded ops)."""
    f32 = np.float32
    sig = label.astype(bool)
    sig_f = label.astype(f32)
    masses = np.asarray(HEPMASS_MASSES, dtype=f32)
    mass = masses[idx]
    out[27] = mass
    # f0..f7: correlated gaussians with a label-dependent mean shift.
    for j in range(8):
        row = out[j]
        row *= _HEPMASS_NOISE
        for k in range(latent.shape[0]):
            a = _HEPMASS_MIX[j, k]
            if a != 0:
                row += a * latent[k]
        if _HEPMASS_SHIFT[j] != 0:
            row += _HEPMASS_SHIFT[j] * sig_f
    # f8..f11: log-normal momenta; the signal has a harder spectrum.
    harder = f32(1) + f32(0.35) * sig_f
    for j in range(8, 12):
        out[j] *= harder
    # f12..f15: exponential momenta; two of them carry a little signal.
    out[12] *= f32(1) + f32(0.25) * sig_f
    out[14] *= f32(1) + f32(0.15) * sig_f
    # f16..f19: angles uniform on [-pi, pi); f20..f21: gaussian eta; no signal.
    for j in range(16, 20):
        out[j] *= f32(2 * math.pi)
        out[j] -= f32(math.pi)
    for j in range(20, 22):
        out[j] *= f32(1.2)
    # f22..f26: invariant-mass-like; signal peaks at the mass (in TeV), background is broad.
    mass_tev = mass * f32(1e-3)
    for k, j in enumerate(range(22, 27)):
        bg = out[j]
        bg *= f32(0.6)
        bg += f32(0.4)
        peak = extra[k]
        peak *= mass_tev
        np.copyto(bg, peak, where=sig)


def make_hepmass(n_rows: int, random_state: int = 0,
                 chunk_rows: int = 1_000_000) -> pd.DataFrame:
    """Make seeded synthetic data shaped like the HEPMASS particle-physics benchmark.

    The frame has the 28 ``float32`` feature columns ``f0`` ... ``f27``
    (:data:`HEPMASS_FEATURES`) and an ``int8`` ``label`` column (1 = signal, 0 = background)
    with ``n_rows // 2`` ones: balanced up to one row. The features imitate physics features:

    * ``f0``-``f7``: correlated gaussians (a fixed mixing of 6 latent gaussians plus noise);
      ``f0``, ``f2``, ``f4``, ``f6`` have a label-dependent mean shift;
    * ``f8``-``f15``: positive, heavy-tailed "momenta" (log-normal and exponential); the
      signal has a harder spectrum on ``f8``-``f12`` and ``f14``;
    * ``f16``-``f21``: angles (uniform on [-pi, pi)) and pseudorapidities, without signal;
    * ``f22``-``f26``: invariant-mass-like features: for signal rows they peak at the mass
      (in TeV) with growing log-normal widths; for background rows they follow a broad,
      shifted exponential;
    * ``f27``: the mass parameter, one of :data:`HEPMASS_MASSES` (500 ... 1500), uniform for
      signal and background alike -- a discrete column with many ties.

    All values are finite.

    Parameters
    ----------
    n_rows : int
        Number of rows, at least 1.
    random_state : int, default 0
        Non-negative seed. The same ``(n_rows, random_state)`` always gives the same frame
        (with the same NumPy version); the first rows do not depend on ``n_rows`` either.
    chunk_rows : int, default 1_000_000
        Rows transformed per step (rounded up to a multiple of 65,536). It bounds the scratch
        memory only and never changes the result: rows are drawn in fixed blocks of 65,536,
        each from a random stream seeded by ``SeedSequence(random_state, spawn_key=(block,))``.

    Returns
    -------
    pandas.DataFrame
        ``n_rows`` rows, columns ``f0`` ... ``f27`` (``float32``, one 2-D block, no copy of
        the generated array) and ``label`` (``int8``). About ``n_rows * 113`` bytes.

    Raises
    ------
    ValueError
        If ``n_rows`` or ``chunk_rows`` is not a positive integer, or ``random_state`` is not
        a non-negative integer.

    Examples
    --------
    >>> df = make_hepmass(1000, random_state=1)
    >>> df.shape
    (1000, 29)
    >>> int(df["label"].sum())
    500
    >>> sorted(df["f27"].unique().tolist())
    [500.0, 750.0, 1000.0, 1250.0, 1500.0]
    """
    n = _check_count(n_rows, "n_rows")
    chunk = _check_count(chunk_rows, "chunk_rows")
    if (isinstance(random_state, (bool, np.bool_))
            or not isinstance(random_state, numbers.Integral) or int(random_state) < 0):
        raise ValueError(
            f"make_hepmass: random_state must be a non-negative integer, got {random_state!r}"
        )
    seed = int(random_state)
    block = _HEPMASS_BLOCK
    chunk = max(block, -(-chunk // block) * block)
    chunk = min(chunk, -(-n // block) * block)

    out = np.empty((len(HEPMASS_FEATURES), n), dtype=np.float32)
    label = np.empty(n, dtype=np.int8)
    latent = np.empty((_HEPMASS_MIX.shape[1], chunk), dtype=np.float32)
    extra = np.empty((len(_HEPMASS_WIDTH), chunk), dtype=np.float32)
    idx = np.empty(chunk, dtype=np.int8)

    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        for b0 in range(c0, c1, block):
            b1 = min(c1, b0 + block)
            ss = np.random.SeedSequence(seed, spawn_key=(b0 // block,))
            rng = np.random.Generator(np.random.PCG64(ss))
            s0, s1 = b0 - c0, b1 - c0
            _fill_block(rng, out[:, b0:b1], label[b0:b1], latent[:, s0:s1],
                        extra[:, s0:s1], idx[s0:s1])
        m = c1 - c0
        _transform_chunk(out[:, c0:c1], label[c0:c1], latent[:, :m], extra[:, :m], idx[:m])
    del latent, extra, idx

    # out is (28, n) C-ordered; its transpose is the (n, 28) block pandas stores as is.
    df = pd.DataFrame(out.T, columns=list(HEPMASS_FEATURES), copy=False)
    df["label"] = label
    return df


# --------------------------------------------------------------------------------------------
# scikit-learn toy tables
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# User tables
# --------------------------------------------------------------------------------------------

TABLE_EXTENSIONS = (".csv", ".csv.gz", ".tsv", ".parquet", ".pq")


def _table_kind(path: str) -> str | None:
    lower = path.lower()
    if lower.endswith(".csv") or lower.endswith(".csv.gz"):
        return "csv"
    if lower.endswith(".tsv"):
        return "tsv"
    if lower.endswith(".parquet") or lower.endswith(".pq"):
        return "parquet"
    return None


def load_table(path: str | os.PathLike, encoding: str | None = None) -> pd.DataFrame:
    """Read a CSV, TSV or Parquet file into a pandas frame, choosing the reader by extension.

    CSV and TSV files are read with ``skipinitialspace=True`` (so ``"a, b"`` gives ``'b'``);
    empty cells become NaN. Numbers are parsed exactly (``float_precision="round_trip"``: every
    value is the double nearest to its text, as Python's ``float()`` gives), so intervals
    computed from them contain the file's values on every pandas version.

    Parameters
    ----------
    path : str or os.PathLike
        A file ending in ``.csv``, ``.csv.gz``, ``.tsv``, ``.parquet`` or ``.pq``
        (case-insensitive).
    encoding : str, optional
        Text encoding of a CSV / TSV file (default UTF-8), e.g. ``"latin-1"``.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputError
        If the extension is not one of :data:`TABLE_EXTENSIONS`, the file is missing, empty,
        not in the encoding, not a table of its kind, truncated, or has a column name twice;
        the message says what is wrong and how to fix it.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(p, "w").write("a,b\\n1, x\\n2,\\n")
    >>> load_table(p)
       a    b
    0  1    x
    1  2  NaN
    """
    p = os.fspath(path)
    if not isinstance(p, str):
        p = os.fsdecode(p)
    kind = _table_kind(p)
    if kind is None:
        raise InputError(
            f"cannot read input file {p!r}: unknown extension; accepted extensions are "
            f"{', '.join(TABLE_EXTENSIONS)}"
        )
    if not os.path.exists(p):
        raise InputError(f"cannot read input file {p!r}: no such file; check the path")
    if os.path.isdir(p):
        raise InputError(f"cannot read input file {p!r}: it is a directory; give a file")
    if encoding is not None:
        import codecs  # noqa: PLC0415

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise InputError(f"--encoding '{encoding}' is not a known text encoding; use e.g. utf-8, "
                             f"latin-1 or cp1252") from None
    if os.path.getsize(p) == 0:
        raise InputError(f"cannot read input file {p!r}: the file is empty (0 bytes); give a table with a "
                         f"header row")
    reason = None
    try:
        if kind == "parquet":
            df = pd.read_parquet(p)
        else:
            opts = dict(sep="\t" if kind == "tsv" else ",", skipinitialspace=True, encoding=encoding,
                        encoding_errors="strict")
            df = pd.read_csv(p, float_precision="round_trip", **opts)
            if df.shape[1]:
                _refuse_duplicate_names(p, pd.read_csv(p, header=None, nrows=1, dtype=str,
                                                       keep_default_na=False, **opts).iloc[0].tolist())
    except InputError:
        raise
    except ImportError as exc:
        reason = f"reading Parquet needs pyarrow or fastparquet ({exc})"
    except UnicodeDecodeError as exc:
        reason = _decode_reason(p, kind, exc, encoding)
    except EOFError:
        reason = "the compressed file is truncated (it ends early); copy or download it again"
    except OSError as exc:
        text = exc.strerror or str(exc) or type(exc).__name__
        if "gzip" in text.lower() or "compressed" in text.lower():
            reason = f"not a valid gzip file ({text}); give a plain .csv or a real .csv.gz"
        else:
            reason = f"{text}; check that the file is readable"
    except pd.errors.EmptyDataError:
        reason = "the file has no header row (nothing but blank lines); give a table with a header row"
    except pd.errors.ParserError as exc:
        reason = (f"not a well-formed {kind.upper()} ({' '.join(str(exc).split())}); check the separator "
                  f"and quoting of that line")
    except Exception as exc:  # e.g. pyarrow's own error types
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        if kind == "parquet":
            _refuse_duplicate_names(p, _parquet_names(p))  # pyarrow refuses them with a cryptic message
            reason = (f"not a Parquet file, or a truncated one ({text}); give the complete file, or a CSV "
                      f"with the .csv extension")
        else:
            reason = text
    if reason is not None:
        raise InputError(f"cannot read input file {p!r}: {' '.join(reason.split())}")
    if kind == "parquet":
        _refuse_duplicate_names(p, [str(c) for c in df.columns])
    return df


def _parquet_names(p: str) -> list:
    """The column names a Parquet file's schema holds ([] when it cannot be read)."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415

        return list(pq.read_schema(p).names)
    except Exception:  # not Parquet at all: the caller says so
        return []


def _refuse_duplicate_names(p: str, names: list) -> None:
    """Duplicate column names are refused (pandas would rename the second ``a`` to ``a.1``)."""
    seen: dict = {}
    for i, n in enumerate(names):
        seen.setdefault(str(n).strip(), []).append(i + 1)
    dup = {n: pos for n, pos in seen.items() if len(pos) > 1}
    if dup:
        what = "; ".join(f"'{n}' (columns {', '.join(map(str, pos))})" for n, pos in dup.items())
        raise InputError(f"cannot read input file {p!r}: column names appear more than once: {what}; "
                         f"rename them so that every column name is unique")


def _decode_reason(p: str, kind: str, exc: UnicodeDecodeError, encoding: str | None) -> str:
    with open(p, "rb") as f:
        head = f.read(8)
    if head.startswith(b"PAR1"):
        return "it is a Parquet file, not a CSV; rename it to .parquet"
    if head.startswith(b"PK\x03\x04"):
        return "it is a ZIP archive (an Excel .xlsx?), not a CSV; export the sheet as CSV"
    if head.startswith(b"\x1f\x8b") and not p.lower().endswith(".gz"):
        return "it is gzip-compressed; rename it to .csv.gz"
    enc = encoding or "utf-8"
    return (f"the text is not valid {enc} (byte {exc.object[exc.start:exc.start + 1]!r} at byte offset "
            f"{exc.start}); pass the file's encoding, e.g. --encoding latin-1 (or cp1252), or re-save it as UTF-8")


# --------------------------------------------------------------------------------------------
# Named datasets with default roles
# --------------------------------------------------------------------------------------------

DATASETS = ("adult", "hepmass") + SKLEARN_DATASETS
_HEPMASS_DEFAULT_ROWS = 1_000_000


def _check_rows(rows: Any) -> int:
    if isinstance(rows, (bool, np.bool_)) or not isinstance(rows, numbers.Integral) or rows < 1:
        raise InputError(f"rows must be a positive integer, got {rows!r}")
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
