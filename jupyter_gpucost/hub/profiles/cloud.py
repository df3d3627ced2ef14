"""Which cloud the hub's servers run on, read from its own profile list: the node labels
its pods select (``cloud.google.com/…`` on GKE, ``eks.amazonaws.com/…`` and
``karpenter.k8s.aws/…`` on EKS, ``kubernetes.azure.com/…`` and ``karpenter.azure.com/…``
on AKS, ``alibabacloud.com/…`` on ACK) and the machine types they name
(``a2-highgpu-1g``, ``g4dn.xlarge``, ``Standard_NC24ads_A100_v4``,
``ecs.gn7i-c8g1.2xlarge``; a type with a whole-instance row in the catalog is that row's
provider).

``c.GpuCostHub.price_provider`` unset (``""``) is detected from these; a profile list that
names machines of two clouds is refused, and so is a provider the profiles contradict
(a GKE machine type priced at AWS's rates): nothing is priced at another cloud's rate
silently. Where nothing names a cloud (no profile list, or none of these), the service
does not guess: it asks for the setting by name.

The cluster is a second signal (:class:`Node`, read by :mod:`..cluster.nodes` from
kube-state-metrics): each node's ``providerID`` names its cloud (``gce://`` GCP,
``aws://`` AWS, ``azure://`` Azure) and its ``topology.kubernetes.io/region`` label the
region. Nodes of two clouds, or a cluster on another cloud than the profiles or the
setting say, are refused by name; where the profiles name no cloud, the cluster's decides.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from ...core.instance_prices import InstanceRow
from ..model import HubConfigError
from .gpu_labels import INSTANCE_LABELS
from .kubespawner import (
    OptionsRefused,
    ProfileListError,
    State,
    Unreadable,
    every_selection,
    initialized,
    load,
)
from .table import ProfileSource

PROVIDER_SETTING = "c.GpuCostHub.price_provider"
#: the node label of a node's region (Kubernetes' well-known labels)
REGION_LABEL = "topology.kubernetes.io/region"

#: label prefixes only one cloud's nodes carry (``karpenter.sh/`` is on every cloud)
LABEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("cloud.google.com/", "gcp"),
    ("eks.amazonaws.com/", "aws"),
    ("karpenter.k8s.aws/", "aws"),
    ("kubernetes.azure.com/", "azure"),
    ("karpenter.azure.com/", "azure"),
    # Alibaba Cloud's ACK: its node labels and GPU labels
    ("alibabacloud.com/", "alibaba"),
    ("aliyun.accelerator/", "alibaba"),
)

#: machine type names as each cloud writes them
_AWS_TYPE = re.compile(
    r"[a-z][a-z0-9-]*\d[a-z0-9-]*\.(?:nano|micro|small|medium|\d*x?large|metal(?:-\d+xl)?)"
)
_GCP_TYPE = re.compile(
    r"(?:a2|a3|a4|a4x|g2|g4|n1|n2|n2d|n4|c2|c2d|c3|c3d|c4|c4a|c4d|e2|m1|m2|m3|m4|t2a|t2d|"
    r"h3|z3|ct5lp|ct5p|ct6e)-[a-z]+(?:-[a-z0-9]+)*"
)
_AZURE_TYPE = re.compile(r"Standard_[A-Za-z0-9_]+")
_ALIBABA_TYPE = re.compile(r"ecs\.[a-z0-9-]+\.\d*x?large")
_LAMBDA_TYPE = re.compile(r"gpu_\d+x_[a-z0-9_]+")
TYPE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_AZURE_TYPE, "azure"),
    (_ALIBABA_TYPE, "alibaba"),
    (_LAMBDA_TYPE, "lambda"),
    (_AWS_TYPE, "aws"),
    (_GCP_TYPE, "gcp"),
)


@dataclass(frozen=True)
class Signal:
    """One thing in the profile list that names a cloud, and where it was read."""

    provider: str
    where: str


@dataclass(frozen=True)
class Cloud:
    """The provider whose prices apply, and why (for check-profiles and the start's log)."""

    provider: str
    why: str
    #: the region the cluster's nodes say (``""``: not known, or several)
    region: str = ""


@dataclass(frozen=True)
class Node:
    """One node of the cluster: the cloud its ``providerID`` names, and its region."""

    name: str
    provider: str
    provider_id: str
    #: its ``topology.kubernetes.io/region`` label (``""``: not exported)
    region: str = ""

    @property
    def where(self) -> str:
        return f"node {self.name}: providerID {self.provider_id}"


def instance_provider(instance: str, rows: Sequence[InstanceRow]) -> str | None:
    """The cloud a machine type belongs to: its catalog row's, else its name's shape."""
    for row in rows:
        if row.instance == instance:
            return row.provider
    for pattern, provider in TYPE_PATTERNS:
        if pattern.fullmatch(instance):
            return provider
    return None


def signals(source: ProfileSource, rows: Sequence[InstanceRow]) -> list[Signal]:
    """Every label and machine type in the profile list (and the spawner's own settings)
    that names a cloud, once each."""
    if isinstance(source.profiles, Unreadable):
        states: list[tuple[str, State]] = [("c.KubeSpawner", load({}, [], source.base)[1])]
    else:
        try:
            profiles = initialized(source.profiles)
            states = []
            for options in every_selection(profiles):
                try:
                    selection, state = load(options, profiles, source.base, checked=False)
                except (OptionsRefused, ProfileListError):
                    continue
                states.append((f"profile {selection.slug!r}", state))
        except ProfileListError:
            states = [("c.KubeSpawner", load({}, [], source.base)[1])]
    found: dict[tuple[str, str], Signal] = {}
    for who, state in states:
        for key, value, where in _labels(state):
            signal = _signal(key, value, rows)
            if signal is not None:
                found.setdefault((signal, where), Signal(signal, f"{who}: {where}"))
    return list(found.values())


def _signal(key: str, value: object, rows: Sequence[InstanceRow]) -> str | None:
    for prefix, provider in LABEL_PREFIXES:
        if key.startswith(prefix):
            return provider
    if key in INSTANCE_LABELS and isinstance(value, str):
        return instance_provider(value, rows)
    return None


def _labels(state: State) -> Iterator[tuple[str, object, str]]:
    """The node labels a pod's settings select: (key, value, where it was read)."""
    selector = state.get("node_selector")
    if isinstance(selector, Mapping):
        for key, value in selector.items():
            yield str(key), value, f"node_selector {key}={value}"
    for key, value in state.items():
        if "/" in key:  # a label written directly under kubespawner_override
            yield key, value, f"kubespawner_override {key}={value}"
    affinity = state.get("node_affinity_required")
    if isinstance(affinity, Sequence) and not isinstance(affinity, str):
        for term in affinity:
            expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
            if not isinstance(expressions, Sequence):
                continue
            for e in expressions:
                if not isinstance(e, Mapping) or not isinstance(e.get("key"), str):
                    continue
                values = e.get("values")
                listed = values if isinstance(values, Sequence) and values else [None]
                for v in listed if not isinstance(listed, str) else [listed]:
                    yield str(e["key"]), v, f"node_affinity_required {e['key']} {v}"


def decide(
    configured: str,
    found: Sequence[Signal],
    providers: Sequence[str],
    unreadable: str = "",
    nodes: Sequence[Node] = (),
    nodes_unread: str = "",
) -> Cloud:
    """The provider to price at (:func:`_decide`: from the setting and the profiles),
    checked against the cluster's ``nodes``, which decide where nothing else names a
    cloud; with the region the nodes say. ``nodes_unread``: why the nodes were not read
    (said in the reason, not refused)."""
    by_cloud: dict[str, list[Node]] = {}
    for node in nodes:
        by_cloud.setdefault(node.provider, []).append(node)
    if len(by_cloud) > 1:
        named = "; ".join(f"{p} ({n[0].where})" for p, n in sorted(by_cloud.items()))
        raise HubConfigError(
            f"the cluster's nodes run on several clouds: {named}. Set {PROVIDER_SETTING} and "
            "price the other nodes' profiles with c.GpuCostHub.profile_gpus"
        )
    cluster = next(iter(by_cloud.items()), None)
    if cluster is not None and not configured and not found:
        provider, on = cluster
        cloud = Cloud(provider, f"detected from the cluster: {_first([n.where for n in on])}")
    else:
        cloud = _decide(configured, found, providers, unreadable)
    if cluster is not None and cluster[0] != cloud.provider:
        provider, on = cluster
        raise HubConfigError(
            f"prices of {cloud.provider} ({cloud.why}), but the cluster's nodes run on "
            f"{provider} ({on[0].where}): set {PROVIDER_SETTING} = {provider!r} and price the "
            "profiles of that cloud; nothing is priced at another cloud's rates"
        )
    if cluster is not None and not cloud.why.startswith("detected from the cluster"):
        cloud = replace(cloud, why=f"{cloud.why}; the cluster agrees ({cluster[1][0].where})")
    elif nodes_unread:
        cloud = replace(cloud, why=f"{cloud.why}; the cluster's nodes not read: {nodes_unread}")
    return _with_region(cloud, nodes)


def _with_region(cloud: Cloud, nodes: Sequence[Node]) -> Cloud:
    """The region the nodes' ``topology.kubernetes.io/region`` labels say, and why."""
    regions: dict[str, list[str]] = {}
    for node in nodes:
        if node.region:
            regions.setdefault(node.region, []).append(node.name)
    if len(regions) == 1:
        (region, names), *_ = regions.items()
        why = f"{cloud.why}; region {region} (node {names[0]}: {REGION_LABEL})"
        return replace(cloud, region=region, why=why)
    if len(regions) > 1:
        named = ", ".join(f"{r} (node {n[0]})" for r, n in sorted(regions.items()))
        return replace(cloud, why=f"{cloud.why}; nodes in several regions: {named}")
    return cloud


def _decide(
    configured: str, found: Sequence[Signal], providers: Sequence[str], unreadable: str = ""
) -> Cloud:
    """The provider to price at: ``configured`` (checked against what the profiles say),
    or the one cloud they name; :class:`HubConfigError` naming the conflict, or asking for
    the setting where nothing names a cloud (``unreadable``: why the list could not be
    read for it)."""
    clouds: dict[str, list[str]] = {}
    for s in found:
        clouds.setdefault(s.provider, []).append(s.where)
    if len(clouds) > 1:
        named = "; ".join(f"{p} ({_first(w)})" for p, w in sorted(clouds.items()))
        raise HubConfigError(
            f"the profile list names machines of several clouds: {named}. A hub's servers "
            f"run on one: set {PROVIDER_SETTING}, and price the other profiles with "
            "c.GpuCostHub.profile_gpus"
        )
    if configured:
        if clouds and configured not in clouds:
            (other, wheres), *_ = clouds.items()
            raise HubConfigError(
                f"{PROVIDER_SETTING} = {configured!r}, but the profile list runs on {other} "
                f"({_first(wheres)}): set {PROVIDER_SETTING} = {other!r}, or leave it unset "
                "to take the profiles' cloud; nothing is priced at another cloud's rates"
            )
        why = f"{PROVIDER_SETTING} = {configured!r}"
        if clouds:
            why += f", as the profiles say ({_first(clouds[configured])})"
        return Cloud(configured, why)
    if not clouds and unreadable:
        raise HubConfigError(
            f"{PROVIDER_SETTING} is not set, and the cloud cannot be read from the profiles "
            f"({unreadable}): set it to one of {', '.join(providers)}"
        )
    if not clouds:
        raise HubConfigError(
            f"{PROVIDER_SETTING} is not set and nothing in the profiles names a cloud (no "
            "cloud.google.com/, eks.amazonaws.com/, karpenter.k8s.aws/ or "
            "kubernetes.azure.com/ label, no machine type): set it to one of "
            f"{', '.join(providers)}; the service does not guess whose prices apply"
        )
    (provider, wheres), *_ = clouds.items()
    return Cloud(provider, f"detected from the profiles: {_first(wheres)}")


def _first(wheres: Sequence[str]) -> str:
    more = len(wheres) - 1
    return wheres[0] + (f", and {more} more" if more else "")
