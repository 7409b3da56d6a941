"""How a table was drawn from its population: the size N, given, or from the sampling fraction f = n / N.

One value, :class:`Population`, made (and checked) once from the options, asked for N once the rows
counted are known, and handed on as that N wherever a second table is measured against the same
population (the output beside its input, a release beside its original): before and after always
share one N.

>>> p = Population.of(sampling_fraction=0.01)
>>> p.size_for(32561), p.same_for(32561)
(3256100, Population(size=3256100, fraction=None))
>>> Population.of(population=5).size_for(6)
Traceback (most recent call last):
...
gpuanon.errors.InputError: population size 5 is below the 6 rows counted; give the size of the population the table was drawn from (>= 6)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError

__all__ = ["MAX_POPULATION", "Population", "check_threshold"]

#: the largest population size the models take: more than the world's people, and Zayatz's hypergeometric
#: probabilities (scipy) take time linear in N (about 4 s at this size, hours at 1e14)
MAX_POPULATION = 10 ** 10


def check_threshold(threshold) -> float:
    """The records-at-risk threshold tau in [0, 1], or a one-line error."""
    if not 0 <= float(threshold) <= 1:
        raise InputError(f"threshold {threshold} is outside [0, 1]; give e.g. --risk-threshold 0.2")
    return float(threshold)


@dataclass(frozen=True)
class Population:
    """The population option as given: its ``size`` N or the ``fraction`` f (exactly one), checked
    when made (:meth:`of`)."""

    size: int | None = None
    fraction: float | None = None

    @classmethod
    def of(cls, population=None, sampling_fraction=None) -> Population | None:
        """The options as a value (``None`` when neither is given; a :class:`Population` passes
        through), or a one-line error: both given, a fraction outside (0, 1], a size that is not a
        whole number >= 1 or above :data:`MAX_POPULATION`."""
        if isinstance(population, Population) and sampling_fraction is None:
            return population
        if population is not None and sampling_fraction is not None:
            raise InputError("give a population size or a sampling fraction, not both")
        if sampling_fraction is not None:
            f = float(sampling_fraction)
            if not (0 < f <= 1) or math.isnan(f):
                raise InputError(f"sampling fraction {sampling_fraction} is outside (0, 1]; give e.g. "
                                 f"--sampling-fraction 0.01")
            return cls(fraction=f)
        if population is None:
            return None
        try:
            n = int(population)
            whole = n == float(population)
        except (OverflowError, ValueError, TypeError):  # inf, nan, not a number
            n, whole = 0, False
        if not whole or n < 1:
            raise InputError(f"population size {population} is not a whole number >= 1; give the size of the "
                             f"population the table was drawn from, e.g. --population 1000000")
        if n > MAX_POPULATION:
            raise InputError(f"population size {population} is above the {MAX_POPULATION:,} the population models "
                             f"take; give the size of the population the table was drawn from")
        return cls(size=n)

    def size_for(self, n: int, what: str = "the {n} rows counted") -> int:
        """N for a table of ``n`` rows (``what`` names them in an error): the size as given (at least
        ``n``), or n / f rounded as ARX's ``ARXPopulationModel`` does (at most :data:`MAX_POPULATION`)."""
        if self.fraction is not None:
            f = self.fraction
            if n / f > MAX_POPULATION:
                raise InputError(f"sampling fraction {f:g} makes a population of {n / f:.3g} (n / f for {n:,} "
                                 f"rows), above the {MAX_POPULATION:,} the population models take; give the "
                                 f"fraction the table was sampled with, e.g. --sampling-fraction 0.01")
            return int(round(n / f))
        if self.size < n:
            raise InputError(f"population size {self.size} is below {what.format(n=f'{n:,}')}; give the size of the "
                             f"population the table was drawn from (>= {n:,})")
        return self.size

    def same_for(self, n: int) -> Population:
        """This population as a size, fixed by a table of ``n`` rows: what a second table (the output,
        a release) is measured against, so both sides share one N."""
        return Population(size=self.size_for(n))
