"""The hub's reconciliation, end to end: a real JupyterHub starts alice's and bob's
servers, the gpucost service (its ledger on a real PostgreSQL) reads from a real
Prometheus which node each pod runs on and the node's ``providerID``
(kube-state-metrics' ``kube_pod_info``, ``kube_node_info`` and ``kube_node_labels``, served by a stand-in as
the exporter writes them, beside a stand-in dcgm-exporter), and then
``python -m jupyter_gpucost.hub reconcile`` reads the cloud's FOCUS bill of that node with
the service's own config: alice and bob get their share of each billed hour, and the rest
of the node's hours is unallocated."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import sqlalchemy as sa
from dcgm_exporter_standin import Exporter, Gpu
from focus_bills import EC2_G5, hourly_rows, write_csv
from hub_cluster import NAMESPACE, service_settings
from hub_service_fixture import Hub, running_hub, spawn
from postgres import Postgres
from prometheus_server import Prometheus
from test_hub_cluster_cloud import KubeStateMetrics

NODE = "ip-10-0-12-34.ec2.internal"
#: the node: an EC2 p4d.24xlarge (8 A100-80GB) billed at 0.6 × list
P4D = replace(
    EC2_G5,
    resource_id="i-0d4d5e6f708192a3b",
    instance_type="p4d.24xlarge",
    list_per_hour=Decimal("32.7726"),
    discount=Decimal("0.6"),
)
KSM = (
    "# HELP kube_node_info [STABLE] Information about a cluster node.\n"
    "# TYPE kube_node_info gauge\n"
    f'kube_node_info{{node="{NODE}",kernel_version="6.1.112-124.190.amzn2023.x86_64",'
    'os_image="Amazon Linux 2023.6.20241010",container_runtime_version="containerd://1.7.22",'
    'kubelet_version="v1.31.0-eks-a737599",kubeproxy_version="deprecated",'
    f'provider_id="aws:///us-east-1a/{P4D.resource_id}",pod_cidr="",'
    'system_uuid="ec2a7f3e-1b2c-4d5e-8f90-a1b2c3d4e5f6",internal_ip="10.0.12.34"} 1\n'
    "# HELP kube_node_labels [STABLE] Kubernetes labels converted to Prometheus labels.\n"
    "# TYPE kube_node_labels gauge\n"
    f'kube_node_labels{{node="{NODE}",label_node_kubernetes_io_instance_type="p4d.24xlarge",'
    'label_topology_kubernetes_io_region="us-east-1"} 1\n'
    + "# HELP kube_pod_info [STABLE] Information about pod.\n"
    "# TYPE kube_pod_info gauge\n"
    + "".join(
        f'kube_pod_info{{namespace="{NAMESPACE}",pod="jupyter-{user}",'
        f'uid="0b1c2d3e-0000-4000-8000-00000000000{i}",host_ip="10.0.12.34",'
        f'pod_ip="10.0.12.{50 + i}",node="{NODE}",created_by_kind="<none>",'
        'created_by_name="<none>",priority_class="",host_network="false"} 1\n'
        for i, user in enumerate(("alice", "bob"))
    )
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Prometheus]:
    gpus = [
        Gpu(
            i,
            f"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e5{i}",
            util_pct=80,
            pod=(NAMESPACE, pod, "notebook"),
        )
        for i, pod in enumerate(["jupyter-alice", "jupyter-alice", "jupyter-bob", "jupyter-bob"])
    ]
    exporter = Exporter(NODE, gpus)
    ksm = KubeStateMetrics()
    ksm.text = KSM
    prometheus = Prometheus(
        [
            {
                "job_name": "dcgm",
                "honor_labels": False,
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{exporter.port}"],
                        "labels": {
                            "namespace": "gpu-operator",
                            "pod": "nvidia-dcgm-exporter-7xkq2",
                        },
                    }
                ],
            },
            {
                "job_name": "kube-state-metrics",
                "static_configs": [{"targets": [f"127.0.0.1:{ksm.port}"]}],
            },
        ]
    )
    try:
        prometheus.wait_for("DCGM_FI_DEV_GPU_UTIL", len(gpus))
        prometheus.wait_for("kube_pod_info", 2)
        yield prometheus
    finally:
        prometheus.stop()
        exporter.stop()
        ksm.stop()


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, cluster: Prometheus, postgres: Postgres
) -> Iterator[tuple[Hub, str]]:
    url = postgres.new_database()
    root = tmp_path_factory.mktemp("hubrec")
    extra = service_settings(cluster) + f"c.GpuCostHub.ledger_url = {url!r}\n"
    with running_hub(
        root,
        budgets={},
        service_extra=extra,
        users=("alice", "bob"),
        groups={},
        group_budgets={},
        user_configs={},
    ) as hub:
        yield hub, url


def sessions(url: str) -> list[dict[str, object]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT s.user_name, s.started_us, s.stopped_us, n.node, n.provider_id "
                "FROM hub_servers s JOIN hub_server_nodes n ON n.server_id = s.id "
                "ORDER BY s.user_name"
            )
        ).mappings()
        found = [dict(r) for r in rows]
    engine.dispose()
    return found


def test_the_node_s_bill_goes_to_alice_and_bob_and_the_rest_is_unallocated(
    hub: tuple[Hub, str], tmp_path: Path
) -> None:
    hub_, url = hub
    for user in ("alice", "bob"):
        code, body = spawn(hub_, user)
        assert code in (201, 202), body
    hub_.wait("the service to keep both servers' node", lambda: len(sessions(url)) == 2, 60)
    placed = sessions(url)
    assert [(s["user_name"], s["node"], s["provider_id"]) for s in placed] == [
        ("alice", NODE, f"aws:///us-east-1a/{P4D.resource_id}"),
        ("bob", NODE, f"aws:///us-east-1a/{P4D.resource_id}"),
    ]
    for user in ("alice", "bob"):
        hub_.call("DELETE", f"/users/{user}/server")
    hub_.wait(
        "both sessions to be closed in the ledger",
        lambda: all(s["stopped_us"] is not None for s in sessions(url)),
        60,
    )
    placed = sessions(url)
    # the node's bill: the hours around the sessions, at 0.6 × list
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows = hourly_rows(P4D, now - timedelta(hours=2), 4)
    write_csv(tmp_path / "bill" / "part-0.csv", rows)
    config = hub_.root / "gpucost_hub_config.py"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_gpucost.hub",
            "reconcile",
            str(tmp_path / "bill"),
            "--json",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    hour_micro = int(Decimal(rows[0]["BilledCost"]) * 1_000_000)
    billed = {d["date"]: d for d in document["days"]}
    total = sum(round(d["billed"] * 1_000_000) for d in billed.values())
    assert total == 4 * hour_micro
    # what each held: 2 of the p4d.24xlarge's 8 GPUs (its instance type from the node's
    # label, its GPUs from the catalog), for its time
    assert document["notes"] == []
    expected: dict[str, Fraction] = {}
    for s in placed:
        seconds = Fraction(int(str(s["stopped_us"])) - int(str(s["started_us"])), 1_000_000)
        expected[str(s["user_name"])] = Fraction(hour_micro) * 2 * seconds / (8 * 3600)
    got = {"alice": 0, "bob": 0}
    unallocated = 0
    for day in billed.values():
        for u in day["users"]:
            got[u["user"]] += round(u["billed"] * 1_000_000)
        unallocated += round(day["unallocated"] * 1_000_000)
        assert day["accuracy"] is not None
    for user in ("alice", "bob"):
        assert got[user] > 0
        assert abs(got[user] - expected[user]) <= 2, (user, got, expected)
    # what no session used stays with the node, never spread: all of it adds up exactly
    assert unallocated == 4 * hour_micro - got["alice"] - got["bob"]
    assert unallocated > 3 * hour_micro
    # kept in the hub ledger, the same when read again
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        kept = conn.execute(
            sa.text("SELECT kind, name, billed_micro_usd FROM hub_reconciled ORDER BY 1, 2")
        ).all()
    engine.dispose()
    assert sum(r[2] for r in kept) == 4 * hour_micro
    assert {r[1] for r in kept if r[0] == "user"} == {"alice", "bob"}
    assert {r[1] for r in kept if r[0] == "unallocated"} == {P4D.resource_id}
    # the running service shows the bill beside the estimates: the admin CSV's columns
    # and its unallocated line, and /metrics (checked by promtool where it is installed)
    token = hub_.tokens["prometheus"]
    code, text = hub_.svc("GET", "api/admin/users.csv", token)
    assert code == 200, text
    table = {r["user"]: r for r in csv.DictReader(io.StringIO(text))}
    today = datetime.now(UTC).date()
    in_month = [d for d in billed.values() if d["date"] >= today.replace(day=1).isoformat()]
    month = {"alice": 0, "bob": 0}
    for day in in_month:
        for u in day["users"]:
            month[u["user"]] += round(u["billed"] * 1_000_000)
    for user in ("alice", "bob"):
        assert Decimal(table[user]["billed_usd"]) == Decimal(month[user]) / 1_000_000
        assert table[user]["billed_estimated_usd"]
    idle = table["unallocated (idle nodes)"]
    assert (
        Decimal(idle["billed_usd"])
        == Decimal(sum(round(d["unallocated"] * 1_000_000) for d in in_month)) / 1_000_000
    )
    code, metrics = hub_.svc("GET", "metrics", token)
    assert code == 200
    assert (
        f'gpucost_hub_user_month_billed_usd{{user="alice"}} {month["alice"] / 1e6:.6f}' in metrics
    )
    assert "gpucost_hub_unallocated_month_usd " in metrics
    assert "gpucost_hub_billed_accuracy " in metrics
