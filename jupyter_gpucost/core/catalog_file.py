"""The price catalog's TOML file, read and parsed once per content, and the one reader of
what each priced row holds (:func:`read_row`).

The shipped catalog is large (every region's rows); three readers take their tables from it
(:func:`~jupyter_gpucost.core.catalog.load_catalog` the GPU rows,
:mod:`~jupyter_gpucost.core.instance_prices` the instances, :mod:`~jupyter_gpucost.core.
attached_gpus` the VMs). The bytes are read each time, so an edited file is read afresh; a
content already parsed is not parsed again. The parsed tables are shared: readers only read
them.
"""

from __future__ import annotations

import hashlib
import threading
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path

from .currency import DEFAULT_CURRENCY, is_currency_code

#: parsed contents kept (the shipped catalog, and an admin's own, with room to spare)
KEPT = 4

MARKETS = ("on-demand", "spot")
#: what was checked of a price: ``listed`` the provider's own page or price API, on the row's
#: date; ``third-party`` a named dataset or aggregator, on the row's date; ``unverified``
#: nothing was checked (the row's source says what was tried)
CONFIDENCE_LEVELS = ("listed", "third-party", "unverified")
#: labels of older catalogs, read as the level they meant (an admin's own catalog stays
#: loadable): ``uncertain`` was an inferred figure, which is not a checked one
LEGACY_CONFIDENCE = {"uncertain": "unverified"}
#: prices are kept to the micro-dollar
MAX_PRICE_DECIMALS = 6


class CatalogError(ValueError):
    """The catalog file cannot be used; the message says which row and why."""


_parsed: dict[str, dict[str, object]] = {}
_lock = threading.Lock()


def read_catalog_toml(path: str | Path | None = None) -> tuple[dict[str, object], str]:
    """The parsed TOML of the shipped catalog or of the file at ``path``, and where it came
    from (for messages). The tables are shared with other readers: never change them."""
    if path:
        try:
            text = Path(path).read_bytes()
        except OSError as e:
            raise CatalogError(f"cannot read price catalog {path}: {e.strerror}") from None
        origin = str(path)
    else:
        text = resources.files("jupyter_gpucost").joinpath("data", "prices.toml").read_bytes()
        origin = "the shipped catalog"
    digest = hashlib.sha256(text).hexdigest()
    with _lock:
        kept = _parsed.get(digest)
    if kept is not None:
        return kept, origin
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CatalogError(f"{origin} is not valid TOML: {e}") from None
    with _lock:
        while len(_parsed) >= KEPT:
            del _parsed[next(iter(_parsed))]
        _parsed[digest] = data
    return data, origin


def parse_price(value: object, *, what: str) -> Decimal:
    """A non-negative price with at most six decimals, exactly as written."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError(f"{what}: expected a number (a price per hour), got {value!r}")
    try:
        # str() of a float is its shortest round-tripping decimal: 0.1 -> "0.1"
        price = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{what}: {value!r} is not a number") from None
    if not price.is_finite() or price < 0:
        raise ValueError(f"{what}: {value!r} must be a finite number >= 0")
    exponent = price.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -MAX_PRICE_DECIMALS:
        raise ValueError(
            f"{what}: {value!r} has more than {MAX_PRICE_DECIMALS} decimals (micro-units)"
        )
    return price


def parse_confidence(raw: Mapping[str, object], *, where: str) -> str:
    """A row's ``confidence`` (default ``listed``, as older catalogs wrote it), an older
    label read as the level it meant."""
    confidence = str(raw.get("confidence", "listed"))
    confidence = LEGACY_CONFIDENCE.get(confidence, confidence)
    if confidence not in CONFIDENCE_LEVELS:
        raise CatalogError(
            f"{where}: confidence {confidence!r} is not one of {', '.join(CONFIDENCE_LEVELS)}"
        )
    return confidence


def price_key(
    raw: Mapping[str, object], *, where: str, required: Sequence[str], usd_key: str, key: str
) -> tuple[str, str]:
    """Which key of a row holds its price, and its currency: a price in dollars is written
    ``usd_key``, one in another currency ``key`` with ``currency = "<ISO 4217>"``.
    ``required`` are the row's other keys that must be present."""
    missing = [k for k in required if k not in raw]
    keys = [k for k in (usd_key, key) if k in raw]
    if not keys:
        missing.append(key)
    if missing:
        raise CatalogError(f"{where}: missing {', '.join(missing)}")
    if len(keys) > 1:
        raise CatalogError(f"{where}: has both {usd_key} and {key}")
    currency = str(raw.get("currency", DEFAULT_CURRENCY))
    if not is_currency_code(currency):
        raise CatalogError(f"{where}: currency {currency!r} is not an ISO 4217 code")
    if keys[0] == usd_key and currency != "USD":
        raise CatalogError(f"{where}: a price in {currency} is written {key}, not {usd_key}")
    return keys[0], currency


@dataclass(frozen=True)
class RowFields:
    """What every priced table of the catalog (``[[price]]``, ``[[instance]]``, ``[[vm]]``)
    holds, read by :func:`read_row`: the table, its price and currency, market, confidence,
    source and date."""

    table: Mapping[str, object]
    price: Decimal
    currency: str
    market: str
    confidence: str
    source: str
    as_of: str | None


def read_row(
    where: str, raw: object, *, required: Sequence[str], usd_key: str, key: str
) -> RowFields:
    """The one reader of a catalog row's common fields (:class:`RowFields`): its price
    (``usd_key``, or ``key`` with a ``currency``), market and confidence checked;
    :class:`CatalogError` naming ``where``. ``required`` are the row's other keys."""
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: not a table")
    amount_key, currency = price_key(raw, where=where, required=required, usd_key=usd_key, key=key)
    market = str(raw["market"])
    if market not in MARKETS:
        raise CatalogError(f"{where}: market {market!r} is not one of {', '.join(MARKETS)}")
    confidence = parse_confidence(raw, where=where)
    try:
        price = parse_price(raw[amount_key], what=where)
    except ValueError as e:
        raise CatalogError(str(e)) from None
    return RowFields(
        table=raw,
        price=price,
        currency=currency,
        market=market,
        confidence=confidence,
        source=str(raw.get("source", "")),
        as_of=str(raw.get("as_of") or "") or None,
    )
