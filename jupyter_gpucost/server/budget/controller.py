"""The budget controller: runs the policy on the event loop and keeps its state.

Once a second (a coroutine on the server's event loop: it only reads the sampler's latest
snapshot, and file writes go to a thread) it asks the policy what happened, announces
threshold/grace/cleared events (:mod:`.events`, worded by :mod:`.messages`) and, at the end
of the grace period, hands over to :mod:`.enforce` (save → export → act). It keeps what the
budget did (``<data dir>/gpucost/budget.json``, :mod:`.store`, and the ledger) and answers
the API (:mod:`.payload`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tornado.ioloop import IOLoop

from ...core.budget_timing import next_check_s
from ...core.hub_protocol import HUB_SOURCE_LABEL, HubReply
from ...core.i18n import _
from ...core.money import json_amount
from . import messages
from .actions import HubTarget, KernelManager, busy_kernels
from .enforce import BrowserSaves, Enforcer, EnforceSettings, ExportHook
from .events import EVENT_SCHEMA_ID, BudgetEvents, EventLogger, iso
from .idle import IdleClock
from .payload import BudgetView, HubView, IdleView, budget_payload, record_json
from .policy import (
    SCOPES,
    Budget,
    BudgetError,
    BudgetPolicy,
    Enforce,
    GraceCleared,
    GraceStarted,
    PolicyEvent,
    Standing,
    ThresholdCrossed,
)
from .record import ActionRecord
from .spend import SpendSource
from .store import BudgetStore, StoredState

TICK_S = 1.0

__all__ = ["EVENT_SCHEMA_ID", "TICK_S", "BudgetConfig", "BudgetController"]


@dataclass(frozen=True)
class BudgetConfig:
    hard: Budget | None = None
    thresholds_pct: tuple[int, ...] = (50, 80, 95)
    grace_s: float = 120.0
    action: str = "shutdown"
    save_timeout_s: float = 30.0
    idle_minutes: float = 0.0
    idle_action: str = "warn"
    idle_utilization_pct: float = 5.0
    state_path: Path | None = None
    hub: HubTarget | None = None
    currency_symbol: str = "$"
    #: settings of the server's config that the spawner's overrule (logged at start-up)
    overruled: tuple[str, ...] = ()


#: where each action is kept besides the state file (the ledger)
ActionSink = Callable[[ActionRecord], None]


class BudgetController:
    def __init__(
        self,
        config: BudgetConfig,
        spend: SpendSource,
        *,
        kernel_manager: KernelManager | None = None,
        event_logger: EventLogger | None = None,
        stop_server: Callable[[], None] | None = None,
        gpu_utilization: Callable[[], list[float | None]] | None = None,
        log: logging.Logger | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.config = config
        self.spend = spend
        self.kernel_manager = kernel_manager
        self.gpu_utilization = gpu_utilization
        self.log = log or logging.getLogger("jupyter_gpucost")
        self.clock = clock
        self.policy = BudgetPolicy(
            hard=config.hard,
            thresholds_pct=config.thresholds_pct,
            grace_s=config.grace_s,
            tick_s=TICK_S,
        )
        self.store = BudgetStore(config.state_path, log=self.log) if config.state_path else None
        self.actions: list[ActionRecord] = []
        self.events = BudgetEvents(event_logger, self.log, clock)
        self.saves = BrowserSaves(self.events, self.log)
        self.unmetered: Callable[[], str | None] = lambda: None  # why a budget cannot act
        #: the spot interruption's document in the status (``server.interruption``)
        self.interruption: Callable[[], dict[str, Any] | None] = lambda: None
        self.enforcer = Enforcer(
            EnforceSettings(
                action=config.action,
                save_timeout_s=config.save_timeout_s,
                hub=config.hub,
                currency_symbol=config.currency_symbol,
            ),
            policy=self.policy,
            saves=self.saves,
            events=self.events,
            keep=self._record,
            forget=self._forget,
            kernel_manager=kernel_manager,
            stop_server=stop_server,
            log=self.log,
            clock=clock,
        )
        # what the machine still costs after an action that leaves it running
        self.enforcer.machine_rate = spend.rate_per_hour
        #: where each action is kept besides the state file (the ledger)
        self.action_sink: ActionSink | None = None
        self._idle = IdleClock()
        #: ``(action,)`` while waiting for the busy kernels to end (``stop_when_idle``)
        self._after_busy: tuple[str | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._enforcing: asyncio.Task[ActionRecord] | None = None
        self._dirty = False
        #: the hub service's latest answer (``None``: no link, or no answer yet)
        self.hub: HubView | None = None
        # one writer thread; not anyio's worker threads, which are not daemons and keep
        # the process alive when the loop ends without cleanup (SIGINT from JupyterHub)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpucost-budget")

    @property
    def export_hook(self) -> ExportHook | None:
        """The checkpoint export before the action (``None``: a logged no-op)."""
        return self.enforcer.export_hook

    @export_hook.setter
    def export_hook(self, hook: ExportHook | None) -> None:
        self.enforcer.export_hook = hook

    def count_listening_pages(self, count: Callable[[], int]) -> None:
        """How many pages listen on the event bus: each is asked to save, like the pages
        that poll, before the budget acts."""
        self.saves.listening_pages = count

    # -- lifecycle ----------------------------------------------------------------------

    def load(self) -> None:
        """Read the stored state (at start-up, before the loop runs)."""
        if self.store is None:
            return
        stored = self.store.load()
        self.policy.restore_fired(stored.fired)
        self.actions = stored.actions
        if stored.soft is not None:
            if self.spend.supports(stored.soft.scope):
                self.policy.soft = stored.soft
            else:
                self.log.warning(
                    "jupyter-gpucost: the stored %s soft budget needs the ledger; ignored",
                    stored.soft.scope,
                )

    def start(self) -> None:
        self.load()
        self.events.register()
        loop = IOLoop.current().asyncio_loop  # type: ignore[attr-defined]
        self._task = asyncio.ensure_future(self._run(), loop=loop)

    async def stop(self) -> None:
        for task in (self._task, self._enforcing):
            if task is not None:
                task.cancel()
        await self._persist()
        self._writer.shutdown(wait=False)

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("jupyter-gpucost: budget check failed")
            p = self.policy
            ends = p.grace_ends if p.state == "grace" else None
            await asyncio.sleep(next_check_s(ends, self.clock(), TICK_S))

    # -- one step -----------------------------------------------------------------------

    def standings(self) -> list[Standing]:
        out = []
        hub_spent = {} if self.hub is None else self.hub.spent
        for budget in self.policy.budgets():
            spent, period = self.spend.spent(budget.scope)
            if budget.kind == "hub":
                # the hub's budgets count what the hub counts
                spent = hub_spent.get((budget.owner, budget.scope))
            out.append(Standing(budget, spent, period))
        return out

    # -- the hub service ----------------------------------------------------------------

    def link_hub(self) -> None:
        """This server reports to the hub service: the API shows the link's state."""
        self.hub = HubView()

    def apply_hub_reply(self, reply: HubReply | None, error: str | None) -> None:
        """The hub's answer to a report (``None`` and ``error``: the report failed, the
        last budgets stay in force). A ``stop_at`` ends the countdown in time to save."""
        last = self.hub or HubView()
        if reply is None:
            self.hub = HubView(last.reply, error, last.reported_at)
            return
        down = reply.ledger_unreachable_since
        said = None
        if down is not None:
            local = down.astimezone()
            said = _(
                "the hub's ledger is unreachable since {time}; the hub bills and enforces "
                "budgets from memory meanwhile, and writes it all when the ledger is back"
            ).format(time=f"{local:%H:%M} {local.tzname() or ''}".strip())
        self.hub = HubView(reply, said, self.clock())
        self.policy.hub = tuple(
            Budget("hub", b.amount_micro_usd, b.scope, HUB_SOURCE_LABEL, b.source)
            for b in reply.budgets
            if b.amount_micro_usd > 0
        )
        lead = timedelta(seconds=self.config.save_timeout_s)
        self.policy.deadline = None if reply.stop_at is None else reply.stop_at - lead

    def _idle_for_s(self) -> float | None:
        if self.config.idle_minutes <= 0 or self.gpu_utilization is None:
            return None
        utilizations = self.gpu_utilization()
        costing = self.spend.rate_per_hour() > 0
        quiet = bool(utilizations) and all(
            u is not None and u <= self.config.idle_utilization_pct for u in utilizations
        )
        busy = bool(self.kernel_manager is not None and busy_kernels(self.kernel_manager))
        return self._idle.idle_for_s(costing=costing, quiet=quiet, busy=busy)

    async def tick(self) -> list[PolicyEvent]:
        self._stop_if_done()
        now = self.clock()
        idle_for = self._idle_for_s()
        config = self.config
        limit = config.idle_minutes * 60 if config.idle_minutes > 0 else None
        over = idle_for is not None and limit is not None and idle_for >= limit
        act_on_idle = config.idle_action == "act"
        if over and not self._idle.warned:
            self._idle.warned = True
            self.events.emit(
                "idle", messages.idle(config.idle_minutes, act=act_on_idle), {"reason": "idle"}
            )
        events = self.policy.evaluate(
            now,
            self.standings(),
            idle_for_s=idle_for if act_on_idle else None,
            idle_limit_s=limit if act_on_idle else None,
            kernels_running=bool(
                self.kernel_manager is not None and list(self.kernel_manager.list_kernel_ids())
            ),
            rate_per_hour=self.spend.rate_per_hour(),
        )
        for event in events:
            self._announce(event, now)
        if any(isinstance(e, ThresholdCrossed) for e in events):
            self._dirty = True
        if self._dirty:
            await self._persist()
        return events

    def _announce(self, event: PolicyEvent, now: datetime) -> None:
        config = self.config
        sym = config.currency_symbol
        if isinstance(event, ThresholdCrossed):
            s = event.standing
            out = s.runs_out_at(now, self.spend.rate_per_hour())
            self.events.emit(
                "threshold",
                messages.threshold(event.threshold_pct, s.budget, out, sym),
                {"threshold_pct": event.threshold_pct, **self._budget_fields(s, now)},
            )
        elif isinstance(event, GraceStarted):
            standing = event.standing
            action = self.policy.grace_action or config.action
            countdown_s = max(0.0, (event.ends - now).total_seconds())
            self.events.emit(
                "grace",
                messages.grace(
                    None if standing is None else standing.budget,
                    action,
                    countdown_s,
                    sym,
                    reason=event.reason,
                    hub_reason=self._hub_reason(),
                    spent=standing is None or standing.exceeded,
                    note=None
                    if self.policy.grace_shortened is None
                    else messages.shortened(
                        self.policy.grace_shortened,
                        config.grace_s,
                        countdown_s,
                        self.spend.rate_per_hour(),
                        sym,
                    ),
                ),
                {
                    "grace_ends": iso(event.ends),
                    "grace_s": config.grace_s,
                    "action": action,
                    "reason": event.reason,
                    **({} if standing is None else self._budget_fields(standing, now)),
                },
            )
        elif isinstance(event, GraceCleared):
            self.events.emit("cleared", messages.cleared(event.why))
        elif isinstance(event, Enforce):
            self._enforcing = asyncio.get_event_loop().create_task(self.enforce(event))

    def _hub_reason(self) -> str | None:
        reply = None if self.hub is None else self.hub.reply
        return None if reply is None else reply.reason

    def _budget_fields(self, s: Standing, now: datetime) -> dict[str, object]:
        out = s.runs_out_at(now, self.spend.rate_per_hour())
        fields: dict[str, Any] = {
            "budget_kind": s.budget.kind,
            "scope": s.budget.scope,
            "amount": json_amount(s.budget.amount_micro),
            # deprecated twin (docs/api.md, "Money keys"), as "spent_usd" below
            "amount_usd": json_amount(s.budget.amount_micro),
        }
        if s.spent_micro is not None:
            fields["spent"] = fields["spent_usd"] = json_amount(s.spent_micro)
        if out is not None:
            fields["runs_out_at"] = iso(out)
        return fields

    # -- at the budget ------------------------------------------------------------------

    async def enforce(self, event: Enforce) -> ActionRecord:
        """Save → export → act (:mod:`.enforce`); the record of what was done."""
        return await self.enforcer.enforce(event)

    def acknowledge(
        self, request_id: str, client: str, saved: list[str], failed: list[str]
    ) -> bool:
        """A browser's answer to the save request."""
        return self.saves.acknowledge(request_id, client, saved, failed)

    async def _record(self, record: ActionRecord) -> None:
        self.actions = [*self.actions, record]
        self._dirty = True
        await self._persist()
        if self.action_sink is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, self.action_sink, record
                )
            except Exception as e:
                self.log.warning("jupyter-gpucost: the budget action is not in the ledger: %s", e)

    def _forget(self, at: str) -> None:
        """Drop the provisional record of the action taken at ``at``."""
        self.actions = [a for a in self.actions if a.at != at]

    async def _persist(self) -> None:
        if self.store is None:
            self._dirty = False
            return
        state = StoredState(
            soft=self.policy.soft,
            fired={k: sorted(v) for k, v in self.policy.snapshot_fired().items()},
            actions=list(self.actions),
        )
        self._dirty = False
        try:
            await asyncio.get_running_loop().run_in_executor(self._writer, self.store.save, state)
        except OSError as e:
            self.log.warning("jupyter-gpucost: could not write %s: %s", self.store.path, e)

    # -- the user's side ----------------------------------------------------------------

    async def set_soft(self, budget: Budget | None) -> None:
        if budget is not None and not self.spend.supports(budget.scope):
            raise BudgetError(
                _(
                    "a {scope} budget needs the ledger (today/month totals), which this "
                    "server does not have: use the session scope"
                ).format(scope=budget.scope)
            )
        if budget is None:
            self.policy.set_soft(None)
        else:
            spent, period = self.spend.spent(budget.scope)
            self.policy.set_soft(
                budget,
                spent_micro=spent,
                period=period,
                rate_per_hour=self.spend.rate_per_hour(),
            )
        self._dirty = True
        await self.tick()
        await self._persist()

    def stop_now(self) -> bool:
        return self.policy.stop_now(self.clock())

    def request_stop(self, reason: str, action: str | None) -> bool:
        """The user's "Stop machine"/"Stop server", or the end of a cell they asked to stop
        after: the countdown, save, export and action of a spent budget."""
        now = self.clock()
        started = self.policy.request_stop(now, reason, action)
        if started is None:
            return False
        self._announce(started, now)
        self._dirty = True
        return True

    def stop_when_idle(self, action: str | None) -> None:
        """Stop (countdown, save, export, action) once no kernel is busy: when the running
        cells or training runs have ended, finished or failed."""
        self._after_busy = (action,)

    def cancel_stop(self) -> bool:
        """Cancel the user's own countdown, or the wait for idle kernels."""
        waiting, self._after_busy = self._after_busy is not None, None
        if not (self.policy.cancel_stop() or waiting):
            return False
        self.events.emit("cleared", messages.cleared(messages.YOU_CANCELLED))
        return True

    def _stop_if_done(self) -> None:
        if self._after_busy is None or self.kernel_manager is None:
            return
        if not busy_kernels(self.kernel_manager):
            (action,) = self._after_busy
            self._after_busy = None
            self.request_stop("done", action)

    def seen(self, client: str | None) -> None:
        """A browser polled the budget: it is expected to answer save requests."""
        self.saves.seen(client)

    # -- what the API shows -------------------------------------------------------------

    def payload(self) -> dict[str, object]:
        request = self.saves.request
        config = self.config
        idle = None
        if config.idle_minutes > 0:
            idle = IdleView(
                minutes=config.idle_minutes, action=config.idle_action, idle_s=self._idle.so_far_s()
            )
        document = budget_payload(
            BudgetView(
                now=self.clock(),
                rate_per_hour=self.spend.rate_per_hour(),
                standings=self.standings(),
                policy=self.policy,
                action=config.action,
                save_request_id=None if request is None else request.id,
                scopes=[s for s in SCOPES if self.spend.supports(s)],
                idle=idle,
                last_action=self.actions[-1] if self.actions else None,
                events=self.events.recent,
                hub=self.hub,
                currency_symbol=config.currency_symbol,
            )
        )
        # waiting for the busy kernels to end before a stop the user asked for
        document["stop_when_idle"] = (
            None if self._after_busy is None else {"action": self._after_busy[0] or config.action}
        )
        interruption = self.interruption()
        document["interruption"] = interruption
        current = None if interruption is None else interruption.get("current")
        if (
            current
            and request is not None
            and not any(s["name"] == "save" for s in current["steps"])
        ):
            # a spot interruption's save: pages that poll see it as they see a budget's
            document["save_request"] = {"id": request.id}
        return document

    def action_log(self) -> list[dict[str, object]]:
        """This session's actions, newest first, as the API shows them."""
        return [record_json(a) for a in reversed(self.actions)]
