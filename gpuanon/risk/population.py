"""Population uniqueness: the Zayatz, Pitman and SNB estimators and Dankar's decision rule.

A port of ARX 3.9.2 (``org.deidentifier.arx.risk``: ``ModelZayatz``, ``ModelPitman``, ``ModelSNB``,
``RiskModelPopulationUniqueness``, ``Gamma``; the 2-D Newton solver of ``de.linearbits.newtonraphson``
0.0.1 as ARX ships it, with ``ARXSolverConfiguration``'s defaults: absolute accuracy 1e-6, 1,000
steps per try, 10,000 in all, 16 prepared starts, and ARX's time limits of 100 ms a try and 1 s a run,
counted here as work (an evaluation's elements times their cost on a JVM) so that neither the machine
nor its load changes a result: on a large histogram where a step is slow the solver gives up as ARX's
does, a reported state).
Every model reads only the class-size histogram
(``sizes`` ascending, ``counts`` of classes of each size), so its sums are over distinct class sizes,
whole-array; the sums ARX adds one term at a time are added in ARX's order (``cumsum``'s last
element), so the solver takes ARX's path.

Where this port differs from ARX, on purpose:

* ARX casts the population size to a Java ``int`` for the hypergeometric pmf (clamped at
  2^31 - 1, marked as an error in its source); here the exact size is used.
* An estimate outside [0, N] is "not available" for every model (ARX checks the range for Pitman
  only).

ARX's ``Gamma.trigamma`` omits the asymptotic tail for arguments that it reduces to [8, 12); the
port keeps that, since ARX's Pitman solver steps with those derivatives (its results are unaffected
where the solver converges: the objective uses the digamma function, which is right).

Examples
--------
>>> import numpy as np
>>> r = population_uniqueness(np.array([1, 2, 3]), np.array([50, 20, 10]), population_size=10000)
>>> r.sampling_fraction, r.pitman.available, r.dankar.model, round(r.dankar.uniques, 1)
(0.012, False, 'zayatz', 1753.4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ACCURACY = 1e-6
ITERATIONS_PER_TRY = 1000
ITERATIONS_TOTAL = 10000
#: ARX's time limits (ARXSolverConfiguration: 100 ms a try, 1,000 ms a run) as work, in nanoseconds of
#: a JVM: an evaluation's elements times their cost there (about 10 ns an element of the iterative
#: Pitman sums, 100 ns a class size of the closed form's polygamma functions); machine-independent,
#: so a result never depends on how busy the machine is
WORK_PER_TRY = 1e8
WORK_TOTAL = 1e9


def _prepared_starts() -> list[tuple[float, float]]:
    """ARXSolverConfiguration.getDefaultStartValues: 0, 0.33, 0.66, 0.99 squared (16 starts), the
    values accumulated as ARX's loop accumulates them."""
    out = []
    d1 = 0.0
    while d1 < 1.0:
        d2 = 0.0
        while d2 < 1.0:
            out.append((d1, d2))
            d2 += 0.33
        d1 += 0.33
    return out


PREPARED_STARTS = _prepared_starts()


@dataclass
class ModelEstimate:
    """One model's estimate of the population uniques: ``uniques`` records (None: not available),
    ``fraction`` = uniques / N, ``converged`` (False: the solver found no root; None: closed form)."""

    uniques: float | None
    fraction: float | None
    available: bool
    converged: bool | None

    def to_dict(self) -> dict:
        return {"uniques": self.uniques, "fraction": self.fraction, "available": self.available,
                "converged": self.converged}


@dataclass
class PopulationRisk:
    """Population uniqueness for population size ``population_size`` (sampling fraction n / N)."""

    population_size: int
    sampling_fraction: float
    zayatz: ModelEstimate
    pitman: ModelEstimate
    snb: ModelEstimate
    dankar: "DankarEstimate"

    def to_dict(self) -> dict:
        return {"population_size": self.population_size, "sampling_fraction": self.sampling_fraction,
                "zayatz": self.zayatz.to_dict(), "pitman": self.pitman.to_dict(), "snb": self.snb.to_dict(),
                "dankar": self.dankar.to_dict()}


@dataclass
class DankarEstimate(ModelEstimate):
    """Dankar et al.'s rule: ``model`` it chose (``pitman``, ``zayatz``, ``snb``; ``none`` without
    sample uniques, where every estimate is 0)."""

    model: str = "none"

    def to_dict(self) -> dict:
        return dict(super().to_dict(), model=self.model)


# --- ARX's Gamma.digamma / trigamma (vectorized; Taylor near 0, recurrence, asymptotic series) -----

_DIGAMMA_1 = -0.57721566490153286060651209008240243104215933593992
_TRIGAMMA_1 = math.pi * math.pi / 6.0
_TETRAGAMMA_1 = -2.0 * 1.202056903159594285399738161511449990764986292
_S3, _S4, _S5, _S6, _S7 = 1 / 12, 1 / 120, 1 / 252, 1 / 240, 1 / 132
_B2, _B4, _B6, _B8, _B10 = 1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66


def _reflected(x):
    """``(x, x < 0)`` with a negative x replaced by 1 - x (ARX reflects negative arguments)."""
    x = np.array(x, dtype=np.float64, copy=True)
    neg = np.isfinite(x) & (x < 0)
    x0 = x.copy()
    x[neg] = 1.0 - x[neg]
    return x, x0, neg


def digamma(x):
    """ARX's Gamma.digamma: reflection for x < 0, Taylor series up to 1e-6, recurrence to 12, then
    de Moivre's expansion."""
    x, x0, neg = _reflected(x)
    out = np.zeros_like(x)
    bad = ~np.isfinite(x)
    zero = x == 0.0
    small = (x <= 1e-6) & ~zero & ~bad
    with np.errstate(all="ignore"):
        taylor = (_DIGAMMA_1 - 1.0 / x) + _TRIGAMMA_1 * x
        work = ~(bad | zero | small)
        while True:
            low = work & (x < 12.0)
            if not low.any():
                break
            out[low] -= 1.0 / x[low]
            x[low] += 1.0
        r = 1.0 / x
        asym = np.log(x) - 0.5 * r
        r = r * r
        asym = asym - r * (_S3 - (r * (_S4 - (r * (_S5 - (r * (_S6 - (r * _S7))))))))
        out = np.where(work, out + asym, out)
        out = np.where(small, taylor, out)
        out = np.where(neg, out + (math.pi / np.tan(-math.pi * x0)), out)
    out = np.where(zero, -np.inf, out)
    out = np.where(bad, np.nan, out)
    return out if out.ndim else float(out)


def trigamma(x):
    """ARX's Gamma.trigamma: reflection for x < 0, Taylor series up to 1e-4, recurrence to 8, and
    the asymptotic series only from 12 on (as ARX has it)."""
    x, x0, neg = _reflected(x)
    out = np.zeros_like(x)
    bad = ~np.isfinite(x)
    zero = x == 0.0
    small = (x <= 1e-4) & ~zero & ~bad
    with np.errstate(all="ignore"):
        taylor = 1.0 / (x * x) + _TRIGAMMA_1 + _TETRAGAMMA_1 * x
        work = ~(bad | zero | small)
        while True:
            low = work & (x < 8.0)
            if not low.any():
                break
            out[low] += 1.0 / (x[low] * x[low])
            x[low] += 1.0
        r = 1.0 / (x * x)
        asym = 0.5 * r + (1.0 + r * (_B2 + r * (_B4 + r * (_B6 + r * (_B8 + r * _B10))))) / x
        out = np.where(work & (x >= 12.0), out + asym, out)  # ARX: the tail only from 12 on
        out = np.where(small, taylor, out)
        rr = math.pi / np.sin(-math.pi * x0)
        out = np.where(neg, -out + rr * rr, out)
    out = np.where(zero, -np.inf, out)
    out = np.where(bad, np.nan, out)
    return out if out.ndim else float(out)


def _seqsum(a) -> float:
    """Sum added left to right, as a Java loop adds (the last element of ``cumsum``)."""
    a = np.asarray(a, dtype=np.float64)
    return float(np.cumsum(a)[-1]) if a.size else 0.0


def _log_gamma(x: float) -> float:
    """commons-math Gamma.logGamma: NaN for x <= 0."""
    from scipy import special  # noqa: PLC0415  (SciPy loads with a population model, not with the risk package)

    return float("nan") if not x > 0 else float(special.gammaln(x))


# --- the solver ------------------------------------------------------------------------------------

def newton_2d(evaluate, start, constraint=None, work: float = 100.0):
    """de.linearbits NewtonRaphson2D._solve with prepared starts: ``evaluate(x, y)`` gives
    ``(ox, oy, x1, x2, y1, y2)`` (objective, Jacobian); returns ``(x, y)`` or ``(nan, nan)``.
    ``work``: what one evaluation costs (see :data:`WORK_PER_TRY`), counted against ARX's time limits."""
    nan = (float("nan"), float("nan"))
    total, index = 0, 0
    spent = 0.0
    sx, sy = np.float64(start[0]), np.float64(start[1])
    first = True
    while total <= ITERATIONS_TOTAL:
        iterations = 0
        spent_try = 0.0
        if not first:
            sx, sy = (np.float64(v) for v in PREPARED_STARTS[index])
            index += 1
        first = False
        while True:
            total += 1
            ox, oy, x1, x2, y1, y2 = (np.float64(v) for v in evaluate(sx, sy))
            if abs(ox) <= ACCURACY and abs(oy) <= ACCURACY:
                return float(sx), float(sy)
            with np.errstate(all="ignore"):
                inv = np.float64(1.0) / (x1 * y2 - x2 * y1)
                i1, i2, i3, i4 = y2 * inv, -x2 * inv, -y1 * inv, x1 * inv
                sx, sy = sx - (i1 * ox + i2 * oy), sy - (i3 * ox + i4 * oy)
            spent += work
            spent_try += work
            if spent > WORK_TOTAL:
                return nan
            if index == len(PREPARED_STARTS):
                return nan
            if constraint is not None and not constraint(sx, sy):
                break
            if math.isnan(sx) or math.isnan(sy):
                break
            if iterations >= ITERATIONS_PER_TRY or spent_try > WORK_PER_TRY:
                break
            iterations += 1
    return nan


# --- the models -------------------------------------------------------------------------------------

def zayatz(sizes, counts, N: int, n: float, u: float) -> float:
    from scipy import stats  # noqa: PLC0415

    c1 = float(counts[0]) if sizes[0] == 1 else 0.0
    pmf = stats.hypergeom.pmf(1, N, sizes, int(n))
    temp = _seqsum(counts / u * pmf)
    uniqueness = ((c1 / u) * float(stats.hypergeom.pmf(1, N, 1, int(n)))) / temp
    return c1 * uniqueness / (n / N)


def _pitman_closed(sizes, counts, u, n):
    keep = sizes != 1
    ks, cs = sizes[keep].astype(np.float64), counts[keep].astype(np.float64)

    def evaluate(t, a):
        with np.errstate(all="ignore"):
            val0 = u - 1.0
            val1 = digamma(val0 + (t / a) + 1.0)
            val2 = trigamma((a + t + (a * val0)) / a)
            val3 = trigamma((t / a) + 1.0)
            val4 = digamma((t / a) + 1.0)
            val5 = a * a
            d1 = (val3 - val2) / val5
            d5 = (((a * val1) + (t * val2)) - (a * val4) - (t * val3)) / (val5 * a)
            d3 = (((((val5 * val0) - (t * t * val2)) + (t * t * val3)) - (2.0 * a * t * val1))
                  + (2.0 * a * t * val4)) / (val5 * val5)
            o1 = (val1 - val4) / a
            o3 = ((-t * val1) + (a * val0) + (t * val4)) / (a * a)
            o2 = digamma(n + t) - digamma(t + 1.0)
            d2 = trigamma(t + 1.0) - trigamma(n + t)
            val6, val7 = digamma(1.0 - a), trigamma(1.0 - a)
            d4 = _seqsum(cs * (val7 - trigamma(ks - a)))
            o4 = _seqsum(cs * (digamma(ks - a) - val6))
            return o1 - o2, o3 - o4, d2 - d1, 0.0 - d5, 0.0 - d5, 0.0 - d3 - d4
    return evaluate


def _pitman_iterative(sizes, counts, u, n):
    i_u = np.arange(1, math.ceil(u), dtype=np.float64)  # for (i = 1; i < u; i++)
    i_n = np.arange(1, math.ceil(n), dtype=np.float64)
    keep = sizes != 1
    ks, cs = sizes[keep].astype(np.int64), counts[keep].astype(np.float64)
    j = np.arange(1, int(ks.max()) if ks.size else 1, dtype=np.float64)
    big = i_u.size + i_n.size > 1 << 17

    def evaluate(t, a, derivatives=True):
        with np.errstate(all="ignore"):
            v3 = j - a
            inner1 = np.cumsum(1.0 / (v3 * v3))  # sum over j < key, one prefix per class size
            inner2 = np.cumsum(1.0 / v3)
            d4 = _seqsum(cs * inner1[ks - 2]) if ks.size else 0.0
            o4 = _seqsum(cs * inner2[ks - 2]) if ks.size else 0.0
            if big:  # millions of terms: dot products (ARX's order of addition matters no more)
                v1 = np.reciprocal(t + i_u * a)
                iv = i_u * v1
                w1 = np.reciprocal(t + i_n)
                o1, o3, o2 = float(v1.sum()), float(iv.sum()), float(w1.sum())
                if not derivatives:
                    return o1 - o2, o3 - o4
                d1, d5, d3, d2 = float(v1 @ v1), float(iv @ v1), float(iv @ iv), float(w1 @ w1)
                return o1 - o2, o3 - o4, d2 - d1, 0.0 - d5, 0.0 - d5, 0.0 - d3 - d4
            val0 = t + i_u * a
            v1 = 1.0 / val0
            o1, o3 = _seqsum(v1), _seqsum(i_u * v1)
            w = t + i_n
            o2 = _seqsum(1.0 / w)
            if not derivatives:
                return o1 - o2, o3 - o4
            q = 1.0 / (val0 * val0)
            d1, d5, d3 = _seqsum(q), _seqsum(i_u * q), _seqsum(i_u * i_u * q)
            d2 = _seqsum(1.0 / (w * w))
            return o1 - o2, o3 - o4, d2 - d1, 0.0 - d5, 0.0 - d5, 0.0 - d3 - d4
    return evaluate


def pitman(sizes, counts, N: int, n: float, u: float) -> tuple[float, bool]:
    """``(uniques, converged)``; uniques NaN when not available."""
    c1 = float(counts[0]) if sizes[0] == 1 else 0.0
    c2 = float(counts[np.searchsorted(sizes, 2)]) if (sizes == 2).any() else 0.0
    c2 = c2 if c2 != 0 else 1.0
    with np.errstate(all="ignore"):
        c1_, c2_, u_, n_ = (np.float64(v) for v in (c1, c2, u, n))
        c = (c1_ * (c1_ - 1)) / c2_
        t = ((n_ * u_ * c) - (c1_ * (n_ - 1) * ((2 * u_) + c))) / (((2 * c1_ * u_) + (c1_ * c)) - (n_ * c))
        a = ((t * (c1_ - n_)) + ((n_ - 1) * c1_)) / (n_ * u_)
    constraint = lambda x, y: x >= 0  # noqa: E731
    x, y = newton_2d(_pitman_closed(sizes, counts, u, n), (t, a), constraint, 100.0 * sizes.size + 1000)
    iterative_work = 10.0 * (u + n + float(sizes.max()))
    iterative = _pitman_iterative(sizes, counts, u, n)
    if math.isnan(x) or math.isnan(y):
        x, y = newton_2d(iterative, (t, a), constraint, iterative_work)
    else:
        tx, ty = iterative(np.float64(x), np.float64(y), derivatives=False)
        if math.isnan(tx) or math.isnan(ty) or abs(tx) > ACCURACY or abs(ty) > ACCURACY:
            x, y = newton_2d(iterative, (t, a), constraint, iterative_work)
    converged = not (math.isnan(x) or math.isnan(y))
    return _pitman_result(x, y, float(N)), converged


def _pitman_result(t: float, a: float, p: float) -> float:
    from scipy import special  # noqa: PLC0415

    if math.isnan(a) or math.isnan(t) or a == 0:
        return float("nan")
    with np.errstate(all="ignore"):
        pa = np.float64(p) ** np.float64(a)
        v1 = float(np.exp(np.float64(_log_gamma(t + 1.0) - _log_gamma(t + a))) * pa)
        v2 = float(np.float64(special.gamma(t + 1.0)) / np.float64(special.gamma(t + a)) * pa)
    v1 = v1 if 0.0 <= v1 <= p else float("nan")
    v2 = v2 if 0.0 <= v2 <= p else float("nan")
    if math.isnan(v1) and math.isnan(v2):
        return float("nan")
    if not math.isnan(v1) and not math.isnan(v2):
        return max(v1, v2)
    return v2 if math.isnan(v1) else v1


def _snb_classes(sizes, counts, u, c1, f) -> float:
    s, cnt = sizes.astype(np.float64), counts.astype(np.float64)
    var5 = f * f
    val2 = np.power(1 - f, s) * cnt
    var1 = _seqsum(s * var5 * np.power(1 - var5, s - 1) * cnt)
    var2 = _seqsum(val2 * np.power(1 + f, s) - 1)  # ARX subtracts 1 per class size
    var3 = _seqsum(val2)
    var4 = _seqsum(s * f * np.power(1 - f, s - 1) * cnt)
    return u + c1 * (var1 / var2) * (var3 / var4) * (var3 / var4)


def snb(sizes, counts, N: int, n: float, u: float) -> tuple[float, bool]:
    c1 = float(counts[0]) if sizes[0] == 1 else 0.0
    c2 = float(counts[np.searchsorted(sizes, 2)]) if (sizes == 2).any() else 0.0
    f = np.float64(n / N)
    with np.errstate(all="ignore"):
        k = np.float64(_snb_classes(sizes, counts, u, c1, f))
    pw = np.power

    def evaluate(a, b):
        a, b = np.float64(a), np.float64(b)
        with np.errstate(all="ignore"):
            dividend = (1 - f) * (1 - b)
            ox = k * f * pw(b / (1 - dividend), a) * (((a * dividend) / (1 - dividend)) + 1) - c1
            oy = k * a * pw(b, a) * (f * f) * (1 - b) / 2 * pw(1 - dividend, a + 2) * (2 - (1 - a) * dividend) - c2
            val0 = (b - 1.0) * (f - 1.0)
            val1 = val0 - 1.0
            val2 = 1.0 - val0
            val3 = a * val0 / val1 - 1.0
            val4 = pw(-b / val1, a)
            val6 = pw(f, 2.0)
            val7 = pw(b, a)
            val8 = val7 * val6 * k
            val9 = a * val8
            val10 = 2.0 * pw(val2, a + 2.0)
            val11 = pw(val1, 2.0)
            val13 = f * k
            val14 = f - 1.0
            val15 = a - 1.0
            val16 = b - 1.0
            val17 = val15 * val0
            val18 = val6 * k
            val19 = val17 + 2.0
            val20 = val18 * val19
            x1 = -val13 * np.log(-b / val1) * val3 * val4 - (val13 * val4 * val0) / val1
            x2 = (a * val13 * (1.0 / val1 - (b * val14) / val11) * val3 * pw(-b / val1, val15)
                  - val13 * val4 * ((a * val14) / val1 - (a * val16 * pw(val14, 2.0)) / val11))
            y1 = ((val9 * np.log(val2) * val19 * val16) / val10 - (val9 * pw(val16, 2.0) * val14) / val10
                  - (val7 * val20 * val16) / val10 - (a * val7 * val18 * np.log(b) * val19 * val16) / val10)
            y2 = (-(val9 * val19) / val10 - (pw(a, 2.0) * pw(b, val15) * val20 * val16) / val10
                  - (a * val7 * val18 * val17) / val10
                  - (a * val7 * val20 * (a + 2.0) * val0) / (2.0 * pw(val2, a + 3.0)))
        return ox, oy, x1, x2, y1, y2

    a, b = newton_2d(evaluate, (1.0, 1.0))
    with np.errstate(all="ignore"):
        uniques = float(k * pw(np.float64(b), np.float64(a)))
    return uniques, not (math.isnan(a) or math.isnan(b))


def _estimate(value: float, N: int, converged) -> ModelEstimate:
    ok = not math.isnan(value) and value != 0.0 and 0.0 <= value <= N
    return ModelEstimate(value if ok else None, value / N if ok else None, ok, converged)


def population_uniqueness(sizes, counts, *, population_size: int) -> PopulationRisk:
    """The three models and Dankar's rule on a class-size histogram (``sizes`` ascending, ``counts``)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    order = np.argsort(sizes, kind="stable")
    sizes, counts = sizes[order], counts[order]
    N = int(population_size)
    n = float(np.sum(sizes * counts))
    u = float(np.sum(counts))
    f = n / N
    c1 = int(counts[0]) if sizes.size and sizes[0] == 1 else 0
    if c1 == 0:
        zero = ModelEstimate(0.0, 0.0, True, None)
        return PopulationRisk(N, f, zero, zero, zero, DankarEstimate(0.0, 0.0, True, None, "none"))
    z = _estimate(zayatz(sizes, counts, N, n, u), N, None)
    pv, pc = pitman(sizes, counts, N, n, u)
    p = _estimate(pv, N, pc)
    sv, sc = snb(sizes, counts, N, n, u)
    s = _estimate(sv, N, sc)
    if f <= 0.1:
        chosen = ("pitman", p) if p.available else ("zayatz", z)
    elif s.available:
        chosen = ("zayatz", z) if z.available and z.uniques < s.uniques else ("snb", s)
    else:
        chosen = ("zayatz", z)
    name, est = chosen
    return PopulationRisk(N, f, z, p, s, DankarEstimate(est.uniques, est.fraction, est.available, est.converged, name))
