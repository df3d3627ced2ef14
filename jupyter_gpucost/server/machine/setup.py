"""The machine's settings and its wiring: detection at start-up, prices, the stop driver.

The ``GpuCost`` traits of this concern live here (:class:`MachineTraits`, a base of the
extension app), read once by the app into :class:`MachineSettings` and
:class:`PricingSettings` (:mod:`..settings`); :func:`detect_machine` runs the detection
(:mod:`...cloud.detect`) in a worker thread, bounded, before the server serves;
:func:`price_plan` applies the rule of :func:`...core.instance_prices.plan_prices`: the
admin's settings always win.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Enum, Float, HasTraits, List, Unicode, validate

from ...cloud import aws
from ...cloud.alibaba import ALIBABA_ECS_API, ALIBABA_METADATA, STOPPED_MODES
from ...cloud.azure_prices import RETAIL_PRICES_URL
from ...cloud.billed_rates import RateSettings, applies
from ...cloud.detect import AZURE_IMDS, DEFAULT_DMI_PATH, DetectSettings, detect
from ...cloud.lambda_cloud import LAMBDA_API
from ...cloud.price_refresh import RefreshSettings
from ...cloud.stop import StopSettings, stop_instance
from ...core.attached_gpus import VmRow, load_vm_rows
from ...core.catalog import Catalog, PricePolicy
from ...core.instance_prices import (
    AdminPrices,
    InstanceRow,
    PricePlan,
    load_instance_rows,
    plan_prices,
)
from ...core.machine import Machine
from ..budget.enforce import InstanceStop, InstanceStopper
from ..traits import within
from .bounded import bounded
from .reconciled_rate import reconciled_rate_plan
from .spot_prices import (
    SpotPriceSettings,
    billed_rate_plan,
    billed_reread,
    feed_applies,
    refreshed_rows,
    reread_feed,
    spot_applies,
    spot_price_plan,
    spot_reread,
)

#: metadata requests made by one detection at most (AWS: token, document, life cycle)
MAX_REQUESTS = 3


class MachineTraits(HasTraits):
    """The settings of the machine's detection and of ``stop-instance``."""

    detect_machine = Bool(
        True,
        config=True,
        help="Detect the cloud machine this server runs on (DMI files and the environment; "
        "then, only where those name a cloud, its metadata service) to price it whole and "
        "to let budget_action 'stop-instance' stop it. False: prices from the price_* "
        "settings only, and no metadata service is ever asked.",
    )
    dmi_path = Unicode(
        DEFAULT_DMI_PATH,
        config=True,
        help="The folder of the machine's DMI files (sys_vendor, product_name, ...).",
    )
    azure_imds_url = Unicode(
        AZURE_IMDS,
        config=True,
        help="Azure's Instance Metadata Service (asked only on a machine whose DMI says Azure).",
    )
    alibaba_metadata_url = Unicode(
        ALIBABA_METADATA,
        config=True,
        help="Alibaba Cloud ECS's metadata service (asked only on a machine whose DMI says "
        "Alibaba Cloud ECS).",
    )
    alibaba_ecs_api_url = Unicode(
        ALIBABA_ECS_API,
        config=True,
        help="The ECS API that 'stop-instance' calls on Alibaba Cloud ({region}: the "
        "instance's region).",
    )
    alibaba_stopped_mode = Enum(
        list(STOPPED_MODES),
        default_value="StopCharging",
        config=True,
        help="ECS StopInstance's StoppedMode: 'StopCharging' (economical mode: vCPUs, memory "
        "and GPUs stop billing where the instance qualifies; disks and public IP still bill) "
        "or 'KeepCharging' (the instance keeps its resources and bills as before).",
    )
    machine_detect_timeout_s = Float(
        1.0,
        config=True,
        help="Seconds one metadata request may take (0.1 to 10); a detection makes at most three.",
    )
    stop_instance_command = List(
        Unicode(),
        config=True,
        help="A command that stops this machine, run by budget_action 'stop-instance' "
        "instead of the cloud's API, e.g. ['sudo', 'shutdown', '-h', 'now'] where the "
        "instance stops on shutdown. Empty: the cloud's API.",
    )
    gcp_compute_url = Unicode(
        "https://compute.googleapis.com",
        config=True,
        help="The Compute Engine API that 'stop-instance' calls on GCP.",
    )
    azure_management_url = Unicode(
        "https://management.azure.com",
        config=True,
        help="The Azure Resource Manager API that 'stop-instance' calls on Azure.",
    )
    runpod_api_url = Unicode(
        "https://rest.runpod.io/v1",
        config=True,
        help="The RunPod REST API that 'stop-instance' calls in a RunPod pod.",
    )
    refresh_instance_price = Bool(
        True,
        config=True,
        help="Ask the detected machine's cloud's public price feed for its own size's "
        "price, in its region and priority (Azure: the Retail Prices API, no credentials; a "
        "Spot VM at its Spot meter), at start and then every price_reread_interval_s, "
        "cached that long in price_cache_path; the price is shown as refreshed, with its "
        "date. A feed that cannot be read keeps the catalog's price (the labelled upper "
        "bound for a Spot VM) and logs one line. False: the catalog's price. Never used "
        "when the admin sets price_provider, price_instance or base_price_usd_per_hour.",
    )
    azure_prices_url = Unicode(
        RETAIL_PRICES_URL,
        config=True,
        help="Azure's Retail Prices API, asked by refresh_instance_price on an Azure VM.",
    )
    price_cache_path = Unicode(
        "",
        config=True,
        help="The JSON file refresh_instance_price caches the feed's answers in. Empty: "
        "gpucost-instance-prices.json in the Jupyter data directory.",
    )

    machine_provider = Enum(
        ["", "lambda", "autodl"],
        default_value="",
        config=True,
        help="The provider this server runs on where no signal names it: 'lambda' (Lambda "
        "documents none) or 'autodl' (found from AutoDLContainerUUID otherwise). Empty: "
        "detected.",
    )
    machine_instance_id = Unicode(
        "",
        config=True,
        help="This machine's instance id at its provider, where its API needs one and no "
        "signal gives it (a Lambda instance's id).",
    )
    autodl_shutdown_command = List(
        Unicode(),
        default_value=["shutdown"],
        config=True,
        help="What budget_action 'stop-instance' runs in an AutoDL container: AutoDL powers "
        "the instance off (and stops billing it) when the container shuts down.",
    )
    lambda_api_url = Unicode(
        LAMBDA_API,
        config=True,
        help="Lambda's Cloud API: read for the instance's type, and called by "
        "'stop-instance' (terminate) where machine_provider is 'lambda'.",
    )
    lambda_api_key = Unicode(
        "",
        config=True,
        help="A Lambda Cloud API key allowed to read and terminate this instance (empty: "
        "the LAMBDA_API_KEY variable). Never shown nor logged.",
    )
    vast_api_url = Unicode(
        "https://console.vast.ai/api/v0",
        config=True,
        help="The Vast.ai API that 'stop-instance' calls in a Vast.ai instance (with the "
        "instance's CONTAINER_API_KEY).",
    )

    @validate("machine_detect_timeout_s")
    def _check_timeout(self, proposal: dict[str, Any]) -> float:
        value = float(proposal["value"])
        within("machine_detect_timeout_s", value, 0.1, 10, "seconds from 0.1 to 10")
        return value


@dataclass(frozen=True)
class MachineSettings:
    """The traits above, read once by the app (:mod:`..settings`)."""

    detect: bool
    detect_settings: DetectSettings
    stop: StopSettings
    refresh: RefreshSettings = field(default_factory=RefreshSettings)
    #: ask EC2 at start whether a Spot Instance can be stopped: where the budget's action
    #: would stop it (``stop-instance``)
    check_spot_stop: bool = False


def detect_machine(
    settings: MachineSettings, environ: Mapping[str, str], log: logging.Logger
) -> Machine | None:
    """The machine, found in a worker thread within the bounded time (``None``: not found)."""
    if not settings.detect:
        return None
    # the spot check's two EC2 calls, each bounded, after the metadata requests
    limit_s = settings.detect_settings.timeout_s * MAX_REQUESTS + 2 * aws.CHECK_TIMEOUT_S + 1
    try:
        found = bounded(
            partial(_detect_and_check, settings, dict(environ)), limit_s, "gpucost-machine"
        )
    except FutureTimeout:
        log.warning("jupyter-gpucost: machine detection took over %g s: not used", limit_s)
        return None
    except Exception as e:  # detection must never stop the server
        log.warning("jupyter-gpucost: machine detection failed: %s", e)
        return None
    machine, spot_note = found
    if spot_note:
        log.warning("jupyter-gpucost: %s", spot_note)
    if machine is not None:
        log.info(
            "jupyter-gpucost: machine %s %s %s %s (%s)%s",
            machine.provider,
            machine.instance_type or "?",
            machine.market or "?",
            machine.region or "?",
            machine.source,
            f"; {machine.note}" if machine.note else "",
        )
    return machine


def _detect_and_check(
    settings: MachineSettings, environ: dict[str, str]
) -> tuple[Machine | None, str]:
    """The machine, and whether an AWS Spot Instance can be stopped (:mod:`...cloud.aws`):
    only asked where the budget's action would stop it."""
    machine = detect(settings.detect_settings, environ)
    if machine is None or not settings.check_spot_stop:
        return machine, ""
    return aws.spot_stop_check(machine, environ)


def check_provider(catalog: Catalog, provider: str, instance: str) -> None:
    """The admin's ``price_provider`` and ``price_instance`` name catalog rows (else
    ValueError, naming the setting and what it accepts)."""
    if provider not in catalog.providers:
        raise ValueError(
            f"c.GpuCost.price_provider = {provider!r} is not valid: "
            f"use one of {', '.join(catalog.providers)}."
        )
    if instance and instance not in catalog.instances(provider):
        raise ValueError(
            f"c.GpuCost.price_instance = {instance!r} is not valid for {provider}: use one of "
            f"{', '.join(i for i in catalog.instances(provider) if i)}."
        )


def price_plan(
    admin: AdminPrices,
    machine: Machine | None,
    catalog: Catalog,
    rows: tuple[InstanceRow, ...],
    vms: tuple[VmRow, ...] = (),
) -> PricePlan:
    return plan_prices(
        admin,
        provider=None if machine is None else machine.provider,
        instance_type="" if machine is None else machine.instance_type,
        market="" if machine is None else machine.market,
        shared=machine is not None and machine.shared,
        providers=catalog.providers,
        rows=rows,
        vms=vms,
        region="" if machine is None else machine.region,
    )


@dataclass(frozen=True)
class PricingSettings:
    """How this machine is priced, read once by the app (:mod:`..settings`): the prices
    the admin set, the catalog's file, the price read again, the billed rate."""

    admin: AdminPrices
    #: None: the shipped catalog
    catalog_path: str | None
    #: ``price_provider`` and ``price_instance`` as configured (or their defaults)
    provider: str
    instance: str
    #: ``price_overrides``: a price per GPU by catalog model or NVML name
    overrides: Mapping[str, Decimal]
    #: ``base_price_usd_per_hour``, in the session's currency
    base_per_hour: Decimal
    granularity_s: int
    minimum_charge_s: int
    #: "": the provider's currency, its symbol
    currency: str
    currency_symbol: str
    #: ``unknown_gpu_usd_per_hour`` (None: the catalog's dearest GPU)
    unknown_gpu_per_hour: float | None
    spot: SpotPriceSettings
    rates: RateSettings
    #: ``use_billed_rate``: the rate a reconciled bill showed
    use_billed_rate: bool
    #: the ledger a reconciled bill is read from (may hold a password)
    ledger_url: str = field(repr=False)


@dataclass(frozen=True)
class MachinePrices:
    """The detected machine and the prices it brings (built once at start-up)."""

    settings: MachineSettings
    machine: Machine | None
    plan: PricePlan
    #: the price read again every ``reread_interval_s`` (a rental's billed rate, an AWS
    #: spot price; ``None``: none is), blocking, ``None`` when it keeps the price in force
    reread: Callable[[], PricePlan | None] | None
    reread_interval_s: float


def resolve_machine(
    settings: MachineSettings,
    pricing: PricingSettings,
    catalog: Catalog,
    environ: Mapping[str, str],
    log: logging.Logger,
) -> MachinePrices:
    """Detect the machine (unless turned off) and choose the prices in force."""
    machine = detect_machine(settings, environ, log)
    catalog_path = pricing.catalog_path
    catalog_rows = load_instance_rows(catalog_path)
    admin = pricing.admin
    rows = refreshed_rows(settings.refresh, admin, machine, catalog_rows, log)
    vms = load_vm_rows(catalog_path)
    plan = price_plan(admin, machine, catalog, rows, vms)
    reread: Callable[[], PricePlan | None] | None = None
    if feed_applies(settings.refresh, admin, machine):
        plan_for = partial(price_plan, admin, machine, catalog, vms=vms)
        reread = partial(reread_feed, settings.refresh, admin, machine, catalog_rows, plan_for, log)
    if machine is not None and spot_applies(plan, machine, pricing.spot):
        reread = spot_reread(plan, machine, pricing.spot, log)
    plan = spot_price_plan(plan, machine, pricing.spot, log)
    # the rate a reconciled bill showed, on the plan in force and on each plan read again;
    # the rate the provider says it bills (below) wins over it
    reconciled = partial(
        reconciled_rate_plan,
        machine=machine,
        enabled=pricing.use_billed_rate,
        ledger_url=pricing.ledger_url,
        data_dir=jupyter_data_dir(),
        log=log,
    )
    plan = reconciled(plan)
    if reread is not None:
        reread = partial(_read_then, reread, reconciled)
    rates = pricing.rates
    admin_priced = admin.provider or admin.instance or admin.base_set
    if machine is not None and applies(machine, rates) and not admin_priced:
        reread = billed_reread(plan, machine, rates, catalog, log)
    plan = billed_rate_plan(plan, machine, admin, rates, catalog, log)
    if plan.note:
        log.info("jupyter-gpucost: %s", plan.note)
    return MachinePrices(
        settings=settings,
        machine=machine,
        plan=plan,
        reread=reread,
        reread_interval_s=pricing.spot.reread_interval_s,
    )


def _read_then(
    read: Callable[[], PricePlan | None], then: Callable[[PricePlan], PricePlan]
) -> PricePlan | None:
    """``read()``, with ``then`` applied to the plan it reads (``None``: keep the plan)."""
    plan = read()
    return None if plan is None else then(plan)


def machine_can_stop(found: MachinePrices) -> bool:
    """Whether ``stop-instance`` has a way to stop this machine."""
    return bool(found.settings.stop.command) or (
        found.machine is not None and found.machine.stoppable
    )


def machine_can_terminate(found: MachinePrices) -> bool:
    """Whether ``terminate-instance`` has a way to end this machine."""
    return found.machine is not None and found.machine.terminable


def instance_stopper(
    found: MachinePrices, environ: Mapping[str, str], *, terminate: bool = False
) -> InstanceStopper:
    """``stop-instance`` (``terminate``: ``terminate-instance``): the cloud's call for this
    machine, in a worker thread."""
    env = dict(environ)
    call = partial(
        stop_instance,
        found.machine,
        found.settings.stop,
        found.settings.detect_settings.endpoints,
        env,
        terminate=terminate,
    )

    async def stop() -> InstanceStop:
        result = await asyncio.get_running_loop().run_in_executor(None, call)
        return InstanceStop(result.ok, result.via, result.message, result.still_bills)

    return stop


def unknown_gpu_bound(
    catalog: Catalog, provider: str, currency: str, unknown: float | None
) -> Decimal | None:
    """``c.GpuCost.unknown_gpu_usd_per_hour`` as a price, once it is sure that a GPU with
    no price can be priced at an upper bound (else ValueError naming the settings)."""
    price = None if unknown is None else Decimal(str(unknown))
    policy = PricePolicy(catalog, provider, currency=currency or None, unknown_gpu_price=price)
    missing = policy.bound_missing()
    if missing is not None:
        raise ValueError(f"c.GpuCost.currency = {policy.session_currency!r}: {missing}.")
    return price
