"""Kubernetes drains a spot node: the pod's server gets SIGTERM, then SIGKILL after its
grace period. A real server process answers as to a notice (the steps, the ledger's
record), stops itself within the grace period, and the next server on the same ledger
says what the interruption cost."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from server_process import ServerProcess

from jupyter_gpucost.server.ledger import Ledger

GRACE_S = 20


def pod_server(tmp: Path, ledger: Path) -> ServerProcess:
    """A server in a Kubernetes pod (the variables every pod is given)."""
    return ServerProcess(
        tmp,
        {
            "sample_interval_s": 0.2,
            "budget_state_path": tmp / "budget.json",
            "ledger_url": f"sqlite:///{ledger}",
            "interruption_grace_s": GRACE_S,
        },
        env={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
    )


def test_sigterm_in_a_pod_is_an_interruption(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = pod_server(tmp_path / "a", ledger)
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

    second = pod_server(tmp_path / "b", ledger)
    try:
        last = second.get("budget")["interruption"]["last"]
        assert "by Kubernetes (spot):" in last["line"]
        assert last["line"].endswith("since the last checkpoint")
    finally:
        second.process.send_signal(signal.SIGTERM)
        second.process.wait(GRACE_S)
        second.stop()
