"""The spot interruptions servers reported, in the hub ledger (``hub_interruptions``).

A user owns their server process, so what it reports is a claim: the count and the cost
since the last checkpoint are shown on the admin page, never subtracted from or added to a
bill. Each interruption carries the server's stable id; the ledger keeps one row per user
and id, the first report's, so that the same interruption sent in every report (and again
by the next session) counts once, and one user's ids never touch another's.

Reports queue interruptions in memory (:meth:`InterruptionStore.add`, on the event loop:
no I/O); :meth:`InterruptionStore.flush` writes the new ones in the flush's thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...core.hub_protocol import ReportedInterruption
from ..model import InterruptionTotals
from .queries import _exact_sum, _joined
from .schema import interruptions_table, to_us

#: (user, id) pairs remembered as written, so that repeats are dropped before the database
SEEN_LIMIT = 100_000
#: pending interruptions at most (a flood is dropped, never grows memory without bound)
PENDING_LIMIT = 10_000
#: new interruptions taken from one user in one day (UTC) at most: a real machine is
#: interrupted a few times a day; forged ids past this are dropped, not stored
USER_DAY_LIMIT = 100

_t = interruptions_table.c


class InterruptionStore:
    """The reported interruptions: queued by reports, written by :meth:`flush`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], tuple[str, ReportedInterruption, int]] = {}
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: new interruptions taken per user on ``_day``
        self._taken: dict[str, int] = {}
        self._day = ""
        #: users told of (logged) as over the day's limit, today
        self.over_limit: set[str] = set()

    def add(
        self,
        user: str,
        server_name: str,
        items: tuple[ReportedInterruption, ...],
        received: datetime,
    ) -> bool:
        """Queue what a report of ``user``'s says (the first report of an id wins).
        ``True`` when this report took ``user`` over today's limit (to log once)."""
        if not items:
            return False
        received_us = to_us(received)
        day = received.date().isoformat()
        with self._lock:
            if day != self._day:
                self._day, self._taken, self.over_limit = day, {}, set()
            for item in items:
                key = (user, item.interruption_id)
                if key in self._seen or key in self._pending:
                    continue
                taken = self._taken.get(user, 0)
                if len(self._pending) >= PENDING_LIMIT or taken >= USER_DAY_LIMIT:
                    first = user not in self.over_limit
                    self.over_limit.add(user)
                    return first
                self._taken[user] = taken + 1
                self._pending[key] = (server_name, item, received_us)
        return False

    def flush(self) -> None:
        """Write the queued interruptions not in the ledger yet (one transaction)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            with self.engine.begin() as conn:
                known = self._known(conn, list(pending))
                rows = [
                    {
                        "user_name": user,
                        "interruption_id": ident,
                        "server_name": server_name,
                        "at_us": to_us(item.at),
                        "received_us": received_us,
                        "provider": item.provider,
                        "market": item.market,
                        "lost_micro_usd": item.lost_micro_usd,
                        "session_micro_usd": item.session_micro_usd,
                    }
                    for (user, ident), (server_name, item, received_us) in pending.items()
                    if (user, ident) not in known
                ]
                if rows:
                    conn.execute(interruptions_table.insert(), rows)
        except Exception:
            with self._lock:  # kept for the next flush (newer reports do not replace them)
                self._pending = {**self._pending, **pending}
            raise
        with self._lock:
            for key in pending:
                self._seen[key] = None
            while len(self._seen) > SEEN_LIMIT:
                self._seen.popitem(last=False)

    @staticmethod
    def _known(conn: sa.Connection, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        by_user: dict[str, list[str]] = {}
        for user, ident in keys:
            by_user.setdefault(user, []).append(ident)
        for user, idents in by_user.items():
            for start in range(0, len(idents), 500):
                chunk = idents[start : start + 500]
                rows = conn.execute(
                    sa.select(_t.interruption_id).where(
                        _t.user_name == user, _t.interruption_id.in_(chunk)
                    )
                ).all()
                found.update((user, str(r[0])) for r in rows)
        return found

    def by_user(self, since: datetime) -> dict[str, InterruptionTotals]:
        """Each user's interruptions from ``since`` on, and what they lost (written, then
        still queued)."""
        since_us = to_us(since)
        with self._lock:
            queued = [(key, item) for key, (_, item, _) in self._pending.items()]
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_t.user_name, sa.func.count(), *_exact_sum(_t.lost_micro_usd, "lost"))
                .where(_t.at_us >= since_us)
                .group_by(_t.user_name)
            ).all()
            # queued ones already written (sent again after the service restarted)
            known = self._known(conn, [key for key, _ in queued])
        out = {str(u): InterruptionTotals(int(n), _joined(d, m)) for u, n, d, m in rows}
        for (user, ident), item in queued:
            if (user, ident) not in known and to_us(item.at) >= since_us:
                t = out.get(user, InterruptionTotals())
                out[user] = InterruptionTotals(t.count + 1, t.lost_micro_usd + item.lost_micro_usd)
        return out
