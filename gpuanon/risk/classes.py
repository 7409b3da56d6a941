"""The classes of a published table: rows grouped by their QI values exactly as published.

Every published cell is one value (an interval ``20-30``, a set ``a|b``, a hierarchy node, ``*``, a
``_min`` / ``_max`` pair as two columns, a mean as a number); a missing cell is a value of its own
(``?`` is a value, as any text). A row whose every QI is the suppression marker ``*`` is left out
of the counts, as ARX leaves out suppressed records.

Whole-array work: each column is factorized (missing a code of its own), the codes are combined
into one int64 key per row (mixed radix; re-densified when the product of the cardinalities would
overflow), and the keys are numbered and counted: ``pandas.factorize`` / ``bincount`` on the host,
``unique`` / scatter-add on the device (``xp`` is CuPy when the backend is the GPU).

>>> import pandas as pd
>>> df = pd.DataFrame({"a": ["x", "x", "y", "*"], "b": ["1", "1", None, "*"]})
>>> g = group(df, ["a", "b"])
>>> g.n, g.n_classes, g.sizes.tolist(), g.n_suppressed
(3, 2, [2, 1], 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..backend import is_device_frame, to_device, to_host, to_scalar
from ..errors import InputError

SUPPRESSED = "*"
_LIMIT = 1 << 62


@dataclass
class Classes:
    """``row_class``: the class of every row (-1: suppressed), ``sizes``: f_j, ``pop_sizes``: F_j
    (None without a population table or weights); arrays of ``xp``."""

    row_class: object
    sizes: object
    n: int
    n_rows: int
    n_suppressed: int
    xp: object
    pop_sizes: object = None
    pop_source: str | None = None

    @property
    def n_classes(self) -> int:
        return int(self.sizes.shape[0])


def _column_codes(s: pd.Series) -> tuple[np.ndarray, int, int | None]:
    """``(codes, cardinality, code of '*' or None)`` of a host column; missing is a code of its own."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories
        codes = s.cat.codes.to_numpy(dtype=np.int64)
        codes = np.where(codes < 0, len(cats), codes)
        star = int(cats.get_loc(SUPPRESSED)) if SUPPRESSED in cats else None
        return codes, len(cats) + 1, star
    codes, uniques = pd.factorize(s, use_na_sentinel=False)
    uniques = pd.Index(uniques)
    star = None
    if uniques.dtype == object or pd.api.types.is_string_dtype(uniques.dtype):
        hit = np.flatnonzero(np.asarray(uniques == SUPPRESSED, dtype=bool))
        star = int(hit[0]) if hit.size else None
    return codes.astype(np.int64, copy=False), max(len(uniques), 1), star


def _device_column_codes(s, xp) -> tuple[object, int, object]:
    """A cuDF column's codes on the device (missing: a code of its own) and its '*' mask or None."""
    codes, uniques = s.factorize()
    codes = xp.asarray(codes).astype(xp.int64)
    card = int(len(uniques)) + 1
    codes = xp.where(codes < 0, card - 1, codes)
    star = None
    if str(s.dtype) in ("object", "str", "string"):
        star = xp.asarray((s == SUPPRESSED).fillna(False).values)
    return codes, card, star


def _dense(key, xp) -> tuple[object, int]:
    """Numbering of the distinct keys: ``(inverse, count)``."""
    if xp is np:
        inv, uniq = pd.factorize(key)
        return inv.astype(np.int64, copy=False), len(uniq)
    uniq, inv = xp.unique(key, return_inverse=True)
    return inv.reshape(-1).astype(xp.int64), int(uniq.shape[0])


def combine(codes: list, cards: list, xp) -> tuple[object, int]:
    """One dense class id per row from per-column codes (``cards``: their cardinalities)."""
    n = int(codes[0].shape[0]) if codes else 0
    if not codes:
        return xp.zeros(n, dtype=xp.int64), int(n > 0)
    key, card = codes[0].astype(xp.int64), int(cards[0])
    for c, k in zip(codes[1:], cards[1:]):
        if card * k >= _LIMIT:
            key, card = _dense(key, xp)
        key = key * k + c
        card *= k
    return _dense(key, xp)


def _counts(idx, length: int, xp, weights=None):
    if xp is np:
        return np.bincount(idx, weights=weights, minlength=length)
    out = xp.zeros(length, dtype=xp.int64 if weights is None else xp.float64)
    xp.add.at(out, idx, 1 if weights is None else weights)
    return out


def check_columns(frame, columns, what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        from ..schema import suggest  # noqa: PLC0415

        raise InputError(f"{what} '{missing[0]}' is not a column{suggest(missing[0], list(map(str, frame.columns)))}")


def _codes_of(frame, qi, xp):
    """Per-column codes, cardinalities and the all-'*' row mask (None when no row is all '*')."""
    device_frame = is_device_frame(frame)
    codes, cards, stars = [], [], []
    for c in qi:
        if device_frame:
            cc, k, star = _device_column_codes(frame[c], xp)
            stars.append(star)
        else:
            cc, k, code = _column_codes(frame[c])
            star = None if code is None else (cc == code)
            cc = cc if xp is np else to_device(cc, xp)
            stars.append(None if star is None else (star if xp is np else to_device(star, xp)))
        codes.append(cc)
        cards.append(k)
    supp = None
    if qi and all(s is not None for s in stars):
        supp = stars[0]
        for s in stars[1:]:
            supp = supp & s
    return codes, cards, supp


def group(frame, quasi_identifiers, *, xp=np, weights=None, population_table=None) -> Classes:
    """The classes of ``frame`` on ``quasi_identifiers`` and, with ``weights`` (a column name or
    an array) or ``population_table`` (a frame holding the QIs), their population sizes F_j."""
    qi = list(quasi_identifiers)
    check_columns(frame, qi, "quasi-identifier")
    n_rows = len(frame)
    codes, cards, supp = _codes_of(frame, qi, xp)
    keep = None
    n_supp = 0
    if supp is not None:
        n_supp = int(to_scalar(supp.sum()))
        if n_supp:
            keep = xp.nonzero(~supp)[0]
            codes = [c[keep] for c in codes]
    if population_table is not None:
        return _with_population(frame, qi, codes, cards, keep, n_rows, n_supp, population_table, xp)
    gid, n_cls = combine(codes, cards, xp)
    sizes = _counts(gid, n_cls, xp)
    row_class = gid
    if keep is not None:
        row_class = xp.full(n_rows, -1, dtype=xp.int64)
        row_class[keep] = gid
    pop = None
    if weights is not None:
        w = _weights(frame, weights, qi, xp)
        pop = _counts(gid, n_cls, xp, weights=w if keep is None else w[keep])
    return Classes(row_class, sizes, n_rows - n_supp, n_rows, n_supp, xp, pop, None if pop is None else "weights")


def _weights(frame, weights, qi, xp):
    if isinstance(weights, str):
        if weights in qi:
            raise InputError(f"weights column '{weights}' is also a quasi-identifier; name another column "
                             f"with --weights, or leave it out of --qi")
        check_columns(frame, [weights], "weights column")
        col = frame[weights]
        if is_device_frame(frame):
            col = to_host_frame(col.to_frame()).iloc[:, 0]  # one counted copy of one column
        w = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        name = f"weights column '{weights}'"
    else:
        w = to_host(weights) if not isinstance(weights, (list, tuple)) else np.asarray(weights)
        w = np.asarray(w, dtype=np.float64)
        name = "weights"
    if int(w.shape[0]) != len(frame):
        raise InputError(f"{name} has {int(w.shape[0])} values for {len(frame)} rows; give one weight per row")
    bad = int((np.isnan(w) | (w < 0)).sum())
    if bad:
        raise InputError(f"{name} has {bad} missing, non-numeric or negative value(s); sampling weights "
                         f"must be numbers >= 0 (fill or drop those rows)")
    return w if xp is np else to_device(w, xp)


def _with_population(frame, qi, codes, cards, keep, n_rows, n_supp, population_table, xp) -> Classes:
    """Sample classes and their population sizes F_j, the population table grouped on the same QIs
    (every population row counts)."""
    missing = [c for c in qi if c not in population_table.columns]
    if missing:
        raise InputError(f"population table has no column '{missing[0]}'; it must hold every quasi-identifier")
    sample = frame[qi] if not is_device_frame(frame) else to_host_frame(frame[qi])
    if keep is not None:
        sample = sample.iloc[to_host(keep)]
    pop = population_table[qi]
    m = len(sample)
    all_codes, all_cards = [], []
    for c in qi:
        a, b = sample[c], pop[c]
        if isinstance(a.dtype, pd.CategoricalDtype) or isinstance(b.dtype, pd.CategoricalDtype):
            a, b = a.astype(object), b.astype(object)
        both = pd.concat([a.reset_index(drop=True), b.reset_index(drop=True)], ignore_index=True)
        cc, k, _ = _column_codes(both)
        all_codes.append(cc)
        all_cards.append(k)
    gid_all, n_all = combine(all_codes, all_cards, np)
    s_gid, p_gid = gid_all[:m], gid_all[m:]
    pop_counts = np.bincount(p_gid, minlength=n_all)
    s_inv, s_uniq = pd.factorize(s_gid)
    sizes = np.bincount(s_inv, minlength=len(s_uniq))
    F = pop_counts[s_uniq].astype(np.float64)
    absent = int((F == 0).sum())
    if absent:
        first = sample.iloc[int(np.flatnonzero(F[s_inv] == 0)[0])].tolist()
        raise InputError(f"population table does not contain {absent} of the sample's QI combinations "
                         f"(first: {first}); it must be the superset the sample was drawn from")
    if (F < sizes).any():
        raise InputError("population table has fewer rows than the sample for some QI combination; it must be "
                         "the superset the sample was drawn from (sample rows included)")
    s_inv = s_inv.astype(np.int64)
    row_class = s_inv
    if keep is not None:
        row_class = np.full(n_rows, -1, dtype=np.int64)
        row_class[to_host(keep)] = s_inv
    if xp is not np:
        row_class, sizes, F = to_device(row_class, xp), to_device(sizes, xp), to_device(F, xp)
    return Classes(row_class, sizes, n_rows - n_supp, n_rows, n_supp, xp, F, "population_table")


def to_host_frame(frame):
    from ..backend import frame_to_host  # noqa: PLC0415

    return frame_to_host(frame)
