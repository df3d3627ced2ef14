"""The server's settings: the ``GpuCost`` traits read once, at start-up, into frozen
settings, one per concern, the way the hub's are (:mod:`...hub.settings`).

The traits are grouped by concern in mixins of the extension app (:mod:`.app`):
:class:`~.budget.traits.BudgetTraits`, :class:`~.export.traits.ExportTraits`,
:class:`~.notify.traits.AlertTraits`, :class:`~.spot.setup.InterruptionTraits`,
:class:`~.machine.spot_prices.SpotPriceTraits`, :class:`~.machine.setup.MachineTraits`,
:class:`~.traits.PricingTraits`, :class:`~.ledger.traits.LedgerTraits`. Each is checked by its
own validators when it is set, and read here, by attribute, into its concern's settings;
the environment's budget settings are checked here, once. Nothing below the app reads a
trait: the parts take these objects (``tests/test_settings_objects.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from jupyter_core.paths import jupyter_data_dir
from traitlets.config import Config

from ..cloud.detect import DetectSettings, Endpoints
from ..cloud.price_refresh import RefreshSettings
from ..cloud.stop import StopSettings
from ..core.catalog import parse_price
from ..core.instance_prices import AdminPrices
from .budget.actions import HubTarget
from .budget.controller import BudgetConfig
from .budget.policy import Scope
from .budget.setup import BudgetTraitValues, check_environment, default_state_path, locked_settings
from .budget.traits import BudgetTraits
from .export.jobs import ExportSettings
from .export.setup import ExportOnBudget, export_settings, local_folder
from .export.stores import MIB, Tuning
from .export.traits import ExportTraits
from .hub_link import HubLinkConfig
from .ledger.traits import LedgerTraits
from .machine.reconciled_rate import ReconciledRateTraits
from .machine.setup import MachineSettings, MachineTraits, PricingSettings
from .machine.spot_prices import SpotPriceSettings, SpotPriceTraits, rate_settings
from .notify import NotifySettings
from .notify.traits import AlertTraits
from .spot.setup import InterruptionSettings, InterruptionTraits
from .traits import CurrencyTraits, PricingTraits


class GpuCostTraits(
    LedgerTraits,
    MachineTraits,
    InterruptionTraits,
    SpotPriceTraits,
    ReconciledRateTraits,
    CurrencyTraits,
    AlertTraits,
    PricingTraits,
    ExportTraits,
    BudgetTraits,
):
    """The settings of ``c.GpuCost`` kept outside the app's module, one mixin per concern:
    the machine, spot interruptions, spot prices and billed rates, the reconciled rate, the
    currency, alerts, prices, exports and budgets; the ledger."""


@dataclass(frozen=True)
class ServerSettings:
    """Every concern's settings, built once by :func:`server_settings`."""

    budget: BudgetConfig
    export: ExportSettings
    export_on_budget: ExportOnBudget
    notify: NotifySettings
    interruption: InterruptionSettings
    machine: MachineSettings
    pricing: PricingSettings
    #: ``None``: no hub service to report to
    hub: HubLinkConfig | None


def budget_settings(
    traits: BudgetTraits, environ: Mapping[str, str], data_dir: str
) -> BudgetConfig:
    """The budget's settings: the spawner's ``GPUCOST_BUDGET_*`` checked once (TraitError
    naming the variable), kept as a floor the config can only make stricter."""
    locked = locked_settings(
        check_environment(environ),
        BudgetTraitValues(
            hard_budget_usd=float(traits.hard_budget_usd),
            # the trait's validator made it a scope (parse_scope)
            hard_budget_scope=cast("Scope", traits.hard_budget_scope),
            budget_grace_s=float(traits.budget_grace_s),
            budget_action=str(traits.budget_action),
        ),
    )
    return BudgetConfig(
        hard=locked.hard,
        thresholds_pct=tuple(int(v) for v in traits.budget_thresholds_pct),
        grace_s=locked.grace_s,
        action=locked.action,
        save_timeout_s=float(traits.budget_save_timeout_s),
        idle_minutes=float(traits.idle_gpu_minutes),
        idle_action=str(traits.idle_gpu_action),
        idle_utilization_pct=float(traits.idle_gpu_utilization_pct),
        state_path=Path(traits.budget_state_path or default_state_path(data_dir)),
        hub=HubTarget.from_environ(environ),
        overruled=locked.overruled,
    )


def export_settings_of(traits: ExportTraits, root_dir: str, data_dir: str) -> ExportSettings:
    """The export's targets (checked: TraitError naming the setting) and tuning."""
    return export_settings(
        {str(k): v for k, v in traits.export_targets.items()},
        str(traits.export_default_target),
        local_folder(str(traits.export_folder), data_dir),
        root_dir,
        allow_urls=bool(traits.export_allow_urls),
        allow_hidden=bool(traits.export_allow_hidden),
        tuning=Tuning(
            part_size_bytes=int(traits.export_part_size_mb) * MIB,
            concurrency=int(traits.export_concurrency),
            retries=int(traits.export_retries),
        ),
    )


def export_on_budget(traits: ExportTraits) -> ExportOnBudget:
    return ExportOnBudget(
        paths=tuple(str(p) for p in traits.export_on_budget_paths),
        timeout_s=float(traits.export_on_budget_timeout_s),
    )


def notify_settings(traits: AlertTraits) -> NotifySettings:
    return NotifySettings(
        targets=tuple(str(t) for t in traits.notify),
        thresholds_pct=tuple(int(v) for v in traits.notify_thresholds_pct),
        spike_factor=float(traits.notify_spike_factor),
        allow_user_targets=bool(traits.notify_user_targets),
        state_path=str(traits.notify_state_path),
    )


def interruption_settings(traits: InterruptionTraits) -> InterruptionSettings:
    return InterruptionSettings(
        watch=bool(traits.watch_interruptions),
        export_on_interrupt=bool(traits.export_on_interrupt),
        grace_s=float(traits.interruption_grace_s),
    )


def spot_price_settings(traits: SpotPriceTraits) -> SpotPriceSettings:
    return SpotPriceSettings(
        aws_spot_prices=bool(traits.aws_spot_prices),
        aws_spot_prices_endpoint=str(traits.aws_spot_prices_endpoint),
        billed_rates=bool(traits.billed_rates),
        reread_interval_s=float(traits.price_reread_interval_s),
        vast_api_key=str(traits.vast_api_key),
        runpod_graphql_url=str(traits.runpod_graphql_url),
        runpod_api_key=str(traits.runpod_api_key),
    )


def machine_settings(
    traits: MachineTraits, environ: Mapping[str, str], *, budget_action: str = ""
) -> MachineSettings:
    """The machine's detection, stop and price feed; ``budget_action``: the budget's action
    in force (EC2 is asked whether a Spot Instance can stop only where it would)."""
    lambda_key = str(traits.lambda_api_key) or environ.get("LAMBDA_API_KEY", "")
    cache = str(traits.price_cache_path) or os.path.join(
        jupyter_data_dir(), "gpucost-instance-prices.json"
    )
    return MachineSettings(
        detect=bool(traits.detect_machine),
        detect_settings=DetectSettings(
            dmi_path=str(traits.dmi_path),
            endpoints=Endpoints.from_environ(
                environ,
                azure_imds=str(traits.azure_imds_url),
                alibaba_metadata=str(traits.alibaba_metadata_url),
            ),
            timeout_s=float(traits.machine_detect_timeout_s),
            provider=str(traits.machine_provider),
            instance_id=str(traits.machine_instance_id),
            lambda_api_url=str(traits.lambda_api_url),
            lambda_api_key=lambda_key,
        ),
        stop=StopSettings(
            command=tuple(str(c) for c in traits.stop_instance_command),
            gcp_compute_url=str(traits.gcp_compute_url),
            azure_management_url=str(traits.azure_management_url),
            runpod_api_url=str(traits.runpod_api_url),
            alibaba_ecs_api_url=str(traits.alibaba_ecs_api_url),
            alibaba_stopped_mode=str(traits.alibaba_stopped_mode),
            vast_api_url=str(traits.vast_api_url),
            lambda_api_url=str(traits.lambda_api_url),
            lambda_api_key=lambda_key,
            autodl_shutdown_command=tuple(str(c) for c in traits.autodl_shutdown_command),
            timeout_s=10.0,
        ),
        refresh=RefreshSettings(
            enabled=bool(traits.refresh_instance_price),
            azure_url=str(traits.azure_prices_url),
            cache_path=cache,
        ),
        check_spot_stop=budget_action == "stop-instance",
    )


def admin_prices(config: Config, values: Mapping[str, str]) -> AdminPrices:
    """The price settings the admin set (in the ``GpuCost`` section of the config, from a
    file or the command line), with their validated ``values``; nothing from the
    environment counts as the admin's."""
    section = config.get("GpuCost", {})
    names = set(section) if isinstance(section, Mapping) else set()

    def given(name: str) -> str | None:
        return (values.get(name) or None) if name in names else None

    return AdminPrices(
        provider=given("price_provider"),
        market=given("price_market"),
        instance=given("price_instance"),
        region=given("price_region"),
        base_set="base_price_usd_per_hour" in names,
    )


def pricing_settings(
    app: GpuCostTraits, config: Config, machine: MachineSettings, environ: Mapping[str, str]
) -> PricingSettings:
    """The prices the admin set, the catalog's file, the prices read again and the billed
    rates (their keys taken from the environment now, never again)."""
    values = {
        "price_provider": str(app.price_provider),
        "price_market": str(app.price_market),
        "price_instance": str(app.price_instance),
        "price_region": str(app.price_region),
    }
    spot = spot_price_settings(app)
    # the prices were checked by their traits' validators: here they become exact amounts
    return PricingSettings(
        admin=admin_prices(config, values),
        catalog_path=str(app.price_catalog_path) or None,
        provider=str(app.price_provider),
        instance=str(app.price_instance),
        overrides={
            str(k): parse_price(v, what=f"c.GpuCost.price_overrides[{k!r}]")
            for k, v in app.price_overrides.items()
        },
        base_per_hour=parse_price(
            app.base_price_usd_per_hour, what="c.GpuCost.base_price_usd_per_hour"
        ),
        granularity_s=int(app.billing_granularity_s),
        minimum_charge_s=int(app.minimum_charge_s),
        currency=str(app.currency),
        currency_symbol=str(app.currency_symbol),
        unknown_gpu_per_hour=app.unknown_gpu_usd_per_hour,
        spot=spot,
        rates=rate_settings(spot, machine.stop, environ),
        use_billed_rate=bool(app.use_billed_rate),
        ledger_url=str(app.ledger_url),
    )


def server_settings(
    app: GpuCostTraits,
    config: Config,
    root_dir: str,
    environ: Mapping[str, str],
    *,
    hub: HubLinkConfig | None,
) -> ServerSettings:
    """Every concern's settings (raises TraitError or BudgetError naming the setting);
    ``config``: the app's, where the admin's own prices are told apart from defaults."""
    data_dir = jupyter_data_dir()
    budget = budget_settings(app, environ, data_dir)
    machine = machine_settings(app, environ, budget_action=budget.action)
    return ServerSettings(
        budget=budget,
        export=export_settings_of(app, root_dir, data_dir),
        export_on_budget=export_on_budget(app),
        notify=notify_settings(app),
        interruption=interruption_settings(app),
        machine=machine,
        pricing=pricing_settings(app, config, machine, environ),
        hub=hub,
    )
