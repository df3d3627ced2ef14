"""Whole-instance prices: what a cloud bills for one instance type (GPUs, CPU, RAM).

``[[instance]]`` tables of the price catalog (``jupyter_gpucost/data/prices.toml``), each
with its source, date and confidence. A detected instance with a row is priced whole: the
row's hourly price split into one share per GPU of the instance (micro-dollars, rounded
down) and the remainder as the base price, so that the instance's GPUs together with the
base cost exactly the row's price.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from pathlib import Path

from .attached_gpus import VmPricing, VmRow, vm_pricing
from .catalog import (
    BASIS_CATALOG,
    BASIS_UPPER_BOUND,
    REASON_SPOT,
    CatalogError,
    Price,
    read_catalog_toml,
)
from .catalog_file import read_row
from .currency import DEFAULT_CURRENCY
from .currency import symbol as currency_symbol
from .i18n import N_
from .money import rate_amount
from .regions import choose_row, region_exact, region_reason

MICRO = Decimal("0.000001")


@dataclass(frozen=True)
class InstanceRow:
    provider: str
    instance: str
    #: the catalog model of its GPUs (``A10G``, ``H100-80GB``)
    gpu_model: str
    gpus: int
    per_hour: Decimal
    market: str
    region: str
    source: str
    as_of: str | None
    confidence: str
    #: ISO 4217 code of the price (``per_hour`` is in this currency), the same as the
    #: provider's per-GPU rows
    currency: str = DEFAULT_CURRENCY
    #: why this shape cannot be rented at this market (retired, sold as Spot only...);
    #: ``""``: it is for sale. Such a row is never used to price a detected machine.
    not_for_sale: str = ""


@dataclass(frozen=True)
class InstancePricing:
    """How a whole-instance row prices the meter: a price per GPU and a base price."""

    row: InstanceRow
    per_gpu: Price
    base_per_hour: Decimal


def load_instance_rows(path: str | Path | None = None) -> tuple[InstanceRow, ...]:
    """The ``[[instance]]`` rows of the shipped catalog or of the TOML file at ``path``."""
    data, origin = read_catalog_toml(path)
    raw_rows = data.get("instance", [])
    if not isinstance(raw_rows, list):
        raise CatalogError(f"{origin}: 'instance' must be [[instance]] tables")
    rows = tuple(_row(f"{origin}, instance row {i}", raw) for i, raw in enumerate(raw_rows, 1))
    # one provider's prices are in one currency: its per-GPU rows' and its instance rows'
    currencies: dict[str, str] = {}
    price_rows = data.get("price", [])
    for raw in price_rows if isinstance(price_rows, list) else []:
        if isinstance(raw, dict) and "provider" in raw:
            currencies.setdefault(str(raw["provider"]), str(raw.get("currency", "USD")))
    for row in rows:
        seen = currencies.setdefault(row.provider, row.currency)
        if seen != row.currency:
            raise CatalogError(
                f"{origin}: instance {row.instance!r} of {row.provider!r} is priced in "
                f"{row.currency}, the provider's prices in {seen}; one provider's prices "
                "must be in one currency"
            )
    return rows


def _row(where: str, raw: object) -> InstanceRow:
    row = read_row(
        where,
        raw,
        required=("provider", "instance", "gpu_model", "gpus", "market"),
        usd_key="usd_per_hour",
        key="price_per_hour",
    )
    gpus = row.table["gpus"]
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise CatalogError(f"{where}: gpus must be a whole number >= 1")
    return InstanceRow(
        provider=str(row.table["provider"]),
        instance=str(row.table["instance"]),
        gpu_model=str(row.table["gpu_model"]),
        gpus=gpus,
        per_hour=row.price,
        market=row.market,
        region=str(row.table.get("region", "")),
        source=row.source,
        as_of=row.as_of,
        confidence=row.confidence,
        currency=row.currency,
        not_for_sale=str(row.table.get("not_for_sale", "")),
    )


def find_instance(
    rows: tuple[InstanceRow, ...], *, provider: str, instance: str, market: str, region: str = ""
) -> InstanceRow | None:
    """The row of this instance type at this market (instance names compare as written) in
    ``region``, for sale or not (:attr:`InstanceRow.not_for_sale`); where the region has no
    row or is not known, the dearest region's (:func:`~.catalog.choose_row`;
    :func:`~.catalog.region_exact` says which)."""
    candidates = [
        row
        for row in rows
        if row.provider == provider and row.instance == instance and row.market == market
    ]
    return choose_row(candidates, region, _per_instance)


def _per_instance(row: InstanceRow) -> Decimal:
    return row.per_hour


def whole_instance(
    row: InstanceRow, *, spot: bool = False, region: str | None = None
) -> InstancePricing:
    """The row's price as one share per GPU plus the remainder (exact to the micro-dollar).
    ``spot``: an on-demand row pricing a spot instance of the same type, the most it can
    cost (an upper bound, labelled so). ``region``: the machine's (``""``: not known); a row
    of another region prices it at an upper bound, labelled with both regions."""
    share = (row.per_hour / row.gpus).quantize(MICRO, rounding=ROUND_DOWN)
    base = row.per_hour - share * row.gpus
    where = " ".join(x for x in (row.provider, row.instance, row.market, row.region) if x)
    date = f"as of {row.as_of}" if row.as_of else "undated"
    per_instance = f"{row.per_hour} {row.currency}/h per instance"
    source = f"{where}: {per_instance} / {row.gpus} GPU(s), {date}"
    if row.source:
        source += f"; source: {row.source}"
    elsewhere = region is not None and not region_exact(row.region, region)
    reason = region_reason(region or "") if elsewhere else REASON_SPOT if spot else ""
    values: tuple[tuple[str, str], ...] = ()
    if elsewhere:
        values = (
            ("as_of", row.as_of or "undated"),
            ("market", row.market),
            ("price", rate_amount(share, currency_symbol(row.currency))),
            ("provider", row.provider),
            ("region", region or ""),
            ("row_region", row.region),
        )
    if reason:
        source = f"upper bound: {source}"
    price = Price(
        model=row.gpu_model,
        per_gpu_hour=share,
        source=source,
        as_of=row.as_of,
        confidence=row.confidence,
        basis=BASIS_UPPER_BOUND if reason else BASIS_CATALOG,
        reason_msgid=reason,
        reason_values=values,
        currency=row.currency,
    )
    return InstancePricing(row=row, per_gpu=price, base_per_hour=base)


@dataclass(frozen=True)
class AdminPrices:
    """The price settings an admin set (``None``/``False``: left to their defaults)."""

    provider: str | None = None
    market: str | None = None
    instance: str | None = None
    base_set: bool = False
    #: ``c.GpuCost.price_region``: the region whose rows price the machine
    region: str | None = None


#: why a detected machine is not priced whole (the plan's note), translated where shown
NOTE_UNKNOWN_PROVIDER = N_("the catalog has no {provider} prices: {chosen} GPU prices")
NOTE_SHARED = N_("this server runs in a Kubernetes pod: per-GPU prices")
NOTE_NO_INSTANCE_ROW = N_("no whole-instance price for {instance} {market}: per-GPU prices")
NOTE_NOT_FOR_SALE = N_("{instance} is not sold {market} ({why}): per-GPU prices")
NOTE_NO_MACHINE_ROW = N_(
    "no whole-instance price for this {provider} {market} machine: per-GPU prices"
)
NOTE_SPOT_AT_ON_DEMAND = N_(
    "no whole-instance price for {instance} spot: priced at on-demand, the most it can cost"
)


@dataclass(frozen=True)
class PricePlan:
    """Which prices are in force, and what the UI says about them."""

    provider: str
    market: str
    #: the detected instance's whole-instance row (``None``: per-GPU prices)
    whole: InstancePricing | None = None
    #: why the machine is not priced whole, as a message of the catalog (``""``: it is,
    #: or none was detected); translated where it is shown (:meth:`note_in`)
    note_msgid: str = ""
    #: the values the message fills in
    note_values: tuple[tuple[str, str], ...] = ()
    #: the VM of a machine with attached GPUs (GCP's N1 with a T4): its row is the base
    #: price, each GPU is priced at its own row (:mod:`.attached_gpus`); ``None``: not one
    vm: VmPricing | None = None
    #: the region whose rows price the machine (the admin's ``price_region``, else the
    #: detected machine's, when it is at the provider priced); ``""``: not known
    region: str = ""

    def base_per_hour(self, otherwise: Decimal) -> Decimal:
        """The machine's base price: the remainder of its whole-instance row, or its VM's
        price, else ``otherwise`` (the admin's base price)."""
        if self.whole is not None:
            return self.whole.base_per_hour
        if self.vm is not None:
            return self.vm.per_hour
        return otherwise

    @property
    def note(self) -> str:
        """The note in English (for the log)."""
        return self.note_in(lambda msgid: msgid)

    def note_in(self, translate: Callable[[str], str]) -> str:
        """The note in the language of ``translate`` (e.g. :func:`~jupyter_gpucost.core.i18n._`)."""
        return (
            translate(self.note_msgid).format(**dict(self.note_values)) if self.note_msgid else ""
        )


def plan_prices(
    admin: AdminPrices,
    *,
    provider: str | None,
    instance_type: str,
    market: str,
    shared: bool,
    providers: tuple[str, ...],
    rows: tuple[InstanceRow, ...],
    default_provider: str = "aws",
    vms: tuple[VmRow, ...] = (),
    region: str = "",
) -> PricePlan:
    """The admin's settings win; then the detected machine; then the defaults.

    ``provider`` etc. describe the detected machine (``provider=None``: none detected;
    ``region``: its region, ``""`` not known). A machine is priced whole only when the admin
    set none of provider, instance or base price, it is its own (not a shared Kubernetes
    node) and the catalog has its row, for sale at that market; a row of another region than
    the machine's prices it at an upper bound, labelled (:func:`whole_instance`); a machine
    type with a ``[[vm]]`` row (an N1 VM with GPUs attached) is priced VM + each GPU at its
    own row.
    """
    if provider is None:
        chosen = admin.provider or default_provider
        return PricePlan(chosen, admin.market or "on-demand", region=admin.region or "")
    market = admin.market or market or "on-demand"
    known = provider in providers
    chosen = admin.provider or (provider if known else default_provider)
    where = admin.region or (region if chosen == provider else "")
    if admin.provider or admin.instance or admin.base_set:
        # priced by the admin's settings alone: a detected market (read from the
        # environment a user may control) does not lower them to spot
        return PricePlan(chosen, admin.market or "on-demand", region=where)
    if not known:
        values = (("provider", provider), ("chosen", chosen))
        return PricePlan(
            chosen, market, note_msgid=NOTE_UNKNOWN_PROVIDER, note_values=values, region=where
        )
    if shared:
        return PricePlan(chosen, market, note_msgid=NOTE_SHARED, region=where)
    row = find_instance(
        rows, provider=provider, instance=instance_type, market=market, region=where
    )
    if row is not None and row.not_for_sale:
        why = (("instance", instance_type), ("market", market), ("why", row.not_for_sale))
        return PricePlan(
            chosen, market, note_msgid=NOTE_NOT_FOR_SALE, note_values=why, region=where
        )
    if row is None and market == "spot" and instance_type:
        # spot prices change by the hour: the same instance on-demand is the most it costs
        on_demand = find_instance(
            rows, provider=provider, instance=instance_type, market="on-demand", region=where
        )
        if on_demand is not None and not on_demand.not_for_sale:
            return PricePlan(
                chosen,
                market,
                whole=whole_instance(on_demand, spot=True, region=where),
                note_msgid=NOTE_SPOT_AT_ON_DEMAND,
                note_values=(("instance", instance_type),),
                region=where,
            )
    if row is None and instance_type:
        attached = _vm_plan(vms, chosen, provider, instance_type, market, where)
        if attached is not None:
            return attached
    if row is None:
        if instance_type:
            values = (("instance", instance_type), ("market", market))
            return PricePlan(
                chosen, market, note_msgid=NOTE_NO_INSTANCE_ROW, note_values=values, region=where
            )
        values = (("provider", provider), ("market", market))
        return PricePlan(
            chosen, market, note_msgid=NOTE_NO_MACHINE_ROW, note_values=values, region=where
        )
    return PricePlan(chosen, market, whole=whole_instance(row, region=where), region=where)


def _vm_plan(
    vms: tuple[VmRow, ...], chosen: str, provider: str, instance_type: str, market: str, where: str
) -> PricePlan | None:
    """A machine type with a ``[[vm]]`` row priced VM + each GPU at its own row (labelled
    where the row is of another region, or on-demand for spot); ``None``: it has none."""
    vm = vm_pricing(vms, provider=provider, machine_type=instance_type, market=market, region=where)
    if vm is None:
        return None
    if vm.elsewhere:
        row_of = vm.row
        where_from = (
            ("as_of", row_of.as_of or "undated"),
            ("market", row_of.market),
            ("price", rate_amount(row_of.per_hour, currency_symbol(row_of.currency))),
            ("provider", row_of.provider),
            ("region", where),
            ("row_region", row_of.region),
        )
        return PricePlan(
            chosen,
            market,
            vm=vm,
            note_msgid=region_reason(where),
            note_values=where_from,
            region=where,
        )
    if vm.upper_bound:
        named = (("instance", instance_type),)
        return PricePlan(
            chosen,
            market,
            vm=vm,
            note_msgid=NOTE_SPOT_AT_ON_DEMAND,
            note_values=named,
            region=where,
        )
    return PricePlan(chosen, market, vm=vm, region=where)
