"""The budget policy as a state machine: pure, driven step by step with exact amounts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.server.budget.parse import parse_amount, parse_scope, parse_thresholds
from jupyter_gpucost.server.budget.policy import (
    Budget,
    BudgetError,
    BudgetPolicy,
    Enforce,
    GraceCleared,
    GraceStarted,
    Standing,
    ThresholdCrossed,
)
from jupyter_gpucost.server.budget.spend import LedgerPeriods, MeterSpend
from jupyter_gpucost.server.budget.store import BudgetStore, StoredState
from jupyter_gpucost.server.record.recorder import LiveTotals

T0 = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)
USD = 1_000_000
HARD = Budget("hard", 10 * USD, "session")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


#: $0.01 lasts 120 s at this rate: a countdown of up to 120 s starts $0.01 before a budget
SLOW = Decimal("0.3")


def step(
    policy: BudgetPolicy,
    seconds: float,
    spent_usd: float,
    period: str = "s1",
    rate: Decimal | None = None,
) -> list[object]:
    spent = round(spent_usd * USD)
    standings = [Standing(b, spent, period) for b in policy.budgets()]
    return policy.evaluate(at(seconds), standings, rate_per_hour=rate)


def thresholds(events: list[object]) -> list[int]:
    return [e.threshold_pct for e in events if isinstance(e, ThresholdCrossed)]


def test_no_budget_is_state_none() -> None:
    policy = BudgetPolicy()
    assert step(policy, 0, 100) == []
    assert policy.state == "none"


def test_each_threshold_fires_once_not_on_every_poll() -> None:
    policy = BudgetPolicy(hard=HARD)
    fired: list[int] = []
    for i, spent in enumerate([1, 4.99, 5, 5.5, 6, 7.99, 8, 8.2, 9.49, 9.5, 9.6, 9.7]):
        fired += thresholds(step(policy, i, spent))
    assert fired == [50, 80, 95]
    assert policy.state == "warning"


def test_a_jump_fires_every_crossed_threshold_in_one_event() -> None:
    policy = BudgetPolicy(hard=HARD)
    events = step(policy, 0, 9)
    (event,) = [e for e in events if isinstance(e, ThresholdCrossed)]
    assert event.threshold_pct == 80
    assert event.crossed_pct == (50, 80)
    assert thresholds(step(policy, 1, 9.6)) == [95]


def test_grace_then_enforce_once() -> None:
    policy = BudgetPolicy(hard=HARD, grace_s=120)
    step(policy, 0, 9.98)
    events = step(policy, 1, 9.99, rate=SLOW)
    grace = [e for e in events if isinstance(e, GraceStarted)]
    assert len(grace) == 1
    assert grace[0].ends == at(121)
    assert policy.state == "grace"
    assert not any(isinstance(e, Enforce) for e in step(policy, 60, 9.995, rate=SLOW))
    events = step(policy, 121, 10, rate=SLOW)
    (enforce,) = [e for e in events if isinstance(e, Enforce)]
    assert enforce.standing is not None
    assert enforce.standing.budget.kind == "hard"
    assert policy.state == "enforcing"
    assert step(policy, 122, 10.5) == []
    policy.acted()
    assert step(policy, 200, 11) == []
    assert policy.state == "acted"


def test_a_spent_hard_budget_stops_kernels_started_after_the_action() -> None:
    policy = BudgetPolicy(hard=HARD, grace_s=60)
    step(policy, 0, 9.995, rate=SLOW)
    assert any(isinstance(e, Enforce) for e in step(policy, 60, 10, rate=SLOW))
    policy.acted()
    assert policy.evaluate(at(61), [Standing(HARD, 10_200_000, "s1")]) == []
    # the user starts a kernel again: the budget is spent, so the action again at once
    # (was: a new countdown of the full grace, past the budget)
    events = policy.evaluate(at(70), [Standing(HARD, 10_300_000, "s1")], kernels_running=True)
    assert any(isinstance(e, GraceStarted) for e in events)
    assert any(isinstance(e, Enforce) for e in events)


def test_a_spent_soft_budget_lets_the_user_go_on_after_the_action() -> None:
    soft = Budget("soft", 5 * USD)
    policy = BudgetPolicy(soft=soft, grace_s=60)
    step(policy, 0, 4.995, rate=SLOW)
    assert any(isinstance(e, Enforce) for e in step(policy, 60, 5, rate=SLOW))
    policy.acted()
    assert policy.evaluate(at(70), [Standing(soft, 5_300_000, "s1")], kernels_running=True) == []
    assert policy.state == "acted"


def test_save_and_stop_now_ends_the_grace_period() -> None:
    policy = BudgetPolicy(hard=HARD, grace_s=120)
    step(policy, 0, 9.99, rate=SLOW)
    assert policy.stop_now(at(5))
    assert any(isinstance(e, Enforce) for e in step(policy, 5, 9.99, rate=SLOW))
    assert not policy.stop_now(at(6))  # no countdown to end any more


def test_raising_a_soft_budget_clears_grace_and_rearms_the_thresholds_above() -> None:
    policy = BudgetPolicy(soft=Budget("soft", 5 * USD))
    assert thresholds(step(policy, 0, 4.9)) == [95]
    assert any(isinstance(e, GraceStarted) for e in step(policy, 1, 4.995, rate=SLOW))
    policy.set_soft(Budget("soft", 20 * USD), spent_micro=5 * USD, period="s1")
    events = step(policy, 2, 5.1)
    assert any(isinstance(e, GraceCleared) for e in events)
    # 5.1 of 20 is 25 %: nothing fires; 50 % fires again for the raised budget
    assert thresholds(events) == []
    assert thresholds(step(policy, 3, 10)) == [50]
    assert policy.state == "warning"


def test_raising_a_soft_budget_counts_passed_thresholds_as_fired() -> None:
    policy = BudgetPolicy(soft=Budget("soft", 5 * USD))
    step(policy, 0, 4.5)
    policy.set_soft(Budget("soft", 6 * USD), spent_micro=4_500_000, period="s1")  # 75 %
    assert thresholds(step(policy, 1, 4.6)) == []
    assert thresholds(step(policy, 2, 4.8)) == [80]


def test_a_budget_set_past_a_threshold_does_not_announce_it() -> None:
    policy = BudgetPolicy(hard=HARD)
    step(policy, 0, 3)
    policy.set_soft(Budget("soft", 5 * USD), spent_micro=3 * USD, period="s1")  # 60 %
    assert thresholds(step(policy, 1, 3.1)) == []
    assert thresholds(step(policy, 2, 4)) == [80]


def test_a_hard_budget_cannot_be_raised_or_removed_through_the_soft_path() -> None:
    policy = BudgetPolicy(hard=HARD)
    with pytest.raises(BudgetError):
        policy.set_soft(Budget("hard", 100 * USD))
    policy.set_soft(Budget("soft", 100 * USD))
    assert policy.hard == HARD
    step(policy, 0, 9.995, rate=SLOW)
    assert policy.state == "grace"  # the hard one still binds
    policy.set_soft(None)
    assert policy.hard == HARD


def test_the_budget_with_least_left_binds() -> None:
    policy = BudgetPolicy(hard=HARD, soft=Budget("soft", 3 * USD))
    events = step(policy, 0, 3)
    (grace,) = [e for e in events if isinstance(e, GraceStarted)]
    assert grace.standing.budget.kind == "soft"


def test_restart_neither_refires_nor_skips(tmp_path: Path) -> None:
    store = BudgetStore(tmp_path / "budget.json")
    day = Budget("hard", 10 * USD, "day")
    before = BudgetPolicy(hard=day)
    assert thresholds(step(before, 0, 6, period="2026-11-22")) == [50]
    store.save(StoredState(fired={k: sorted(v) for k, v in before.fired.items()}))

    # the server restarts; while it was down the day's spend went past 80 % and 95 %
    after = BudgetPolicy(hard=day)
    after.restore_fired(store.load().fired)
    events = step(after, 10, 9.6, period="2026-11-22")
    (event,) = [e for e in events if isinstance(e, ThresholdCrossed)]
    assert event.crossed_pct == (80, 95)  # not skipped, 50 not fired again
    assert thresholds(step(after, 11, 9.7, period="2026-11-22")) == []
    # a new day arms the thresholds again
    assert thresholds(step(after, 12, 5, period="2026-11-23")) == [50]


def test_idle_grace_is_cleared_when_work_resumes() -> None:
    policy = BudgetPolicy(grace_s=60)
    events = policy.evaluate(at(0), [], idle_for_s=600, idle_limit_s=600)
    (grace,) = [e for e in events if isinstance(e, GraceStarted)]
    assert grace.reason == "idle"
    events = policy.evaluate(at(10), [], idle_for_s=0, idle_limit_s=600)
    assert any(isinstance(e, GraceCleared) for e in events)
    assert policy.state != "grace"


def test_runs_out_at_the_current_rate() -> None:
    standing = Standing(Budget("soft", 5 * USD), 2 * USD, "s")
    # $3 left at $6/h: 30 minutes
    assert standing.runs_out_at(T0, Decimal(6)) == T0 + timedelta(minutes=30)
    assert standing.runs_out_at(T0, Decimal(0)) is None
    assert Standing(Budget("soft", USD), 2 * USD, "s").runs_out_at(T0, Decimal(6)) == T0
    assert Standing(Budget("soft", USD), None, "s").share is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("abc", "number of dollars"),
        (0, "more than 0"),
        (-1, "more than 0"),
        ("1.0000001", "more than 6 decimals"),
        (float("nan"), "finite"),
        (True, "number of dollars"),
        (None, "number of dollars"),
        (10**7, "at most 1000000"),
    ],
)
def test_invalid_amounts_are_refused_with_a_reason(raw: object, message: str) -> None:
    with pytest.raises(BudgetError, match=message):
        parse_amount(raw, what="amount_usd")


def test_parsers() -> None:
    assert parse_amount("12.5", what="x") == 12_500_000
    assert parse_amount(0.1, what="x") == 100_000
    assert parse_scope(" Day ", what="x") == "day"
    with pytest.raises(BudgetError, match="session, day, month"):
        parse_scope("week", what="scope")
    assert parse_thresholds([95, "50", 80, 50], what="t") == (50, 80, 95)
    with pytest.raises(BudgetError, match="1 to 99"):
        parse_thresholds([100], what="t")


def test_a_corrupt_state_file_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    path.write_text("{not json")
    state = BudgetStore(path).load()
    assert state.soft is None
    assert state.fired == {}
    assert (tmp_path / "budget.json.corrupt").exists()
    store = BudgetStore(path)
    store.save(StoredState(soft=Budget("soft", 7 * USD, "session"), fired={"k": [50]}))
    again = store.load()
    assert again.soft == Budget("soft", 7 * USD, "session")
    assert again.fired == {"k": [50]}


class _Snapshot:
    cost_micro = 1_500_000
    rate_per_hour = Decimal("6.862")
    started = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    as_of = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)


def _latest() -> Any:
    return _Snapshot()


class _UtcLedger:
    """A ledger whose day starts at midnight UTC, with fixed running totals."""

    def __init__(self, totals: dict[str, int]) -> None:
        self._totals = totals

    def day_start(self, now: datetime) -> datetime:
        return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)

    def month_start(self, now: datetime) -> datetime:
        return self.day_start(now).replace(day=1)

    def totals(self, snapshot: object) -> LiveTotals:
        return LiveTotals(self._totals["day"], self._totals["month"], self._totals["month"])


def test_day_and_month_plug_into_the_ledger_when_the_service_has_one() -> None:
    spend = MeterSpend(latest=_latest, session_id=_Snapshot.started.isoformat())
    assert spend.spent("session") == (1_500_000, "2026-11-22T09:00:00+00:00")
    assert not spend.supports("day")
    assert spend.spent("day") == (None, "2026-11-22")

    totals = {"day": 7_000_000, "month": 45_000_000}
    ledger = _UtcLedger(totals)
    spend = MeterSpend(
        latest=_latest, session_id=spend.session_id, ledger=LedgerPeriods(ledger, ledger)
    )
    assert spend.supports("day")
    assert spend.supports("month")
    assert spend.spent("day") == (7_000_000, "2026-11-22")
    assert spend.spent("month") == (45_000_000, "2026-11")


class _Live:
    today_micro = 2_000_000
    month_micro = 9_000_000


class _Recorder:
    def totals(self, snapshot: object) -> _Live:
        return _Live()


class _Ledger:
    """A ledger whose day starts at midnight in UTC+10."""

    def day_start(self, now: datetime) -> datetime:
        local = now.astimezone(timezone(timedelta(hours=10)))
        return local.replace(hour=0, minute=0, second=0, microsecond=0)

    def month_start(self, now: datetime) -> datetime:
        return self.day_start(now).replace(day=1)


def test_day_and_month_come_from_the_recorder_in_the_ledger_time_zone() -> None:
    spend = MeterSpend(
        latest=_latest,
        session_id="s1",
        ledger=LedgerPeriods(_Ledger(), _Recorder()),  # type: ignore[arg-type]
    )
    assert spend.supports("month")
    # 14:00 UTC on the 22nd is already the 23rd in UTC+10
    assert spend.spent("day") == (2_000_000, "2026-11-23")
    assert spend.spent("month") == (9_000_000, "2026-11")


def test_the_hubs_budget_is_named_as_set_by_the_hub_admin_in_warnings() -> None:
    from jupyter_gpucost.server.budget import messages

    hub_day = Budget("hub", 10_000_000, "day", source="set by your hub admin", owner="user")
    text = messages.threshold(95, hub_day, None, "$")
    assert text == "95% of your $10.00 daily budget set by your hub admin is spent."
    assert messages.grace(hub_day, "stop-server", 60, "$").startswith(
        "Your $10.00 daily budget set by your hub admin is spent."
    )


def test_a_stop_the_user_asks_for_counts_down_and_names_its_action() -> None:
    policy = BudgetPolicy(grace_s=30)
    started = policy.request_stop(at(0), "done", "stop-instance")
    assert isinstance(started, GraceStarted)
    assert started.reason == "done"
    # no budget is spent, yet the countdown holds until its end
    assert step(policy, 10, 0) == []
    assert policy.state == "grace"
    assert step(policy, 30, 0) == [Enforce(None, "done", "stop-instance")]


def test_the_user_cancels_their_own_stop_never_a_budget_s() -> None:
    policy = BudgetPolicy(hard=HARD, grace_s=60)
    assert policy.request_stop(at(0), "user", "stop-instance") is not None
    assert policy.cancel_stop()
    assert policy.state == "ok"
    assert not policy.cancel_stop()
    step(policy, 1, 9.995, rate=SLOW)  # the admin's budget runs out: its countdown
    assert policy.state == "grace"
    assert not policy.cancel_stop()
    # nor can a stop of the user's replace it (and so end it sooner or later)
    assert policy.request_stop(at(2), "user", "shutdown") is None
    assert policy.grace_reason == "budget"


def test_a_stop_the_user_asks_for_after_a_soft_budget_s_action_does_not_rearm_it() -> None:
    soft = Budget("soft", 5 * USD)
    policy = BudgetPolicy(soft=soft, grace_s=60)
    step(policy, 0, 4.995, rate=SLOW)
    assert any(isinstance(e, Enforce) for e in step(policy, 60, 5, rate=SLOW))
    policy.acted()
    policy.request_stop(at(70), "user", "stop-instance")
    assert any(isinstance(e, Enforce) for e in step(policy, 130, 5.3))
    policy.acted()
    # the soft budget's action was taken once: the user may go on
    assert policy.evaluate(at(140), [Standing(soft, 5_400_000, "s1")]) == []
    assert policy.state == "acted"
