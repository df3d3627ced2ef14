"""Idle GPU servers reclaimed, on a real JupyterHub: a server whose simulated GPUs sit idle
with no kernel busy is warned through its own budget countdown, then stopped by the service
through the Hub API; a server with a kernel running a long cell is spared until the cell
ends.

dora's GPUs are idle from the start. evan's are busy for their first seconds (so he can
start a kernel), then idle, while his kernel sleeps in a cell. erin (an admin of the
service by a Hub role) reads the admin summary.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hub_service_fixture import Hub, http, running_hub, spawn
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_gpucost.core.hub_protocol import IDLE_STOP_REASON

#: idle this long (6 s), warned; stopped this long after (15 s)
AFTER_MIN, WARN_MIN = 0.1, 0.25
#: evan's GPUs are busy this long after his server starts
EVAN_BUSY_S = 60
#: evan's cell sleeps this long
EVAN_CELL_S = 95

DEVICES = [
    {"index": i, "uuid": f"GPU-0000000{i}-idle", "name": "NVIDIA A100-SXM4-80GB"} for i in (0, 1)
]


def write_trace(path: Path, busy_s: int, length_s: int = 900) -> str:
    """A simulated trace of 2 A100s: busy (100 %) for ``busy_s`` seconds, then idle."""
    lines = [
        json.dumps(
            {
                "format": "jupyter-gpucost-trace",
                "version": 1,
                "name": "idle test",
                "interval_s": 1.0,
                "synthetic": True,
                "devices": DEVICES,
            }
        )
    ]
    for t in range(length_s):
        util = 100.0 if t < busy_s else 0.0
        power = 300.0 if t < busy_s else 60.0
        frame = {
            "utilization_pct": util,
            "memory_used_bytes": 1_000_000,
            "power_w": power,
            "energy_j": 1000.0 + t * power,
            "processes": [],
        }
        lines.append(json.dumps({"t": float(t), "gpus": [frame, frame]}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubidle")
    idle = write_trace(root / "idle.jsonl", busy_s=0)
    busy_then_idle = write_trace(root / "busy-then-idle.jsonl", busy_s=EVAN_BUSY_S)
    common = "c.GpuCost.budget_save_timeout_s = 2\n"
    with running_hub(
        root,
        budgets={},
        # erin exists already: the Hub role that makes her an admin of the service names her
        users=("dora", "evan"),
        groups={},
        group_budgets={},
        user_configs={
            "dora": common + f"c.GpuCost.simulated_trace = {idle!r}\n",
            "evan": common + f"c.GpuCost.simulated_trace = {busy_then_idle!r}\n",
        },
        service_extra=(
            f"c.GpuCostHub.idle_policy = {{'*': {{'after_min': {AFTER_MIN}, "
            f"'warn_min': {WARN_MIN}}}}}\n"
        ),
        # the driver reads the proxy's routes to reach the servers (no proxy process)
        hub_extra='c.JupyterHub.load_roles[0]["scopes"].append("proxy")\n',
    ) as hub:
        yield hub


def server_url(hub: Hub, user: str) -> str:
    """``http://127.0.0.1:PORT/user/<user>/``: the server itself, from the proxy's routes."""
    code, routes = hub.call("GET", "/proxy")
    assert code == 200, routes
    route = routes[f"/user/{user}/"]
    return f"{route['target'].rstrip('/')}/user/{user}/"


def budget(hub: Hub, user: str) -> dict[str, Any] | None:
    """The server's own budget API (what the user's countdown shows), or None when gone."""
    try:
        code, body = http("GET", server_url(hub, user) + "gpucost/api/budget", hub.token_for(user))
    except (OSError, KeyError, AssertionError):
        return None
    return body if code == 200 else None  # type: ignore[no-any-return]


def running(hub: Hub, user: str) -> dict[str, Any] | None:
    """The user's running server in the admin summary (erin is an admin of the service), or
    None, also while the summary does not list the user yet."""
    code, data = hub.svc("GET", "api/admin/summary", hub.token_for("erin"))
    assert code == 200, data
    entries = [u for u in data["users"] if u["user"] == user]
    assert len(entries) <= 1, entries
    return entries[0]["running"][0] if entries and entries[0]["running"] else None


async def start_long_cell(base: str, token: str, seconds: int) -> str:
    """Start a kernel and run ``time.sleep(seconds)`` in it; return once it is busy."""
    code, kernel = http("POST", base + "api/kernels", token, {"name": "python3"})
    assert code == 201, kernel
    ws_url = base.replace("http://", "ws://") + f"api/kernels/{kernel['id']}/channels"
    conn = await websocket_connect(
        HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}, connect_timeout=30)
    )
    msg_id = uuid.uuid4().hex
    conn.write_message(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "msg_type": "execute_request",
                    "username": "test",
                    "session": uuid.uuid4().hex,
                    "date": datetime.now(UTC).isoformat(),
                    "version": "5.3",
                },
                "parent_header": {},
                "metadata": {},
                "content": {
                    "code": f"import time\ntime.sleep({seconds})",
                    "silent": False,
                    "store_history": True,
                    "user_expressions": {},
                    "allow_stdin": False,
                    "stop_on_error": True,
                },
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            raw = await asyncio.wait_for(conn.read_message(), deadline - time.monotonic())
            assert raw is not None, "the kernel's websocket closed"
            msg = json.loads(raw)
            if (
                msg.get("msg_type") == "status"
                and msg.get("parent_header", {}).get("msg_id") == msg_id
                and msg["content"]["execution_state"] == "busy"
            ):
                return str(kernel["id"])
        raise AssertionError("the cell never started")
    finally:
        conn.close()


def test_an_idle_gpu_server_is_warned_then_stopped_and_a_busy_one_is_spared(hub: Hub) -> None:
    evan_started = time.monotonic()
    spawn(hub, "evan")
    asyncio.run(start_long_cell(server_url(hub, "evan"), hub.token_for("evan"), EVAN_CELL_S))
    # the cell must be running before evan's GPUs go idle, or the test proves nothing
    assert time.monotonic() - evan_started < EVAN_BUSY_S - 5
    spawn(hub, "dora")

    # dora: warned through her own server, with the countdown and the reason in her language
    warned: list[dict[str, Any]] = []

    def dora_warned() -> bool:
        b = budget(hub, "dora")
        # the reply's stop time, and the countdown it started (the next tick of the budget)
        if b and b.get("hub") and b["hub"]["stop_at"] and b["state"] == "grace":
            warned.append(b)
        return bool(warned)

    hub.wait("dora's server to be warned for idle GPUs", dora_warned, 60)
    hub_view = warned[0]["hub"]
    assert hub_view["stop_kind"] == "idle"
    assert hub_view["reason"] == IDLE_STOP_REASON
    assert warned[0]["state"] == "grace"
    assert warned[0]["grace"]["reason"] == "hub"
    stop_at = datetime.fromisoformat(hub_view["stop_at"])
    seen = running(hub, "dora")
    assert seen is not None
    assert seen["idle"]["state"] == "idle"
    assert seen["idle"]["stop_at"] is not None

    # ... then stopped by the service through the Hub API, not before its stop time
    hub.wait("dora's server to be stopped", lambda: hub.server("dora") is None, 90)
    assert datetime.now(UTC) >= stop_at
    log = hub.log.read_text()
    assert "stopping dora: its GPUs are idle" in log

    # evan: his GPUs idle (by his reports) but his kernel busy: never warned, still running
    def evan_gpus_idle() -> bool:
        seen = running(hub, "evan")
        return bool(seen and seen["idle"]["kernel_busy"] and seen["idle"]["gpus_idle"])

    hub.wait("evan's GPUs to go idle", evan_gpus_idle, EVAN_BUSY_S + 30)
    spared_until = time.monotonic() + (AFTER_MIN + WARN_MIN) * 60 + 5
    while time.monotonic() < spared_until:
        seen = running(hub, "evan")
        assert seen is not None, "evan's server was stopped with a kernel busy"
        assert seen["idle"]["stop_at"] is None
        assert seen["idle"]["state"] == "busy"
        time.sleep(1)
    b = budget(hub, "evan")
    assert b is not None
    assert b["hub"]["stop_at"] is None

    # once the cell ends, nothing spares him: warned in turn
    hub.wait(
        "evan's server to be warned once his cell ended",
        lambda: bool((running(hub, "evan") or {}).get("idle", {}).get("stop_at")),
        EVAN_CELL_S + 60,
    )
    assert time.monotonic() - evan_started >= EVAN_CELL_S

    # the admin page's figures: idle GPU-hours, one server reclaimed, what it saved
    code, data = hub.svc("GET", "api/admin/summary", hub.token_for("erin"))
    assert code == 200
    idle = data["idle"]
    assert idle["reclaimed"] == 1
    # dora's 2 GPUs idle at least the policy's minutes before her warning
    assert idle["idle_gpu_hours"] >= 2 * AFTER_MIN / 60
    assert idle["saved_usd"] > 0
    assert idle["freed_usd_per_hour"] == pytest.approx(6.862)
