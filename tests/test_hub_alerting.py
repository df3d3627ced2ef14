"""The hub's routing of alerts and its settings, without a hub: who is told, the day's
spike against the user's usual day, and a bad ``c.GpuCostHub.notify`` refused by name."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from jupyter_gpucost.alerts import AlertDispatcher, DispatchSettings
from jupyter_gpucost.alerts.model import Alert
from jupyter_gpucost.alerts.targets import Target
from jupyter_gpucost.hub.alerting import HubAlerts, parse_notify
from jupyter_gpucost.hub.model import HubConfigError

NOW = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)


def hook(name: str) -> str:
    return f"webhook://127.0.0.1:9/{name}?token=s3cret-{name}"


def routed() -> tuple[HubAlerts, list[tuple[str, str]]]:
    sent: list[tuple[str, str]] = []

    def record(alert: Alert, target: Target, _timeout_s: float) -> None:
        sent.append((alert.kind, target.url.split("/")[3].split("?")[0]))

    notify = parse_notify(
        {
            "users": {"alice": [hook("alice")], "bob": [hook("bob")]},
            "groups": {"lab": [hook("lab")], "other": [hook("other")]},
            "admins": [hook("admins")],
        }
    )
    dispatcher = AlertDispatcher(DispatchSettings(), send=record)
    return HubAlerts(notify, dispatcher, tz=ZoneInfo("UTC")), sent


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
    assert alerts.spawn_refused("alice", ("lab",), "Your server cannot start.", NOW)
    assert not alerts.spawn_refused("alice", ("lab",), "Your server cannot start.", NOW)
    assert alerts.dispatcher.wait_idle(10)
    assert sorted(sent) == [
        ("spawn_refused", "admins"),
        ("spawn_refused", "alice"),
        ("spawn_refused", "lab"),
    ]


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


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"users": {"alice": ["nosuch://s3cret@x"]}}, "c.GpuCostHub.notify[\"users\"]['alice']"),
        ({"groups": {"lab": "webhook://x/y"}}, 'c.GpuCostHub.notify["groups"]'),
        ({"admins": "webhook://x/y"}, 'c.GpuCostHub.notify["admins"]'),
        ({"owners": {}}, "c.GpuCostHub.notify must be a dict"),
        (["webhook://x/y"], "c.GpuCostHub.notify must be a dict"),
    ],
)
def test_a_bad_setting_is_refused_naming_it_never_the_secret(raw: object, named: str) -> None:
    with pytest.raises(HubConfigError) as e:
        parse_notify(raw)
    assert named in str(e.value)
    assert "s3cret" not in str(e.value)
