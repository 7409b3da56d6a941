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

from ..backend import frame_to_host, is_device_frame, to_device, to_host, to_scalar
from ..errors import InputError, shown
from ..table.schema import suggest
from ..release.verify import splitmix64

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


def _bits(values, xp) -> tuple[object, int]:
    """The exact bits of a numeric array as uint64 (a float's -0.0 as 0.0, every NaN one value) and
    their width."""
    dt = values.dtype
    size = dt.itemsize
    unsigned = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[size]
    if dt.kind == "f":
        v = values + dt.type(0)
        v = xp.where(xp.isnan(v), dt.type(np.nan), v)
        return v.view(unsigned).astype(xp.uint64), 8 * size
    if dt.kind == "b":
        return values.astype(xp.uint64), 1
    return values.view(unsigned).astype(xp.uint64), 8 * size


def _host_cells(s: pd.Series, xp):
    """``(cells uint64, width, '*' mask or None)`` of a pandas column: a plain numeric column by its
    bits, any other by its codes (missing a code of its own)."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "fiub":  # on a device: the column up as it is
        # (4 bytes a float32 cell, not the 8 of its widened bits), its bits made there
        cells, width = _bits(s.to_numpy() if xp is np else to_device(s.to_numpy(), xp), xp)
        return cells, width, None
    else:
        codes, card, code = _column_codes(s)
        cells, width = codes.astype(np.uint64), max(1, int(card - 1).bit_length())
        star = None if code is None else (codes == code)
    if xp is not np:
        cells = to_device(cells, xp)
        star = None if star is None else to_device(star, xp)
    return cells, width, star


def _device_cells(s, xp):
    """The same for a cuDF column, on the device."""
    if str(s.dtype)[:1] in ("f", "i", "u", "b") and not s.has_nulls:
        cells, width = _bits(xp.asarray(s.values), xp)
        return cells, width, None
    codes, card, star = _device_column_codes(s, xp)
    return codes.astype(xp.uint64), max(1, int(card - 1).bit_length()), star


#: the word mixer's multiplier (splitmix64's first)
_MUL = 0xBF58476D1CE4E5B9


def _f32_bits(col: np.ndarray, out: np.ndarray) -> np.ndarray:
    """A float32 column's bits as uint32, written into ``out`` (-0.0 as 0.0, every NaN one value)."""
    np.add(col, np.float32(0), out=out)
    nan = np.isnan(out)
    if nan.any():
        out[nan] = np.float32(np.nan)
    return out.view(np.uint32)


def _float32_words(frame, cols) -> list:
    """Plain float32 columns of a pandas frame, two to a uint64 word, exactly (column-wise, into one
    preallocated block: fresh large arrays cost a page fault per page)."""
    n = len(frame)
    block = np.empty((((len(cols) + 1) // 2), n), dtype=np.uint64)
    tmp = np.empty(n, dtype=np.float32)
    for i in range(0, len(cols), 2):
        w = block[i // 2]
        np.copyto(w, _f32_bits(frame[cols[i]].to_numpy(), tmp), casting="unsafe")
        if i + 1 < len(cols):
            np.left_shift(w, np.uint64(32), out=w)
            np.bitwise_or(w, _f32_bits(frame[cols[i + 1]].to_numpy(), tmp), out=w, casting="unsafe")
    return list(block)


def group_rows(words: list, xp) -> tuple[object, int]:
    """Dense class id of every row from its exact 64-bit words (the packed cells), exactly.

    One word is numbered directly. Several are hashed into one uint64 per row and the rows
    numbered by the hash; then every word is checked to be constant in every class (one scatter
    and gather each), and on a collision the rows are grouped by the words themselves.
    """
    n = int(words[0].shape[0]) if words else 0
    if not words:
        return xp.zeros(n, dtype=xp.int64), int(n > 0)
    if len(words) == 1:
        return _dense(words[0], xp)
    k, s29 = xp.uint64(_MUL), xp.uint64(29)
    h = xp.full(n, 0x12345678, dtype=xp.uint64)
    tmp = np.empty(n, dtype=np.uint64) if xp is np else None
    for w in words:
        if xp is np:  # in place, into reused buffers
            np.bitwise_xor(h, w, out=h)
            np.multiply(h, k, out=h)
            np.right_shift(h, s29, out=tmp)
            np.bitwise_xor(h, tmp, out=h)
        else:
            h = (h ^ w) * k
            h = h ^ (h >> s29)
    gid, n_cls = _dense(splitmix64(h, xp), xp)
    del h
    if n_cls == n:  # every row its own hash, so every row its own tuple: nothing can have collided
        return gid, n_cls
    rep = xp.zeros(n_cls, dtype=xp.uint64)
    for w in words:
        rep[gid] = w  # one row's word per class: a row differing from it is a collision
        if xp is np:
            np.take(rep, gid, out=tmp)
            differs = bool(np.not_equal(tmp, w).any())
        else:
            differs = bool(to_scalar((rep[gid] != w).any()))
        if differs:
            dense = [_dense(x, xp) for x in words]
            return combine([d[0] for d in dense], [d[1] for d in dense], xp)
    return gid, n_cls


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
        raise InputError(f"{what} '{missing[0]}' is not a column{suggest(missing[0], list(map(str, frame.columns)))}")


def _codes_of(frame, qi, xp):
    """The rows' exact 64-bit words (cells packed) and the all-'*' row mask (None when no row is
    all '*'); a row's words are equal to another's exactly when all its published QI values are."""
    device_frame = is_device_frame(frame)
    cols = list(qi)
    words = []
    if not device_frame and xp is np:  # plain 32-bit numeric columns: two to a word, in one pass
        f32 = [c for c in cols if isinstance(frame[c].dtype, np.dtype) and frame[c].dtype.kind == "f"
               and frame[c].dtype.itemsize == 4]
        if len(f32) >= 2 and len(frame):
            words += _float32_words(frame, f32)
            cols = [c for c in cols if c not in f32]
    cells, widths, stars = [], [], []
    for c in cols:
        cc, w, star = _device_cells(frame[c], xp) if device_frame else _host_cells(frame[c], xp)
        cells.append(cc)
        widths.append(w)
        stars.append(star)
    words += pack_cells(zip(cells, widths), len(frame), xp)
    supp = None
    if qi and len(stars) == len(qi) and all(s is not None for s in stars):
        supp = stars[0]
        for s in stars[1:]:
            supp = supp & s
    return words, supp


def group(frame, quasi_identifiers, *, xp=np, weights=None, population_table=None) -> Classes:
    """The classes of ``frame`` on ``quasi_identifiers`` and, with ``weights`` (a column name or
    an array) or ``population_table`` (a frame holding the QIs), their population sizes F_j."""
    qi = list(quasi_identifiers)
    check_columns(frame, qi, "quasi-identifier")
    n_rows = len(frame)
    codes, supp = _codes_of(frame, qi, xp)
    if population_table is not None:
        keep, n_supp = None, 0
        if supp is not None and (n_supp := int(to_scalar(supp.sum()))):
            keep = xp.nonzero(~supp)[0]
        return _with_population(frame, qi, keep, n_rows, n_supp, population_table, xp)
    g = group_words(codes, supp, n_rows, xp)
    if weights is not None:
        w = _weights(frame, weights, qi, xp)
        kept = g.row_class >= 0
        g.pop_sizes = _counts(g.row_class[kept], g.n_classes, xp, weights=w[kept])
        g.pop_source = "weights"
        _check_weight_sums(g.pop_sizes, g.sizes, weights, xp)
    return g


def group_words(words: list, supp, n_rows: int, xp) -> Classes:
    """The classes of ``n_rows`` rows from their exact 64-bit words (:func:`pack_cells`), leaving out
    the rows of ``supp`` (a bool mask: every QI ``*``; None: no such row)."""
    keep = None
    n_supp = 0
    if supp is not None:
        n_supp = int(to_scalar(supp.sum()))
        if n_supp:
            keep = xp.nonzero(~supp)[0]
            words = [w[keep] for w in words]
    gid, n_cls = group_rows(words, xp) if words else (xp.zeros(n_rows - n_supp, dtype=xp.int64), int(n_rows > n_supp))
    sizes = _counts(gid, n_cls, xp)
    row_class = gid
    if keep is not None:
        row_class = xp.full(n_rows, -1, dtype=xp.int64)
        row_class[keep] = gid
    return Classes(row_class, sizes, n_rows - n_supp, n_rows, n_supp, xp)


def pack_cells(cells, n: int, xp) -> list:
    """Rows' cells packed exactly into uint64 words: ``cells`` yields ``(array, width)``, an unsigned
    array of ``n`` values below ``2 ** width``, one column at a time (on the host each word is
    filled in place: no uint64 copy of a column is made)."""
    words, word, used = [], None, 0
    for c, w in cells:  # a loop over columns
        if word is not None and used + w > 64:
            words.append(word)
            word, used = None, 0
        if xp is np:
            if word is None:
                word = np.empty(n, dtype=np.uint64)
                np.copyto(word, c, casting="unsafe")
            else:
                np.left_shift(word, np.uint64(w), out=word)
                np.bitwise_or(word, c, out=word, casting="unsafe")
        else:
            c = c if c.dtype == xp.uint64 else c.astype(xp.uint64)
            word = c if word is None else (word << xp.uint64(w)) | c
        used += w
    if word is not None:
        words.append(word)
    return words


def column_cells(s, xp):
    """``(cells uint64, width, '*' mask or None)`` of one pandas column, as :func:`group` reads it."""
    return _host_cells(s, xp)


def merged_classes(cells: list, sizes, star, n_rows: int, xp) -> Classes:
    """The classes of a table whose rows come in groups (partitions) of ``sizes`` rows, each group's
    rows publishing one tuple of cells (``cells``: one uint64 array per column, one entry per group):
    groups with equal tuples are one class; the groups of ``star`` (bool per group: every QI ``*``;
    None: none) are left out as suppressed. ``row_class`` is then each group's class (-1: left out)."""
    n_grp = int(sizes.shape[0])
    sizes = sizes.astype(xp.int64)
    keep = None
    n_supp = 0
    if star is not None and n_grp:
        n_supp = int(to_scalar(xp.where(star, sizes, 0).sum()))
        if bool(to_scalar(star.any())):
            keep = xp.nonzero(~star)[0]
            cells, sizes = [c[keep] for c in cells], sizes[keep]
    m = int(sizes.shape[0])
    if m == 0:
        gid, n_cls = xp.zeros(0, dtype=xp.int64), 0
    elif cells:
        gid, n_cls = group_rows(cells, xp)
    else:
        gid, n_cls = xp.zeros(m, dtype=xp.int64), 1
    merged = _counts(gid, n_cls, xp, weights=sizes.astype(xp.float64)).astype(xp.int64) if xp is np else \
        _sum_int(gid, n_cls, sizes, xp)
    grp_class = gid
    if keep is not None:
        grp_class = xp.full(n_grp, -1, dtype=xp.int64)
        grp_class[keep] = gid
    return Classes(grp_class, merged, n_rows - n_supp, n_rows, n_supp, xp)


def _sum_int(idx, length: int, values, xp):
    out = xp.zeros(length, dtype=xp.int64)
    xp.add.at(out, idx, values)
    return out


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
    bad = int((~np.isfinite(w) | (w < 0)).sum())
    if bad:
        raise InputError(f"{name} has {bad} missing, non-numeric, infinite or negative value(s); sampling weights "
                         f"must be finite numbers >= 0 (fill or drop those rows)")
    return w if xp is np else to_device(w, xp)


def _check_weight_sums(pop, sizes, weights, xp) -> None:
    """Refuse weights whose sum over a class is below its rows (F_j < f_j): a sampling weight is the
    number of population units a row stands for, so a class stands for at least its own rows."""
    short = pop < sizes * (1.0 - 1e-9)  # a tolerance for sums of fractions such as 0.1 * 10
    n_short = int(to_scalar(short.sum()))
    if not n_short:
        return
    first = int(to_scalar(xp.nonzero(short)[0][0]))
    f, big_f = int(to_scalar(sizes[first])), float(to_scalar(pop[first]))
    name = f"weights column '{weights}'" if isinstance(weights, str) else "weights"
    raise InputError(f"{name} sums to less than the rows of {n_short} QI combination(s) (e.g. {f} row(s) whose "
                     f"weights sum to {big_f:g}); a sampling weight is how many population units a row stands "
                     f"for: give weights of at least 1 (inverse inclusion probabilities)")


def _with_population(frame, qi, keep, n_rows, n_supp, population_table, xp) -> Classes:
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
        if pd.api.types.is_numeric_dtype(a.dtype) != pd.api.types.is_numeric_dtype(b.dtype):
            a, b = _as_text(a), _as_text(b)  # one side read as numbers, the other as text: match the text
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
                         f"(first: {shown(first)}); it must be the superset the sample was drawn from")
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


def _as_text(s: pd.Series) -> pd.Series:
    """Values as text (missing stays missing): a whole float as its integer text, as a CSV has it."""
    def one(v):
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)
    return s.astype(object).map(one, na_action="ignore")


def to_host_frame(frame):
    return frame_to_host(frame)
