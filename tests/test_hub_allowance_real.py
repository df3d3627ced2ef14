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
from test_hub_service_cap import logged_at

#: seconds until ann's hour is spent: 1 GPU-hour / (2 GPUs × 50) = 36 s
RUNS_S = 36.0
#: the service's poll is 1 s; the stop is asked at the first poll after it is spent and
#: the session is billed up to the last poll that saw it (see test_hub_service_cap.py)
TOLERANCE_S = 3.0


#: prof owns the students group's allowance: a Hub role with the approve scope on it
OWNERS = """
c.JupyterHub.custom_scopes["custom:gpucost:approve"] = {
    "description": "Approve requests for more GPU allowance"
}
c.JupyterHub.load_roles.append(
    {"name": "students-owners", "scopes": ["custom:gpucost:approve!group=students"],
     "users": ["prof"]}
)
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hub-allowance")
    extra = (
        "c.GpuCostHub.group_allowances = "
        '{"students": {"gpu_hours": 1, "per": "week", "per_member": True}}\n'
        'c.GpuCostHub.gpu_hour_weights = {"A100-80GB": 50}\n'
        "c.GpuCostHub.grace_s = 10\n"
    )
    with running_hub(
        root,
        budgets={},
        users=("ann", "carol"),  # prof comes with the role below
        groups={"finance": ["carol"], "students": ["ann"]},
        group_budgets={},
        service_extra=extra,
        hub_extra=OWNERS,
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
    assert "Group students's allowance (set by your hub admin) has " in reason
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
    # what the server runs while the Hub stops it (its signals, its own shutdown) is billed
    # too, and counted: a server is billed until it is gone
    log = hub.log.read_text()
    asked = logged_at(log, "stopping ann: ")
    stopping_s = (logged_at(log, "DELETE /hub/api/users/ann/server") - asked).total_seconds()
    assert 0 <= stopping_s < 30
    assert RUNS_S - TOLERANCE_S <= ran_s <= RUNS_S + TOLERANCE_S + stopping_s, (ran_s, stopping_s)
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


def test_the_groups_owner_approves_more_and_the_user_may_start_again(hub: Hub) -> None:
    ann, carol, prof = (hub.token_for(u) for u in ("ann", "carol", "prof"))
    asked = {"source": "group:students", "amount": 1, "reason": "one more training run"}
    code, made = hub.svc("POST", "api/allowance/requests", ann, asked)
    assert code == 201, made
    assert made["state"] == "open"
    # ann cannot decide her own, carol (an admin of the service, no owner) can, but first
    # a user who is neither: refused with a sentence
    code, body = hub.svc("POST", f"api/allowance/requests/{made['id']}", ann, {"approve": True})
    assert code == 403, body
    assert body["error"] == "Nobody may decide their own request."
    code, listed = hub.svc("GET", "api/allowance/requests", prof)
    assert code == 200, listed
    assert [r["id"] for r in listed["to_decide"]] == [made["id"]]
    code, decided = hub.svc(
        "POST", f"api/allowance/requests/{made['id']}", prof, {"approve": True, "note": "ok"}
    )
    assert code == 200, decided
    assert (decided["state"], decided["decided_by"]) == ("approved", "prof")
    # replayed: refused, nothing granted twice
    code, body = hub.svc("POST", f"api/allowance/requests/{made['id']}", carol, {"approve": True})
    assert code == 409, body
    assert body["error"] == "This request was already decided by prof."
    # at once: one GPU-hour more this week (less what her last server ran past the first),
    # and the spawn the allowance refused starts
    hub.wait("ann's allowance to grow", lambda: dig(me(hub), "allowances", 0, "amount") == 2, 10)
    assert me(hub)["allowances"][0]["left"] > 0
    code, body = spawn(hub, "ann")
    assert code in (201, 202), body
    # the admin CSV of requests holds the request and its decision
    code, text = hub.svc("GET", "api/admin/allowance-requests.csv", carol)
    assert code == 200, text
    header, row = (line.split(",") for line in text.splitlines())
    assert header[:3] == ["id", "user", "source"]
    record = dict(zip(header, row, strict=True))
    assert (record["user"], record["state"], record["decided_by"]) == ("ann", "approved", "prof")
    assert record["reason"] == "one more training run"
    assert hub.svc("GET", "api/admin/allowance-requests.csv", ann)[0] == 403
    # a browser's cookie alone cannot ask (no token in Authorization)
    code, body = hub.svc("POST", "api/allowance/requests", None, asked)
    assert code == 401, body
