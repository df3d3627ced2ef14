"""GPUs attached to a VM: how GCP bills an N1 VM with GPUs (the VM, plus each GPU).

GCP sells T4, V100, P100 and P4 GPUs as *accelerators* attached to an N1 VM: the bill has
one line for the VM's machine type (its vCPUs and memory) and one per attached GPU, each at
its own rate for the region and market. The machine type (``n1-standard-8``) does not say
how many GPUs are attached; NVML does.

The catalog holds the two halves (``jupyter_gpucost/data/prices.toml``):

* ``[[vm]]`` rows: a machine type's hourly price without GPUs (provider, machine type,
  market, region, source, date, confidence);
* ``[[price]]`` rows of the provider for each accelerator (``instance`` is GCP's accelerator
  type, ``nvidia-tesla-t4``): the price of one attached GPU.

This module owns the rule that composes them: the VM's row is the machine's base price and
every GPU is priced at its accelerator's row, so an ``n1-standard-8`` with one T4 costs the
VM + 1 × T4, with two T4s the VM + 2 × T4 (:func:`attached_total`). Where the VM has no row
the machine is priced per GPU and says so by name; a GPU without a row is priced at the
catalog's labelled upper bound (:func:`~.catalog.upper_bound`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from .catalog_file import CatalogError, read_catalog_toml, read_row
from .currency import DEFAULT_CURRENCY
from .regions import choose_row, region_exact


@dataclass(frozen=True)
class VmRow:
    """What a provider bills for one VM of a machine type, without its attached GPUs."""

    provider: str
    machine_type: str
    per_hour: Decimal
    market: str
    region: str
    source: str
    as_of: str | None
    confidence: str
    #: ISO 4217 code of the price, the provider's currency
    currency: str = DEFAULT_CURRENCY

    def describe(self) -> str:
        where = " ".join(x for x in (self.provider, self.machine_type, self.market, self.region))
        date = f"as of {self.as_of}" if self.as_of else "undated"
        text = f"{where}: VM {self.per_hour} {self.currency}/h without GPUs, {date}"
        return text + (f"; source: {self.source}" if self.source else "")


@dataclass(frozen=True)
class VmPricing:
    """The VM part of a machine with attached GPUs: its row, as the machine's base price."""

    row: VmRow
    #: a spot VM priced at its on-demand row (no spot row), or a row of another region than
    #: the machine's (:mod:`.regions`): the most it can cost
    upper_bound: bool = False
    #: the row is another region's than the machine's (or the machine's is not known)
    elsewhere: bool = False

    @property
    def per_hour(self) -> Decimal:
        return self.row.per_hour

    @property
    def source(self) -> str:
        text = f"{self.row.describe()}; each attached GPU at its own rate"
        return f"upper bound: {text}" if self.upper_bound else text


def load_vm_rows(path: str | Path | None = None) -> tuple[VmRow, ...]:
    """The ``[[vm]]`` rows of the shipped catalog or of the TOML file at ``path``."""
    data, origin = read_catalog_toml(path)
    raw_rows = data.get("vm", [])
    if not isinstance(raw_rows, list):
        raise CatalogError(f"{origin}: 'vm' must be [[vm]] tables")
    return tuple(_row(f"{origin}, vm row {i}", raw) for i, raw in enumerate(raw_rows, 1))


def _row(where: str, raw: object) -> VmRow:
    row = read_row(
        where,
        raw,
        required=("provider", "machine_type", "market", "region"),
        usd_key="usd_per_hour",
        key="price_per_hour",
    )
    return VmRow(
        provider=str(row.table["provider"]),
        machine_type=str(row.table["machine_type"]),
        per_hour=row.price,
        market=row.market,
        region=str(row.table["region"]),
        source=row.source,
        as_of=row.as_of,
        confidence=row.confidence,
        currency=row.currency,
    )


def find_vm(
    rows: Iterable[VmRow],
    *,
    provider: str,
    machine_type: str,
    market: str,
    region: str | None = None,
) -> VmRow | None:
    """The row of this machine type at this market (names compare as written); with
    ``region`` (``""``: not known), the row :func:`~.regions.choose_row` chooses for it."""
    matching = [
        row
        for row in rows
        if row.provider == provider and row.machine_type == machine_type and row.market == market
    ]
    if region is None:
        return matching[0] if matching else None
    return choose_row(matching, region, lambda row: row.per_hour)


def vm_pricing(
    rows: Iterable[VmRow],
    *,
    provider: str,
    machine_type: str,
    market: str,
    region: str | None = None,
) -> VmPricing | None:
    """The VM part of a detected machine: its row at its market; a spot VM without a spot
    row at its on-demand row, labelled the upper bound; a row of another region than
    ``region`` (``""``: not known) the upper bound too; ``None``: no row prices it."""
    rows = tuple(rows)
    for wanted in (market, "on-demand") if market == "spot" else (market,):
        row = find_vm(
            rows, provider=provider, machine_type=machine_type, market=wanted, region=region
        )
        if row is not None:
            elsewhere = region is not None and not region_exact(row.region, region)
            return VmPricing(row, upper_bound=elsewhere or wanted != market, elsewhere=elsewhere)
    return None


def attached_total(vm: VmPricing, gpu_prices: Iterable[Decimal]) -> Decimal:
    """What the machine bills per hour: the VM plus each attached GPU at its own price."""
    return vm.per_hour + sum(gpu_prices, Decimal(0))
