"""The thesis's frequency-based hierarchy (algorithms 1 and 2; the contract, section 5).

``t*(v)`` is the most frequent target value of value ``v``, ``f(v)`` its share, and
``b(v) = min(floor(100 f(v) / rho), 100 / rho - 1)`` the percentile bucket of that share; values
with equal ``(t*(v), b(v))`` form one group and ``H_rho`` = leaves, groups, ``*``.
:func:`frequency_table` does the one group-by count pass (algorithm 1); every ``rho`` derives
from its table (:meth:`FrequencyTable.hierarchy`), so trying all of :data:`RHO_CANDIDATES`
costs one pass. On an encoded table :meth:`FrequencyTable.from_codes` counts the column's codes
(one ``bincount`` on the table's device) instead of hashing the text again.

Group labels: by default the group's values joined by ``|`` in leaf order, written as a set cell is
(``\\N`` for a missing value, ``|`` and ``\\`` inside a value escaped; a group of one value is labelled
by that value); with ``labels="target"``: ``"<t*> <lo>-<hi>%"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from numbers import Integral, Real
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..backend import get_namespace, to_host
from ..table.cells import set_text
from ..table.encoding import codes_sorted
from ..table.values import is_na, value_key
from ..errors import InputError
from .labels import ROOT, node_text
from .tree import Hierarchy

RHO_CANDIDATES = (1, 2, 4, 5, 10, 20, 25, 50, 100)
"""The default percentile ranges tried per column (the contract, section 5.6)."""


def check_rho(rho) -> Fraction:
    """``rho`` as an exact fraction; ``ValueError`` unless ``100 / rho`` is a positive integer.

    Examples
    --------
    >>> check_rho(10), check_rho(0.5)
    (Fraction(10, 1), Fraction(1, 2))
    >>> check_rho(3)
    Traceback (most recent call last):
    ...
    ValueError: rho = 3: 100 / rho must be an integer; use one of 1, 2, 4, 5, 10, 20, 25, 50, 100
    """
    fix = "use one of " + ", ".join(map(str, RHO_CANDIDATES))
    if isinstance(rho, (bool, np.bool_)) or not isinstance(rho, Real):
        raise ValueError(f"rho = {rho!r}: must be a number such that 100 / rho is an integer; {fix}")
    try:
        r = Fraction(int(rho)) if isinstance(rho, Integral) else Fraction(str(float(rho)))
    except (ValueError, OverflowError):
        raise ValueError(f"rho = {rho!r}: must be a finite number; {fix}") from None
    if r <= 0 or r > 100 or (100 / r).denominator != 1:
        raise ValueError(f"rho = {rho!r}: 100 / rho must be an integer; {fix}")
    return r


def count_table(codes, target_codes, n_values: int, n_targets: int, xp=None) -> np.ndarray:
    """The frequency table ``F[v, t]`` from value codes and target codes: one ``bincount``.

    Works on NumPy or CuPy arrays; the (small) table comes back to the host.

    Examples
    --------
    >>> import numpy as np
    >>> count_table(np.array([0, 0, 1, 2]), np.array([1, 1, 0, 1]), 3, 2).tolist()
    [[0, 2], [1, 0], [0, 1]]
    """
    xp = get_namespace(codes) if xp is None else xp
    if n_values == 0 or n_targets == 0:
        return np.zeros((n_values, n_targets), dtype=np.int64)
    key = xp.asarray(codes).astype(xp.int64) * n_targets + xp.asarray(target_codes).astype(xp.int64)
    f = xp.bincount(key, minlength=n_values * n_targets)
    return to_host(f).astype(np.int64).reshape(n_values, n_targets)


@dataclass
class FrequencyTable:
    """Algorithm 1's result for one column: ``F[v, t]`` and what derives from it.

    ``values`` are in the contract's category order (majority target value, share of that
    majority, missing last, value) -- the order of :mod:`gpuanon.table.encoding`. ``target_values``
    are sorted (target code = position). Every ``rho`` derives from this table without touching
    the data again.

    Examples
    --------
    >>> ft = frequency_table(["a", "a", "a", "b", "c"], [0, 0, 1, 0, 1])
    >>> ft.values, ft.counts.tolist()
    (['a', 'b', 'c'], [[2, 1], [1, 0], [0, 1]])
    >>> ft.tstar.tolist(), ft.share.round(3).tolist()
    ([0, 0, 1], [0.667, 1.0, 1.0])
    >>> ft.buckets(25).tolist()
    [2, 3, 3]
    """

    values: list
    target_values: list
    counts: np.ndarray  # (n_values, n_targets) int64
    name: str | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def totals(self) -> np.ndarray:
        """``sum_t F[v, t]`` per value."""
        return self.counts.sum(axis=1)

    @property
    def tstar(self) -> np.ndarray:
        """``t*(v)``: code of the most frequent target value (ties: the lowest code)."""
        return self.counts.argmax(axis=1).astype(np.int64)

    @property
    def majority(self) -> np.ndarray:
        """``F[v, t*(v)]``."""
        return self.counts[np.arange(self.counts.shape[0]), self.tstar]

    @property
    def share(self) -> np.ndarray:
        """``f(v) = F[v, t*] / sum_t F[v, t]`` in [0, 1] (float64, for display and ordering)."""
        return self.majority / np.maximum(self.totals, 1)

    def buckets(self, rho) -> np.ndarray:
        """``b(v) = min(floor(100 f(v) / rho), 100 / rho - 1)``, in exact integer arithmetic."""
        r = check_rho(rho)
        num = 100 * self.majority.astype(object if self.majority.size and
                                         int(self.majority.max()) > 2 ** 40 else np.int64)
        b = (num * r.denominator) // (np.maximum(self.totals, 1) * r.numerator)
        top = int(100 / r) - 1
        return np.minimum(b.astype(np.int64), top)

    def group_ids(self, rho) -> np.ndarray:
        """Group of every value: dense ids in order of ``(t*(v), b(v))`` (algorithm 2's order)."""
        key = self.tstar * int(100 / check_rho(rho)) + self.buckets(rho)
        return np.unique(key, return_inverse=True)[1].astype(np.int64).ravel()

    def groups(self, rho) -> list[list]:
        """The groups of ``H_rho`` as lists of values, in order of ``(t*, b)``.

        Examples
        --------
        >>> ft = frequency_table(["a", "a", "a", "b", "c"], [0, 0, 1, 0, 1])
        >>> ft.groups(10)
        [['a'], ['b'], ['c']]
        >>> ft.groups(50)
        [['a', 'b'], ['c']]
        """
        gid = self.group_ids(rho)
        out: list[list] = [[] for _ in range(int(gid.max()) + 1 if gid.size else 0)]
        for v, g in zip(self.values, gid):
            out[g].append(v)
        return out

    def hierarchy(self, rho, labels: str = "values") -> Hierarchy:
        """``H_rho``: leaves = values, level 1 = the ``(t*, b)`` groups, level 2 = ``*``.

        Parameters
        ----------
        rho : int or float
            Percentile range; ``100 / rho`` must be an integer.
        labels : {'values', 'target'}
            Group labels: the values joined by ``|`` (default), or ``"<t*> <lo>-<hi>%"``.
        """
        if labels not in ("values", "target"):
            raise ValueError(f"labels = {labels!r}: use 'values' or 'target'")
        key = (check_rho(rho), labels)
        if key in self._cache:
            return self._cache[key]
        gid = self.group_ids(rho)
        n_groups = int(gid.max()) + 1 if gid.size else 0
        if labels == "values":
            members: list[list] = [[] for _ in range(n_groups)]
            for v, g in zip(self.values, gid):
                members[g].append(None if is_na(v) else node_text(v))
            # a group of values is written as the set generalization writes that set (``\\N`` for a
            # missing value, ``|`` and ``\\`` escaped); a group of one value is that value's label
            names = [node_text(m[0]) if len(m) == 1 else set_text(m) for m in members]
        else:
            r = key[0]
            names = [""] * n_groups
            for g, bb, tt in zip(gid, self.buckets(rho), self.tstar):
                lo, hi = int(bb) * r, (int(bb) + 1) * r
                names[g] = f"{node_text(self.target_values[tt])} {_pct(lo)}-{_pct(hi)}%"
        names = _distinct(names)
        paths = [[names[g], ROOT] for g in gid]
        h = Hierarchy.from_labels(list(self.values), paths, name=self.name,
                                  rho=_rho_value(key[0]))
        self._cache[key] = h
        return h

    @classmethod
    def from_codes(cls, codes, categories: Sequence, coded_target: tuple, name: str | None = None,
                   xp=None) -> "FrequencyTable":
        """The table from a column already coded (e.g. a categorical QI of an encoded table).

        Parameters
        ----------
        codes : array of int
            Code of every row, ``0 .. len(categories) - 1`` (NumPy or CuPy; counted on its
            device with one ``bincount``).
        categories : sequence
            The value of every code. Categories that never occur are dropped.
        coded_target : (codes, values)
            Target code of every row and the target values (sorted: :func:`target_codes`).
        name : str, optional
            Column name.

        Examples
        --------
        >>> import numpy as np
        >>> ft = FrequencyTable.from_codes(np.array([0, 0, 1]), ["x", "y", "unused"],
        ...                                (np.array([1, 1, 0]), ["no", "yes"]))
        >>> ft.values, ft.counts.tolist()
        (['y', 'x'], [[1, 0], [0, 2]])
        """
        tcodes, tvals = coded_target
        if len(codes) != len(tcodes):
            raise InputError(f"column {name!r} has {len(codes)} rows but the target has "
                             f"{len(tcodes)}")
        return cls.from_counts(count_table(codes, tcodes, len(categories), len(tvals), xp=xp), categories, tvals,
                               name=name)

    @classmethod
    def from_counts(cls, f, categories: Sequence, target_values: Sequence,
                    name: str | None = None) -> "FrequencyTable":
        """The table from rows per (category, target code) ``f`` of shape ``(len(categories),
        len(target_values))`` (e.g. summed over the shards of a cluster run).

        >>> FrequencyTable.from_counts(np.array([[0, 2], [1, 0], [0, 0]]), ["x", "y", "unused"], ["no", "yes"]).values
        ['y', 'x']
        """
        tvals = list(target_values)
        uniq = list(categories)
        f = np.asarray(f, dtype=np.int64).reshape(len(uniq), len(tvals))
        used = f.sum(axis=1) > 0  # categories that never occur are no leaves
        if not used.all():
            f, uniq = f[used], [u for u, k in zip(uniq, used) if k]
        tstar = f.argmax(axis=1) if f.size else np.zeros(len(uniq), np.int64)
        share = (f[np.arange(len(uniq)), tstar] / np.maximum(f.sum(axis=1), 1) if f.size
                 else tstar * 0.0)
        order = _spec_order(uniq, tstar, share)
        return cls([uniq[i] for i in order], list(tvals),
                   np.ascontiguousarray(f[np.asarray(order, dtype=np.int64)]), name=name)

    def hierarchies(self, rhos: Iterable = RHO_CANDIDATES, labels: str = "values") -> dict:
        """``{rho: H_rho}`` for every candidate, all from this one table."""
        return {rho: self.hierarchy(rho, labels=labels) for rho in rhos}


def _distinct(names: list[str]) -> list[str]:
    """Make group labels distinct (values that contain the separator could collide)."""
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    if all(c == 1 for c in seen.values()):
        return names
    return [f"{n} (group {g + 1})" if seen[n] > 1 else n for g, n in enumerate(names)]


def _pct(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else str(float(x))


def _rho_value(r: Fraction):
    return int(r) if r.denominator == 1 else float(r)


def _spec_order(uniq: list, tstar: np.ndarray, share: np.ndarray) -> list[int]:
    """The contract's category order: (majority target, its share, missing last, value), as the
    encoder's (:func:`gpuanon.table.values.category_order`)."""
    return sorted(range(len(uniq)), key=lambda i: (int(tstar[i]), float(share[i]), value_key(uniq[i])))


def _value_codes(values) -> tuple[np.ndarray, list]:
    """Codes (0 .. m-1) and distinct values (missing is one value) of a column."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy().astype(np.int64)
        cats = list(s.cat.categories)
        if (codes < 0).any():
            codes = np.where(codes < 0, len(cats), codes)
            cats.append(np.nan)
        return codes, cats
    codes, uniq = pd.factorize(s, sort=False, use_na_sentinel=False)
    return codes, list(uniq)


def target_codes(target) -> tuple[np.ndarray, list]:
    """Target codes (positions in the sorted distinct target values, missing last) and values.

    The same coding as :mod:`gpuanon.table.encoding`; code it once and pass it to
    :func:`frequency_table` as ``coded_target`` for every column.

    Examples
    --------
    >>> codes, values = target_codes(["yes", "no", "yes"])
    >>> codes.tolist(), values
    ([1, 0, 1], ['no', 'yes'])
    """
    s = target if isinstance(target, pd.Series) else pd.Series(target)
    codes, tvals = codes_sorted(s)
    return codes, list(tvals)


def frequency_table(values, target=None, name: str | None = None,
                    coded_target: tuple | None = None) -> FrequencyTable:
    """Algorithm 1: the frequency table ``F[v, t]`` of a column against the target (one pass).

    Parameters
    ----------
    values : pandas.Series or array-like
        The categorical column (a ``category`` dtype is used without re-hashing the rows).
        A missing value is one value of its own.
    target : pandas.Series or array-like
        The target, same length. Target codes are its sorted distinct values.
    name : str, optional
        Column name.
    coded_target : (codes, values), optional
        The target already coded by :func:`target_codes` (then ``target`` is ignored).

    Returns
    -------
    FrequencyTable

    Examples
    --------
    >>> ft = frequency_table(["x", "y", "y", None], ["no", "yes", "yes", "no"], name="c")
    >>> ft.values, ft.target_values, ft.counts.tolist()
    (['x', nan, 'y'], ['no', 'yes'], [[1, 0], [1, 0], [0, 2]])
    """
    if name is None and isinstance(values, pd.Series):
        name = values.name
    codes, uniq = _value_codes(values)
    if coded_target is None and target is None:
        raise ValueError("give the target (or coded_target)")
    tcodes, tvals = target_codes(target) if coded_target is None else coded_target
    return FrequencyTable.from_codes(codes, uniq, (tcodes, tvals), name=name, xp=np)


def frequency_hierarchy(values, target, rho, name: str | None = None,
                        labels: str = "values") -> Hierarchy:
    """The thesis's automatic hierarchy ``H_rho`` (algorithms 1 and 2; the contract, section 5).

    ``t*(v)`` = most frequent target value of value ``v`` (ties: lowest target code; target codes
    are the sorted target values), ``f(v)`` = its share, bucket
    ``b(v) = min(floor(100 f(v) / rho), 100 / rho - 1)`` (exact integer arithmetic); values with
    equal ``(t*(v), b(v))`` form one group. Leaves are in the contract's category order.

    Parameters
    ----------
    values, target : pandas.Series or array-like
        The categorical column and the target (same length). Missing values are one leaf
        (``NaN``).
    rho : int or float
        Percentile range; ``100 / rho`` must be an integer (:data:`RHO_CANDIDATES`), else
        ``ValueError``.
    name : str, optional
        Column name (defaults to ``values.name``).
    labels : {'values', 'target'}
        Group labels: the group's values joined by ``|`` (default), or ``"<t*> <lo>-<hi>%"``.

    Examples
    --------
    >>> values, target = ["a", "a", "a", "b", "c"], ["no", "no", "yes", "no", "yes"]
    >>> frequency_hierarchy(values, target, rho=50).to_frame()
      level0 level1 level2
    0      a    a|b      *
    1      b    a|b      *
    2      c      c      *
    >>> frequency_hierarchy(values, target, rho=50, labels="target").to_frame()
      level0       level1 level2
    0      a   no 50-100%      *
    1      b   no 50-100%      *
    2      c  yes 50-100%      *
    """
    check_rho(rho)
    return frequency_table(values, target, name=name).hierarchy(rho, labels=labels)


def frequency_hierarchies(values, target, rhos: Iterable = RHO_CANDIDATES, name: str | None = None,
                          labels: str = "values") -> dict:
    """``{rho: H_rho}`` for every candidate ``rho``, from one count pass.

    Examples
    --------
    >>> hs = frequency_hierarchies(["a", "a", "b", "c"], [1, 0, 0, 1])
    >>> sorted(hs) == sorted(RHO_CANDIDATES), hs[100].height
    (True, 2)
    """
    rhos = list(rhos)
    for r in rhos:
        check_rho(r)
    return frequency_table(values, target, name=name).hierarchies(rhos, labels=labels)


def build_hierarchy_candidates(df: pd.DataFrame, columns: Sequence[str], target: str,
                               rhos: Iterable = RHO_CANDIDATES, labels: str = "values") -> dict:
    """``{column: {rho: H_rho}}``: one count pass per column, every ``rho`` derived from it.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"c": ["a", "b", "b"], "d": ["x", "x", "y"], "y": [0, 1, 1]})
    >>> hs = build_hierarchy_candidates(df, ["c", "d"], "y", rhos=(10, 50))
    >>> sorted(hs), sorted(hs["c"])
    (['c', 'd'], [10, 50])
    """
    rhos = list(rhos)
    for r in rhos:
        check_rho(r)
    missing = [c for c in list(columns) + [target] if c not in df.columns]
    if missing:
        raise InputError(f"no column {missing[0]!r} in the table; columns: {list(df.columns)}")
    tgt = target_codes(df[target])
    return {c: frequency_table(df[c], name=c, coded_target=tgt).hierarchies(rhos, labels=labels)
            for c in columns}


def build_hierarchies(df: pd.DataFrame, columns: Sequence[str], target: str, rho=10,
                      labels: str = "values") -> dict:
    """``{column: H_rho}`` for the given categorical columns (the target is coded once).

    Examples
    --------
    >>> from gpuanon.datasets import load_adult
    >>> hs = build_hierarchies(load_adult(), ["education", "race"], "income", rho=10)
    >>> hs["education"]
    Hierarchy(name='education', n_leaves=16, height=2, n_nodes=23, rho=10)
    """
    return {c: by_rho[rho] for c, by_rho in
            build_hierarchy_candidates(df, columns, target, (rho,), labels=labels).items()}
