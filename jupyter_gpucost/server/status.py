"""The status document (``GET /gpucost/api/status``), built here and only here.

:func:`status_document` is a pure function of typed inputs (:class:`StatusInputs`: the
meter's snapshot, the telemetry, the prices, this session's totals, the ledger, the
attribution and the budget's own document) that the cost service gathers;
:func:`status_payload` is its meter-and-prices part.

Money leaves the server as JSON numbers with at most six decimals: a Decimal quantized to
micro-dollars converts to the float whose shortest representation is that same decimal,
so the text on the wire is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from .._version import __version__
from ..core.billing import US_PER_S, BillingRule
from ..core.catalog import BASIS_CATALOG, BASIS_UPPER_BOUND, DOUBTFUL_CONFIDENCE, PricePolicy
from ..core.currency import in_language
from ..core.currency import symbol as currency_symbol
from ..core.i18n import _, current_language
from ..core.instance_prices import PricePlan
from ..core.machine import Machine
from ..core.meter import GpuSessionCost, MeterSnapshot
from ..core.metering import Metering, metering
from ..core.money import exact, json_amount
from ..core.money import rate as money_rate
from ..core.rightsizing import Advice, advise, why_not
from ..core.wire import (
    JsonObject,
    MeteringState,
    Rightsizing,
    StatusDocument,
    StatusGpu,
    StatusPayload,
    StatusWarning,
)
from ..telemetry.base import TelemetryStatus
from .gpu_use.attribution import Attribution
from .ledger import BillFigure, bill_json
from .record.recorder import LiveTotals
from .status_ledger import LedgerFacts, ledger_json, ledger_warnings
from .status_machine import machine_json

#: joules in a kilowatt-hour
J_PER_KWH = 3.6e6


def _price(value: Decimal) -> float:
    return float(value)


def _gpu(g: GpuSessionCost) -> StatusGpu:
    r = g.reading
    unavailable = dict(r.unavailable) if r is not None else {}
    if r is None:
        unavailable.setdefault("reading", "no reading in the last sample")
    price = _price(g.price.per_gpu_hour) if g.price else None
    cost, used = json_amount(g.cost_micro), json_amount(g.used_micro)
    idle, unobserved = json_amount(g.idle_micro), json_amount(g.unobserved_micro)
    return {
        "index": g.index,
        "uuid": g.uuid,
        "name": g.name,
        "model": g.model,
        "priced": g.priced,
        "price_per_hour": price,
        "price_usd_per_hour": price,  # deprecated: the same, named before currencies
        "price_source": g.price.source if g.price else None,
        "price_as_of": g.price.as_of if g.price else None,
        "price_confidence": g.price.confidence if g.price else None,
        # where a catalog price applies (None: an override or a bound)
        "price_provider": (g.price.provider or None) if g.price else None,
        "price_market": (g.price.market or None) if g.price else None,
        "price_region": (g.price.region or None) if g.price else None,
        # "catalog", "override" or "upper-bound" (no price fits: the most it can cost)
        "price_basis": g.price.basis if g.price else None,
        "price_basis_reason": g.price.reason_in(_) if g.price and g.price.upper_bound else None,
        "utilization_pct": r.utilization_pct if r else None,
        "memory_used_bytes": r.memory_used_bytes if r else None,
        "memory_total_bytes": r.memory_total_bytes if r else None,
        "power_w": r.power_w if r else None,
        "energy_j": None if g.energy_j is None else round(g.energy_j, 3),
        "cost": cost,
        "used_cost": used,
        "idle_cost": idle,
        "unobserved_cost": unobserved,
        # deprecated twins of the four above (docs/api.md, "Money keys")
        "cost_usd": cost,
        "used_cost_usd": used,
        "idle_cost_usd": idle,
        "unobserved_cost_usd": unobserved,
        "used_s": g.used_us / US_PER_S,
        "idle_s": g.idle_us / US_PER_S,
        "unobserved_s": g.unobserved_us / US_PER_S,
        "lost": bool(r.lost) if r else False,
        "unavailable": unavailable,
    }


def _warnings(snapshot: MeterSnapshot, policy: PricePolicy) -> list[StatusWarning]:
    warnings: list[StatusWarning] = []
    currency = policy.session_currency
    for g in snapshot.unpriced:
        # only where no bound is known at all, which the server refuses at start-up
        text = _(
            "No {provider} {market} price for GPU {index} ({name}): it is not counted in the "
            "cost. An admin can set c.GpuCost.price_overrides = {{{model!r}: <{currency} per "
            "hour>}}."
        )
        values = {"provider": policy.provider, "market": policy.market, "index": g.index}
        message = text.format(**values, name=g.name, model=g.model or g.name, currency=currency)
        warnings.append({"code": "unpriced-gpu", "message": message})
    for g in snapshot.gpus:
        if g.price is not None and g.price.upper_bound:
            text = _(
                "GPU {index} ({name}) is priced at an upper bound: {reason}. An admin can set "
                "its real price with c.GpuCost.price_overrides = {{{model!r}: <{currency} per "
                "hour>}}."
            )
            message = text.format(
                index=g.index,
                name=g.name,
                reason=g.price.reason_in(_),
                model=g.model or g.name,
                currency=currency,
            )
            warnings.append({"code": "price-upper-bound", "message": message})
    for g in snapshot.gpus:
        if g.price is not None and g.price.confidence in DOUBTFUL_CONFIDENCE:
            text = _(
                "The price of GPU {index} ({model}, {rate}) is {confidence}: "
                "check it against your bill."
            )
            shown = in_language(currency_symbol(g.price.currency), current_language())
            message = text.format(
                index=g.index,
                model=g.model,
                rate=_("{price}/h").format(price=exact(g.price.per_gpu_hour, shown)),
                confidence={"unverified": _("unverified")}.get(
                    g.price.confidence, g.price.confidence
                ),
            )
            warnings.append({"code": "price-unverified", "message": message})
        if g.reading is not None and g.reading.lost:
            text = _("GPU {index} ({name}) stopped answering; it is still billed.")
            warnings.append(
                {"code": "gpu-lost", "message": text.format(index=g.index, name=g.name)}
            )
    return warnings


def status_payload(
    snapshot: MeterSnapshot,
    telemetry: TelemetryStatus,
    *,
    policy: PricePolicy,
    rule: BillingRule,
    currency: str,
    currency_symbol: str,
    more_warnings: Sequence[StatusWarning] = (),
) -> StatusPayload:
    """The meter, telemetry and price part of the document (``more_warnings`` follow the
    meter's own)."""
    in_force = [g.price for g in snapshot.gpus if g.price is not None]
    dates = sorted(p.as_of for p in in_force if p.as_of)
    bounds = [p for p in in_force if p.upper_bound]
    cost, gpu_cost = json_amount(snapshot.cost_micro), json_amount(snapshot.gpu_cost_micro)
    rate = _price(snapshot.rate_per_hour)
    used, idle = json_amount(snapshot.used_micro), json_amount(snapshot.idle_micro)
    unobserved = json_amount(snapshot.unobserved_micro)
    adjustment = json_amount(snapshot.adjustment_micro)
    base_price = _price(snapshot.base_per_hour)
    base_cost = json_amount(snapshot.base_cost_micro)
    return {
        "version": __version__,
        "currency": currency,
        "currency_symbol": currency_symbol,
        "session_started": snapshot.started.isoformat(),
        "as_of": snapshot.as_of.isoformat(),
        "elapsed_s": snapshot.elapsed_us / US_PER_S,
        "billed_s": snapshot.billed_us / US_PER_S,
        "cost": cost,
        "gpu_cost": gpu_cost,
        "rate_per_hour": rate,
        # deprecated twins (docs/api.md, "Money keys"), here and below
        "cost_usd": cost,
        "gpu_cost_usd": gpu_cost,
        "rate_usd_per_hour": rate,
        # "upper-bound" where a GPU has no price that fits and is priced at the most it can
        # cost (the reasons say why), else "catalog" (rows and the admin's overrides)
        "price_basis": BASIS_UPPER_BOUND if bounds else BASIS_CATALOG,
        "price_basis_reasons": list(dict.fromkeys(p.reason_in(_) for p in bounds)),
        "used_cost": used,
        "idle_cost": idle,
        "unobserved_cost": unobserved,
        "billing_adjustment": adjustment,
        "base_price_per_hour": base_price,
        "base_cost": base_cost,
        "used_cost_usd": used,
        "idle_cost_usd": idle,
        "unobserved_cost_usd": unobserved,
        "billing_adjustment_usd": adjustment,
        "base_price_usd_per_hour": base_price,
        "base_cost_usd": base_cost,
        "energy_j": None if snapshot.energy_j is None else round(snapshot.energy_j, 3),
        "samples": snapshot.samples,
        "billing": {
            "granularity_s": rule.granularity_s,
            "minimum_charge_s": rule.minimum_charge_s,
        },
        "gpus": [_gpu(g) for g in snapshot.gpus],
        "telemetry": {
            "source": telemetry.source,
            "simulated": telemetry.simulated,
            "available": telemetry.available,
            # the adapters' fixed reasons are constants of the catalog, translated here
            "reason": _(telemetry.reason) if telemetry.reason else None,
            "detail": dict(telemetry.detail),
        },
        "prices": {
            "provider": policy.provider,
            "market": policy.market,
            "instance": policy.instance or None,
            # the oldest date among the prices in force: the one to be wary of
            "as_of": dates[0] if dates else None,
            "catalog_date": policy.catalog.catalog_date,
            "overridden_models": sorted({p.model for p in in_force if p.overridden}),
        },
        "warnings": [*_warnings(snapshot, policy), *more_warnings],
    }


@dataclass(frozen=True)
class StatusInputs:
    """Everything the status document is built from, read at one moment."""

    snapshot: MeterSnapshot
    telemetry: TelemetryStatus
    policy: PricePolicy
    rule: BillingRule
    currency: str
    currency_symbol: str
    session_id: str
    #: today / this month / all time (``None``: no ledger)
    totals: LiveTotals | None
    ledger: LedgerFacts
    carbon_intensity_g_per_kwh: float
    #: the largest GPU memory used in the session (right-sizing)
    peak_memory_bytes: int | None
    attribution: Attribution | None
    #: the budget's own document (``None``: the budget is not running)
    budget: JsonObject | None
    #: the detected machine and how the prices were chosen
    machine: Machine | None = None
    plan: PricePlan | None = None
    #: whether a GPU is metered (``None``: as the snapshot says, GPUs or unknown)
    metering: Metering | None = None
    #: this machine's reconciled bill (``None``: none was read)
    bill: BillFigure | None = None


def metering_json(metering: Metering, currency_symbol: str, rate: float) -> MeteringState:
    """The ``metering`` object: the state, why no GPU is metered and what a budget can do,
    in the server's language."""
    reason = _(metering.reason) if metering.reason else None
    refusal = metering.budget_refusal
    return {
        "state": metering.state,
        "reason": reason,
        "instance": metering.instance,
        # the sentence the budget is refused with (``None``: a budget can act)
        "budget": _(refusal) if refusal else None,
        "message": None
        if metering.state == "gpus"
        else (
            _("No GPU is metered ({reason}): the machine may still bill, and a budget cannot act.")
            if metering.state == "unknown"
            else _(
                "No GPU is seen ({reason}): the {instance} is priced whole from its "
                "instance, {rate}."
            )
        ).format(
            reason=sentence(reason or ""),
            instance=metering.instance,
            rate=money_rate(str(rate), in_language(currency_symbol, current_language())),
        ),
    }


def sentence(text: str) -> str:
    """A reason set inside a sentence: no full stop of its own."""
    return text.strip().rstrip(".")


def _rightsizing(advice: Advice | None) -> Rightsizing | None:
    if advice is None:
        return None
    cost, instead_of = json_amount(advice.cost_micro), json_amount(advice.instead_of_micro)
    price = float(advice.per_gpu_hour)
    return {
        "model": advice.model,
        "gpus": advice.gpus,
        "cost": cost,
        "instead_of": instead_of,
        "price_per_hour": price,
        # deprecated twins (docs/api.md, "Money keys")
        "cost_usd": cost,
        "instead_of_usd": instead_of,
        "price_usd_per_hour": price,
        "peak_memory_bytes": advice.peak_memory_bytes,
        "reason": advice.reason,
    }


def status_document(inputs: StatusInputs) -> StatusDocument:
    """The whole status document."""
    snapshot = inputs.snapshot
    policy = inputs.policy
    payload = status_payload(
        snapshot,
        inputs.telemetry,
        policy=policy,
        rule=inputs.rule,
        currency=inputs.currency,
        currency_symbol=inputs.currency_symbol,
        more_warnings=ledger_warnings(inputs.ledger, inputs.currency_symbol),
    )
    totals = inputs.totals
    energy_j = snapshot.energy_j
    intensity = inputs.carbon_intensity_g_per_kwh
    advice = advise(
        snapshot,
        policy.catalog,
        provider=policy.provider,
        market=policy.market,
        peak_bytes=inputs.peak_memory_bytes,
        region=policy.region,
    )
    attribution = inputs.attribution
    machine, machine_warnings = machine_json(inputs.machine, inputs.plan, snapshot)
    measured = inputs.metering or metering(
        len(snapshot.gpus), telemetry_reason=inputs.telemetry.reason, whole_instance=None
    )
    shown = metering_json(measured, inputs.currency_symbol, payload["rate_usd_per_hour"])
    whole_message = shown["message"]
    if measured.state == "instance" and whole_message is not None:
        # priced whole: not "0 of its 8 shares are counted"
        machine_warnings = [w for w in machine_warnings if w["code"] != "instance-gpus"]
        machine_warnings.append({"code": "instance-whole", "message": whole_message})
    payload["warnings"].extend(machine_warnings)
    today = json_amount(totals.today_micro) if totals else None
    month = json_amount(totals.month_micro) if totals else None
    all_time = json_amount(totals.all_time_micro) if totals else None
    return {
        **payload,
        "session_id": inputs.session_id,
        "today": today,
        "month": month,
        "all_time": all_time,
        # deprecated twins (docs/api.md, "Money keys")
        "today_usd": today,
        "month_usd": month,
        "all_time_usd": all_time,
        "ledger": ledger_json(inputs.ledger),
        "carbon_intensity_g_per_kwh": intensity,
        "co2_g": None if energy_j is None else round(energy_j / J_PER_KWH * intensity, 3),
        "rightsizing": _rightsizing(advice),
        "rightsizing_note": why_not(snapshot) if advice is None else None,
        "attribution": {
            "pids_visible": attribution.pids_visible if attribution else True,
            # a constant of the catalog, translated where it is shown
            "note": _(attribution.note) if attribution and attribution.note else None,
        },
        "budget": inputs.budget,
        "machine": machine,
        "metering": shown,
        # "estimated $X · billed $Y (your bill to ...)": jupyter gpucost reconcile
        "bill": bill_json(inputs.bill, inputs.currency_symbol),
    }
