"""The jupyter-server extension: its configuration surface is the ``GpuCost`` traits.

Admins set them like any Jupyter option, ``c.GpuCost.<name> = ...`` in a config file or
``--GpuCost.<name>=...`` on the command line. An invalid value stops the server at start-up
with a message that names the setting and what it accepts: a cost meter running on a
setting the admin did not mean would show wrong numbers, which is worse than none.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

from anyio import to_thread
from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from tornado.ioloop import IOLoop, PeriodicCallback
from traitlets import Float, TraitError, Unicode, default, validate

from ..cloud.interruption import Watcher
from ..core.catalog import CatalogError, load_catalog
from ..core.instance_prices import PricePlan
from . import kernel_auth
from .agents.setup import Endpoint, start_endpoint
from .agents.tools import AgentParts
from .budget.controller import BudgetController
from .budget.policy import BudgetError
from .export.jobs import ExportManager
from .hub_link import HubLinkConfig, HubReporter, hub_url_default
from .machine.setup import MachinePrices, check_provider, resolve_machine, unknown_gpu_bound
from .machine.spot_prices import PriceWatch
from .routes import route_table
from .service import TELEMETRY_MODES, CostConfig, CostService
from .settings import GpuCostTraits, ServerSettings, server_settings
from .startup import start_budget_and_exports
from .status_events import StatusPublisher, listeners, start_live_events
from .traits import RANGES, in_range, one_of
from .translations import follow_jupyterlab_language, watch_jupyterlab_language


class ConfigError(ValueError):
    """A setting has a value it cannot take; the message names it."""


class GpuCost(GpuCostTraits, ExtensionApp):
    name = "jupyter_gpucost"
    description = "What the notebook session costs on rented GPUs, live."
    #: the detected machine and its prices (set by ``cost_config``)
    machine: MachinePrices | None = None
    #: the spot interruption notice's watch, once started (``None``: nothing watched)
    _interruption_watch: Watcher | None = None

    telemetry = Unicode(
        "auto",
        config=True,
        help=(
            "Where GPU readings come from: 'auto' (NVML if it initialises, else none), "
            "'nvml' (NVIDIA's management library; an error is shown if it is missing), "
            "'simulated' (replays a recorded trace; labelled simulated in the UI) or "
            "'none' (no GPUs: only the base price is counted)."
        ),
    )
    sample_interval_s = Float(
        1.0,
        config=True,
        help="Seconds between two GPU readings (0.1 to 3600).",
    )
    simulated_trace = Unicode(
        "",
        config=True,
        help="The trace replayed when telemetry is 'simulated': the name of a shipped "
        "trace ('a100x2-training', 'h100-live') or a path. Empty: the 2x A100-80GB demo trace.",
    )

    carbon_intensity_g_per_kwh = Float(
        475.0,
        config=True,
        help="Grams of CO2 per kWh used to turn the GPUs' energy into emissions (0 to 2000). "
        "475 is the world-average figure codecarbon falls back on; use your grid's or your "
        "cloud region's figure.",
    )

    hub_url = Unicode(
        config=True,
        help="The hub service's URL this server reports its spend to and takes the hub's "
        "budgets from (docs/jupyterhub.md); GPUCOST_HUB_URL sets it when this is not "
        "configured. Empty: no reports.",
    )
    hub_report_interval_s = Float(
        10.0, config=True, help="Seconds between two reports to the hub service (1 to 3600)."
    )

    @default("hub_url")
    def _default_hub_url(self) -> str:
        return hub_url_default()

    @validate("telemetry")
    def _check_telemetry(self, proposal: dict[str, Any]) -> str:
        return one_of("telemetry", proposal["value"], TELEMETRY_MODES)

    @validate(*RANGES)
    def _check_range(self, proposal: dict[str, Any]) -> float:
        return in_range(proposal["trait"].name, proposal["value"])

    # -- lifecycle -----------------------------------------------------------------

    def _link_jupyter_server_extension(self, serverapp: Any) -> None:
        try:
            super()._link_jupyter_server_extension(serverapp)
        except TraitError as e:
            self._refuse_to_start(str(e))

    def _refuse_to_start(self, message: str) -> NoReturn:
        self.log.critical("jupyter-gpucost: invalid configuration: %s", message)
        print(f"jupyter-gpucost: invalid configuration: {message}", file=sys.stderr)
        # SystemExit passes through jupyter_server's extension loader, which would
        # otherwise log the error and run on without the extension.
        raise SystemExit(1)

    def server_settings(self) -> ServerSettings:
        """Every concern's settings, read once from the traits (:mod:`.settings`)."""
        root_dir = str(getattr(self.serverapp, "root_dir", "") or os.getcwd())
        try:
            hub = HubLinkConfig.from_settings(self.hub_url, self.hub_report_interval_s, os.environ)
            return server_settings(self, self.config, root_dir, os.environ, hub=hub)
        except (TraitError, BudgetError, ValueError) as e:
            self._refuse_to_start(str(e))

    def cost_config(self, settings: ServerSettings) -> CostConfig:
        """The service's configuration: the pricing settings, the machine detected and its
        prices, the telemetry and the ledger's traits."""
        pricing = settings.pricing
        try:
            catalog = load_catalog(pricing.catalog_path)
        except CatalogError as e:
            raise ConfigError(f"c.GpuCost.price_catalog_path: {e}") from None
        try:
            check_provider(catalog, pricing.provider, pricing.instance)
            found = resolve_machine(settings.machine, pricing, catalog, os.environ, self.log)
            unknown = pricing.unknown_gpu_per_hour
            bound = unknown_gpu_bound(catalog, found.plan.provider, pricing.currency, unknown)
        except CatalogError as e:
            raise ConfigError(f"c.GpuCost.price_catalog_path: {e}") from None
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self.machine = found
        return CostConfig(
            telemetry=self.telemetry,
            sample_interval_s=self.sample_interval_s,
            catalog=catalog,
            provider=found.plan.provider,
            market=found.plan.market,
            instance=pricing.instance,
            machine=found.machine,
            plan=found.plan,
            overrides=dict(pricing.overrides),
            unknown_gpu_per_hour=bound,
            granularity_s=pricing.granularity_s,
            minimum_charge_s=pricing.minimum_charge_s,
            base_per_hour=found.plan.base_per_hour(pricing.base_per_hour),
            currency=pricing.currency,
            currency_symbol=pricing.currency_symbol,
            simulated_trace=self.simulated_trace,
            ledger_url=self.ledger_url,
            data_dir=jupyter_data_dir(),
            ledger_flush_interval_s=self.ledger_flush_interval_s,
            ledger_timezone=self.ledger_timezone,
            carbon_intensity_g_per_kwh=self.carbon_intensity_g_per_kwh,
        )

    def initialize_settings(self) -> None:
        if follow_jupyterlab_language(self.log):
            self._language_watch = watch_jupyterlab_language(self.serverapp, self.log)
        settings = self.server_settings()
        try:
            config = self.cost_config(settings)
        except ConfigError as e:
            self._refuse_to_start(str(e))
        service = CostService(config, log=self.log)
        service.start()
        self.settings["gpucost_service"] = service
        # kernels inherit the server's environment: %%gpucost prices cells as the server does
        service.publish_prices(os.environ)
        self._link_kernels()
        self._watch_kernels(service, config.sample_interval_s)
        self._watch_price(service)
        try:
            started = start_budget_and_exports(
                settings, service, self.serverapp, self.log, self.machine
            )
        except (TraitError, BudgetError) as e:
            self._refuse_to_start(str(e))
        self.settings.update(started.settings())
        self._hub_link, self._alerts = started.hub, started.alerts
        self._interruption_watch = started.interruption_watch
        # the agents' MCP endpoint (docs/agents.md): the same service and budget
        self.settings["gpucost_agents"] = start_endpoint(
            AgentParts(service, started.budget), self.log
        )
        # the status pushed on the event bus; pages listening there are asked to save too
        event_logger = getattr(self.serverapp, "event_logger", None)
        self._events = start_live_events(
            event_logger, service, started.exports, config.sample_interval_s
        )
        started.budget.count_listening_pages(lambda: listeners(event_logger))
        self.log.info(
            "jupyter-gpucost: %s %s prices, telemetry %s, sampling every %gs",
            config.provider,
            config.market,
            service.source.name,
            config.sample_interval_s,
        )

    def _link_kernels(self) -> None:
        """Give kernels the server's loopback URL and their own token (kernel_auth)."""
        token = kernel_auth.new_token()
        self.settings[kernel_auth.SETTINGS_KEY] = token
        kernel_auth.publish(os.environ, None, token)
        serverapp = self.serverapp

        def publish_url() -> None:
            # the port is known once the server listens (it may differ from the one asked)
            kernel_auth.publish(os.environ, kernel_auth.loopback_url(serverapp), token)

        IOLoop.current().add_callback(publish_url)

    def _watch_kernels(self, service: CostService, interval_s: float) -> None:
        """Refresh the kernel list on the loop (in-memory lookups only)."""
        serverapp = self.serverapp
        if serverapp is None:
            return

        async def refresh() -> None:
            await service.tracker.refresh(
                serverapp.kernel_manager, getattr(serverapp, "session_manager", None)
            )

        self._kernel_watch = PeriodicCallback(refresh, max(interval_s, 0.5) * 1000)
        self._kernel_watch.start()

    def _watch_price(self, service: CostService) -> None:
        """Read the machine's quoted price again every interval (a rental's billed rate, an
        AWS spot price): off the loop, bounded; a new one applies from then on."""
        found = self.machine
        if found is None or found.reread is None:
            return

        def apply(plan: PricePlan) -> None:
            service.reprice(plan)
            # kernels started from now on inherit the new prices; running ones ask for them
            service.publish_prices(os.environ)

        watch = PriceWatch(found.reread, apply, self.log)
        self._price_watch = PeriodicCallback(watch.read_once, found.reread_interval_s * 1000)
        self._price_watch.start()

    def initialize_handlers(self) -> None:
        self.handlers.extend(route_table())

    async def stop_extension(self) -> None:
        for name in (
            "_kernel_watch",
            "_language_watch",
            "_interruption_watch",
            "_alerts",
            "_price_watch",
        ):
            watch = getattr(self, name, None)
            if watch is not None:
                watch.stop()
        events: list[StatusPublisher] = getattr(self, "_events", [])
        for publisher in events:
            await publisher.stop()
        hub_link: HubReporter | None = getattr(self, "_hub_link", None)
        if hub_link is not None:
            await hub_link.stop()
        agents: Endpoint | None = self.settings.get("gpucost_agents")
        if agents is not None:
            await agents.stop()
        budget: BudgetController | None = self.settings.get("gpucost_budget")
        if budget is not None:
            await budget.stop()
        exports: ExportManager | None = self.settings.get("gpucost_exports")
        if exports is not None:
            # running exports are cancelled and cleaned up
            await to_thread.run_sync(exports.close)
        service: CostService | None = self.settings.get("gpucost_service")
        if service is not None:
            await to_thread.run_sync(service.stop)


__all__ = ["ConfigError", "GpuCost"]
