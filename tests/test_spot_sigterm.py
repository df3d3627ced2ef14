"""Kubernetes drains a spot node: the pod's server gets SIGTERM, then SIGKILL after its
grace period. A real server process answers as to a notice (the steps, the ledger's
record), stops itself within the grace period, and the next server on the same ledger
says what the interruption cost."""

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

from jupyter_gpucost.server.ledger import Ledger

GRACE_S = 20


class PodServer:
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
            # what every pod is given
            "KUBERNETES_SERVICE_HOST": "10.96.0.1",
            "KUBERNETES_SERVICE_PORT": "443",
        }
        (tmp / "root").mkdir(parents=True, exist_ok=True)
        self.log_path = tmp / "server.log"
        self.log = self.log_path.open("wb")
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
                "--GpuCost.detect_machine=False",
                "--GpuCost.sample_interval_s=0.2",
                f"--GpuCost.budget_state_path={tmp / 'budget.json'}",
                f"--GpuCost.ledger_url=sqlite:///{ledger}",
                f"--GpuCost.interruption_grace_s={GRACE_S}",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("status")
                return
            except (urllib.error.URLError, ConnectionError):
                assert self.process.poll() is None, self.log_path.read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

    def get(self, route: str) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/gpucost/api/{route}",
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(20)
        self.log.close()


def test_sigterm_in_a_pod_is_an_interruption(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = PodServer(tmp_path / "a", ledger)
    try:
        time.sleep(1.0)  # some cost to count
        session = first.get("status")["session_id"]
        sent = time.monotonic()
        first.process.send_signal(signal.SIGTERM)  # what the kubelet sends the container
        first.process.wait(GRACE_S)
        assert time.monotonic() - sent < GRACE_S, "stopped within the grace period"
    finally:
        first.stop()
    log = first.log_path.read_text()
    assert "SIGTERM: saving before the pod goes" in log
    assert "Spot interruption:" in log
    records = [r for r in Ledger(f"sqlite:///{ledger}").actions() if r["action"] == "interruption"]
    assert len(records) == 1
    record = records[0]
    assert record["session_id"] == session
    assert record["provider"] == "kubernetes"
    assert record["interruption_action"] == "sigterm"
    assert record["session_cost_micro_usd"] > 0
    # no checkpoint was written in this session: all of it is lost
    assert record["lost_micro_usd"] == record["session_cost_micro_usd"]
    steps = {s["name"]: s["state"] for s in record["steps"]}
    assert steps["tell"] == "done"
    assert steps["checkpoint"] == "skipped"
    assert record["message"].startswith("Spot interruption: told: done;")

    second = PodServer(tmp_path / "b", ledger)
    try:
        last = second.get("budget")["interruption"]["last"]
        assert "by Kubernetes (spot):" in last["line"]
        assert last["line"].endswith("since the last checkpoint")
    finally:
        second.process.send_signal(signal.SIGTERM)
        second.process.wait(GRACE_S)
        second.stop()
