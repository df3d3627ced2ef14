"""The cost panel's live parts pushed on the event bus: a real Jupyter server, its websocket."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jupyter_gpucost.server.status_events import PANEL_EVENT_SCHEMA_ID


async def next_panel_event(ws: Any, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no panel event in {timeout_s} s")
        message = await asyncio.wait_for(ws.read_message(), left)
        assert message is not None, "the event socket closed"
        event = json.loads(message)
        if event.get("schema_id") == PANEL_EVENT_SCHEMA_ID:
            return event


def cell(cell_id: str) -> dict[str, Any]:
    ended = datetime.now(UTC)
    return {
        "cell_id": cell_id,
        "started": (ended - timedelta(seconds=2)).isoformat(),
        "ended": ended.isoformat(),
        "wall_s": 2.0,
        "cost_usd": 0.0038,
    }


@pytest.fixture
def gpucost_config() -> dict[str, object]:
    return {"telemetry": "simulated", "sample_interval_s": 0.2, "minimum_charge_s": 0}


async def test_a_page_receives_the_kernels_cells_exports_and_the_charts_newest_point(
    jp_serverapp: Any, jp_fetch: Any, jp_ws_fetch: Any
) -> None:
    ws = await jp_ws_fetch("api", "events", "subscribe")
    try:
        first = await next_panel_event(ws, 10)
        panel = first["panel"]
        assert first["heartbeat_s"] >= first["interval_s"] >= 1
        # the same documents as the routes answer
        kernels = json.loads((await jp_fetch("gpucost", "api", "kernels")).body)
        assert set(panel["kernels"]) == set(kernels)
        exports = json.loads((await jp_fetch("gpucost", "api", "exports")).body)
        assert panel["exports"] == exports
        history = json.loads((await jp_fetch("gpucost", "api", "history")).body)
        assert set(panel["point"]) == set(history["points"][-1])
        assert panel["point"]["t"] >= history["points"][0]["t"]
        assert panel["cells"] == []

        # a cell a kernel reports arrives with the next events, newest first
        for name in ("one", "two"):
            await jp_fetch("gpucost", "api", "cells", method="POST", body=json.dumps(cell(name)))
        deadline = time.monotonic() + 10
        event = first
        while [c["cell_id"] for c in event["panel"]["cells"]] != ["two", "one"]:
            assert time.monotonic() < deadline, event["panel"]["cells"]
            event = await next_panel_event(ws, 5)
        # and the chart's point moves on with the samples
        assert event["panel"]["point"]["t"] > panel["point"]["t"]
    finally:
        ws.close()
