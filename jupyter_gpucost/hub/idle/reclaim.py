"""The idle policy at work in the service: the idle clock ticked each poll and each report
(each server's activity is the service's: :mod:`.report_reading`, :mod:`..cluster.usage`),
warnings kept in the ledger like a budget's grace deadline, and the idle spans recorded.

The service (:mod:`..service`) calls it; it knows nothing of tornado or of the Hub API.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from ...core.hub_protocol import IDLE_STOP_REASON
from ..activity import ActivitySource, GpuActivity, UserServer
from ..ledger.reclaims import IdleRecord, ReclaimStore
from ..model import ServerInfo, ServerRow
from .policy import STALE_S, HubIdleClock, IdlePolicy, IdleRule, IdleSpan, Judgement, Warning, judge
from .report_reading import report_activity

log = logging.getLogger("jupyter_gpucost.hub")

__all__ = ["IdleStanding", "Reclaimer", "report_activity"]


@dataclass(frozen=True)
class IdleStanding:
    """One server's idle standing, for the admin page."""

    rule: IdleRule | None
    idle_s: float
    warning: Warning | None
    judgement: Judgement
    #: GPUs idle by DCGM, kept up only by a kernel the server reports busy
    spared_by_kernel: bool
    dcgm_idle_s: float


class Reclaimer:
    """The idle policy applied to the service's running servers."""

    def __init__(
        self,
        policy: IdlePolicy,
        clock: HubIdleClock,
        store: ReclaimStore | None,
    ) -> None:
        self.policy = policy
        self.clock = clock
        self.store = store
        self._rules: dict[int, IdleRule | None] = {}
        self._judged: dict[UserServer, Judgement] = {}
        #: server_id → the stop_at of the idle warning kept in the ledger
        self.saved: dict[int, datetime] = {}
        #: how old a DCGM reading may be (set from the Prometheus poll's interval)
        self.dcgm_stale_s = STALE_S

    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    def rule(self, row: ServerRow, server: ServerInfo | None) -> IdleRule | None:
        if row.server_id not in self._rules:
            info = server or ServerInfo(row.user, row.server_name, row.started, True, row.profile)
            self._rules[row.server_id] = self.policy.rule_for(info)
        return self._rules[row.server_id]

    def tick(
        self,
        row: ServerRow,
        server: ServerInfo | None,
        sources: dict[ActivitySource, GpuActivity] | None,
        now: datetime,
    ) -> bool | None:
        """One server's idle clock; ``True``/``False`` when a warning was given/cleared."""
        key = UserServer(row.user, row.server_name)
        judgement = judge(sources or {}, now, dcgm_stale_s=self.dcgm_stale_s)
        tick = self.clock.tick(key, self.rule(row, server), judgement, now)
        # what the pages show is the clock's verdict (a bounded busy kernel is idle there)
        self._judged[key] = replace(judgement, verdict=self.clock.verdict(key))
        if tick.ended is not None:
            self._record(row, tick.ended)
        if tick.changed is True and tick.warning is not None:
            log.warning(
                "%s: GPUs idle with no kernel busy; warned, stopping at %s",
                _name(row),
                tick.warning.stop_at.isoformat(),
            )
        elif tick.changed is False:
            log.info("%s: active again; the idle warning is cleared", _name(row))
        return tick.changed

    def persist(
        self,
        row: ServerRow,
        budget_deadline: bool,
        save: Callable[[int, datetime, datetime, str], None],
        clear: Callable[[int], None],
    ) -> None:
        """Keep the server's warning in the ledger's deadline row, as a budget's grace is
        kept; a budget's deadline owns the row while there is one."""
        if budget_deadline:
            self.saved.pop(row.server_id, None)
            return
        warning = self.clock.warning(UserServer(row.user, row.server_name))
        kept = self.saved.get(row.server_id)
        if warning is not None and kept != warning.stop_at:
            save(row.server_id, warning.since, warning.stop_at, IDLE_STOP_REASON)
            self.saved[row.server_id] = warning.stop_at
        elif warning is None and kept is not None:
            clear(row.server_id)
            del self.saved[row.server_id]

    def restore(self, row: ServerRow, since: datetime, stop_at: datetime) -> None:
        self.clock.restore(UserServer(row.user, row.server_name), since, stop_at)
        self.saved[row.server_id] = stop_at

    def warning(self, row: ServerRow) -> Warning | None:
        return self.clock.warning(UserServer(row.user, row.server_name))

    def due(self, now: datetime) -> list[Warning]:
        return self.clock.due(now)

    def reclaimed(self, row: ServerRow, now: datetime) -> None:
        """The Hub is asked to stop it: its idle span ends, reclaimed."""
        span = self.clock.reclaimed(UserServer(row.user, row.server_name), now)
        if span is not None:
            self._record(row, span)

    def forget(self, row: ServerRow, now: datetime) -> None:
        key = UserServer(row.user, row.server_name)
        span = self.clock.forget(key, now)
        if span is not None:
            self._record(row, span)
        self._rules.pop(row.server_id, None)
        self._judged.pop(key, None)
        self.saved.pop(row.server_id, None)

    def view(self, row: ServerRow) -> IdleStanding:
        key = UserServer(row.user, row.server_name)
        return IdleStanding(
            rule=self._rules.get(row.server_id),
            idle_s=self.clock.idle_s(key),
            warning=self.clock.warning(key),
            judgement=self._judged.get(key) or Judgement("unknown"),
            spared_by_kernel=self.clock.spared_by_kernel(key),
            dcgm_idle_s=self.clock.dcgm_idle_s(key),
        )

    def flush(self) -> None:
        if self.store is not None:
            self.store.flush()

    def _record(self, row: ServerRow, span: IdleSpan) -> None:
        if self.store is None:
            return
        self.store.add(
            IdleRecord(
                server_id=row.server_id,
                user=row.user,
                server_name=row.server_name,
                profile=row.profile,
                started=span.started,
                ended=span.ended,
                idle_us=round(span.idle_s * 1_000_000),
                gpu_count=row.rate.allocation.count,
                usd_per_hour=row.rate.usd_per_hour,
                outcome=span.outcome,
            )
        )


def _name(row: ServerRow) -> str:
    return f"{row.user}/{row.server_name}" if row.server_name else row.user
