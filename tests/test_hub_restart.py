"""A restart of the gpucost service during a budget's countdown, on a real JupyterHub: the
server is stopped at the stop time it had before (when the budget runs out), not a new
grace period later."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hub_service_fixture import NO_EXTENSION, Hub, running_hub, service_pid, spawn

GRACE_S = 40.0
POLL_S = 1.0
#: how long the Hub itself may take to stop a server on a loaded machine
HUB_STOP_S = 15.0


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubrestart")
    with running_hub(
        root,
        # about 52 s of 2 A100s: the 40 s countdown starts about 12 s after the spawn (or
        # at the first poll, shortened, on a machine that spawns slower), and ends at 52 s
        budgets={"gina": {"day": 0.1}},
        users=("gina",),
        groups={},
        group_budgets={},
        user_configs={"gina": NO_EXTENSION},
        service_extra=f"c.GpuCostHub.grace_s = {GRACE_S}\n",
    ) as hub:
        yield hub


def me(hub: Hub) -> dict[str, Any] | None:
    """gina's own figures, or None while the service does not answer."""
    try:
        code, body = hub.svc("GET", "api/me", hub.token_for("gina"))
    except OSError:
        return None
    return body if code == 200 else None  # type: ignore[no-any-return]


def test_a_restart_during_the_grace_period_keeps_the_stop_time(hub: Hub) -> None:
    spawn(hub, "gina")
    stop_at: list[datetime] = []

    def deadline() -> bool:
        mine = me(hub)
        if mine and mine["running"] and mine["running"][0]["stop_at"]:
            stop_at.append(datetime.fromisoformat(mine["running"][0]["stop_at"]))
        return bool(stop_at)

    hub.wait("gina's countdown to start", deadline, 60)
    pid = service_pid(hub)
    os.kill(pid, signal.SIGKILL)

    def back() -> bool:
        try:
            return service_pid(hub) != pid and me(hub) is not None
        except AssertionError:
            return False

    hub.wait("the hub to restart the gpucost service", back, 90)
    restarted = datetime.now(UTC)
    time.sleep(2 * POLL_S)  # its first polls
    mine = me(hub)
    assert mine is not None
    if mine["running"]:
        # still counting down: the stop time it had, not a new countdown from the restart
        assert datetime.fromisoformat(mine["running"][0]["stop_at"]) == stop_at[0]
    gone: list[datetime] = []

    def stopped() -> bool:
        if hub.server("gina") is None:
            gone.append(datetime.now(UTC))
        return bool(gone)

    hub.wait("gina's server to stop", stopped, GRACE_S + 60)
    latest = max(stop_at[0], restarted) + timedelta(seconds=POLL_S + HUB_STOP_S)
    assert gone[0] <= latest, (gone[0], stop_at[0], restarted)
