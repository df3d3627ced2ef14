"""The hub's budgets are caps: its stop lands at the budget, not a grace period after it.

The service weighs every running server's budgets once a poll (``tick``) at the rate each
is spent; the enforcer starts a server's countdown when the money left lasts the grace
period at that rate and stops it when the money runs out. Whatever the rate, the spend, the
budget and the grace, a user's bill at the stop is the budget plus at most one poll's cost
(the poll that finds the money gone), and the stop never comes before the money runs out
less the grace period.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.hub_protocol import HubBudget
from jupyter_gpucost.hub.enforcer import HubEnforcer, Weighed

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
KEY = ("alice", "", NOW)
#: a simulation never runs longer than this many polls (the strategies keep it shorter)
MAX_TICKS = 20_000


def run_to_the_stop(
    budget: int,
    spent: int,
    rates: list[int],
    grace_s: float,
    tick_s: float,
    granularity_s: float = 0.0,
) -> tuple[float, Fraction, float]:
    """Poll an enforcer as the service does, each poll's rate (micro-dollars a second)
    holding until the next (the last one from there on). Returns when the hub stopped the
    server (seconds), what was spent then, and when the money ran out (seconds; for money
    left at the stop, when it would run out at the rate the hub saw then)."""
    enforcer = HubEnforcer(grace_s, tick_s=tick_s, granularity_s=granularity_s)
    spent_now = Fraction(spent)
    ran_out: float | None = 0.0 if spent >= budget else None
    for k in range(MAX_TICKS):
        t = k * tick_s
        per_s = rates[min(k, len(rates) - 1)]
        per_hour = Decimal(per_s * 3600) / 10**6
        # the ledger bills whole micro-dollars (rounded down until the next flush)
        standing = HubBudget("session", budget, int(spent_now), "user")
        now = NOW + timedelta(seconds=t)
        enforcer.update(KEY, [Weighed(standing, per_hour)], now)
        if enforcer.due(now):
            if ran_out is None:  # when it would run out at the rate the hub sees now
                ran_out = t + float((budget - spent_now) / per_s)
            return t, spent_now, ran_out
        after = spent_now + Fraction(per_s) * Fraction(tick_s)
        if ran_out is None and after >= budget:
            ran_out = t + float((budget - spent_now) / per_s)
        spent_now = after
    raise AssertionError("the hub never stopped the server")


@settings(max_examples=300, deadline=None)
@given(
    budget=st.integers(0, 50_000_000),
    # how far from the budget the first poll finds it: spent already, or up to 40 polls
    # past the grace period away at the lowest rate
    ahead=st.floats(-2.0, 1.0),
    base=st.integers(1, 30_000),  # micro-dollars a second: up to $108 an hour
    jumps=st.lists(st.integers(1, 4), min_size=1, max_size=60),
    grace_s=st.sampled_from([0.0, 2.0, 30.0, 120.0, 300.0]),
    tick_s=st.sampled_from([0.5, 1.0, 5.0, 10.0]),
    granularity_s=st.sampled_from([0.0, 1.0]),
)
def test_the_hubs_stop_lands_at_the_budget(
    budget: int,
    ahead: float,
    base: int,
    jumps: list[int],
    grace_s: float,
    tick_s: float,
    granularity_s: float,
) -> None:
    rates = [base * j for j in jumps]
    slowest = min(rates)
    spent = max(0, budget - round(ahead * slowest * (grace_s + 40 * tick_s)))
    stopped, spent_at_stop, ran_out = run_to_the_stop(
        budget, spent, rates, grace_s, tick_s, granularity_s
    )
    one_poll = max(rates) * Fraction(tick_s)
    # a stop time is not brought forward for less than the billing rule's granularity
    rounding = max(rates) * Fraction(granularity_s)
    # never past the budget by more than one poll's cost (the poll that finds it gone) and
    # the bill's rounding, or than what was spent already when the hub first looked
    assert spent_at_stop <= max(budget, spent) + one_poll + rounding + 1
    # never earlier than the money runs out less the grace period (at the rate the hub
    # sees: a rate that falls during the countdown keeps its stop time)
    assert stopped >= ran_out - grace_s - 1e-6


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(1_000, 50_000_000),
    per_s=st.integers(1, 30_000),
    grace_s=st.sampled_from([2.0, 30.0, 120.0]),
    tick_s=st.sampled_from([0.5, 1.0, 5.0]),
)
def test_at_a_steady_rate_the_stop_is_the_poll_that_finds_the_money_gone(
    budget: int, per_s: int, grace_s: float, tick_s: float
) -> None:
    # the first poll finds the budget far off: the full grace counts down, and ends when
    # the money does
    spent = max(0, budget - per_s * round(grace_s + 10 * tick_s))
    stopped, spent_at_stop, ran_out = run_to_the_stop(budget, spent, [per_s], grace_s, tick_s)
    assert ran_out <= stopped < ran_out + tick_s + 1e-6
    assert budget - 1 <= spent_at_stop <= budget + per_s * Fraction(tick_s) + 1


def test_a_budget_of_the_grace_periods_cost_stops_at_the_budget_not_after() -> None:
    # the case on the hub: $0.30 with a 30 s grace at $6.86 an hour (1,906 µ$/s)
    per_s = 1906
    stopped, spent_at_stop, ran_out = run_to_the_stop(300_000, 0, [per_s], 30.0, 1.0)
    assert abs(ran_out - 300_000 / per_s) < 1e-6
    assert ran_out <= stopped < ran_out + 1.0
    assert spent_at_stop <= 300_000 + per_s  # $0.3019 at most, never $0.358
