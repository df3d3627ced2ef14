"""The idle policy's record in the hub ledger: stretches of idle GPUs, and the servers
reclaimed (``hub_idle_spans``).

What the admin page reads from it, over a period:

* **idle GPU-hours**: each span's idle time (every GPU idle, no kernel busy, as the service
  judged it) × the server's GPU count;
* **idle cost**: the same time × the server's hourly rate;
* **saved by reclaiming** (an estimate, labelled so): for each reclaimed server, its hourly
  rate × the time it stayed stopped: from the stop until its user started a server of the
  same name again, or until now, and at most :data:`SAVINGS_HORIZON_S` each. Time the user
  did not come back for is time the server would have been billed idle; the horizon keeps
  a server nobody would have left on for a week from counting a week.

Spans are queued in memory and written by the flush (in its thread).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...core.billing import rounded_cost_micro
from .schema import from_us, idle_spans_table, servers_table, to_us

#: the most one reclaim counts as saved (8 hours: a working day's evening)
SAVINGS_HORIZON_S = 8 * 3600

_t = idle_spans_table.c
_s = servers_table.c


@dataclass(frozen=True)
class IdleRecord:
    """One idle span of one server, as the ledger keeps it."""

    server_id: int
    user: str
    server_name: str
    profile: str | None
    started: datetime
    ended: datetime
    idle_us: int
    gpu_count: int
    usd_per_hour: Decimal
    #: "active", "reclaimed" or "gone"
    outcome: str


@dataclass(frozen=True)
class IdleSummary:
    """What idle GPUs cost and what reclaiming saved, over a period."""

    idle_gpu_us: int = 0
    idle_micro_usd: int = 0
    reclaimed: int = 0
    #: the estimate described in this module's docstring
    saved_micro_usd: int = 0
    #: the hourly rates of the reclaimed servers not started again
    freed_usd_per_hour: Decimal = Decimal(0)


class ReclaimStore:
    """The idle spans: queued by the loop, written by :meth:`flush`, read by the pages."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._pending: list[IdleRecord] = []

    def add(self, record: IdleRecord) -> None:
        with self._lock:
            self._pending.append(record)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    idle_spans_table.insert(),
                    [
                        {
                            "server_id": r.server_id,
                            "user_name": r.user,
                            "server_name": r.server_name,
                            "profile": r.profile,
                            "started_us": to_us(r.started),
                            "ended_us": to_us(r.ended),
                            "idle_us": r.idle_us,
                            "gpu_count": r.gpu_count,
                            "usd_per_hour": str(r.usd_per_hour),
                            "outcome": r.outcome,
                        }
                        for r in pending
                    ],
                )
        except Exception:
            with self._lock:  # kept for the next flush
                self._pending[:0] = pending
            raise

    def records(self, since: datetime) -> list[IdleRecord]:
        """Spans that ended from ``since`` on (written, then still queued)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(idle_spans_table).where(_t.ended_us >= to_us(since)).order_by(_t.id)
            ).mappings()
            found = [
                IdleRecord(
                    server_id=int(r["server_id"]),
                    user=str(r["user_name"]),
                    server_name=str(r["server_name"]),
                    profile=r["profile"],
                    started=from_us(r["started_us"]),
                    ended=from_us(r["ended_us"]),
                    idle_us=int(r["idle_us"]),
                    gpu_count=int(r["gpu_count"]),
                    usd_per_hour=Decimal(r["usd_per_hour"]),
                    outcome=str(r["outcome"]),
                )
                for r in rows
            ]
        with self._lock:
            found.extend(r for r in self._pending if r.ended >= since)
        return found

    def summary(self, since: datetime, now: datetime) -> IdleSummary:
        """Idle GPU time and cost, and what reclaiming saved, for spans ended since."""
        records = self.records(since)
        reclaimed = [r for r in records if r.outcome == "reclaimed"]
        restarts = self._restarts(reclaimed)
        saved = 0
        freed = Decimal(0)
        for r in reclaimed:
            again = next(
                (s for s in restarts.get((r.user, r.server_name), []) if s > r.ended), None
            )
            stopped_us = to_us(again or now) - to_us(r.ended)
            saved += rounded_cost_micro(
                r.usd_per_hour, max(0, min(stopped_us, SAVINGS_HORIZON_S * 10**6))
            )
            if again is None:
                freed += r.usd_per_hour
        return IdleSummary(
            idle_gpu_us=sum(r.idle_us * r.gpu_count for r in records),
            idle_micro_usd=sum(rounded_cost_micro(r.usd_per_hour, r.idle_us) for r in records),
            reclaimed=len(reclaimed),
            saved_micro_usd=saved,
            freed_usd_per_hour=freed,
        )

    def _restarts(self, reclaimed: list[IdleRecord]) -> dict[tuple[str, str], list[datetime]]:
        """When each reclaimed server's user started a server of its name again."""
        if not reclaimed:
            return {}
        first = min(r.ended for r in reclaimed)
        users = sorted({r.user for r in reclaimed})
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_s.user_name, _s.server_name, _s.started_us)
                .where(_s.user_name.in_(users), _s.started_us > to_us(first))
                .order_by(_s.started_us)
            ).all()
        out: dict[tuple[str, str], list[datetime]] = {}
        for user, name, started in rows:
            out.setdefault((str(user), str(name)), []).append(from_us(int(started)))
        return out
