"""The dated price catalog and how a GPU finds its price.

Prices are per GPU-hour, exact (``Decimal``), each with its source, date and currency
(:mod:`jupyter_gpucost.core.currency`; one currency per provider). A device is
matched to a catalog *model* from the name NVML reports (and, where the name is
ambiguous, its memory size). A device with no price row for the provider, market and
currency in force is priced at an *upper bound* (:attr:`Price.basis` ``"upper-bound"``,
with the reason): the same GPU on-demand for a spot machine, else the dearest known price
of its model, else the admin's ``unknown_gpu_usd_per_hour``, else the dearest GPU of the
catalog; never $0. Nothing is converted between currencies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from .catalog_file import MARKETS as MARKETS
from .catalog_file import CatalogError as CatalogError
from .catalog_file import parse_price as parse_price
from .catalog_file import read_catalog_toml as read_catalog_toml
from .catalog_file import read_row
from .currency import DEFAULT_CURRENCY
from .currency import symbol as currency_symbol
from .gpu_models import model_for
from .i18n import N_
from .money import rate_amount
from .regions import choose_row, region_exact, region_reason

#: confidence levels the UI flags with a warning
DOUBTFUL_CONFIDENCE = ("unverified",)
#: how a price was found: a catalog row (or a whole-instance row), the admin's override, an
#: upper bound where no price fits (:func:`upper_bound`), the rate the provider says it bills
#: the rental (``billed``), or the rate a reconciled bill showed (``c.GpuCost.use_billed_rate``)
BASIS_CATALOG, BASIS_OVERRIDE, BASIS_UPPER_BOUND = "catalog", "override", "upper-bound"
BASIS_BILLED = "billed"
BASIS_RECONCILED = "reconciled"

#: why a GPU is priced at an upper bound (messages of the catalog, translated where shown)
REASON_SPOT = N_("spot: priced at on-demand, the most it can cost")
REASON_DEAREST_MODEL = N_(
    "no {provider} {market} price for {model}: priced at the dearest known, {price}/h"
)
REASON_ADMIN_DEFAULT = N_(
    "no price for {model}: priced at c.GpuCost.unknown_gpu_usd_per_hour, {price}/h"
)
REASON_DEAREST_GPU = N_(
    "no price for {model}: priced at the dearest GPU of the catalog ({dearest}), {price}/h"
)


@dataclass(frozen=True)
class PriceRow:
    provider: str
    model: str
    instance: str
    gpus_per_instance: int
    per_gpu_hour: Decimal
    market: str
    region: str
    source: str
    #: ISO date the price was seen, or ``None`` when the source is undated
    as_of: str | None
    confidence: str
    #: ISO 4217 code of the price (``per_gpu_hour`` is in this currency)
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
    per_gpu_hour: Decimal
    #: a sentence saying where the figure comes from
    source: str
    as_of: str | None
    confidence: str
    overridden: bool = False
    #: ISO 4217 code of the price (``per_gpu_hour`` is in this currency)
    currency: str = DEFAULT_CURRENCY
    #: ``catalog``, ``override`` or ``upper-bound`` (no price fits: the most it can cost)
    basis: str = BASIS_CATALOG
    #: why the price is an upper bound, a message of the catalog (``""``: it is not one)
    reason_msgid: str = ""
    #: the values the message fills in
    reason_values: tuple[tuple[str, str], ...] = ()
    #: where the catalog row was priced (``""``: an override or a bound, which say so)
    provider: str = ""
    market: str = ""
    region: str = ""

    @property
    def upper_bound(self) -> bool:
        return self.basis == BASIS_UPPER_BOUND

    @property
    def reason(self) -> str:
        """Why the price is an upper bound, in English (for the log); ``""``: it is not."""
        return self.reason_in(lambda msgid: msgid)

    def reason_in(self, translate: Callable[[str], str]) -> str:
        """The reason in the language of ``translate`` (:func:`~jupyter_gpucost.core.i18n._`)."""
        if not self.reason_msgid:
            return ""
        return translate(self.reason_msgid).format(**dict(self.reason_values))


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
        self, *, provider: str, market: str, model: str, instance: str = "", region: str = ""
    ) -> PriceRow | None:
        """The row for this provider, market and model (and instance, if given) in
        ``region`` (:func:`choose_row`: where the region has none or is not known, the
        dearest region's row; :func:`region_exact` says which)."""
        candidates = [
            r
            for r in self.rows
            if r.provider == provider and r.market == market and r.model == model
        ]
        if instance:
            preferred = [r for r in candidates if r.instance == instance]
            if preferred:
                return choose_row(preferred, region, _per_gpu)
        return choose_row(candidates, region, _per_gpu)


def _per_gpu(row: PriceRow) -> Decimal:  # the price choose_row weighs
    return row.per_gpu_hour


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


def _row(origin: str, number: int, raw: object) -> PriceRow:
    row = read_row(
        f"{origin}, price row {number}",
        raw,
        required=("provider", "model", "market"),
        usd_key="usd_per_gpu_hour",
        key="price_per_gpu_hour",
    )
    table = row.table
    gpus = table.get("gpus_per_instance", 1)
    return PriceRow(
        provider=str(table["provider"]),
        model=str(table["model"]),
        instance=str(table.get("instance", "")),
        gpus_per_instance=int(gpus) if isinstance(gpus, int | float) else int(str(gpus)),
        per_gpu_hour=row.price,
        market=row.market,
        region=str(table.get("region", "")),
        source=row.source,
        as_of=row.as_of,
        confidence=row.confidence,
        currency=row.currency,
    )


@dataclass(frozen=True)
class PricePolicy:
    """Which prices are in force: provider, market, optional instance, admin overrides,
    and their currency. Catalog rows in another currency than the session's are never
    used (nothing is converted). A GPU that no override or row prices is priced at an
    upper bound (:func:`upper_bound`), never at $0."""

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
    #: ``c.GpuCost.unknown_gpu_usd_per_hour``, in the session's currency: the price of a
    #: GPU whose model has no price in that currency (``None``: the dearest GPU of the
    #: catalog in that currency)
    unknown_gpu_price: Decimal | None = None
    #: the machine's region (detected, or ``c.GpuCost.price_region``); ``""``: not known,
    #: so a provider priced per region is priced at its dearest region (an upper bound)
    region: str = ""

    def find(self, model: str, market: str | None = None) -> PriceRow | None:
        """The row of ``model`` at this provider, ``market`` (default: the policy's),
        instance and region (:meth:`Catalog.find`)."""
        return self.catalog.find(
            provider=self.provider,
            market=market or self.market,
            model=model,
            instance=self.instance,
            region=self.region,
        )

    @property
    def session_currency(self) -> str:
        """The currency every amount of the session is in."""
        return self.currency or self.catalog.currency_of(self.provider)

    def catalog_price(self, nvml_name: str, memory_total_bytes: int | None) -> Price | None:
        """The price an override or a row of the provider and market gives (``None``:
        none fits; :meth:`price_for` then prices the GPU at an upper bound)."""
        overrides = self.overrides or {}
        model = model_for(nvml_name, memory_total_bytes)
        for key in (nvml_name, model):
            if key is not None and key in overrides:
                return Price(
                    model=model or nvml_name,
                    per_gpu_hour=overrides[key],
                    source=f"admin override (c.GpuCost.price_overrides[{key!r}])",
                    as_of=None,
                    confidence="listed",
                    overridden=True,
                    currency=self.session_currency,
                    basis=BASIS_OVERRIDE,
                )
        if model is None:
            return None
        if self.whole and model in self.whole:
            return self.whole[model]
        row = self.find(model)
        if row is None or row.currency != self.session_currency:
            return None
        if not region_exact(row.region, self.region):
            return None  # another region's price: an upper bound (upper_bound), labelled
        return _from_row(model, row)

    def price_for(self, nvml_name: str, memory_total_bytes: int | None) -> Price | None:
        """The price of a GPU: its override or catalog row, else an upper bound. ``None``
        only where no bound is known at all (no price in the session's currency anywhere
        and no ``unknown_gpu_price``: :meth:`bound_missing` says so at start-up)."""
        price = self.catalog_price(nvml_name, memory_total_bytes)
        if price is not None:
            return price
        return upper_bound(self, model_for(nvml_name, memory_total_bytes), nvml_name)

    def bound_missing(self) -> str | None:
        """Why a GPU without a price could not be bounded (``None``: it can)."""
        if self.unknown_gpu_price is not None or _dearest(self.catalog, self.session_currency):
            return None
        return (
            f"the catalog has no price in {self.session_currency}, so a GPU without a price "
            f"cannot be priced at an upper bound: set c.GpuCost.unknown_gpu_usd_per_hour "
            f"(in {self.session_currency}) or c.GpuCost.price_overrides"
        )


def _from_row(model: str, row: PriceRow) -> Price:
    return Price(
        model=model,
        per_gpu_hour=row.per_gpu_hour,
        source=row.describe() + (f"; source: {row.source}" if row.source else ""),
        as_of=row.as_of,
        confidence=row.confidence,
        currency=row.currency,
        provider=row.provider,
        market=row.market,
        region=row.region,
    )


def _dearest(catalog: Catalog, currency: str, model: str | None = None) -> PriceRow | None:
    """The dearest row in ``currency`` (of ``model``, if given); the first of equals. A row
    priced at 0 bounds nothing."""
    best: PriceRow | None = None
    for row in catalog.rows:
        if row.currency != currency or (model is not None and row.model != model):
            continue
        if row.per_gpu_hour <= 0:
            continue
        if best is None or row.per_gpu_hour > best.per_gpu_hour:
            best = row
    return best


def _bound(
    model: str,
    price: Decimal,
    currency: str,
    source: str,
    reason: str,
    row: PriceRow | None = None,
    **values: str,
) -> Price:
    shown = rate_amount(price, currency_symbol(currency))
    return Price(
        model=model,
        per_gpu_hour=price,
        source=source,
        as_of=None if row is None else row.as_of,
        confidence="listed" if row is None else row.confidence,
        currency=currency,
        basis=BASIS_UPPER_BOUND,
        reason_msgid=reason,
        reason_values=tuple(sorted({**values, "model": model, "price": shown}.items())),
    )


def upper_bound(policy: PricePolicy, model: str | None, nvml_name: str) -> Price | None:
    """The most a GPU with no price can cost, and why: where the machine's region has no
    row of its GPU (or the region is not known), the dearest region's on-demand row, labelled
    with both regions; on a spot market, the same GPU on-demand (the instance's row first);
    else the dearest price of its model in the catalog; else the admin's
    ``unknown_gpu_price``; else the dearest GPU of the catalog. Only prices in the session's
    currency are used. ``None``: no bound is known."""
    currency = policy.session_currency
    label = model or nvml_name
    if model is not None:
        # on-demand in the machine's region, else the dearest region's (policy.find)
        row = policy.find(model, "on-demand")
        if row is not None and row.currency == currency and row.per_gpu_hour > 0:
            source = f"upper bound: {_from_row(model, row).source}"
            if not region_exact(row.region, policy.region):
                return _bound(
                    model,
                    row.per_gpu_hour,
                    currency,
                    source,
                    region_reason(policy.region),
                    row,
                    provider=policy.provider,
                    market=row.market,
                    region=policy.region,
                    row_region=row.region,
                    as_of=row.as_of or "undated",
                )
            if policy.market == "spot":
                return _bound(model, row.per_gpu_hour, currency, source, REASON_SPOT, row)
        row = _dearest(policy.catalog, currency, model)
        if row is not None:
            return _bound(
                model,
                row.per_gpu_hour,
                currency,
                f"upper bound: the dearest {model} price of the catalog, {row.describe()}",
                REASON_DEAREST_MODEL,
                row,
                provider=policy.provider,
                market=policy.market,
            )
    if policy.unknown_gpu_price is not None:
        return _bound(
            label,
            policy.unknown_gpu_price,
            currency,
            "upper bound: c.GpuCost.unknown_gpu_usd_per_hour",
            REASON_ADMIN_DEFAULT,
        )
    row = _dearest(policy.catalog, currency)
    if row is None:
        return None
    return _bound(
        label,
        row.per_gpu_hour,
        currency,
        f"upper bound: the dearest GPU of the catalog, {row.model} {row.describe()}",
        REASON_DEAREST_GPU,
        row,
        dearest=row.model,
    )
