"""Spot interruptions on a real JupyterHub: a user's server reports the interruptions it
recorded (docs/spot.md) in its spend report, and the admin summary, the admin page (in
English and in Chinese), the CSV and ``/metrics`` show each user's count and what was
lost since the last checkpoints. The same interruption sent in report after report, out
of order, or forged with another figure counts once; a report with a value outside the
protocol is refused naming the field (test_hub_interruptions.py checks that the bill is the
same with or without them).

ann's server runs the extension on a machine that is not spot, on a ledger whose earlier
session was interrupted: her server reports that interruption itself. mallory's server runs
with the extension off: she reports by hand, with her own hub token, as a user who owns her
server process can. erin is an admin of the service (a Hub role).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hub_service_fixture import NO_EXTENSION, Hub, dig, running_hub, spawn

from jupyter_gpucost.server.ledger import Ledger

FLUSH_S = 1.0


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubspot")
    ann_ledger = f"sqlite:///{root / 'ann-ledger.sqlite'}"
    ledger = Ledger(ann_ledger)
    # ann's earlier session, on a spot machine AWS took back: $0.41 lost
    at = datetime.now(UTC) - timedelta(minutes=10)
    ledger.start_session("ann-earlier", at - timedelta(hours=1), "ann")
    ledger.add_action(
        "ann-earlier",
        {
            **ANN_INTERRUPTION,
            "at": at.isoformat(),
            "deadline": (at + timedelta(seconds=10)).isoformat(),
        },
    )
    ledger.close()
    with running_hub(
        root,
        budgets={},
        flush_s=FLUSH_S,
        users=("mallory", "ann"),
        groups={},
        group_budgets={},
        user_configs={
            "mallory": NO_EXTENSION,
            "ann": f"c.GpuCost.ledger_url = {ann_ledger!r}\n",
        },
    ) as hub:
        spawn(hub, "mallory")
        spawn(hub, "ann")
        hub.wait(
            "the service to open mallory's session",
            lambda: dig(hub.svc("GET", "api/me", hub.token_for("mallory"))[1], "sessions"),
            30,
        )
        yield hub


ANN_INTERRUPTION = {
    "action": "interruption",
    "provider": "aws",
    "interruption_action": "terminate",
    "market": "spot",
    "instance_type": "p5.48xlarge",
    "instance_id": "i-0123456789abcdef0",
    "region": "us-east-1",
    "session_cost_micro_usd": 2_410_000,
    "lost_micro_usd": 410_000,
    "checkpoint": False,
    "steps": [],
}


def interruption(ident: str, minutes_ago: int, lost: int, session: int) -> dict[str, Any]:
    return {
        "id": ident,
        "at": (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat(),
        "provider": "aws",
        "market": "spot",
        "lost_micro_usd": lost,
        "session_micro_usd": session,
    }


def report(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat()
    return {
        "version": 1,
        "session_id": "s-2",
        "server_name": "",
        "started": now,
        "sent": now,
        "cost_micro_usd": 0,
        "idle_micro_usd": 0,
        "rate_micro_usd_per_s": 1900,
        "interruptions": list(items),
        **extra,
    }


def in_summary(hub: Hub, user: str) -> dict[str, Any]:
    code, data = hub.svc("GET", "api/admin/summary", hub.token_for("erin"))
    assert code == 200, data
    (entry,) = [u for u in data["users"] if u["user"] == user]
    return entry  # type: ignore[no-any-return]


def mallory_in_summary(hub: Hub) -> dict[str, Any]:
    return in_summary(hub, "mallory")


def test_a_server_reports_its_earlier_sessions_interruption_itself(hub: Hub) -> None:
    def counted() -> object:
        code, data = hub.svc("GET", "api/admin/summary", hub.token_for("erin"))
        assert code == 200, data
        # ann is listed once the service has seen her server
        return [u["interruptions"]["count"] for u in data["users"] if u["user"] == "ann"] == [1]

    hub.wait("ann's server to report its interruption", counted, 30)
    time.sleep(3)  # report after report (every second) carries it: still once
    assert in_summary(hub, "ann")["interruptions"] == {"count": 1, "lost_usd": 0.41}


def test_reported_interruptions_are_counted_once_per_user_on_every_admin_view(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    # two interruptions of earlier sessions: $0.41 and $0.09 lost since their checkpoints
    a = interruption("s-0@a", 50, 410_000, 2_000_000)
    b = interruption("s-1@b", 20, 90_000, 600_000)
    for items in [(a,), (a, b), (b, a), (b,), (a, b)]:
        code, reply = hub.svc("POST", "api/report", mallory, report(*items))
        assert code == 200, reply
    # the same id again, claiming $90,000 lost: the first report of it stands
    code, reply = hub.svc(
        "POST",
        "api/report",
        mallory,
        report({**a, "lost_micro_usd": 9 * 10**10, "session_micro_usd": 9 * 10**10}),
    )
    assert code == 200, reply
    entry = mallory_in_summary(hub)
    assert entry["interruptions"] == {"count": 2, "lost_usd": 0.5}
    time.sleep(FLUSH_S + 1.5)  # written by a flush: the same from the database
    assert mallory_in_summary(hub)["interruptions"] == {"count": 2, "lost_usd": 0.5}

    # the page an admin reads, in English and in Chinese
    code, page = hub.svc("GET", "admin", hub.token_for("erin"))
    assert code == 200, page
    row = page[page.index('data-user="mallory"') :]
    row = row[: row.index("</tr>")]
    assert "2 interruptions" in row
    assert "$0.50 lost since the last checkpoints" in row
    assert "Spot interruptions this month" in page
    code, page = hub.svc(
        "GET", "admin", hub.token_for("erin"), headers={"Accept-Language": "zh-CN"}
    )
    assert code == 200, page
    assert "本月竞价实例中断" in page
    assert "2 次中断" in page
    # dollars are spelled US$ in Chinese, as JupyterLab's Chinese pages spell them
    assert "自上次检查点以来损失 US$0.50" in page

    # the CSV and /metrics
    code, text = hub.svc("GET", "api/admin/users.csv", hub.token_for("erin"))
    assert code == 200, text
    (line,) = [r for r in csv.DictReader(io.StringIO(text)) if r["user"] == "mallory"]
    assert (line["interruptions"], line["interruptions_lost_usd"]) == ("2", "0.500000")
    code, text = hub.svc("GET", "metrics", hub.tokens["prometheus"])
    assert code == 200, text
    # ann's (her server's own report) and mallory's
    assert "gpucost_hub_interruptions_month 3.000000" in text
    assert "gpucost_hub_interruptions_lost_month_usd 0.910000" in text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lost_micro_usd": 10**30}, "lost_micro_usd"),
        ({"lost_micro_usd": -1}, "lost_micro_usd"),
        ({"session_micro_usd": True}, "session_micro_usd"),
        ({"id": ""}, "id"),
        ({"at": "2999-01-01T00:00:00+00:00"}, "at"),
    ],
)
def test_a_report_with_a_bad_interruption_is_refused_naming_the_field(
    hub: Hub, change: dict[str, Any], field: str
) -> None:
    bad = {**interruption("bad", 1, 1, 1), **change}
    code, body = hub.svc("POST", "api/report", hub.token_for("mallory"), report(bad))
    assert code == 400, body
    assert f"interruptions[0].{field}" in json.dumps(body)


def test_nan_and_infinity_are_refused(hub: Hub) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = json.dumps(report(interruption("nan", 1, 1, 1))).replace(
            '"lost_micro_usd": 1', f'"lost_micro_usd": {literal}'
        )
        code, answer = hub.svc(
            "POST",
            "api/report",
            hub.token_for("mallory"),
            body.encode(),
            headers={"Content-Type": "application/json"},
        )
        assert code == 400, answer
        assert "lost_micro_usd" in json.dumps(answer)
    # nothing refused was counted
    assert mallory_in_summary(hub)["interruptions"]["count"] == 2
