"""Which node each running server's pod is on, and that node's ``providerID``, from
kube-state-metrics in the cluster's Prometheus: ``kube_pod_info`` has each pod's ``node``,
``kube_node_info`` each node's ``provider_id``. Kept per session in the hub ledger
(:mod:`..ledger.placement`) for the reconciliation with the cloud's bill.

A pod on a node with no ``providerID`` (kind, bare metal) is not recorded: no bill names it.
The node's instance type (``kube_node_labels``' ``label_node_kubernetes_io_instance_type``,
where the exporter is allowed to export it) is kept with it: the reconciliation takes the
node's GPU count from the catalog by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from ..activity import UserServer
from .promanswer import Vector

POD_INFO = "kube_pod_info"
NODE_INFO = "kube_node_info"
NODE_LABELS = "kube_node_labels"
#: ``node.kubernetes.io/instance-type`` (and its beta name) as kube-state-metrics names it
INSTANCE_TYPE_LABELS = (
    "label_node_kubernetes_io_instance_type",
    "label_beta_kubernetes_io_instance_type",
)


class Asking(Protocol):
    """What is asked of Prometheus (:class:`.prometheus.Prometheus`)."""

    async def query(self, promql: str, at: datetime) -> Vector: ...


def pod_query(namespace: str) -> str:
    """``kube_pod_info`` for the hub's namespace (every namespace when empty)."""
    return f'{POD_INFO}{{namespace="{namespace}"}}' if namespace else POD_INFO


def placements_from(
    pod_info: Vector, node_info: Vector, pods: Mapping[tuple[str, str], UserServer]
) -> dict[UserServer, tuple[str, str]]:
    """server → (node, providerID), for the servers whose pod is in ``pods``
    ((namespace, pod) → server) on a node with a ``providerID``."""
    provider_ids = {
        s.labels.get("node", ""): s.labels.get("provider_id", "")
        for s in node_info.samples
        if s.labels.get("node") and s.labels.get("provider_id")
    }
    found: dict[UserServer, tuple[str, str]] = {}
    for sample in pod_info.samples:
        labels = sample.labels
        key = pods.get((labels.get("namespace", ""), labels.get("pod", "")))
        node = labels.get("node", "")
        if key is None or not node or node not in provider_ids:
            continue
        found[key] = (node, provider_ids[node])
    return found


def instance_types_from(node_labels: Vector) -> dict[str, str]:
    """node → its instance type, where ``kube_node_labels`` has it."""
    found: dict[str, str] = {}
    for sample in node_labels.samples:
        node = sample.labels.get("node", "")
        kind = next((sample.labels[k] for k in INSTANCE_TYPE_LABELS if sample.labels.get(k)), "")
        if node and kind:
            found[node] = kind
    return found


async def read_placements(
    client: Asking, namespace: str, pods: Mapping[tuple[str, str], UserServer], at: datetime
) -> dict[UserServer, tuple[str, str, str]]:
    """server → (node, providerID, instance type or ""), from three instant queries;
    :class:`.prometheus.PrometheusError` on any failure."""
    pod_info = await client.query(pod_query(namespace), at)
    node_info = await client.query(NODE_INFO, at)
    kinds = instance_types_from(await client.query(NODE_LABELS, at))
    return {
        key: (node, provider_id, kinds.get(node, ""))
        for key, (node, provider_id) in placements_from(pod_info, node_info, pods).items()
    }
