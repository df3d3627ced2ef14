"""A pod's GPUs from its KubeSpawner settings, and their price.

From the settings a profile (and its option choices) give the pod
(:mod:`~.kubespawner`):

* what it requests: every extended resource of ``extra_resource_limits`` and
  ``extra_resource_guarantees`` (the larger where both are set). ``nvidia.com/gpu`` is
  whole GPUs; ``nvidia.com/mig-<profile>`` a MIG slice; ``nvidia.com/gpu.shared`` (or any
  resource named in ``c.GpuCostHub.gpu_sharing``) a time-sliced GPU. Any other extended
  resource (``aws.amazon.com/neuron``, ``amd.com/gpu``, ``google.com/tpu``,
  ``habana.ai/gaudi``, anything unknown) has no catalog price: :class:`Unpriced`, naming
  the resource and the setting that prices it, never "no GPU";
* the model: ``node_selector`` on ``cloud.google.com/gke-accelerator``,
  ``karpenter.k8s.aws/instance-gpu-name`` or ``nvidia.com/gpu.product``, the same keys
  written directly under ``kubespawner_override``, or ``node_affinity_required``
  ``matchExpressions`` on them with ``operator: In`` (several values or terms: the pod may
  land on any of them, so the dearest is billed);
* the instance type: ``node.kubernetes.io/instance-type`` (as above). A pod on a type
  with a whole-instance row (for sale) pays its share of the node: (its GPUs / the
  instance's GPUs) × the instance's price; the whole instance when it asks for all of
  them or says nothing of its GPUs. A type with a ``[[vm]]`` row (GKE's N1 nodes with
  attached T4s) adds its VM to the GPUs' own prices (:mod:`~.vm_part`).

A device that is part of a GPU pays that part of the GPU's price (:mod:`~.mig`): a MIG
slice its compute slices (1/7 of an A100 for ``1g.5gb``), a time-sliced GPU 1/N, N from
``c.GpuCostHub.gpu_sharing`` (by resource, or by a ``label=value`` the pod selects), GKE's
``cloud.google.com/gke-max-shared-clients-per-gpu`` or GPU feature discovery's
``nvidia.com/gpu.replicas`` where the pod selects them. Fractions stay exact until the
price per device is rounded up to the micro-dollar (never below its share).

Every figure says where it came from. What cannot be priced is an :class:`Unpriced`
with the reason.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction

from ...core.attached_gpus import VmPricing, VmRow
from ...core.catalog import PricePolicy
from ...core.instance_prices import InstanceRow, find_instance, whole_instance
from ...core.regions import region_exact
from ..allocation import (
    NO_GPU,
    PROFILES_SETTING,
    TIME_SLICED_TEXT,
    canonical_model,
    ceil_micro,
    price,
)
from ..model import GpuAllocation, HubConfigError, Rate
from .gpu_labels import (
    GFD_PRODUCT,
    GPU_RESOURCE,
    INSTANCE_LABELS,
    LabelError,
    gpu_count,
    model_from_label,
)
from .kubespawner import State, Unreadable
from .mig import MigError, mig_profile, mig_slice, split_product
from .node_terms import Unpriced, candidates
from .vm_part import node_vm, with_vm

MICRO = Decimal("0.000001")
SHARING_SETTING = "c.GpuCostHub.gpu_sharing"
GKE_SHARING = "cloud.google.com/gke-gpu-sharing-strategy"
GKE_MAX_CLIENTS = "cloud.google.com/gke-max-shared-clients-per-gpu"
GFD_REPLICAS = "nvidia.com/gpu.replicas"
#: the resource NVIDIA's device plugin advertises for time-sliced GPUs with
#: ``renameByDefault: true``
SHARED_RESOURCE = "nvidia.com/gpu.shared"
#: what a pod's line says of a machine type with no row (its VM, if any, is not counted)
NO_ROW = "no price for this machine type in the catalog, only its GPUs are counted"


@dataclass(frozen=True)
class Prices:
    """What prices a pod: the hub's price policy and the catalog's whole-instance rows."""

    policy: PricePolicy
    instances: tuple[InstanceRow, ...] = ()
    #: the setting named in messages about prices
    overrides_setting: str = "c.GpuCostHub.price_overrides"
    #: ``c.GpuCostHub.gpu_sharing``: a resource name or a node label ``key=value`` → the
    #: clients each GPU is shared by
    gpu_sharing: Mapping[str, int] = field(default_factory=dict)
    #: the catalog's ``[[vm]]`` rows: machine types whose GPUs are attached and billed apart
    vms: tuple[VmRow, ...] = ()


@dataclass(frozen=True)
class _Device:
    """The extended resource a pod requests, how many, and where that was read."""

    resource: str
    count: int
    where: str


def is_extended(resource: str) -> bool:
    """A Kubernetes extended resource (``vendor.example/thing``), not cpu, memory,
    ephemeral-storage or hugepages (``kubernetes.io`` names are the cluster's own)."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not domain.endswith("kubernetes.io")


def _devices(state: State) -> list[_Device]:
    """Every extended resource the pod requests, the larger of its limit and guarantee;
    those asked 0 only where nothing else is asked."""
    found: dict[str, _Device] = {}
    for setting in ("extra_resource_limits", "extra_resource_guarantees"):
        value = state.get(setting)
        if isinstance(value, Unreadable):
            raise Unpriced(f"{setting} cannot be read statically ({value.what})")
        if not isinstance(value, Mapping):
            continue
        for resource, quantity in value.items():
            if not isinstance(resource, str) or not is_extended(resource):
                continue
            try:
                count = gpu_count(quantity)
            except LabelError as e:
                raise Unpriced(f"{setting} {resource}: {e}") from None
            seen = found.get(resource)
            if seen is None or count > seen.count:
                found[resource] = _Device(resource, count, f"{setting} {resource}")
    asked = [d for d in found.values() if d.count > 0]
    if asked:
        return asked
    # only zeros (``nvidia.com/gpu: "0"`` on a CPU profile): one, to say so
    return list(found.values())[:1]


def _selected(state: State) -> dict[str, str]:
    """The node labels the pod's ``node_selector`` requires (text values only)."""
    selector = state.get("node_selector")
    if not isinstance(selector, Mapping):
        return {}
    return {str(k): str(v) for k, v in selector.items() if isinstance(v, str | int)}


def _clients(device: _Device, state: State, prices: Prices) -> tuple[int, str] | None:
    """How many clients share each GPU of this device, and why; ``None``: not shared."""
    sharing = prices.gpu_sharing
    if device.resource in sharing:
        return sharing[device.resource], f"{SHARING_SETTING}[{device.resource!r}]"
    labels = _selected(state)
    for key, value in labels.items():
        name = f"{key}={value}"
        if name in sharing:
            return sharing[name], f"{SHARING_SETTING}[{name!r}]"
    if labels.get(GKE_SHARING, "").lower() in ("time-sharing", "mps"):
        raw = labels.get(GKE_MAX_CLIENTS)
        if raw is None:
            raise Unpriced(
                f"node_selector {GKE_SHARING}={labels[GKE_SHARING]} without {GKE_MAX_CLIENTS}: "
                f"add it to the node selector, or set {SHARING_SETTING}"
                f"['{GKE_SHARING}={labels[GKE_SHARING]}'] = <clients per GPU>"
            )
        return _positive(raw, f"node_selector {GKE_MAX_CLIENTS}"), (
            f"node_selector {GKE_MAX_CLIENTS}={raw}"
        )
    if GFD_REPLICAS in labels:
        raw = labels[GFD_REPLICAS]
        return _positive(
            raw, f"node_selector {GFD_REPLICAS}"
        ), f"node_selector {GFD_REPLICAS}={raw}"
    return None


def _positive(raw: object, where: str) -> int:
    try:
        n = gpu_count(raw)
    except LabelError as e:
        raise Unpriced(f"{where}: {e}") from None
    if n < 1:
        raise Unpriced(f"{where}={raw!r}: a GPU is shared by 1 or more clients")
    return n


def time_slicing(state: State, prices: Prices) -> tuple[int, str] | None:
    """How many pods share each GPU this pod asks for (``gpu_sharing``, GKE's or NVIDIA's
    sharing labels) and why; ``None`` for whole GPUs, or where the pod's GPUs are not
    known (for a profile whose model ``profile_gpus`` names: its share still applies)."""
    try:
        asked = [d for d in _devices(state) if d.count]
        if len(asked) != 1:
            return None
        device = asked[0]
        plain = device.resource in (GPU_RESOURCE, SHARED_RESOURCE)
        if not plain and device.resource not in prices.gpu_sharing:
            return None
        return _clients(device, state, prices)
    except Unpriced:
        return None


@dataclass(frozen=True)
class _Part:
    """What fraction of one GPU each device is (1 for whole GPUs)."""

    share: Fraction = Fraction(1)
    detail: str = ""
    why: str = ""
    #: a MIG profile (its parent GPU decides its share)
    mig: str = ""


def _part(device: _Device | None, state: State, prices: Prices, mig_label: str) -> _Part:
    """The fraction of a GPU the device is; :class:`Unpriced` for a resource with no price."""
    if device is None:
        if mig_label:  # a MIG node's product label: billed one slice
            return _Part(mig=mig_label, detail=f"MIG {mig_label}", why=f"{GFD_PRODUCT} (MIG)")
        return _Part()
    resource = device.resource
    profile = mig_profile(resource)
    if profile is not None:
        return _Part(mig=profile, detail=f"MIG {profile}", why=f"{resource} ({device.where})")
    shared = resource == SHARED_RESOURCE or resource in prices.gpu_sharing
    if resource == GPU_RESOURCE or shared:
        if mig_label and not shared:
            return _Part(mig=mig_label, detail=f"MIG {mig_label}", why=f"{GFD_PRODUCT} (MIG)")
        clients = _clients(device, state, prices)
        if clients is None:
            if shared:
                raise Unpriced(
                    f"{device.where}: {resource} is a time-sliced GPU shared by an unknown "
                    f"number of clients: set {SHARING_SETTING}[{resource!r}] = <clients per GPU>"
                )
            return _Part()
        n, why = clients
        if n == 1:
            return _Part()
        return _Part(Fraction(1, n), TIME_SLICED_TEXT.format(n=n), why)
    fix = f"set {PROFILES_SETTING}[<this profile>] to what it costs"
    if resource.startswith("nvidia.com/gpu"):
        fix += f", or {SHARING_SETTING}[{resource!r}] = <clients per GPU> for a shared GPU"
    raise Unpriced(
        f"the pod requests {resource}: {device.count} ({device.where}), which no catalog row "
        f"prices: {fix}"
    )


@dataclass
class _Named:
    """What the pod's node terms name, read against the catalog: GPU models (each with
    where it was read), whole-instance rows, ``[[vm]]`` rows, machine types the catalog
    cannot price, and MIG profiles named by GPU feature discovery's product label."""

    models: dict[str, list[str]] = field(default_factory=dict)
    instances: list[tuple[InstanceRow, str]] = field(default_factory=list)
    vms: list[tuple[VmPricing, str]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    mig_labels: set[str] = field(default_factory=set)


def rate_of(state: State, prices: Prices, *, strict: bool = False) -> Rate:
    """The rate of a pod with these settings; :class:`Unpriced` with the reason.

    ``strict`` (settings that hold a user's text): an instance type with no whole-instance
    row is not taken as "no GPU" but is :class:`Unpriced`."""
    devices = _devices(state)
    for d in devices:
        if d.count:
            _part(d, state, prices, "")  # a resource no catalog row prices stops here
    if len(devices) > 1:
        raise Unpriced(
            f"the pod requests {', '.join(d.resource for d in devices)}: price a pod with "
            f"several kinds of device with {PROFILES_SETTING}[<this profile>]"
        )
    device = devices[0] if devices else None
    count = device.count if device is not None else None
    count_from = device.where if device is not None else ""
    named = _read_names(state, prices, strict)
    if len(named.mig_labels) > 1:
        raise Unpriced(f"{GFD_PRODUCT} names several MIG profiles: {', '.join(named.mig_labels)}")
    if count == 0:
        assert device is not None
        return Rate(NO_GPU, Decimal(0), f"no GPU ({count_from} is 0)")
    part = _part(device, state, prices, next(iter(named.mig_labels), ""))
    if named.instances:
        shares = [
            _instance(row, where, device, part, named.models, prices)
            for row, where in named.instances
        ]
        return max(shares, key=lambda r: r.usd_per_hour)
    if not named.models:
        if part.mig:
            try:
                only = mig_slice(part.mig, None)
            except MigError as e:
                raise Unpriced(f"{part.why}: {e}") from None
            named.models[only.parent] = [f"{part.detail} (the one GPU with this MIG profile)"]
        elif count is None:
            why = "no nvidia.com/gpu limit, no GPU node label"
            if named.unknown:
                why += f"; {', '.join(named.unknown)} has no whole-instance row "
                why += f"({prices.policy.provider} {prices.policy.market})"
            return Rate(NO_GPU, Decimal(0), f"no GPU ({why})")
        else:
            raise Unpriced(
                f"{count_from} asks {count} but no node selector or affinity names the GPU model"
            )
    counted = f"{count} ({count_from})" if count is not None else "1 (no nvidia.com/gpu limit)"
    best = _dearest_model(named.models, part, count, counted, prices)
    # the dearest VM the pod may land on; the admin's price for the GPU beats the rows, as
    # for a whole instance (:func:`_instance`)
    if named.vms and best.allocation.model not in (prices.policy.overrides or {}):
        return max(
            (with_vm(best, vm, where) for vm, where in named.vms), key=lambda r: r.usd_per_hour
        )
    if named.unknown:  # a machine type the catalog cannot price is said, never dropped silently
        return replace(best, source=f"{best.source}; {', '.join(named.unknown)}: {NO_ROW}")
    return best


def _read_names(state: State, prices: Prices, strict: bool) -> _Named:
    """Each GPU model and instance type the pod's node terms name, read against the
    catalog (an instance type: its whole-instance row, else its ``[[vm]]`` row, else
    unknown, or :class:`Unpriced` when ``strict``)."""
    named = _Named()
    for c in candidates(state):
        if c.key in INSTANCE_LABELS:
            if not isinstance(c.value, str):
                raise Unpriced(f"{c.where}={c.value!r} has no whole-instance price")
            row = find_instance(
                prices.instances,
                provider=prices.policy.provider,
                instance=c.value,
                market=prices.policy.market,
                region=prices.policy.region,
            )
            row = None if row is None or row.not_for_sale else row  # not rented: no price
            vm = node_vm(prices.vms, prices.policy, c.value)
            if vm and not row and vm.row.currency == prices.policy.session_currency:
                named.vms.append((vm, c.where))
                continue
            # whole-instance rows are in USD: another currency is priced per GPU
            if row is not None and prices.policy.session_currency == "USD":
                named.instances.append((row, c.where))
            elif strict:
                raise Unpriced(f"{c.where}={c.value!r} has no whole-instance price")
            else:
                named.unknown.append(f"{c.where}={c.value}")
            continue
        value = c.value
        if c.key == GFD_PRODUCT and isinstance(value, str):
            split = split_product(value)
            if split is not None:
                value, profile = split
                named.mig_labels.add(profile)
        try:
            model = model_from_label(c.key, value, c.memory)
        except LabelError as e:
            raise Unpriced(str(e)) from None
        named.models.setdefault(model, []).append(f"{c.where}={c.value}")
    return named


def _dearest_model(
    models: dict[str, list[str]], part: _Part, count: int | None, counted: str, prices: Prices
) -> Rate:
    """Each named model priced per device (its share of a GPU where the device is part of
    one); the dearest, since the pod may land on any."""
    options: list[Rate] = []
    for model, wheres in models.items():
        share, detail, why = _share(part, model)
        allocation = GpuAllocation(model, 1)
        try:
            r = price(
                allocation,
                prices.policy,
                setting="; ".join(wheres),
                overrides_setting=prices.overrides_setting,
            )
        except HubConfigError as e:
            raise Unpriced(str(e)) from None
        per_device = r.usd_per_gpu_hour
        source = f"{model} from {', '.join(wheres)}; {counted}; price: {r.source}"
        if share != 1:
            per_device = ceil_micro(Fraction(per_device) * share)
            source = (
                f"{share} × {r.allocation.model} ({detail}, {why}) each; {model} from "
                f"{', '.join(wheres)}; {counted}; {r.allocation.model}: {r.source}"
            )
        found = GpuAllocation(r.allocation.model, count if count is not None else 1, share, detail)
        options.append(Rate(found, per_device, source))
    best = max(options, key=lambda r: r.usd_per_hour)
    if len(options) > 1:
        best = Rate(
            best.allocation,
            best.usd_per_gpu_hour,
            f"the dearest of {', '.join(models)} (the pod may land on any): {best.source}",
        )
    return best


def _share(part: _Part, model: str) -> tuple[Fraction, str, str]:
    """The share of one ``model`` GPU each device is."""
    if not part.mig:
        return part.share, part.detail, part.why
    try:
        piece = mig_slice(part.mig, model)
    except MigError as e:
        raise Unpriced(f"{part.why}: {e}") from None
    return piece.share, piece.label, f"{piece.share} of its compute slices, NVIDIA's MIG table"


def _instance(
    row: InstanceRow,
    where: str,
    device: _Device | None,
    part: _Part,
    models: Mapping[str, list[str]],
    prices: Prices,
) -> Rate:
    """The pod's share of an instance: (its GPUs / the instance's) × the instance's price
    (the admin's override for its GPU beats the row)."""
    if models and row.gpu_model not in models:
        raise Unpriced(
            f"{where}={row.instance} has {row.gpu_model} GPUs, but "
            f"{'; '.join(w for ws in models.values() for w in ws)} names "
            f"{', '.join(models)}"
        )
    share, detail, why = _share(part, row.gpu_model)
    count = device.count if device is not None else row.gpus
    if device is None:
        share = Fraction(1)
    if count * share > row.gpus:
        raise Unpriced(
            f"{device.where if device else where} asks {count * share} GPUs of "
            f"{row.instance}, which has {row.gpus}"
        )
    asked = f"; the pod asks {device.count} ({device.where})" if device is not None else ""
    if share != 1:
        asked += f", each {share} of a GPU ({detail}, {why})"
    overrides = prices.policy.overrides or {}
    model = canonical_model(row.gpu_model, prices.policy) or row.gpu_model
    fraction = Fraction(count, row.gpus) * share
    # a pod with all of the instance has it whole; else its share of it, shown as one
    of, of_gpus = (row.instance, row.gpus) if fraction != 1 else ("", 0)
    whole = "whole instance" if fraction == 1 else f"{fraction} of instance"
    if model in overrides:
        return Rate(
            GpuAllocation(model, count, share, detail, of, of_gpus),
            overrides[model] if share == 1 else ceil_micro(Fraction(overrides[model]) * share),
            f"{whole} {row.instance} ({where}, {row.gpus} × {model}){asked}; price: "
            f"admin override ({prices.overrides_setting}[{model!r}])",
        )
    # each device's share of the instance, rounded up to the micro-dollar
    per_device = ceil_micro(Fraction(row.per_hour) / row.gpus * share)
    date = f"as of {row.as_of}" if row.as_of else "undated"
    region = f" {row.region}" if row.region else ""
    source = (
        f"{whole} {row.instance} ({where}): {row.gpus} × {row.gpu_model}, "
        f"{row.per_hour} USD/h ({row.provider} {row.market}{region}, {date}){asked}"
    )
    if row.source:
        source += f"; source: {row.source}"
    if not region_exact(row.region, prices.policy.region):
        # another region's row: the most it can cost, labelled (views.UPPER_BOUND)
        bound = whole_instance(row, region=prices.policy.region).per_gpu
        source = f"upper bound: {source} ({bound.reason})"
    return Rate(GpuAllocation(model, count, share, detail, of, of_gpus), per_device, source)
