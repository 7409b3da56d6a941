"""Privacy criteria evaluated on many candidate partitions at once.

Each criterion sees per-partition statistics only: sizes ``(m,)`` and, for l-diversity and
t-closeness, sensitive-value histograms ``(m, n_sa)``. :meth:`Criteria.satisfied` returns one
bool per partition and is what the Mondrian kernel calls on every candidate child.

Examples
--------
>>> import numpy as np
>>> c = Criteria(k=2, l=2)
>>> c.satisfied(np.array([3, 3]), np.array([[2, 1], [3, 0]])).tolist()
[True, False]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..table.values import is_na
from ..errors import PrivacyError, SchemaError, shown

L_KINDS = ("distinct", "entropy", "recursive")
T_DISTANCES = ("equal", "ordered", "kl")
T_DISTANCE_CHOICES = ("auto",) + T_DISTANCES
TOL = 1e-9


def check_criteria_values(l, l_kind: str, c, t, t_distance: str) -> None:
    """The l / c / t parameters, as ``anonymize`` and ``check`` take them: SchemaError naming the
    parameter and the fix (``c`` other than 1 asks for recursive (c, l)-diversity, and only there has
    it an effect).

    >>> check_criteria_values(2, "distinct", 3.0, None, "auto")
    Traceback (most recent call last):
    ...
    gpuanon.errors.SchemaError: c = 3 applies to recursive (c, l)-diversity only; add --l-kind recursive (with --l 2 or more), or leave --c out
    """
    if isinstance(l, bool) or not isinstance(l or 0, (int, np.integer)) or (l or 0) < 0:
        raise SchemaError(f"l must be an integer >= 0, got {shown(l)}; use l >= 2 for l-diversity, or 0 to turn it off")
    if l == 1:
        raise SchemaError("l = 1 is always met; use l >= 2 for l-diversity, or 0 to turn it off")
    if l_kind not in L_KINDS:
        raise SchemaError(f"l_kind '{l_kind}' is not one of {', '.join(L_KINDS)}")
    if isinstance(c, bool) or not isinstance(c, (int, float, np.integer, np.floating)) or not (
            math.isfinite(c) and c > 0):
        raise SchemaError(f"c must be a finite number > 0, got {shown(c)}; recursive (c, l)-diversity asks the most "
                          f"frequent value to have fewer than c times the rows of the rarer ones, e.g. --c 3")
    if float(c) != 1.0 and (l_kind != "recursive" or not l):
        raise SchemaError(f"c = {float(c):g} applies to recursive (c, l)-diversity only; add --l-kind recursive "
                          f"(with --l 2 or more), or leave --c out")
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not (
                0 < float(t) <= 1 or t_distance == "kl" and math.isfinite(t) and t > 0):
            raise SchemaError(f"t must be a number in (0, 1], got {shown(t)}; e.g. --t 0.2 (only the KL distance "
                              f"takes t above 1)")
    if t_distance not in T_DISTANCE_CHOICES:
        raise SchemaError(f"t_distance '{t_distance}' is not one of {', '.join(T_DISTANCES)} or auto")


def sa_distance(hist, q, kind: str, xp=np):
    """Distance between each row's distribution (counts ``hist``, shape (m, n_sa)) and ``q``.

    ``equal``: EMD with equal ground distance, ``0.5 * sum |p - q|``; ``ordered``: EMD over the
    sorted values, ``sum_i |sum_{j<=i} (p_j - q_j)| / (n_sa - 1)``; ``kl``: ``sum p log(p / q)``.
    """
    hist = xp.asarray(hist, dtype=xp.float64)
    tot = hist.sum(axis=1, keepdims=True)
    p = hist / xp.where(tot > 0, tot, 1.0)
    q = xp.asarray(q, dtype=xp.float64)[None, :]
    if kind == "equal":
        return 0.5 * xp.abs(p - q).sum(axis=1)
    if kind == "ordered":
        m = p.shape[1]
        if m < 2:
            return xp.zeros(p.shape[0])
        return xp.abs(xp.cumsum(p - q, axis=1)).sum(axis=1) / (m - 1)
    if kind == "kl":
        safe_q = xp.where(q > 0, q, 1.0)
        ratio = xp.where(p > 0, p / safe_q, 1.0)
        return (p * xp.log(ratio)).sum(axis=1)
    raise ValueError(f"t_distance '{kind}' is not one of {', '.join(T_DISTANCES)}")


def resolve_t_distance(kind: str, ordered: bool) -> str:
    """The distance ``'auto'`` stands for (SPEC section 3): ordered EMD for a numeric or declared-ordinal
    sensitive attribute, EMD with equal ground distance otherwise; any other kind is itself.

    >>> resolve_t_distance("auto", True), resolve_t_distance("auto", False), resolve_t_distance("kl", True)
    ('ordered', 'equal', 'kl')
    """
    if kind == "auto":
        return "ordered" if ordered else "equal"
    return kind


def sa_entropy(hist, xp=np):
    """Natural-log entropy of each row's distribution."""
    hist = xp.asarray(hist, dtype=xp.float64)
    tot = hist.sum(axis=1, keepdims=True)
    p = hist / xp.where(tot > 0, tot, 1.0)
    return -(xp.where(p > 0, p * xp.log(xp.where(p > 0, p, 1.0)), 0.0)).sum(axis=1)


def missing_code(sa_values) -> int | None:
    """The code of a missing sensitive value: the last one when it is missing (the encoders put
    missing last), else None.

    >>> missing_code(["a", "b", float("nan")]), missing_code(["a", "b"]), missing_code([])
    (2, None, None)
    """
    return len(sa_values) - 1 if len(sa_values) and is_na(sa_values[-1]) else None


def without_missing(hist, miss: int | None, xp=np):
    """The histograms ``(m, n_sa)`` without the column of the missing value ``miss`` (l-diversity's view).

    >>> without_missing(np.array([[1, 2, 3]]), 2).tolist(), without_missing(np.array([[1, 2, 3]]), 0).tolist()
    ([[1, 2]], [[2, 3]])
    """
    if miss is None:
        return hist
    n_sa = hist.shape[1]
    if miss == n_sa - 1:
        return hist[:, :miss]
    return xp.concatenate([hist[:, :miss], hist[:, miss + 1:]], axis=1)


@dataclass(frozen=True)
class Criteria:
    """k-anonymity plus optional l-diversity and t-closeness.

    Parameters
    ----------
    k : int
        Minimum class size, ``k >= 2``.
    l : int
        l-diversity parameter; 0 disables it.
    l_kind : {'distinct', 'entropy', 'recursive'}
    c : float
        The ``c`` of recursive (c, l)-diversity.
    t : float or None
        t-closeness threshold; None disables it.
    t_distance : {'equal', 'ordered', 'kl'}
    q : array or None
        The whole table's sensitive-value distribution (needed with ``t``).
    sa_missing : int or None
        The histogram column of a missing sensitive value (None: no row has one). A missing value
        protects nobody: l-diversity of every kind ignores that column; t-closeness keeps it.
    """

    k: int
    l: int = 0
    l_kind: str = "distinct"
    c: float = 1.0
    t: float | None = None
    t_distance: str = "equal"
    q: np.ndarray | None = None
    sa_missing: int | None = None

    @property
    def needs_histogram(self) -> bool:
        return bool(self.l) or self.t is not None

    def with_q(self, q) -> "Criteria":
        """The same criteria against the distribution ``q`` (say, ``q`` moved to the device)."""
        return Criteria(self.k, self.l, self.l_kind, self.c, self.t, self.t_distance, q, self.sa_missing)

    def satisfied(self, sizes, hist=None, xp=np):
        """One bool per partition: do sizes (and histograms) meet every criterion?"""
        ok = sizes >= self.k
        if not self.needs_histogram:
            return ok
        if self.l:
            lh = without_missing(hist, self.sa_missing, xp)
            if self.l_kind == "distinct":
                ok &= (lh > 0).sum(axis=1) >= self.l
            elif self.l_kind == "entropy":
                ok &= sa_entropy(lh, xp) >= np.log(self.l) - TOL
            else:  # recursive (c, l): r1 < c * (r_l + ... + r_m)
                r = -xp.sort(-lh, axis=1)
                tail = r[:, self.l - 1:].sum(axis=1) if r.shape[1] >= self.l else xp.zeros(r.shape[0])
                ok &= r[:, 0] < self.c * tail
        if self.t is not None:
            ok &= sa_distance(hist, self.q, self.t_distance, xp) <= self.t + TOL
        return ok


# ---------------------------------------------------------------------------------------------
# the messages of a table that cannot be published as asked (one process or a cluster alike)
# ---------------------------------------------------------------------------------------------

def whole_table_error(l_kind: str, l: int, c: float, sensitive: str, whole_hist,
                      sa_missing: int | None = None) -> PrivacyError:
    """Why the whole table fails l-diversity, and the fix (``whole_hist``: host counts per SA value,
    ``sa_missing``: the column of a missing value, which counts toward no kind of l)."""
    whole = np.asarray(whole_hist).reshape(-1)
    n_miss = 0
    if sa_missing is not None:
        n_miss = int(whole[sa_missing])
        whole = np.delete(whole, sa_missing)
    n_dist = int((whole > 0).sum())
    miss_txt = (f" besides {n_miss} row(s) with a missing value, which count toward no l" if n_miss else "")
    if l_kind == "recursive" and n_dist >= int(l):
        r = np.sort(whole)[::-1]
        rest = float(r[int(l) - 1:].sum())
        need = float(r[0]) / rest
        return PrivacyError(
            f"the whole table fails recursive ({c:g}, {l})-diversity: in '{sensitive}' the most frequent value has "
            f"{int(r[0])} rows, which is not below c = {c:g} times the {int(rest)} rows of the values from rank {l} "
            f"on{miss_txt}; raise c above {need:.4g} (e.g. --c {math.floor(need) + 1}) or lower l")
    if l_kind == "entropy" and n_dist >= int(l):  # enough values, too unevenly spread
        p = whole[whole > 0] / whole.sum()
        h = float(-(p * np.log(p)).sum())
        best = math.floor(math.exp(h) * (1 + 1e-9))
        return PrivacyError(
            f"the whole table fails entropy l-diversity: the entropy of '{sensitive}' is {h:.4f} nats{miss_txt}, "
            f"below log({l}) = {math.log(l):.4f} (its {n_dist} values are as diverse as {math.exp(h):.2f} equally "
            f"frequent ones); " + (f"lower l to at most {best} (--l {best}), or pick another sensitive attribute"
                                   if best >= 2 else "no l above 1 can be met: pick another sensitive attribute"))
    return PrivacyError(
        f"the whole table fails l-diversity: sensitive attribute '{sensitive}' has {n_dist} distinct value(s)"
        f"{miss_txt} (l = {l}, {l_kind}); lower l or pick another sensitive attribute")


def blocks_reason(suppressed: int, crit: "Criteria") -> str:
    """The report's reason for rows suppressed because their missing-value pattern fails alone."""
    txt = f"k = {crit.k}" + (f", l = {crit.l}" if crit.l else "") + (f", t = {crit.t}" if crit.t is not None else "")
    return (f"{suppressed} row(s) whose pattern of missing numeric QIs forms groups that fail the criteria "
            f"({txt}) on their own")


def check_suppression(suppressed: int, n_rows: int, max_suppression: float, reason: str) -> None:
    """PrivacyError when the suppressed rows exceed ``max_suppression`` or are the whole table."""
    budget = math.floor(float(max_suppression) * n_rows)
    if suppressed > budget:
        raise PrivacyError(
            f"{suppressed} row(s) ({100.0 * suppressed / n_rows:.2f}%) would be suppressed, over the budget "
            f"max_suppression = {max_suppression} ({budget} rows): {reason}; raise --max-suppression or fill the "
            f"missing values")
    if suppressed >= n_rows:
        raise PrivacyError(f"every row would be suppressed: {reason}")
