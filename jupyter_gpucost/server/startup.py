"""Wiring at start-up: the cost service's parts and the server's, handed to the budget and
the exports as the typed pieces they read (:class:`~.budget.spend.MeterSpend`,
:class:`~.budget.setup.ServerParts`, the ledger, the status source).

The extension app (:mod:`.app`) calls :func:`start_budget_and_exports` once its service runs,
with the settings it read once from its traits (:class:`~.settings.ServerSettings`); only a
day's or a month's budget on a server without a ledger is refused here (``TraitError``),
before the budget starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.serverapp import ServerApp

from ..cloud.interruption import Watcher
from ..core.hub_protocol import SpendReport
from ..core.sent_keys import TableKeys
from .budget.actions import busy_kernels
from .budget.controller import BudgetController
from .budget.setup import ServerParts, check_scope, start_budget
from .budget.spend import LedgerPeriods, MeterSpend
from .export.jobs import ExportManager
from .export.setup import BudgetExport, budget_export_hook, start_exports
from .hub_link import (
    HubLinkConfig,
    HubReporter,
    build_report,
    now_utc,
    reported_interruptions,
)
from .ledger.schema import alerts_sent_table
from .machine.setup import (
    MachinePrices,
    instance_stopper,
    machine_can_stop,
    machine_can_terminate,
)
from .notify import ServerAlerts, start_alerts
from .service import CostService
from .settings import ServerSettings
from .spot.setup import start_interruption


def meter_spend(service: CostService) -> MeterSpend:
    """What the budget reads: the session's spend from the sampler's latest snapshot, the
    day's and the month's from the recorder's running totals in the ledger's calendar."""
    ledger = service.ledger
    return MeterSpend(
        latest=lambda: service.sampler.latest.snapshot,
        session_id=service.session_id,
        ledger=None if ledger is None else LedgerPeriods(ledger, service.recorder),
    )


def server_parts(serverapp: ServerApp | None) -> ServerParts:
    """The kernels, the event bus and the stop of the running Jupyter server."""
    if serverapp is None:
        return ServerParts()
    return ServerParts(
        kernel_manager=getattr(serverapp, "kernel_manager", None),
        event_logger=getattr(serverapp, "event_logger", None),
        stop_server=serverapp.stop,
    )


__all__ = ["Started", "start_budget_and_exports"]


@dataclass(frozen=True)
class Started:
    budget: BudgetController
    exports: ExportManager
    #: ``None``: no hub service to report to
    hub: HubReporter | None = None
    alerts: ServerAlerts | None = None
    #: the spot interruption notice's watch (``None``: nothing watched), stopped with the
    #: extension's other watches
    interruption_watch: Watcher | None = None

    def settings(self) -> dict[str, object]:
        """What the handlers find in the web app's settings."""
        return {
            "gpucost_budget": self.budget,
            "gpucost_exports": self.exports,
            "gpucost_alerts": self.alerts,
        }


def start_hub_link(
    config: HubLinkConfig, service: CostService, budget: BudgetController, log: logging.Logger
) -> HubReporter:
    """Report the session's spend to the hub service; its replies go to the budget."""

    manager = budget.kernel_manager

    def report() -> SpendReport:
        return build_report(
            service.sampler.latest.snapshot,
            service.attributor.latest,
            session_id=service.session_id,
            server_name=config.server_name,
            cells=service.cells.count,
            sent=now_utc(),
            kernels_busy=None if manager is None else len(busy_kernels(manager)),
            interruptions=reported_interruptions(budget.interruption(), service.session_id),
        )

    budget.link_hub()
    reporter = HubReporter(config, report, budget, log=log)
    reporter.start()
    return reporter


def start_budget_and_exports(
    settings: ServerSettings,
    service: CostService,
    serverapp: ServerApp | None,
    log: logging.Logger,
    machine: MachinePrices | None = None,
) -> Started:
    """Start the budget and the exports with their settings (raises TraitError, naming the
    setting, where the budget's scope needs a ledger this server lacks)."""
    spend = meter_spend(service)
    check_scope(settings.budget, spend)
    # the session's symbol: the admin's, else its currency's (resolved with the catalog)
    config = replace(settings.budget, currency_symbol=service.config.currency_symbol)
    hub = settings.hub
    root_dir = settings.export.root_dir
    budget = start_budget(
        config,
        spend,
        server_parts(serverapp),
        ledger=service.ledger,
        session_id=service.session_id,
        log=log,
    )
    service.attach_budget(budget)
    # no GPU metered: a budget could never act, so none is taken
    budget.unmetered = lambda: service.metering().budget_refusal
    if machine is not None:
        budget.enforcer.stop_instance = instance_stopper(machine, os.environ)
        budget.enforcer.terminate_instance = instance_stopper(machine, os.environ, terminate=True)
        cannot = machine.machine.cannot_stop if machine.machine is not None else ""
        if config.action == "stop-instance" and cannot:
            log.warning(
                "jupyter-gpucost: budget_action 'stop-instance': %s. At the budget the server "
                "stops itself and the machine goes on billing; c.GpuCost.budget_action = "
                "'terminate-instance' ends it instead (its instance-store data and EBS volumes "
                "set to DeleteOnTermination are deleted)",
                cannot,
            )
        elif config.action == "terminate-instance" and not machine_can_terminate(machine):
            log.warning(
                "jupyter-gpucost: budget_action 'terminate-instance' ends AWS and Lambda "
                "instances only: at the budget the server stops itself and the machine goes "
                "on billing"
            )
        elif config.action == "stop-instance" and not machine_can_stop(machine):
            log.warning(
                "jupyter-gpucost: budget_action 'stop-instance' has no way to stop this "
                "machine (none detected, or a shared Kubernetes node, and no "
                "c.GpuCost.stop_instance_command): at the budget the server stops itself "
                "and the machine goes on billing"
            )
    exports = start_exports(settings.export, service, log)
    budget.export_hook = budget_export_hook(
        BudgetExport(
            export_on_budget_paths=settings.export_on_budget.paths,
            export_on_budget_timeout_s=settings.export_on_budget.timeout_s,
            log=log,
        ),
        exports,
    )
    reporter = None if hub is None else start_hub_link(hub, service, budget, log)
    interruption = start_interruption(
        settings.interruption,
        service,
        budget,
        exports,
        machine,
        root_dir,
        str(getattr(serverapp, "runtime_dir", "") or Path.cwd()),
        None if serverapp is None else serverapp.stop,
        log,
    )
    alerts = start_alerts(
        settings.notify,
        budget,
        data_dir=Path(jupyter_data_dir()),
        machine=None if machine is None else machine.machine,
        currency=service.config.currency or "USD",
        symbol=service.config.currency_symbol,
        link=panel_link(serverapp),
        log=log,
        ledger=service.ledger,
        # the keys sent in the ledger, where there is one (else the state file)
        sent=None
        if service.ledger is None
        else TableKeys(service.ledger.engine, alerts_sent_table),
    )
    if interruption is not None:
        interruption.responder.listeners.append(
            lambda record: alerts.interrupted(
                str(record.get("message", "")),
                still_bills_per_hour=None,
                at=str(record.get("deadline", "")),
            )
        )
    watcher = None if interruption is None else interruption.watcher
    return Started(budget, exports, reporter, alerts, watcher)


def panel_link(serverapp: ServerApp | None, environ: Mapping[str, str] = os.environ) -> str:
    """Where the panel is (never with a token): the server's public URL (JupyterHub's
    ``JUPYTERHUB_PUBLIC_URL``, else ``c.ServerApp.public_url``), else its own."""
    base = environ.get("JUPYTERHUB_PUBLIC_URL", "")
    if not base and serverapp is not None:
        base = str(getattr(serverapp, "public_url", "") or serverapp.connection_url)
    return base.rstrip("/") + "/lab" if base else ""
