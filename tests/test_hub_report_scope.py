"""Who may report a user's spend, on a real JupyterHub on loopback.

A token of alice that the Hub knows is not enough: the token alice's browser hands to a
server she visits (OAuth, sharing) carries her name (``read:users:name``) and nothing
that lets it act for her, and such a token once raised her bill with a made-up $1,000
report. The report route now takes only a token that carries ``custom:gpucost:report``
for her: her own server's token, as the Hub gives it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from hub_service_fixture import Hub, running_hub, spawn
from test_hub_attacks import report as report_doc

from jupyter_gpucost.hub.web.report_route import REPORT_SCOPE, may_report


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubscope")
    # alice's server reports for itself (the extension on); bob runs none
    with running_hub(root, budgets={}, users=("alice", "bob"), groups={}, user_configs={}) as hub:
        spawn(hub, "alice")
        yield hub


def report(cost_usd: float) -> bytes:
    return json.dumps(report_doc(cost_usd, session_id="s-visitor")).encode()


def server_token(hub: Hub, user: str) -> str:
    """The ``JUPYTERHUB_API_TOKEN`` the Hub gave ``user``'s running server."""
    for child in psutil.Process(hub.process.pid).children(recursive=True):
        try:
            env = child.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if env.get("JUPYTERHUB_USER") == user and "JUPYTERHUB_API_TOKEN" in env:
            return env["JUPYTERHUB_API_TOKEN"]
    raise AssertionError(f"{user}'s server is not running")


def bill_usd(hub: Hub, user: str) -> float:
    code, body = hub.svc("GET", "api/me", hub.token_for(user))
    assert code == 200, body
    return float(body["today_usd"])


def sessions(hub: Hub, user: str) -> list[dict[str, Any]]:
    code, body = hub.svc("GET", "api/me", hub.token_for(user))
    assert code == 200, body
    found: list[dict[str, Any]] = body["sessions"]
    return found


def test_a_visitors_name_only_token_cannot_report_for_them(hub: Hub) -> None:
    # what alice's browser gives a server she visits: her name, nothing to act with
    code, body = hub.call(
        "POST", "/users/alice/tokens", {"note": "visit", "scopes": ["read:users:name!user=alice"]}
    )
    assert code == 201, body
    visitor = body["token"]
    # the Hub knows the token as alice's, and says it carries only her name
    code, who = hub.call("GET", "/user", token=visitor)
    assert code == 200, who
    assert who["name"] == "alice"
    assert not any(s.startswith(REPORT_SCOPE) for s in who["scopes"]), who["scopes"]
    before = bill_usd(hub, "alice")
    code, answer = hub.svc("POST", "api/report", visitor, report(1000.0))
    assert code == 403, answer
    assert REPORT_SCOPE in answer["message"], answer
    assert "alice" in answer["message"], answer
    # nothing was kept: her bill did not jump by the $1,000 (nor by what a ceiling allows)
    assert bill_usd(hub, "alice") < before + 0.5
    assert all(s["reported_usd"] is None or s["reported_usd"] < 0.5 for s in sessions(hub, "alice"))


def test_her_own_servers_token_reports(hub: Hub) -> None:
    token = server_token(hub, "alice")
    # the Hub's identity model names the scope, resolved to her
    code, who = hub.call("GET", "/user", token=token)
    assert code == 200, who
    assert f"{REPORT_SCOPE}!user=alice" in who["scopes"], who["scopes"]
    # her server's own reports arrive on their own (every second) and are counted
    hub.wait(
        "alice's server's reports to be counted",
        lambda: any((s["reported_usd"] or 0) > 0 for s in sessions(hub, "alice")),
        60,
    )
    # and a report sent with that very token is taken
    code, answer = hub.svc("POST", "api/report", token, report(0.001))
    assert code == 200, answer


@pytest.mark.parametrize(
    ("scopes", "server", "allowed"),
    [
        ({f"{REPORT_SCOPE}!user=alice"}, "", True),
        ({f"{REPORT_SCOPE}!user=alice"}, "gpu", True),
        ({f"{REPORT_SCOPE}!server=alice/"}, "", True),
        ({f"{REPORT_SCOPE}!server=alice/"}, "gpu", False),
        ({f"{REPORT_SCOPE}!server=alice/gpu"}, "gpu", True),
        ({REPORT_SCOPE}, "", True),
        # another user's, a look-alike, a group's, or none at all
        ({f"{REPORT_SCOPE}!user=bob"}, "", False),
        ({f"{REPORT_SCOPE}!user=alice2"}, "", False),
        ({f"{REPORT_SCOPE}!server=alice2/"}, "", False),
        ({f"{REPORT_SCOPE}x!user=alice"}, "", False),
        ({f"{REPORT_SCOPE}!group=team"}, "", False),
        ({"read:users:name!user=alice", "access:servers!server=bob/"}, "", False),
        ({"users:activity!user=alice", "inherit"}, "", False),
        (set(), "", False),
    ],
)
def test_the_scope_must_cover_her_server(scopes: set[str], server: str, allowed: bool) -> None:
    assert may_report(frozenset(scopes), "alice", server) is allowed
