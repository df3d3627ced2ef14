"""The prices a kernel uses to price its cells.

The server extension publishes the prices in force (after the admin's provider, market,
instance and overrides) in the environment every kernel inherits, as JSON in
``JUPYTER_GPUCOST_PRICES``. Without a server (plain IPython, a script) the shipped catalog
is used with its defaults (AWS on-demand), and the report says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

ENV_PRICES = "JUPYTER_GPUCOST_PRICES"


@dataclass(frozen=True)
class KernelPrices:
    #: GPU UUID -> (name, price per hour or None when unpriced)
    gpus: dict[str, tuple[str, Decimal | None]] = field(default_factory=dict)
    base_usd_per_hour: Decimal = Decimal(0)
    currency_symbol: str = "$"
    #: where the prices come from, for the report
    source: str = ""
    from_server: bool = False
    #: the server's GPUs are simulated (a replayed trace), not read from a driver
    simulated: bool = False
    #: what simulates them (the trace's description), when simulated
    simulated_by: str = ""

    def rate_usd_per_hour(self, uuids: list[str] | None = None) -> Decimal:
        chosen = self.gpus if uuids is None else {u: self.gpus[u] for u in uuids if u in self.gpus}
        return sum((p for _, p in chosen.values() if p is not None), Decimal(0)) + (
            self.base_usd_per_hour
        )


def server_payload(
    gpus: list[tuple[str, str, Decimal | None]],
    base_usd_per_hour: Decimal,
    currency_symbol: str,
    source: str,
    *,
    simulated: bool = False,
    simulated_by: str = "",
) -> str:
    """What the server puts in ``JUPYTER_GPUCOST_PRICES`` (prices as exact strings)."""
    return json.dumps(
        {
            "simulated": simulated,
            "simulated_by": simulated_by,
            "gpus": [
                {"uuid": u, "name": n, "usd_per_hour": None if p is None else str(p)}
                for u, n, p in gpus
            ],
            "base_usd_per_hour": str(base_usd_per_hour),
            "currency_symbol": currency_symbol,
            "source": source,
        }
    )


def from_environment(environ: dict[str, str] | None = None) -> KernelPrices | None:
    raw = (environ if environ is not None else os.environ).get(ENV_PRICES)
    if not raw:
        return None
    try:
        data: dict[str, Any] = json.loads(raw)
        gpus = {
            g["uuid"]: (
                g["name"],
                None if g["usd_per_hour"] is None else Decimal(g["usd_per_hour"]),
            )
            for g in data.get("gpus", [])
        }
        return KernelPrices(
            gpus=gpus,
            base_usd_per_hour=Decimal(data.get("base_usd_per_hour", "0")),
            currency_symbol=data.get("currency_symbol", "$"),
            source=data.get("source", "the server's prices"),
            from_server=True,
            simulated=data.get("simulated") is True,
            simulated_by=str(data.get("simulated_by") or ""),
        )
    except (ValueError, KeyError, TypeError, ArithmeticError):
        return None


def from_catalog(readings: list[tuple[str, str, int | None]]) -> KernelPrices:
    """Prices from the shipped catalog for (uuid, NVML name, memory) of the GPUs here."""
    from ..core.catalog import PricePolicy, load_catalog

    policy = PricePolicy(catalog=load_catalog())
    gpus: dict[str, tuple[str, Decimal | None]] = {}
    for uuid, name, memory in readings:
        price = policy.price_for(name, memory)
        gpus[uuid] = (name, None if price is None else price.usd_per_gpu_hour)
    return KernelPrices(
        gpus=gpus,
        source="the shipped catalog (aws on-demand): no jupyter-gpucost server for this kernel",
        from_server=False,
    )
