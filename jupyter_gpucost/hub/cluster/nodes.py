"""The cluster's nodes and the cloud each runs on, from kube-state-metrics in the cluster's
Prometheus: ``kube_node_info`` carries each node's ``provider_id`` (its ``providerID``:
``gce://project/zone/name``, ``aws:///zone/i-…``, ``azure:///subscriptions/…``), and
``kube_node_labels`` its labels as ``label_<name>`` where the exporter is allowed to
export them (``--metric-labels-allowlist=nodes=[topology.kubernetes.io/region]``): the
region. The decision is :func:`..profiles.cloud.decide`'s.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

from ..profiles.cloud import Node
from .promanswer import Vector
from .prometheus import Prometheus, PrometheusError
from .settings import ClusterSettings

INFO = "kube_node_info"
LABELS = "kube_node_labels"
#: ``topology.kubernetes.io/region`` as kube-state-metrics names it (every character that
#: is not a letter, digit or ``_`` becomes ``_``)
REGION = "label_topology_kubernetes_io_region"
#: providerID schemes of the clouds' node controllers
SCHEMES: tuple[tuple[str, str], ...] = (("gce://", "gcp"), ("aws://", "aws"), ("azure://", "azure"))
#: the most nodes named (one per cloud is enough to decide)
MAX_NODES = 10_000


def provider_of(provider_id: str) -> str | None:
    """The cloud a ``providerID`` names (``None``: another, or none: kind, bare metal)."""
    for scheme, provider in SCHEMES:
        if provider_id.lower().startswith(scheme):
            return provider
    return None


def nodes_from(info: Vector, labels: Vector) -> tuple[Node, ...]:
    """The nodes whose ``providerID`` names a cloud, with their region where exported."""
    regions = {
        s.labels.get("node", ""): s.labels.get(REGION, "")
        for s in labels.samples
        if s.labels.get("node")
    }
    found: dict[str, Node] = {}
    for sample in info.samples[:MAX_NODES]:
        name = sample.labels.get("node", "")
        provider_id = sample.labels.get("provider_id", "")
        provider = provider_of(provider_id)
        if name and provider is not None:
            found[name] = Node(name, provider, provider_id, regions.get(name, ""))
    return tuple(found[n] for n in sorted(found))


async def read_nodes(prometheus: Prometheus, at: datetime) -> tuple[Node, ...]:
    """The nodes, from two instant queries; :class:`PrometheusError` on any failure."""
    info = await prometheus.query(INFO, at)
    labels = await prometheus.query(LABELS, at)
    return nodes_from(info, labels)


def read_nodes_now(settings: ClusterSettings | None) -> tuple[tuple[Node, ...], str]:
    """The nodes at start (in a thread of its own, bounded by the Prometheus timeout), and
    why they could not be read (``""``: read, or no Prometheus is set: nothing to say)."""
    if settings is None:
        return (), ""
    result: list[tuple[tuple[Node, ...], str]] = []

    def run() -> None:
        async def ask() -> tuple[Node, ...]:
            prometheus = Prometheus(settings.url, timeout_s=settings.timeout_s, auth=settings.auth)
            try:
                return await read_nodes(prometheus, datetime.now(UTC))
            finally:
                prometheus.close()

        try:
            result.append((asyncio.run(ask()), ""))
        except PrometheusError as e:
            result.append(((), str(e)))

    thread = threading.Thread(target=run, name="gpucost-nodes", daemon=True)
    thread.start()
    thread.join(2 * settings.timeout_s + 2)
    if not result:
        return (), f"no answer from Prometheus in {settings.timeout_s:g} s"
    return result[0]
