"""How the ``GpuCost`` traits are checked: one of a few words, or a number in a range.

The messages name the setting and what it accepts (``c.GpuCost.<name> = <value> is not
valid: use ...``): an invalid value stops the server at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traitlets import Bool, Float, HasTraits, Int, List, TraitError, Unicode, validate

from ..alerts.targets import TargetError, parse_targets
from ..core.billing import GRANULARITY_S_BOUNDS, MINIMUM_CHARGE_S_BOUNDS
from ..core.catalog import parse_price
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


# -- reading traits by name (the budget's and the exports' set-up) --------------------------


def trait_str(traits: HasTraits, name: str) -> str:
    return str(getattr(traits, name))


def trait_float(traits: HasTraits, name: str) -> float:
    return float(getattr(traits, name))


def trait_int(traits: HasTraits, name: str) -> int:
    return int(getattr(traits, name))


def trait_bool(traits: HasTraits, name: str) -> bool:
    return bool(getattr(traits, name))


def trait_strings(traits: HasTraits, name: str) -> list[str]:
    return [str(v) for v in getattr(traits, name)]


def trait_dict(traits: HasTraits, name: str) -> dict[str, object]:
    return {str(k): v for k, v in dict(getattr(traits, name)).items()}


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


class AlertTraits(HasTraits):
    """Where the person in charge is alerted (docs/alerts.md). The URLs hold secrets: they
    are never logged nor shown (the panel lists them masked)."""

    notify = List(
        Unicode(),
        config=True,
        help="Where alerts about this server's spending go: Apprise URLs (mailtos://, "
        "slack://, msteams://, lark://, dingtalk://, wecombot://, ntfy:// ...) or "
        "webhook(s)://host/path for the generic JSON webhook. Users cannot read these.",
    )
    notify_thresholds_pct = List(
        Int(),
        [50, 80, 100],
        config=True,
        help="Percentages of a budget at which the targets are alerted, once each.",
    )
    notify_spike_factor = Float(
        3.0,
        config=True,
        help="Alert when today's spend is above this many times the median day (of the last "
        "14 days with spend, at least 3; needs the ledger), 0 (never) to 1000.",
    )
    notify_user_targets = Bool(
        True,
        config=True,
        help="Let the user add targets for their own alerts from the panel.",
    )
    notify_state_path = Unicode(
        "",
        config=True,
        help="The JSON file keeping the alerts already sent and the user's own targets. "
        "Empty: <Jupyter data dir>/gpucost/alerts.json.",
    )

    @validate("notify")
    def _check_notify(self, proposal: dict[str, Any]) -> list[str]:
        try:
            return [t.url for t in parse_targets(proposal["value"], "c.GpuCost.notify")]
        except TargetError as e:
            raise TraitError(str(e)) from None

    @validate("notify_spike_factor")
    def _check_spike_factor(self, proposal: dict[str, Any]) -> float:
        value = float(proposal["value"])
        within("notify_spike_factor", value, 0, 1000, "a number from 0 (never) to 1000")
        return value

    @validate("notify_thresholds_pct")
    def _check_notify_thresholds(self, proposal: dict[str, Any]) -> list[int]:
        values = [int(v) for v in proposal["value"]]
        if not values or any(not 1 <= v <= 1000 for v in values):
            raise TraitError(
                f"c.GpuCost.notify_thresholds_pct = {proposal['value']!r} is not valid: use "
                "whole percentages from 1 to 1000, such as [50, 80, 100]."
            )
        return sorted(set(values))
