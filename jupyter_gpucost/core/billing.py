"""Exact money arithmetic and the provider's billing rule.

Time is counted in integer microseconds and prices are Decimals with at most six
decimals, so a cost is an exact rational number of micro-units of the session's currency;
it is rounded (half up, in :mod:`jupyter_gpucost.core.money`) only when it is kept or
shown. Nothing here uses floating point.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from .money import round_ratio_micro

US_PER_S = 1_000_000
US_PER_HOUR = 3_600 * US_PER_S

#: the billing rule's settings an admin may give (the server's ``c.GpuCost`` and the hub's
#: ``c.GpuCostHub`` alike): (lowest, highest) whole seconds
GRANULARITY_S_BOUNDS = (1, 86_400)
MINIMUM_CHARGE_S_BOUNDS = (0, 86_400)


def cost_micro(per_hour: Decimal, duration_us: int) -> Fraction:
    """The exact cost, in micro-units of the price's currency, of ``duration_us`` at
    ``per_hour``."""
    return Fraction(per_hour) * 1_000_000 * duration_us / US_PER_HOUR


def rounded_cost_micro(per_hour: Decimal, duration_us: int) -> int:
    """``round_micro(cost_micro(per_hour, duration_us))`` in whole numbers: the
    same micro-units, at a fraction of the cost (the hub computes it for every running
    server each poll and with each report)."""
    numerator, denominator = _micro_per_us(per_hour)
    return round_ratio_micro(numerator * duration_us, denominator)


@lru_cache(maxsize=1024)
def _micro_per_us(per_hour: Decimal) -> tuple[int, int]:
    """``per_hour`` as micro-units per microsecond: an exact (numerator,
    denominator) of whole numbers, the denominator above 0."""
    numerator, denominator = per_hour.as_integer_ratio()
    return numerator * 1_000_000, denominator * US_PER_HOUR


@dataclass(frozen=True)
class BillingRule:
    """How a provider turns elapsed time into billed time.

    AWS EC2 and GCP bill per second with a 60 s minimum per start; that is the default.
    """

    granularity_s: int = 1
    minimum_charge_s: int = 0

    def __post_init__(self) -> None:
        if self.granularity_s < 1:
            raise ValueError("billing granularity must be at least 1 second")
        if self.minimum_charge_s < 0:
            raise ValueError("minimum charge must be 0 seconds or more")

    def billed_us(self, elapsed_us: int) -> int:
        """Billed time for a rental that has lasted ``elapsed_us`` so far.

        Elapsed time is rounded up to the granularity, and never less than the minimum
        charge (which applies as soon as the rental has started).
        """
        if elapsed_us < 0:
            raise ValueError("elapsed time cannot be negative")
        step = self.granularity_s * US_PER_S
        rounded = -(-elapsed_us // step) * step
        return max(rounded, self.minimum_charge_s * US_PER_S)
