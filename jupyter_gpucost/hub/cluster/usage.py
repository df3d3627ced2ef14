"""GPU use per server from the cluster's Prometheus: each poll asks what dcgm-exporter saw
over the window since the last answer, joins it to the running servers by pod name,
publishes it on the service (``service.activity[key]["dcgm"]``), splits each server's
allocation over the window into used, idle and unknown, and keeps that in the ledger.

Prometheus down, slow or answering garbage changes nothing of what is billed (the
allocation, as always): the window stays unclassified while Prometheus may still answer
for it (up to ``max_window_s``), then counts as unknown; the admin page says since when
Prometheus is unreachable. Queries are asynchronous with a bounded time; the ledger is
written in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Protocol

from ...core.billing import BillingRule
from ...core.wire import ClusterUse, ServerUsageJson, UsageJson
from ..accounting import allocated_micro_usd, day_of
from ..activity import ActivitySource, GpuActivity, UserServer
from ..ledger.placement import Placement, PlacementLedger
from ..ledger.usage import UsageDelta, UsageLedger, UsageTotals
from ..model import ServerRow
from .dcgm import (
    UTIL,
    Disagreement,
    Seen,
    Split,
    activities,
    disagreement,
    idle_energy_j,
    queries,
    split,
)
from .placement import read_placements
from .promanswer import Vector
from .prometheus import PrometheusError
from .settings import ClusterSettings

log = logging.getLogger("jupyter_gpucost.hub")

#: polls in a row a server's report must disagree with DCGM before it is flagged
FLAG_AFTER_POLLS = 2
#: deltas kept for the ledger while it refuses them (a day of polls of 100 servers)
MAX_PENDING = 150_000


class Readings(Protocol):
    """The servers' own reports as readings (:class:`~..idle.report_reading.ReportReadings`)."""

    def knows(self, key: UserServer) -> bool: ...

    def over(self, key: UserServer, start: datetime, end: datetime) -> GpuActivity | None: ...


class ServiceState(Protocol):
    """What the poll reads and publishes of the service (:class:`~..service.HubService`):
    its running servers, and each one's GPU activity by source."""

    @property
    def rows(self) -> Mapping[UserServer, ServerRow]: ...

    @property
    def activity(self) -> dict[UserServer, dict[ActivitySource, GpuActivity]]: ...

    @property
    def readings(self) -> Readings: ...


class QueryClient(Protocol):
    """:class:`~.prometheus.Prometheus`, as the poll uses it."""

    shown: str

    async def query(self, promql: str, at: datetime) -> Vector: ...


@dataclass(frozen=True)
class ClusterStatus:
    """Where the service stands with Prometheus (the admin page shows it)."""

    url: str
    #: the last poll that got an answer
    ok_at: datetime | None = None
    #: since when no poll got one (None while it answers)
    down_since: datetime | None = None
    error: str | None = None
    #: series the last answer held that were refused (out of range, too many GPUs)
    refused: int = 0


@dataclass
class Tracked:
    """One running server session, as the poll follows it."""

    row: ServerRow
    #: its allocation is split up to here (from its start)
    until: datetime
    seen: Seen | None = None
    #: the last disagreement flagged, and how many polls in a row disagreed
    flag: Disagreement | None = None
    streak: int = 0


class ClusterUsage:
    """The poll of the cluster's Prometheus, and what it learned."""

    def __init__(
        self,
        settings: ClusterSettings,
        client: QueryClient,
        ledger: UsageLedger,
        *,
        billing: BillingRule,
        tz: tzinfo,
        max_gpus: int,
        placement: PlacementLedger | None = None,
    ) -> None:
        self.settings = settings
        #: where each session's node is kept (None: not kept)
        self.placement = placement
        self.client = client
        self.ledger = ledger
        self.billing = billing
        self.tz = tz
        self.max_gpus = max(1, max_gpus)
        self.status = ClusterStatus(client.shown)
        self.tracked: dict[int, Tracked] = {}
        self._logged_down = False
        #: what the ledger could not take yet (written with the next poll's)
        self._pending: list[UsageDelta] = []

    # -- one poll -------------------------------------------------------------------------

    async def poll(self, service: ServiceState, now: datetime) -> None:
        """Ask Prometheus about the window since the last answer; never raises for
        Prometheus (its failures are the status); the ledger's errors are the caller's."""
        rows = dict(service.rows)
        new = [r.server_id for r in rows.values() if r.server_id not in self.tracked]
        known = await asyncio.to_thread(self.ledger.untils, new) if new else {}
        self._follow(rows, known)
        window_s = self._window(now)
        pods = {
            (self.settings.namespace, self.settings.pods.pod_name(key.user, key.server_name)): key
            for key in rows
        }
        try:
            answers = await self._ask(window_s, now)
        except PrometheusError as e:
            deltas = self._down(service, now, str(e))
        else:
            # thousands of series to sort and join: off the event loop
            seen, refused = await asyncio.to_thread(
                activities, answers, pods, at=now, window_s=window_s, max_gpus=self.max_gpus
            )
            deltas = self._split(service, rows, seen, refused, now, window_s)
            # not while Prometheus is down: a poll waits for it once, not thrice
            await self._place(rows, pods, now)
        deltas = self._pending + deltas
        self._pending = []
        if deltas:
            try:
                await asyncio.to_thread(self.ledger.add, deltas)
            except Exception:
                # written at the next poll (the split has moved on: nothing is split twice)
                self._pending = deltas[-MAX_PENDING:]
                raise

    async def _place(
        self,
        rows: Mapping[UserServer, ServerRow],
        pods: Mapping[tuple[str, str], UserServer],
        now: datetime,
    ) -> None:
        """Keep the node each server runs on (for the reconciliation with the bill): a
        failure is logged, never the poll's."""
        if self.placement is None or not rows:
            return
        try:
            found = await read_placements(self.client, self.settings.namespace, pods, now)
        except PrometheusError as e:
            log.debug("the servers' nodes are not known: %s", e)
            return
        placements = [
            Placement(rows[key].server_id, key[0], node, provider_id, now, kind)
            for key, (node, provider_id, kind) in found.items()
            if key in rows
        ]
        if not placements:
            return
        try:
            await asyncio.to_thread(self.placement.record, placements)
        except Exception:
            log.exception("the servers' nodes could not be kept in the ledger")

    def _follow(self, rows: Mapping[UserServer, ServerRow], known: Mapping[int, datetime]) -> None:
        running = {row.server_id: row for row in rows.values()}
        for server_id in list(self.tracked):
            if server_id not in running:
                del self.tracked[server_id]
        for server_id, row in running.items():
            if server_id not in self.tracked:
                # from its start, or where an earlier process of the service left it
                self.tracked[server_id] = Tracked(
                    row, max(row.started, known.get(server_id, row.started))
                )

    def _window(self, now: datetime) -> float:
        oldest = min((t.until for t in self.tracked.values()), default=now)
        span = (now - oldest).total_seconds()
        return min(max(span, self.settings.interval_s, 1.0), self.settings.max_window_s)

    async def _ask(self, window_s: float, now: datetime) -> dict[str, Vector]:
        asked = queries(self.settings.namespace, window_s)
        names = list(asked)
        results = await asyncio.gather(
            *(self.client.query(asked[n], now) for n in names), return_exceptions=True
        )
        answers: dict[str, Vector] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, Vector):
                answers[name] = result
            elif name == UTIL:
                # utilisation is what the split needs: without it the poll failed
                if isinstance(result, PrometheusError):
                    raise result
                raise PrometheusError(f"{self.client.shown}: {type(result).__name__}")
        return answers

    def _down(self, service: ServiceState, now: datetime, why: str) -> list[UsageDelta]:
        status = self.status
        self.status = ClusterStatus(
            status.url, status.ok_at, status.down_since or now, why, status.refused
        )
        if not self._logged_down:
            log.error("GPU use from the cluster is unknown: %s", why)
            self._logged_down = True
        # a copy: the poll's sync may drop a stopped server's entry meanwhile (a thread)
        for kinds in list(service.activity.values()):
            kinds.pop("dcgm", None)
        # time older than any later answer could cover is unknown for good
        oldest = now - timedelta(seconds=self.settings.max_window_s)
        deltas = []
        for tracked in self.tracked.values():
            tracked.seen = None
            if tracked.until < oldest:
                deltas.extend(self._classify(tracked, oldest, None, None))
        return deltas

    def _split(
        self,
        service: ServiceState,
        rows: Mapping[UserServer, ServerRow],
        seen: Mapping[UserServer, Seen],
        refused: int,
        now: datetime,
        window_s: float,
    ) -> list[UsageDelta]:
        if self.status.down_since is not None:
            log.warning(
                "Prometheus answers again (unreachable since %s)",
                self.status.down_since.isoformat(timespec="seconds"),
            )
        self._logged_down = False
        self.status = ClusterStatus(self.status.url, now, None, None, refused)
        start = now - timedelta(seconds=window_s)
        deltas = []
        for key, row in rows.items():
            tracked = self.tracked[row.server_id]
            found = seen.get(key)
            now_row = service.rows.get(key)
            if now_row is None or now_row.server_id != row.server_id:
                # stopped (or started again) while Prometheus answered: nothing is
                # published for a server that is gone (its entries went with it)
                tracked.seen = None
                continue
            kinds = service.activity.get(key) or {}
            if found is None:
                kinds.pop("dcgm", None)
            else:
                kinds = service.activity.setdefault(key, kinds)
                kinds["dcgm"] = found.activity
            tracked.seen = found
            if tracked.until < start:
                deltas.extend(self._classify(tracked, start, None, None))
            # the server's reports over the same window as DCGM's, not its last few
            # seconds; a reading another producer put on the activity map as it is
            report = (
                service.readings.over(key, start, now)
                if service.readings.knows(key)
                else kinds.get("report")
            )
            said = (
                disagreement(found.activity, report, self.settings.tolerance_pct) if found else None
            )
            # a burst that began within the window is not a lie: the disagreement must hold
            # over consecutive polls
            tracked.streak = tracked.streak + 1 if said else 0
            flag = said if tracked.streak >= FLAG_AFTER_POLLS else None
            if flag is not None:
                tracked.flag = flag
                if tracked.streak == FLAG_AFTER_POLLS:
                    log.warning(
                        "%s/%s: its report says %.0f %% GPU use, dcgm-exporter %.0f %%",
                        row.user,
                        row.server_name,
                        flag.report_pct,
                        flag.dcgm_pct,
                    )
            deltas.extend(self._classify(tracked, now, found.activity if found else None, flag))
        return deltas

    def _classify(
        self,
        tracked: Tracked,
        until: datetime,
        activity: GpuActivity | None,
        flag: Disagreement | None,
    ) -> list[UsageDelta]:
        """Split the allocation from ``tracked.until`` to ``until`` by ``activity``
        (None: unknown)."""
        row = tracked.row
        if until <= tracked.until:
            return []
        cost = allocated_micro_usd(row.rate, self.billing, row.started, until) - (
            allocated_micro_usd(row.rate, self.billing, row.started, tracked.until)
        )
        parts: Split = split(cost, activity, row.rate.allocation.count)
        energy = activity.energy_j if activity is not None and activity.energy_j else 0.0
        idle_energy = idle_energy_j(activity) if activity is not None else 0.0
        figures = UsageTotals(
            parts.used,
            parts.idle,
            parts.unknown,
            round(energy * 1000),
            round(idle_energy * 1000),
            1 if flag is not None else 0,
        )
        tracked.until = until
        return [UsageDelta(row.server_id, row.user, day_of(until, self.tz), figures, until)]

    # -- what the pages show --------------------------------------------------------------

    def admin(self, today: date) -> ClusterUse:
        """The admin page's part, as JSON (:func:`.views.admin_summary`): the status, each
        user's month, each running server."""
        status = self.status
        users = self.ledger.by_user(today)
        totals = self.ledger.by_server(self.tracked)
        servers: dict[str, ServerUsageJson] = {}
        for server_id, tracked in self.tracked.items():
            row = tracked.row
            seen = tracked.seen
            figures = totals.get(server_id, UsageTotals())
            servers[f"{row.user}/{row.server_name}"] = {
                **usage_json(figures),
                "seen": seen is not None,
                "gpu_util_pct": list(seen.activity.gpu_util_pct) if seen else [],
                "power_w": seen.activity.power_w if seen else None,
                "nodes": list(seen.nodes) if seen else [],
                "models": list(seen.models) if seen else [],
                "flag": flag_json(tracked.flag),
            }
        return {
            "url": status.url,
            "ok_at": _iso(status.ok_at),
            "down_since": _iso(status.down_since),
            "error": status.error,
            "refused": status.refused,
            "tolerance_pct": self.settings.tolerance_pct,
            "users": {user: usage_json(t) for user, t in users.items()},
            "servers": servers,
        }


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def usage_json(t: UsageTotals) -> UsageJson:
    return {
        "used_usd": t.used_micro_usd / 1_000_000,
        "idle_usd": t.idle_micro_usd / 1_000_000,
        "unknown_usd": t.unknown_micro_usd / 1_000_000,
        "used_micro_usd": t.used_micro_usd,
        "idle_micro_usd": t.idle_micro_usd,
        "unknown_micro_usd": t.unknown_micro_usd,
        "energy_wh": round(t.energy_mj / 3_600_000, 3),
        "idle_energy_wh": round(t.idle_energy_mj / 3_600_000, 3),
        "disagreements": t.disagreements,
    }


def flag_json(flag: Disagreement | None) -> dict[str, object] | None:
    if flag is None:
        return None
    return {"at": flag.at.isoformat(), "report_pct": flag.report_pct, "dcgm_pct": flag.dcgm_pct}
