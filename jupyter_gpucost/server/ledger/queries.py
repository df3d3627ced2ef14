"""Reading the ledger: totals for today / this month / all time, per-minute spend and GPU
minutes for the history of past windows, sessions, cells and budget actions.

Every read is the user's own when the ledger is opened for a user (``JUPYTERHUB_USER``):
on a ledger shared by several users' servers, one user's today, month, history, sessions,
cells and actions never include another's. Without a user (outside JupyterHub), every
session of the ledger counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, TypedDict

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import (
    actions_table,
    cells_table,
    gpu_minutes_table,
    minute_of,
    quarter_of,
    quarters_table,
    sessions_table,
    spend_table,
)


@dataclass(frozen=True)
class Totals:
    """Totals over the user's sessions (every session without a user), in micro-units of
    the session's currency."""

    today_micro: int
    month_micro: int
    all_time_micro: int


class SessionRow(TypedDict):
    """One session of the ledger (``LedgerReads.sessions``)."""

    id: str
    started_unix_s: float
    ended_unix_s: float | None
    last_unix_s: float
    #: in micro-units of the session's currency (the column is ``cost_micro_usd``)
    cost_micro: int


class LedgerReads:
    """The ledger's queries; :class:`~.ledger.Ledger` adds opening and writing."""

    tz: tzinfo | None
    #: whose rows are read (``None``: every session's)
    user: str | None = None

    def _reading(self) -> AbstractContextManager[Connection]:
        """A connection to read with (:class:`~.Ledger` turns a spell into
        :class:`~.opening.LedgerOffline`)."""
        raise NotImplementedError

    def _mine(self, session_id: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
        """Rows of the user's sessions (every row without a user)."""
        if self.user is None:
            return sa.true()
        c = sessions_table.c
        return session_id.in_(sa.select(c.id).where(c.user == self.user))

    def _my_sessions(self) -> sa.ColumnElement[bool]:
        c = sessions_table.c
        return sa.true() if self.user is None else c.user == self.user

    def _local(self, when: datetime) -> datetime:
        return when.astimezone(self.tz) if self.tz is not None else when.astimezone()

    def day_start(self, now: datetime) -> datetime:
        local = self._local(now)
        return local.replace(hour=0, minute=0, second=0, microsecond=0)

    def month_start(self, now: datetime) -> datetime:
        return self.day_start(now).replace(day=1)

    def totals(self, now: datetime, *, exclude_session: str | None = None) -> Totals:
        """Spend of the user's sessions (but ``exclude_session``) today, this month, all time."""
        day = quarter_of(self.day_start(now).timestamp())
        month = quarter_of(self.month_start(now).timestamp())
        q = quarters_table.c
        where = q.session_id != exclude_session if exclude_session else sa.true()
        recent = sa.select(
            sa.func.coalesce(
                sa.func.sum(sa.case((q.quarter_unix_s >= day, q.cost_micro_usd), else_=0)), 0
            ),
            sa.func.coalesce(sa.func.sum(q.cost_micro_usd), 0),
        ).where(where & (q.quarter_unix_s >= month) & self._mine(q.session_id))
        c = sessions_table.c
        everything = sa.select(sa.func.coalesce(sa.func.sum(c.cost_micro_usd), 0)).where(
            (c.id != exclude_session if exclude_session else sa.true()) & self._my_sessions()
        )
        with self._reading() as conn:
            today, month_total = conn.execute(recent).one()
            all_time = conn.execute(everything).scalar_one()
        return Totals(int(today), int(month_total), int(all_time))

    def sessions_spend_before(self, session_ids: Iterable[str], unix_s: float) -> dict[str, int]:
        """What each of these sessions spent in the minutes before ``unix_s`` (one query)."""
        ids = sorted(set(session_ids))
        if not ids:
            return {}
        s = spend_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(s.session_id, sa.func.sum(s.cost_micro_usd))
                .where(
                    s.session_id.in_(ids)
                    & (s.minute_unix_s < minute_of(unix_s))
                    & self._mine(s.session_id)
                )
                .group_by(s.session_id)
            ).all()
        spent = {sid: 0 for sid in ids}
        spent.update({str(sid): int(total or 0) for sid, total in rows})
        return spent

    def spend_between(self, start_s: float, end_s: float) -> list[tuple[int, int, int]]:
        """(minute, cost, rate) summed over the user's sessions, for minutes in [start, end)."""
        s = spend_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(
                    s.minute_unix_s,
                    sa.func.sum(s.cost_micro_usd),
                    sa.func.sum(s.rate_micro_usd_per_hour),
                )
                .where(
                    (s.minute_unix_s >= minute_of(start_s))
                    & (s.minute_unix_s < end_s)
                    & self._mine(s.session_id)
                )
                .group_by(s.minute_unix_s)
                .order_by(s.minute_unix_s)
            ).all()
        return [(int(m), int(c), int(r)) for m, c, r in rows]

    def session_spend_between(
        self, start_s: float, end_s: float
    ) -> list[tuple[int, str, int, int]]:
        """(minute, session, cost, rate) per session, for minutes in [start, end)."""
        s = spend_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(
                    s.minute_unix_s, s.session_id, s.cost_micro_usd, s.rate_micro_usd_per_hour
                )
                .where(
                    (s.minute_unix_s >= minute_of(start_s))
                    & (s.minute_unix_s < end_s)
                    & self._mine(s.session_id)
                )
                .order_by(s.minute_unix_s, s.session_id)
            ).all()
        return [(int(m), str(i), int(c), int(r)) for m, i, c, r in rows]

    def gpu_minutes_between(
        self, start_s: float, end_s: float
    ) -> list[tuple[int, int, float, float, int, int | None]]:
        """(minute, gpu, utilisation sum, power sum, samples, memory max)."""
        g = gpu_minutes_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(
                    g.minute_unix_s,
                    g.gpu_index,
                    sa.func.sum(g.utilization_pct_sum),
                    sa.func.sum(g.power_w_sum),
                    sa.func.sum(g.samples),
                    sa.func.max(g.memory_used_bytes_max),
                )
                .where(
                    (g.minute_unix_s >= minute_of(start_s))
                    & (g.minute_unix_s < end_s)
                    & self._mine(g.session_id)
                )
                .group_by(g.minute_unix_s, g.gpu_index)
                .order_by(g.minute_unix_s, g.gpu_index)
            ).all()
        return [(int(m), int(i), float(u), float(p), int(n), x) for m, i, u, p, n, x in rows]

    def sessions(self, limit: int = 20) -> list[SessionRow]:
        c = sessions_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(c.id, c.started_unix_s, c.ended_unix_s, c.last_unix_s, c.cost_micro_usd)
                .where(self._my_sessions())
                .order_by(c.started_unix_s.desc())
                .limit(limit)
            ).all()
        return [
            {
                "id": r.id,
                "started_unix_s": r.started_unix_s,
                "ended_unix_s": r.ended_unix_s,
                "last_unix_s": r.last_unix_s,
                "cost_micro": int(r.cost_micro_usd),
            }
            for r in rows
        ]

    def days(self, now: datetime, count: int = 31) -> list[tuple[date, int]]:
        """Spend per local day, for the last ``count`` days (oldest first)."""
        first = self.day_start(now) - timedelta(days=count - 1)
        rows = self.spend_between(first.timestamp(), now.timestamp() + 60)
        per_day: dict[date, int] = {}
        for minute, cost, _rate in rows:
            day = self._local(datetime.fromtimestamp(minute, UTC)).date()
            per_day[day] = per_day.get(day, 0) + cost
        return sorted(per_day.items())

    def actions(self, limit: int = 50) -> list[dict[str, object]]:
        """Budget actions, newest first, each with its session id."""
        c = actions_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(c.record, c.session_id)
                .where(self._mine(c.session_id))
                .order_by(c.at.desc(), c.id.desc())
                .limit(limit)
            ).all()
        return [{**dict(r.record), "session_id": r.session_id} for r in rows]

    def recent_cells(self, limit: int = 50) -> list[dict[str, object]]:
        c = cells_table.c
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(c.record, c.session_id)
                .where(self._mine(c.session_id))
                .order_by(c.ended.desc(), c.id.desc())
                .limit(limit)
            ).all()
        return [{**dict(r.record), "session_id": r.session_id} for r in rows]
