"""A real JupyterHub on loopback: the gpucost service enforces a GPU-hour allowance.

ann has 1 GPU-hour a week. Her server has 2 simulated A100-80GB, and the admin weighs an
A100 GPU-hour at 50 (so that the test lasts seconds, not an hour): her server uses 100
weighted GPU-hours an hour, and her hour is spent 36 s after it starts. The service counts
down, the Hub stops the server when it is spent, a new spawn is refused saying what is
left and when it fills up, and the ledger and the admin CSV hold her session.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from hub_service_fixture import Hub, dig, running_hub, spawn

#: seconds until ann's hour is spent: 1 GPU-hour / (2 GPUs × 50) = 36 s
RUNS_S = 36.0
#: the service's poll is 1 s; the stop is asked at the first poll after it is spent and
#: the session is billed up to the last poll that saw it (see test_hub_service_cap.py)
TOLERANCE_S = 3.0


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hub-allowance")
    extra = (
        'c.GpuCostHub.user_allowances = {"ann": {"gpu_hours": 1, "per": "week"}}\n'
        'c.GpuCostHub.gpu_hour_weights = {"A100-80GB": 50}\n'
        "c.GpuCostHub.grace_s = 10\n"
    )
    with running_hub(
        root,
        budgets={},
        users=("ann", "carol"),
        groups={"finance": ["carol"]},
        group_budgets={},
        service_extra=extra,
    ) as hub:
        yield hub


def me(hub: Hub) -> dict[str, Any]:
    code, body = hub.svc("GET", "api/me", hub.token_for("ann"))
    return body if code == 200 and isinstance(body, dict) else {}


def test_a_spent_gpu_hour_allowance_stops_the_server_and_refuses_the_next_spawn(
    hub: Hub,
) -> None:
    # before: the whole hour is left, 36 s of her 2 A100s
    hub.wait("the service to answer ann", lambda: dig(me(hub), "allowances", 0), 30)
    left = me(hub)["allowances"]
    assert left[0]["left"] == 1.0
    assert left[0]["period"] == "week"
    assert left[0]["text"] == "36 s left this week"
    code, body = spawn(hub, "ann")
    assert code in (201, 202), body
    hub.wait(
        "the service to start ann's countdown", lambda: dig(me(hub), "running", 0, "stop_at"), 60
    )
    reason = me(hub)["running"][0]["reason"]
    assert "Your allowance (set by your hub admin) has " in reason
    assert "The allowance runs out in about " in reason
    hub.wait("the service to stop ann's server", lambda: hub.server("ann") is None, 90)
    assert "DELETE /hub/api/users/ann/server (gpucost@127.0.0.1)" in hub.log.read_text()
    hub.wait(
        "the service to close ann's session",
        lambda: dig(me(hub), "sessions", 0, "stopped"),
        15,
    )
    # the ledger: one session, that ran for her hour (to a poll)
    session = me(hub)["sessions"][0]
    ran_s = (
        datetime.fromisoformat(session["stopped"]) - datetime.fromisoformat(session["started"])
    ).total_seconds()
    assert RUNS_S - TOLERANCE_S <= ran_s <= RUNS_S + TOLERANCE_S, ran_s
    after = me(hub)["allowances"][0]
    assert after["left"] == 0
    assert after["exceeded"] is True
    # a new spawn is refused: spent, and when it fills up again (next Monday)
    code, body = hub.call("POST", "/users/ann/server")
    assert code == 403, body
    assert body["message"].startswith("Your server cannot start: the allowance is spent.")
    assert "It fills up again on Mon " in body["message"]
    assert hub.server("ann") is None
    # the admin CSV holds her spend
    code, text = hub.svc("GET", "api/admin/users.csv", hub.token_for("carol"))
    assert code == 200, text
    rows = [line.split(",") for line in text.splitlines()]
    ann = next(r for r in rows if r[0] == "ann")
    assert float(ann[3]) > 0  # month_usd
