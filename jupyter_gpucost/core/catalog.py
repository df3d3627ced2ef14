"""The dated price catalog and how a GPU finds its price.

Prices are per GPU-hour, exact (``Decimal``), each with its source, date and currency
(:mod:`jupyter_gpucost.core.currency`; one currency per provider). A device is
matched to a catalog *model* from the name NVML reports (and, where the name is
ambiguous, its memory size). A device with no price is *unpriced*: it is reported as such
and never silently counted as $0.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path

from .currency import DEFAULT_CURRENCY, is_currency_code

MARKETS = ("on-demand", "spot")
#: what was checked of a price: ``listed`` the provider's own page or price API, on the row's
#: date; ``third-party`` a named dataset or aggregator, on the row's date; ``unverified``
#: nothing was checked (the row's source says what was tried)
CONFIDENCE_LEVELS = ("listed", "third-party", "unverified")
#: labels of older catalogs, read as the level they meant (an admin's own catalog stays
#: loadable): ``uncertain`` was an inferred figure, which is not a checked one
LEGACY_CONFIDENCE = {"uncertain": "unverified"}
#: confidence levels the UI flags with a warning
DOUBTFUL_CONFIDENCE = ("unverified",)
#: prices are kept to the micro-dollar
MAX_PRICE_DECIMALS = 6

GIB = 1024**3


class CatalogError(ValueError):
    """The catalog file cannot be used; the message says which row and why."""


@dataclass(frozen=True)
class PriceRow:
    provider: str
    model: str
    instance: str
    gpus_per_instance: int
    usd_per_gpu_hour: Decimal
    market: str
    region: str
    source: str
    #: ISO date the price was seen, or ``None`` when the source is undated
    as_of: str | None
    confidence: str
    #: ISO 4217 code of the price (``usd_per_gpu_hour`` is in this currency)
    currency: str = DEFAULT_CURRENCY

    def describe(self) -> str:
        where = " ".join(x for x in (self.provider, self.market, self.region) if x)
        inst = f" ({self.instance})" if self.instance else ""
        date = f"as of {self.as_of}" if self.as_of else "undated"
        return f"{where}{inst}, {date}"


@dataclass(frozen=True)
class Price:
    """The price in force for one GPU."""

    model: str
    usd_per_gpu_hour: Decimal
    #: a sentence saying where the figure comes from
    source: str
    as_of: str | None
    confidence: str
    overridden: bool = False
    #: ISO 4217 code of the price (``usd_per_gpu_hour`` is in this currency)
    currency: str = DEFAULT_CURRENCY


@dataclass(frozen=True)
class Catalog:
    rows: tuple[PriceRow, ...]
    catalog_date: str | None = None

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.provider for r in self.rows))

    def currency_of(self, provider: str) -> str:
        """The currency of a provider's prices (every row of a provider has the same)."""
        for row in self.rows:
            if row.provider == provider:
                return row.currency
        return DEFAULT_CURRENCY

    def instances(self, provider: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.instance for r in self.rows if r.provider == provider))

    def models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.model for r in self.rows))

    def find(
        self, *, provider: str, market: str, model: str, instance: str = ""
    ) -> PriceRow | None:
        """The first row for this provider, market and model (and instance, if given)."""
        candidates = [
            r
            for r in self.rows
            if r.provider == provider and r.market == market and r.model == model
        ]
        if instance:
            preferred = [r for r in candidates if r.instance == instance]
            if preferred:
                return preferred[0]
        return candidates[0] if candidates else None


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


def read_catalog_toml(path: str | Path | None = None) -> tuple[dict[str, object], str]:
    """The parsed TOML of the shipped catalog or of the file at ``path``, and where it came
    from (for messages)."""
    if path:
        try:
            text = Path(path).read_bytes()
        except OSError as e:
            raise CatalogError(f"cannot read price catalog {path}: {e.strerror}") from None
        origin = str(path)
    else:
        text = resources.files("jupyter_gpucost").joinpath("data", "prices.toml").read_bytes()
        origin = "the shipped catalog"
    try:
        return tomllib.loads(text.decode("utf-8")), origin
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CatalogError(f"{origin} is not valid TOML: {e}") from None


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load the shipped catalog, or the TOML file at ``path``."""
    data, origin = read_catalog_toml(path)
    raw_rows = data.get("price")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise CatalogError(f"{origin} has no [[price]] rows")
    rows = tuple(_row(origin, i, raw) for i, raw in enumerate(raw_rows, start=1))
    currencies: dict[str, str] = {}
    for row in rows:
        seen = currencies.setdefault(row.provider, row.currency)
        if seen != row.currency:
            raise CatalogError(
                f"{origin}: provider {row.provider!r} has prices in {seen} and in "
                f"{row.currency}; one provider's prices must be in one currency"
            )
    catalog_date = data.get("catalog_date")
    return Catalog(rows=rows, catalog_date=str(catalog_date) if catalog_date else None)


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


def _row(origin: str, number: int, raw: object) -> PriceRow:
    where = f"{origin}, price row {number}"
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: not a table")
    amount_key, currency = price_key(
        raw,
        where=where,
        required=("provider", "model", "market"),
        usd_key="usd_per_gpu_hour",
        key="price_per_gpu_hour",
    )
    market = str(raw["market"])
    if market not in MARKETS:
        raise CatalogError(f"{where}: market {market!r} is not one of {', '.join(MARKETS)}")
    confidence = parse_confidence(raw, where=where)
    try:
        price = parse_price(raw[amount_key], what=where)
    except ValueError as e:
        raise CatalogError(str(e)) from None
    as_of = str(raw.get("as_of") or "") or None
    return PriceRow(
        provider=str(raw["provider"]),
        model=str(raw["model"]),
        instance=str(raw.get("instance", "")),
        gpus_per_instance=int(raw.get("gpus_per_instance", 1)),
        usd_per_gpu_hour=price,
        market=market,
        region=str(raw.get("region", "")),
        source=str(raw.get("source", "")),
        as_of=as_of,
        confidence=confidence,
        currency=currency,
    )


# NVML device name -> catalog model. Order matters: the first match wins.
_MODEL_RULES: Sequence[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bGH200\b"), "GH200"),
    (re.compile(r"\bH200\b.*\bNVL\b"), "H200-NVL"),
    (re.compile(r"\bH200\b"), "H200"),
    (re.compile(r"\bH100\b.*\bNVL\b"), "H100-NVL"),
    (re.compile(r"\bH100\b"), "H100-80GB"),
    (re.compile(r"\bA100\b.*\b80\s?GB\b"), "A100-80GB"),
    (re.compile(r"\bA100\b.*\b40\s?GB\b"), "A100-40GB"),
    (re.compile(r"\bA100\b"), "A100"),  # resolved by memory size below
    (re.compile(r"\bA10G\b"), "A10G"),
    (re.compile(r"\bA10\b"), "A10"),
    (re.compile(r"\bL40S\b"), "L40S"),
    (re.compile(r"\bL40\b"), "L40"),
    (re.compile(r"\bL4\b"), "L4"),
    (re.compile(r"\bV100\b"), "V100"),
    (re.compile(r"\bT4\b"), "T4"),
    (re.compile(r"\bB200\b"), "B200"),
    (re.compile(r"\bRTX\s?4090\b"), "RTX-4090"),
    (re.compile(r"\bRTX\s?3090\b"), "RTX-3090"),
]


def model_for(nvml_name: str, memory_total_bytes: int | None = None) -> str | None:
    """The catalog model for an NVML device name, or ``None`` when it is not known.

    >>> model_for("NVIDIA A100-SXM4-80GB")
    'A100-80GB'
    >>> model_for("Tesla T4")
    'T4'
    >>> model_for("NVIDIA H100 80GB HBM3")
    'H100-80GB'
    """
    for pattern, model in _MODEL_RULES:
        if pattern.search(nvml_name):
            if model == "A100":
                if memory_total_bytes is None:
                    return None
                return "A100-80GB" if memory_total_bytes > 60 * GIB else "A100-40GB"
            return model
    return None


@dataclass(frozen=True)
class PricePolicy:
    """Which prices are in force: provider, market, optional instance, admin overrides,
    and their currency. Catalog rows in another currency than the session's are never
    used (nothing is converted): the admin's overrides price those GPUs."""

    catalog: Catalog
    provider: str = "aws"
    market: str = "on-demand"
    instance: str = ""
    #: model or exact NVML name -> price per GPU-hour (the admin's word beats the catalog)
    overrides: Mapping[str, Decimal] | None = None
    #: model -> the share of the detected instance's whole-instance price (after the
    #: admin's overrides, before the per-GPU rows; see core.instance_prices)
    whole: Mapping[str, Price] | None = None
    #: the currency of the session (and of the overrides); ``None``: the provider's
    currency: str | None = None

    @property
    def session_currency(self) -> str:
        """The currency every amount of the session is in."""
        return self.currency or self.catalog.currency_of(self.provider)

    def price_for(self, nvml_name: str, memory_total_bytes: int | None) -> Price | None:
        overrides = self.overrides or {}
        model = model_for(nvml_name, memory_total_bytes)
        for key in (nvml_name, model):
            if key is not None and key in overrides:
                return Price(
                    model=model or nvml_name,
                    usd_per_gpu_hour=overrides[key],
                    source=f"admin override (c.GpuCost.price_overrides[{key!r}])",
                    as_of=None,
                    confidence="listed",
                    overridden=True,
                    currency=self.session_currency,
                )
        if model is None:
            return None
        if self.whole and model in self.whole:
            return self.whole[model]
        row = self.catalog.find(
            provider=self.provider, market=self.market, model=model, instance=self.instance
        )
        if row is None or row.currency != self.session_currency:
            return None
        return Price(
            model=model,
            usd_per_gpu_hour=row.usd_per_gpu_hour,
            source=row.describe() + (f"; source: {row.source}" if row.source else ""),
            as_of=row.as_of,
            confidence=row.confidence,
            currency=row.currency,
        )
