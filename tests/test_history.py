"""The history's cost against the status, on a real server with simulated GPUs."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.server.ledger import Ledger, Pending
from jupyter_gpucost.server.record.history import from_ledger

WINDOWS = ("15m", "1h", "24h", "7d")


async def get(jp_fetch: Any, route: str, **params: str) -> dict[str, Any]:
    return json.loads((await jp_fetch("gpucost", "api", route, params=params)).body)


class TestCumulativeCost:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        # one sample a second: the reads below fit between two samples
        return {"telemetry": "simulated", "sample_interval_s": 1.0}

    async def test_every_window_ends_at_the_status_cost_minimum_charge_included(
        self, jp_fetch: Any
    ) -> None:
        for _ in range(50):
            await asyncio.sleep(0.3)
            before = await get(jp_fetch, "status")
            windows = {w: await get(jp_fetch, "history", window=w) for w in WINDOWS}
            after = await get(jp_fetch, "status")
            if before["as_of"] == after["as_of"] and before["samples"] >= 3:
                break
        else:
            pytest.fail("no two status reads saw the same sample")
        status = after
        # a few seconds into the session: most of the cost is the 60 s minimum charge
        assert status["billing_adjustment_usd"] > 0
        assert status["elapsed_s"] < 60
        minimum = round(status["rate_usd_per_hour"] * 60 / 3600, 6)
        assert windows["15m"]["source"] == "memory"
        assert windows["24h"]["source"] == "ledger"
        for window, history in windows.items():
            points = history["points"]
            assert points, window
            # the chart's cumulative line ends at the status bar's number
            assert points[-1]["cost_usd"] == status["cost_usd"], window
            # billed from the first point on: never $0 while the minimum charge is due
            assert points[0]["cost_usd"] >= minimum, window
            costs = [p["cost_usd"] for p in points]
            assert costs == sorted(costs), window
        # the ring's points are the status of their time
        last = windows["15m"]["points"][-1]
        assert datetime.fromisoformat(last["t"]) == datetime.fromisoformat(status["as_of"])


def test_ledger_points_carry_the_cost_of_the_session_live_then(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}", tz=UTC)
    t0 = 1_800_000_000  # a whole minute
    ledger.start_session("old", datetime.fromtimestamp(t0, UTC), None)
    old = Pending()
    old.spend = {t0: [500, 0, 6_000_000], t0 + 60: [100, 0, 6_000_000]}
    ledger.flush("old", old)
    ledger.start_session("new", datetime.fromtimestamp(t0 + 600, UTC), None)
    new = Pending()
    new.spend = {t0 + 600: [300, 0, 3_000_000], t0 + 660: [50, 0, 3_000_000]}
    ledger.flush("new", new)
    # a window starting after the old session's first minute still carries its whole cost
    points = from_ledger(ledger, t0 + 60, t0 + 720, 60, [], "new")
    assert [p["cost_usd"] for p in points] == [0.0006, 0.0003, 0.00035]
    assert [p["rate_usd_per_hour"] for p in points] == [6.0, 3.0, 3.0]
    ledger.close()
