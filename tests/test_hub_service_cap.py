"""A real JupyterHub on loopback: the gpucost service's budget is a cap.

alice has a session budget of $0.08 (about 42 s of her 2 simulated A100s: it outlasts her
spawn, up to 15 s on a busy machine, and the grace) and a 10 s grace period; her own config turns the extension off, so nothing in her server helps: the service
alone times the stop. Its countdown starts when the money left lasts the grace period at the
server's rate, says when and why, and the Hub stops the server when the money runs out, not
a grace period later.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hub_service_fixture import USD_PER_S, Hub, dig, running_hub, spawn

BUDGET_USD = 0.08
GRACE_S = 10.0
#: the service's poll (the fixture's c.GpuCostHub.poll_interval_s)
POLL_S = 1.0
#: How far past the budget the bill may end, besides the Hub's own stop (below), in seconds
#: of the server's rate: the stop is asked at the first poll at or after the money runs out
#: (one poll, plus the poll's own time on a loaded machine: 1 s); the service bills the
#: server up to the last poll that saw it listed (one more poll). The ledger bills by the
#: second with no minimum charge (the fixture's settings): nothing to round up.
TOLERANCE_S = 2 * POLL_S + 1.0
#: the log's time stamps: the service's ("08:09:59,251") and the Hub's ("08:10:04.615")
STAMP = re.compile(r"^\[\w (\S+ \S+) ")


def logged_at(log: str, needle: str) -> datetime:
    """When the first line of the hub's log holding ``needle`` was written (local time)."""
    for line in log.splitlines():
        found = STAMP.match(line)
        if needle in line and found:
            return datetime.fromisoformat(found.group(1).replace(",", "."))
    raise AssertionError(f"{needle!r} is not in the hub's log")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubcap")
    with running_hub(
        root,
        budgets={"alice": {"session": BUDGET_USD}},
        users=("alice",),
        groups={},
        group_budgets={},
        service_extra=f"c.GpuCostHub.grace_s = {GRACE_S}\n",
    ) as hub:
        yield hub


def me(hub: Hub) -> dict[str, Any]:
    code, body = hub.svc("GET", "api/me", hub.token_for("alice"))
    return body if code == 200 and isinstance(body, dict) else {}


def test_the_hub_stops_a_server_at_its_budget_not_a_grace_period_after(hub: Hub) -> None:
    code, body = spawn(hub, "alice")
    assert code in (201, 202), body
    # the countdown: announced before the money runs out, with when and at what rate
    hub.wait(
        "the service to start alice's countdown", lambda: dig(me(hub), "running", 0, "stop_at"), 60
    )
    running = me(hub)["running"][0]
    seen = datetime.now(UTC)
    stop_at = datetime.fromisoformat(running["stop_at"])
    started = datetime.fromisoformat(running["started"])
    runs_out = started + timedelta(seconds=BUDGET_USD / USD_PER_S)
    # the stop is when the money runs out (to a poll's rounding of what was spent), and the
    # countdown began at most a grace period (and a poll) before it
    assert abs((stop_at - runs_out).total_seconds()) <= POLL_S + 0.5, (stop_at, runs_out)
    assert (stop_at - seen).total_seconds() <= GRACE_S + 0.5
    assert running["session_usd"] < BUDGET_USD
    assert "Stops at $0.08 — in about " in running["reason"]
    assert (
        " at $6.86/h; notebooks saved first, then the hub stops the server." in (running["reason"])
    )
    plan = running["stop_plan"]
    assert plan["budget"]["scope"] == "session"
    assert plan["usd_per_hour"] == pytest.approx(6.862)
    # the Hub stops it, and the bill ends at the budget
    hub.wait("the service to stop alice's server", lambda: hub.server("alice") is None, 60)
    stopped_at = datetime.now(UTC)
    assert stopped_at >= stop_at - timedelta(seconds=0.5)
    hub.wait(
        "the service to close alice's session", lambda: dig(me(hub), "sessions", 0, "stopped"), 20
    )
    session = me(hub)["sessions"][0]
    billed_usd = session["billed_micro_usd"] / 1e6
    # what the machine costs while the Hub stops it (the spawner's signals, the server's
    # own shutdown: seconds) is billed too: a server is billed until it is gone
    log = hub.log.read_text()
    asked = logged_at(log, "stopping alice: ")
    stopping_s = (logged_at(log, "DELETE /hub/api/users/alice/server") - asked).total_seconds()
    assert 0 <= stopping_s < 30
    print(f"billed ${billed_usd:.6f} against ${BUDGET_USD}; the Hub's stop took {stopping_s} s")
    assert billed_usd >= BUDGET_USD - 0.0001
    assert billed_usd <= BUDGET_USD + (TOLERANCE_S + stopping_s) * USD_PER_S
    # before, the stop came a whole grace period after the budget
    assert billed_usd - stopping_s * USD_PER_S < BUDGET_USD + GRACE_S * USD_PER_S
