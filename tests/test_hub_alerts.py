"""The hub's alerts against a real JupyterHub on loopback, to a real HTTP receiver: alice's
day budget crosses 50/80/100 % and her server is stopped; each alert goes to her targets and
her group's owner's, to no one else; her next spawn is refused and the admins are told too;
the admin page lists the deliveries, targets masked, and other users cannot see it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alert_receivers import Http
from hub_service_fixture import Hub, http, running_hub, spawn

from jupyter_gpucost.alerts.targets import mask

#: alice's day budget: spent about 32 s after her spawn begins (2 A100s, $0.0019 a
#: second), so that a spawn slowed by a busy machine still leaves the first poll under
#: 50 %, and each threshold is crossed at a poll of its own (thresholds crossed within one
#: poll are one alert naming the highest)
ALICE_DAY_USD = 0.06
SECRET = "owner-secret-token"
PEOPLE = ("alice", "bob", "carol", "lab-owner", "finance-owner", "admins")


def url(receiver: Http, who: str) -> str:
    return f"webhook://127.0.0.1:{receiver.port}/{who}?token={SECRET}"


@pytest.fixture(scope="module")
def receiver() -> Iterator[Http]:
    http = Http()
    try:
        yield http
    finally:
        http.close()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, receiver: Http) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubalerts")
    notify = {
        "users": {u: [url(receiver, u)] for u in ("alice", "bob", "carol")},
        "groups": {
            "lab": [url(receiver, "lab-owner")],
            "finance": [url(receiver, "finance-owner")],
        },
        "admins": [url(receiver, "admins")],
    }
    with running_hub(
        root,
        budgets={"alice": {"day": ALICE_DAY_USD}},
        groups={"finance": ["carol"], "lab": ["alice", "bob"]},
        group_budgets={},
        service_extra=f"c.GpuCostHub.notify = {notify!r}\n",
        # the driver reads the proxy's routes to reach the servers (no proxy process)
        hub_extra='c.JupyterHub.load_roles[0]["scopes"].append("proxy")\n',
    ) as hub:
        yield hub


def kinds(receiver: Http, who: str) -> list[tuple[str, Any]]:
    return sorted((str(d["kind"]), d.get("threshold_pct") or 0) for d in receiver.at(f"/{who}"))


def test_a_users_budget_alerts_go_to_them_and_their_groups_owner_only(
    hub: Hub, receiver: Http
) -> None:
    code, body = spawn(hub, "alice")
    assert code in (201, 202), body
    expected = [
        ("budget_threshold", 50),
        ("budget_threshold", 80),
        ("budget_threshold", 100),
        ("stopped", 0),
    ]
    hub.wait("alice's alerts", lambda: kinds(receiver, "alice") == expected, 90)
    hub.wait("the lab owner's alerts", lambda: kinds(receiver, "lab-owner") == expected, 10)
    # a few more polls: nothing twice, and no one else told
    time.sleep(3)
    assert kinds(receiver, "alice") == expected
    assert kinds(receiver, "lab-owner") == expected
    for other in ("bob", "carol", "finance-owner", "admins"):
        assert receiver.at(f"/{other}") == [], other
    (stop,) = [d for d in receiver.at("/alice") if d["kind"] == "stopped"]
    assert stop["user"] == "alice"
    assert "budget" in stop["message"]
    assert stop["link"].endswith("/admin")


def test_a_refused_spawn_tells_the_user_their_owner_and_the_admins(
    hub: Hub, receiver: Http
) -> None:
    hub.wait("alice's server to stop", lambda: hub.server("alice") is None, 60)
    code, body = hub.call("POST", "/users/alice/server")
    assert code == 403, body
    for who in ("alice", "lab-owner", "admins"):
        hub.wait(
            f"{who}'s spawn alert",
            lambda who=who: any(d["kind"] == "spawn_refused" for d in receiver.at(f"/{who}")),
            20,
        )
    for other in ("bob", "carol", "finance-owner"):
        assert receiver.at(f"/{other}") == [], other
    (refused,) = [d for d in receiver.at("/admins") if d["kind"] == "spawn_refused"]
    assert "day budget" in refused["message"]


def test_only_admins_see_the_deliveries_and_never_a_url(hub: Hub, receiver: Http) -> None:
    code, body = hub.svc("GET", "api/admin/summary", hub.token_for("bob"))
    assert code == 403, body
    code, body = hub.svc("GET", "api/admin/summary", hub.token_for("carol"))
    assert code == 200, body
    recent = body["alerts"]["recent"]
    assert {d["target"] for d in recent} <= {mask(url(receiver, w)) for w in PEOPLE}
    assert {d["user"] for d in recent} == {"alice"}
    text = str(body)
    assert SECRET not in text
    assert f"127.0.0.1:{receiver.port}" not in text
    # the service's log never names a target either
    assert SECRET not in Path(hub.log).read_text()


def test_another_user_can_neither_read_nor_add_targets_on_a_users_server(hub: Hub) -> None:
    code, body = spawn(hub, "bob")
    assert code in (201, 202), body
    code, routes = hub.call("GET", "/proxy")
    assert code == 200, routes
    base = f"{routes['/user/bob/']['target'].rstrip('/')}/user/bob/gpucost/api/alerts"
    mine = "webhook://127.0.0.1:9/bob-only"
    code, body = http("POST", f"{base}/targets", hub.token_for("bob"), {"url": mine})
    assert code == 200, body
    (target,) = body["yours"]
    hostile = hub.token_for("carol")
    for method, path, sent in (
        ("GET", "", None),
        ("POST", "/targets", {"url": "webhook://127.0.0.1:9/carol-reads-bob"}),
        ("POST", f"/targets/{target['id']}/test", {}),
        ("DELETE", f"/targets/{target['id']}", None),
    ):
        code, answer = http(method, base + path, hostile, sent)
        assert code == 403, (method, path, answer)
    code, body = http("GET", base, hub.token_for("bob"))
    assert code == 200, body
    assert body["yours"] == [target]
