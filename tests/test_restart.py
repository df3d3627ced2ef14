"""Kill the server hard mid-session, start it again: totals resume from the ledger."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from server_process import ServerProcess

FLUSH_S = 0.5
SAMPLE_S = 0.2
RATE_USD_PER_S = 2 * 3.431 / 3600  # the simulated demo: 2x A100-80GB


def start_server(tmp: Path, ledger: Path) -> ServerProcess:
    return ServerProcess(
        tmp,
        {
            "minimum_charge_s": 0,
            "sample_interval_s": SAMPLE_S,
            "ledger_url": f"sqlite:///{ledger}",
            "ledger_flush_interval_s": FLUSH_S,
        },
    )


def sessions(server: ServerProcess) -> dict[str, dict[str, Any]]:
    totals = server.get("history", window="24h")["totals"]["sessions"]
    return {s["id"]: s for s in totals}


def test_a_hard_kill_loses_at_most_one_flush_and_counts_nothing_twice(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = start_server(tmp_path / "a", ledger)
    time.sleep(3)
    before = first.get("status")
    assert before["all_time_usd"] == pytest.approx(before["cost_usd"], abs=2e-6)
    first.kill(signal.SIGKILL)  # no chance to flush or close the session

    second = start_server(tmp_path / "b", ledger)
    try:
        after = second.get("status")
        old = sessions(second)[before["session_id"]]
        assert old["ended"] is None  # it never closed
        lost = before["all_time_usd"] - old["cost_usd"]
        # never more than what was counted since the last flush, as the server said when it
        # was asked (plus the sample in flight): one flush period's worth when the flusher
        # runs on time, more only when a busy machine ran it late (docs/ledger.md)
        unwritten = before["ledger"]["unwritten_micro"] / 1_000_000
        assert 0 <= lost <= unwritten + RATE_USD_PER_S * SAMPLE_S + 2e-6, (lost, before["ledger"])
        # the new session starts from what the ledger kept; nothing counted twice
        assert after["session_id"] != before["session_id"]
        assert after["all_time_usd"] == pytest.approx(old["cost_usd"] + after["cost_usd"], abs=2e-6)
        assert after["today_usd"] == pytest.approx(after["all_time_usd"], abs=2e-6)
        time.sleep(1.5)
        later = second.get("status")
        assert later["all_time_usd"] > after["all_time_usd"]  # it goes on from there
        final = later
    finally:
        second.kill(signal.SIGTERM)

    # a clean stop writes everything and closes the session
    third = start_server(tmp_path / "c", ledger)
    try:
        closed = sessions(third)[final["session_id"]]
        assert closed["ended"] is not None
        assert closed["cost_usd"] >= final["cost_usd"]
        assert len(sessions(third)) == 3
    finally:
        third.kill(signal.SIGTERM)
