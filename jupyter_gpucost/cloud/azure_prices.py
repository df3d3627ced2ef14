"""Azure's Retail Prices API: the public hourly price of a VM size, no credentials.

``GET https://prices.azure.com/api/retail/prices?$filter=...`` answers JSON pages of at most
100 items (Microsoft's "Azure Retail Prices overview"; the API version is left to its
default)::

    {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
     "Items": [{"currencyCode": "USD", "retailPrice": 3.673, "unitPrice": 3.673,
                "armRegionName": "eastus", "location": "US East",
                "effectiveStartDate": "2022-06-01T00:00:00Z", "meterName": "NC24ads A100 v4",
                "productName": "Virtual Machines NCadsA100v4 Series",
                "skuName": "NC24ads A100 v4", "serviceName": "Virtual Machines",
                "unitOfMeasure": "1 Hour", "type": "Consumption",
                "isPrimaryMeterRegion": true, "armSkuName": "Standard_NC24ads_A100_v4"}, ...],
     "NextPageLink": "https://prices.azure.com:443/api/retail/prices?$filter=...&$skip=100",
     "Count": 100}

A size has several items in a region: Linux pay-as-you-go (``type`` ``Consumption``, a
``productName`` not ending in ``Windows``, a ``meterName`` with no ``Spot`` or ``Low
Priority``), its Spot price (``meterName`` ending in ``Spot``), Windows, Low Priority,
Dev/Test and reservations. Only the Linux on-demand and Spot prices in USD per hour are
taken, read exactly (as decimals) and rounded up to the micro-dollar where the API gives
more digits (a price errs high, never low).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from urllib.parse import urlencode, urlsplit

from .http import HttpFailure, request

RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
#: more pages than a filtered query for a region's GPU sizes ever needs
MAX_PAGES = 50
#: sizes asked for per query (a filter's length is bounded by the URL's)
SKUS_PER_QUERY = 10
MICRO = Decimal("0.000001")


class FeedError(Exception):
    """The price feed cannot be used: no answer, not its JSON, or a page off its host."""


@dataclass(frozen=True)
class VmPrice:
    """One VM size's hourly price in a region, as the feed gives it."""

    sku: str
    region: str
    #: ``on-demand`` or ``spot``
    market: str
    usd_per_hour: Decimal
    #: the feed's meter, e.g. ``NC24ads A100 v4 Spot``
    meter: str
    #: the date the price took effect (``effectiveStartDate``), ISO
    effective: str


def query_url(base: str, region: str | None, skus: Sequence[str]) -> str:
    """The first page's URL: the Consumption prices of ``skus`` in ``region`` (``None``:
    in every region that sells them)."""
    for name in (*((region,) if region is not None else ()), *skus):
        # the values go into an OData string literal: no quote may close it
        if not name or "'" in name:
            raise ValueError(f"{name!r} cannot be asked of the price feed")
    sizes = " or ".join(f"armSkuName eq '{sku}'" for sku in skus)
    where = "" if region is None else f"and armRegionName eq '{region}' "
    odata = f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' {where}and ({sizes})"
    return f"{base}?{urlencode({'$filter': odata})}"


def parse_page(text: str) -> tuple[list[Mapping[str, object]], str]:
    """A page's items and its next page's link (``""``: the last page)."""
    try:
        page = json.loads(text, parse_float=Decimal)
    except (ValueError, RecursionError):
        raise FeedError("the answer is not JSON") from None
    if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
        raise FeedError("the answer has no Items")
    items: list[Mapping[str, object]] = [i for i in page["Items"] if isinstance(i, dict)]
    link = page.get("NextPageLink")
    return items, link if isinstance(link, str) else ""


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, f"{host}:{port}"


Get = Callable[[str], str]


def _get(timeout_s: float) -> Get:
    def get(url: str) -> str:
        try:
            answer = request(
                "GET", url, headers={"Accept": "application/json"}, timeout_s=timeout_s
            )
        except HttpFailure as e:
            raise FeedError(str(e)) from None
        if answer.status != 200:
            raise FeedError(f"GET {url} answered {answer.status}: {answer.snippet()}")
        return answer.body

    return get


def fetch_items(
    first_url: str, *, get: Get | None = None, timeout_s: float = 30.0
) -> list[Mapping[str, object]]:
    """Every item of the query at ``first_url``, following ``NextPageLink`` on the same host
    (a link elsewhere is refused: the feed names where to go next, not an attacker)."""
    fetch = get or _get(timeout_s)
    origin = _origin(first_url)
    items: list[Mapping[str, object]] = []
    url = first_url
    for _ in range(MAX_PAGES):
        page, url = parse_page(fetch(url))
        items += page
        if not url:
            return items
        if _origin(url) != origin:
            raise FeedError(f"the next page is on another host: {url}")
    raise FeedError(f"more than {MAX_PAGES} pages: narrow the query")


def _market(item: Mapping[str, object]) -> str | None:
    """``on-demand`` or ``spot`` for a Linux pay-as-you-go item in USD per hour, else None."""
    meter = str(item.get("meterName", ""))
    sku_name = str(item.get("skuName", ""))
    if (
        item.get("type") != "Consumption"
        or item.get("currencyCode") != "USD"
        or item.get("unitOfMeasure") != "1 Hour"
        or str(item.get("productName", "")).endswith("Windows")
        or "Low Priority" in meter
        or "Low Priority" in sku_name
    ):
        return None
    return "spot" if meter.endswith(" Spot") or sku_name.endswith(" Spot") else "on-demand"


def vm_prices(items: Iterable[Mapping[str, object]], region: str) -> dict[tuple[str, str], VmPrice]:
    """The Linux on-demand and spot price of each size in ``region``, by (size, market);
    where a size has several such items, the one that took effect last."""
    found: dict[tuple[str, str], VmPrice] = {}
    for item in items:
        market = _market(item)
        sku = str(item.get("armSkuName", ""))
        price = item.get("retailPrice")
        if market is None or not sku or item.get("armRegionName") != region:
            continue
        if isinstance(price, bool) or not isinstance(price, Decimal | int):
            continue
        try:
            amount = Decimal(price).quantize(MICRO, rounding=ROUND_CEILING)
        except InvalidOperation:  # more digits than a price has
            continue
        if not amount.is_finite() or amount <= 0:
            continue
        effective = str(item.get("effectiveStartDate", ""))[:10]
        vm = VmPrice(sku, region, market, amount, str(item.get("meterName", "")), effective)
        seen = found.get((sku, market))
        if seen is None or vm.effective > seen.effective:
            found[(sku, market)] = vm
    return found


def fetch_vm_prices(
    region: str,
    skus: Sequence[str],
    *,
    base: str = RETAIL_PRICES_URL,
    get: Get | None = None,
    timeout_s: float = 30.0,
) -> dict[tuple[str, str], VmPrice]:
    """The Linux on-demand and spot prices of ``skus`` in ``region``, asked of the feed at
    ``base`` (a few sizes per query)."""
    found: dict[tuple[str, str], VmPrice] = {}
    for start in range(0, len(skus), SKUS_PER_QUERY):
        chunk = skus[start : start + SKUS_PER_QUERY]
        url = query_url(base, region, chunk)
        found.update(vm_prices(fetch_items(url, get=get, timeout_s=timeout_s), region))
    return found


def fetch_all_regions(
    skus: Sequence[str],
    *,
    base: str = RETAIL_PRICES_URL,
    get: Get | None = None,
    timeout_s: float = 30.0,
) -> dict[str, dict[tuple[str, str], VmPrice]]:
    """The Linux on-demand and spot prices of ``skus`` in every region the feed lists them
    in, by region (:func:`vm_prices` of each)."""
    items: list[Mapping[str, object]] = []
    for start in range(0, len(skus), SKUS_PER_QUERY):
        url = query_url(base, None, skus[start : start + SKUS_PER_QUERY])
        items += fetch_items(url, get=get, timeout_s=timeout_s)
    regions = sorted({str(i.get("armRegionName", "")) for i in items} - {""})
    return {region: vm_prices(items, region) for region in regions}
