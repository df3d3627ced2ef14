"""Hub allowances without a Hub: the settings an admin writes (bad ones refused with a
sentence naming the setting), the periods (ISO weeks from Monday in the hub's time zone,
rolling windows), usage never counted twice across a boundary, top-ups never above their
cap, what a profile's page says is left, and the countdown to an allowance's end."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.hub.allowance import words as allowance_words
from jupyter_gpucost.hub.allowance.config import (
    Allowance,
    Period,
    TopUp,
    parse_allowance,
    parse_settings,
    parse_weights,
)
from jupyter_gpucost.hub.allowance.usage import (
    Span,
    gpu_usage,
    money_usage,
    replay,
    standing,
    top_up,
    window,
)
from jupyter_gpucost.hub.enforcer import HubEnforcer, Weighed
from jupyter_gpucost.hub.model import HubConfigError

PARIS = ZoneInfo("Europe/Paris")
HOUR_MICRO = 10**6  # one GPU-hour in micro GPU-hours
S = "c.GpuCostHub.user_allowances['*']"


# -- settings --------------------------------------------------------------------------


def test_an_allowance_is_gpu_hours_or_money_per_period_or_a_topped_up_balance() -> None:
    assert parse_allowance({"gpu_hours": 1, "per": "week"}, setting=S) == Allowance(
        "gpu_hours", HOUR_MICRO, Period(calendar="week")
    )
    assert parse_allowance({"usd": "2.50", "per": "7 days"}, setting=S) == Allowance(
        "usd", 2_500_000, Period(days=7)
    )
    assert parse_allowance(
        {"gpu_hours": 1, "start": "2026-09-07", "top_up": 1, "every": "week", "cap": 2},
        setting=S,
    ) == Allowance(
        "gpu_hours", HOUR_MICRO, None, TopUp(date(2026, 9, 7), HOUR_MICRO, "week", 2 * HOUR_MICRO)
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"gpu_hours": -1, "per": "week"}, f"{S}['gpu_hours']: -1 is negative"),
        ({"usd": "lots", "per": "week"}, f"{S}['usd']: 'lots' is not a number of dollars"),
        ({"usd": True, "per": "day"}, f"{S}['usd']: True is not a number of dollars"),
        ({"usd": 1, "gpu_hours": 1, "per": "day"}, "give exactly one of 'usd'"),
        ({"gpu_hours": 1, "per": "fortnight"}, "'fortnight' is not a period"),
        ({"gpu_hours": 1, "per": "0 days"}, "'0 days' is not a period"),
        ({"gpu_hours": 1, "per": "week", "cap": 2}, "'per' (an amount each period) and 'cap'"),
        ({"gpu_hours": 1, "top_up": 1, "every": "week", "cap": 2}, "'start' is missing"),
        (
            {"gpu_hours": 3, "start": "2026-09-07", "top_up": 1, "every": "week", "cap": 2},
            "is below the starting amount 3",
        ),
        (
            {"gpu_hours": 1, "start": "next term", "top_up": 1, "every": "week", "cap": 2},
            "'next term' is not a date",
        ),
        (
            {"gpu_hours": 1, "start": "2026-09-07", "top_up": 1, "every": "monday", "cap": 2},
            "'monday' is not 'day', 'week' (Mondays) or 'month'",
        ),
        ({"gpu_hours": 1, "per": "week", "each": True}, "unknown key 'each'"),
        ("1 GPU-hour", "expected a dict"),
    ],
)
def test_a_bad_allowance_is_refused_with_a_sentence_naming_the_setting(
    raw: object, message: str
) -> None:
    with pytest.raises(HubConfigError) as e:
        parse_allowance(raw, setting=S)
    assert message in str(e.value)
    assert str(e.value).startswith(S)


def test_weights_groups_and_the_minimum_runtime_are_checked() -> None:
    assert parse_weights({"A100-80GB": 4, "T4": "0.5"}) == {
        "A100-80GB": Decimal(4),
        "T4": Decimal("0.5"),
    }
    with pytest.raises(HubConfigError, match=r"gpu_hour_weights\['T4'\]: 0 must be above 0"):
        parse_weights({"T4": 0})
    with pytest.raises(HubConfigError, match="'\\*' is not a group"):
        parse_settings(None, {"*": {"usd": 1, "per": "day"}}, None, 0)
    with pytest.raises(HubConfigError, match="allowance_min_runtime_s: nan"):
        parse_settings(None, None, None, float("nan"))


BAD_NUMBERS = st.one_of(
    st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1.000001e9, allow_infinity=False),
    st.sampled_from([math.nan, math.inf, -math.inf, "NaN", "Infinity", "-0.5", "1e12"]),
    st.decimals(max_value=Decimal("-0.000001"), allow_nan=False),
)


@settings(max_examples=150, deadline=None)
@given(bad=BAD_NUMBERS, key=st.sampled_from(["usd", "gpu_hours", "top_up", "cap", "weight"]))
def test_negative_huge_or_nan_amounts_and_weights_are_refused(bad: object, key: str) -> None:
    entry: dict[str, object] = {
        "gpu_hours": 0,
        "start": "2026-09-07",
        "top_up": 1,
        "every": "week",
        "cap": 5,
    }
    if key in ("usd", "gpu_hours"):
        entry = {key: bad, "per": "week"}
    else:
        entry[key] = bad

    def parse() -> object:
        if key == "weight":
            return parse_weights({"T4": bad})
        return parse_allowance(entry, setting=S)

    with pytest.raises(HubConfigError) as e:
        parse()
    assert "c.GpuCostHub." in str(e.value)


# -- periods and usage -----------------------------------------------------------------


def test_a_week_begins_on_monday_at_midnight_in_the_hubs_time_zone() -> None:
    # Sunday 23:30 UTC is already Monday 00:30 in Paris
    now = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
    since, refill = window(Period(calendar="week"), now, PARIS)
    assert since == datetime(2026, 11, 29, 23, 0, tzinfo=UTC)  # Mon 30 Nov 00:00 CET
    assert refill == since + timedelta(days=7)
    since, _ = window(Period(calendar="week"), datetime(2026, 11, 29, 22, 30, tzinfo=UTC), PARIS)
    assert since == datetime(2026, 11, 22, 23, 0, tzinfo=UTC)  # still the week before
    since, refill = window(Period(days=7), now, PARIS)
    assert since == datetime(2026, 11, 23, 23, 0, tzinfo=UTC)  # today and the 6 days before
    assert refill == datetime(2026, 11, 30, 23, 0, tzinfo=UTC)


T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
instants = st.integers(min_value=0, max_value=40 * 86_400 * 10**6).map(
    lambda us: T0 + timedelta(microseconds=us)
)
spans = st.lists(
    st.tuples(
        instants,
        st.integers(1, 5 * 86_400),
        st.sampled_from([Fraction(1), Fraction(4), Fraction(1, 7)]),
    ).map(lambda t: Span(t[0], t[0] + timedelta(seconds=t[1]), t[2])),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(found=spans, cuts=st.lists(instants, min_size=2, max_size=6))
def test_usage_is_never_counted_twice_across_period_boundaries(
    found: list[Span], cuts: list[datetime]
) -> None:
    cuts = sorted(cuts)
    pieces = sum(gpu_usage(found, a, b) for a, b in itertools.pairwise(cuts))
    assert pieces == gpu_usage(found, cuts[0], cuts[-1])
    # every period of a calendar, whole: the weeks add up to all of it
    weeks = [T0 + timedelta(days=7 * i) for i in range(8)]
    assert sum(gpu_usage(found, a, b) for a, b in itertools.pairwise(weeks)) == (
        gpu_usage(found, weeks[0], weeks[-1])
    )
    by_day = {date(2026, 11, 2) + timedelta(days=i): i * 1000 + 7 for i in range(40)}
    days = [T0 + timedelta(days=i) for i in range(0, 41, 3)]
    assert sum(money_usage(by_day, a, b, UTC) for a, b in itertools.pairwise(days)) == money_usage(
        by_day, days[0], days[-1], UTC
    )


def test_gpu_hours_are_exact_and_weighted() -> None:
    # two A100s weighted 4 for 30 minutes: 4 weighted GPU-hours
    span = Span(T0, T0 + timedelta(minutes=30), Fraction(2 * 4))
    assert gpu_usage([span], T0, T0 + timedelta(hours=1)) == 4 * HOUR_MICRO
    assert gpu_usage([span], T0 + timedelta(minutes=15), T0 + timedelta(hours=1)) == 2 * HOUR_MICRO


@settings(max_examples=200, deadline=None)
@given(
    start_amount=st.integers(0, 10 * HOUR_MICRO),
    extra=st.integers(0, 10 * HOUR_MICRO),
    topup=st.integers(0, 5 * HOUR_MICRO),
    weekly=st.lists(st.integers(0, 6 * HOUR_MICRO), min_size=1, max_size=10),
)
def test_a_top_up_never_lifts_a_balance_above_its_cap(
    start_amount: int, extra: int, topup: int, weekly: list[int]
) -> None:
    cap = start_amount + extra
    allowance = Allowance("gpu_hours", start_amount, None, TopUp(T0.date(), topup, "week", cap))
    # each week's usage in one span at its start
    found = [
        Span(
            T0 + timedelta(days=7 * i),
            T0 + timedelta(days=7 * i, microseconds=3600 * u),
            Fraction(1),
        )
        for i, u in enumerate(weekly)
    ]
    now = T0 + timedelta(days=7 * len(weekly), hours=1)
    balance = replay(allowance, lambda a, b: gpu_usage(found, a, b), now, UTC)
    assert balance.left <= cap
    left = Fraction(start_amount)
    for u in weekly:
        before = left - u
        left = top_up(before, topup, cap)
        assert left <= max(cap, before)
        assert left >= before
    assert balance.left == left
    assert balance.next_at == T0 + timedelta(days=7 * (len(weekly) + 1))


# -- what the user reads ---------------------------------------------------------------


def test_the_spawn_page_line_and_the_refusal_say_what_is_left_and_when_it_fills() -> None:
    allowance = Allowance("gpu_hours", HOUR_MICRO, Period(calendar="week"))
    found = [Span(T0, T0 + timedelta(minutes=40), Fraction(1))]
    now = T0 + timedelta(hours=2)
    s = standing(allowance, "user", lambda a, b: gpu_usage(found, a, b), now, UTC)
    assert s.left_micro == HOUR_MICRO // 3
    assert allowance_words.left_at_rate(s, Decimal(1)) == "20 min left this week"
    assert allowance_words.left_at_rate(s, Decimal(4)) == "5 min left this week"
    assert allowance_words.spawn_refusal(s, Decimal(1), 15 * 60, UTC) is None
    refusal = allowance_words.spawn_refusal(s, Decimal(4), 15 * 60, UTC)
    assert refusal is not None
    assert refusal.startswith(
        "Your server cannot start: what is left lasts 5 min at this profile's rate, and the "
        "hub asks for at least 15 min."
    )
    assert "has 0.33 GPU-hours left this week" in refusal
    assert "It fills up again on Mon 2026-11-09 00:00 UTC." in refusal


def test_the_countdown_to_an_allowance_ends_when_it_runs_out() -> None:
    allowance = Allowance("gpu_hours", HOUR_MICRO, Period(calendar="week"))
    found = [Span(T0, T0 + timedelta(hours=5), Fraction(1))]
    enforcer = HubEnforcer(grace_s=300)
    key = ("ann", "", T0)
    # 54 min used: 6 min left, more than the 5 min grace — no countdown yet
    now = T0 + timedelta(minutes=54)
    s = standing(allowance, "user", lambda a, b: gpu_usage(found, a, b), now, UTC)
    assert enforcer.update(key, [Weighed(None, Decimal(1), s, UTC)], now) is None
    now = T0 + timedelta(minutes=56)
    s = standing(allowance, "user", lambda a, b: gpu_usage(found, a, b), now, UTC)
    deadline = enforcer.update(key, [Weighed(None, Decimal(1), s, UTC)], now)
    assert deadline is not None
    assert abs((deadline.stop_at - (T0 + timedelta(hours=1))).total_seconds()) < 1
    assert "The allowance runs out in about 4 min" in deadline.reason
    assert deadline.plan is not None
    assert deadline.plan.to_json()["allowance"] == {
        "source": "user",
        "unit": "gpu_hours",
        "period": "week",
        "left": s.left_micro / 10**6,
    }


def test_the_documented_example_is_one_gpu_hour_a_week_topped_up_to_two() -> None:
    from pathlib import Path

    from traitlets.config import Config

    doc = (Path(__file__).parent.parent / "docs" / "jupyterhub.md").read_text()
    section = doc.split("## Allowances", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    c = Config()
    exec(code, {"c": c})  # the admin's own config file, as traitlets loads it
    hub = c.GpuCostHub
    found = parse_settings(
        hub.user_allowances,
        hub.group_allowances,
        hub.gpu_hour_weights,
        hub.allowance_min_runtime_s,
    )
    students = found.groups["students"]
    assert students.amount_micro == HOUR_MICRO
    assert students.per_member
    assert students.top_up == TopUp(date(2026, 9, 7), HOUR_MICRO, "week", 2 * HOUR_MICRO)
    assert found.weight("A100-80GB") == 4
