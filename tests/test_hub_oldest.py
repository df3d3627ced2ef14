"""The hub tier on the oldest JupyterHub it supports (5.0), from the wheel a user installs.

``make test-python`` installs the wheel built from this tree beside ``jupyterhub==5.0.*``
(with JupyterLab 4.0 and Notebook 7.0) in ``.venv-oldest`` and names its interpreter in
``GPUCOST_OLDEST_PYTHON``. There the Hub, its single-user servers and the gpucost service
all run from that environment: a server reports its spend, a budget stops a server from
outside, and the Hub's pre-spawn hook refuses the next spawn.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hub_service_fixture import Hub, running_hub, spawn

OLDEST = os.environ.get("GPUCOST_OLDEST_PYTHON", "")

pytestmark = pytest.mark.skipif(
    not OLDEST, reason="needs the oldest supported JupyterHub beside the wheel: `make test`"
)

#: bob's day budget: spent some 10 s after his server starts (2 simulated A100s)
BOB_DAY_USD = 0.02


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("oldesthub")
    with running_hub(
        root,
        budgets={"bob": {"day": BOB_DAY_USD}},
        users=("bob", "dora"),
        groups={},
        group_budgets={},
        user_configs={},
        python=OLDEST,
    ) as hub:
        yield hub


def me(hub: Hub, user: str) -> dict[str, Any] | None:
    """``user``'s own page data, or None while the service does not answer it yet."""
    code, body = hub.svc("GET", "api/me", hub.token_for(user))
    return body if code == 200 and isinstance(body, dict) else None


def test_the_hub_is_the_oldest_supported_one(hub: Hub) -> None:
    code, body = hub.call("GET", "/")
    assert code == 200, body
    assert str(body["version"]).startswith("5.0."), body


def test_a_server_reports_its_spend_to_the_service(hub: Hub) -> None:
    code, body = spawn(hub, "dora")
    assert code in (201, 202), body

    def reported() -> bool:
        sessions = (me(hub, "dora") or {}).get("sessions") or []
        return any((s.get("reported_usd") or 0) > 0 for s in sessions)

    hub.wait("dora's server to report its spend", reported, 90)
    mine = me(hub, "dora")
    assert mine is not None
    (running,) = mine["running"]
    assert "A100-80GB" in running["gpus"]


def test_a_spent_budget_stops_the_server_and_refuses_the_next_spawn(hub: Hub) -> None:
    code, body = spawn(hub, "bob")
    assert code in (201, 202), body
    hub.wait("the service to stop bob's server", lambda: hub.server("bob") is None, 90)
    code, body = hub.call("POST", "/users/bob/server")
    assert code == 403, body
    assert body["message"].startswith("Your server cannot start. Your day budget of $0.02")
