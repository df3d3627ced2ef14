"""A pod's GPUs from its KubeSpawner settings, and their price.

From the settings a profile (and its option choices) give the pod
(:mod:`~.kubespawner`):

* the count: ``extra_resource_limits["nvidia.com/gpu"]``, or
  ``extra_resource_guarantees["nvidia.com/gpu"]`` (the larger where both are set);
* the model: ``node_selector`` on ``cloud.google.com/gke-accelerator``,
  ``karpenter.k8s.aws/instance-gpu-name`` or ``nvidia.com/gpu.product``, the same keys
  written directly under ``kubespawner_override``, or ``node_affinity_required``
  ``matchExpressions`` on them with ``operator: In`` (several values or terms: the pod may
  land on any of them, so the dearest is billed);
* the instance type: ``node.kubernetes.io/instance-type`` (as above). A type with a
  whole-instance row in the catalog is billed whole: its price per hour, for all its
  GPUs, whatever share of it the pod requests (the node is rented whole). A type the
  catalog has no whole-instance row for names no GPU by itself.

Every figure says where it came from. What cannot be priced (a count with no model, two
keys naming different GPUs, a callable) is an :class:`Unpriced` with the reason.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from ...core.catalog import PricePolicy
from ...core.instance_prices import InstanceRow, find_instance
from ..allocation import NO_GPU, canonical_model, price
from ..model import GpuAllocation, HubConfigError, Rate
from .gpu_labels import (
    GPU_RESOURCE,
    INSTANCE_LABELS,
    KARPENTER_GPU_MEMORY,
    MODEL_LABELS,
    LabelError,
    gpu_count,
    model_from_label,
)
from .kubespawner import State, Unreadable

MICRO = Decimal("0.000001")


class Unpriced(ValueError):
    """A pod's GPUs that cannot be priced; the message says why."""


@dataclass(frozen=True)
class Prices:
    """What prices a pod: the hub's price policy and the catalog's whole-instance rows."""

    policy: PricePolicy
    instances: tuple[InstanceRow, ...] = ()
    #: the setting named in messages about prices
    overrides_setting: str = "c.GpuCostHub.price_overrides"


@dataclass(frozen=True)
class _Candidate:
    """One value a key may take, and where it was read."""

    key: str
    value: object
    where: str
    memory: object = None


def _candidates(state: State) -> list[_Candidate]:
    """Every GPU model or instance-type label value the settings name."""
    found: list[_Candidate] = []
    labels = (*MODEL_LABELS, *INSTANCE_LABELS)
    selector = state.get("node_selector")
    if isinstance(selector, Unreadable):
        raise Unpriced(f"node_selector cannot be read statically ({selector.what})")
    if isinstance(selector, Mapping):
        memory = selector.get(KARPENTER_GPU_MEMORY)
        for key in labels:
            if key in selector:
                found.append(_Candidate(key, selector[key], f"node_selector {key}", memory))
    for key in labels:
        direct = state.get(key)
        if isinstance(direct, Unreadable):
            raise Unpriced(f"{key} cannot be read statically ({direct.what})")
        if direct is not None:
            found.append(_Candidate(key, direct, f"kubespawner_override {key}"))
    affinity = state.get("node_affinity_required")
    if isinstance(affinity, Unreadable):
        raise Unpriced(f"node_affinity_required cannot be read statically ({affinity.what})")
    if isinstance(affinity, Sequence) and not isinstance(affinity, str):
        for term in affinity:
            expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
            if not isinstance(expressions, Sequence):
                continue
            memory = None
            for e in expressions:
                if isinstance(e, Mapping) and e.get("key") == KARPENTER_GPU_MEMORY:
                    values = e.get("values")
                    if isinstance(values, Sequence) and len(values) == 1:
                        memory = values[0]
            for e in expressions:
                if not isinstance(e, Mapping) or e.get("key") not in labels:
                    continue
                if e.get("operator") != "In":
                    continue
                values = e.get("values")
                if not isinstance(values, Sequence) or isinstance(values, str):
                    continue
                key = str(e["key"])
                for v in values:
                    found.append(_Candidate(key, v, f"node_affinity_required {key} In", memory))
    return found


def _count(state: State) -> tuple[int | None, str]:
    """The GPUs the pod requests, and where that was read; ``None``: not said."""
    counts: list[tuple[int, str]] = []
    for setting in ("extra_resource_limits", "extra_resource_guarantees"):
        value = state.get(setting)
        if isinstance(value, Unreadable):
            raise Unpriced(f"{setting} cannot be read statically ({value.what})")
        if isinstance(value, Mapping) and GPU_RESOURCE in value:
            try:
                counts.append((gpu_count(value[GPU_RESOURCE]), f"{setting} {GPU_RESOURCE}"))
            except LabelError as e:
                raise Unpriced(f"{setting} {GPU_RESOURCE}: {e}") from None
    if not counts:
        return None, ""
    return max(counts)


def rate_of(state: State, prices: Prices, *, strict: bool = False) -> Rate:
    """The rate of a pod with these settings; :class:`Unpriced` with the reason.

    ``strict`` (settings that hold a user's text): an instance type with no whole-instance
    row is not taken as "no GPU" but is :class:`Unpriced`."""
    count, count_from = _count(state)
    options: list[Rate] = []
    models: dict[str, list[str]] = {}
    instances: list[tuple[InstanceRow, str]] = []
    unknown: list[str] = []
    for c in _candidates(state):
        if c.key in INSTANCE_LABELS:
            if not isinstance(c.value, str):
                raise Unpriced(f"{c.where}={c.value!r} is not an instance type")
            row = find_instance(
                prices.instances,
                provider=prices.policy.provider,
                instance=c.value,
                market=prices.policy.market,
            )
            # whole-instance rows are in USD: another currency is priced per GPU
            if row is not None and prices.policy.session_currency == "USD":
                instances.append((row, c.where))
            elif strict:
                raise Unpriced(f"{c.where}={c.value!r} has no whole-instance price")
            else:
                unknown.append(f"{c.where}={c.value}")
            continue
        try:
            model = model_from_label(c.key, c.value, c.memory)
        except LabelError as e:
            raise Unpriced(str(e)) from None
        models.setdefault(model, []).append(f"{c.where}={c.value}")
    if instances:
        for row, where in instances:
            if models and row.gpu_model not in models:
                raise Unpriced(
                    f"{where}={row.instance} has {row.gpu_model} GPUs, but "
                    f"{'; '.join(w for ws in models.values() for w in ws)} names "
                    f"{', '.join(models)}"
                )
            if count is not None and count > row.gpus:
                raise Unpriced(
                    f"{count_from} asks {count} GPUs of {row.instance}, which has {row.gpus}"
                )
            options.append(_whole(row, where, count, count_from, prices))
        return max(options, key=lambda r: r.usd_per_hour)
    if count == 0:
        return Rate(NO_GPU, Decimal(0), f"no GPU ({count_from} is 0)")
    if not models:
        if count is None:
            why = "no nvidia.com/gpu limit, no GPU node label"
            if unknown:
                why += f"; {', '.join(unknown)} has no whole-instance row "
                why += f"({prices.policy.provider} {prices.policy.market})"
            return Rate(NO_GPU, Decimal(0), f"no GPU ({why})")
        raise Unpriced(
            f"{count_from} asks {count} GPU(s) but no node selector or affinity names their model"
        )
    counted = f"{count} ({count_from})" if count is not None else "1 (no nvidia.com/gpu limit)"
    for model, wheres in models.items():
        allocation = GpuAllocation(model, count if count is not None else 1)
        try:
            r = price(
                allocation,
                prices.policy,
                setting="; ".join(wheres),
                overrides_setting=prices.overrides_setting,
            )
        except HubConfigError as e:
            raise Unpriced(str(e)) from None
        source = f"{model} from {', '.join(wheres)}; {counted}; price: {r.source}"
        options.append(Rate(r.allocation, r.usd_per_gpu_hour, source))
    best = max(options, key=lambda r: r.usd_per_hour)
    if len(options) > 1:
        return Rate(
            best.allocation,
            best.usd_per_gpu_hour,
            f"the dearest of {', '.join(models)} (the pod may land on any): {best.source}",
        )
    return best


def _whole(
    row: InstanceRow, where: str, count: int | None, count_from: str, prices: Prices
) -> Rate:
    """An instance type's whole price (the admin's override for its GPU beats it)."""
    overrides = prices.policy.overrides or {}
    model = canonical_model(row.gpu_model, prices.policy) or row.gpu_model
    asked = f"; the pod asks {count} ({count_from})" if count is not None else ""
    if model in overrides:
        return Rate(
            GpuAllocation(model, row.gpus),
            overrides[model],
            f"{row.gpus} × {model} of {row.instance} ({where}){asked}; price: admin "
            f"override ({prices.overrides_setting}[{model!r}])",
        )
    # the share of each GPU, rounded up to the micro-dollar: never below the row's price
    share = (row.usd_per_hour / row.gpus).quantize(MICRO, rounding=ROUND_CEILING)
    date = f"as of {row.as_of}" if row.as_of else "undated"
    source = (
        f"whole instance {row.instance} ({where}): {row.gpus} × {row.gpu_model}, "
        f"{row.usd_per_hour} USD/h ({row.provider} {row.market}, {date}){asked}"
    )
    if row.source:
        source += f"; source: {row.source}"
    return Rate(GpuAllocation(model, row.gpus), share, source)
