"""A budget is a cap: the countdown is timed from the current rate so that the action lands
at the budget, not a grace period after it (the policy alone, driven check by check as the
controller drives it: every second, and at the countdown's end)."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.budget_timing import countdown, due, seconds_left
from jupyter_gpucost.server.budget import messages
from jupyter_gpucost.server.budget.policy import (
    Budget,
    BudgetPolicy,
    Enforce,
    GraceCleared,
    GraceStarted,
    Standing,
)

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
USD = 1_000_000
TICK_S = 1.0
#: 2 simulated A100-80GB at $3.431 per GPU-hour
A100_2 = Decimal("6.862")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@dataclass
class Landing:
    """Where a simulated session's budget acted."""

    at_s: float
    spent_micro: float
    #: what was spent at the check before the one that acted
    spent_before_micro: float
    started_s: float | None
    countdown_s: float | None
    events: list[object]


def run(
    policy: BudgetPolicy,
    rate_at: list[tuple[float, Decimal]],
    *,
    start_spent_micro: float = 0.0,
    horizon_s: float = 4 * 3600,
) -> Landing | None:
    """Drive ``policy`` as the controller does: a check every second, and one at the
    countdown's end. ``rate_at``: (from second, USD/h) steps of the machine's rate."""

    def rate(t: float) -> Decimal:
        current = Decimal(0)
        for since, r in rate_at:
            if since <= t:
                current = r
        return current

    t, spent, before = 0.0, start_spent_micro, start_spent_micro
    started: float | None = None
    countdown_s: float | None = None
    seen: list[object] = []
    while t <= horizon_s:
        budget_standings = [Standing(b, int(spent), "s1") for b in policy.budgets()]
        events = policy.evaluate(at(t), budget_standings, rate_per_hour=rate(t))
        seen += events
        for e in events:
            if isinstance(e, GraceStarted):
                started = t
                countdown_s = (e.ends - at(t)).total_seconds()
            if isinstance(e, Enforce):
                return Landing(t, spent, before, started, countdown_s, seen)
        step = TICK_S
        if policy.state == "grace" and policy.grace_ends is not None:
            step = min(step, max(0.01, (policy.grace_ends - at(t)).total_seconds()))
        # the spend over the step, at the rate of each part of it
        edges = sorted({t, t + step, *(s for s, _ in rate_at if t < s < t + step)})
        before = spent
        for a, b in itertools.pairwise(edges):
            spent += float(rate(a)) * (b - a) / 3600 * USD
        t += step
    return None


def test_the_30_cent_budget_on_two_a100s_stops_at_the_budget_not_a_grace_later() -> None:
    # the walk-through's case: $0.30 hard budget, 30 s grace, $6.862/h
    policy = BudgetPolicy(hard=Budget("hard", 300_000), grace_s=30)
    landing = run(policy, [(0, A100_2)])
    assert landing is not None
    # the countdown ran the whole grace and ended when the money did
    assert landing.started_s is not None
    assert landing.countdown_s is not None
    assert 29 <= landing.countdown_s <= 30
    assert policy.grace_shortened is None
    assert 300_000 - 2 <= landing.spent_micro <= 300_000 + 2
    # was: the countdown started at $0.30 and acted at $0.357 (119 %)


def test_a_budget_already_spent_at_the_first_check_acts_at_once() -> None:
    hard = Budget("hard", 300_000)
    policy = BudgetPolicy(hard=hard, grace_s=120)
    events = policy.evaluate(at(0), [Standing(hard, 310_000, "s1")], rate_per_hour=A100_2)
    (grace,) = [e for e in events if isinstance(e, GraceStarted)]
    assert grace.ends == at(0)
    assert any(isinstance(e, Enforce) for e in events)  # in the same check, no grace
    assert policy.grace_shortened == "spent"


def test_a_budget_nearly_spent_at_the_first_check_shortens_the_grace_and_says_why() -> None:
    policy = BudgetPolicy(hard=Budget("hard", 300_000), grace_s=120)
    # $0.01 left at $6.862/h lasts 5.2 s: the countdown is that, not 120 s
    landing = run(policy, [(0, A100_2)], start_spent_micro=290_000)
    assert landing is not None
    assert landing.countdown_s is not None
    assert 5 <= landing.countdown_s <= 5.3
    assert policy.grace_shortened == "overrun"
    assert landing.spent_micro <= 300_000 + 2
    note = messages.shortened("overrun", 120, 5.2, A100_2, "$")
    assert note == (
        "The 120 s grace is shortened to 5 s: at $6.86/h the full grace would go past the budget."
    )


def test_a_rate_that_jumps_during_the_countdown_shortens_it() -> None:
    policy = BudgetPolicy(hard=Budget("hard", 5 * USD), grace_s=120)
    # 1 × A100 ($3.431/h), then 8 × H100 at $98/h from 4,000 s on
    landing = run(policy, [(0, Decimal("3.431")), (5_000, Decimal("98"))])
    assert landing is not None
    # without the jump the countdown would have run 120 s from ~5,126 s
    assert landing.at_s < 5_126
    assert landing.spent_micro <= 5 * USD + 98 / 3600 * USD  # at most one second at $98/h


def test_a_rate_that_falls_during_the_countdown_keeps_it_and_stops_before_the_budget() -> None:
    """The choice: keep the countdown (never later than planned), so a rate that falls
    never spends past the budget; the stop lands below it."""
    policy = BudgetPolicy(hard=Budget("hard", 300_000), grace_s=30)
    # the countdown starts at ~127 s; the rate halves at 135 s
    landing = run(policy, [(0, A100_2), (135, A100_2 / 2)])
    assert landing is not None
    assert landing.started_s is not None
    assert landing.at_s <= landing.started_s + 30
    assert landing.spent_micro < 300_000
    assert not any(isinstance(e, GraceCleared) for e in landing.events)


def test_a_soft_budget_set_below_the_spend_keeps_the_full_grace_to_be_raised() -> None:
    soft = Budget("soft", 2_000)
    policy = BudgetPolicy(grace_s=60)
    policy.set_soft(soft, spent_micro=5_000, period="s1")
    events = policy.evaluate(at(0), [Standing(soft, 5_000, "s1")], rate_per_hour=A100_2)
    (grace,) = [e for e in events if isinstance(e, GraceStarted)]
    assert grace.ends == at(60)
    assert policy.grace_shortened is None


def test_a_soft_budget_set_nearly_spent_keeps_the_full_grace_to_be_raised() -> None:
    soft = Budget("soft", 2_000)
    policy = BudgetPolicy(grace_s=60)
    # $0.0001 left: 0.05 s at $6.862/h
    policy.set_soft(soft, spent_micro=1_900, period="s1", rate_per_hour=A100_2)
    events = policy.evaluate(at(0), [Standing(soft, 1_900, "s1")], rate_per_hour=A100_2)
    (grace,) = [e for e in events if isinstance(e, GraceStarted)]
    assert grace.ends == at(60)
    # spent during the countdown: it goes on, for the user to raise the budget
    events = policy.evaluate(at(30), [Standing(soft, 60_000, "s1")], rate_per_hour=A100_2)
    assert not any(isinstance(e, Enforce) for e in events)
    assert policy.grace_ends == at(60)


def test_no_rate_never_starts_a_countdown_before_the_budget_is_spent() -> None:
    hard = Budget("hard", 300_000)
    policy = BudgetPolicy(hard=hard, grace_s=30)
    events = policy.evaluate(at(0), [Standing(hard, 299_999, "s1")])
    assert not any(isinstance(e, GraceStarted) for e in events)
    assert policy.state == "warning"


def test_timing_arithmetic() -> None:
    assert seconds_left(0, A100_2) == 0
    assert seconds_left(100, Decimal(0)) is None
    assert seconds_left(6_862, A100_2) == 3.6
    assert due(57_183, A100_2, 30)  # 29.999 s left
    assert not due(57_200, A100_2, 30)
    assert countdown(57_183, A100_2, 30, tick_s=1).shortened is None
    assert 29.99 < countdown(57_183, A100_2, 30, tick_s=1).seconds < 30
    assert countdown(-1, A100_2, 30, tick_s=1).seconds == 0
    assert countdown(-1, A100_2, 30, tick_s=1).shortened == "spent"


rates = st.decimals(min_value=0, max_value=200, places=3, allow_nan=False, allow_infinity=False)
rate_paths = st.lists(
    st.tuples(st.floats(min_value=0, max_value=3_600, allow_nan=False), rates),
    min_size=1,
    max_size=8,
)


@settings(max_examples=120, deadline=None)
@given(
    amount=st.integers(min_value=1, max_value=20 * USD),
    grace_s=st.floats(min_value=0, max_value=600, allow_nan=False),
    path=rate_paths,
    start=st.integers(min_value=0, max_value=25 * USD),
    locked=st.booleans(),
)
def test_the_action_never_lands_more_than_one_check_past_the_budget(
    amount: int,
    grace_s: float,
    path: list[tuple[float, Decimal]],
    start: int,
    locked: bool,
) -> None:
    budget = Budget("hard" if locked else "soft", amount)
    policy = (
        BudgetPolicy(hard=budget, grace_s=grace_s)
        if locked
        else BudgetPolicy(soft=budget, grace_s=grace_s)
    )
    path = sorted(path, key=lambda p: p[0])
    landing = run(policy, [(0, Decimal(0)), *path], start_spent_micro=start, horizon_s=1_800)
    if landing is None:
        return  # never spent within the horizon at these rates
    # the check before the action had not yet spent the budget...
    assert landing.spent_before_micro <= amount + 2 or landing.spent_before_micro == start
    # ...so the action lands within what one check's interval costs past the budget
    last_interval = landing.spent_micro - landing.spent_before_micro
    assert landing.spent_micro <= max(amount, start) + last_interval + 2
    # and no later than the grace period after the countdown started
    assert landing.started_s is not None
    assert landing.at_s <= landing.started_s + grace_s + 1e-6


@settings(max_examples=80, deadline=None)
@given(
    amount=st.integers(min_value=1_000, max_value=5 * USD),
    grace_s=st.floats(min_value=1, max_value=600, allow_nan=False),
    rate=st.decimals(min_value=10, max_value=200, places=3),
)
def test_at_a_steady_rate_the_action_lands_at_the_budget(
    amount: int, grace_s: float, rate: Decimal
) -> None:
    policy = BudgetPolicy(hard=Budget("hard", amount), grace_s=grace_s)
    landing = run(policy, [(0, rate)], horizon_s=1_900)
    assert landing is not None
    # within rounding and the controller's shortest wait (0.01 s), never a grace past it
    slack = float(rate) / 3600 * USD * 0.01 + 3
    assert amount - 3 <= landing.spent_micro <= amount + slack


def test_the_browser_s_time_left_agrees_with_the_stop_plan_s_duration() -> None:
    """The panel's headline "about 2 h 10 min left" (formatAhead) and the stop plan's "in
    about 14 min" (messages.about) are one rule: both pass the same cases."""
    path = Path(__file__).parent.parent / "labextension/src/__tests__/about-rule.json"
    cases = json.loads(path.read_text())["cases"]
    assert len(cases) > 10
    for case in cases:
        assert messages.about(float(case["seconds"])) == case["shown"], case
