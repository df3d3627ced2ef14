"""At the budget: save → export → act, in this order, and the record of what was done.

1. **save**: asks every connected JupyterLab to save its notebooks with unsaved changes
   and waits (at most ``save_timeout_s``) for each to acknowledge;
2. **export**: the checkpoint export hook (``export_hook``), a logged no-op unless set;
3. **act**: interrupt or shut down the kernels, stop the machine through its cloud
   (``stop-instance``; when that fails, the server is stopped instead), or stop the server
   (through JupyterHub when the server runs under one).

Every record says what still bills afterwards: kernels stopped on a machine that runs on
still cost its hourly price, and the message says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from ...core.i18n import _
from ...core.machine import STILL_DISKS
from . import messages
from .actions import (
    HubTarget,
    KernelManager,
    ask_hub_to_stop,
    busy_kernels,
    interrupt_kernels,
    shutdown_kernels,
)
from .events import BudgetEvents, iso
from .policy import BudgetPolicy, Enforce
from .record import ActionRecord, BudgetFigures

#: a browser that asked within this many seconds is expected to acknowledge a save request
CLIENT_TTL_S = 20.0
#: browsers remembered at most
MAX_CLIENTS = 100
#: how long JupyterHub is given to stop the server before it stops itself
HUB_STOP_WAIT_S = 30.0

#: the checkpoint export before the action: ``async () -> what was exported``
ExportHook = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class InstanceStop:
    """The cloud's answer to stopping this machine (``ok``: it is stopping)."""

    ok: bool
    via: str
    message: str
    #: what still bills once it stopped (a constant of :mod:`...core.machine`, translated
    #: where it is said)
    still_bills: str = STILL_DISKS


#: stops the machine through its provider (``stop-instance``), off the event loop
InstanceStopper = Callable[[], Awaitable[InstanceStop]]


@dataclass(frozen=True)
class BrowserAnswer:
    saved: tuple[str, ...]
    failed: tuple[str, ...]


@dataclass
class SaveRequest:
    id: str
    started: float
    expected: set[str]
    acks: dict[str, BrowserAnswer]
    #: set when every expected browser has answered
    done: asyncio.Event = field(default_factory=asyncio.Event)
    #: how many pages listened on the event bus when it was sent (they are not named:
    #: pages name themselves only when they poll, while their event socket is down)
    pages: int = 0


class BrowserSaves:
    """The browsers asked to save: those that poll (named), and as many more as listen on
    the event bus, and the save request sent to them."""

    def __init__(self, events: BudgetEvents, log: logging.Logger) -> None:
        self.events = events
        self.log = log
        self.clients: dict[str, float] = {}
        self.request: SaveRequest | None = None
        #: how many pages listen on the event bus (set at start-up; see status_events)
        self.listening_pages: Callable[[], int] = lambda: 0

    def seen(self, client: str | None) -> None:
        if client:
            self.clients[client[:64]] = time.monotonic()
            if len(self.clients) > MAX_CLIENTS:
                oldest = sorted(self.clients, key=self.clients.__getitem__)[:-MAX_CLIENTS]
                for c in oldest:
                    del self.clients[c]

    async def request_save(self, action: str, timeout_s: float) -> dict[str, BrowserAnswer]:
        """Ask the connected browsers to save; wait for their answers (bounded)."""
        now = time.monotonic()
        live = {c for c, seen in self.clients.items() if now - seen <= CLIENT_TTL_S}
        pages = self.listening_pages()
        request = SaveRequest(secrets.token_hex(8), now, live, {}, pages=pages)
        self.request = request
        self.events.emit(
            "save-request", _(messages.SAVE_REQUEST), {"request_id": request.id, "action": action}
        )
        if not live and not pages:
            self.log.warning(
                "jupyter-gpucost: no browser is connected: edits not saved in a browser "
                "cannot be saved; files on disk are kept"
            )
            return {}
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(request.done.wait(), timeout_s)
        missing = live - set(request.acks)
        if missing:
            self.log.warning(
                "jupyter-gpucost: %d browser(s) did not confirm saving in %g s",
                len(missing),
                timeout_s,
            )
        return dict(request.acks)

    def acknowledge(
        self, request_id: str, client: str, saved: list[str], failed: list[str]
    ) -> bool:
        request = self.request
        if request is None or request.id != request_id:
            return False
        request.acks[client] = BrowserAnswer(tuple(saved), tuple(failed))
        # the pages that poll (expected, by name) and as many more as listen on the bus
        answered = set(request.acks)
        if request.expected <= answered and len(answered) >= len(request.expected) + request.pages:
            request.done.set()
        return True


@dataclass(frozen=True)
class EnforceSettings:
    action: str
    save_timeout_s: float
    hub: HubTarget | None
    currency_symbol: str


class Enforcer:
    """Runs save → export → act for one ``Enforce`` event and keeps its record."""

    def __init__(
        self,
        settings: EnforceSettings,
        *,
        policy: BudgetPolicy,
        saves: BrowserSaves,
        events: BudgetEvents,
        keep: Callable[[ActionRecord], Awaitable[None]],
        forget: Callable[[str], None],
        kernel_manager: KernelManager | None,
        stop_server: Callable[[], None] | None,
        log: logging.Logger,
        clock: Callable[[], datetime],
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.saves = saves
        self.events = events
        #: keeps a record (state file, ledger); ``forget(at)`` drops a provisional one
        self.keep = keep
        self.forget = forget
        self.kernel_manager = kernel_manager
        self.stop_server = stop_server
        self.log = log
        self.clock = clock
        self.export_hook: ExportHook | None = None
        #: stops the machine (``None``: ``stop-instance`` falls back to ``stop-server``)
        self.stop_instance: InstanceStopper | None = None
        #: ends it (``terminate-instance``; ``None``: falls back to ``stop-server``)
        self.terminate_instance: InstanceStopper | None = None
        #: what the machine costs per hour now (the meter's rate)
        self.machine_rate: Callable[[], Decimal] = lambda: Decimal(0)

    async def enforce(self, event: Enforce) -> ActionRecord:
        started = self.clock()
        action = event.action or self.settings.action
        saved = await self.saves.request_save(action, self.settings.save_timeout_s)
        exported = await self._export()
        budget = None
        if event.standing is not None:
            b = event.standing.budget
            budget = BudgetFigures(
                kind=b.kind,
                scope=b.scope,
                amount_micro=b.amount_micro,
                spent_micro=event.standing.spent_micro or 0,
            )
        record = ActionRecord(
            at=iso(started) or "",
            reason=event.reason,
            action=action,
            notebooks_saved=sum(len(a.saved) for a in saved.values()),
            save_failed=tuple(sorted({p for a in saved.values() for p in a.failed})),
            browsers=len(saved),
            exported=exported,
            budget=budget,
        )
        if event.reason == "idle" and self.kernel_manager is not None:
            busy = busy_kernels(self.kernel_manager)
            if busy:
                # a kernel started working during the grace period: it is not idle
                record = record.with_outcome(
                    "skipped",
                    _(messages.IDLE_SKIPPED_RECORD),
                    detail=messages.kernels_busy(len(busy)),
                )
                self.policy.cancel_grace()
                await self.keep(record)
                self.events.emit("cleared", _(messages.IDLE_SKIPPED), {"reason": "idle"})
                return record
        record = await self._act(record)
        self.policy.acted()
        return record

    async def _export(self) -> str | None:
        if self.export_hook is None:
            self.log.info(
                "jupyter-gpucost: no checkpoint export configured before the budget action"
            )
            return None
        try:
            return await self.export_hook()
        except Exception as e:
            self.log.exception("jupyter-gpucost: checkpoint export before the budget action failed")
            return f"failed: {e}"

    async def _act(self, record: ActionRecord) -> ActionRecord:
        action = record.action
        km = self.kernel_manager
        summary = messages.summary(record, self.settings.currency_symbol)
        if action in ("interrupt", "shutdown"):
            call = interrupt_kernels if action == "interrupt" else shutdown_kernels
            n = await call(km, self.log) if km is not None else 0
            done = record.with_outcome(
                "done", messages.kernels_acted(summary, action, n), kernels=n
            ).with_still(self.machine_rate())
        elif action in ("stop-instance", "terminate-instance"):
            done = await self._stop_instance(
                record, summary, terminate=action == "terminate-instance"
            )
        else:
            done = await self._stop_server(record, messages.server_stopped(summary))
        symbol = self.settings.currency_symbol
        done = done.with_message(
            messages.with_still_cost(done.message, done.still_usd_per_hour, symbol)
        )
        await self.keep(done)
        fields: dict[str, object] = {"action": action, "reason": done.reason, "at": done.at}
        if done.still_usd_per_hour is not None:
            # and its deprecated twin (docs/api.md, "Money keys")
            fields["still_per_hour"] = fields["still_usd_per_hour"] = float(done.still_usd_per_hour)
        self.events.emit("action", done.message, fields)
        return done

    async def _stop_instance(
        self, record: ActionRecord, summary: str, *, terminate: bool = False
    ) -> ActionRecord:
        """Kernels shut down, then the machine stopped (``terminate``: ended) through its
        cloud; on failure, loud, the server is stopped instead (and the machine still
        costs)."""
        km = self.kernel_manager
        n = await shutdown_kernels(km, self.log) if km is not None else 0
        driver = self.terminate_instance if terminate else self.stop_instance
        if driver is None:
            answer = InstanceStop(False, "", messages.no_instance_stopper())
        else:
            try:
                answer = await driver()
            except Exception as e:  # a driver's bug must not spare the fallback
                answer = InstanceStop(False, "", f"{type(e).__name__}: {e}")
        if answer.ok:
            self.log.warning("jupyter-gpucost: %s (budget)", answer.message)
            return record.with_outcome(
                "done",
                messages.instance_stopped(
                    summary, n, answer.message, answer.still_bills, terminated=terminate
                ),
                kernels=n,
                via=answer.via,
            ).with_instance(answer.message)
        self.log.error(
            "jupyter-gpucost: could not stop the machine: %s; stopping the server instead",
            answer.message,
        )
        return await self._stop_server(
            record.with_instance(f"failed: {answer.message}"),
            messages.instance_failed(summary, answer.message),
            kernels=n,
        )

    async def _stop_server(
        self, record: ActionRecord, message: str, *, kernels: int | None = None
    ) -> ActionRecord:
        # kernels first: they hold the GPUs, and a server stopped by a signal from the
        # hub may not get to shut them down itself
        km = self.kernel_manager
        if kernels is None:
            kernels = await shutdown_kernels(km, self.log) if km is not None else 0
        n = kernels
        hub = self.settings.hub
        if hub is not None:
            # recorded first: the hub SIGTERMs this process while it handles the request
            await self.keep(record.with_outcome("requested", message, via="jupyterhub"))
            answer = await ask_hub_to_stop(hub)
            if answer.ok:
                self.log.warning("jupyter-gpucost: %s (budget)", answer.message)
                # the hub stops us; if it has not in a while, stop ourselves
                await asyncio.sleep(HUB_STOP_WAIT_S)
                self.log.warning("jupyter-gpucost: JupyterHub did not stop the server: stopping it")
            else:
                self.log.error("jupyter-gpucost: %s; stopping the server itself", answer.message)
            self.forget(record.at)
            via = "jupyterhub" if answer.ok else "self"
            hub_detail: str | None = answer.message
        else:
            via, hub_detail = "self", None
        if self.stop_server is not None:
            asyncio.get_event_loop().call_later(0.5, self.stop_server)
        done = record.with_outcome("done", message, kernels=n, via=via, hub=hub_detail)
        # stopped by itself, the server leaves the machine running: it still costs
        return done.with_still(self.machine_rate()) if via == "self" else done
