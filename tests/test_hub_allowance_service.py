"""Hub allowances in the service's core, on a real hub ledger (SQLite, then PostgreSQL) with
a clock the test moves: 1 GPU-hour a week counted down and stopped when it is spent, a
spawn refused with what is left and when it fills, the week's turn restoring it, a
balance topped up on Monday up to its cap, and a rolling window sliding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.hub.allowance.book import AllowanceBook
from jupyter_gpucost.hub.allowance.config import parse_settings
from jupyter_gpucost.hub.allowance.usage import AllowancePolicy
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import views
from jupyter_gpucost.hub.web.allowance_view import allowances

WED = datetime(2026, 11, 4, 10, 0, tzinfo=UTC)  # a Wednesday
T4 = Rate(GpuAllocation("T4", 1), Decimal("0.53"), "test")
A100 = Rate(GpuAllocation("A100-80GB", 1), Decimal("3.40"), "test")
GRACE_S = 300


def make(url: str, users: object, groups: object = None, minimum_s: float = 0) -> HubService:
    settings = parse_settings(users, groups, {"A100-80GB": 4, "T4": 1}, minimum_s)
    ledger = HubLedger(url, tz=UTC, billing=BillingRule(1, 0))
    return HubService(
        ledger,
        lambda s: A100 if s.profile == "a100" else T4,
        HubBudgetPolicy(),
        HubEnforcer(GRACE_S, tick_s=60),
        None,
        AllowanceBook(AllowancePolicy(settings, UTC)),
    )


def run_until_stopped(
    service: HubService, server: ServerInfo, limit: datetime, since: datetime | None = None
) -> datetime:
    """Poll each minute from ``since`` (the server's start); the stop the service asks for
    ends it."""
    now = since or server.started
    while now < limit:
        service.sync([server], now)
        if service.due(now):
            service.sync([], now + timedelta(seconds=1))
            return now
        now += timedelta(minutes=1)
    raise AssertionError("the service never stopped the server")


def test_one_gpu_hour_a_week_is_stopped_refused_and_restored_on_monday(ledger_url: str) -> None:
    service = make(ledger_url, {"*": {"gpu_hours": 1, "per": "week"}}, minimum_s=600)
    # before a start: a T4 has the whole hour left, an A100 (weighted 4) 15 minutes
    refusal, left = allowances(service, "ann", None, WED)
    assert refusal is None
    assert left[0]["text"] == "1 h 0 min left this week"
    assert allowances(service, "ann", "a100", WED)[1][0]["text"] == "15 min left this week"
    server = ServerInfo("ann", "", WED, True)
    service.sync([server], WED)
    # the countdown: announced a grace before the hour ends, the stop at the hour
    service.sync([server], WED + timedelta(minutes=56))
    state = next(iter(service.state.values()))
    assert state.stop_at is not None
    assert abs((state.stop_at - (WED + timedelta(hours=1))).total_seconds()) <= 1
    assert state.reason is not None
    assert "The allowance runs out in about 4 min" in state.reason
    stopped = run_until_stopped(
        service, server, WED + timedelta(hours=2), WED + timedelta(minutes=57)
    )
    assert stopped == WED + timedelta(hours=1)
    # the ledger holds the session, billed for its hour
    service.flush(stopped + timedelta(seconds=1))
    sessions = service.ledger.sessions("ann")
    assert len(sessions) == 1
    assert sessions[0]["billed_micro_usd"] == 530_000
    # the admin CSV holds the user's spend
    summary = views.admin_summary(service, stopped, stopped.date())
    assert "ann" in views.users_csv(summary)
    # a new spawn is refused: the allowance is spent, and it says when it fills again
    refusal, left = allowances(service, "ann", None, stopped + timedelta(minutes=5))
    assert refusal is not None
    assert refusal.startswith("Your server cannot start: the allowance is spent.")
    assert "It fills up again on Mon 2026-11-09 00:00 UTC." in refusal
    assert left[0]["left"] == 0
    assert left[0]["exceeded"]
    # Monday: a new week, the whole hour again
    monday = datetime(2026, 11, 9, 0, 0, 1, tzinfo=UTC)
    refusal, left = allowances(service, "ann", None, monday)
    assert refusal is None
    assert left[0]["left"] == 1.0
    service.close(monday)


def test_a_monday_top_up_restores_a_balance_up_to_its_cap(ledger_url: str) -> None:
    students = {
        "students": {
            "gpu_hours": 1,
            "start": "2026-11-02",
            "top_up": 1,
            "every": "week",
            "cap": 2,
            "per_member": True,
        }
    }
    service = make(ledger_url, None, students, minimum_s=600)
    service.learn_groups("sam", ("students",))
    server = ServerInfo("sam", "", WED, True, groups=("students",))
    stopped = run_until_stopped(service, server, WED + timedelta(hours=2))
    assert stopped == WED + timedelta(hours=1)
    refusal, _ = allowances(service, "sam", None, stopped + timedelta(minutes=1))
    assert refusal is not None
    assert "It tops up by 1 GPU-hour on Mon 2026-11-09" in refusal
    assert "up to 2 GPU-hours" in refusal
    # Monday's top-up: 1 GPU-hour; two weeks unused: capped at 2, not 3
    refusal, left = allowances(service, "sam", None, datetime(2026, 11, 9, 8, tzinfo=UTC))
    assert refusal is None
    assert left[0]["left"] == 1.0
    _, left = allowances(service, "sam", None, datetime(2026, 11, 23, 8, tzinfo=UTC))
    assert left[0]["left"] == 2.0
    assert left[0]["source"] == "group:students"
    service.close(WED)


def test_a_rolling_window_slides_day_by_day(ledger_url: str) -> None:
    service = make(ledger_url, {"bob": {"gpu_hours": 2, "per": "3 days"}})
    # 1.5 h on Wednesday, then 0.25 h on Thursday
    for start, minutes in ((WED, 90), (WED + timedelta(days=1), 15)):
        server = ServerInfo("bob", "", start, True)
        service.sync([server], start)
        service.sync([server], start + timedelta(minutes=minutes))
        service.sync([], start + timedelta(minutes=minutes, seconds=1))

    def left_on(day: int) -> float:
        _, found = allowances(service, "bob", None, datetime(2026, 11, day, 12, tzinfo=UTC))
        return float(found[0]["left"])

    assert left_on(5) == 0.25  # Wed + Thu in the window
    assert left_on(6) == 0.25  # Fri: Wed, Thu, Fri
    assert left_on(7) == 1.75  # Sat: Wednesday has slid out
    assert left_on(8) == 2.0  # Sun: Thursday too
    service.close(WED)
