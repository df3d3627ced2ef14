"""The budget controller: runs the policy on the event loop and carries out what it says.

Once a second (a coroutine on the server's event loop: it only reads the sampler's latest
snapshot, and file writes go to a thread) it asks the policy what happened, pushes
threshold/grace/save/action events on jupyter_server's event bus (the browser listens on
``/api/events/subscribe``), and at the end of the grace period runs, in order:

1. **save**: asks every connected JupyterLab to save its notebooks with unsaved changes
   and waits (at most ``save_timeout_s``) for each to acknowledge;
2. **export**: the checkpoint export hook (``export_hook``), a logged no-op unless set;
3. **act**: interrupt or shut down the kernels, or stop the server;

and records what it did (``<data dir>/gpucost/budget.json``; shown by the status API).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from tornado.ioloop import IOLoop

from ..billing import to_usd
from .actions import (
    HubTarget,
    ask_hub_to_stop,
    busy_kernels,
    interrupt_kernels,
    shutdown_kernels,
)
from .policy import (
    Budget,
    BudgetError,
    BudgetPolicy,
    Enforce,
    GraceCleared,
    GraceStarted,
    PolicyEvent,
    Scope,
    Standing,
    ThresholdCrossed,
)
from .store import BudgetStore, StoredState

EVENT_SCHEMA_ID = "https://events.jupyter-gpucost.org/budget/v1"
EVENT_SCHEMA_PATH = Path(__file__).with_name("event.yaml")
#: a browser that asked within this many seconds is expected to acknowledge a save request
CLIENT_TTL_S = 20.0
TICK_S = 1.0


def usd(micro_usd: int) -> float:
    return float(to_usd(micro_usd))


def money(micro_usd: int, symbol: str = "$") -> str:
    return f"{symbol}{Decimal(micro_usd) / Decimal(1_000_000):.2f}"


def iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat().replace("+00:00", "Z")


class SpendSource(Protocol):
    """What was spent in a scope: micro-dollars (``None``: not known) and its period key."""

    def spent(self, scope: Scope) -> tuple[int | None, str]: ...

    def rate_usd_per_hour(self) -> Decimal: ...

    def supports(self, scope: Scope) -> bool: ...


class ServiceSpend:
    """Session spend from the meter; day/month from the ledger when the service has one.

    Day and month come, in this order, from ``service.spent_micro_usd(scope)`` or from
    ``service.recorder.totals(snapshot)`` (``today_micro_usd``/``month_micro_usd``, kept in
    memory by the ledger's recorder: no database query per tick). The period key follows
    the ledger's own day (its time zone) when it has ``day_start``/``month_start``.
    """

    def __init__(self, service: Any) -> None:
        self.service = service

    def _ledger(self) -> Any:
        return getattr(self.service, "ledger", None)

    def _method(self) -> Any:
        method = getattr(self.service, "spent_micro_usd", None)
        if callable(method):
            return method
        recorder = getattr(self.service, "recorder", None)
        totals = getattr(recorder, "totals", None)
        if callable(totals):

            def from_recorder(scope: str) -> int | None:
                live = totals(self.service.sampler.latest.snapshot)
                if live is None:
                    return None
                return int(live.today_micro_usd if scope == "day" else live.month_micro_usd)

            return from_recorder
        return None

    def supports(self, scope: Scope) -> bool:
        return scope == "session" or (self._ledger() is not None and self._method() is not None)

    def session_id(self) -> str:
        sid = getattr(self.service, "session_id", None)
        if isinstance(sid, str) and sid:
            return sid
        return self.service.sampler.latest.snapshot.started.isoformat()

    def _period(self, scope: Scope, now: datetime) -> str:
        ledger = self._ledger()
        start = getattr(ledger, "day_start" if scope == "day" else "month_start", None)
        now = start(now) if callable(start) else now.astimezone(UTC)
        return now.strftime("%Y-%m-%d") if scope == "day" else now.strftime("%Y-%m")

    def spent(self, scope: Scope) -> tuple[int | None, str]:
        snapshot = self.service.sampler.latest.snapshot
        if scope == "session":
            return snapshot.cost_micro_usd, self.session_id()
        period = self._period(scope, snapshot.as_of)
        method = self._method() if self._ledger() is not None else None
        if method is None:
            return None, period
        value = method(scope)
        return (None if value is None else int(value)), period

    def rate_usd_per_hour(self) -> Decimal:
        return Decimal(self.service.sampler.latest.snapshot.rate_usd_per_hour)


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


@dataclass
class SaveRequest:
    id: str
    started: float
    expected: set[str]
    acks: dict[str, dict[str, Any]]
    #: set when every expected browser has answered
    done: asyncio.Event = field(default_factory=asyncio.Event)
    #: how many pages listened on the event bus when it was sent (they are not named:
    #: pages name themselves only when they poll, while their event socket is down)
    pages: int = 0


class BudgetController:
    def __init__(
        self,
        config: BudgetConfig,
        spend: SpendSource,
        *,
        kernel_manager: Any = None,
        event_logger: Any = None,
        stop_server: Callable[[], None] | None = None,
        gpu_utilization: Callable[[], list[float | None]] | None = None,
        log: logging.Logger | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.config = config
        self.spend = spend
        self.kernel_manager = kernel_manager
        self.event_logger = event_logger
        self.stop_server = stop_server
        self.gpu_utilization = gpu_utilization
        self.log = log or logging.getLogger("jupyter_gpucost")
        self.clock = clock
        self.policy = BudgetPolicy(
            hard=config.hard, thresholds_pct=config.thresholds_pct, grace_s=config.grace_s
        )
        self.store = BudgetStore(config.state_path, log=self.log) if config.state_path else None
        self.actions: list[dict[str, Any]] = []
        self.clients: dict[str, float] = {}
        self.save_request: SaveRequest | None = None
        #: checkpoint export before the action: ``async () -> str | None``
        self.export_hook: Callable[[], Awaitable[str | None]] | None = None
        #: where each action is kept besides the state file (the ledger): ``(record) -> None``
        self.action_sink: Callable[[dict[str, Any]], None] | None = None
        self.recent_events: list[dict[str, Any]] = []
        #: how many pages listen on the event bus (set by the app; see status_events)
        self.listening_pages: Callable[[], int] = lambda: 0
        self._idle_since: float | None = None
        self._idle_warned = False
        self._task: asyncio.Task[None] | None = None
        self._enforcing: asyncio.Task[None] | None = None
        self._dirty = False
        # one writer thread; not anyio's worker threads, which are not daemons and keep
        # the process alive when the loop ends without cleanup (SIGINT from JupyterHub)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpucost-budget")

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

    def register_events(self) -> None:
        if self.event_logger is not None and EVENT_SCHEMA_ID not in self.event_logger.schemas:
            self.event_logger.register_event_schema(EVENT_SCHEMA_PATH)

    def start(self) -> None:
        self.load()
        self.register_events()
        self._task = asyncio.ensure_future(self._run(), loop=IOLoop.current().asyncio_loop)  # type: ignore[attr-defined]

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
            await asyncio.sleep(TICK_S)

    # -- one step -----------------------------------------------------------------------

    def standings(self) -> list[Standing]:
        out = []
        for budget in self.policy.budgets():
            spent, period = self.spend.spent(budget.scope)
            out.append(Standing(budget, spent, period))
        return out

    def _idle_for_s(self) -> float | None:
        if self.config.idle_minutes <= 0 or self.gpu_utilization is None:
            return None
        utilizations = self.gpu_utilization()
        costing = self.spend.rate_usd_per_hour() > 0
        quiet = bool(utilizations) and all(
            u is not None and u <= self.config.idle_utilization_pct for u in utilizations
        )
        busy = bool(self.kernel_manager is not None and busy_kernels(self.kernel_manager))
        if costing and quiet and not busy:
            if self._idle_since is None:
                self._idle_since = time.monotonic()
            return time.monotonic() - self._idle_since
        self._idle_since = None
        self._idle_warned = False
        return 0.0

    async def tick(self) -> list[PolicyEvent]:
        now = self.clock()
        idle_for = self._idle_for_s()
        limit = self.config.idle_minutes * 60 if self.config.idle_minutes > 0 else None
        over = idle_for is not None and limit is not None and idle_for >= limit
        if over and not self._idle_warned:
            self._idle_warned = True
            self.emit(
                "idle",
                f"The GPUs have been idle for {self.config.idle_minutes:g} minutes while "
                "costing money"
                + (
                    ": the kernels will be stopped unless you use them."
                    if self.config.idle_action == "act"
                    else "."
                ),
                reason="idle",
            )
        act_on_idle = self.config.idle_action == "act"
        events = self.policy.evaluate(
            now,
            self.standings(),
            idle_for_s=idle_for if act_on_idle else None,
            idle_limit_s=limit if act_on_idle else None,
            kernels_running=bool(
                self.kernel_manager is not None and list(self.kernel_manager.list_kernel_ids())
            ),
        )
        for event in events:
            self._announce(event, now)
        if any(isinstance(e, ThresholdCrossed) for e in events):
            self._dirty = True
        if self._dirty:
            await self._persist()
        return events

    def _announce(self, event: PolicyEvent, now: datetime) -> None:
        rate = self.spend.rate_usd_per_hour()
        sym = self.config.currency_symbol
        if isinstance(event, ThresholdCrossed):
            s = event.standing
            out = s.runs_out_at(now, rate)
            when = f"; at the current rate it runs out at {out:%H:%M} UTC" if out else ""
            self.emit(
                "threshold",
                f"{event.threshold_pct}% of your {money(s.budget.amount_micro_usd, sym)} "
                f"{_scope_name(s.budget)} is spent{when}.",
                threshold_pct=event.threshold_pct,
                **self._budget_fields(s, now),
            )
        elif isinstance(event, GraceStarted):
            if event.standing is not None:
                what = (
                    f"Your {money(event.standing.budget.amount_micro_usd, sym)} "
                    f"{_scope_name(event.standing.budget)} is spent."
                )
                fields = self._budget_fields(event.standing, now)
            else:
                what = "The GPUs have been idle while costing money."
                fields = {}
            self.emit(
                "grace",
                f"{what} Notebooks will be saved and the {_action_name(self.config.action)} "
                f"in {self.config.grace_s:g} s.",
                grace_ends=iso(event.ends),
                grace_s=self.config.grace_s,
                action=self.config.action,
                reason=event.reason,
                **fields,
            )
        elif isinstance(event, GraceCleared):
            self.emit("cleared", f"Countdown stopped: {event.why}.")
        elif isinstance(event, Enforce):
            self._enforcing = asyncio.get_event_loop().create_task(self.enforce(event))

    def _budget_fields(self, s: Standing, now: datetime) -> dict[str, Any]:
        out = s.runs_out_at(now, self.spend.rate_usd_per_hour())
        fields: dict[str, Any] = {
            "budget_kind": s.budget.kind,
            "scope": s.budget.scope,
            "amount_usd": usd(s.budget.amount_micro_usd),
        }
        if s.spent_micro_usd is not None:
            fields["spent_usd"] = usd(s.spent_micro_usd)
        if out is not None:
            fields["runs_out_at"] = iso(out)
        return fields

    def emit(self, kind: str, message: str, **fields: Any) -> None:
        data = {"kind": kind, "message": message, **fields}
        self.log.info("jupyter-gpucost: budget %s: %s", kind, message)
        self.recent_events = [*self.recent_events[-19:], {"at": iso(self.clock()), **data}]
        if self.event_logger is None:
            return
        try:
            self.event_logger.emit(schema_id=EVENT_SCHEMA_ID, data=data)
        except Exception:
            self.log.exception("jupyter-gpucost: could not emit the budget event")

    # -- at the budget ------------------------------------------------------------------

    async def enforce(self, event: Enforce) -> dict[str, Any]:
        started = self.clock()
        saved = await self.request_save()
        exported = await self._export()
        record: dict[str, Any] = {
            "at": iso(started),
            "reason": event.reason,
            "action": self.config.action,
            "notebooks_saved": sum(len(a.get("saved", [])) for a in saved.values()),
            "save_failed": sorted({p for a in saved.values() for p in a.get("failed", [])}),
            "browsers": len(saved),
            "exported": exported,
        }
        if event.standing is not None:
            b = event.standing.budget
            record.update(
                budget_kind=b.kind,
                scope=b.scope,
                amount_usd=usd(b.amount_micro_usd),
                spent_usd=usd(event.standing.spent_micro_usd or 0),
            )
        if event.reason == "idle" and self.kernel_manager is not None:
            busy = busy_kernels(self.kernel_manager)
            if busy:
                # a kernel started working during the grace period: it is not idle
                record.update(result="skipped", detail=f"{len(busy)} kernel(s) busy")
                record["message"] = "idle stop skipped: a kernel is busy"
                self.policy._clear_grace()
                await self._record(record)
                self.emit("cleared", "Idle stop skipped: a kernel is busy.", reason="idle")
                return record
        record.update(await self._act(record))
        self.policy.acted()
        return record

    async def request_save(self) -> dict[str, dict[str, Any]]:
        """Ask the connected browsers to save; wait for their answers (bounded)."""
        now = time.monotonic()
        live = {c for c, seen in self.clients.items() if now - seen <= CLIENT_TTL_S}
        pages = self.listening_pages()
        request = SaveRequest(secrets.token_hex(8), now, live, {}, pages=pages)
        self.save_request = request
        self.emit(
            "save-request",
            "Saving open notebooks before the budget action.",
            request_id=request.id,
            action=self.config.action,
        )
        if not live and not pages:
            self.log.warning(
                "jupyter-gpucost: no browser is connected: edits not saved in a browser "
                "cannot be saved; files on disk are kept"
            )
            return {}
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(request.done.wait(), self.config.save_timeout_s)
        missing = live - set(request.acks)
        if missing:
            self.log.warning(
                "jupyter-gpucost: %d browser(s) did not confirm saving in %g s",
                len(missing),
                self.config.save_timeout_s,
            )
        return dict(request.acks)

    def acknowledge(
        self, request_id: str, client: str, saved: list[str], failed: list[str]
    ) -> bool:
        request = self.save_request
        if request is None or request.id != request_id:
            return False
        request.acks[client] = {"saved": saved, "failed": failed}
        # the pages that poll (expected, by name) and as many more as listen on the bus
        answered = set(request.acks)
        if request.expected <= answered and len(answered) >= len(request.expected) + request.pages:
            request.done.set()
        return True

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

    async def _act(self, record: dict[str, Any]) -> dict[str, Any]:
        action = self.config.action
        km = self.kernel_manager
        log = self.log
        summary = _summary(record, self.config.currency_symbol)
        if action == "interrupt":
            n = await interrupt_kernels(km, log) if km is not None else 0
            result = {
                "result": "done",
                "kernels": n,
                "message": f"{summary}; {n} kernel(s) interrupted",
            }
        elif action == "shutdown":
            n = await shutdown_kernels(km, log) if km is not None else 0
            result = {
                "result": "done",
                "kernels": n,
                "message": f"{summary}; {n} kernel(s) shut down",
            }
        else:
            result = await self._stop_server(record, summary)
        record.update(result)
        await self._record(record)
        self.emit("action", record["message"], action=action, reason=record["reason"])
        return result

    async def _stop_server(self, record: dict[str, Any], summary: str) -> dict[str, Any]:
        message = f"{summary}; server stopped"
        # kernels first: they hold the GPUs, and a server stopped by a signal from the
        # hub may not get to shut them down itself
        n = await shutdown_kernels(self.kernel_manager, self.log) if self.kernel_manager else 0
        hub = self.config.hub
        if hub is not None:
            # recorded first: the hub SIGTERMs this process while it handles the request
            await self._record(
                {**record, "result": "requested", "via": "jupyterhub", "message": message}
            )
            answer = await ask_hub_to_stop(hub)
            if answer.ok:
                self.log.warning("jupyter-gpucost: %s (budget)", answer.message)
                # the hub stops us; if it has not in a while, stop ourselves
                await asyncio.sleep(30)
                self.log.warning("jupyter-gpucost: JupyterHub did not stop the server: stopping it")
            else:
                self.log.error("jupyter-gpucost: %s; stopping the server itself", answer.message)
            self.actions = [a for a in self.actions if a.get("at") != record["at"]]
            via = "jupyterhub" if answer.ok else "self"
            hub_detail = answer.message
        else:
            via, hub_detail = "self", None
        if self.stop_server is not None:
            asyncio.get_event_loop().call_later(0.5, self.stop_server)
        return {"result": "done", "via": via, "kernels": n, "hub": hub_detail, "message": message}

    async def _record(self, record: dict[str, Any]) -> None:
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
                f"a {budget.scope} budget needs the ledger (today/month totals), which "
                "this server does not have: use the session scope"
            )
        if budget is None:
            self.policy.set_soft(None)
        else:
            spent, period = self.spend.spent(budget.scope)
            self.policy.set_soft(budget, spent_micro_usd=spent, period=period)
        self._dirty = True
        await self.tick()
        await self._persist()

    def stop_now(self) -> bool:
        return self.policy.stop_now(self.clock())

    def seen(self, client: str | None) -> None:
        if client:
            self.clients[client[:64]] = time.monotonic()
            if len(self.clients) > 100:
                oldest = sorted(self.clients, key=self.clients.__getitem__)[:-100]
                for c in oldest:
                    del self.clients[c]

    # -- what the API shows -------------------------------------------------------------

    def payload(self) -> dict[str, Any]:
        now = self.clock()
        rate = self.spend.rate_usd_per_hour()
        standings = self.standings()

        def one(s: Standing) -> dict[str, Any]:
            out = s.runs_out_at(now, rate)
            return {
                "kind": s.budget.kind,
                "locked": s.budget.locked,
                "scope": s.budget.scope,
                "amount_usd": usd(s.budget.amount_micro_usd),
                "spent_usd": None if s.spent_micro_usd is None else usd(s.spent_micro_usd),
                "remaining_usd": None
                if s.remaining_micro_usd is None
                else usd(max(0, s.remaining_micro_usd)),
                "share": None if s.share is None else round(s.share, 4),
                "runs_out_at": iso(out),
                "fired_pct": sorted(self.policy.fired.get(s.key, set())),
            }

        known = [s for s in standings if s.remaining_micro_usd is not None]
        binding = min(known, key=lambda s: s.remaining_micro_usd or 0) if known else None
        p = self.policy
        grace = None
        if p.state == "grace" and p.grace_ends is not None:
            grace = {
                "started": iso(p.grace_started),
                "ends": iso(p.grace_ends),
                "remaining_s": max(0.0, round((p.grace_ends - now).total_seconds(), 1)),
                "reason": p.grace_reason,
                "can_raise": binding is not None and binding.budget.kind == "soft",
            }
        request = self.save_request
        return {
            "state": p.state,
            "hard": next((one(s) for s in standings if s.budget.kind == "hard"), None),
            "soft": next((one(s) for s in standings if s.budget.kind == "soft"), None),
            "binding": None if binding is None else binding.budget.kind,
            "runs_out_at": None if binding is None else iso(binding.runs_out_at(now, rate)),
            "thresholds_pct": list(p.thresholds_pct),
            "grace_s": p.grace_s,
            "grace": grace,
            "action": self.config.action,
            "save_request": None
            if request is None or p.state != "enforcing"
            else {"id": request.id},
            "scopes": [s for s in ("session", "day", "month") if self.spend.supports(s)],  # type: ignore[arg-type]
            "idle": {
                "minutes": self.config.idle_minutes,
                "action": self.config.idle_action,
                "idle_s": None
                if self._idle_since is None
                else round(time.monotonic() - self._idle_since, 1),
            }
            if self.config.idle_minutes > 0
            else None,
            "last_action": self.actions[-1] if self.actions else None,
            "events": self.recent_events[-10:],
        }


def _scope_name(budget: Budget) -> str:
    who = "admin's" if budget.kind == "hard" else ""
    what = {"session": "session budget", "day": "daily budget", "month": "monthly budget"}[
        budget.scope
    ]
    return f"{who} {what}".strip()


def _action_name(action: str) -> str:
    return {
        "interrupt": "kernels interrupted",
        "shutdown": "kernels shut down",
        "stop-server": "server stopped",
    }.get(action, action)


def _summary(record: dict[str, Any], symbol: str) -> str:
    at = record["at"][11:16]
    if record.get("amount_usd") is not None:
        head = f"stopped at {symbol}{record['amount_usd']:.2f} budget at {at} UTC"
    else:
        head = f"stopped idle GPUs at {at} UTC"
    saved = record["notebooks_saved"]
    return f"{head}; {saved} notebook{'s' if saved != 1 else ''} saved"
