"""The billed rate of the rental this server runs on: which API to ask, with which key,
and the answer kept for an hour (:class:`~.spot_prices.QuoteCache`, the file the AWS spot
quotes are kept in), so that a restart inside the hour does not ask again.

Asked only for a detected Vast.ai instance, RunPod pod or Lambda instance of its own (not a
Kubernetes pod on a shared node), with the key the instance has (``CONTAINER_API_KEY``,
``RUNPOD_API_KEY``, ``LAMBDA_API_KEY``) or the admin's setting. The keys and ids are read
once, at start: nothing a notebook later puts in the server's environment is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from ..core.billed_rate import PROVIDER_NAMES, BilledRate, RateRefused
from ..core.machine import Machine
from . import lambda_cloud
from .runpod_rate import RUNPOD_GRAPHQL, read_runpod_rate
from .spot_prices import QuoteCache
from .vast_rate import VAST_API, read_vast_rate

#: the providers asked
PROVIDERS = tuple(PROVIDER_NAMES)


@dataclass(frozen=True)
class RateSettings:
    """Where each API is and the keys it takes (read once, at start)."""

    enabled: bool = True
    vast_api_url: str = VAST_API
    vast_api_key: str = ""
    runpod_graphql_url: str = RUNPOD_GRAPHQL
    runpod_api_key: str = ""
    lambda_api_url: str = lambda_cloud.LAMBDA_API
    lambda_api_key: str = ""
    timeout_s: float = 5.0
    #: seconds between two readings (and how long one is kept)
    interval_s: float = 3600.0


def applies(machine: Machine | None, settings: RateSettings) -> bool:
    """Whether this machine's provider tells its billed rate and it is asked."""
    return (
        settings.enabled
        and machine is not None
        and machine.provider in PROVIDERS
        and not machine.shared
        and bool(machine.instance_id)
    )


def ask(machine: Machine, settings: RateSettings) -> BilledRate:
    """The provider's answer (blocking; RateRefused says why there is none)."""
    if machine.provider == "vast":
        return read_vast_rate(
            settings.vast_api_url, settings.vast_api_key, machine.instance_id, settings.timeout_s
        )
    if machine.provider == "runpod":
        return read_runpod_rate(
            settings.runpod_graphql_url,
            settings.runpod_api_key,
            machine.instance_id,
            settings.timeout_s,
        )
    if machine.provider == "lambda":
        return lambda_cloud.read_rate(
            settings.lambda_api_url,
            settings.lambda_api_key,
            machine.instance_id,
            settings.timeout_s,
        )
    raise RateRefused(f"{machine.provider} tells no billed rate")


def _key(machine: Machine) -> str:
    return f"billed/{machine.provider}/{machine.instance_id}"


def cached(machine: Machine, cache: QuoteCache, now: datetime) -> BilledRate | None:
    entry = cache.entry(_key(machine), now)
    if entry is None:
        return None
    try:
        rate = BilledRate(
            machine.provider,
            Decimal(entry["usd_per_hour"]),
            datetime.fromisoformat(entry["asked"]),
            entry["gpu_model"],
            int(entry["gpus"]),
            machine.instance_id,
            entry.get("detail", ""),
        )
    except (KeyError, ValueError, InvalidOperation):
        return None
    if not rate.usd_per_hour.is_finite() or rate.usd_per_hour <= 0:
        return None
    return rate


def billed_rate(
    machine: Machine, settings: RateSettings, cache: QuoteCache, now: datetime | None = None
) -> BilledRate:
    """The kept rate while younger than the interval, else the provider's (then kept)."""
    kept = cached(machine, cache, now or datetime.now(UTC))
    if kept is not None:
        return kept
    rate = ask(machine, settings)
    cache.put_entry(
        _key(machine),
        {
            "usd_per_hour": str(rate.usd_per_hour),
            "asked": rate.read_at.isoformat(),
            "gpu_model": rate.gpu_model,
            "gpus": str(rate.gpus),
            "detail": rate.detail,
        },
    )
    return rate
