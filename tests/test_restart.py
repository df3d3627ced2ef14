"""Kill the server hard mid-session, start it again: totals resume from the ledger."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

FLUSH_S = 0.5
SAMPLE_S = 0.2
RATE_USD_PER_S = 2 * 3.431 / 3600  # the simulated demo: 2x A100-80GB


class Server:
    def __init__(self, tmp: Path, ledger: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.token = secrets.token_hex(16)
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(tmp / "config"),
            "JUPYTER_DATA_DIR": str(tmp / "data"),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        }
        (tmp / "root").mkdir(parents=True, exist_ok=True)
        self.log = (tmp / f"server-{self.port}.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                "--no-browser",
                "--allow-root",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={tmp / 'root'}",
                "--ServerApp.jpserver_extensions={'jupyter_gpucost': True}",
                "--GpuCost.telemetry=simulated",
                # no metadata service is ever asked, whatever machine runs the tests
                "--GpuCost.detect_machine=False",
                "--GpuCost.minimum_charge_s=0",
                f"--GpuCost.sample_interval_s={SAMPLE_S}",
                f"--GpuCost.ledger_url=sqlite:///{ledger}",
                f"--GpuCost.ledger_flush_interval_s={FLUSH_S}",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("status")
                return
            except (urllib.error.URLError, ConnectionError):
                assert self.process.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

    def get(self, route: str, **params: str) -> Any:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/gpucost/api/{route}?{query}",
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def kill(self, sig: int) -> None:
        os.killpg(self.process.pid, sig)
        self.process.wait(20)
        self.log.close()


def sessions(server: Server) -> dict[str, dict[str, Any]]:
    totals = server.get("history", window="24h")["totals"]["sessions"]
    return {s["id"]: s for s in totals}


def test_a_hard_kill_loses_at_most_one_flush_and_counts_nothing_twice(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = Server(tmp_path / "a", ledger)
    time.sleep(3)
    before = first.get("status")
    assert before["all_time_usd"] == pytest.approx(before["cost_usd"], abs=2e-6)
    first.kill(signal.SIGKILL)  # no chance to flush or close the session

    second = Server(tmp_path / "b", ledger)
    try:
        after = second.get("status")
        old = sessions(second)[before["session_id"]]
        assert old["ended"] is None  # it never closed
        lost = before["all_time_usd"] - old["cost_usd"]
        # never more than what one flush period (plus the sample in flight) was worth
        assert 0 <= lost <= RATE_USD_PER_S * (FLUSH_S + 2 * SAMPLE_S) + 2e-6, lost
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
    third = Server(tmp_path / "c", ledger)
    try:
        closed = sessions(third)[final["session_id"]]
        assert closed["ended"] is not None
        assert closed["cost_usd"] >= final["cost_usd"]
        assert len(sessions(third)) == 3
    finally:
        third.kill(signal.SIGTERM)
