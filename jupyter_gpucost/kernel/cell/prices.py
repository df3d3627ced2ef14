"""The prices a kernel uses to price its cells.

The server extension publishes the prices in force (after the admin's provider, market,
instance and overrides) in the environment every kernel inherits, as JSON in
``JUPYTER_GPUCOST_PRICES`` (the contract is :mod:`jupyter_gpucost.core.protocol`; the
kernel reads it through :mod:`jupyter_gpucost.kernel.link`). Without a server (plain
IPython, a script) the shipped catalog is used with its defaults (AWS on-demand), and the
report says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from ...core.currency import DEFAULT_CURRENCY
from ...core.i18n import _
from ...core.protocol import PublishedPrices
from ...core.saved_cost import ENV_REGION
from ..link import published_prices

#: a GPU's upper bound: the catalog's message and its values
Bound = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class KernelPrices:
    #: GPU UUID -> (name, price per hour or None when unpriced)
    gpus: dict[str, tuple[str, Decimal | None]] = field(default_factory=dict)
    base_per_hour: Decimal = Decimal(0)
    currency_symbol: str = "$"
    #: the currency of every price (ISO 4217), and so of the cells' records
    currency: str = DEFAULT_CURRENCY
    #: where the prices come from, for the report
    source: str = ""
    from_server: bool = False
    #: the server's GPUs are simulated (a replayed trace), not read from a driver
    simulated: bool = False
    #: what simulates them (the trace's description), when simulated
    simulated_by: str = ""
    #: GPU UUID -> why its price is an upper bound (no price fits it: the most it costs)
    bounds: dict[str, Bound] = field(default_factory=dict)

    def bound_reason(self, uuid: str, translate: Callable[[str], str] = _) -> str:
        """Why this GPU's price is an upper bound, translated (``""``: it is not one)."""
        msgid, values = self.bounds.get(uuid, ("", ()))
        return translate(msgid).format(**dict(values)) if msgid else ""

    def bound_notes(self) -> list[str]:
        """One line per GPU priced at an upper bound, for a report's notes."""
        text = _("{name} is priced at an upper bound: {reason}")
        return [
            text.format(name=self.gpus[uuid][0], reason=self.bound_reason(uuid))
            for uuid in self.bounds
            if uuid in self.gpus
        ]

    def rate_per_hour(self, uuids: list[str] | None = None) -> Decimal:
        chosen = self.gpus if uuids is None else {u: self.gpus[u] for u in uuids if u in self.gpus}
        return sum((p for _, p in chosen.values() if p is not None), Decimal(0)) + (
            self.base_per_hour
        )


def from_published(published: PublishedPrices) -> KernelPrices:
    """The prices the server handed down, as the kernel uses them."""
    return KernelPrices(
        gpus={g.uuid: (g.name, g.per_hour) for g in published.gpus},
        base_per_hour=published.base_per_hour,
        currency_symbol=published.currency_symbol,
        currency=published.currency,
        source=published.source,
        from_server=True,
        simulated=published.simulated,
        simulated_by=published.simulated_by,
        bounds={g.uuid: (g.bound_msgid, g.bound_values) for g in published.gpus if g.bound_msgid},
    )


def from_environment(environ: Mapping[str, str] | None = None) -> KernelPrices | None:
    """The server's prices from this kernel's environment, or None (no server, or a
    payload this version cannot read)."""
    published = published_prices(environ)
    return None if published is None else from_published(published)


def from_catalog(readings: list[tuple[str, str, int | None]]) -> KernelPrices:
    """Prices from the shipped catalog for (uuid, NVML name, memory) of the GPUs here."""
    from ...core.catalog import PricePolicy, load_catalog

    region = os.environ.get(ENV_REGION, "").strip()
    policy = PricePolicy(catalog=load_catalog(), region=region)
    where = region or "region not known: the dearest region's rows"
    gpus: dict[str, tuple[str, Decimal | None]] = {}
    bounds: dict[str, Bound] = {}
    for uuid, name, memory in readings:
        # no price that fits: an upper bound, labelled (never $0)
        price = policy.price_for(name, memory)
        gpus[uuid] = (name, None if price is None else price.per_gpu_hour)
        if price is not None and price.upper_bound:
            bounds[uuid] = (price.reason_msgid, price.reason_values)
    return KernelPrices(
        gpus=gpus,
        bounds=bounds,
        source=f"the shipped catalog (aws on-demand, {where}): no jupyter-gpucost server for "
        "this kernel",
        from_server=False,
    )
