"""Where each hub server session ran: the node and its ``providerID`` (the cloud's
instance) as kube-state-metrics says them, kept per session in the hub ledger, old ledgers
too (SQLite and a real PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

import sqlalchemy as sa
from focus_bills import EC2_G5, GCP_A2, day_start

from jupyter_gpucost.hub.cluster.placement import (
    instance_types_from,
    placements_from,
    pod_query,
)
from jupyter_gpucost.hub.cluster.promanswer import Sample, Vector
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.placement import Placement, PlacementLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo
from jupyter_gpucost.hub.reconcile.nodes import billed_machine, instance_id

T = day_start("2026-11-24")
#: the stand-in EC2 g5.xlarge as its node's providerID says it
G5_PROVIDER_ID = f"aws:///us-east-1a/{EC2_G5.resource_id}"
#: the g5.xlarge's one A10G, time-sliced two ways: each pod has half of it, at half its
#: list price an hour
HALF_A10G = Rate(
    GpuAllocation(
        "A10G", 1, Fraction(1, 2), "time-sliced 2 ways", instance="g5.xlarge", instance_gpus=1
    ),
    Decimal("0.503"),
    "test price",
)


def two_users(url: str) -> HubLedger:
    """alice on the g5 from 09:00 to 11:00, bob from 10:00 to 12:00, each half its GPU;
    carol on a node with no cloud's providerID."""
    ledger = HubLedger(url)
    places = []
    for user, start, node, pid in (
        ("alice", 9, "gpu-1", G5_PROVIDER_ID),
        ("bob", 10, "gpu-1", G5_PROVIDER_ID),
        ("carol", 9, "kind-1", "kind://docker/kind/kind-1"),
    ):
        started = T + timedelta(hours=start)
        row = ledger.open_server(ServerInfo(user, "", started, True, profile="a10g"), HALF_A10G)
        places.append(Placement(row.server_id, user, node, pid, started + timedelta(minutes=1)))
        ledger.close_server(row.server_id, started + timedelta(hours=2))
    ledger.flush(T + timedelta(hours=13))
    PlacementLedger(ledger.engine).record(places)
    # seen again: one row still, its last sighting moved
    PlacementLedger(ledger.engine).record([replace(places[0], seen=T + timedelta(hours=10))])
    return ledger


# -- the node's providerID as the bill names it -----------------------------------------


def test_a_provider_id_names_the_cloud_s_instance() -> None:
    assert instance_id("aws:///us-east-1a/i-0abc123def4567890") == "i-0abc123def4567890"
    aws = billed_machine("aws:///us-east-1a/i-0abc123def4567890")
    assert aws is not None
    assert aws.region == "us-east-1"
    assert aws.names("i-0abc123def4567890")
    assert aws.names("arn:aws:ec2:us-east-1:123456789012:instance/i-0abc123def4567890")
    assert not aws.names("i-0abc123def4567891")
    gce = billed_machine("gce://my-project/us-central1-a/train-a2")
    assert gce is not None
    assert gce.region == "us-central1"
    assert gce.names(GCP_A2.resource_id)
    # the same name in another project is another machine
    assert not gce.names(GCP_A2.resource_id.replace("my-project", "their-project"))
    azure = billed_machine(
        "azure:///subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourceGroups/rg-ml"
        "/providers/Microsoft.Compute/virtualMachines/nc-a100-1"
    )
    assert azure is not None
    # the exports write it in lower case
    assert azure.names(
        "/subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourcegroups/rg-ml"
        "/providers/microsoft.compute/virtualmachines/nc-a100-1"
    )
    # a scale set's node (AKS) is billed as the whole set, its resource group in lower case
    scale_set = billed_machine(
        "azure:///subscriptions/s/resourceGroups/MC_rg_aks_eastus/providers/Microsoft.Compute"
        "/virtualMachineScaleSets/aks-gpu-123-vmss/virtualMachines/0"
    )
    assert scale_set is not None
    assert scale_set.scale_set
    assert scale_set.names(
        "/subscriptions/s/resourcegroups/mc_rg_aks_eastus/providers/microsoft.compute"
        "/virtualmachinescalesets/aks-gpu-123-vmss"
    )
    assert not scale_set.names(
        "/subscriptions/s/resourcegroups/mc_rg_aks_eastus/providers/microsoft.compute"
        "/virtualmachines/aks-gpu-123-vmss"
    )
    assert not scale_set.names(
        "/subscriptions/s/resourcegroups/other/providers/microsoft.compute"
        "/virtualmachinescalesets/aks-gpu-123-vmss"
    )
    # kind and bare metal are no cloud's
    assert billed_machine("kind://docker/kind/kind-control-plane") is None
    assert instance_id("") == ""


def test_the_poll_finds_each_server_s_node_and_provider_id() -> None:
    pods = Vector(
        (
            Sample({"namespace": "jhub", "pod": "jupyter-alice", "node": "gpu-1"}, 1.0),
            Sample({"namespace": "jhub", "pod": "jupyter-bob", "node": "kind-1"}, 1.0),
            Sample({"namespace": "other", "pod": "jupyter-alice", "node": "gpu-2"}, 1.0),
        )
    )
    nodes = Vector(
        (
            Sample({"node": "gpu-1", "provider_id": G5_PROVIDER_ID}, 1.0),
            Sample({"node": "kind-1", "provider_id": ""}, 1.0),
        )
    )
    wanted = {("jhub", "jupyter-alice"): ("alice", ""), ("jhub", "jupyter-bob"): ("bob", "")}
    assert placements_from(pods, nodes, wanted) == {("alice", ""): ("gpu-1", G5_PROVIDER_ID)}
    assert pod_query("jhub") == 'kube_pod_info{namespace="jhub"}'
    # the node's instance type, where kube-state-metrics exports its label
    labels = Vector(
        (
            Sample(
                {"node": "gpu-1", "label_node_kubernetes_io_instance_type": "p4d.24xlarge"}, 1.0
            ),
            Sample({"node": "gpu-2", "label_beta_kubernetes_io_instance_type": "g5.xlarge"}, 1.0),
            Sample({"node": "kind-1"}, 1.0),
        )
    )
    assert instance_types_from(labels) == {"gpu-1": "p4d.24xlarge", "gpu-2": "g5.xlarge"}


def test_the_node_s_instance_type_is_kept_by_its_provider_id(ledger_url: str) -> None:
    ledger = two_users(ledger_url)
    placed = PlacementLedger(ledger.engine)
    (alice, *_) = placed.sessions(T, T + timedelta(days=1))
    assert alice.instance_type == ""
    seen = Placement(alice.row.server_id, "alice", "gpu-1", G5_PROVIDER_ID, T, "g5.xlarge")
    placed.record([seen])
    assert {
        s.instance_type for s in placed.sessions(T, T + timedelta(days=1)) if s.node == "gpu-1"
    } == {"g5.xlarge"}
    ledger.close()


# -- the ledger -------------------------------------------------------------------------


def test_an_old_ledger_gets_the_new_tables_and_keeps_its_sessions(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(ServerInfo("alice", "", T, True), HALF_A10G)
    ledger.close_server(row.server_id, T + timedelta(hours=1))
    ledger.flush(T + timedelta(hours=2))
    with ledger.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE hub_server_nodes"))
        conn.execute(sa.text("DROP TABLE hub_reconciled"))
    ledger.close()
    # a ledger written before these tables: opened, they are added; its bill is as it was
    again = HubLedger(ledger_url)
    assert {"hub_server_nodes", "hub_reconciled"} <= set(sa.inspect(again.engine).get_table_names())
    assert again.daily(T.date()) == [(T.date(), "alice", 503_000)]
    assert PlacementLedger(again.engine).sessions(T, T + timedelta(days=1)) == []
    again.close()


def test_each_session_s_node_is_kept(ledger_url: str) -> None:
    ledger = two_users(ledger_url)
    placed = PlacementLedger(ledger.engine).sessions(T, T + timedelta(days=1))
    assert [(p.row.user, p.node, p.provider_id) for p in placed] == [
        ("alice", "gpu-1", G5_PROVIDER_ID),
        ("bob", "gpu-1", G5_PROVIDER_ID),
        ("carol", "kind-1", "kind://docker/kind/kind-1"),
    ]
    assert placed[0].last_seen == T + timedelta(hours=10)
    assert placed[0].row.rate.allocation.share == Fraction(1, 2)
    ledger.close()
