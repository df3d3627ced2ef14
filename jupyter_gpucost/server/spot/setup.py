"""The settings of the spot interruption answer and its wiring at start-up.

:func:`start_interruption` starts the watcher (:mod:`...cloud.interruption`) only on a
detected spot machine, and answers SIGTERM only inside a Kubernetes pod; any other machine
gets neither, and no request is ever sent (docs/spot.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traitlets import Bool, Float, HasTraits, validate

from ...cloud.interruption import KUBERNETES_GRACE_S, Watcher, start_watch, watchable
from ...core.interruption_files import ENV_NAME
from ..budget.controller import BudgetController
from ..export.jobs import ExportManager
from ..machine.setup import MachinePrices
from ..service import CostService
from ..traits import within
from .interruption import NoticeResponder, install_sigterm, interrupted_line, last_interruption


class InterruptionTraits(HasTraits):
    """The ``GpuCost`` settings of the spot interruption answer."""

    watch_interruptions = Bool(
        True,
        config=True,
        help="On a machine detected as spot / preemptible (AWS, Google Cloud, Azure), watch "
        "its metadata service for the interruption notice; in a Kubernetes pod, answer "
        "SIGTERM. Then tell the user, save the notebooks, let training guards checkpoint "
        "and record the interruption (docs/spot.md). Other machines are never asked.",
    )
    export_on_interrupt = Bool(
        False,
        config=True,
        help="Export the checkpoints the training guards write at an interruption notice to "
        "the default export target (export_default_target), with the export's manifest.",
    )
    interruption_grace_s = Float(
        KUBERNETES_GRACE_S,
        config=True,
        help="Seconds between SIGTERM and SIGKILL for this pod (its "
        "terminationGracePeriodSeconds), 1 to 3600.",
    )

    @validate("interruption_grace_s")
    def _check_grace(self, proposal: dict[str, Any]) -> float:
        value = float(proposal["value"])
        within("interruption_grace_s", value, 1, 3600, "seconds from 1 to 3600")
        return value


@dataclass(frozen=True)
class InterruptionSettings:
    """:class:`InterruptionTraits`, read once by the app (:mod:`..settings`)."""

    watch: bool
    export_on_interrupt: bool
    #: seconds between SIGTERM and SIGKILL in a pod
    grace_s: float


@dataclass
class Interruption:
    responder: NoticeResponder
    watcher: Watcher | None
    sigterm: bool


def show_last(service: CostService, budget: BudgetController) -> None:
    """On a machine with nothing to watch, an earlier session's interruption (the next
    session often runs on another machine) is still shown in the status and reported to
    the hub service; nothing at all when the ledger has none."""
    previous = last_interruption(service.ledger, service.session_id)
    if previous is None:
        return
    last = {**previous, "line": interrupted_line(previous, service.config.currency_symbol)}
    budget.interruption = lambda: {"current": None, "last": last}


def start_interruption(
    settings: InterruptionSettings,
    service: CostService,
    budget: BudgetController,
    exports: ExportManager,
    machine: MachinePrices | None,
    root_dir: str,
    runtime_dir: str,
    stop_server: Any,
    log: logging.Logger,
) -> Interruption | None:
    """The watcher and the responder, or ``None`` where there is nothing to watch."""
    # kernels are told of a folder only where a notice can come
    os.environ.pop(ENV_NAME, None)
    if not settings.watch:
        return None
    found = None if machine is None else machine.machine
    in_pod = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    if not watchable(found) and not in_pod:
        show_last(service, budget)
        return None
    folder = Path(runtime_dir) / f"gpucost-interruption-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    # kernels started from now on inherit it: their guards answer there
    os.environ[ENV_NAME] = str(folder)
    ledger = service.ledger
    responder = NoticeResponder(
        budget=budget,
        exports=exports,
        folder=folder,
        root_dir=Path(root_dir),
        machine=found,
        ledger=ledger,
        session_id=service.session_id,
        session_cost_micro=lambda: service.sampler.latest.snapshot.cost_micro,
        export_on_interrupt=settings.export_on_interrupt,
        save_timeout_s=budget.config.save_timeout_s,
        currency_symbol=service.config.currency_symbol,
        log=log,
        kernels=budget.kernel_manager,  # type: ignore[arg-type]
    )
    previous = last_interruption(ledger, service.session_id)
    if previous is not None:
        previous = {**previous, "line": interrupted_line(previous, service.config.currency_symbol)}

    def document() -> dict[str, object]:
        return {"current": responder.current, "last": previous}

    budget.interruption = document
    loop = asyncio.get_event_loop()
    watcher = None
    if machine is not None and watchable(found):
        endpoints = machine.settings.detect_settings.endpoints
        watcher = start_watch(found, endpoints, responder.handler(loop), log)
        log.info("jupyter-gpucost: watching for the spot interruption notice")
    grace_s = settings.grace_s if in_pod else 0.0
    sigterm = in_pod and install_sigterm(loop, responder, grace_s, stop_server, log)
    return Interruption(responder, watcher, sigterm)
