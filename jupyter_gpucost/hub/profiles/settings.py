"""The allocation policy from the admin's settings: ``profile_gpus``, ``default_gpu`` and,
with ``profiles_from``, the hub's own KubeSpawner profile list priced
(:mod:`~.table`). Used at the service's start and by ``check-profiles``.

Reads the profile file and the catalog's whole-instance rows (blocking, once at start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ...core.attached_gpus import load_vm_rows
from ...core.catalog import CatalogError, PricePolicy
from ...core.instance_prices import load_instance_rows
from ..allocation import AllocationPolicy
from ..model import HubConfigError, Rate
from . import source as profile_source
from .cloud import Cloud, Node, decide, signals
from .gpu_labels import GPU_RESOURCE
from .gpus import SHARED_RESOURCE, SHARING_SETTING, Prices
from .kubespawner import Unreadable
from .table import ProfileSource, ProfileTable


@dataclass(frozen=True)
class ProfileSettings:
    """The settings that decide each server's allocation, read once from the traits."""

    prices: PricePolicy
    #: ``c.GpuCostHub.profiles_from``: its file, or its values files in Helm's order
    #: (empty when unset)
    profiles_from: str | tuple[str, ...] = ()
    #: ``c.GpuCostHub.profile_gpus`` as written (a dict, a callable or None)
    profile_gpus: object = None
    #: ``c.GpuCostHub.default_gpu`` as written
    default_gpu: object = None
    #: ``c.GpuCostHub.gpu_sharing``: resource or ``label=value`` → clients per GPU
    gpu_sharing: Mapping[str, int] = field(default_factory=dict)
    #: the cluster's nodes and their clouds, read from its Prometheus (:mod:`..cluster.nodes`)
    nodes: tuple[Node, ...] = ()
    #: why the nodes could not be read (``""``: read, or no Prometheus is set)
    nodes_unread: str = ""


@dataclass(frozen=True)
class Allocations:
    """The policy, and the derived table when ``profiles_from`` is set (for check-profiles
    and the start's log line)."""

    policy: AllocationPolicy
    #: the prices in force, their provider resolved (:func:`resolved`)
    prices: PricePolicy
    #: which cloud's prices, and why
    cloud: Cloud
    table: ProfileTable | None = None
    source: ProfileSource | None = None


def derived_prices(policy: PricePolicy, gpu_sharing: Mapping[str, int] | None = None) -> Prices:
    try:
        rows = load_instance_rows()
        vms = load_vm_rows()
    except CatalogError as e:
        raise HubConfigError(f"the price catalog: {e}") from None
    return Prices(policy=policy, instances=rows, gpu_sharing=dict(gpu_sharing or {}), vms=vms)


def resolved(
    settings: ProfileSettings, source: ProfileSource | None = None
) -> tuple[ProfileSettings, Cloud]:
    """``settings`` with the provider whose prices apply: ``price_provider`` checked
    against the cloud the profile list names, or that cloud where it is unset
    (:mod:`.cloud`); :class:`HubConfigError` for a conflict, or nothing to go by.
    ``source``: the profile list already read from ``profiles_from`` (else read here)."""
    found = []
    unreadable = ""
    if settings.profiles_from:
        if source is None:
            source = profile_source.read(settings.profiles_from)
        try:
            rows = load_instance_rows()
        except CatalogError as e:
            raise HubConfigError(f"the price catalog: {e}") from None
        found = signals(source, rows)
        if isinstance(source.profiles, Unreadable):
            unreadable = f"{source.origin} is {source.profiles.what}"
    policy = settings.prices
    cloud = decide(
        policy.provider,
        found,
        policy.catalog.providers,
        unreadable,
        settings.nodes,
        settings.nodes_unread,
    )
    # the admin's price_region wins; else the one region the cluster's nodes say
    region = policy.region or cloud.region
    if policy.region and cloud.region and cloud.region != policy.region:
        why = f"{cloud.why}; priced in {policy.region}, the admin's c.GpuCostHub.price_region"
        cloud = replace(cloud, why=why)
    priced = replace(policy, provider=cloud.provider, region=region)
    return replace(settings, prices=priced), cloud


def build(settings: ProfileSettings, source: ProfileSource | None = None) -> Allocations:
    """The allocation policy; :class:`HubConfigError` naming what cannot be priced.
    ``source``: the profile list already read from ``profiles_from`` (else read here)."""
    if settings.profiles_from and source is None:
        source = profile_source.read(settings.profiles_from)
    settings, cloud = resolved(settings, source)
    if not settings.profiles_from or source is None:
        return Allocations(
            AllocationPolicy(
                settings.profile_gpus,
                settings.default_gpu,
                settings.prices,
                shared_by=plain_sharing(settings.gpu_sharing),
            ),
            settings.prices,
            cloud,
        )
    prices = derived_prices(settings.prices, settings.gpu_sharing)
    tables: list[ProfileTable] = []

    def factory(overrides: Mapping[str, Rate]) -> ProfileTable:
        tables.append(ProfileTable(source, prices, overrides))
        return tables[-1]

    policy = AllocationPolicy(
        settings.profile_gpus, settings.default_gpu, settings.prices, derived=factory
    )
    return Allocations(policy, settings.prices, cloud, tables[-1] if tables else None, source)


def plain_sharing(gpu_sharing: Mapping[str, int]) -> tuple[int, str]:
    """With no profile list to read, the pods' GPUs are the plain resource: the clients
    ``gpu_sharing`` gives it (the fewest, the dearest share, where both resource names are
    set), and the setting that says so; ``(1, "")``: whole GPUs."""
    named = [
        (clients, f"{SHARING_SETTING}[{resource!r}] = {clients}")
        for resource in (GPU_RESOURCE, SHARED_RESOURCE)
        if (clients := gpu_sharing.get(resource, 1)) > 1
    ]
    return min(named) if named else (1, "")
