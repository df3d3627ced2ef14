"""The hub's routing of alerts and its settings, without a hub: who is told, the day's
spike against the user's usual day, and a bad ``c.GpuCostHub.notify`` refused by name."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from jupyter_gpucost.alerts import AlertDispatcher, DispatchSettings
from jupyter_gpucost.alerts.model import Alert
from jupyter_gpucost.alerts.targets import Target
from jupyter_gpucost.core.hub_protocol import HubBudget
from jupyter_gpucost.core.i18n import _, current_language
from jupyter_gpucost.hub.alerting import HubAlerts, parse_notify
from jupyter_gpucost.hub.model import GpuAllocation, HubConfigError, Rate, ServerRow

NOW = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)


def hook(name: str) -> str:
    return f"webhook://127.0.0.1:9/{name}?token=s3cret-{name}"


#: alice's day budget of $20, spent: why her spawn is refused
DAY_SPENT = HubBudget("day", 20_000_000, 20_410_000, "user")


def routed(
    language: str | None = None, delivered: list[tuple[Alert, str]] | None = None
) -> tuple[HubAlerts, list[tuple[str, str]]]:
    sent: list[tuple[str, str]] = []

    def record(alert: Alert, target: Target, _timeout_s: float) -> None:
        sent.append((alert.kind, target.url.split("/")[3].split("?")[0]))
        if delivered is not None:
            delivered.append((alert, alert.body()))

    raw: dict[str, object] = {
        "users": {"alice": [hook("alice")], "bob": [hook("bob")]},
        "groups": {"lab": [hook("lab")], "other": [hook("other")]},
        "admins": [hook("admins")],
    }
    if language is not None:
        raw["language"] = language
    dispatcher = AlertDispatcher(DispatchSettings(), send=record)
    return HubAlerts(parse_notify(raw), dispatcher, tz=ZoneInfo("UTC")), sent


def test_a_spike_goes_to_the_user_and_their_groups_owner_once_a_day() -> None:
    alerts, sent = routed()
    daily = [
        *((date(2026, 11, d), "alice", 2_000_000) for d in (20, 21, 23, 24)),
        (date(2026, 11, 27), "alice", 7_000_000),
        # bob's day is usual; an old day is not counted
        *((date(2026, 11, d), "bob", 2_000_000) for d in (20, 21, 23, 27)),
        (date(2026, 10, 1), "alice", 500_000_000),
    ]
    groups = {"alice": ("lab",), "bob": ("other",)}
    assert alerts.spikes(daily, groups, NOW) == 1
    assert alerts.spikes(daily, groups, NOW) == 0
    assert alerts.dispatcher.wait_idle(10)
    assert sorted(sent) == [("spend_spike", "alice"), ("spend_spike", "lab")]


def test_a_refused_spawn_tells_the_admins_too_and_no_other_user() -> None:
    alerts, sent = routed()
    assert alerts.spawn_refused("alice", ("lab",), [DAY_SPENT], NOW)
    assert not alerts.spawn_refused("alice", ("lab",), [DAY_SPENT], NOW)
    assert alerts.dispatcher.wait_idle(10)
    assert sorted(sent) == [
        ("spawn_refused", "admins"),
        ("spawn_refused", "alice"),
        ("spawn_refused", "lab"),
    ]


def test_a_hundred_amounts_spent_during_a_grace_are_one_refused_spawn_alert_each() -> None:
    # each refused spawn during a grace period says a new amount: the event is the same
    alerts, sent = routed()
    for cents in range(100):
        spent = HubBudget("day", 20_000_000, 20_000_000 + cents * 10_000, "user")
        alerts.spawn_refused("alice", ("lab",), [spent], NOW + timedelta(seconds=cents))
    assert alerts.dispatcher.wait_idle(10)
    assert sorted(sent) == [
        ("spawn_refused", "admins"),
        ("spawn_refused", "alice"),
        ("spawn_refused", "lab"),
    ]
    # another budget spent is another event; so is the next day
    month = HubBudget("month", 100_000_000, 100_000_001, "group:lab")
    assert alerts.spawn_refused("alice", ("lab",), [DAY_SPENT, month], NOW)
    assert alerts.spawn_refused("alice", ("lab",), [DAY_SPENT], NOW + timedelta(days=1))


def test_after_five_thousand_other_alerts_a_users_50_percent_is_not_resent(
    ledger_url: str,
) -> None:
    from jupyter_gpucost.core.sent_keys import TableKeys
    from jupyter_gpucost.hub.ledger import HubLedger
    from jupyter_gpucost.hub.ledger.schema import alerts_sent_table

    ledger = HubLedger(ledger_url)
    sent: list[str] = []

    def record(alert: Alert, target: Target, _timeout_s: float) -> None:
        sent.append(alert.key)

    def dispatcher() -> AlertDispatcher:
        return AlertDispatcher(
            DispatchSettings(per_target_per_hour=0, queue_size=20_000),
            send=record,
            memory=TableKeys(ledger.engine, alerts_sent_table),
            clock=lambda: NOW,
        )

    notify = parse_notify({"users": {u: [hook(u)] for u in ("alice", "bob")}})
    first = HubAlerts(notify, dispatcher(), tz=ZoneInfo("UTC"))
    started = NOW - timedelta(hours=1)
    rate = Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "catalog")
    alice = ServerRow(1, "alice", "", started, None, started, None, rate)
    half = HubBudget("month", 10_000_000, 5_000_000, "user")
    assert first.after_poll([(alice, [half])], {}, NOW) == 1
    # 5,000 other events (bob's idle spells), more than the memory ever held
    bob = ServerRow(2, "bob", "", started, None, started, None, rate)
    for n in range(5000):
        first.idle(bob, NOW - timedelta(seconds=n), (), NOW)
    assert first.after_poll([(alice, [half])], {}, NOW) == 0
    assert first.dispatcher.wait_idle(30)
    first.dispatcher.save()
    first.dispatcher.close()
    assert sent.count("budget_threshold|alice|user:month:2026-11|50") == 1
    assert len(sent) == 5001
    # and after a restart of the service, from the ledger
    again = HubAlerts(notify, dispatcher(), tz=ZoneInfo("UTC"))
    assert again.after_poll([(alice, [half])], {}, NOW + timedelta(days=2)) == 0
    # the next month is another period
    december = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert again.after_poll([(alice, [half])], {}, december) == 1
    assert again.dispatcher.wait_idle(10)
    again.dispatcher.close()
    ledger.close()


def test_an_idle_warning_is_alerted_once_per_spell_to_the_user_and_their_owner() -> None:
    from datetime import timedelta
    from decimal import Decimal

    from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerRow

    alerts, sent = routed()
    started = NOW - timedelta(hours=2)
    row = ServerRow(
        7,
        "bob",
        "",
        started,
        None,
        started,
        None,
        Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "catalog"),
    )
    since = NOW - timedelta(minutes=30)
    assert alerts.idle(row, since, ("other",), NOW)
    assert not alerts.idle(row, since, ("other",), NOW + timedelta(seconds=10))
    assert alerts.idle(row, NOW, ("other",), NOW + timedelta(minutes=40))  # a new spell
    assert alerts.dispatcher.wait_idle(10)
    assert sorted(sent) == [("idle_gpus", "bob")] * 2 + [("idle_gpus", "other")] * 2


def test_a_budget_found_five_times_spent_is_one_alert_naming_100_percent() -> None:
    delivered: list[tuple[Alert, str]] = []
    alerts, sent = routed(delivered=delivered)
    started = NOW - timedelta(minutes=5)
    row = ServerRow(
        8,
        "alice",
        "",
        started,
        None,
        started,
        None,
        Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "catalog"),
    )
    # a $0.02 day budget, $0.10 spent by the first poll that sees it
    spent = HubBudget("day", 20_000, 100_000, "user")
    groups = {"alice": ("lab",)}
    assert alerts.after_poll([(row, [spent])], groups, NOW) == 1
    # the polls after it: nothing more (neither 100 % again nor the lower ones)
    more = HubBudget("day", 20_000, 120_000, "user")
    assert alerts.after_poll([(row, [more])], groups, NOW + timedelta(seconds=5)) == 0
    assert alerts.dispatcher.wait_idle(10)
    assert sorted(sent) == [("budget_threshold", "alice"), ("budget_threshold", "lab")]
    assert {a.threshold_pct for a, _ in delivered} == {100}
    assert all("(100%)" in body for _, body in delivered)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"users": {"alice": ["nosuch://s3cret@x"]}}, "c.GpuCostHub.notify[\"users\"]['alice']"),
        ({"groups": {"lab": "webhook://x/y"}}, 'c.GpuCostHub.notify["groups"]'),
        ({"admins": "webhook://x/y"}, 'c.GpuCostHub.notify["admins"]'),
        ({"owners": {}}, "c.GpuCostHub.notify must be a dict"),
        ({"language": "tlh"}, 'c.GpuCostHub.notify["language"] must be a language'),
        ({"language": 7}, 'c.GpuCostHub.notify["language"] must be a language'),
        (["webhook://x/y"], "c.GpuCostHub.notify must be a dict"),
    ],
)
def test_a_bad_setting_is_refused_naming_it_never_the_secret(raw: object, named: str) -> None:
    with pytest.raises(HubConfigError) as e:
        parse_notify(raw)
    assert named in str(e.value)
    assert "s3cret" not in str(e.value)


def row_of(user: str, server_id: int = 7) -> ServerRow:
    started = NOW - timedelta(hours=2)
    return ServerRow(
        server_id,
        user,
        "",
        started,
        None,
        started,
        None,
        Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "catalog"),
    )


def test_the_hubs_alerts_are_written_in_its_notify_language_and_nothing_else_changes() -> None:
    delivered: list[tuple[Alert, str]] = []
    alerts, sent = routed("zh-CN", delivered)
    row = row_of("alice")
    assert alerts.spawn_refused("alice", ("lab",), [DAY_SPENT], NOW)
    assert alerts.stopped(row, "budget", [DAY_SPENT], ("lab",), NOW)
    assert alerts.stopped(row_of("bob", 8), "idle", [], ("other",), NOW)
    assert alerts.dispatcher.wait_idle(10)
    assert len(delivered) == len(sent) == 7
    for alert, body in delivered:
        assert alert.language == "zh_CN"
        text = alert.title + alert.message + body
        # written in Chinese: none of the English sentences is left
        assert "refused" not in text, text
        assert "stopped because" not in text, text
        assert any("\u4e00" <= ch <= "\u9fff" for ch in alert.title), alert.title
    refusal = next(a for a, _ in delivered if a.kind == "spawn_refused")
    assert "$20.00" in refusal.message  # the amounts as the hub writes them
    # the process's own language, and this thread's, are untouched
    assert current_language() == "en"
    assert _("the budget ran out") == "the budget ran out"


def test_an_alert_is_delivered_in_its_own_language_whatever_the_thread_speaks() -> None:
    from dataclasses import replace

    from jupyter_gpucost.alerts.model import Context, stopped

    english = stopped(
        Context(user="alice", server="gpu", machine="g5.xlarge"),
        "budget",
        "spent",
        still_bills_per_hour=None,
        subject="s",
        at=NOW,
    )
    assert english.language == "en"
    assert "Server: gpu" in english.body()
    chinese = replace(english, language="zh_CN")
    assert "Server: gpu" not in chinese.body()
    assert "gpu" in chinese.body()
    assert "g5.xlarge" in chinese.body()


def test_a_stop_at_the_budget_is_alerted_with_when_and_at_what_rate() -> None:
    from jupyter_gpucost.hub.enforcer import Plan

    delivered: list[tuple[Alert, str]] = []
    alerts, _sent = routed("en", delivered)
    close = HubBudget("day", 20_000_000, 19_770_000, "user")
    plan = Plan(close, Decimal("6.862"), 120.0, 120.0)
    assert alerts.stopped(row_of("alice"), "budget", [], ("lab",), NOW, plan)
    assert alerts.dispatcher.wait_idle(10)
    # to alice and to her group's owner, the same alert
    stops = [a for a, _ in delivered if a.kind == "stopped"]
    assert len(stops) == 2
    stop = stops[0]
    assert "Your day budget of $20.00 (set by your hub admin) stands at: $19.77 today." in (
        stop.message
    )
    assert (
        "Stops at $20.00 — in about 2 min at $6.86/h; notebooks saved first, then the hub "
        "stops the server." in stop.message
    )


def test_a_request_for_more_goes_to_the_groups_owner_and_the_admins_once() -> None:
    delivered: list[tuple[Alert, str]] = []
    alerts, sent = routed(delivered=delivered)
    assert alerts.allowance_requested(
        "alice", "group:lab", 7, "2 GPU-hours", "thesis deadline on Friday", NOW
    )
    assert not alerts.allowance_requested(
        "alice", "group:lab", 7, "2 GPU-hours", "thesis deadline on Friday", NOW
    )
    assert alerts.dispatcher.wait_idle(10)
    # not alice herself, not another group's owner, not another user
    assert sorted(sent) == [("allowance_request", "admins"), ("allowance_request", "lab")]
    alert, body = delivered[0]
    assert alert.title == "alice asks for more GPU allowance"
    assert body.startswith("alice asks for 2 GPU-hours more: thesis deadline on Friday")
    assert alert.document()["group"] == "lab"
