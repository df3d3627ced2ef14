"""Kubernetes drains a spot node: the pod's server gets SIGTERM, then SIGKILL after its
grace period. A real server process answers as to a notice (the steps, the ledger's
record), stops itself within the grace period, and the next server on the same ledger
says what the interruption cost. On a node that is not spot, SIGTERM is the user's stop
(or the culler's, or the hub's): recorded as a stop, never as an interruption."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from server_process import ServerProcess

from jupyter_gpucost.cloud.node_capacity import parse_pairs, spot_node
from jupyter_gpucost.server.ledger import Ledger

GRACE_S = 20


#: a Karpenter spot node's label, copied into the pod's labels (a downward API file)
SPOT_LABELS = 'app="jupyterhub"\nkarpenter.sh/capacity-type="spot"\ncomponent="singleuser-server"\n'
#: an on-demand node's
ON_DEMAND_LABELS = 'app="jupyterhub"\nkarpenter.sh/capacity-type="on-demand"\n'


def pod_server(tmp: Path, ledger: Path, labels: str = SPOT_LABELS) -> ServerProcess:
    """A server in a Kubernetes pod (the variables every pod is given), the node's
    capacity label in its downward API labels file."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "labels").write_text(labels)
    return ServerProcess(
        tmp,
        {
            "sample_interval_s": 0.2,
            "budget_state_path": tmp / "budget.json",
            "ledger_url": f"sqlite:///{ledger}",
            "interruption_grace_s": GRACE_S,
        },
        env={
            "KUBERNETES_SERVICE_HOST": "10.96.0.1",
            "KUBERNETES_SERVICE_PORT": "443",
            "GPUCOST_NODE_LABELS_FILE": str(tmp / "labels"),
        },
    )


def test_sigterm_in_a_pod_on_a_spot_node_is_an_interruption(tmp_path: Path) -> None:
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


def test_a_users_stop_in_a_pod_on_a_node_that_is_not_spot_is_a_stop(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    server = pod_server(tmp_path / "a", ledger, ON_DEMAND_LABELS)
    try:
        time.sleep(1.0)
        session = server.get("status")["session_id"]
        # the user stops their server: the hub's spawner deletes the pod, the kubelet
        # sends SIGTERM
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(GRACE_S)
        assert time.monotonic() - sent < GRACE_S
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert "not an interruption" in log
    assert "saving before the pod goes" not in log
    assert "Spot interruption:" not in log
    actions = Ledger(f"sqlite:///{ledger}").actions()
    assert [r for r in actions if r["action"] == "interruption"] == []
    (stop,) = [r for r in actions if r["action"] == "stopped"]
    assert stop["session_id"] == session
    assert stop["signal"] == "SIGTERM"
    # the next server shows no interruption
    second = pod_server(tmp_path / "b", ledger, ON_DEMAND_LABELS)
    try:
        assert second.get("budget")["interruption"]["last"] is None
    finally:
        second.process.send_signal(signal.SIGTERM)
        second.process.wait(GRACE_S)
        second.stop()


@pytest.mark.parametrize(
    ("labels", "spot"),
    [
        ('karpenter.sh/capacity-type="spot"', "karpenter.sh/capacity-type=spot"),
        ('eks.amazonaws.com/capacityType="SPOT"', "eks.amazonaws.com/capacityType=SPOT"),
        ('cloud.google.com/gke-spot="true"', "cloud.google.com/gke-spot=true"),
        ('cloud.google.com/gke-preemptible="true"', "cloud.google.com/gke-preemptible=true"),
        (
            'kubernetes.azure.com/scalesetpriority="spot"',
            "kubernetes.azure.com/scalesetpriority=spot",
        ),
        ('karpenter.sh/capacity-type="on-demand"', None),
        ('eks.amazonaws.com/capacityType="ON_DEMAND"', None),
        ('cloud.google.com/gke-spot="false"', None),
        ('kubernetes.azure.com/scalesetpriority="regular"', None),
        ('app="spot"\nnode.kubernetes.io/instance-type="g5.xlarge"', None),
        ("", None),
    ],
)
def test_the_node_is_spot_by_its_label(tmp_path: Path, labels: str, spot: str | None) -> None:
    # as a downward API file writes them, and as a spawner's variable
    (tmp_path / "labels").write_text(labels + "\n")
    assert spot_node({"GPUCOST_NODE_LABELS_FILE": str(tmp_path / "labels")}) == spot
    pairs = ",".join(line.replace('"', "") for line in labels.splitlines())
    assert spot_node({"GPUCOST_NODE_LABELS_FILE": "", "GPUCOST_NODE_LABELS": pairs}) == spot


def test_no_labels_anywhere_is_not_spot(tmp_path: Path) -> None:
    missing = str(tmp_path / "none")
    assert spot_node({"GPUCOST_NODE_LABELS_FILE": missing}) is None
    assert parse_pairs('a="x\\"y",b') == {"a": 'x"y'}


def test_a_sigterm_during_the_budgets_own_stop_or_after_the_hubs_stop_time_is_a_stop() -> None:
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace
    from typing import cast

    from jupyter_gpucost.server.spot.interruption import NoticeResponder, sigterm_is_interruption

    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def responder(
        state: str, deadline: datetime | None = None, current: object = None
    ) -> NoticeResponder:
        policy = SimpleNamespace(state=state, deadline=deadline)
        fake = SimpleNamespace(task=None, current=current, budget=SimpleNamespace(policy=policy))
        return cast(NoticeResponder, fake)

    def spot() -> str:
        return "karpenter.sh/capacity-type=spot"

    # on a spot node, a SIGTERM out of the blue is the node taken back
    assert sigterm_is_interruption(responder("ok"), spot, now) == spot()
    # but not while the budget's own stop runs, nor once the hub's stop time has come
    assert sigterm_is_interruption(responder("enforcing"), spot, now) is None
    assert sigterm_is_interruption(responder("acted"), spot, now) is None
    hub_stop = now - timedelta(seconds=1)
    assert sigterm_is_interruption(responder("grace", hub_stop), spot, now) is None
    assert sigterm_is_interruption(responder("grace", now + timedelta(minutes=1)), spot, now)
    # a notice already seen says so whatever the labels
    assert sigterm_is_interruption(responder("ok", current={}), lambda: None, now) == "a notice"
    assert sigterm_is_interruption(responder("ok"), lambda: None, now) is None
