"""The prices a provider quotes for this very machine, in place of the catalog's:

* a rental's billed rate (Vast.ai, RunPod, Lambda: :mod:`...cloud.billed_rates`), read at
  start and then every ``price_reread_interval_s`` (:func:`billed_reread`), checked against
  the catalog (:func:`...core.billed_rate.check_plausible`);
* a detected Azure VM priced from the Retail Prices API for its size, region and priority
  (:func:`refreshed_rows`, :func:`reread_feed`);
* a detected AWS spot instance priced at its spot price from AWS instead of its on-demand
  upper bound (:mod:`...cloud.spot_prices`, docs/spot.md), read at start and then hourly
  (:func:`spot_reread`); where the role may not ask, or boto3 is missing, the upper bound
  stays, with one line in the log.

Both are on by default; :class:`PriceWatch` reads them again.

Every reading runs in a worker thread, bounded in time; a failure keeps the price in force
and logs why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Float, HasTraits, Unicode, validate

from ...cloud.billed_rates import RateSettings, applies, billed_rate
from ...cloud.outcome import StopSettings
from ...cloud.price_refresh import FEEDS, RefreshSettings, refresh_instance_row, with_row
from ...cloud.runpod_rate import RUNPOD_GRAPHQL
from ...cloud.spot_prices import CACHE_TTL_S, QuoteCache, SpotPriceError, aws_quote
from ...core.billed_rate import BilledRate, RateRefused, billed_plan, check_plausible
from ...core.catalog import BASIS_UPPER_BOUND, Catalog
from ...core.instance_prices import AdminPrices, InstanceRow, PricePlan, whole_instance
from ...core.machine import Machine
from ..traits import within
from .bounded import bounded

#: seconds the start-up waits for AWS's answer
ASK_TIMEOUT_S = 5.0


class SpotPriceTraits(HasTraits):
    aws_spot_prices = Bool(
        True,
        config=True,
        help="On a detected AWS spot instance, read its spot price with "
        "DescribeSpotPriceHistory (the instance role needs ec2:DescribeSpotPriceHistory; "
        "needs boto3) and price it at that, dated, read again hourly and cached for an "
        "hour, instead of the on-demand upper bound. A refusal (UnauthorizedOperation), no "
        "boto3 or any other failure keeps the upper bound and logs one line.",
    )
    aws_spot_prices_endpoint = Unicode(
        "",
        config=True,
        help="The EC2 API endpoint DescribeSpotPriceHistory is sent to (e.g. a VPC "
        "endpoint). Empty: the region's.",
    )
    billed_rates = Bool(
        True,
        config=True,
        help="On a detected Vast.ai instance, RunPod pod or Lambda instance, read the rate "
        "the provider bills it from the provider's API (Vast.ai's dph_total, RunPod's "
        "costPerHr, Lambda's price_cents_per_hour) at start and then every "
        "price_reread_interval_s, and price the machine whole at it, labelled 'billed rate "
        "from ..., read HH:MM UTC'. A rate under a quarter of the catalog's cheapest price "
        "of its GPUs, or over four times its dearest, is refused and logged. False: the "
        "catalog's prices.",
    )
    price_reread_interval_s = Float(
        3600.0,
        config=True,
        help="Seconds between two readings of a price quoted for this very machine (a "
        "rental's billed rate, an AWS spot price, an Azure VM's Retail Prices API price), "
        "1 to 86400; a reading is kept that long, so a restart does not ask again.",
    )
    vast_api_key = Unicode(
        "",
        config=True,
        help="A Vast.ai API key allowed to read this instance (empty: the instance's own "
        "CONTAINER_API_KEY). Never shown nor logged.",
    )
    runpod_graphql_url = Unicode(
        RUNPOD_GRAPHQL,
        config=True,
        help="RunPod's GraphQL API, asked for the pod's billed rate (costPerHr).",
    )
    runpod_api_key = Unicode(
        "",
        config=True,
        help="A RunPod API key allowed to read this pod (empty: the pod's own "
        "RUNPOD_API_KEY). Never shown nor logged.",
    )

    @validate("price_reread_interval_s")
    def _check_interval(self, proposal: dict[str, object]) -> float:
        value = float(str(proposal["value"]))
        within("price_reread_interval_s", value, 1, 86400, "seconds from 1 to 86400")
        return value


@dataclass(frozen=True)
class SpotPriceSettings:
    """:class:`SpotPriceTraits`, read once by the app (:mod:`..settings`)."""

    aws_spot_prices: bool
    #: "": the region's EC2 endpoint
    aws_spot_prices_endpoint: str
    billed_rates: bool
    reread_interval_s: float
    #: "": the instance's own key, from its environment at start
    vast_api_key: str = field(repr=False)
    runpod_graphql_url: str
    runpod_api_key: str = field(repr=False)


def spot_applies(plan: PricePlan, machine: Machine | None, settings: SpotPriceSettings) -> bool:
    """Whether AWS is asked for this machine's spot price: a detected AWS spot instance of
    its own, priced at its on-demand upper bound, with ``aws_spot_prices`` on."""
    whole = plan.whole
    return (
        settings.aws_spot_prices
        and machine is not None
        and machine.provider == "aws"
        and machine.market == "spot"
        and not machine.shared
        and bool(machine.zone)
        and whole is not None
        and whole.per_gpu.basis == BASIS_UPPER_BOUND
    )


def spot_quote_plan(
    plan: PricePlan,
    machine: Machine,
    settings: SpotPriceSettings,
    log: logging.Logger,
    *,
    ttl_s: float = CACHE_TTL_S,
) -> PricePlan | None:
    """``plan`` (the on-demand upper bound) priced at AWS's spot price, or ``None`` where
    AWS gives none (refused, boto3 missing, no answer in time: one line in the log)."""
    whole = plan.whole
    if whole is None:
        return None
    endpoint = settings.aws_spot_prices_endpoint or None
    try:
        quote = bounded(
            partial(
                aws_quote,
                machine.instance_type,
                machine.zone,
                machine.region,
                quote_cache(ttl_s),
                endpoint_url=endpoint,
                timeout_s=ASK_TIMEOUT_S,
            ),
            2 * ASK_TIMEOUT_S + 1,
            "gpucost-spot-price",
        )
    except FutureTimeout:
        log.warning("jupyter-gpucost: AWS spot price: no answer in time; upper bound kept")
        return None
    except SpotPriceError as e:
        log.warning("jupyter-gpucost: AWS spot price: %s; upper bound kept", e)
        return None
    row = replace(
        whole.row,
        per_hour=quote.usd_per_hour,
        market="spot",
        as_of=quote.since.isoformat(),
        source=quote.source(),
        confidence="listed",
    )
    log.info("jupyter-gpucost: %s", quote.source())
    return replace(plan, whole=whole_instance(row), note_msgid="", note_values=())


def spot_price_plan(
    plan: PricePlan, machine: Machine | None, settings: SpotPriceSettings, log: logging.Logger
) -> PricePlan:
    """``plan``, its upper bound replaced by AWS's spot price where asked for and found."""
    if machine is None or not spot_applies(plan, machine, settings):
        return plan
    return spot_quote_plan(plan, machine, settings, log) or plan


def spot_reread(
    plan: PricePlan, machine: Machine, settings: SpotPriceSettings, log: logging.Logger
) -> Callable[[], PricePlan | None]:
    """The hourly reading of the spot price (blocking; ``None``: the price in force stays)."""
    return partial(spot_quote_plan, plan, machine, settings, log, ttl_s=0)


def quote_cache(ttl_s: float = CACHE_TTL_S) -> QuoteCache:
    """The file the provider's quotes are kept in (AWS spot quotes, billed rates)."""
    return QuoteCache(Path(jupyter_data_dir()) / "gpucost" / "spot_prices.json", ttl_s)


def rate_settings(
    prices: SpotPriceSettings, stop: StopSettings, environ: Mapping[str, str]
) -> RateSettings:
    """The billed rates' settings: the APIs' addresses and the Lambda key of the machine's
    settings (``stop``), the keys the admin left empty taken from the instance's
    environment now (never again: a notebook cannot change them later)."""
    return RateSettings(
        enabled=prices.billed_rates,
        vast_api_url=stop.vast_api_url or RateSettings.vast_api_url,
        vast_api_key=prices.vast_api_key or environ.get("CONTAINER_API_KEY", ""),
        runpod_graphql_url=prices.runpod_graphql_url,
        runpod_api_key=prices.runpod_api_key or environ.get("RUNPOD_API_KEY", ""),
        lambda_api_url=stop.lambda_api_url or RateSettings.lambda_api_url,
        lambda_api_key=stop.lambda_api_key,
        timeout_s=ASK_TIMEOUT_S,
        interval_s=prices.reread_interval_s,
    )


def read_billed(
    machine: Machine,
    settings: RateSettings,
    plan: PricePlan,
    catalog: Catalog,
    *,
    refresh: bool = False,
) -> BilledRate:
    """The machine's billed rate, checked (blocking; RateRefused says why there is none).
    ``refresh``: the hourly reading, which asks the provider again."""
    # kept a little less than the interval, so that the next reading asks again
    cache = quote_cache(0 if refresh else settings.interval_s * 0.95)
    rate = billed_rate(machine, settings, cache)
    whole = plan.whole
    if whole is not None and whole.row.provider == machine.provider:
        # Lambda's type is a catalog row: its GPUs are the row's
        rate = replace(rate, gpu_model=whole.row.gpu_model, gpus=whole.row.gpus)
    check_plausible(rate, catalog)
    return rate


def billed_rate_plan(
    plan: PricePlan,
    machine: Machine | None,
    admin: AdminPrices,
    settings: RateSettings,
    catalog: Catalog,
    log: logging.Logger,
) -> PricePlan:
    """``plan``, the rental priced whole at the rate its provider bills, where it tells one
    and the admin set no price of their own."""
    if machine is None or not applies(machine, settings):
        return plan
    if admin.provider or admin.instance or admin.base_set:
        return plan
    try:
        rate = bounded(
            partial(read_billed, machine, settings, plan, catalog),
            2 * settings.timeout_s + 1,
            "gpucost-billed-rate",
        )
    except FutureTimeout:
        log.warning("jupyter-gpucost: billed rate: no answer in time; catalog price kept")
        return plan
    except RateRefused as e:
        log.warning("jupyter-gpucost: billed rate refused: %s; catalog price kept", e)
        return plan
    log.info("jupyter-gpucost: %s", rate.source())
    return billed_plan(plan, rate, machine.market)


def billed_reread(
    plan: PricePlan,
    machine: Machine,
    settings: RateSettings,
    catalog: Catalog,
    log: logging.Logger,
) -> Callable[[], PricePlan | None]:
    """The hourly reading of the billed rate (blocking; ``None``: the rate in force stays)."""

    def read() -> PricePlan | None:
        try:
            rate = read_billed(machine, settings, plan, catalog, refresh=True)
        except RateRefused as e:
            log.warning("jupyter-gpucost: billed rate refused: %s; rate kept", e)
            return None
        log.info("jupyter-gpucost: %s", rate.source())
        return billed_plan(plan, rate, machine.market)

    return read


class PriceWatch:
    """A price read again every interval (:meth:`read_once`, called by the app): a new
    plan applies from then on (``apply``); a failed reading keeps the price in force."""

    def __init__(
        self,
        read: Callable[[], PricePlan | None],
        apply: Callable[[PricePlan], None],
        log: logging.Logger,
        timeout_s: float = 2 * ASK_TIMEOUT_S + 1,
    ) -> None:
        self.read, self.apply, self.log, self.timeout_s = read, apply, log, timeout_s

    async def read_once(self) -> None:
        try:
            plan = await asyncio.wait_for(
                asyncio.get_running_loop().run_in_executor(None, self.read), self.timeout_s
            )
        except TimeoutError:
            self.log.warning("jupyter-gpucost: the price was not read in time; it is kept")
            return
        except Exception as e:  # a reading must never stop the server
            self.log.warning("jupyter-gpucost: the price was not read again: %s", e)
            return
        if plan is not None:
            self.apply(plan)


# -- a cloud's public price feed (Azure) ---------------------------------------------


def refreshed_rows(
    settings: RefreshSettings,
    admin: AdminPrices,
    machine: Machine | None,
    rows: tuple[InstanceRow, ...],
    log: logging.Logger,
) -> tuple[InstanceRow, ...]:
    """``rows`` with the detected machine's row refreshed from its cloud's price feed, when
    the admin asked for it and set no price of their own (a worker thread, bounded)."""
    if not settings.enabled or machine is None or machine.shared:
        return rows
    if admin.provider or admin.instance or admin.base_set:
        return rows
    market = admin.market or machine.market or "on-demand"
    limit_s = settings.timeout_s * 3 + 1
    try:
        done = bounded(
            partial(
                refresh_instance_row,
                rows,
                provider=machine.provider,
                instance=machine.instance_type,
                market=market,
                region=machine.region,
                settings=settings,
            ),
            limit_s,
            "gpucost-prices",
        )
    except FutureTimeout:
        log.warning("jupyter-gpucost: the price feed took over %g s: catalog prices", limit_s)
        return rows
    except Exception as e:  # a feed must never stop the server
        log.warning("jupyter-gpucost: instance price not refreshed: %s", e)
        return rows
    if done.row is None:
        log.warning("jupyter-gpucost: instance price not refreshed: %s", done.message)
        return rows
    log.info("jupyter-gpucost: instance price %s", done.message)
    return with_row(rows, done.row)


def feed_applies(settings: RefreshSettings, admin: AdminPrices, machine: Machine | None) -> bool:
    """Whether the machine's price is read from its cloud's public feed."""
    return (
        settings.enabled
        and machine is not None
        and machine.provider in FEEDS
        and not machine.shared
        and not (admin.provider or admin.instance or admin.base_set)
    )


def reread_feed(
    settings: RefreshSettings,
    admin: AdminPrices,
    machine: Machine | None,
    rows: tuple[InstanceRow, ...],
    plan_for: Callable[[tuple[InstanceRow, ...]], PricePlan],
    log: logging.Logger,
) -> PricePlan | None:
    """The hourly reading of the feed (blocking; ``None``: the price in force stays)."""
    if machine is None:
        return None
    done = refresh_instance_row(
        rows,
        provider=machine.provider,
        instance=machine.instance_type,
        market=admin.market or machine.market or "on-demand",
        region=machine.region,
        settings=settings,
        max_age=timedelta(0),
    )
    if done.row is None:
        log.warning("jupyter-gpucost: instance price not refreshed: %s", done.message)
        return None
    log.info("jupyter-gpucost: instance price %s", done.message)
    return plan_for(with_row(rows, done.row))
