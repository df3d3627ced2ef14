"""The service's core, free of tornado: what it does each poll, with each report, and on
each flush.

Each poll, the Hub's running servers open (or keep) their rows in the hub ledger at the
:class:`Rate` of their allocation, and servers the Hub no longer lists are closed where the
service last saw them. A server the Hub is still stopping (``pending: "stop"``: a process
that ignores SIGTERM takes the spawner's whole signal sequence) is still listed, so it is
billed until it is gone, not until the stop was asked. Then every running user's budgets
are weighed against the ledger's totals: once the money left of a server's budget lasts
the grace period at the rate it is spent, the server gets a ``stop_at`` when it runs out
(:mod:`.enforcer`; kept in the ledger: a restart gives no new grace), and a server past its
``stop_at`` is stopped through the Hub API, whatever the server does.

Reports come in with the user the Hub named for the report's token: a report is kept only
for that user's server of the same name, and the ledger never lets it lower the bill.

The poll's :meth:`HubService.sync` walks every server (tens of milliseconds at 1,000), so
:meth:`HubService.poll` runs it in a worker thread: reports keep being answered on the
event loop meanwhile. The sync never changes a mapping the loop may be reading: it builds
the new ``rows``, ``state``, ``servers``, ``groups_of`` and totals beside the old ones and
puts each in place whole. What reports change too (each server's GPU activity, its report
readings, the idle clocks) is changed under :attr:`HubService.lock`, one server at a time,
so a report waits for at most one server's step, never the whole sync.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ..core.hub_protocol import IDLE_STOP_REASON, HubBudget, HubReply, SpendReport, StopKind
from ..core.refusal import Refusal
from .activity import ActivitySource, GpuActivity, UserServer
from .allowance.book import AllowanceBook
from .budgets import HubBudgetPolicy
from .enforcer import HubEnforcer, Plan, pooled_rates, server_key, weighed
from .idle.reclaim import Reclaimer
from .idle.report_reading import ReportReadings
from .ledger.reconciled import ReconciledLedger
from .model import (
    GroupTotals,
    HubClient,
    HubConfigError,
    HubLedgerApi,
    HubLedgerDown,
    Rate,
    ServerInfo,
    ServerRow,
    UserTotals,
    pooled,
)

if TYPE_CHECKING:
    from .cluster.usage import ClusterUsage

log = logging.getLogger("jupyter_gpucost.hub")

#: how long before a server the service asked the Hub to stop is asked again
RETRY_STOP_S = 30.0
#: how often every user's groups are listed (the running ones' come with each poll)
GROUPS_EVERY_S = 300.0


@dataclass
class ServerStanding:
    """One running server's budgets after the last poll."""

    row: ServerRow
    session_micro_usd: int = 0
    budgets: tuple[HubBudget, ...] = ()
    stop_at: datetime | None = None
    reason: str | None = None
    plan: Plan | None = None  # the figures behind ``reason`` (None: kept over a restart)


@dataclass
class PollResult:
    opened: int = 0
    closed: int = 0
    stopped: list[UserServer] = field(default_factory=list)
    seconds: float = 0.0


def _between(told: datetime | None, last_seen: datetime, now: datetime) -> datetime:
    """The Hub's stop time, never before what the ledger last saw nor after now."""
    return last_seen if told is None else min(max(told, last_seen), now)


class HubService:
    """The hub ledger, the allocation's rates, the budgets and the grace clock, together."""

    def __init__(
        self,
        ledger: HubLedgerApi,
        rate_for: Callable[[ServerInfo], Rate],
        budgets: HubBudgetPolicy,
        enforcer: HubEnforcer,
        reclaimer: Reclaimer | None = None,
        allowances: AllowanceBook | None = None,
    ) -> None:
        self.ledger = ledger
        self.allowances = allowances or AllowanceBook.off()
        #: held, one server at a time, by what reports and the poll both change: the GPU
        #: activity, the report readings and the idle clocks
        self.lock = threading.Lock()
        self.rate_for = rate_for
        self.budgets = budgets
        self.enforcer = enforcer
        self.rows: dict[UserServer, ServerRow] = {
            UserServer(row.user, row.server_name): row for row in ledger.running()
        }
        # a grace period that began before a restart ends when it would have
        kept = ledger.deadlines()
        #: the idle policy (None: never reclaimed)
        self.reclaim = reclaimer
        for row in self.rows.values():
            if row.server_id in kept:
                since, stop_at, reason = kept[row.server_id]
                if reason != IDLE_STOP_REASON:
                    enforcer.restore(server_key(row), since, stop_at, reason)
                elif reclaimer is not None and reclaimer.enabled:
                    reclaimer.restore(row, since, stop_at)
                else:  # the idle policy is off now: no stop for idle GPUs
                    ledger.clear_deadline(row.server_id)
        #: when each running server was last seen in the Hub's list (this process)
        self.seen: dict[UserServer, datetime] = {}
        self.state: dict[int, ServerStanding] = {}
        self.totals: dict[str, UserTotals] = {}
        self.group_totals: dict[str, GroupTotals] = {}
        #: what each user's and each group's running servers cost together (last poll)
        self.rates = pooled_rates((), {})
        self.groups_of: dict[str, tuple[str, ...]] = {}
        self.servers: dict[UserServer, ServerInfo] = {}
        self._asked_stop: dict[int, float] = {}
        self._bad_profiles: set[str] = set()
        self._groups_listed = -GROUPS_EVERY_S
        #: stops asked of the Hub and not answered yet (the Hub may take its time)
        self._stopping: set[asyncio.Task[None]] = set()
        self.last_poll: datetime | None = None
        self.last_poll_s: float = 0.0
        # -- GPU activity ------------------------------------------------------------------
        #: what each running server's GPUs did lately, newest per source ("dcgm": the
        #: cluster's Prometheus, :mod:`.cluster.usage`; "report": the server's own
        #: reports); a server's entries go when it stops
        self.activity: dict[UserServer, dict[ActivitySource, GpuActivity]] = {}
        self.readings = ReportReadings()
        #: the poll of the cluster's Prometheus, when c.GpuCostHub.prometheus_url is set
        self.cluster: ClusterUsage | None = None
        #: the cloud's bill as reconciled (:mod:`.reconcile`), shown beside the estimates
        self.billed: ReconciledLedger | None = None

    # -- each poll ----------------------------------------------------------------------

    def sync(
        self,
        servers: Sequence[ServerInfo],
        now: datetime,
        stopped_at: Mapping[UserServer, datetime] | None = None,
    ) -> PollResult:
        """Take the Hub's list of servers: open, keep and close ledger rows; weigh budgets.
        Returns what changed; :meth:`due` says what to stop. ``stopped_at``: when the Hub
        says servers stopped that this process never saw run (:meth:`_stop_times`).

        Safe to run in a worker thread while the event loop takes reports and serves pages
        (see the module's docstring); not twice at once."""
        started = time.perf_counter()
        result = PollResult()
        listed: dict[UserServer, ServerInfo] = {}
        present: dict[UserServer, ServerInfo] = {}
        running_groups: dict[str, tuple[str, ...]] = {}
        for server in servers:
            running_groups[server.user] = server.groups
            present[UserServer(server.user, server.server_name)] = server
            if server.ready:
                listed[UserServer(server.user, server.server_name)] = server
        groups_of = self._merge_groups(running_groups)
        state = dict(self.state)
        for key, row in list(self.rows.items()):
            # still starting or still stopping is still running: billed until gone
            still = present.get(key)
            if still is None or still.started != row.started:
                # gone (or restarted): billed up to where it was last seen running, and no
                # report is taken for it from here on
                stopped = self.seen.get(key) or _between(
                    (stopped_at or {}).get(key), row.last_seen, now
                )
                with self.lock:
                    rows = dict(self.rows)
                    del rows[key]
                    self.rows = rows
                self.ledger.close_server(row.server_id, max(stopped, row.started))
                if self.enforcer.deadline(server_key(row)) is not None:
                    log.info("%s/%s is gone; billed until %s", row.user, row.server_name, stopped)
                self.enforcer.forget(server_key(row))
                with self.lock:
                    if self.reclaim is not None:
                        self.reclaim.forget(row, stopped)
                    self.activity.pop(key, None)
                    self.readings.forget(key)
                state.pop(row.server_id, None)
                self._asked_stop.pop(row.server_id, None)
                self.seen.pop(key, None)
                result.closed += 1
        opened: dict[UserServer, ServerRow] = {}
        for key, server in listed.items():
            if key not in self.rows:
                rate = self._rate(server)
                if rate is None:
                    continue
                opened[key] = self.ledger.open_server(server, rate)
                result.opened += 1
        if opened:
            with self.lock:
                self.rows = {**self.rows, **opened}
        rows = self.rows
        for key in rows:
            self.seen[key] = now
        self.servers = {k: present[k] for k in rows if k in present}
        totals = self.ledger.all_totals(now)
        self.totals = totals
        # the groups' pools from the same totals: no second walk of every running server
        self.group_totals = self._group_totals(groups_of, totals)
        self.rates = pooled_rates(rows.values(), groups_of)
        self.allowances.refresh(rows.values(), groups_of, self.ledger, now)
        for row in rows.values():
            self._weigh(row, now, state)
            with self.lock:
                self._idle_tick(row, now)
        self.state = state
        self.last_poll = now
        result.seconds = self.last_poll_s = time.perf_counter() - started
        return result

    def _merge_groups(self, groups: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """``groups_of`` with ``groups`` in it, put in place whole (pages may be reading the
        old one); every writer merges under the lock, so none loses another's."""
        with self.lock:
            self.groups_of = {**self.groups_of, **groups}
            return self.groups_of

    def learn_groups(self, user: str, groups: tuple[str, ...]) -> None:
        """A user's groups, as the Hub named them for a request, where none are known."""
        with self.lock:
            if user not in self.groups_of:
                self.groups_of = {**self.groups_of, user: groups}

    def _rate(self, server: ServerInfo) -> Rate | None:
        try:
            return self.rate_for(server)
        except HubConfigError as e:
            profile = server.profile or ""
            if profile not in self._bad_profiles:
                self._bad_profiles.add(profile)
                log.error("%s/%s is not billed: %s", server.user, server.server_name, e)
            return None

    def _group_totals(
        self, groups_of: dict[str, tuple[str, ...]], totals: dict[str, UserTotals]
    ) -> dict[str, GroupTotals]:
        """The pooled spend of every group with a budget (members as the Hub listed them),
        from every user's ``totals`` (:meth:`HubLedgerApi.all_totals`, at the same instant
        as the ledger's :meth:`~HubLedgerApi.group_totals` would sum them)."""
        known = {g for groups in groups_of.values() for g in groups}
        budgeted = self.budgets.budgeted_groups(known)
        if not budgeted:
            return {}
        members: dict[str, list[str]] = {g: [] for g in budgeted}
        for user, groups in groups_of.items():
            for group in groups:
                if group in members:
                    members[group].append(user)
        return pooled(members, totals)

    def _weigh(self, row: ServerRow, now: datetime, state: dict[int, ServerStanding]) -> None:
        totals = self.totals.get(row.user) or UserTotals(row.user, 0, 0)
        session = totals.sessions_micro_usd.get(row.server_id, 0)
        budgets = tuple(self.budgets_for(row.user, session))
        key = server_key(row)
        before = self.enforcer.deadline(key)
        caps = weighed(row, budgets, self.rates) + self.allowances.weighed(row)
        deadline = self.enforcer.update(key, caps, now)
        if deadline != before:
            if deadline is None:
                self.ledger.clear_deadline(row.server_id)
            else:
                self.ledger.save_deadline(
                    row.server_id, deadline.since, deadline.stop_at, deadline.reason
                )
        state[row.server_id] = ServerStanding(
            row,
            session,
            budgets,
            deadline.stop_at if deadline else None,
            deadline.reason if deadline else None,
            deadline.plan if deadline else None,
        )

    def _idle_tick(self, row: ServerRow, now: datetime) -> None:
        """The idle policy's clock for one server, its warning kept in the ledger."""
        if self.reclaim is None or not self.reclaim.enabled:
            return
        key = UserServer(row.user, row.server_name)
        self.reclaim.tick(row, self.servers.get(key), self.activity.get(key), now)
        self.reclaim.persist(
            row,
            self.enforcer.deadline(server_key(row)) is not None,
            self.ledger.save_deadline,
            self.ledger.clear_deadline,
        )

    def budgets_for(self, user: str, session_micro_usd: int = 0) -> list[HubBudget]:
        """The user's budgets and where they stand (a running session's, or a new one's)."""
        return self.budgets.standings(
            user,
            self.groups_of.get(user, ()),
            session_micro_usd,
            self.totals.get(user) or UserTotals(user, 0, 0),
            self.group_totals,
        )

    def due(self, now: datetime) -> list[ServerRow]:
        """Servers past their ``stop_at`` the Hub has not been asked to stop just now."""
        clock = time.monotonic()
        found = []
        for deadline in self.enforcer.due(now):
            user, server_name, started = deadline.key
            row = self.rows.get(UserServer(user, server_name))
            if row is None or row.started != started:
                continue
            if clock - self._asked_stop.get(row.server_id, -RETRY_STOP_S) < RETRY_STOP_S:
                continue
            self._asked_stop[row.server_id] = clock
            found.append(row)
        return found

    def idle_due(self, now: datetime) -> list[ServerRow]:
        """Servers warned for idle GPUs, past their ``stop_at`` and still idle."""
        if self.reclaim is None:
            return []
        clock = time.monotonic()
        found = []
        with self.lock:
            for warning in self.reclaim.due(now):
                row = self.rows.get(warning.key)
                if row is None:
                    continue
                if clock - self._asked_stop.get(row.server_id, -RETRY_STOP_S) < RETRY_STOP_S:
                    continue  # asked to stop just now (for its budget)
                self._asked_stop[row.server_id] = clock
                self.reclaim.reclaimed(row, now)
                found.append(row)
        return found

    async def poll(self, hub: HubClient, now: Callable[[], datetime]) -> PollResult:
        """One round: list, sync, stop what is due. Errors of the Hub are the caller's."""
        grouped = self.budgets.groups or self.allowances.policy.settings.groups
        if time.monotonic() - self._groups_listed >= GROUPS_EVERY_S and grouped:
            self._merge_groups(await hub.groups_of_users())
            self._groups_listed = time.monotonic()
        servers = await hub.active_servers()
        told = await self._stop_times(hub, servers)
        # every server walked: off the event loop, so reports are answered meanwhile
        result = await asyncio.to_thread(self.sync, servers, now(), told)
        for row in self.due(now()):
            standing = self.state.get(row.server_id)
            why = (standing.reason if standing else None) or "a budget is spent"
            # the Hub answers a DELETE once the server stopped or after its
            # slow_stop_timeout: the next poll does not wait for it
            task = asyncio.ensure_future(self._stop(hub, row, why))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
            result.stopped.append(UserServer(row.user, row.server_name))
        for row in self.idle_due(now()):
            task = asyncio.ensure_future(self._stop(hub, row, "its GPUs are idle"))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
            result.stopped.append(UserServer(row.user, row.server_name))
        return result

    async def _stop_times(
        self, hub: HubClient, servers: Sequence[ServerInfo]
    ) -> dict[UserServer, datetime]:
        """When the Hub says each server stopped that is gone without this process having
        seen it run (it stopped while the service was down): its bill ends there."""
        present = {UserServer(s.user, s.server_name): s.started for s in servers}
        told: dict[UserServer, datetime] = {}
        for key, row in list(self.rows.items()):
            if key in self.seen or present.get(key) == row.started:
                continue
            try:
                when = await hub.stopped_at(*key)
            except Exception as e:  # billed up to its last_seen, as before
                log.warning("when did %s/%s stop? the Hub does not say: %s", *key, e)
                continue
            if when is not None:
                told[key] = when
        return told

    @staticmethod
    async def _stop(hub: HubClient, row: ServerRow, why: str) -> None:
        name = f"{row.user}/{row.server_name}" if row.server_name else row.user
        log.warning("stopping %s: %s", name, why)
        try:
            outcome = await hub.stop_server(row.user, row.server_name)
        except Exception as e:  # the next poll past the retry delay asks again
            log.error("stopping %s: %s", name, e)
            return
        log.warning("stopping %s: the Hub says %s", name, outcome)

    # -- reports ------------------------------------------------------------------------

    def report(self, user: str, report: SpendReport, now: datetime) -> HubReply:
        """Keep a report from ``user``'s server (the Hub named ``user`` for the token)."""
        key = UserServer(user, report.server_name)
        row = self.rows.get(key)
        try:
            if row is None:
                raise KeyError(key)
            self.ledger.add_report(row.server_id, report, now)
        except KeyError:
            # not running, or closed just now by the poll (a worker thread)
            label = report.server_name or "(default)"
            raise Refusal(
                f"server_name: {user} has no running server {label!r} the hub knows of", 409
            ) from None
        with self.lock:
            if self.rows.get(key) is row:  # not closed by the poll meanwhile
                # the report's reading: the idle policy's, and the cluster poll's (its
                # disagreement with DCGM), with or without an idle policy
                self.readings.take(self.activity, key, report, now)
                self._idle_tick(row, now)
        return self.reply(row)

    def reply(self, row: ServerRow) -> HubReply:
        """The hub's bill, budgets and ``stop_at`` for one running server (last poll)."""
        totals = self.totals.get(row.user) or UserTotals(row.user, 0, 0)
        standing = self.state.get(row.server_id) or ServerStanding(row)
        stop_at, reason = standing.stop_at, standing.reason
        kind: StopKind | None = None if stop_at is None else "budget"
        warning = None if self.reclaim is None else self.reclaim.warning(row)
        if warning is not None and (stop_at is None or warning.stop_at < stop_at):
            stop_at, reason, kind = warning.stop_at, IDLE_STOP_REASON, "idle"
        return HubReply(
            user=row.user,
            session_micro_usd=standing.session_micro_usd,
            today_micro_usd=totals.today_micro_usd,
            month_micro_usd=totals.month_micro_usd,
            budgets=standing.budgets,
            stop_at=stop_at,
            reason=reason,
            stop_kind=kind,
            ledger_unreachable_since=self.ledger.unreachable_since(),
            allowances=self.allowances.reply(row.user),
        )

    # -- flush and shutdown -------------------------------------------------------------

    def flush(self, now: datetime) -> None:
        try:
            self.ledger.flush(now)
        except HubLedgerDown:
            return  # kept in memory; the ledger logged the spell once
        if self.reclaim is not None:
            self.reclaim.flush()

    def close(self, now: datetime) -> None:
        """Flush what is pending and close the ledger (servers stay open: still running)."""
        try:
            self.ledger.flush(now)
            if self.reclaim is not None:
                self.reclaim.flush()
        except HubLedgerDown as e:
            log.error(
                "the ledger cannot be reached at stop (%s): what came since its last flush is "
                "not written; the next start bills a server that stopped meanwhile up to when "
                "the Hub says it stopped",
                e,
            )
        except Exception:
            log.exception("the last flush failed")
        finally:
            self.ledger.close()
