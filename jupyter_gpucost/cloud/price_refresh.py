"""The detected instance's price, refreshed at start from its cloud's public price feed.

On by default (``c.GpuCost.refresh_instance_price``). Only Azure has a feed that needs no
credentials and prices one size in one region and priority (:mod:`.azure_prices`: a Spot
VM's meter ends in ``Spot``); the catalog's row of the size gives its GPUs (model and
count), the feed its price. The answer is cached in a JSON file for an hour, so a restart
does not ask again, and asked again every hour; the row it makes is ``listed``,
dated the day the feed was asked, and its source says it was refreshed (and, from the
cache, when). Any failure keeps the catalog's row: the reason is returned for the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

from ..core.instance_prices import InstanceRow, find_instance
from .azure_prices import RETAIL_PRICES_URL, FeedError, VmPrice, fetch_vm_prices

#: how long a price asked of the feed is used without asking again
CACHE_MAX_AGE = timedelta(hours=1)
#: providers with a public feed this module asks
FEEDS = ("azure",)


@dataclass(frozen=True)
class RefreshSettings:
    enabled: bool = False
    #: Azure's Retail Prices API (a loopback stand-in in tests)
    azure_url: str = RETAIL_PRICES_URL
    #: the JSON file of the feed's answers (``""``: no cache)
    cache_path: str = ""
    timeout_s: float = 5.0


@dataclass(frozen=True)
class Refreshed:
    #: the row to use (``None``: keep the catalog's)
    row: InstanceRow | None
    #: what happened, for the log
    message: str


Fetch = Callable[[str, str, str], dict[tuple[str, str], VmPrice]]


def _fetch(settings: RefreshSettings) -> Fetch:
    def fetch(provider: str, region: str, sku: str) -> dict[tuple[str, str], VmPrice]:
        return fetch_vm_prices(region, [sku], base=settings.azure_url, timeout_s=settings.timeout_s)

    return fetch


def _key(provider: str, region: str, sku: str, market: str) -> str:
    return "|".join((provider, region, sku, market))


def _read_cache(path: str) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): {str(a): str(b) for a, b in v.items()}
        for k, v in data.items()
        if isinstance(v, dict)
    }


def _write_cache(path: str, cache: dict[str, dict[str, str]]) -> None:
    folder = Path(path).parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".prices-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _cached(
    entry: dict[str, str], now: datetime, max_age: timedelta = CACHE_MAX_AGE
) -> tuple[VmPrice, datetime] | None:
    try:
        fetched = datetime.fromisoformat(entry["fetched"])
        price = Decimal(entry["usd_per_hour"])
        vm = VmPrice(
            entry["sku"],
            entry["region"],
            entry["market"],
            price,
            entry["meter"],
            entry["effective"],
        )
    except (KeyError, ValueError, InvalidOperation):
        return None
    if fetched.tzinfo is None or not timedelta(0) <= now - fetched <= max_age:
        return None
    if not price.is_finite() or price <= 0:
        return None
    return vm, fetched


def refresh_instance_row(
    rows: tuple[InstanceRow, ...],
    *,
    provider: str,
    instance: str,
    market: str,
    region: str,
    settings: RefreshSettings,
    now: datetime | None = None,
    fetch: Fetch | None = None,
    max_age: timedelta = CACHE_MAX_AGE,
) -> Refreshed:
    """The detected instance's row with the feed's price (from the cache while it is
    younger than ``max_age``), or why the catalog's row stays."""
    now = now or datetime.now(UTC)
    if provider not in FEEDS:
        return Refreshed(None, f"{provider} has no public price feed: the catalog's price")
    if not (instance and region and market):
        return Refreshed(None, "the machine's size, region or market is unknown")
    base = find_instance(rows, provider=provider, instance=instance, market=market) or (
        find_instance(rows, provider=provider, instance=instance, market="on-demand")
    )
    if base is None:
        return Refreshed(None, f"the catalog has no row of {instance}: its GPUs are unknown")
    if base.not_for_sale:
        return Refreshed(None, f"{instance} is not for sale ({base.not_for_sale})")
    key = _key(provider, region, instance, market)
    cache = _read_cache(settings.cache_path) if settings.cache_path else {}
    hit = _cached(cache[key], now, max_age) if key in cache else None
    if hit is not None:
        vm, fetched = hit
        how = f"refreshed from {settings.azure_url} at {fetched:%Y-%m-%d %H:%M} UTC (cached)"
    else:
        try:
            found = (fetch or _fetch(settings))(provider, region, instance)
        except (FeedError, ValueError) as e:
            return Refreshed(None, f"the price feed could not be read: {e}")
        if (instance, market) not in found:
            return Refreshed(None, f"the price feed lists no {market} price of {instance}")
        vm, fetched = found[(instance, market)], now
        how = f"refreshed from {settings.azure_url} at {fetched:%Y-%m-%d %H:%M} UTC"
        if settings.cache_path:
            cache[key] = {
                "sku": vm.sku,
                "region": vm.region,
                "market": vm.market,
                "usd_per_hour": str(vm.usd_per_hour),
                "meter": vm.meter,
                "effective": vm.effective,
                "fetched": fetched.isoformat(),
            }
            # a cache that cannot be written: the price holds, the next start asks again
            with contextlib.suppress(OSError):
                _write_cache(settings.cache_path, cache)
    source = f"Azure Retail Prices API, meter '{vm.meter}', Linux, effective {vm.effective}; {how}"
    row = replace(
        base,
        per_hour=vm.usd_per_hour,
        market=market,
        region=region,
        source=source,
        as_of=fetched.date().isoformat(),
        confidence="listed",
    )
    return Refreshed(row, f"{instance} {market} {region}: {vm.usd_per_hour} USD/h, {how}")


def with_row(rows: tuple[InstanceRow, ...], row: InstanceRow) -> tuple[InstanceRow, ...]:
    """``rows`` with ``row`` in place of the one of its provider, instance and market."""
    same = (row.provider, row.instance, row.market)
    kept = tuple(r for r in rows if (r.provider, r.instance, r.market) != same)
    return (row, *kept)
