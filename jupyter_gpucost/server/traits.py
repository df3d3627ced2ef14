"""How the ``GpuCost`` traits are checked: one of a few words, or a number in a range.

The messages name the setting and what it accepts (``c.GpuCost.<name> = <value> is not
valid: use ...``): an invalid value stops the server at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traitlets import Dict, Float, HasTraits, Int, TraitError, Unicode, validate

from ..core.billing import GRANULARITY_S_BOUNDS, MINIMUM_CHARGE_S_BOUNDS
from ..core.catalog import MARKETS, parse_price
from ..core.currency import is_currency_code


def one_of(setting: str, raw: object, choices: tuple[str, ...]) -> str:
    value = str(raw).strip().lower()
    if value not in choices:
        raise TraitError(
            f"c.GpuCost.{setting} = {raw!r} is not valid: use one of {', '.join(choices)}."
        )
    return value


def currency_code(raw: object) -> str:
    """``c.GpuCost.currency``: an ISO 4217 code, or empty for the price provider's."""
    value = str(raw).strip()
    if value and not is_currency_code(value):
        raise TraitError(
            f"c.GpuCost.currency = {raw!r} is not valid: use an ISO 4217 code such as 'USD', "
            "'EUR' or 'CNY', or leave it empty for the price provider's currency."
        )
    return value


def within(setting: str, value: float, low: float, high: float, accepted: str) -> None:
    if not low <= value <= high:
        raise TraitError(f"c.GpuCost.{setting} = {value!r} is not valid: use {accepted}.")


@dataclass(frozen=True)
class Range:
    """A number trait's type (``int`` or ``float``), bounds and what the message says."""

    kind: type[int] | type[float]
    low: float
    high: float
    accepted: str


#: the number traits checked against bounds
RANGES: dict[str, Range] = {
    "ledger_flush_interval_s": Range(float, 0.5, 300, "a number of seconds from 0.5 to 300"),
    "carbon_intensity_g_per_kwh": Range(float, 0, 2000, "grams per kWh from 0 to 2000"),
    "export_part_size_mb": Range(int, 5, 512, "a whole number of MiB from 5 to 512"),
    "export_concurrency": Range(int, 1, 16, "a whole number from 1 to 16"),
    "export_retries": Range(int, 0, 10, "a whole number from 0 to 10"),
    "export_on_budget_timeout_s": Range(float, 1, 86_400, "seconds from 1 to 86400"),
    "sample_interval_s": Range(float, 0.1, 3600, "a number of seconds from 0.1 to 3600"),
    "hub_report_interval_s": Range(float, 1, 3600, "a number of seconds from 1 to 3600"),
    "billing_granularity_s": Range(
        int,
        *GRANULARITY_S_BOUNDS,
        f"a whole number of seconds from {GRANULARITY_S_BOUNDS[0]} (per-second billing) "
        f"to {GRANULARITY_S_BOUNDS[1]}",
    ),
    "minimum_charge_s": Range(
        int,
        *MINIMUM_CHARGE_S_BOUNDS,
        f"a whole number of seconds from {MINIMUM_CHARGE_S_BOUNDS[0]} (no minimum) "
        f"to {MINIMUM_CHARGE_S_BOUNDS[1]}",
    ),
}


def in_range(setting: str, raw: float | str) -> float:
    """The trait's value as its type, when it is within its bounds (else TraitError)."""
    bounds = RANGES[setting]
    value = bounds.kind(raw)
    within(setting, value, bounds.low, bounds.high, bounds.accepted)
    return value


def unknown_gpu_price(raw: object) -> float | None:
    """``c.GpuCost.unknown_gpu_usd_per_hour``: a price above 0, or None."""
    if raw is None:
        return None
    try:
        price = parse_price(raw, what="c.GpuCost.unknown_gpu_usd_per_hour")
    except ValueError as e:
        raise TraitError(f"{e}.") from None
    if price <= 0:
        raise TraitError(
            f"c.GpuCost.unknown_gpu_usd_per_hour = {raw!r} is not valid: use a price per hour "
            "above 0 (a GPU is never free), or None for the dearest GPU of the catalog."
        )
    return float(price)


class PricingTraits(HasTraits):
    """Which prices apply: the provider, market, row and region of the catalog, the
    admin's own prices, and how billed time is rounded. The app reads them once
    (:mod:`.settings`); their number bounds are :data:`RANGES`."""

    price_provider = Unicode(
        "aws",
        config=True,
        help="The cloud whose list prices apply (a provider of the price catalog, e.g. aws, "
        "gcp, azure, lambda, runpod).",
    )
    price_market = Unicode("on-demand", config=True, help="'on-demand' or 'spot' prices.")
    price_instance = Unicode(
        "",
        config=True,
        help="When the catalog has several rows for a GPU model at this provider, the "
        "instance name of the row to use (e.g. 'secure' or 'community' on runpod). Empty: "
        "the first row.",
    )
    price_region = Unicode(
        "",
        config=True,
        help="The region whose catalog rows price this server (e.g. 'eu-west-1', "
        "'westeurope'), where the machine's own region is not detected. Empty: the detected "
        "machine's region; if none, the dearest region's price, labelled as an upper bound.",
    )
    price_overrides = Dict(
        config=True,
        help="Hourly price per GPU that beats the catalog, keyed by catalog model "
        "(e.g. 'A100-80GB') or by the exact NVML device name: "
        "{'A100-80GB': 2.10, 'NVIDIA L40S': '1.05'}.",
    )
    price_catalog_path = Unicode(
        "",
        config=True,
        help="A TOML price catalog to use instead of the shipped one (same format as "
        "jupyter_gpucost/data/prices.toml). Empty: the shipped catalog.",
    )
    billing_granularity_s = Int(
        1,
        config=True,
        help="Billed time is rounded up to a multiple of this many seconds, 1 (per-second "
        "billing) to 86400.",
    )
    minimum_charge_s = Int(
        60,
        config=True,
        help="Minimum billed time per session, in seconds (AWS and GCP: 60), 0 (no minimum) "
        "to 86400.",
    )
    base_price_usd_per_hour = Float(
        0.0,
        config=True,
        help="Hourly price of the instance apart from its GPUs (CPU, RAM, disk), added to "
        "the cost. 0 to count GPUs only.",
    )

    @validate("price_market")
    def _check_market(self, proposal: dict[str, Any]) -> str:
        return one_of("price_market", proposal["value"], MARKETS)

    @validate("base_price_usd_per_hour")
    def _check_base(self, proposal: dict[str, Any]) -> float:
        try:
            parse_price(proposal["value"], what="c.GpuCost.base_price_usd_per_hour")
        except ValueError as e:
            raise TraitError(f"{e}.") from None
        return float(proposal["value"])

    @validate("price_overrides")
    def _check_overrides(self, proposal: dict[str, Any]) -> dict[str, Any]:
        value = proposal["value"]
        for key, price in value.items():
            try:
                parse_price(price, what=f"c.GpuCost.price_overrides[{key!r}]")
            except ValueError as e:
                raise TraitError(f"{e}.") from None
        return dict(value)


class CurrencyTraits(HasTraits):
    """The session's currency: one code for every amount, and the symbol before them; and
    the price, in that currency, of a GPU no price fits."""

    currency = Unicode("", config=True, help="ISO 4217 code of all amounts; empty: the provider's.")
    currency_symbol = Unicode("", config=True, help="Symbol before amounts; empty: the currency's.")
    unknown_gpu_usd_per_hour = Float(
        None,
        allow_none=True,
        config=True,
        help="The hourly price of a GPU whose model has no price anywhere in the catalog "
        "(an unknown model) and no override, in the session's currency like every amount "
        "(no conversion); shown labelled as an upper bound. None: the dearest GPU of the "
        "catalog in that currency.",
    )

    @validate("currency")
    def _check_currency(self, proposal: dict[str, Any]) -> str:
        return currency_code(proposal["value"])

    @validate("unknown_gpu_usd_per_hour")
    def _check_unknown_gpu(self, proposal: dict[str, Any]) -> float | None:
        return unknown_gpu_price(proposal["value"])
