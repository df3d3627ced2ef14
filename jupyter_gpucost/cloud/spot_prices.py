"""A spot machine's price from its provider, dated and cached: AWS's
``DescribeSpotPriceHistory`` (opt-in: ``c.GpuCost.aws_spot_prices``).

Asked only for a detected AWS spot instance, with the instance's own credentials (its
role, through boto3's usual chain) for its type, its availability zone and
``Linux/UNIX``, with ``StartTime`` now: the answer is the price in force now, with the time
it took effect. The role needs ``ec2:DescribeSpotPriceHistory``; without it, or without
boto3 (the ``aws`` extra), the machine stays priced at its on-demand upper bound, and the
log says why. A price of 0 or less is refused (never a silent $0).

Answers are kept in a small JSON file for ``CACHE_TTL_S`` so a restart does not ask again.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

#: an answer is asked again after this many seconds
CACHE_TTL_S = 3600
PRODUCT = "Linux/UNIX"


class SpotPriceError(Exception):
    """No usable price; the message says why (and what to grant)."""


@dataclass(frozen=True)
class SpotQuote:
    instance_type: str
    zone: str
    usd_per_hour: Decimal
    #: when this price took effect (UTC)
    since: datetime
    #: when it was asked (UTC)
    asked: datetime

    def source(self) -> str:
        return (
            f"AWS spot price for {self.instance_type} in {self.zone} ({PRODUCT}), in force "
            f"since {self.since.isoformat()}, asked {self.asked.isoformat()}"
        )


def newest(history: list[dict[str, Any]], instance_type: str, zone: str) -> SpotQuote:
    """The newest entry of ``SpotPriceHistory`` for the type and zone (else SpotPriceError)."""
    best: SpotQuote | None = None
    now = datetime.now(UTC)
    for item in history:
        if item.get("InstanceType") != instance_type or item.get("AvailabilityZone") != zone:
            continue
        try:
            price = Decimal(str(item.get("SpotPrice")))
        except InvalidOperation:
            continue
        since = item.get("Timestamp")
        if isinstance(since, str):
            try:
                since = datetime.fromisoformat(since.replace("Z", "+00:00"))
            except ValueError:
                continue
        if not isinstance(since, datetime) or not price.is_finite() or price <= 0:
            continue
        since = since.astimezone(UTC) if since.tzinfo else since.replace(tzinfo=UTC)
        quote = SpotQuote(instance_type, zone, price, since, now)
        if best is None or quote.since > best.since:
            best = quote
    if best is None:
        raise SpotPriceError(
            f"AWS gave no usable spot price for {instance_type} in {zone} ({PRODUCT})"
        )
    return best


def ask_aws(
    instance_type: str,
    zone: str,
    region: str,
    *,
    endpoint_url: str | None = None,
    timeout_s: float = 5.0,
) -> SpotQuote:
    """Ask EC2 (blocking: call it off the event loop)."""
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        raise SpotPriceError(
            "reading AWS spot prices needs boto3: pip install 'jupyter-gpucost[aws]'"
        ) from None
    config = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 1})
    try:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url, config=config)
        answer = ec2.describe_spot_price_history(
            InstanceTypes=[instance_type],
            ProductDescriptions=[PRODUCT],
            AvailabilityZone=zone,
            StartTime=datetime.now(UTC),
            MaxResults=10,
        )
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        if code in ("UnauthorizedOperation", "AccessDenied", "AuthFailure"):
            raise SpotPriceError(
                f"AWS refused DescribeSpotPriceHistory ({code}): grant the instance's role "
                "ec2:DescribeSpotPriceHistory"
            ) from None
        raise SpotPriceError(
            f"AWS answered {code or 'an error'} to DescribeSpotPriceHistory"
        ) from None
    except BotoCoreError as e:
        raise SpotPriceError(
            f"DescribeSpotPriceHistory got no answer: {type(e).__name__}"
        ) from None
    history = answer.get("SpotPriceHistory")
    return newest(history if isinstance(history, list) else [], instance_type, zone)


class QuoteCache:
    """Quotes kept in a JSON file, each for CACHE_TTL_S: AWS spot quotes, and the rates
    rentals bill (:mod:`.billed_rates`, through :meth:`entry` and :meth:`put_entry`)."""

    def __init__(self, path: Path, ttl_s: float = CACHE_TTL_S) -> None:
        self.path = path
        self.ttl_s = ttl_s

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, instance_type: str, zone: str) -> SpotQuote | None:
        item = self._read().get(f"aws/{instance_type}/{zone}")
        if not isinstance(item, dict):
            return None
        try:
            asked = datetime.fromisoformat(str(item["asked"]))
            quote = SpotQuote(
                instance_type,
                zone,
                Decimal(str(item["usd_per_hour"])),
                datetime.fromisoformat(str(item["since"])),
                asked,
            )
        except (KeyError, ValueError, InvalidOperation):
            return None
        age = (datetime.now(UTC) - asked).total_seconds()
        if not 0 <= age <= self.ttl_s or quote.usd_per_hour <= 0:
            return None
        return quote

    def entry(self, key: str, now: datetime | None = None) -> dict[str, str] | None:
        """The entry kept under ``key`` while its ``asked`` time is younger than the TTL."""
        item = self._read().get(key)
        if not isinstance(item, dict):
            return None
        try:
            asked = datetime.fromisoformat(str(item["asked"]))
        except (KeyError, ValueError):
            return None
        if asked.tzinfo is None:
            return None
        age = ((now or datetime.now(UTC)) - asked).total_seconds()
        if not 0 <= age <= self.ttl_s:
            return None
        return {str(k): str(v) for k, v in item.items()}

    def put_entry(self, key: str, entry: dict[str, str]) -> None:
        """Keep ``entry`` (with its ``asked`` time) under ``key``."""
        data = self._read()
        data[key] = entry
        self._write(data)

    def put(self, quote: SpotQuote) -> None:
        data = self._read()
        data[f"aws/{quote.instance_type}/{quote.zone}"] = {
            "usd_per_hour": str(quote.usd_per_hour),
            "since": quote.since.isoformat(),
            "asked": quote.asked.isoformat(),
        }
        self._write(data)

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".spot-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)


def aws_quote(
    instance_type: str,
    zone: str,
    region: str,
    cache: QuoteCache,
    *,
    endpoint_url: str | None = None,
    timeout_s: float = 5.0,
) -> SpotQuote:
    """The cached quote, else EC2's (then cached)."""
    kept = cache.get(instance_type, zone)
    if kept is not None:
        return kept
    quote = ask_aws(instance_type, zone, region, endpoint_url=endpoint_url, timeout_s=timeout_s)
    cache.put(quote)
    return quote
