"""The rate a headless runner prices at: the kernel's prices, read in the runner's process.

The runner and the kernel it starts share the machine and the environment (the server's
prices when a server started them, else the catalog and the GPUs NVML or a simulated trace
shows), so both find the same rate by the same rule. The runner prices with it what it
meters itself (``jupyter gpucost run --budget``) and checks each record's rate against it
(:mod:`jupyter_gpucost.core.record_rules`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from ..core.currency import DEFAULT_CURRENCY


@dataclass(frozen=True)
class Priced:
    rate_per_hour: Decimal
    #: the GPUs with no price (a budget cannot be enforced over them)
    unpriced: list[str]
    simulated: bool
    #: each GPU's price (the model's name and its price per hour; ``None``: no price)
    gpus: tuple[tuple[str, Decimal | None], ...] = ()
    base_per_hour: Decimal = Decimal(0)
    priced_by: str = ""
    #: the currency of every amount of the run (ISO 4217) and the symbol written before them
    currency: str = DEFAULT_CURRENCY
    currency_symbol: str = "$"


def runner_prices() -> Priced:
    """The prices the kernel will use (same machine, same environment, same rule)."""
    from ..kernel.cell.measure import prices

    p = prices()
    unpriced = [name for name, price in p.gpus.values() if price is None]
    return Priced(
        p.rate_per_hour(),
        unpriced,
        p.simulated,
        gpus=tuple(p.gpus.values()),
        base_per_hour=p.base_per_hour,
        priced_by=p.source,
        currency=p.currency,
        currency_symbol=p.currency_symbol,
    )
