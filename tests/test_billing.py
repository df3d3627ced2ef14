"""The billing rule and exact money: what a user would read on their cloud bill."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.core.billing import (
    US_PER_S,
    BillingRule,
    cost_micro,
    rounded_cost_micro,
)
from jupyter_gpucost.core.money import round_micro, to_units


@pytest.mark.parametrize(
    ("rule", "elapsed_s", "billed_s"),
    [
        (BillingRule(1, 60), 0.5, 60),  # AWS/GCP: a minute at least
        (BillingRule(1, 60), 59.999, 60),
        (BillingRule(1, 60), 61.2, 62),  # then per second, rounded up
        (BillingRule(1, 0), 10.0, 10),
        (BillingRule(1, 0), 10.000001, 11),
        (BillingRule(3600, 0), 1, 3600),  # hourly billing
        (BillingRule(3600, 0), 3601, 7200),
        (BillingRule(1, 300), 299, 300),  # a 5-minute minimum
    ],
)
def test_billed_time(rule: BillingRule, elapsed_s: float, billed_s: int) -> None:
    assert rule.billed_us(round(elapsed_s * US_PER_S)) == billed_s * US_PER_S


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="granularity"):
        BillingRule(0, 60)
    with pytest.raises(ValueError, match="minimum"):
        BillingRule(1, -1)
    with pytest.raises(ValueError, match="negative"):
        BillingRule(1, 0).billed_us(-1)


def test_an_hour_costs_the_hourly_price_exactly() -> None:
    assert round_micro(cost_micro(Decimal("6.88"), 3600 * US_PER_S)) == 6_880_000
    assert to_units(6_880_000) == Decimal("6.880000")


def test_a_second_of_an_h100_is_exact_until_rounded() -> None:
    # 6.88 $/h for one second is 1911.111... micro-dollars: exact, then rounded once
    exact = cost_micro(Decimal("6.88"), US_PER_S)
    assert exact == Fraction(17200, 9)
    assert round_micro(exact) == 1911
    # a thousand one-second intervals add up exactly, with no float drift
    assert round_micro(sum([exact] * 1000, Fraction(0))) == 1_911_111


def test_rounding_is_half_up() -> None:
    assert round_micro(Fraction(5, 2)) == 3
    assert round_micro(Fraction(7, 3)) == 2
    assert round_micro(Fraction(0)) == 0


# prices as the catalog and admins write them (up to six decimals, and finer), from
# nothing to far past any GPU's; durations from nothing to a century of microseconds
prices = st.decimals(min_value=0, max_value=10**7, places=9, allow_nan=False)
durations = st.integers(min_value=0, max_value=100 * 366 * 86_400 * US_PER_S)


@given(prices, durations)
def test_the_whole_number_cost_is_the_exact_cost_rounded_half_up(
    price: Decimal, duration_us: int
) -> None:
    # what the hub bills each poll and report: the same micro-dollar as the exact path
    assert rounded_cost_micro(price, duration_us) == round_micro(cost_micro(price, duration_us))


def test_the_whole_number_cost_rounds_a_half_up_as_the_exact_path_does() -> None:
    # 0.0018 $/h for one second is exactly half a micro-dollar: rounded up, as round_micro
    assert cost_micro(Decimal("0.0018"), US_PER_S) == Fraction(1, 2)
    assert rounded_cost_micro(Decimal("0.0018"), US_PER_S) == 1
    # the same price written two ways is the same price
    assert rounded_cost_micro(Decimal("6.88"), US_PER_S) == 1911
    assert rounded_cost_micro(Decimal("6.880000"), US_PER_S) == 1911
