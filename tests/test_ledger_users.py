"""A ledger shared by several users' servers (one ``ledger_url`` for a hub): each server
reads its own user's today, month, history, sessions, cells and actions, on SQLite and on
a real PostgreSQL alike."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jupyter_gpucost.server.ledger import GpuMinuteSums, Ledger, Pending, minute_of

NOW = datetime.now(UTC)


def pending(minute: int, cost: int, *, gpu_pct: float) -> Pending:
    p = Pending()
    p.spend[minute] = [cost, 0, 6_880_000]
    p.cost_micro = cost
    p.gpus[(0, minute)] = GpuMinuteSums(gpu_pct, 300.0, 1, 2**30)
    p.last_unix_s = minute + 30
    return p


def spend_as(url: str, user: str | None, session: str, cost: int) -> Ledger:
    """A server of ``user`` that spent ``cost`` micro-dollars this minute."""
    ledger = Ledger(url, tz=ZoneInfo("UTC"), user=user)
    ledger.start_session(session, NOW, user)
    ledger.flush(session, pending(minute_of(NOW.timestamp()), cost, gpu_pct=50.0))
    ledger.add_cell(session, {"cell_id": f"cell-{session}", "ended": NOW.isoformat()})
    ledger.add_action(session, {"at": NOW.isoformat(), "action": "shutdown"})
    return ledger


def test_each_user_reads_only_their_own_rows(ledger_url: str) -> None:
    alice = spend_as(ledger_url, "alice", "s-alice", 5_000_000)
    bob = spend_as(ledger_url, "bob", "s-bob", 7)
    try:
        assert alice.totals(NOW).today_micro == 5_000_000
        assert alice.totals(NOW).month_micro == 5_000_000
        assert alice.totals(NOW).all_time_micro == 5_000_000
        assert bob.totals(NOW).today_micro == 7
        assert bob.totals(NOW).month_micro == 7
        assert bob.totals(NOW).all_time_micro == 7
        assert [s["id"] for s in bob.sessions()] == ["s-bob"]
        assert [d[1] for d in bob.days(NOW)] == [7]
        minute = minute_of(NOW.timestamp())
        assert bob.spend_between(minute, minute + 60) == [(minute, 7, 6_880_000)]
        assert [r[1] for r in bob.session_spend_between(minute, minute + 60)] == ["s-bob"]
        assert bob.sessions_spend_before(["s-alice", "s-bob"], minute + 60) == {
            "s-alice": 0,
            "s-bob": 7,
        }
        assert [r[4] for r in bob.gpu_minutes_between(minute, minute + 60)] == [1]
        assert [c["session_id"] for c in bob.recent_cells()] == ["s-bob"]
        assert [a["session_id"] for a in bob.actions()] == ["s-bob"]
        assert [c["session_id"] for c in alice.recent_cells()] == ["s-alice"]
    finally:
        alice.close()
        bob.close()


def test_without_a_user_every_session_counts_as_before(ledger_url: str) -> None:
    spend_as(ledger_url, "alice", "s-alice", 5_000_000).close()
    spend_as(ledger_url, "bob", "s-bob", 7).close()
    everyone = Ledger(ledger_url, tz=ZoneInfo("UTC"))
    try:
        assert everyone.totals(NOW).today_micro == 5_000_007
        assert {s["id"] for s in everyone.sessions()} == {"s-alice", "s-bob"}
    finally:
        everyone.close()


class TestBobsServerOnAliceSharedLedger:
    """A real server of bob's on the ledger URL alice's sessions are in."""

    @pytest.fixture
    def gpucost_config(self, ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        spend_as(ledger_url, "alice", "s-alice", 50_000_000).close()
        monkeypatch.setenv("JUPYTERHUB_USER", "bob")
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "ledger_url": ledger_url,
            "ledger_flush_interval_s": 0.5,
            "ledger_timezone": "UTC",
        }

    async def test_today_month_and_sessions_are_bobs_own(self, jp_fetch: Any) -> None:
        deadline = time.monotonic() + 20
        while True:
            status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
            if status["today_usd"] is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        # alice's 50 dollars are not bob's: his today is his own few cents
        assert status["today_usd"] is not None
        assert status["today_usd"] < 1
        assert status["month_usd"] < 1
        history = json.loads(
            (await jp_fetch("gpucost", "api", "history", params={"window": "24h"})).body
        )
        ids = [s["id"] for s in history["totals"]["sessions"]]
        assert ids == [status["session_id"]]
        assert all(d["cost_usd"] < 1 for d in history["totals"]["days"])
